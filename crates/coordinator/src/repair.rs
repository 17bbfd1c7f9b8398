//! Repair (`nodetool repair`): brings the replicas of every range this
//! node holds in line, moving only the rows that differ (ScyllaDB's
//! row-level repair).
//!
//! For each range of the ring this node replicates, and each table of the
//! keyspace:
//! 1. every replica answers the hashes of its stored partitions in the
//!    range — position and a hash of the partition as stored, page by page
//!    from each of its shards (`RepairHashes`);
//! 2. of the partitions whose hashes differ, every replica answers the
//!    hashes of each row, and of the rest (partition tombstone, static
//!    row, range tombstones) apart (`RepairRowHashes`, [`RowHashes`]);
//! 3. where that rest is alike everywhere, only the rows whose hashes
//!    differ, or that some replica lacks, are read from every replica as
//!    stored, merged, and the merge written to each replica whose copy
//!    differs ([`reconcile`], as read repair does); a partition some
//!    replica lacks, or whose rest differs, is reconciled whole.
//!
//! Every replica of a range must be up. Counter tables are repaired like
//! the rest: their cells merge by their replicas' shards.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use futures_util::future::join_all;
use futures_util::{stream, StreamExt};
use shoal_cluster::messaging;
use shoal_cluster::verb::Verb;
use shoal_replica::ReadCommand;
use shoal_runtime::submit_to;
use shoal_storage::{ClusteringRange, PartitionPosition};
use uuid::Uuid;

use crate::read_executor::reconcile;
use crate::schema::schema;
use crate::streaming::{decode_read, scan_page, token_bounds};
use crate::target::{answer_body, Target};
use crate::timeouts::{deadline, timeouts};
use crate::topology::{topology, Topology};
use crate::wire::{self, HashPage, RowHashes, StreamRead};
use crate::CoordinatorError;

/// About how many bytes of partitions one page of hashes covers.
const HASHED_BYTES_PER_PAGE: usize = 4 << 20;
/// Partitions reconciled at once (row hashes asked in one message; rows
/// of that many partitions reconciled concurrently).
const RECONCILE_KEYS: usize = 128;

/// What a repair did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Repaired {
    /// Ranges of tables compared.
    pub ranges: usize,
    /// Partitions whose hashes were compared.
    pub partitions: usize,
    /// Partitions that differed somewhere.
    pub differing: usize,
    /// Of those, the ones reconciled whole (missing somewhere, or their
    /// partition tombstone, static row or range tombstones differed).
    pub whole: usize,
    /// Rows that differed in the others: the only rows reconciled there.
    pub rows: usize,
    /// Copies written to bring replicas in line.
    pub written: usize,
}

/// The hashes of a page of this shard's partitions of a table in a range.
pub(crate) async fn serve_hashes(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    Ok(wire::encode_hash_page(&hash_page(decode_read(&payload)?).await?))
}

async fn hash_page(read: StreamRead) -> Result<HashPage, CoordinatorError> {
    let page = scan_page(read, HASHED_BYTES_PER_PAGE).await?;
    let hashes = page.partitions.iter().map(|(position, p)| (position.clone(), wire::partition_hash(p))).collect();
    Ok(HashPage { hashes, more: page.more })
}

/// Repairs every table of `keyspace` (every keyspace: `None`) over the
/// ranges this node replicates; call on any shard.
pub async fn repair(keyspace: Option<&str>) -> Result<Repaired, CoordinatorError> {
    let topology = topology();
    let schema = schema();
    let mut total = Repaired::default();
    for meta in schema.keyspaces.values().filter(|k| keyspace.is_none_or(|name| k.name == name)) {
        let map = topology.replica_map(meta);
        for (start, end) in topology.vnode_ranges() {
            let replicas = map.replicas(end);
            if replicas.len() < 2 || !replicas.contains(&topology.me) {
                continue;
            }
            if let Some(down) = replicas.iter().find(|host| !topology.is_up(**host)) {
                return Err(CoordinatorError::NodeOperation(format!(
                    "replica {down} of tokens ({start}, {end}] in keyspace {} is down: repair needs every replica up",
                    meta.name
                )));
            }
            for table in meta.tables.values() {
                let repaired = repair_range(&topology, table.id, (start, end), &replicas).await?;
                total.ranges += 1;
                total.partitions += repaired.partitions;
                total.differing += repaired.differing;
                total.whole += repaired.whole;
                total.rows += repaired.rows;
                total.written += repaired.written;
            }
        }
    }
    tracing::info!(
        "repair of {}: {} range(s) of tables, {} partition(s) compared, {} differed ({} whole, {} row(s) in the \
         others), {} cop(ies) written",
        keyspace.unwrap_or("every keyspace"),
        total.ranges,
        total.partitions,
        total.differing,
        total.whole,
        total.rows,
        total.written
    );
    Ok(total)
}

