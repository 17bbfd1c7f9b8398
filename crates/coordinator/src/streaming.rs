//! Streaming: a range's data moved to the node that gains it when a member
//! joins or leaves (ScyllaDB's streaming, by mutations as its repair-based
//! node operations send them).
//!
//! The gaining node pulls ([`stream_in`]). For every keyspace, every range
//! the change in progress gives it ([`Topology::range_moves`]) and every
//! table of the keyspace, it asks one live natural replica of the range —
//! the one that loses the range when that one is up — for its stored
//! partitions in the range: every shard of the source at once, each page
//! by page (`StreamRead`, about [`PAGE_BYTES`] a page), applied to this
//! node's memtables without the commitlog (ScyllaDB's streaming skips it
//! too): the memtables are flushed before the stream is done, and a
//! stream cut short by a crash is run again. Partitions keep
//! their timestamps and tombstones, so what clients write meanwhile —
//! this node is already a pending replica of the range — merges with the
//! streamed copy as any two writes do, and streaming a range twice
//! changes nothing: an interrupted operation is retried from the start.
//! Counters too: an increment applied to the source before its page was
//! read, and sent to this node as a pending replica as well, arrives twice
//! as the same version of its leader's counter shard, which merges once
//! (`shoal_storage::counter`).
//!
//! The node that drives a change asks each gaining node to stream in
//! (`Stream`, [`ask_to_stream`]) and waits for all of them.

use std::ops::Bound;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::join_all;
use futures_util::{stream, StreamExt};
use shoal_cluster::messaging;
use shoal_cluster::verb::Verb;
use shoal_runtime::sched::in_group;
use shoal_runtime::{submit_to, Group};
use shoal_storage::{Partition, PartitionPosition};
use uuid::Uuid;

use crate::schema::schema;
use crate::shards::shard_of;
use crate::storage_ops::{storage_op, StorageOp};
use crate::topology::{topology, RangeMove, Topology};
use crate::wire::{self, StreamPage, StreamRead};
use crate::CoordinatorError;

/// About how much one page of a streaming read carries.
const PAGE_BYTES: usize = 256 << 10;
/// Partitions read from storage per step while a page fills.
const SCAN_PARTITIONS: usize = 128;
/// Ranges streamed at once by one gaining node.
const RANGES_IN_FLIGHT: usize = 4;
/// How long a gaining node waits to see the change it is asked to stream.
const TOPOLOGY_WAIT: Duration = Duration::from_secs(10);

/// What a node streamed in: for the log and the benchmark.
#[derive(Debug, Default, Clone, Copy)]
pub struct Streamed {
    pub ranges: usize,
    pub partitions: usize,
    pub bytes: usize,
}

impl std::ops::AddAssign for Streamed {
    fn add_assign(&mut self, other: Streamed) {
        self.ranges += other.ranges;
        self.partitions += other.partitions;
        self.bytes += other.bytes;
    }
}

/// The source side: a page of this shard's stored partitions of a table
/// in a range.
pub(crate) async fn serve_read(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let read = decode_read(&payload)?;
    Ok(wire::encode_stream_page(&scan_page(read, PAGE_BYTES).await?))
}

pub(crate) fn decode_read(payload: &[u8]) -> Result<StreamRead, CoordinatorError> {
    wire::decode_stream_read(payload).map_err(|e| CoordinatorError::Invalid(format!("malformed streaming read: {e}")))
}

/// This shard's stored partitions of a table in a range, from its start,
/// about `page_bytes` of them. Streaming's and repair's reads: they run in
/// the streaming scheduling group (CPU) and so in its I/O class.
pub(crate) async fn scan_page(read: StreamRead, page_bytes: usize) -> Result<StreamPage, CoordinatorError> {
    in_group(Group::Streaming, scan_page_here(read, page_bytes)).await
}

async fn scan_page_here(read: StreamRead, page_bytes: usize) -> Result<StreamPage, CoordinatorError> {
    let database = shoal_replica::local();
    let mut page = StreamPage::default();
    let (mut from, mut bytes) = (read.from, 0);
    loop {
        shoal_runtime::sched::maybe_yield().await;
        let batch = database.scan_raw(read.table, from.as_ref(), read.to.as_ref(), SCAN_PARTITIONS).await?;
        let full = batch.len() == SCAN_PARTITIONS;
        if let Some((last, _)) = batch.last() {
            from = Bound::Excluded(last.clone());
        }
        bytes += batch.iter().map(|(_, p)| p.size_estimate_bytes()).sum::<usize>();
        page.partitions.extend(batch);
        if !full {
            break;
        }
        if bytes >= page_bytes {
            page.more = true;
            break;
        }
    }
    Ok(page)
}

