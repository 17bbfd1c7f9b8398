//! The CQL table memcached items live in, so CQL reads what memcached
//! clients write: `key blob PRIMARY KEY, value blob, flags bigint, cas
//! bigint`, an item's expiry being its cells' TTL. The node creates it at
//! start (the CQL text is here, run by the wiring through the schema
//! service); this module finds it in the shard's schema snapshot.

use std::sync::Arc;

use shoal_coordinator::data::ItemTable;
use shoal_schema::{ColumnKind, CqlType, Schema, TableMeta};

/// Where items live unless configured otherwise.
pub const DEFAULT_KEYSPACE: &str = "memcache";
pub const DEFAULT_TABLE: &str = "items";

/// The statements that create the items table if it is missing.
pub fn create_statements(keyspace: &str, table: &str) -> [String; 2] {
    [
        format!(
            "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.{table} (key blob PRIMARY KEY, value blob, flags bigint, cas bigint) \
             WITH comment = 'memcached items (Shoal memcached protocol)' AND gc_grace_seconds = 0"
        ),
    ]
}

/// Why the items table cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ItemsTableError {
    #[error("the items table {0}.{1} does not exist")]
    Missing(String, String),
    #[error("the items table {0}.{1} must have columns key blob PRIMARY KEY, value blob, flags bigint, cas bigint")]
    WrongShape(String, String),
}

/// Resolves the items table in `schema`, remembering the answer for the
/// schema version it came from.
pub struct ItemsTable {
    keyspace: String,
    table: String,
    resolved: Option<(uuid::Uuid, Result<ItemTable, ItemsTableError>)>,
}

impl ItemsTable {
    pub fn new(keyspace: &str, table: &str) -> ItemsTable {
        ItemsTable { keyspace: keyspace.to_string(), table: table.to_string(), resolved: None }
    }

    pub fn get(&mut self, schema: &Arc<Schema>) -> Result<ItemTable, ItemsTableError> {
        match &self.resolved {
            Some((version, result)) if *version == schema.version => result.clone(),
            _ => {
                let result = self.resolve(schema);
                self.resolved = Some((schema.version, result.clone()));
                result
            }
        }
    }

    fn resolve(&self, schema: &Schema) -> Result<ItemTable, ItemsTableError> {
        let (keyspace, table) = (self.keyspace.clone(), self.table.clone());
        let meta = schema
            .table(&self.keyspace, &self.table)
            .ok_or(ItemsTableError::Missing(keyspace.clone(), table.clone()))?;
        let wrong = || ItemsTableError::WrongShape(keyspace.clone(), table.clone());
        let key_is_one_blob = meta.partition_key_len() == 1
            && meta.clustering_key().count() == 0
            && meta.partition_key().all(|c| c.ty == CqlType::Blob);
        if !key_is_one_blob {
            return Err(wrong());
        }
        let column = |name: &str, ty: CqlType| column_id(meta, name, ty).ok_or_else(wrong);
        Ok(ItemTable {
            id: meta.id,
            value: column("value", CqlType::Blob)?,
            flags: column("flags", CqlType::Bigint)?,
            cas: column("cas", CqlType::Bigint)?,
        })
    }
}

fn column_id(meta: &TableMeta, name: &str, ty: CqlType) -> Option<u32> {
    let column = meta.column(name)?;
    (column.kind == ColumnKind::Regular && column.ty == ty).then_some(column.id)
}
