//! `shoal nodetool`: a running node's state and storage operations, through
//! its HTTP API (ScyllaDB's REST paths where it has them). Reports (status,
//! info, tablestats) are built from the node's `/metrics`, so they show
//! exactly what monitoring sees. Every answer is JSON (serde_json); what
//! a command puts in a path or a query is percent-encoded.

mod cluster;
mod report;
mod snapshots;

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
            println!(
                "repaired: {} range(s) of tables, {} partition(s) compared, {} differed ({} whole, {} row(s) in the \
                 others), {} cop(ies) written",
                r.ranges, r.partitions, r.differing, r.whole, r.rows, r.written
            );
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

/// What `POST /storage_service/repair` answers.
#[derive(serde::Deserialize)]
struct Repaired {
    ranges: usize,
    partitions: usize,
    differing: usize,
    whole: usize,
    rows: usize,
    written: usize,
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