/// The gaining side, asked by the node that drives the change: streams in
/// what this node gains.
pub(crate) async fn serve_stream(_payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    stream_in().await?;
    Ok(Vec::new())
}

/// Streams in every range this node gains by the change in progress, from
/// live natural replicas; call on shard 0.
pub async fn stream_in() -> Result<Streamed, CoordinatorError> {
    let topology = changing_topology().await?;
    let schema = schema();
    let me = topology.me;
    let mut work = Vec::new();
    for keyspace in schema.keyspaces.values() {
        let tables: Vec<Uuid> = keyspace.tables.values().map(|t| t.id).collect();
        for range in topology.range_moves(keyspace).into_iter().filter(|m| m.gainers.contains(&me)) {
            let Some(source) = source_of(&topology, &range)? else { continue };
            work.extend(tables.iter().map(|table| (*table, range.clone(), source)));
        }
    }
    let started = Instant::now();
    let ranges = work.len();
    let results: Vec<Result<Streamed, CoordinatorError>> = stream::iter(work)
        .map(|(table, range, source)| {
            let topology = Rc::clone(&topology);
            async move { stream_range(&topology, table, &range, source).await }
        })
        .buffer_unordered(RANGES_IN_FLIGHT)
        .collect()
        .await;
    let mut total = Streamed { ranges, ..Streamed::default() };
    for result in results {
        total += result?;
    }
    // Streamed data skipped the commitlog: on disk before it counts.
    storage_op(StorageOp::Flush { keyspace: None, tables: Vec::new() }).await?;
    let seconds = started.elapsed().as_secs_f64();
    tracing::info!(
        "streamed in {} range(s) of tables: {} partition(s), {} bytes in {:.2} s ({:.1} MB/s)",
        total.ranges,
        total.partitions,
        total.bytes,
        seconds,
        total.bytes as f64 / seconds.max(1e-3) / 1e6
    );
    Ok(total)
}

