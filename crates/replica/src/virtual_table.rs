//! A table kept in memory outside any shard's database, for rows a front
//! end generates when they are read (the system tables that describe the
//! node and the schema). It is read by the ordinary read path, so
//! restrictions, filtering, limits and paging serve it unchanged.

use std::sync::Arc;

use shoal_schema::TableMeta;
use shoal_storage::{PartitionPosition, PartitionUpdate, Table, TableOptions};

use crate::read::{self, ReadCommand, ReadResult};
use crate::ReplicaError;

pub struct VirtualTable {
    meta: Arc<TableMeta>,
    table: Table,
}

impl VirtualTable {
    pub fn new(meta: Arc<TableMeta>) -> VirtualTable {
        // In memory only: no directory, never flushed.
        VirtualTable { meta, table: Table::new(std::path::PathBuf::new(), 0, TableOptions::default()) }
    }

    pub fn insert(&self, position: PartitionPosition, update: PartitionUpdate) {
        self.table.apply(position, update, None);
    }

    pub async fn read(&self, command: &ReadCommand) -> Result<ReadResult, ReplicaError> {
        assert_eq!(command.table, self.meta.id, "a read of another table");
        read::execute(&self.meta, &self.table, command).await
    }
}
