//! `shoal nodetool`: a running node's state and storage operations, through
//! its HTTP API (ScyllaDB's REST paths where it has them). Reports (status,
//! info, tablestats) are built from the node's `/metrics`, so they show
//! exactly what monitoring sees. Every answer is JSON (serde_json); what
//! a command puts in a path or a query is percent-encoded.

mod cluster;
mod compactions;
mod report;
mod snapshots;
mod top_partitions;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct NodetoolArgs {
    /// The node's address
    #[arg(long, short = 'H', default_value = "127.0.0.1")]
    pub host: String,
    /// The node's HTTP API port
    #[arg(long, short = 'p', default_value_t = 10000)]
    pub api_port: u16,
    #[command(subcommand)]
    pub command: NodetoolCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum NodetoolCommand {
    /// The cluster's nodes: state, load, tokens, ownership, host id; with
    /// a keyspace, the share each node replicates for it ("Owns (effective)").
    Status { keyspace: Option<String> },
    /// This node: id, uptime, load, memory, requests.
    Info,
    /// Per-table statistics (cfstats): all tables, a keyspace's, or `ks.table`.
    #[command(alias = "cfstats")]
    Tablestats { tables: Vec<String> },
    /// Flush memtables to SSTables: all keyspaces, one keyspace, or some of its tables.
    Flush { keyspace: Option<String>, tables: Vec<String> },
    /// Major compaction: each table's SSTables into one.
    Compact { keyspace: Option<String>, tables: Vec<String> },
    /// Bring the replicas of every range this node holds in line: compare partition hashes, send what differs.
    Repair { keyspace: Option<String> },
    /// Drop the data of ranges this node no longer replicates (after a node joined).
    Cleanup { keyspace: Option<String> },
    /// Stream this node's data to the other nodes and leave the cluster; the node stops.
    Decommission,
    /// Stop serving clients and flush everything, leaving the commitlog
    /// clean (before a restart or an upgrade); the process keeps running,
    /// drained, until it is stopped.
    Drain,
    /// Set a module's log level at run time: `shoal_cluster debug`; no
    /// arguments: back to the levels the node started with.
    #[command(name = "setlogginglevel", alias = "setloglevel")]
    SetLoggingLevel {
        /// A module path (a tracing target), e.g. shoal_cluster::failure_detector
        module: Option<String>,
        /// off, error, warn, info, debug or trace
        level: Option<String>,
    },
    /// The log levels in force: the default (or RUST_LOG), then each module's (JSON).
    #[command(name = "getlogginglevels")]
    GetLoggingLevels,
    /// Remove a dead node from the cluster, streaming its ranges from the other replicas.
    Removenode {
        /// The dead node's host id (nodetool status lists it)
        host_id: String,
    },
    /// The ring: every token, its node's address, rack, status, state, load and share.
    Ring { keyspace: Option<String> },
    /// The cluster's name, snitch, partitioner and schema version.
    Describecluster,
    /// Each node's state as the failure detector and group 0 know it.
    Gossipinfo,
    /// The addresses of the replicas of a partition (a composite key's components separated by `:`).
    Getendpoints { keyspace: String, table: String, key: String },
    /// Every snapshot: tag, keyspace, table, true size (kept only by the snapshot), size on disk.
    Listsnapshots,
    /// Remove snapshots: of one tag (-t) or all, in the keyspaces named or all.
    Clearsnapshot {
        /// The snapshot's tag; without it, every snapshot
        #[arg(long, short = 't')]
        tag: Option<String>,
        keyspaces: Vec<String>,
    },
    /// Hard-link every SSTable into <table dir>/snapshots/<tag> (after a flush).
    Snapshot {
        /// Snapshot name [default: the current time in milliseconds]
        #[arg(long, short = 't')]
        tag: Option<String>,
        keyspace: Option<String>,
    },
    /// Compactions waiting (per table) and under way, with their progress.
    Compactionstats,
    /// Stop the compactions under way of a type: COMPACTION or CLEANUP.
    Stop {
        /// COMPACTION (the strategy's and major ones) or CLEANUP
        #[arg(value_name = "COMPACTION_TYPE")]
        kind: String,
    },
    /// Turn the compaction strategy on again for tables (all, a keyspace's, or some of its).
    #[command(name = "enableautocompaction")]
    EnableAutoCompaction { keyspace: Option<String>, tables: Vec<String> },
    /// Turn the compaction strategy off for tables (until enabled again or a restart); stops their compactions.
    #[command(name = "disableautocompaction")]
    DisableAutoCompaction { keyspace: Option<String>, tables: Vec<String> },
    /// The partitions most written and read during a sampling period.
    Toppartitions {
        keyspace: Option<String>,
        table: Option<String>,
        /// Sampling period in milliseconds
        duration: Option<u64>,
        /// The sampling period in milliseconds, when not given after the table
        #[arg(long, short = 'd', default_value_t = 5000)]
        duration_ms: u64,
        /// Partitions counted per shard (space-saving capacity)
        #[arg(short = 's', default_value_t = 256)]
        capacity: usize,
        /// Partitions listed
        #[arg(short = 'k', default_value_t = 10)]
        list_size: usize,
    },
    /// Load the SSTables in the table's upload/ directory, streaming each partition to its replicas.
    Refresh { keyspace: String, table: String },
    /// Take from the other replicas what this node lacks of the ranges it replicates.
    Rebuild {
        /// Not supported: rebuild takes from every replica
        source_dc: Option<String>,
    },
    /// The chance, from 0 to 1, that a request is traced (to system_traces) without asking.
    #[command(name = "settraceprobability")]
    SetTraceProbability { probability: f64 },
    /// The chance that a request is traced without asking.
    #[command(name = "gettraceprobability")]
    GetTraceProbability,
    /// The node's mode and the streams it sends.
    Netstats,
}

/// Runs the command; the error is for the user.
pub fn run(args: NodetoolArgs) -> Result<(), String> {
    let api = Api { address: format!("{}:{}", args.host, args.api_port) };
    let tables_query =
        |tables: &[String]| if tables.is_empty() { String::new() } else { format!("?cf={}", encode_list(tables)) };
    let keyspace_path = |k: &Option<String>| k.as_ref().map(|k| format!("/{}", encode(k))).unwrap_or_default();
    let (path, done) = match &args.command {
        NodetoolCommand::Status { keyspace } => return report::status(&api, &args.host, keyspace.as_deref()),
        NodetoolCommand::Info => return report::info(&api),
        NodetoolCommand::Tablestats { tables } => return report::tablestats(&api, tables),
        NodetoolCommand::Ring { keyspace } => return cluster::ring(&api, keyspace.as_deref()),
        NodetoolCommand::Describecluster => return cluster::describecluster(&api),
        NodetoolCommand::Gossipinfo => return cluster::gossipinfo(&api),
        NodetoolCommand::Getendpoints { keyspace, table, key } => {
            return cluster::getendpoints(&api, keyspace, table, key)
        }
        NodetoolCommand::Listsnapshots => return snapshots::list(&api),
        NodetoolCommand::Clearsnapshot { tag, keyspaces } => return snapshots::clear(&api, tag.as_deref(), keyspaces),
        NodetoolCommand::Compactionstats => return compactions::compactionstats(&api),
        NodetoolCommand::Stop { kind } => return compactions::stop(&api, kind),
        NodetoolCommand::EnableAutoCompaction { keyspace, tables } => {
            return compactions::set_auto(&api, keyspace.as_deref(), tables, true)
        }
        NodetoolCommand::DisableAutoCompaction { keyspace, tables } => {
            return compactions::set_auto(&api, keyspace.as_deref(), tables, false)
        }
        NodetoolCommand::Toppartitions { keyspace, table, duration, duration_ms, capacity, list_size } => {
            let table = match (keyspace, table) {
                (Some(keyspace), Some(table)) => Some((keyspace.as_str(), table.as_str())),
                (None, None) => None,
                _ => return Err("toppartitions takes a keyspace and a table, or neither".to_string()),
            };
            let duration_ms = duration.unwrap_or(*duration_ms);
            let sampling = top_partitions::Sampling { table, duration_ms, capacity: *capacity, list_size: *list_size };
            return top_partitions::run(&api, &sampling);
        }
        NodetoolCommand::Refresh { keyspace, table } => {
            let path = format!("/storage_service/sstables/{}?cf={}", encode(keyspace), encode(table));
            let loaded: Loaded = api.post_json(&path)?;
            println!(
                "loaded {} SSTable(s): {} partition(s) written to their replicas",
                loaded.sstables, loaded.partitions
            );
            return Ok(());
        }
        NodetoolCommand::Rebuild { source_dc } => {
            let query = source_dc.as_ref().map(|dc| format!("?source_dc={}", encode(dc))).unwrap_or_default();
            let r: Repaired = api.post_json(&format!("/storage_service/rebuild{query}"))?;
            println!("rebuilt: {}", r.summary());
            return Ok(());
        }
        NodetoolCommand::SetTraceProbability { probability } => {
            (format!("/storage_service/trace_probability?probability={probability}"), "trace probability set")
        }
        NodetoolCommand::GetTraceProbability => {
            let probability: f64 = api.json("/storage_service/trace_probability")?;
            println!("Current trace probability: {probability}");
            return Ok(());
        }
        NodetoolCommand::Netstats => return netstats(&api),
        NodetoolCommand::Flush { keyspace, tables } => {
            (format!("/storage_service/keyspace_flush{}{}", keyspace_path(keyspace), tables_query(tables)), "flushed")
        }
        NodetoolCommand::Compact { keyspace, tables } => (
            format!("/storage_service/keyspace_compaction{}{}", keyspace_path(keyspace), tables_query(tables)),
            "compacted",
        ),
        NodetoolCommand::Snapshot { tag, keyspace } => {
            let tag = tag.clone().unwrap_or_else(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                now.as_millis().to_string()
            });
            let kn = keyspace.as_ref().map(|k| format!("&kn={}", encode(k))).unwrap_or_default();
            println!("snapshot tag: {tag}");
            (format!("/storage_service/snapshots?tag={}{kn}", encode(&tag)), "snapshot taken")
        }
        NodetoolCommand::Decommission => ("/storage_service/decommission".to_string(), "decommissioned"),
        NodetoolCommand::Drain => ("/storage_service/drain".to_string(), "drained"),
        NodetoolCommand::SetLoggingLevel { module: None, level: None } => {
            ("/system/logger?reset".to_string(), "logging levels reset")
        }
        NodetoolCommand::SetLoggingLevel { module: Some(module), level: Some(level) } => {
            (format!("/system/logger/{}?level={}", encode(module), encode(level)), "logging level set")
        }
        NodetoolCommand::GetLoggingLevels => {
            let levels: serde_json::Value = api.json("/system/logger")?;
            println!("{levels}");
            return Ok(());
        }
        NodetoolCommand::SetLoggingLevel { .. } => {
            return Err("setlogginglevel takes a module and a level, or nothing (to reset)".to_string())
        }
        NodetoolCommand::Cleanup { keyspace } => {
            (format!("/storage_service/keyspace_cleanup{}", keyspace_path(keyspace)), "cleaned up")
        }
        NodetoolCommand::Repair { keyspace } => {
            let r: Repaired = api.post_json(&format!("/storage_service/repair{}", keyspace_path(keyspace)))?;
            println!("repaired: {}", r.summary());
            return Ok(());
        }
        NodetoolCommand::Removenode { host_id } => {
            (format!("/storage_service/remove_node?host_id={}", encode(host_id)), "removed")
        }
    };
    api.post_json::<serde_json::Value>(&path)?;
    println!("{done}");
    Ok(())
}

