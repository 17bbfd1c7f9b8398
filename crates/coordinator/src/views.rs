//! Views on the cluster (secondary indexes and materialized views): where a
//! base replica sends the view updates its writes make, and the building of
//! a new view from existing data.
//!
//! Pairing (ScyllaDB's): the base partition's replicas and the view
//! partition's replicas are both listed in ring order; a base replica that
//! is also a view replica updates its own copy, and otherwise the i-th base
//! replica (of those that hold no copy of the view partition) sends to the
//! i-th view replica (of those that hold no copy of the base partition).
//! So each view replica hears from one base replica, and with every base
//! replica doing so, the view gets as many copies as the base. A view
//! replica that cannot be reached gets the update as a hint.
//!
//! A base write is answered after its view updates were delivered (or
//! hinted): an index or view read right after a write sees it.
//!
//! Building: when a view is created, every shard of every node reads its
//! own base data, partition by partition, and sends the entries as view
//! updates, as writes do. A write racing the build is safe: see
//! `shoal_replica`'s view updates for why the timestamps make any order
//! agree. A shard that finished records it in a file beside the view's
//! SSTables ([`shoal_replica::Database::view_built_marker`]); at start,
//! each shard builds again the views it has no such record of (a build a
//! crash cut short), which is safe as building twice writes the same.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ops::Bound;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::join_all;
use shoal_replica::{Mutation, View};
use shoal_schema::{SchemaChange, SchemaChangeTarget};
use uuid::Uuid;

use shoal_io::IoClass;

use crate::local::mutate_local;
use crate::shards::on_every_shard;
use crate::target::Target;
use crate::timeouts::deadline;
use crate::topology::{placement, Topology};
use crate::{hints, wire, ConsistencyLevel, WriteType};

/// Partitions read per step of a view build.
const BUILD_STEP_PARTITIONS: usize = 64;
/// How long a view update may take before it is kept as a hint.
const VIEW_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

thread_local! {
    /// Views this shard has built or is building (by view table id).
    static KNOWN: RefCell<HashSet<Uuid>> = RefCell::new(HashSet::new());
    /// Views whose build is under way on this shard.
    static BUILDING: RefCell<HashSet<Uuid>> = RefCell::new(HashSet::new());
}

/// Installs the delivery of view updates and the building of new views on
/// the calling shard; call on every shard at start, once the starting
/// schema is installed (its views are built, or resumed by
/// [`resume_builds`]).
pub(crate) fn install() {
    let database = shoal_replica::local();
    database.set_view_sink(Rc::new(|base_token, updates| Box::pin(deliver(base_token, updates))));
    let schema = database.schema();
    let views = schema.tables().flat_map(|t| database.base_views(t.id)).map(|v| v.view.id);
    KNOWN.with(|known| known.borrow_mut().extend(views));
    database.add_schema_listener(Box::new(on_schema_change));
}

/// Builds, on every shard, the views of the starting schema that shard has
/// no record of having built (a build a crash cut short). Call once
/// storage is open.
pub async fn resume_builds() {
    let resumed = on_every_shard(|_| async {
        let database = shoal_replica::local();
        let schema = database.schema();
        for base in schema.tables() {
            for view in database.base_views(base.id) {
                let Some(marker) = database.view_built_marker(&view.view) else { continue };
                if !shoal_io::exists(&marker, IoClass::Maintenance).await.unwrap_or(false) {
                    tracing::info!("view {} was not built on this shard: building it", view.name());
                    start_build(base.id, view);
                }
            }
        }
    })
    .await;
    if let Err(e) = resumed {
        tracing::warn!("cannot resume view builds: {e}");
    }
}

/// Whether view `view_id` is being built on this shard.
pub fn is_building(view_id: Uuid) -> bool {
    BUILDING.with(|b| b.borrow().contains(&view_id))
}

/// Starts building the views a schema change added: indexes of a changed
/// table, or a created materialized view.
fn on_schema_change(change: &SchemaChange) {
    let SchemaChangeTarget::Table { keyspace, table } = &change.target else { return };
    let schema = shoal_replica::local().schema();
    let Some(changed) = schema.table(keyspace, table) else { return };
    let base = match &changed.materialized {
        Some(_) => changed.view_of.as_deref().and_then(|base| schema.table(keyspace, base)),
        None => Some(changed),
    };
    let Some(base) = base else { return };
    for view in shoal_replica::local().base_views(base.id) {
        if KNOWN.with(|known| known.borrow_mut().insert(view.view.id)) {
            start_build(base.id, view);
        }
    }
}

