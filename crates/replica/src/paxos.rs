//! A replica's side of Paxos for conditional writes (Cassandra's
//! `PaxosState`, ScyllaDB's `paxos_state`): per partition, the highest
//! ballot promised, the last proposal accepted and the ballot of the last
//! commit, kept durable in an internal table so a replica that restarts
//! still honours what it promised.
//!
//! The state of a partition of table T lives in the internal paxos table
//! in the partition of the same key (so on the same shard), in the row
//! whose clustering key is T's id. Its three values are cells, each
//! written at its ballot's timestamp: the storage engine's last-write-wins
//! merge then keeps the highest ballot whatever order writes, flushes and
//! compactions take. A tie of timestamps falls to the larger value, and every value
//! starts with its ballot's bytes, which order as ballots do. The cells
//! expire after the table's `gc_grace_seconds`, at least three hours, as
//! Cassandra's do.
//!
//! A prepare, accept or commit of a partition holds the state's partition
//! lock from its read to its write: two rounds cannot interleave on one
//! shard between a check and its record.

use std::ops::Bound;
use std::path::Path;

use bytes::Bytes;
use shoal_storage::codec::{self, DecodeError, Decoder, Encoder};
use shoal_storage::{
    Cell, ClusteredRow, ClusteringRange, ColumnData, Expiry, Partition, PartitionPosition, Row, TableOptions,
};
use uuid::Uuid;

use crate::database::check_token;
use crate::{Database, Mutation, ReplicaError};

/// The internal table holding every partition's Paxos state.
pub(crate) const PAXOS_TABLE: Uuid = Uuid::from_u128(0x7061_786f_735f_7374_6174_655f_0000_0001);

/// How long a state outlives its last write, at least (Cassandra's floor).
const STATE_TTL_MIN_S: i64 = 3 * 3600;

const PROMISED: u32 = 0;
const ACCEPTED: u32 = 1;
const COMMITTED: u32 = 2;

/// A Paxos ballot: a proposer's timestamp (µs, also the write timestamp of
/// what it commits) and its node, which makes ballots of two proposers
/// differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ballot {
    pub micros: i64,
    pub node: Uuid,
}

impl Ballot {
    pub const ZERO: Ballot = Ballot { micros: i64::MIN, node: Uuid::nil() };

    pub const ENCODED_BYTES: usize = 24;

    /// 24 bytes whose byte order is the ballots' order.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&((self.micros as u64) ^ (1 << 63)).to_be_bytes());
        out.extend_from_slice(self.node.as_bytes());
    }

    pub fn decode(d: &mut Decoder) -> Result<Ballot, DecodeError> {
        let micros = (d.fixed_i64()? as u64 ^ (1 << 63)) as i64;
        let node = Uuid::from_slice(d.slice(16)?).map_err(|_| d.error("bad ballot node"))?;
        Ok(Ballot { micros, node })
    }
}

/// A proposal a replica accepted: its ballot and the partition update.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub ballot: Ballot,
    /// Empty for a round that wrote nothing (a failed condition, a
    /// serial read): it settles earlier proposals and commits nothing.
    pub update: Partition,
}

/// A replica's answer to a prepare.
#[derive(Debug, Clone, PartialEq)]
pub struct Promise {
    /// Whether it promised the ballot; if not, `promised` is the higher
    /// ballot it had promised.
    pub promised: bool,
    pub promised_ballot: Ballot,
    pub accepted: Option<Proposal>,
    pub committed: Ballot,
    /// When asked and promised: the rows asked for as stored, read under
    /// the same lock as the promise (`None`: none stored, or not asked).
    pub data: Option<Partition>,
}

/// One partition's stored state.
#[derive(Debug, Default)]
struct State {
    promised: Option<Ballot>,
    accepted: Option<Proposal>,
    committed: Option<Ballot>,
}

impl Database {
    /// Promises `ballot` for the partition unless a higher or equal one was
    /// promised; answers what it accepted and committed either way, and,
    /// promised, the stored rows of `read` (Paxos's read rides on the
    /// prepare, as in ScyllaDB: the data is as of the commit it answers).
    pub async fn paxos_prepare(
        &self,
        table: Uuid,
        position: &PartitionPosition,
        ballot: Ballot,
        read: Option<&[ClusteringRange]>,
    ) -> Result<Promise, ReplicaError> {
        check_token(position)?;
        let _guard = self.lock_partition(PAXOS_TABLE, position.clone()).await?;
        let state = self.paxos_state(table, position).await?;
        let promised_before = state.promised.unwrap_or(Ballot::ZERO);
        let promised = ballot > promised_before;
        let mut data = None;
        if promised {
            self.record(table, position, ballot, &[(PROMISED, Vec::new())]).await?;
            if let Some(ranges) = read {
                data = self.read_raw(table, std::slice::from_ref(position), ranges).await?.pop().flatten();
            }
        }
        Ok(Promise {
            promised,
            promised_ballot: if promised { ballot } else { promised_before },
            accepted: state.accepted,
            committed: state.committed.unwrap_or(Ballot::ZERO),
            data,
        })
    }

