//! The per-shard storage engine: what one shard keeps of its tables, in
//! memory and on disk (docs/design.md §4).
//!
//! The data model is Cassandra's: a partition (found by token, then key)
//! holds a static row and clustered rows sorted by an order-preserving
//! encoding of their clustering key; every cell carries its write timestamp
//! and optional expiry; deletions are tombstones (cell, collection, row,
//! clustering range, partition). A write is a [`PartitionUpdate`] merged
//! into what is stored, so memtables, SSTables and compaction all merge the
//! same way.
//!
//! The engine is an LSM tree per table per shard: writes go to the shard's
//! [`commitlog`] and a [`memtable`]; full memtables are flushed to immutable
//! [`sstable`]s; [`compaction`] merges SSTables. Reads of partitions the
//! SSTables hold are served from the shard's row [`cache`] where it has
//! them, within the shard's [`memory`] budget. Nothing here is shared
//! between shards, and all file I/O goes through `shoal-io` (io_uring).
//!
//! This crate never interprets values: it compares cells by timestamp and
//! keys by bytes. Types live in the layers above.

pub mod background_metrics;
pub mod cache;
pub mod codec;
pub mod commitlog;
pub mod compaction;
pub mod counter;
pub mod error;
mod event;
pub mod found;
pub mod memory;
pub mod memtable;
pub mod partition;
mod single_row;
pub mod sstable;
pub mod table;

pub use counter::CounterShard;
pub use error::{StorageError, StorageResult};
pub use event::Event;
pub use found::{Found, FoundRef, RowHeader, RowRef, SharedRow, SharedValue};
pub use partition::{
    Cell, CellValue, ClusteredRow, ClusteringRange, Collection, CollectionCell, ColumnData, Expiry, Partition,
    PartitionPosition, PartitionUpdate, RangeTombstone, Row, RowMarker, Tombstone,
};
pub use single_row::{RowCells, Value as RowValue};
pub use table::{Table, TableOptions};
