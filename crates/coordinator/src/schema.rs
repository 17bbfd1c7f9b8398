//! The schema as a front end sees it: this shard's snapshot, and
//! subscriptions to its changes. Every shard sees the same sequence of
//! snapshots: only shard 0 changes the schema, and it installs each
//! snapshot on all shards before the change is answered.

use std::sync::Arc;

use shoal_runtime::this_shard;
use shoal_schema::{Schema, SchemaChange};

use crate::shards::on_every_shard;
use crate::CoordinatorError;

/// This shard's current schema snapshot.
pub fn schema() -> Arc<Schema> {
    shoal_replica::local().schema()
}

/// Told about every schema change this shard applies (e.g. a connection
/// registered for SCHEMA_CHANGE events).
pub use shoal_replica::SchemaListener;

/// Subscribes `listener` to this shard's schema changes; the id
/// unsubscribes it.
pub fn subscribe_schema_changes(listener: SchemaListener) -> u64 {
    shoal_replica::local().add_schema_listener(listener)
}

pub fn unsubscribe_schema_changes(id: u64) {
    shoal_replica::local().remove_schema_listener(id);
}

/// Installs `schema` on every shard, then returns. Called on shard 0 only.
pub async fn set_schema_everywhere(schema: Arc<Schema>, change: Option<SchemaChange>) -> Result<(), CoordinatorError> {
    assert_eq!(this_shard(), 0, "only shard 0 changes the schema");
    on_every_shard(move |_| {
        let schema = Arc::clone(&schema);
        let change = change.clone();
        async move { shoal_replica::local().set_schema(schema, change.as_ref()) }
    })
    .await?;
    Ok(())
}
