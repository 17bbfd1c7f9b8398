//! Running a connection's parsed requests and writing their answers.
//!
//! A read buffer's requests run as one batch: their item operations go to
//! the coordinator together, so a multi-key `get` or a pipeline of `mg`
//! costs one message per owning shard (none for keys this shard owns), and
//! the answers are written in request order. `flush_all`, `stats` and
//! `quit` are barriers: what came before them runs first. A retrieval of
//! many keys runs in chunks, and the answers written so far leave between
//! chunks, so neither a large multi-get nor a deep pipeline holds more
//! than a bounded amount of answer in memory.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shoal_coordinator::data::{
    Arith, Fetch, Item, ItemOp, ItemOutcome, ItemTable, Lifetime, PartitionPosition, Store, StoreMode,
};
use shoal_coordinator::{run_items, ItemLevels, ItemResult};
use shoal_runtime::clock;

use crate::batch_bytes;
use crate::items_table::ItemsTable;
use crate::parse::Limits;
use crate::reply::Reply;
use crate::request::{ProtocolError, Request, StoreCommand};
use crate::scratch::recycle;
use crate::stats::{self, Stat};
use crate::words::Words;

/// Item operations sent to the coordinator in one run, at most.
pub const OPS_PER_RUN_MAX: usize = 256;
/// Answers buffered before they are written, at most (about; one item's
/// answer may pass it).
pub const ANSWER_BYTES_MAX: usize = 256 * 1024;
/// memcached's cut-off between relative and absolute expiry times.
const RELATIVE_EXPTIME_MAX_S: i64 = 60 * 60 * 24 * 30;

/// What the node tells every memcached connection.
#[derive(Debug, Clone)]
pub struct Config {
    pub keyspace: String,
    pub table: String,
    pub limits: Limits,
    /// `memcache_max_size`: past it the least recently used items are
    /// evicted (`limit_maxbytes` of `stats`); 0: never.
    pub max_size_bytes: u64,
    /// `memcache_read_consistency`, `memcache_write_consistency`: how many
    /// of an item's replicas its operations consult.
    pub levels: ItemLevels,
    pub port: u16,
    /// TLS on the port (memcached's `-Z` with `ssl_chain_cert`, ...).
    pub tls: Option<shoal_tls::Acceptor>,
    /// ASCII authentication (memcached's `-Y`): the users allowed,
    /// reloaded when the auth file changes.
    pub auth: Option<shoal_tls::Reloadable<crate::auth::AuthTable>>,
}

/// Whether the connection goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Continue,
    Close,
}

/// A connection's state between batches.
pub struct Session {
    config: Arc<Config>,
    items: ItemsTable,
    /// The batches' pending requests, empty between batches.
    pending: Vec<Pending<'static, 'static>>,
    /// The retrieval being answered in chunks failed in an earlier chunk:
    /// its error line ended its answer, so its later chunks add nothing.
    retrieval_failed: bool,
}

/// Where answers go once enough of them are buffered.
#[allow(async_fn_in_trait)]
pub trait Sink {
    /// Writes `answers` out and leaves it empty; an error ends the
    /// connection.
    async fn write(&mut self, answers: &mut Vec<u8>) -> std::io::Result<()>;
}

/// Requests waiting for the outcomes of their operations, in order.
struct Pending<'r, 'a> {
    request: &'r Request<'a>,
    /// For a retrieval run in chunks: the keys of this chunk, and whether
    /// it is the last.
    keys: Words<'a>,
    last: bool,
}

impl Session {
    pub fn new(config: Arc<Config>) -> Session {
        let items = ItemsTable::new(&config.keyspace, &config.table);
        Session { config, items, pending: Vec::new(), retrieval_failed: false }
    }

