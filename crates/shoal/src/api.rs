//! The HTTP API on `--api-port`, under ScyllaDB's REST paths where it has
//! one:
//! - `GET /metrics`: Prometheus text, gathered from every shard's registry;
//! - `GET /storage_service/hostid/local`, `GET /storage_service/cluster_name`
//!   (JSON strings), `GET /system/uptime_ms` (a number): node identity for
//!   `nodetool status` and `info`;
//! - `GET /gossiper/endpoint/live`, `GET /gossiper/endpoint/down`: JSON
//!   arrays of the addresses of nodes up (this node first) and down: the
//!   failure detector's view, a member counted up once shard 0's topology
//!   took it in; `GET /storage_service/host_id`: every known
//!   node's host id (`[{"key": address, "value": host id}]`);
//!   `GET /storage_service/load_map`: this node's load and each peer's as
//!   its last ping answer told (`[{"key": address, "value": bytes}]`);
//!   `GET /storage_service/tokens`: this node's tokens;
//!   `GET /storage_service/ownership/<keyspace>`: the share of the ring
//!   each node replicates for the keyspace (`[{"key": address, "value":
//!   share}]`, nodetool status's "Owns (effective)");
//!   `GET /snitch/datacenter`, `GET /snitch/rack`: this node's place;
//! - `GET /raft/leader_host`: group 0's leader's host id (JSON string, or
//!   null); `GET /raft/group0`: its term, leader and members (address,
//!   host id, dc, rack, token count, share of the ring they own; JSON);
//! - `POST /storage_service/keyspace_flush[/<keyspace>][?cf=t1,t2]`
//! - `POST /storage_service/keyspace_compaction[/<keyspace>][?cf=t1,t2]`
//! - `POST /storage_service/snapshots?tag=<tag>[&kn=<keyspace>]`
//! - `POST /storage_service/drain`: stops serving clients, flushes, leaves
//!   the commitlog clean (`shutdown`); `GET
//!   /storage_service/operation_mode`: `"NORMAL"`, `"DRAINING"` or
//!   `"DRAINED"`;
//! - `GET /system/logger`: the log levels in force; `POST
//!   /system/logger/<module>?level=<level>`: a module's level from now on;
//!   `POST /system/logger?reset`: the levels of the start (`logging`);
//! - `POST /storage_service/decommission`, `POST
//!   /storage_service/remove_node?host_id=<uuid>`, `POST
//!   /storage_service/repair[/<keyspace>]`, `POST
//!   /storage_service/keyspace_cleanup[/<keyspace>]`: node operations,
//!   answered when done
//!
//! A deliberately small HTTP/1.1 server: one request per connection, bounded
//! request size, no body. Metrics are gathered from every shard by message
//! when scraped, so shards keep plain shard-local values.

use std::sync::OnceLock;
use std::time::Instant;

use shoal_coordinator::cluster::node;
use shoal_runtime::net::{AsyncRead, AsyncWriteExt, BufResult, TcpListener, TcpStream};
use shoal_runtime::{nr_shards, submit_to};

/// Longest request head we read; anything longer is refused.
const REQUEST_BYTES_MAX: usize = 8 * 1024;

static STARTED: OnceLock<Instant> = OnceLock::new();

