//! The vocabulary of the coordinator's API: what front ends send (mutations,
//! read commands) and get back (rows).
//!
//! These types are defined by the layers that apply them — a partition
//! update by `storage`, a read command and its rows by `replica` — and are
//! named here, so a front end (`cql`, `memcache`) depends on the
//! coordinator alone and never reaches a replica or the storage engine
//! itself.

pub use shoal_replica::{
    Arith, CasRequest, CasResult, CheckOp, CheckedPart, ColumnCheck, Fetch, FilterOp, Item, ItemLruStats, ItemOp,
    ItemOutcome, ItemTable, Lifetime, ListOp, ListOpKind, Mutation, PartitionSelection, ReadCommand, ReadResult,
    ResultCell, ResultRow, RowCheck, RowCondition, RowFilter, RowPosition, ShortStop, Store, StoreMode, VirtualTable,
};
pub use shoal_storage::{
    Cell, CellValue, ClusteredRow, ClusteringRange, Collection, CollectionCell, ColumnData, Expiry, Partition,
    PartitionPosition, PartitionUpdate, RangeTombstone, Row, RowMarker, Tombstone,
};