/// What `POST /storage_service/repair` (and `rebuild`) answers.
#[derive(serde::Deserialize)]
struct Repaired {
    ranges: usize,
    partitions: usize,
    differing: usize,
    whole: usize,
    rows: usize,
    written: usize,
}

impl Repaired {
    fn summary(&self) -> String {
        format!(
            "{} range(s) of tables, {} partition(s) compared, {} differed ({} whole, {} row(s) in the others), {} \
             cop(ies) written",
            self.ranges, self.partitions, self.differing, self.whole, self.rows, self.written
        )
    }
}

/// What `POST /storage_service/sstables/<keyspace>` answers.
#[derive(serde::Deserialize)]
struct Loaded {
    sstables: usize,
    partitions: u64,
}

/// A load-and-stream under way, as `GET /stream_manager/` lists it.
#[derive(serde::Deserialize)]
struct Stream {
    description: String,
    sstables: usize,
}

/// `netstats`: the node's mode, then the streams it sends (Cassandra's
/// first two parts; Shoal keeps no read repair or message pool counters).
fn netstats(api: &Api) -> Result<(), String> {
    let mode: String = api.json("/storage_service/operation_mode")?;
    let streams: Vec<Stream> = api.json("/stream_manager/")?;
    println!("Mode: {mode}");
    if streams.is_empty() {
        println!("Not sending any streams.");
    }
    for stream in streams {
        println!("{}", stream.description);
        println!("    Sending {} files to the replicas of their partitions", stream.sstables);
    }
    Ok(())
}