pub async fn serve(listener: TcpListener) {
    STARTED.get_or_init(Instant::now);
    loop {
        match listener.accept().await {
            Ok((stream, _)) => shoal_runtime::spawn(handle(stream)),
            Err(e) => {
                tracing::warn!("api accept failed: {e}");
                shoal_runtime::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

async fn handle(mut stream: TcpStream) {
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < REQUEST_BYTES_MAX {
        let BufResult(read, buf) = stream.read(Vec::with_capacity(1024)).await;
        match read {
            Ok(n) if n > 0 => head.extend_from_slice(&buf),
            _ => return,
        }
    }
    let request_line = String::from_utf8_lossy(head.split(|b| *b == b'\r').next().unwrap_or_default()).into_owned();
    let (status, body) = match request_line.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["GET", "/metrics", ..] => ("200 OK", metrics().await),
        ["GET", "/storage_service/hostid/local", ..] => ("200 OK", format!("\"{}\"\n", node().host_id)),
        ["GET", "/storage_service/cluster_name", ..] => ("200 OK", format!("{:?}\n", node().cluster_name)),
        ["GET", "/gossiper/endpoint/live", ..] => ("200 OK", endpoints(true).await),
        ["GET", "/gossiper/endpoint/down", ..] => ("200 OK", endpoints(false).await),
        ["GET", "/storage_service/host_id", ..] => ("200 OK", host_ids().await),
        ["GET", "/storage_service/load_map", ..] => ("200 OK", load_map().await),
        ["GET", "/storage_service/tokens", ..] => {
            let tokens: Vec<String> = shoal_coordinator::cluster::tokens().iter().map(|t| format!("\"{t}\"")).collect();
            ("200 OK", format!("[{}]\n", tokens.join(",")))
        }
        ["GET", target, ..] if target.starts_with("/storage_service/ownership/") => ownership(target).await,
        ["GET", "/snitch/datacenter", ..] => ("200 OK", format!("{:?}\n", node().data_center)),
        ["GET", "/snitch/rack", ..] => ("200 OK", format!("{:?}\n", node().rack)),
        ["GET", "/raft/leader_host", ..] => {
            let leader = group0().await.and_then(|s| s.leader);
            ("200 OK", leader.map_or_else(|| "null\n".to_string(), |l| format!("\"{l}\"\n")))
        }
        ["GET", "/raft/group0", ..] => ("200 OK", group0_json().await),
        ["GET", "/system/uptime_ms", ..] => {
            ("200 OK", format!("{}\n", STARTED.get().map_or(0, |s| s.elapsed().as_millis())))
        }
        ["POST", "/storage_service/decommission", ..] => decommission().await,
        ["POST", "/storage_service/drain", ..] => drain().await,
        ["GET", "/system/logger", ..] => logger_levels(),
        ["POST", target, ..] if target.starts_with("/system/logger") => set_logger_level(target),
        ["GET", "/storage_service/operation_mode", ..] => {
            let mode = submit_to(0, || async { crate::shutdown::mode() }).await;
            ("200 OK", format!("\"{}\"\n", mode.map_or("UNKNOWN", crate::shutdown::Mode::name)))
        }
        ["POST", target, ..] if target.starts_with("/storage_service/remove_node") => remove_node(target).await,
        ["POST", target, ..] if target.starts_with("/storage_service/repair") => repair(target).await,
        ["POST", target, ..] if target.starts_with("/storage_service/keyspace_cleanup") => cleanup(target).await,
        ["POST", target, ..] => match storage_op(target) {
            Some(op) => match shoal_coordinator::storage_op(op).await {
                Ok(n) => ("200 OK", format!("{n}\n")),
                Err(e) => ("500 Internal Server Error", format!("{e}\n")),
            },
            None => ("404 Not Found", "unknown operation\n".to_string()),
        },
        ["GET", ..] => ("404 Not Found", "not found; try /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "only GET and POST are served\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.into_bytes()).await;
}

/// Decommissions this node; once answered, the node stops as a drain
/// does: its grace lets the answer reach the caller and drivers hear
/// REMOVED_NODE from the other nodes and finish what they sent here, and
/// the requests read are answered (one cut off unanswered would be retried
/// elsewhere by the driver, and a counter increment counted twice).
async fn decommission() -> (&'static str, String) {
    match shoal_coordinator::node_ops::decommission().await {
        Ok(()) => {
            shoal_runtime::spawn(async {
                let _ = submit_to(0, || crate::shutdown::stop("decommissioned: this node left the cluster")).await;
            });
            ("200 OK", "decommissioned\n".to_string())
        }
        Err(e) => ("500 Internal Server Error", format!("{e}\n")),
    }
}

/// Drains this node (see `shutdown`); answered once drained.
async fn drain() -> (&'static str, String) {
    match submit_to(0, || async { crate::shutdown::drain().await }).await {
        Ok(Ok(drained)) => (
            "200 OK",
            format!(
                "drained in {} ms: {} node(s) told, {} client connection(s) closed ({} cut off busy), {} table(s) \
                 flushed\n",
                drained.took.as_millis(),
                drained.peers_told,
                drained.connections_closed,
                drained.busy_left,
                drained.tables_flushed
            ),
        ),
        Ok(Err(e)) => ("500 Internal Server Error", format!("{e}\n")),
        Err(e) => ("500 Internal Server Error", format!("{e}\n")),
    }
}

/// The log levels in force: `{"default": directives, "modules":
/// {module: level, ...}}`.
fn logger_levels() -> (&'static str, String) {
    match crate::logging::levels() {
        Ok((base, modules)) => {
            let modules: Vec<String> = modules.iter().map(|(m, l)| format!("{m:?}:{l:?}")).collect();
            ("200 OK", format!("{{\"default\":{base:?},\"modules\":{{{}}}}}\n", modules.join(",")))
        }
        Err(e) => ("500 Internal Server Error", format!("{e}\n")),
    }
}

/// `logger/<module>?level=<level>`: a module's log level from now on;
/// `logger?reset`: the levels of the start.
fn set_logger_level(target: &str) -> (&'static str, String) {
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let result = match (path.strip_prefix("/system/logger/"), query_param(target, "level")) {
        (Some(module), Some(level)) => crate::logging::set_level(module, level),
        (None, None) if target == "/system/logger?reset" => crate::logging::reset(),
        _ => return ("400 Bad Request", "use /system/logger/<module>?level=<level> or /system/logger?reset\n".into()),
    };
    match result {
        Ok(()) => ("200 OK", "ok\n".to_string()),
        Err(e) => ("400 Bad Request", format!("{e}\n")),
    }
}

/// `remove_node?host_id=<uuid>`: removes a dead member.
async fn remove_node(target: &str) -> (&'static str, String) {
    let Some(host) = query_param(target, "host_id").and_then(|h| uuid::Uuid::parse_str(h).ok()) else {
        return ("400 Bad Request", "remove_node needs ?host_id=<the dead node's host id>\n".to_string());
    };
    match shoal_coordinator::node_ops::remove_node(host).await {
        Ok(()) => ("200 OK", format!("removed {host}\n")),
        Err(e) => ("500 Internal Server Error", format!("{e}\n")),
    }
}

/// The value of query parameter `name` in `target` (`path?k=v&...`).
fn query_param<'a>(target: &'a str, name: &str) -> Option<&'a str> {
    let (_, query) = target.split_once('?')?;
    query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v)
}

/// The keyspace a node operation's target names after `prefix`, if any.
fn keyspace_of<'a>(target: &'a str, prefix: &str) -> Option<&'a str> {
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    Some(path.trim_start_matches(prefix).trim_start_matches('/')).filter(|k| !k.is_empty())
}

