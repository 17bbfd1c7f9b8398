//! `shoal nodetool`: a running node's state and storage operations, through
//! its HTTP API (ScyllaDB's REST paths where it has them). Reports (status,
//! info, tablestats) are built from the node's `/metrics`, so they show
//! exactly what monitoring sees.

mod report;

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
        |tables: &[String]| if tables.is_empty() { String::new() } else { format!("?cf={}", tables.join(",")) };
    let keyspace_path = |k: &Option<String>| k.as_ref().map(|k| format!("/{k}")).unwrap_or_default();
    let (path, done) = match &args.command {
        NodetoolCommand::Status { keyspace } => return report::status(&api, &args.host, keyspace.as_deref()),
        NodetoolCommand::Info => return report::info(&api),
        NodetoolCommand::Tablestats { tables } => return report::tablestats(&api, tables),
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
            let kn = keyspace.as_ref().map(|k| format!("&kn={k}")).unwrap_or_default();
            println!("snapshot tag: {tag}");
            (format!("/storage_service/snapshots?tag={tag}{kn}"), "snapshot taken")
        }
        NodetoolCommand::Decommission => ("/storage_service/decommission".to_string(), "decommissioned"),
        NodetoolCommand::Drain => ("/storage_service/drain".to_string(), "drained"),
        NodetoolCommand::SetLoggingLevel { module: None, level: None } => {
            ("/system/logger?reset".to_string(), "logging levels reset")
        }
        NodetoolCommand::SetLoggingLevel { module: Some(module), level: Some(level) } => {
            (format!("/system/logger/{module}?level={level}"), "logging level set")
        }
        NodetoolCommand::GetLoggingLevels => {
            print!("{}", api.get("/system/logger")?);
            return Ok(());
        }
        NodetoolCommand::SetLoggingLevel { .. } => {
            return Err("setlogginglevel takes a module and a level, or nothing (to reset)".to_string())
        }
        NodetoolCommand::Cleanup { keyspace } => {
            (format!("/storage_service/keyspace_cleanup{}", keyspace_path(keyspace)), "cleaned up")
        }
        NodetoolCommand::Repair { keyspace } => {
            let answer = api.request("POST", &format!("/storage_service/repair{}", keyspace_path(keyspace)))?;
            print!("{answer}");
            return Ok(());
        }
        NodetoolCommand::Removenode { host_id } => {
            (format!("/storage_service/remove_node?host_id={host_id}"), "removed")
        }
    };
    api.request("POST", &path)?;
    println!("{done}");
    Ok(())
}

/// The node's HTTP API.
struct Api {
    address: String,
}

impl Api {
    /// Sends one request and returns the body of a 200 answer.
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
            Ok(body.to_string())
        } else {
            Err(format!("{}: {}", head.lines().next().unwrap_or_default(), body.trim()))
        }
    }

    fn get(&self, path: &str) -> Result<String, String> {
        self.request("GET", path)
    }
}
