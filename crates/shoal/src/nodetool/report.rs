//! The reports of `nodetool status`, `info` and `tablestats`, laid out as
//! Cassandra's nodetool prints them, from the node's metrics summed over
//! its shards.

use std::collections::{BTreeMap, BTreeSet};

use shoal_metrics::ParsedSample;

use super::Api;

/// A scrape of `/metrics`.
struct Metrics(Vec<ParsedSample>);

impl Metrics {
    fn fetch(api: &Api) -> Result<Metrics, String> {
        Ok(Metrics(shoal_metrics::parse_text(&api.get("/metrics")?)))
    }

    /// The sum over all shards of `name`'s samples that pass `keep`.
    fn sum(&self, name: &str, keep: impl Fn(&ParsedSample) -> bool) -> f64 {
        self.0.iter().filter(|s| s.name == name && keep(s)).map(|s| s.value).sum()
    }

    fn total(&self, name: &str) -> f64 {
        self.sum(name, |_| true)
    }

    fn shards(&self) -> usize {
        self.shard_names().len()
    }

    fn shard_names(&self) -> Vec<String> {
        let names: BTreeSet<u64> = self.0.iter().filter_map(|s| s.label("shard")?.parse().ok()).collect();
        names.into_iter().map(|n| n.to_string()).collect()
    }

    /// `(keyspace, table)` of every table the node reports.
    fn tables(&self) -> BTreeSet<(String, String)> {
        self.0
            .iter()
            .filter(|s| s.name == "shoal_sstables")
            .filter_map(|s| Some((s.label("keyspace")?.to_string(), s.label("table")?.to_string())))
            .collect()
    }
}

/// A node's entry in `/storage_service/load_map` (bytes) or
/// `/storage_service/ownership/<keyspace>` (a share).
#[derive(serde::Deserialize)]
pub(super) struct AddressEntry<T> {
    pub(super) key: String,
    pub(super) value: T,
}

/// A member of group 0 as `/raft/group0` lists it.
#[derive(serde::Deserialize)]
pub(super) struct Member {
    pub(super) host_id: String,
    /// `ip:port` (`[ip]:port` for IPv6), the storage port's.
    pub(super) address: String,
    pub(super) dc: String,
    pub(super) rack: String,
    tokens: usize,
    pub(super) owns: f64,
    /// N, J or L (normal, joining, leaving).
    pub(super) state: String,
}

impl Member {
    /// The address without its port, as the API keys nodes.
    pub(super) fn ip(&self) -> &str {
        let ip = self.address.rsplit_once(':').map_or(self.address.as_str(), |(ip, _)| ip);
        ip.trim_start_matches('[').trim_end_matches(']')
    }
}

#[derive(serde::Deserialize)]
pub(super) struct Group0 {
    pub(super) members: Vec<Member>,
}

/// Every member of the cluster (group 0), by data center: up or down as
/// this node's failure detector sees it, load (a peer's as its last ping
/// answer told), tokens, the share of the ring it owns — with a keyspace,
/// the share it replicates for it — host id and rack.
pub(super) fn status(api: &Api, address: &str, keyspace: Option<&str>) -> Result<(), String> {
    let metrics = Metrics::fetch(api)?;
    let local_id = api.json::<String>("/storage_service/hostid/local")?;
    let live: Vec<String> = api.json("/gossiper/endpoint/live")?;
    let group0: Option<Group0> = api.json("/raft/group0")?;
    let mut members = group0.map(|g| g.members).unwrap_or_default();
    if members.is_empty() {
        // Before group 0 has applied this node's own join: itself alone.
        let tokens: Vec<String> = api.json("/storage_service/tokens")?;
        members.push(Member {
            host_id: local_id.clone(),
            address: address.to_string(),
            dc: api.json::<String>("/snitch/datacenter")?,
            rack: api.json::<String>("/snitch/rack")?,
            tokens: tokens.len(),
            owns: 1.0,
            state: "N".to_string(),
        });
    }
    let load = bytes(metrics.total("shoal_sstable_data_bytes"));
    let loads: Vec<AddressEntry<u64>> = api.json("/storage_service/load_map")?;
    let effective: Option<Vec<AddressEntry<f64>>> = match keyspace {
        Some(keyspace) => Some(api.json(&format!("/storage_service/ownership/{keyspace}"))?),
        None => None,
    };
    let owns_heading = if effective.is_some() { "Owns (effective)" } else { "Owns" };
    let mut by_dc: BTreeMap<&str, Vec<&Member>> = BTreeMap::new();
    for member in &members {
        by_dc.entry(member.dc.as_str()).or_default().push(member);
    }
    for (dc, members) in by_dc {
        println!("Datacenter: {dc}");
        println!("{}", "=".repeat(12 + dc.len()));
        println!("Status=Up/Down");
        println!("|/ State=Normal/Leaving/Joining/Moving");
        println!("--  {:<15} {:<11} {:<7} {:<17} {:<37} Rack", "Address", "Load", "Tokens", owns_heading, "Host ID");
        for m in members {
            let ip = m.ip();
            let local = m.host_id == local_id;
            let up = if local || live.iter().any(|l| l == ip) { 'U' } else { 'D' };
            let state = format!("{up}{}", m.state);
            let peer_load = loads.iter().find(|l| l.key == ip).map(|l| bytes(l.value as f64));
            let load = if local { load.clone() } else { peer_load.unwrap_or_else(|| "?".to_string()) };
            let owns = match &effective {
                Some(shares) => shares.iter().find(|s| s.key == ip).map_or(0.0, |s| s.value),
                None => m.owns,
            };
            let owns = format!("{:.1}%", owns * 100.0);
            println!("{state}  {ip:<15} {load:<11} {:<7} {owns:<17} {:<37} {}", m.tokens, m.host_id, m.rack);
        }
    }
    Ok(())
}

