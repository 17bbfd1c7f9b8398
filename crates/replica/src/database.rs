//! The shard-local database: schema copy, tables, schema-change listeners.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use shoal_schema::{Schema, SchemaChange};
use shoal_storage::{ClusteringRange, PartitionPosition, PartitionUpdate, Table};
use thiserror::Error;
use uuid::Uuid;

use crate::list_ops::{self, ListOp};
use crate::read::{self, ReadCommand, ReadResult};

#[derive(Debug, Error)]
pub enum ReplicaError {
    #[error("table {0} does not exist (it may have been dropped)")]
    NoSuchTable(Uuid),
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
    /// The request cannot apply to the data as it is (e.g. a list index
    /// past the end).
    #[error("{0}")]
    Invalid(String),
}

/// Told about every schema change this shard applies (e.g. connections
/// registered for SCHEMA_CHANGE events).
pub type SchemaListener = Box<dyn Fn(&SchemaChange)>;

pub struct Database {
    schema: RefCell<Arc<Schema>>,
    tables: RefCell<HashMap<Uuid, Table>>,
    listeners: RefCell<Vec<(u64, SchemaListener)>>,
    next_listener_id: std::cell::Cell<u64>,
}

thread_local! {
    static LOCAL: Rc<Database> = Rc::new(Database::new());
}

/// This shard's database.
pub fn local() -> Rc<Database> {
    LOCAL.with(Rc::clone)
}

impl Database {
    fn new() -> Database {
        Database {
            schema: RefCell::new(Arc::new(Schema::empty())),
            tables: RefCell::new(HashMap::new()),
            listeners: RefCell::new(Vec::new()),
            next_listener_id: std::cell::Cell::new(0),
        }
    }

    pub fn schema(&self) -> Arc<Schema> {
        Arc::clone(&self.schema.borrow())
    }

    /// Installs a new schema snapshot: creates storage for new tables, drops
    /// it for removed ones, then tells the listeners about `change`.
    pub fn set_schema(&self, schema: Arc<Schema>, change: Option<&SchemaChange>) {
        {
            let mut tables = self.tables.borrow_mut();
            tables.retain(|id, _| schema.table_by_id(*id).is_some());
            for table in schema.tables() {
                tables.entry(table.id).or_default();
            }
        }
        *self.schema.borrow_mut() = schema;
        if let Some(change) = change {
            for (_, listener) in self.listeners.borrow().iter() {
                listener(change);
            }
        }
    }

    /// Registers `listener`; the returned id removes it.
    pub fn add_schema_listener(&self, listener: SchemaListener) -> u64 {
        let id = self.next_listener_id.get();
        self.next_listener_id.set(id + 1);
        self.listeners.borrow_mut().push((id, listener));
        id
    }

    pub fn remove_schema_listener(&self, id: u64) {
        self.listeners.borrow_mut().retain(|(i, _)| *i != id);
    }

    /// Applies `update`, after adding the cells of list operations that
    /// depend on the partition's current contents.
    pub fn apply(
        &self,
        table: Uuid,
        position: PartitionPosition,
        mut update: PartitionUpdate,
        list_ops: &[ListOp],
    ) -> Result<(), ReplicaError> {
        let mut tables = self.tables.borrow_mut();
        let storage = tables.get_mut(&table).ok_or(ReplicaError::NoSuchTable(table))?;
        if !list_ops.is_empty() {
            let current = storage.read(&position, &[ClusteringRange::all()]);
            list_ops::resolve(current.as_ref(), list_ops, &mut update)?;
        }
        storage.apply(position, update);
        Ok(())
    }

    pub fn query(&self, command: &ReadCommand) -> Result<ReadResult, ReplicaError> {
        let schema = self.schema();
        let meta = schema.table_by_id(command.table).ok_or(ReplicaError::NoSuchTable(command.table))?;
        let tables = self.tables.borrow();
        let storage = tables.get(&command.table).ok_or(ReplicaError::NoSuchTable(command.table))?;
        read::execute(meta, storage, command)
    }

    pub fn truncate(&self, table: Uuid) -> Result<(), ReplicaError> {
        let mut tables = self.tables.borrow_mut();
        tables.get_mut(&table).ok_or(ReplicaError::NoSuchTable(table))?.truncate();
        Ok(())
    }

    /// Memory held by the memtables of this shard, for metrics.
    pub fn memtable_bytes(&self) -> usize {
        self.tables.borrow().values().map(Table::memory_used_bytes).sum()
    }
}
