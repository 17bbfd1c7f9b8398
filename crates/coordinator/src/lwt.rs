//! Conditional writes when several nodes hold the partition: every one is
//! decided by the partition's primary replica (the first of its replicas
//! in ring order), one at a time under that node's partition lock.
//!
//! The primary first reads the rows the conditions name at QUORUM (or
//! LOCAL_QUORUM for LOCAL_SERIAL), asking itself first, so read repair
//! brings its own copy up to every write a quorum acknowledged; then it
//! checks the conditions and applies the write on its own copy, as a
//! single node does; then it sends what it wrote — at the timestamp it
//! took there, list operations resolved — to the other replicas, answered
//! at the commit consistency.
//!
//! While the primary is down a conditional write is Unavailable rather
//! than decided elsewhere: two deciders could each pass a check the other
//! invalidates. This is not Paxos: it gives up availability where Paxos
//! would not, and it is only linearizable while every coordinator agrees
//! on the primary, which a change of the ring (a node joining) may break
//! for a moment.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use shoal_replica::{CasRequest, CasResult, ReadCommand};
use shoal_schema::KeyspaceMeta;
use shoal_storage::ClusteringRange;
use uuid::Uuid;

use crate::proxy::{cas_local, placement};
use crate::topology::Topology;
use crate::verbs::Target;
use crate::{read_executor, write_handler, ConsistencyLevel, CoordinatorError, WriteType};

/// A conditional write, its consistency levels and its deadline.
pub(crate) struct Conditional {
    pub request: CasRequest,
    /// Of the commit.
    pub consistency: ConsistencyLevel,
    /// Of the check: SERIAL or LOCAL_SERIAL.
    pub serial: ConsistencyLevel,
    pub deadline: Instant,
}

/// The partition's replicas as this node sees them.
pub(crate) struct Replicas {
    pub topology: Rc<Topology>,
    pub keyspace: Arc<KeyspaceMeta>,
    pub hosts: Vec<Uuid>,
}

pub(crate) async fn cas(replicas: Replicas, op: Conditional) -> Result<CasResult, CoordinatorError> {
    let primary = replicas.hosts[0];
    if !replicas.topology.is_up(primary) {
        return Err(CoordinatorError::Unavailable { consistency: op.serial, required: 1, alive: 0 });
    }
    if primary == replicas.topology.me {
        return as_primary(replicas, op).await;
    }
    Target { topology: &replicas.topology, host: primary }.cas(&op.request, op.consistency, op.serial).await
}

/// Runs a conditional write that another node sent this one, its primary.
pub(crate) async fn serve(op: Conditional) -> Result<CasResult, CoordinatorError> {
    let Some((topology, keyspace, _)) = placement(op.request.table) else {
        return cas_local(op.request, op.consistency, op.deadline).await;
    };
    let hosts = topology.replicas(&keyspace, op.request.position.token);
    if hosts.first() != Some(&topology.me) {
        return Err(CoordinatorError::Remote(
            "this node is not the partition's primary replica in its view of the ring; try again".to_string(),
        ));
    }
    as_primary(Replicas { topology, keyspace, hosts }, op).await
}

async fn as_primary(replicas: Replicas, op: Conditional) -> Result<CasResult, CoordinatorError> {
    let Replicas { topology, keyspace, hosts: _ } = replicas;
    let Conditional { request, consistency, serial, deadline } = op;
    let targets = topology.write_targets(&keyspace, request.position.token);
    let level = match serial {
        ConsistencyLevel::LocalSerial => ConsistencyLevel::LocalQuorum,
        _ => ConsistencyLevel::Quorum,
    };
    let keys = vec![request.position.clone()];
    let catch_up = ReadCommand::of_partitions(request.table, keys, condition_ranges(&request), request.now_s);
    read_executor::read(Rc::clone(&topology), keyspace, false, catch_up, level, deadline).await?;
    let result = cas_local(request, consistency, deadline).await?;
    if let Some(written) = &result.written {
        let me = Some(topology.me);
        write_handler::write(topology, targets, written.clone(), consistency, WriteType::Cas, deadline, me).await?;
    }
    Ok(result)
}

/// The rows the conditions read: each named row, or the whole partition
/// when one reads the static row.
fn condition_ranges(request: &CasRequest) -> Vec<ClusteringRange> {
    let mut keys: Vec<Bytes> = Vec::new();
    for condition in &request.conditions {
        match &condition.row {
            None => return vec![ClusteringRange::all()],
            Some(key) => keys.push(key.clone()),
        }
    }
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|key| ClusteringRange {
            start: std::ops::Bound::Included(key.clone()),
            end: std::ops::Bound::Included(key),
        })
        .collect()
}