    /// Runs `requests`, parsed from `buffer`, in order, appending their
    /// answers to `answers` (written through `sink` when it grows large).
    /// Their keys and values are cut from `buffer` (`batch_bytes`).
    pub async fn run(
        &mut self,
        requests: &[Request<'_>],
        buffer: &Bytes,
        answers: &mut Vec<u8>,
        sink: &mut impl Sink,
    ) -> std::io::Result<Control> {
        // Sized for the batch at once: a pipeline of 16 gets grows neither.
        let capacity = requests.len().min(OPS_PER_RUN_MAX);
        let mut ops: Vec<(PartitionPosition, ItemOp)> = Vec::with_capacity(capacity);
        let mut pending: Vec<Pending<'_, '_>> = recycle(std::mem::take(&mut self.pending));
        pending.reserve(capacity);
        let now_s = clock::now_s();
        for request in requests {
            match request {
                Request::Quit | Request::FlushAll { .. } | Request::Stats { .. } | Request::CacheMemlimit { .. } => {
                    self.finish(&mut ops, &mut pending, now_s, answers, sink).await?;
                    if *request == Request::Quit {
                        self.pending = recycle(pending);
                        return Ok(Control::Close);
                    }
                    self.barrier(request, answers).await;
                }
                Request::Retrieve { keys, .. } if keys.is_empty() => {
                    pending.push(Pending { request, keys: Words::default(), last: true });
                }
                Request::Retrieve { keys, touch, .. } => {
                    let touch = touch.map(|exptime| lifetime(exptime, now_s));
                    let mut rest = *keys;
                    loop {
                        let room = OPS_PER_RUN_MAX.saturating_sub(ops.len()).max(1);
                        let (chunk, after) = rest.split_at(room);
                        ops.extend(chunk.iter().map(|k| {
                            batch_bytes::position(buffer, k, ItemOp::Get(Fetch { touch, ..Fetch::default() }))
                        }));
                        let last = after.is_empty();
                        pending.push(Pending { request, keys: chunk, last });
                        rest = after;
                        if ops.len() >= OPS_PER_RUN_MAX {
                            self.finish(&mut ops, &mut pending, now_s, answers, sink).await?;
                        }
                        if last {
                            break;
                        }
                    }
                }
                _ => {
                    if let Some((key, op)) = item_op(request, buffer, now_s) {
                        ops.push(batch_bytes::position(buffer, key, op));
                    }
                    pending.push(Pending { request, keys: Words::default(), last: true });
                    if ops.len() >= OPS_PER_RUN_MAX {
                        self.finish(&mut ops, &mut pending, now_s, answers, sink).await?;
                    }
                }
            }
        }
        self.finish(&mut ops, &mut pending, now_s, answers, sink).await?;
        self.pending = recycle(pending);
        Ok(Control::Continue)
    }

    /// Runs the operations gathered so far and answers their requests.
    async fn finish(
        &mut self,
        ops: &mut Vec<(PartitionPosition, ItemOp)>,
        pending: &mut Vec<Pending<'_, '_>>,
        now_s: i64,
        answers: &mut Vec<u8>,
        sink: &mut impl Sink,
    ) -> std::io::Result<()> {
        let outcomes: Vec<ItemResult> = if ops.is_empty() {
            Vec::new()
        } else {
            match self.items.get(&shoal_coordinator::schema()) {
                Ok(table) => run_items(table, std::mem::take(ops), self.config.levels, timeout()).await,
                Err(e) => {
                    let e = Arc::new(shoal_coordinator::CoordinatorError::Invalid(e.to_string()));
                    std::mem::take(ops).into_iter().map(|_| Err(Arc::clone(&e))).collect()
                }
            }
        };
        let mut outcomes = outcomes.into_iter();
        for p in pending.drain(..) {
            let mut reply = Reply::new(answers);
            answer(p.request, p.keys, p.last, now_s, &mut outcomes, &mut reply, &mut self.retrieval_failed);
            if answers.len() >= ANSWER_BYTES_MAX {
                sink.write(answers).await?;
            }
        }
        assert!(outcomes.next().is_none(), "every outcome belongs to a request");
        Ok(())
    }

    /// `stats`, `flush_all`: answered after everything before them ran.
    async fn barrier(&mut self, request: &Request<'_>, answers: &mut Vec<u8>) {
        let mut reply = Reply::new(answers);
        match request {
            Request::Stats { group } => {
                let table = self.items.get(&shoal_coordinator::schema()).ok();
                crate::stats_reply::write(group, &self.config, table, &mut reply).await;
            }
            Request::CacheMemlimit { megabytes, noreply } => {
                let bytes = megabytes.saturating_mul(1 << 20);
                let _ = shoal_coordinator::on_every_shard(move |_| async move { stats::set_memory_limit_bytes(bytes) })
                    .await;
                let result = match self.items.get(&shoal_coordinator::schema()) {
                    Ok(table) => {
                        shoal_coordinator::track_items(table, max_size(bytes)).await.map_err(|e| e.to_string())
                    }
                    Err(e) => Err(e.to_string()),
                };
                match result {
                    Ok(()) if *noreply => {}
                    Ok(()) => reply.line(b"OK"),
                    Err(e) => reply.server_error(&e),
                }
            }
            Request::FlushAll { delay_s, noreply } => {
                stats::bump(Stat::CmdFlush);
                let result = match self.items.get(&shoal_coordinator::schema()) {
                    Ok(table) => flush_all(table, *delay_s).await,
                    Err(e) => Err(e.to_string()),
                };
                match result {
                    Ok(()) if *noreply => {}
                    Ok(()) => reply.line(b"OK"),
                    Err(e) => reply.server_error(&e),
                }
            }
            _ => unreachable!("only stats and flush_all are barriers with answers"),
        }
    }
}

/// The bound on the items' bytes that `memcache_max_size` (or
/// `cache_memlimit`) of `bytes` sets: 0 is none.
pub fn max_size(bytes: u64) -> Option<u64> {
    (bytes > 0).then_some(bytes)
}

fn timeout() -> Duration {
    shoal_coordinator::timeouts().write
}

/// Removes every item now, or after `delay_s` (in the background).
async fn flush_all(table: ItemTable, delay_s: i64) -> Result<(), String> {
    if delay_s <= 0 {
        return shoal_coordinator::truncate(table.id, shoal_coordinator::timeouts().truncate)
            .await
            .map_err(|e| e.to_string());
    }
    shoal_runtime::spawn(async move {
        shoal_runtime::time::sleep(Duration::from_secs(delay_s.unsigned_abs())).await;
        if let Err(e) = shoal_coordinator::truncate(table.id, shoal_coordinator::timeouts().truncate).await {
            tracing::warn!("delayed flush_all failed: {e}");
        }
    });
    Ok(())
}

/// memcached's expiry time: 0 never, negative already, up to 30 days
/// relative to now, beyond that a unix time.
pub fn lifetime(exptime: i64, now_s: i64) -> Lifetime {
    match exptime {
        0 => Lifetime::Forever,
        e if e < 0 => Lifetime::Until(0),
        e if e <= RELATIVE_EXPTIME_MAX_S => Lifetime::Until(now_s + e),
        e => Lifetime::Until(e),
    }
}

/// The item operation of a request that has one (its value cut from
/// `buffer`), and its key.
fn item_op<'r>(request: &'r Request<'_>, buffer: &Bytes, now_s: i64) -> Option<(&'r [u8], ItemOp)> {
    Some(match request {
        Request::Store { command, key, flags, exptime, data, .. } => {
            let (mode, compare_cas) = match command {
                StoreCommand::Set => (StoreMode::Set, None),
                StoreCommand::Add => (StoreMode::Add, None),
                StoreCommand::Replace => (StoreMode::Replace, None),
                StoreCommand::Append => (StoreMode::Append, None),
                StoreCommand::Prepend => (StoreMode::Prepend, None),
                StoreCommand::Cas(unique) => (StoreMode::Set, Some(*unique)),
            };
            stats::bump(Stat::CmdSet);
            let store = Store {
                mode,
                value: batch_bytes::cut(buffer, data),
                flags: *flags,
                lifetime: lifetime(*exptime, now_s),
                compare_cas,
                new_cas: None,
                vivify: None,
                stale_if_older: false,
            };
            (key, ItemOp::Store(store))
        }
        Request::Arith { key, decrement, delta, .. } => {
            let arith = Arith {
                decrement: *decrement,
                delta: *delta,
                create: None,
                compare_cas: None,
                new_cas: None,
                touch: None,
            };
            (key, ItemOp::Arith(arith))
        }
        Request::Delete { key, .. } => (key, ItemOp::Delete { compare_cas: None }),
        Request::Touch { key, exptime, .. } => {
            stats::bump(Stat::CmdTouch);
            (key, ItemOp::Touch { lifetime: lifetime(*exptime, now_s) })
        }
        Request::TooLarge { key: Some(key), .. } => (key, ItemOp::Delete { compare_cas: None }),
        Request::Meta(meta) => crate::meta_exec::item_op(meta, buffer, now_s),
        _ => return None,
    })
}