/// Compares one table's range on its replicas and reconciles what differs.
async fn repair_range(
    topology: &Topology,
    table: Uuid,
    (start, end): (i64, i64),
    replicas: &[Uuid],
) -> Result<Repaired, CoordinatorError> {
    // Each partition's hash on each replica (`None`: the replica lacks it).
    let mut hashes: BTreeMap<PartitionPosition, Vec<Option<u128>>> = BTreeMap::new();
    for (i, host) in replicas.iter().enumerate() {
        for (position, hash) in replica_hashes(topology, *host, table, start, end).await? {
            hashes.entry(position).or_insert_with(|| vec![None; replicas.len()])[i] = Some(hash);
        }
    }
    let partitions = hashes.len();
    let differing: Vec<PartitionPosition> = hashes
        .into_iter()
        .filter(|(_, per_replica)| per_replica.iter().any(|h| h.is_none() || *h != per_replica[0]))
        .map(|(position, _)| position)
        .collect();
    let targets: Vec<Target<'_>> = replicas.iter().map(|host| Target { topology, host: *host }).collect();
    let mut repaired = Repaired { ranges: 1, partitions, differing: differing.len(), ..Repaired::default() };
    for keys in differing.chunks(RECONCILE_KEYS) {
        let command = ReadCommand::of_partitions(table, keys.to_vec(), vec![ClusteringRange::all()], 0);
        let hashes = join_all(targets.iter().map(|t| t.row_hashes(&command))).await;
        let hashes: Vec<Vec<Option<RowHashes>>> = hashes.into_iter().collect::<Result<_, _>>()?;
        let mut whole = Vec::new();
        let mut by_rows = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match differing_rows(hashes.iter().map(|per_replica| per_replica[i].as_ref())) {
                Some(rows) => by_rows.push((key.clone(), rows)),
                None => whole.push(key.clone()),
            }
        }
        repaired.whole += whole.len();
        if !whole.is_empty() {
            let command = ReadCommand::of_partitions(table, whole, vec![ClusteringRange::all()], 0);
            repaired.written += reconcile(&targets, &command, deadline(timeouts().range)).await?.written;
        }
        repaired.rows += by_rows.iter().map(|(_, rows)| rows.len()).sum::<usize>();
        let targets = &targets;
        let mut row_repairs = stream::iter(by_rows.into_iter().filter(|(_, rows)| !rows.is_empty()))
            .map(|(key, rows)| async move {
                let clustering = rows
                    .into_iter()
                    .map(|row| ClusteringRange { start: Bound::Included(row.clone()), end: Bound::Included(row) })
                    .collect();
                let command = ReadCommand::of_partitions(table, vec![key], clustering, 0);
                reconcile(targets, &command, deadline(timeouts().range)).await
            })
            .buffer_unordered(RECONCILE_KEYS);
        while let Some(reconciled) = row_repairs.next().await {
            repaired.written += reconciled?.written;
        }
    }
    Ok(repaired)
}

/// The clustering keys of the rows that differ between replicas' copies
/// of a partition, or `None` when it must be reconciled whole: some
/// replica lacks it, or the rest of it (tombstones, static row) differs.
fn differing_rows<'a>(copies: impl Iterator<Item = Option<&'a RowHashes>>) -> Option<Vec<Bytes>> {
    let copies: Vec<&RowHashes> = copies.collect::<Option<_>>()?;
    let first = copies.first()?;
    if copies.iter().any(|c| c.header != first.header) {
        return None;
    }
    // Each row's hash on each replica; a row differs where a replica's hash
    // is another, or missing.
    let mut rows: BTreeMap<&Bytes, Vec<u128>> = BTreeMap::new();
    for copy in &copies {
        for (key, hash) in &copy.rows {
            rows.entry(key).or_default().push(*hash);
        }
    }
    let differing = rows
        .into_iter()
        .filter(|(_, hashes)| hashes.len() < copies.len() || hashes.iter().any(|h| *h != hashes[0]))
        .map(|(key, _)| key.clone())
        .collect();
    Some(differing)
}

/// Every hash of `host`'s partitions of `table` in `(start, end]`, from
/// each of its shards.
async fn replica_hashes(
    topology: &Topology,
    host: Uuid,
    table: Uuid,
    start: i64,
    end: i64,
) -> Result<Vec<(PartitionPosition, u128)>, CoordinatorError> {
    let endpoint =
        topology.endpoint(host).ok_or_else(|| CoordinatorError::Remote(format!("node {host} left the cluster")))?;
    let mut all = Vec::new();
    for shard in 0..endpoint.shard_count {
        for (from, to) in token_bounds(start, end) {
            let mut read = StreamRead { table, from, to };
            loop {
                let page = if host == topology.me {
                    let read = read.clone();
                    submit_to(usize::from(shard), move || hash_page(read)).await??
                } else {
                    let payload = wire::encode_stream_read(&read);
                    let answer =
                        messaging::request(endpoint.address, shard, Verb::RepairHashes, &payload).await.map_err(
                            |e| CoordinatorError::Remote(format!("repair hashes from {}: {e}", endpoint.address)),
                        )?;
                    let body = answer_body(endpoint.address, answer)?;
                    wire::decode_hash_page(&body).map_err(|e| {
                        CoordinatorError::Remote(format!("repair hashes from {}: {e}", endpoint.address))
                    })?
                };
                let next = page.hashes.last().map(|(position, _)| std::ops::Bound::Excluded(position.clone()));
                all.extend(page.hashes);
                match next {
                    Some(from) if page.more => read.from = from,
                    _ => break,
                }
            }
        }
    }
    Ok(all)
}
