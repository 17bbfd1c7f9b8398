//! The schema's single writer: shard 0 applies schema changes one at a
//! time, writes the new schema to disk, installs it on every shard, and
//! only then answers — so a client told of a change can use the new
//! schema on any connection, and a restart finds every acknowledged change.
//!
//! A front end describes a change as a transition: a pure function from
//! the current schema to the next (CQL's `ddl::apply`), run here under the
//! DDL lock. What the schema file says is the front end's format too (CQL
//! text, registered at start with [`set_schema_file`]); this module only
//! writes it durably, through the `io` layer: a temporary file, synced,
//! renamed over the old one, the directory synced. With a cluster, the
//! transition is what gets agreed (Raft) before it applies.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use futures_util::lock::Mutex;
use shoal_io::IoClass;
use shoal_runtime::submit_to;
use shoal_schema::{Schema, SchemaChange};

use crate::schema::{schema, set_schema_everywhere};
use crate::CoordinatorError;

/// Where the schema is kept, and how it is written.
struct SchemaFile {
    path: PathBuf,
    render: fn(&Schema) -> String,
}

static SCHEMA_FILE: OnceLock<SchemaFile> = OnceLock::new();

thread_local! {
    /// Serializes schema changes on shard 0: each builds on the last one's result.
    static DDL_LOCK: Arc<Mutex<()>> = Arc::new(Mutex::new(()));
}

/// Keeps the schema in `path`, as `render` writes it; call once at start.
/// Without it (tests), schema changes are not persisted.
pub fn set_schema_file(path: PathBuf, render: fn(&Schema) -> String) {
    // A second call (several nodes in one test process) keeps the first.
    let _ = SCHEMA_FILE.set(SchemaFile { path, render });
}

/// The outcome of a transition: the next schema and the change to
/// announce, or `None` when the statement changes nothing (IF NOT EXISTS).
pub type Transition = Option<(Schema, SchemaChange)>;

/// Runs `transition` on shard 0 under the DDL lock, persists and installs
/// its result everywhere, and returns the change. The transition's own
/// error (an invalid statement) comes back as the inner `Err`.
pub async fn announce_schema_change<F, E>(transition: F) -> Result<Result<Option<SchemaChange>, E>, CoordinatorError>
where
    F: FnOnce(&Schema) -> Result<Transition, E> + Send + 'static,
    E: Send + 'static,
{
    submit_to(0, move || apply_on_shard_zero(transition)).await?
}

async fn apply_on_shard_zero<F, E>(transition: F) -> Result<Result<Option<SchemaChange>, E>, CoordinatorError>
where
    F: FnOnce(&Schema) -> Result<Transition, E>,
{
    let lock = DDL_LOCK.with(Arc::clone);
    let _guard = lock.lock().await;
    let current = schema();
    let (next, change) = match transition(&current) {
        Ok(Some(next)) => next,
        Ok(None) => return Ok(Ok(None)),
        Err(e) => return Ok(Err(e)),
    };
    assert_ne!(next.version, current.version, "a schema change gets a new version");
    if let Some(file) = SCHEMA_FILE.get() {
        save(file, &next).await?;
    }
    set_schema_everywhere(Arc::new(next), Some(change.clone())).await?;
    Ok(Ok(Some(change)))
}

/// Writes the schema durably: a temporary file, synced, renamed over the
/// old one, and the rename made durable.
async fn save(file: &SchemaFile, schema: &Schema) -> Result<(), CoordinatorError> {
    let text = (file.render)(schema);
    let tmp = file.path.with_extension("cql.tmp");
    shoal_io::replace_durably(&file.path, &tmp, text.into_bytes(), IoClass::Maintenance)
        .await
        .map_err(|e| CoordinatorError::SchemaFile(e.to_string()))
}