    /// Accepts `proposal` unless a higher ballot was promised since.
    pub async fn paxos_accept(
        &self,
        table: Uuid,
        position: &PartitionPosition,
        proposal: Proposal,
    ) -> Result<bool, ReplicaError> {
        check_token(position)?;
        let _guard = self.lock_partition(PAXOS_TABLE, position.clone()).await?;
        let state = self.paxos_state(table, position).await?;
        if state.promised.unwrap_or(Ballot::ZERO) > proposal.ballot {
            return Ok(false);
        }
        let mut update = Vec::new();
        codec::encode_partition(&mut Encoder { out: &mut update }, &proposal.update);
        self.record(table, position, proposal.ballot, &[(PROMISED, Vec::new()), (ACCEPTED, update)]).await?;
        Ok(true)
    }

    /// Applies a chosen proposal's update to the table, then records its
    /// ballot as committed. Commits are never refused: what a quorum
    /// accepted is chosen, and applying it twice changes nothing.
    pub async fn paxos_commit(&self, mutation: Mutation, ballot: Ballot) -> Result<(), ReplicaError> {
        assert!(mutation.list_ops.is_empty(), "a proposal's list operations are resolved before it is proposed");
        let Mutation { table, position, update, .. } = mutation;
        check_token(&position)?;
        if update != Partition::default() {
            self.apply(table, position.clone(), update, &[]).await?;
        }
        let _guard = self.lock_partition(PAXOS_TABLE, position.clone()).await?;
        self.record(table, &position, ballot, &[(COMMITTED, Vec::new())]).await
    }

    async fn paxos_state(&self, table: Uuid, position: &PartitionPosition) -> Result<State, ReplicaError> {
        let row = state_row(table);
        let range = ClusteringRange { start: Bound::Included(row.clone()), end: Bound::Included(row.clone()) };
        let stored = self.table(PAXOS_TABLE)?.read(position, &[range]).await?;
        let now_s = shoal_runtime::clock::now_s();
        let mut state = State::default();
        let Some(stored) = stored.as_ref().and_then(|p| p.rows.get(&row)) else { return Ok(state) };
        for (column, data) in &stored.row.columns {
            let ColumnData::Atomic(cell) = data else { continue };
            let Some(value) = cell.live_value(now_s) else { continue };
            let corrupt = |e: DecodeError| ReplicaError::Corrupt(format!("paxos state: {e}"));
            let mut d = Decoder::new(&value);
            let ballot = Ballot::decode(&mut d).map_err(corrupt)?;
            match *column {
                PROMISED => state.promised = Some(ballot),
                COMMITTED => state.committed = Some(ballot),
                ACCEPTED => {
                    let update = codec::decode_partition(&mut d).map_err(corrupt)?;
                    state.accepted = Some(Proposal { ballot, update });
                }
                _ => {}
            }
        }
        Ok(state)
    }

    /// Writes values of a partition's state, each `ballot` then the bytes
    /// given for its column, durably (through the commitlog) before it
    /// returns.
    async fn record(
        &self,
        table: Uuid,
        position: &PartitionPosition,
        ballot: Ballot,
        values: &[(u32, Vec<u8>)],
    ) -> Result<(), ReplicaError> {
        let ttl_s = self
            .schema()
            .table_by_id(table)
            .map_or(0, |meta| i64::from(meta.options.gc_grace_seconds))
            .max(STATE_TTL_MIN_S);
        // From the ballot, not this node's clock: two replicas writing the
        // same ballot write the same cell.
        let expiry = Expiry { ttl_s: ttl_s as i32, expires_at_s: ballot.micros.div_euclid(1_000_000) + ttl_s };
        let mut row = Row::default();
        for (column, rest) in values {
            let mut value = Vec::with_capacity(Ballot::ENCODED_BYTES + rest.len());
            ballot.encode(&mut value);
            value.extend_from_slice(rest);
            let cell = Cell::live(ballot.micros, Bytes::from(value), Some(expiry));
            row.columns.insert(*column, ColumnData::Atomic(cell));
        }
        let key = state_row(table);
        let mut update = Partition::default();
        update.rows.insert(key.clone(), ClusteredRow { clustering: vec![key], row });
        self.apply_unsynced(PAXOS_TABLE, position.clone(), update, &[]).await?.durable().await
    }
}

/// The clustering key of a partition's state row: its table's id.
fn state_row(table: Uuid) -> Bytes {
    Bytes::copy_from_slice(table.as_bytes())
}

/// How the internal paxos table is stored: tombstones (none are written)
/// need no grace, and expired states go at the next compaction.
pub(crate) fn table_options() -> TableOptions {
    TableOptions { gc_grace_s: 0, ..TableOptions::default() }
}

/// The internal paxos table's directory under `data_dir`.
pub(crate) fn table_dir(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("system").join(format!("paxos-{}", PAXOS_TABLE.simple()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ballot_bytes_order_as_ballots() {
        let node_a = Uuid::from_u128(1);
        let node_b = Uuid::from_u128(2);
        let ballots = [
            Ballot::ZERO,
            Ballot { micros: -5, node: node_b },
            Ballot { micros: 0, node: node_a },
            Ballot { micros: 7, node: node_a },
            Ballot { micros: 7, node: node_b },
            Ballot { micros: i64::MAX, node: node_a },
        ];
        for pair in ballots.windows(2) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            pair[0].encode(&mut a);
            pair[1].encode(&mut b);
            assert!(pair[0] < pair[1] && a < b, "{pair:?}");
            assert_eq!(a.len(), Ballot::ENCODED_BYTES);
            assert_eq!(Ballot::decode(&mut Decoder::new(&a)), Ok(pair[0]));
        }
    }
}