/// Prints rows as Cassandra's nodetool tables: each column as wide as its
/// widest cell, one space between columns.
fn print_table<R: AsRef<[String]>>(rows: &[R]) {
    let columns = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.as_ref().get(c)).map(String::len).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> =
            row.as_ref().iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        println!("{}", cells.join(" ").trim_end());
    }
}

fn encode(text: &str) -> String {
    shoal_http::percent_encode(text)
}

/// Names for a query parameter that lists them, comma-separated.
fn encode_list(names: &[String]) -> String {
    names.iter().map(|n| encode(n)).collect::<Vec<_>>().join(",")
}

/// The node's HTTP API.
struct Api {
    address: String,
}

impl Api {
    /// Sends one request and returns the body of a 200 answer; another
    /// answer is an error with its JSON error's message.
    fn request(&self, method: &str, path: &str) -> Result<String, String> {
        let address = &self.address;
        let fail = |e: std::io::Error| format!("cannot reach the node's API at {address}: {e}");
        let mut stream = TcpStream::connect(address).map_err(fail)?;
        // Flushes and compactions of big tables take a while.
        stream.set_read_timeout(Some(Duration::from_secs(3600))).map_err(fail)?;
        write!(stream, "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .map_err(fail)?;
        let mut response = String::new();
        stream.read_to_string(&mut response).map_err(fail)?;
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        if head.starts_with("HTTP/1.1 200") {
            return Ok(body.to_string());
        }
        let error: Option<ApiError> = serde_json::from_str(body).ok();
        let message = error.map_or_else(|| body.trim().to_string(), |e| e.message);
        Err(format!("{}: {message}", head.lines().next().unwrap_or_default()))
    }

    fn get(&self, path: &str) -> Result<String, String> {
        self.request("GET", path)
    }

    /// A GET's JSON answer, parsed.
    fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, String> {
        parse(path, &self.get(path)?)
    }

    /// A POST's JSON answer, parsed.
    fn post_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, String> {
        parse(path, &self.request("POST", path)?)
    }

    /// A DELETE's JSON answer, parsed.
    fn delete_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, String> {
        parse(path, &self.request("DELETE", path)?)
    }
}

/// The API's error answer.
#[derive(serde::Deserialize)]
struct ApiError {
    message: String,
}

fn parse<T: serde::de::DeserializeOwned>(path: &str, body: &str) -> Result<T, String> {
    serde_json::from_str(body).map_err(|e| format!("bad answer from {path}: {e}"))
}