/// Writes the answer of `request`, taking its outcomes from `outcomes`;
/// `retrieval_failed` carries a retrieval's failure from chunk to chunk.
fn answer(
    request: &Request<'_>,
    keys: Words<'_>,
    last: bool,
    now_s: i64,
    outcomes: &mut impl Iterator<Item = ItemResult>,
    reply: &mut Reply<'_>,
    retrieval_failed: &mut bool,
) {
    let mut next = || outcomes.next().expect("an outcome for each operation");
    match request {
        Request::Retrieve { with_cas, touch, .. } => {
            // Every key's outcome is taken, so the requests after get
            // theirs. A key that fails ends the answer with its error line
            // instead of `END` (memcached answers a get it cannot finish
            // with its error line; values already sent stay sent).
            for key in keys.iter() {
                let outcome = next();
                if *retrieval_failed {
                    continue;
                }
                match outcome {
                    Ok(ItemOutcome::Found(item)) => {
                        stats::bump(if touch.is_some() { Stat::TouchHits } else { Stat::GetHits });
                        reply.value(key, &item, with_cas.then_some(item.cas));
                    }
                    Ok(_) => stats::bump(if touch.is_some() { Stat::TouchMisses } else { Stat::GetMisses }),
                    Err(e) => {
                        *retrieval_failed = true;
                        reply.server_error(&e.to_string());
                        continue;
                    }
                }
                stats::bump(if touch.is_some() { Stat::CmdTouch } else { Stat::CmdGet });
            }
            if last && !std::mem::take(retrieval_failed) {
                reply.line(b"END");
            }
        }
        Request::Store { command, noreply, .. } => {
            let outcome = next();
            if let Ok(ItemOutcome::Stored { .. }) = outcome {
                stats::bump(Stat::TotalItems);
            }
            if let StoreCommand::Cas(_) = command {
                stats::bump(match &outcome {
                    Ok(ItemOutcome::Stored { .. }) => Stat::CasHits,
                    Ok(ItemOutcome::Exists) => Stat::CasBadval,
                    _ => Stat::CasMisses,
                });
            }
            text_answer(outcome, *noreply, reply, |o| match o {
                ItemOutcome::Stored { .. } => b"STORED",
                ItemOutcome::Exists => b"EXISTS",
                ItemOutcome::Missing => b"NOT_FOUND",
                _ => b"NOT_STORED",
            });
        }
        Request::Arith { decrement, noreply, .. } => {
            let outcome = next();
            let (hit, miss) =
                if *decrement { (Stat::DecrHits, Stat::DecrMisses) } else { (Stat::IncrHits, Stat::IncrMisses) };
            match outcome {
                Ok(ItemOutcome::Found(item)) => {
                    stats::bump(hit);
                    if !noreply {
                        reply.line(&item.value);
                    }
                }
                Ok(ItemOutcome::NotANumber) => reply.error(ProtocolError::NotANumber),
                other => {
                    stats::bump(miss);
                    text_answer(other, *noreply, reply, |_| b"NOT_FOUND");
                }
            }
        }
        Request::Delete { noreply, .. } => {
            let outcome = next();
            stats::bump(if matches!(outcome, Ok(ItemOutcome::Deleted)) {
                Stat::DeleteHits
            } else {
                Stat::DeleteMisses
            });
            text_answer(outcome, *noreply, reply, |o| match o {
                ItemOutcome::Deleted => b"DELETED",
                _ => b"NOT_FOUND",
            });
        }
        Request::Touch { noreply, .. } => {
            let outcome = next();
            stats::bump(if matches!(outcome, Ok(ItemOutcome::Found(_))) { Stat::TouchHits } else { Stat::TouchMisses });
            text_answer(outcome, *noreply, reply, |o| match o {
                ItemOutcome::Found(_) => b"TOUCHED",
                _ => b"NOT_FOUND",
            });
        }
        Request::TooLarge { key, noreply } => {
            if key.is_some() {
                let _ = next();
            }
            if !noreply {
                reply.error(ProtocolError::TooLarge);
            }
        }
        Request::Meta(meta) => crate::meta_exec::answer(meta, next, now_s, reply),
        Request::MetaNoop => reply.line(b"MN"),
        Request::Version => {
            reply.bytes(b"VERSION ");
            reply.line(crate::VERSION.as_bytes());
        }
        Request::Verbosity { noreply } => {
            if !noreply {
                reply.line(b"OK");
            }
        }
        Request::Fail(e) => reply.error(*e),
        Request::Quit | Request::FlushAll { .. } | Request::Stats { .. } | Request::CacheMemlimit { .. } => {
            unreachable!("barriers are answered on their own")
        }
    }
}

/// A one-line answer: the word `word` gives the outcome, nothing under
/// `noreply`, `SERVER_ERROR` if the operation failed (even under noreply,
/// as memcached sends errors).
fn text_answer(
    outcome: ItemResult,
    noreply: bool,
    reply: &mut Reply<'_>,
    word: impl FnOnce(&ItemOutcome) -> &'static [u8],
) {
    match outcome {
        Ok(outcome) if !noreply => reply.line(word(&outcome)),
        Ok(_) => {}
        Err(e) => reply.server_error(&e.to_string()),
    }
}

/// An item's remaining time to live, as meta `t` and `me` show it.
pub fn ttl_s(item: &Item, now_s: i64) -> i64 {
    match item.lifetime {
        Lifetime::Forever => -1,
        Lifetime::Until(at) => (at - now_s).max(0),
    }
}