/// Builds view `view` of `base_id` from this shard's base data in the
/// background, and records once it is done.
fn start_build(base_id: Uuid, view: View) {
    BUILDING.with(|b| b.borrow_mut().insert(view.view.id));
    shoal_runtime::spawn(async move {
        // View building runs in the streaming scheduling group (ScyllaDB's
        // choice): its CPU and its reads of the base table take at most
        // that group's share beside the queries.
        let built = shoal_runtime::sched::in_group(shoal_runtime::Group::Streaming, build(base_id, &view)).await;
        match built {
            Ok(()) => record_built(&view).await,
            Err(e) => tracing::warn!("building view {} stopped: {e}", view.name()),
        }
        BUILDING.with(|b| b.borrow_mut().remove(&view.view.id));
    });
}

/// Records that this shard built `view` (see [`resume_builds`]).
async fn record_built(view: &View) {
    let Some(marker) = shoal_replica::local().view_built_marker(&view.view) else { return };
    let written = async {
        if let Some(dir) = marker.parent() {
            shoal_io::create_dir_all(dir, IoClass::Maintenance).await?;
        }
        shoal_io::write_durably(&marker, Vec::new(), IoClass::Maintenance).await
    };
    if let Err(e) = written.await {
        tracing::warn!("cannot record that view {} is built ({e}): it will be built again at start", view.name());
    }
}

/// Builds view `view` of `base_id` from this shard's base data.
async fn build(base_id: Uuid, view: &View) -> Result<(), shoal_replica::ReplicaError> {
    let started = std::time::Instant::now();
    let mut from = None;
    let mut entries = 0usize;
    loop {
        let bound = from.as_ref().map_or(Bound::Unbounded, Bound::Excluded);
        let step = shoal_replica::local().view_build_step(base_id, view, bound, BUILD_STEP_PARTITIONS).await;
        let (updates, last) = match step {
            Ok(step) => step,
            // The view or its table was dropped meanwhile.
            Err(shoal_replica::ReplicaError::NoSuchTable(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        for (base_token, updates) in updates {
            entries += updates.len();
            deliver(base_token, updates).await;
        }
        let Some(last) = last else { break };
        from = Some(last);
        // A long build leaves the reactor to requests between steps, and
        // gives the core back when over its group's shares.
        shoal_runtime::sched::maybe_yield().await;
    }
    tracing::info!(
        "built view {} on shard {}: {entries} view updates written in {} ms",
        view.name(),
        shoal_runtime::this_shard(),
        started.elapsed().as_millis()
    );
    Ok(())
}

/// Sends view updates made by a write to the base partition at
/// `base_token` to their paired view replicas, and waits until each was
/// applied or kept as a hint.
async fn deliver(base_token: i64, updates: Vec<Mutation>) {
    let sends = updates.into_iter().map(|mutation| async move {
        let deadline = deadline(VIEW_WRITE_TIMEOUT);
        let Some((topology, keyspace)) = placement(mutation.table) else {
            if let Err(e) = mutate_local(mutation, ConsistencyLevel::One, WriteType::Simple, deadline).await {
                tracing::warn!("a view update failed: {e}");
            }
            return;
        };
        let Some(host) = paired_view_replica(&topology, &keyspace, base_token, mutation.position.token) else {
            return;
        };
        let payload = bytes::Bytes::from(wire::encode_mutation(&mutation));
        let target = Target { topology: &topology, host };
        let token = mutation.position.token;
        if let Err(e) = target.mutate(mutation, &payload, WriteType::Simple, deadline).await {
            tracing::debug!("a view update to {host} failed ({e}): kept as a hint");
            hints::store(host, token, payload);
        }
    });
    join_all(sends).await;
}

/// The view replica this node updates for a base write at `base_token`
/// whose view partition is at `view_token`; `None` when this node is not a
/// base replica of it (a write it coordinates only) or the view has fewer
/// replicas than the base.
fn paired_view_replica(
    topology: &Topology,
    keyspace: &shoal_schema::KeyspaceMeta,
    base_token: i64,
    view_token: i64,
) -> Option<Uuid> {
    let me = topology.me;
    let base = topology.write_targets(keyspace, base_token).natural;
    let view = topology.write_targets(keyspace, view_token).natural;
    if view.contains(&me) {
        return Some(me);
    }
    let index = base.iter().filter(|h| !view.contains(h)).position(|h| *h == me)?;
    view.iter().filter(|h| !base.contains(h)).nth(index).copied()
}
