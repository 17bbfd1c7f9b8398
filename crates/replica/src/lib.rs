//! The replica: one shard's share of the database.
//!
//! Each shard holds a [`Database`]: its own copy of the current schema
//! snapshot, its commitlog and, for every table, the storage engine's
//! [`shoal_storage::Table`] for the tokens this shard owns. Only the owning
//! shard's thread touches it (it lives in a thread-local, reached with
//! [`local`]); other shards reach it through the coordinator, by message.
//!
//! The replica answers what is asked of one shard: apply this partition
//! update, read these partitions or this token range with these clustering
//! ranges, filters and limits; flush, compact, snapshot. Choosing the shard
//! (and later the replicas and consistency level) is the coordinator's job,
//! above.

mod cas;
mod compaction_control;
mod counter_leader;
mod database;
mod filter;
mod item;
mod item_access;
mod item_cas;
mod item_lru;
mod item_read;
mod like;
mod list_ops;
mod metrics;
mod mutation;
mod partition_lock;
mod paxos;
mod read;
mod recovery;
mod runtime_stats;
mod share_control;
mod shared_row;
mod token_hash;
mod tombstone_limit;
mod top_partitions;
mod view_update;
mod virtual_table;
mod warm_restart;
mod write_gate;

pub use cas::{CasRequest, CasResult, CheckOp, CheckedPart, ColumnCheck, RowCheck, RowCondition};
pub use compaction_control::{CompactionStatus, CompactionsReport};
pub use database::{local, Database, ReplicaError, SchemaListener, StorageConfig, ViewSink};
pub use filter::{FilterOp, RowFilter};
pub use item::{
    Arith, Fetch, Item, ItemOp, ItemOutcome, ItemRun, ItemTable, ItemWrite, Lifetime, Store, StoreMode, Tokens,
};
pub use item_access::Access;
pub use item_lru::{ItemLruStats, ITEM_HEADER_BYTES};
pub use list_ops::{ListOp, ListOpKind};
pub use mutation::Mutation;
pub use partition_lock::PartitionGuard;
pub use paxos::{Ballot, Promise, Proposal};
pub use read::{
    ElementStamp, PartitionSelection, ReadCommand, ReadResult, ResultCell, ResultRow, RowPosition, ShortStop,
};
pub use recovery::RecoveryReport;
pub use runtime_stats::RuntimeStats;
pub use share_control::StaticShares;
pub use top_partitions::{TopPartition, TopPartitions, CAPACITY_MAX as TOP_PARTITIONS_CAPACITY_MAX};
pub use view_update::{View, ViewKind};
pub use virtual_table::VirtualTable;