pub(super) fn info(api: &Api) -> Result<(), String> {
    let metrics = Metrics::fetch(api)?;
    let host_id = api.json::<String>("/storage_service/hostid/local")?;
    let uptime_ms: u64 = api.json("/system/uptime_ms")?;
    let requests = |op: &str| metrics.sum("shoal_cql_requests_total", |s| s.label("op") == Some(op));
    let lines = [
        ("ID", host_id),
        ("Gossip active", "false".to_string()),
        ("Native Transport active", "true".to_string()),
        ("Load", bytes(metrics.total("shoal_sstable_data_bytes"))),
        ("Uptime (seconds)", (uptime_ms / 1000).to_string()),
        ("Shards", metrics.shards().to_string()),
        ("Memtable memory", bytes(metrics.total("shoal_memtable_bytes"))),
        ("Row Cache", row_cache(&metrics)),
        ("Key Cache", key_cache(&metrics)),
        ("Commitlog on disk", bytes(metrics.total("shoal_commitlog_disk_bytes"))),
        ("SSTables", metrics.total("shoal_sstables").to_string()),
        ("CQL connections", metrics.total("shoal_cql_connections").to_string()),
        (
            "CQL requests",
            format!(
                "{} reads, {} writes, {} other, {} errors",
                requests("read"),
                requests("write"),
                requests("other"),
                metrics.total("shoal_cql_request_errors_total")
            ),
        ),
        ("Forwarded to other shards", metrics.total("shoal_cql_forwarded_requests_total").to_string()),
        ("Data Center", api.json::<String>("/snitch/datacenter")?),
        ("Rack", api.json::<String>("/snitch/rack")?),
    ];
    for (name, value) in lines {
        println!("{name:<26}: {value}");
    }
    for shard in metrics.shard_names() {
        println!("{:<26}: {}", format!("Memory (shard {shard})"), shard_memory(&metrics, &shard));
    }
    Ok(())
}

/// Cassandra's Row Cache line, from the row cache's counters (its capacity
/// is what the shards' budgets leave it, so it is not a fixed figure).
fn row_cache(metrics: &Metrics) -> String {
    let (hits, misses) = (metrics.total("shoal_cache_hits_total"), metrics.total("shoal_cache_misses_total"));
    format!(
        "entries {}, size {}, {hits} hits, {} requests, {:.3} hit rate, {} evictions",
        metrics.total("shoal_cache_partitions"),
        bytes(metrics.sum("shoal_memory_used_bytes", |s| s.label("kind") == Some("cache"))),
        hits + misses,
        hits / (hits + misses),
        metrics.total("shoal_cache_evictions_total"),
    )
}

/// Cassandra's Key Cache line, for the partition-index page cache.
fn key_cache(metrics: &Metrics) -> String {
    let (hits, misses) =
        (metrics.total("shoal_index_cache_hits_total"), metrics.total("shoal_index_cache_misses_total"));
    format!(
        "entries {}, size {}, capacity {}, {hits} hits, {} requests, {:.3} hit rate",
        metrics.total("shoal_index_cache_pages"),
        bytes(metrics.sum("shoal_memory_used_bytes", |s| s.label("kind") == Some("index_cache"))),
        bytes(metrics.total("shoal_index_cache_capacity_bytes")),
        hits + misses,
        hits / (hits + misses),
    )
}

