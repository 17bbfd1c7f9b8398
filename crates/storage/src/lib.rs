//! The per-shard storage engine: what one shard keeps of one table.
//!
//! The data model is Cassandra's: a partition (found by token, then key)
//! holds a static row and clustered rows sorted by an order-preserving
//! encoding of their clustering key; every cell carries its write timestamp
//! and optional expiry; deletions are tombstones (cell, collection, row,
//! clustering range, partition). A write is a [`PartitionUpdate`] that is
//! merged into what is stored, so writes and reads share one shape and any
//! number of sources (memtables now, SSTables later) merge the same way.
//!
//! This crate never interprets values: it compares cells by timestamp and
//! keys by bytes. Types live in the layers above.
//!
//! Today a table is one memtable (data does not survive restart); the
//! interface in [`table`] is the one the LSM engine keeps.

pub mod memtable;
pub mod partition;
pub mod table;

pub use partition::{
    Cell, CellValue, ClusteredRow, ClusteringRange, Collection, CollectionCell, ColumnData, Expiry, Partition,
    PartitionPosition, PartitionUpdate, RangeTombstone, Row, RowMarker, Tombstone,
};
pub use table::Table;
