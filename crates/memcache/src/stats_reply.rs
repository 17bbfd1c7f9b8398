//! The answers of `stats`, `stats settings`, `stats items` and `stats
//! slabs`: memcached's field names, this node's values summed over its
//! shards.

use std::sync::OnceLock;
use std::time::Instant;

use crate::execute::Config;
use crate::reply::Reply;
use crate::request::ProtocolError;
use crate::stats::{self, Stat, NAMES};

static STARTED: OnceLock<Instant> = OnceLock::new();

/// Marks the start of the uptime `stats` reports.
pub fn mark_start() {
    STARTED.get_or_init(Instant::now);
}

pub async fn write(group: &[u8], config: &Config, reply: &mut Reply<'_>) {
    match group {
        b"" => general(config, reply).await,
        b"settings" => settings(config, reply),
        // Items are not kept in slab classes: no per-class lines, as
        // memcached answers for an empty cache.
        b"items" | b"sizes" | b"conns" => {}
        b"slabs" => {
            stat(reply, "active_slabs", 0);
            stat(reply, "total_malloced", 0);
        }
        _ => return reply.error(ProtocolError::UnknownCommand),
    }
    reply.line(b"END");
}

async fn general(config: &Config, reply: &mut Reply<'_>) {
    let per_shard = shoal_coordinator::on_every_shard(|_| async { stats::snapshot() }).await.unwrap_or_default();
    let mut totals = [0u64; NAMES.len()];
    let mut connections = 0;
    for (counters, open) in &per_shard {
        totals.iter_mut().zip(counters).for_each(|(t, c)| *t += c);
        connections += open;
    }
    let (user, system) = rusage();
    stat(reply, "pid", u64::from(std::process::id()));
    stat(reply, "uptime", STARTED.get().map_or(0, |s| s.elapsed().as_secs()));
    stat(reply, "time", shoal_runtime::clock::now_s().max(0) as u64);
    text(reply, "version", crate::VERSION);
    stat(reply, "pointer_size", usize::BITS.into());
    text(reply, "rusage_user", &user);
    text(reply, "rusage_system", &system);
    stat(reply, "max_connections", MAX_CONNECTIONS);
    stat(reply, "curr_connections", connections);
    for (name, value) in NAMES.iter().zip(totals) {
        if *name != "total_items" {
            stat(reply, name, value);
        }
    }
    // Items live in the items table; its live count and size are not
    // tracked per item yet.
    stat(reply, "curr_items", 0);
    stat(reply, "total_items", totals[Stat::TotalItems as usize]);
    stat(reply, "bytes", 0);
    stat(reply, "evictions", 0);
    stat(reply, "reclaimed", 0);
    stat(reply, "limit_maxbytes", config.memory_limit_bytes);
    stat(reply, "accepting_conns", 1);
    stat(reply, "threads", shoal_runtime::nr_shards() as u64);
}

/// memcached's default, reported; Shoal does not cap connections here.
const MAX_CONNECTIONS: u64 = 1024;

fn settings(config: &Config, reply: &mut Reply<'_>) {
    stat(reply, "maxbytes", config.memory_limit_bytes);
    stat(reply, "maxconns", MAX_CONNECTIONS);
    stat(reply, "tcpport", config.port.into());
    stat(reply, "udpport", 0);
    stat(reply, "verbosity", 0);
    text(reply, "evictions", "on");
    stat(reply, "item_size_max", config.limits.item_size_max_bytes as u64);
    stat(reply, "num_threads", shoal_runtime::nr_shards() as u64);
    text(reply, "cas_enabled", "yes");
}

fn stat(reply: &mut Reply<'_>, name: &str, value: u64) {
    reply.bytes(b"STAT ");
    reply.bytes(name.as_bytes());
    reply.word_number(value);
    reply.bytes(b"\r\n");
}

fn text(reply: &mut Reply<'_>, name: &str, value: &str) {
    reply.line(format!("STAT {name} {value}").as_bytes());
}

/// The process's user and system CPU time, as memcached prints them
/// (`seconds.microseconds`), from /proc/self/stat: procfs is answered
/// from kernel memory, and `stats` is no hot path.
fn rusage() -> (String, String) {
    /// /proc reports times in USER_HZ, 100 per second on Linux.
    const TICKS_PER_S: u64 = 100;
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces, so split after
    // its closing parenthesis), from the state: utime is the 12th, stime
    // the 13th.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    let time = |ticks: u64| format!("{}.{:06}", ticks / TICKS_PER_S, (ticks % TICKS_PER_S) * (1_000_000 / TICKS_PER_S));
    (time(ticks(11)), time(ticks(12)))
}