/// This shard's topology once it shows a change in progress.
async fn changing_topology() -> Result<Rc<Topology>, CoordinatorError> {
    let deadline = Instant::now() + TOPOLOGY_WAIT;
    loop {
        let topology = topology();
        if topology.is_changing() {
            return Ok(topology);
        }
        if Instant::now() > deadline {
            return Err(CoordinatorError::Remote("no member is joining or leaving: nothing to stream".to_string()));
        }
        shoal_runtime::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Where a gained range is read from: the natural replica that loses it
/// if that one is up (its copy is the one the range's next replicas
/// replace), else the first live natural replica. `None` for a range only
/// a dead node being removed held (a keyspace whose replication factor is
/// 1): its data went with the node, as in Cassandra, and it is skipped
/// with a warning. Any other range without a live replica fails: a
/// joining node would otherwise own ranges it lacks the data of.
fn source_of(topology: &Topology, range: &RangeMove) -> Result<Option<Uuid>, CoordinatorError> {
    let live = |host: &&Uuid| **host != topology.me && topology.is_up(**host);
    if let Some(source) = range.losers.iter().find(live).or_else(|| range.holders.iter().find(live)) {
        return Ok(Some(*source));
    }
    if range.holders.iter().all(|host| topology.is_leaving(*host)) {
        tracing::warn!(
            "tokens ({}, {}] were held only by {:?}, which is being removed and is down: their data is lost",
            range.start,
            range.end,
            range.holders
        );
        return Ok(None);
    }
    Err(CoordinatorError::NodeOperation(format!(
        "no live replica holds tokens ({}, {}] to stream them from; bring one of {:?} back and try again",
        range.start, range.end, range.holders
    )))
}

/// Streams one table's range from `source`, every shard of it at once.
async fn stream_range(
    topology: &Topology,
    table: Uuid,
    range: &RangeMove,
    source: Uuid,
) -> Result<Streamed, CoordinatorError> {
    let endpoint =
        topology.endpoint(source).ok_or_else(|| CoordinatorError::Remote(format!("node {source} left the cluster")))?;
    let pieces = token_bounds(range.start, range.end);
    let reads = (0..endpoint.shard_count).flat_map(|shard| {
        pieces.iter().map(move |(from, to)| {
            let read = StreamRead { table, from: from.clone(), to: to.clone() };
            pull(endpoint.address, shard, read)
        })
    });
    let mut total = Streamed::default();
    for result in join_all(reads).await {
        total += result?;
    }
    Ok(total)
}

/// Reads `read` from one shard of a source, page by page, applying each.
async fn pull(address: std::net::SocketAddr, shard: u16, mut read: StreamRead) -> Result<Streamed, CoordinatorError> {
    let mut total = Streamed::default();
    loop {
        let answer = messaging::request(address, shard, Verb::StreamRead, &wire::encode_stream_read(&read))
            .await
            .map_err(|e| CoordinatorError::Remote(format!("streaming from {address}: {e}")))?;
        let body = crate::target::answer_body(address, answer)?;
        total.bytes += body.len();
        let page = wire::decode_stream_page(&body)
            .map_err(|e| CoordinatorError::Remote(format!("a streamed page from {address}: {e}")))?;
        total.partitions += page.partitions.len();
        let next = page.partitions.last().map(|(position, _)| Bound::Excluded(position.clone()));
        apply(read.table, page.partitions).await?;
        match next {
            Some(from) if page.more => read.from = from,
            _ => return Ok(total),
        }
    }
}

/// Applies streamed partitions on the shards of this node that own them.
async fn apply(table: Uuid, partitions: Vec<(PartitionPosition, Partition)>) -> Result<(), CoordinatorError> {
    let mut by_shard: Vec<Vec<(PartitionPosition, Partition)>> = vec![Vec::new(); shoal_runtime::nr_shards()];
    for (position, partition) in partitions {
        by_shard[shard_of(position.token)].push((position, partition));
    }
    let applies = by_shard.into_iter().enumerate().filter(|(_, p)| !p.is_empty()).map(|(shard, partitions)| {
        submit_to(shard, move || {
            in_group(Group::Streaming, async move {
                let database = shoal_replica::local();
                for (position, partition) in partitions {
                    database.apply_streamed(table, position, partition).await?;
                }
                Ok::<(), shoal_replica::ReplicaError>(())
            })
        })
    });
    for applied in join_all(applies).await {
        applied??;
    }
    Ok(())
}

/// The partition bounds of tokens `(start, end]`, wrapping past the
/// ring's end when `start >= end` (two pieces then).
pub(crate) fn token_bounds(start: i64, end: i64) -> Vec<(Bound<PartitionPosition>, Bound<PartitionPosition>)> {
    // A token's first position has the empty key.
    let first_of = |token: i64| PartitionPosition { token, key: Bytes::new() };
    let after = |token: i64| token.checked_add(1).map_or(Bound::Unbounded, |t| Bound::Included(first_of(t)));
    let through = |token: i64| token.checked_add(1).map_or(Bound::Unbounded, |t| Bound::Excluded(first_of(t)));
    if start < end {
        return vec![(after(start), through(end))];
    }
    let mut pieces = Vec::new();
    if start < i64::MAX {
        pieces.push((after(start), Bound::Unbounded));
    }
    pieces.push((Bound::Unbounded, through(end)));
    pieces
}

/// Asks `host` to stream in what it gains by the change in progress, and
/// waits until it has (this node streams in itself, without a message).
pub(crate) async fn ask_to_stream(topology: &Topology, host: Uuid) -> Result<(), CoordinatorError> {
    if host == topology.me {
        return stream_in().await.map(drop);
    }
    let endpoint =
        topology.endpoint(host).ok_or_else(|| CoordinatorError::Remote(format!("node {host} left the cluster")))?;
    let answer = messaging::request(endpoint.address, 0, Verb::Stream, &[])
        .await
        .map_err(|e| CoordinatorError::Remote(format!("node {host} did not stream: {e}")))?;
    crate::target::answer_body(endpoint.address, answer).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_ranges_become_partition_bounds() {
        let first = |t| PartitionPosition { token: t, key: Bytes::new() };
        assert_eq!(token_bounds(5, 9), vec![(Bound::Included(first(6)), Bound::Excluded(first(10)))]);
        assert_eq!(
            token_bounds(9, 5),
            vec![(Bound::Included(first(10)), Bound::Unbounded), (Bound::Unbounded, Bound::Excluded(first(6)))]
        );
        assert_eq!(token_bounds(i64::MAX, 5), vec![(Bound::Unbounded, Bound::Excluded(first(6)))]);
        assert_eq!(token_bounds(1, i64::MAX), vec![(Bound::Included(first(2)), Bound::Unbounded)]);
    }
}