/// One shard's memory budget and what holds it.
fn shard_memory(metrics: &Metrics, shard: &str) -> String {
    let of_shard = |s: &ParsedSample| s.label("shard") == Some(shard);
    let used =
        |kind: &str| bytes(metrics.sum("shoal_memory_used_bytes", |s| of_shard(s) && s.label("kind") == Some(kind)));
    format!(
        "budget {}, memtables {}, row cache {}, index cache {}, SSTable metadata {}, memcached items list {}",
        bytes(metrics.sum("shoal_memory_budget_bytes", of_shard)),
        used("memtables"),
        used("cache"),
        used("index_cache"),
        used("sstable_metadata"),
        used("memcache_items"),
    )
}

/// `filters`: `ks` or `ks.table`; empty for every table.
pub(super) fn tablestats(api: &Api, filters: &[String]) -> Result<(), String> {
    let metrics = Metrics::fetch(api)?;
    let wanted = |keyspace: &str, table: &str| {
        filters.is_empty() || filters.iter().any(|f| f == keyspace || *f == format!("{keyspace}.{table}"))
    };
    let tables: Vec<(String, String)> = metrics.tables().into_iter().filter(|(k, t)| wanted(k, t)).collect();
    if tables.is_empty() && !filters.is_empty() {
        return Err(format!("no table matches {}", filters.join(" ")));
    }
    println!("Total number of tables: {}", tables.len());
    println!("----------------");
    let keyspaces: BTreeSet<&str> = tables.iter().map(|(k, _)| k.as_str()).collect();
    for keyspace in keyspaces {
        let of_keyspace = |s: &ParsedSample| s.label("keyspace") == Some(keyspace);
        let latency =
            |ops: &str, seconds: &str| mean_ms(metrics.sum(seconds, of_keyspace), metrics.sum(ops, of_keyspace));
        println!("Keyspace : {keyspace}");
        println!("\tRead Count: {}", metrics.sum("shoal_table_reads_total", of_keyspace));
        println!("\tRead Latency: {}", latency("shoal_table_reads_total", "shoal_table_read_seconds_total"));
        println!("\tWrite Count: {}", metrics.sum("shoal_table_writes_total", of_keyspace));
        println!("\tWrite Latency: {}", latency("shoal_table_writes_total", "shoal_table_write_seconds_total"));
        for (_, table) in tables.iter().filter(|(k, _)| k == keyspace) {
            let of_table = |s: &ParsedSample| of_keyspace(s) && s.label("table") == Some(table.as_str());
            let get = |name: &str| metrics.sum(name, of_table);
            println!("\t\tTable: {table}");
            println!("\t\tSSTable count: {}", get("shoal_sstables"));
            println!("\t\tSpace used (live): {}", get("shoal_sstable_data_bytes"));
            println!("\t\tMemtable data size: {}", get("shoal_memtable_bytes"));
            println!("\t\tNumber of partitions (estimate): {}", get("shoal_sstable_partitions"));
            println!("\t\tLocal read count: {}", get("shoal_table_reads_total"));
            println!(
                "\t\tLocal read latency: {}",
                mean_ms(get("shoal_table_read_seconds_total"), get("shoal_table_reads_total"))
            );
            println!("\t\tLocal write count: {}", get("shoal_table_writes_total"));
            println!(
                "\t\tLocal write latency: {}",
                mean_ms(get("shoal_table_write_seconds_total"), get("shoal_table_writes_total"))
            );
            println!();
        }
        println!("----------------");
    }
    Ok(())
}

/// Mean latency as nodetool prints it; `NaN ms` when nothing was timed.
fn mean_ms(seconds: f64, count: f64) -> String {
    if count == 0.0 {
        "NaN ms".to_string()
    } else {
        format!("{:.3} ms", seconds * 1000.0 / count)
    }
}

/// Bytes in the largest binary unit that keeps the number ≥ 1, as nodetool
/// prints a load.
pub(super) fn bytes(value: f64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    // An empty f64 sum is -0.0: print it as 0.
    let mut value = value + 0.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value} bytes")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_print_in_binary_units() {
        assert_eq!(bytes(0.0), "0 bytes");
        assert_eq!(bytes(1023.0), "1023 bytes");
        assert_eq!(bytes(1536.0), "1.50 KiB");
        assert_eq!(bytes(5.0 * 1024.0 * 1024.0 * 1024.0), "5.00 GiB");
    }

    #[test]
    fn mean_latency_of_nothing_is_nan_as_in_nodetool() {
        assert_eq!(mean_ms(0.0, 0.0), "NaN ms");
        assert_eq!(mean_ms(0.5, 1000.0), "0.500 ms");
    }
}