/// `keyspace_cleanup[/<keyspace>]`: drops the ranges this node no longer
/// replicates.
async fn cleanup(target: &str) -> (&'static str, String) {
    match shoal_coordinator::cleanup::cleanup(keyspace_of(target, "/storage_service/keyspace_cleanup")).await {
        Ok(tables) => ("200 OK", format!("{tables}\n")),
        Err(e) => ("500 Internal Server Error", format!("{e}\n")),
    }
}

/// `repair[/<keyspace>]`: repairs the ranges this node replicates.
async fn repair(target: &str) -> (&'static str, String) {
    match shoal_coordinator::repair::repair(keyspace_of(target, "/storage_service/repair")).await {
        Ok(r) => (
            "200 OK",
            format!(
                "repaired: {} range(s) of tables, {} partition(s) compared, {} differed ({} whole, {} row(s) in the \
                 others), {} cop(ies) written\n",
                r.ranges, r.partitions, r.differing, r.whole, r.rows, r.written
            ),
        ),
        Err(e) => ("500 Internal Server Error", format!("{e}\n")),
    }
}

/// Parses a POST target into the storage operation it names.
fn storage_op(target: &str) -> Option<shoal_coordinator::StorageOp> {
    use shoal_coordinator::StorageOp;
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let param = |name: &str| query_param(target, name).map(str::to_string);
    let tables: Vec<String> = param("cf").map(|cf| cf.split(',').map(str::to_string).collect()).unwrap_or_default();
    let keyspace_of = |rest: &str| Some(rest.trim_start_matches('/').to_string()).filter(|k| !k.is_empty());
    if let Some(rest) = path.strip_prefix("/storage_service/keyspace_flush") {
        return Some(StorageOp::Flush { keyspace: keyspace_of(rest), tables });
    }
    if let Some(rest) = path.strip_prefix("/storage_service/keyspace_compaction") {
        return Some(StorageOp::Compact { keyspace: keyspace_of(rest), tables });
    }
    if path == "/storage_service/snapshots" {
        let tag = param("tag").filter(|t| !t.is_empty() && !t.contains(['/', '.']))?;
        return Some(StorageOp::Snapshot { keyspace: param("kn"), tag });
    }
    None
}

/// Every shard's metrics, in Prometheus text.
async fn metrics() -> String {
    let mut shards = Vec::with_capacity(nr_shards());
    for shard in 0..nr_shards() {
        // A shard that cannot answer (stopping) is left out of this scrape.
        if let Ok(families) = submit_to(shard, || async { shoal_metrics::gather() }).await {
            shards.push((shard, families));
        }
    }
    shoal_metrics::render_prometheus(&shards)
}

