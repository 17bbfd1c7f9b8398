//! The answers of `stats`, `stats settings`, `stats items` and `stats
//! slabs`: memcached's field names, this node's values summed over its
//! shards. Items are not kept in slab classes: `items` and `slabs` report
//! them all in one class, `1`. `curr_items`, `bytes`, `evictions` and
//! `reclaimed` come from the shards' LRU lists of items (`bytes` as
//! memcached charges an item: key, value and header).

use std::sync::OnceLock;
use std::time::Instant;

use shoal_coordinator::data::{ItemLruStats, ItemTable};

use crate::execute::Config;
use crate::reply::Reply;
use crate::request::ProtocolError;
use crate::stats::{self, Stat, NAMES};

static STARTED: OnceLock<Instant> = OnceLock::new();

/// Marks the start of the uptime `stats` reports.
pub fn mark_start() {
    STARTED.get_or_init(Instant::now);
}

/// Answers `stats [group]`; `table` is the items table, if it exists.
pub async fn write(group: &[u8], config: &Config, table: Option<ItemTable>, reply: &mut Reply<'_>) {
    let items = match (group, table) {
        (b"" | b"items" | b"slabs", Some(table)) => shoal_coordinator::items_stats(table).await.unwrap_or_default(),
        _ => ItemLruStats::default(),
    };
    match group {
        b"" => general(config, items, reply).await,
        b"settings" => settings(config, reply),
        b"items" if items.items > 0 => {
            stat(reply, "items:1:number", items.items);
            stat(reply, "items:1:age", 0);
            stat(reply, "items:1:evicted", items.evictions);
            stat(reply, "items:1:reclaimed", items.reclaimed);
            stat(reply, "items:1:outofmemory", 0);
        }
        b"slabs" => {
            if items.items > 0 {
                stat(reply, "1:chunk_size", items.bytes.div_ceil(items.items));
                stat(reply, "1:used_chunks", items.items);
                stat(reply, "1:total_chunks", items.items);
            }
            stat(reply, "active_slabs", u64::from(items.items > 0));
            stat(reply, "total_malloced", items.bytes);
        }
        // No item listing: `cachedump` lists none (clients stop at END).
        b"items" | b"sizes" | b"conns" | b"cachedump" => {}
        _ => return reply.error(ProtocolError::UnknownCommand),
    }
    reply.line(b"END");
}

async fn general(config: &Config, items: ItemLruStats, reply: &mut Reply<'_>) {
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
    stat(reply, "curr_items", items.items);
    stat(reply, "total_items", totals[Stat::TotalItems as usize]);
    stat(reply, "bytes", items.bytes);
    stat(reply, "evictions", items.evictions);
    stat(reply, "reclaimed", items.reclaimed);
    stat(reply, "limit_maxbytes", stats::memory_limit_bytes().unwrap_or(config.max_size_bytes));
    stat(reply, "accepting_conns", 1);
    stat(reply, "threads", shoal_runtime::nr_shards() as u64);
}

/// memcached's default, reported; Shoal does not cap connections here.
const MAX_CONNECTIONS: u64 = 1024;

fn settings(config: &Config, reply: &mut Reply<'_>) {
    stat(reply, "maxbytes", stats::memory_limit_bytes().unwrap_or(config.max_size_bytes));
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
