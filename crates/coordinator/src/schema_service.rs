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
//! renamed over the old one, the directory synced.
//!
//! Once group 0 runs, the cluster agrees on every change before any node
//! applies it: the transition's result goes to group 0 as the next
//! schema's text ([`crate::schema_entry`]), built on the latest schema
//! entry this node applied. Every node applies agreed entries in log order
//! ([`apply_agreed`]: parse, persist, install everywhere, tell listeners),
//! so all install the same schemas, ids included, with versions that
//! follow from the log. A change built on a schema another change has
//! replaced is void; the transition runs again on the new schema.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures_util::lock::Mutex;
use futures_util::FutureExt;
use shoal_cluster::group0;
use shoal_io::IoClass;
use shoal_runtime::submit_to;
use shoal_schema::{Schema, SchemaChange};

use crate::schema::{schema, set_schema_everywhere};
use crate::CoordinatorError;

/// Where the schema is kept, and how it is written.
struct SchemaFile {
    path: PathBuf,
    render: fn(&Schema) -> String,
    parse: fn(&str) -> Result<Schema, String>,
}

static SCHEMA_FILE: OnceLock<SchemaFile> = OnceLock::new();

thread_local! {
    /// Serializes schema changes on shard 0: each builds on the last one's result.
    static DDL_LOCK: Arc<Mutex<()>> = Arc::new(Mutex::new(()));
}

/// How many times a change is built again because others came first.
const AGREEMENT_ATTEMPTS_MAX: usize = 10;

/// Keeps the schema in `path`, as `render` writes it and `parse` reads it
/// back; call once at start. Without it (tests), schema changes are not
/// persisted nor agreed through group 0.
pub fn set_schema_file(path: PathBuf, render: fn(&Schema) -> String, parse: fn(&str) -> Result<Schema, String>) {
    // A second call (several nodes in one test process) keeps the first.
    let _ = SCHEMA_FILE.set(SchemaFile { path, render, parse });
}

/// The outcome of a transition: the next schema and the change to
/// announce, or `None` when the statement changes nothing (IF NOT EXISTS).
pub type Transition = Option<(Schema, SchemaChange)>;

/// Runs `transition` on shard 0 under the DDL lock, persists and installs
/// its result everywhere, and returns the change. The transition's own
/// error (an invalid statement) comes back as the inner `Err`.
pub async fn announce_schema_change<F, E>(transition: F) -> Result<Result<Option<SchemaChange>, E>, CoordinatorError>
where
    F: Fn(&Schema) -> Result<Transition, E> + Send + 'static,
    E: Send + 'static,
{
    submit_to(0, move || async move {
        let lock = DDL_LOCK.with(Arc::clone);
        let _guard = lock.lock().await;
        match (group0::schema_index(), SCHEMA_FILE.get()) {
            (Some(_), Some(file)) => agree(file, transition).await,
            _ => apply_here(transition).await,
        }
    })
    .await?
}

/// As [`announce_schema_change`], and returns only once every node the
/// failure detector finds up has installed this node's schema too (group
/// 0's [`group0::barrier`]; a node that is down installs it before it
/// serves again). For changes that must hold on the next statement on any
/// node, not only this one: a REVOKE, a role losing LOGIN or SUPERUSER.
/// The plain announce answers once this node applied the change, and a
/// follower may apply it a round trip later.
pub async fn announce_schema_change_everywhere<F, E>(
    transition: F,
) -> Result<Result<Option<SchemaChange>, E>, CoordinatorError>
where
    F: Fn(&Schema) -> Result<Transition, E> + Send + 'static,
    E: Send + 'static,
{
    let outcome = announce_schema_change(transition).await?;
    // Waited for even when the statement changed nothing: an earlier
    // change it depends on may still be on its way to the others.
    if outcome.is_ok() {
        wait_installed_everywhere().await?;
    }
    Ok(outcome)
}

/// Waits until every live member applied the latest schema entry this
/// node applied; at once without group 0 (one node, tests).
async fn wait_installed_everywhere() -> Result<(), CoordinatorError> {
    submit_to(0, || async {
        match (group0::schema_index(), SCHEMA_FILE.get()) {
            (Some(index), Some(_)) => group0::barrier(index, None).await.map_err(CoordinatorError::SchemaAgreement),
            _ => Ok(()),
        }
    })
    .await?
}

/// Has group 0 agree on the transition's result, building it again when
/// another change came first; returns once this node applied it.
async fn agree<F, E>(file: &SchemaFile, transition: F) -> Result<Result<Option<SchemaChange>, E>, CoordinatorError>
where
    F: Fn(&Schema) -> Result<Transition, E>,
{
    for _ in 0..AGREEMENT_ATTEMPTS_MAX {
        // The schema installed here is the one of this entry: the applier
        // installs it before group 0 counts the entry as applied.
        let base_index = group0::schema_index().unwrap_or(0);
        let (next, change) = match transition(&schema()) {
            Ok(Some(next)) => next,
            Ok(None) => return Ok(Ok(None)),
            Err(e) => return Ok(Err(e)),
        };
        let payload = crate::schema_entry::encode(&change, &(file.render)(&next));
        if group0::propose_schema(base_index, payload).await.map_err(CoordinatorError::SchemaAgreement)? {
            return Ok(Ok(Some(change)));
        }
    }
    Err(CoordinatorError::SchemaAgreement(format!(
        "other schema changes came first {AGREEMENT_ATTEMPTS_MAX} times in a row; try again"
    )))
}

/// Group 0's [`group0::SchemaApplier`]: installs the schema of an agreed
/// entry, unless this node holds it already (a replayed log).
pub fn schema_applier() -> group0::SchemaApplier {
    std::rc::Rc::new(|index, payload| apply_agreed(index, payload).boxed_local())
}

async fn apply_agreed(index: u64, payload: Bytes) {
    if schema().group0_index().is_some_and(|held| held >= index) {
        return;
    }
    let Some(file) = SCHEMA_FILE.get() else { return };
    let decoded = crate::schema_entry::decode(&payload).and_then(|(change, text)| Ok(((file.parse)(&text)?, change)));
    let (mut next, change) = match decoded {
        Ok(decoded) => decoded,
        Err(e) => {
            tracing::error!("group 0 schema entry {index} cannot be installed: {e}");
            return;
        }
    };
    next.version = Schema::version_at(index);
    if let Err(e) = save(file, &next).await {
        // Installed all the same: the log holds the entry, and a restart
        // applies it again over the older file.
        tracing::error!("group 0 schema entry {index}: {e}");
    }
    if let Err(e) = set_schema_everywhere(Arc::new(next), Some(change)).await {
        tracing::error!("group 0 schema entry {index}: {e}");
    }
}

/// Applies the transition on this node alone (no group 0: tests).
async fn apply_here<F, E>(transition: F) -> Result<Result<Option<SchemaChange>, E>, CoordinatorError>
where
    F: Fn(&Schema) -> Result<Transition, E>,
{
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