/// The addresses of the nodes that are up (`live`; this node is) or down,
/// as a JSON array of strings.
async fn endpoints(live: bool) -> String {
    // The failure detector runs on shard 0; a member is up once shard 0's
    // topology (which this API's node operations read) has it up too.
    let statuses = submit_to(0, || async {
        let statuses = shoal_cluster::failure_detector::statuses();
        statuses
            .into_iter()
            .map(|s| {
                let counted = s.host_id.and_then(shoal_coordinator::cluster::member_up).unwrap_or(true);
                (s.address, s.up && counted)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    let mut addresses: Vec<String> =
        statuses.iter().filter(|(_, up)| *up == live).map(|(address, _)| format!("\"{}\"", address.ip())).collect();
    if live {
        addresses.insert(0, format!("\"{}\"", node().address));
    }
    format!("[{}]\n", addresses.join(","))
}

/// This node's load and every peer's its last ping answer told, in bytes
/// (`[{"key": address, "value": bytes}]`).
async fn load_map() -> String {
    let statuses = submit_to(0, || async { shoal_cluster::failure_detector::statuses() }).await.unwrap_or_default();
    let me = node();
    let mine = shoal_coordinator::cluster::load_bytes().await;
    let mut entries = vec![format!("{{\"key\":\"{}\",\"value\":{mine}}}", me.address)];
    for status in statuses {
        if let Some(load) = status.load_bytes {
            entries.push(format!("{{\"key\":\"{}\",\"value\":{load}}}", status.address.ip()));
        }
    }
    format!("[{}]\n", entries.join(","))
}

/// `ownership/<keyspace>`: the share of the ring each member replicates
/// for the keyspace, by address.
async fn ownership(target: &str) -> (&'static str, String) {
    let keyspace = keyspace_of(target, "/storage_service/ownership").unwrap_or_default().to_string();
    let shares = match shoal_coordinator::cluster::effective_ownership(&keyspace) {
        Ok(shares) => shares,
        Err(e) => return ("400 Bad Request", format!("{e}\n")),
    };
    let members = group0().await.map(|s| s.members).unwrap_or_default();
    let me = node();
    let entries: Vec<String> = shares
        .iter()
        .filter_map(|(host, share)| {
            let address = match members.iter().find(|(m, _)| m.host_id == *host) {
                Some((m, _)) => m.address.ip(),
                None if *host == me.host_id => me.address,
                None => return None,
            };
            Some(format!("{{\"key\":\"{address}\",\"value\":{share}}}"))
        })
        .collect();
    ("200 OK", format!("[{}]\n", entries.join(",")))
}

/// This node's and every peer's host id that a handshake told.
async fn host_ids() -> String {
    let statuses = submit_to(0, || async { shoal_cluster::failure_detector::statuses() }).await.unwrap_or_default();
    let me = node();
    let mut entries = vec![format!("{{\"key\":\"{}\",\"value\":\"{}\"}}", me.address, me.host_id)];
    for status in statuses {
        if let Some(host_id) = status.host_id {
            entries.push(format!("{{\"key\":\"{}\",\"value\":\"{host_id}\"}}", status.address.ip()));
        }
    }
    format!("[{}]\n", entries.join(","))
}

/// Group 0 as shard 0 sees it (it runs there).
async fn group0() -> Option<shoal_cluster::group0::Status> {
    submit_to(0, || async { shoal_cluster::group0::status() }).await.ok().flatten()
}

async fn group0_json() -> String {
    let Some(status) = group0().await else { return "null\n".to_string() };
    // The natural ring: a node replacing another holds the same tokens
    // while it joins.
    let holders = status.members.iter().filter(|(_, state)| *state != shoal_cluster::group0::NodeState::Joining);
    let ring = shoal_cluster::ring::TokenRing::new(holders.map(|(m, _)| (m.host_id, m.tokens.as_slice())));
    let ownership = ring.map(|ring| ring.ownership()).unwrap_or_default();
    let members: Vec<String> = status
        .members
        .iter()
        .map(|(m, state)| {
            format!(
                "{{\"host_id\":\"{}\",\"address\":\"{}\",\"dc\":{:?},\"rack\":{:?},\"tokens\":{},\"owns\":{},\"state\":\"{}\"}}",
                m.host_id,
                m.address,
                m.data_center,
                m.rack,
                m.tokens.len(),
                ownership.get(&m.host_id).copied().unwrap_or(0.0),
                state.letter()
            )
        })
        .collect();
    let leader = status.leader.map_or_else(|| "null".to_string(), |l| format!("\"{l}\""));
    format!("{{\"term\":{},\"leader\":{leader},\"members\":[{}]}}\n", status.term, members.join(","))
}
