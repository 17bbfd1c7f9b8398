//! The storage proxy: where a write or read runs, and the gathering of its
//! answers (ScyllaDB's `service/storage_proxy`).
//!
//! A partition's replicas are the nodes its keyspace's replication puts
//! it on ([`crate::topology`]). Where this node is the only one — a single
//! node, or a partition only this node holds — a request runs on this
//! node's shards alone, with no message to another node. Otherwise the
//! write goes to every live replica ([`crate::write_handler`]) and the
//! read to as many as the consistency level needs
//! ([`crate::read_executor`]).
//!
//! The top of the coordinator's request path: it picks the executor
//! (write, counter write, read, Paxos) or this node's local half
//! ([`crate::local`]); nothing beneath it calls it.
//!
//! The paths to other nodes are boxed where they are awaited: their state
//! machines are large, and inline they would make every request's future
//! (moved whole into its task) as large, single-node requests included.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use shoal_replica::{CasRequest, CasResult, Mutation, PartitionSelection, ReadCommand, ReadResult};
use shoal_schema::KeyspaceMeta;
use uuid::Uuid;

use crate::local::{cas_local, read_local, truncate_local};
use crate::target::Target;
use crate::timeouts::{deadline, timeouts};
use crate::topology::{placement, topology, Topology};
use crate::{counter_write, paxos, read_executor, write_handler, ConsistencyLevel, CoordinatorError, WriteType};

/// Applies `mutation` on its partition's replicas, answered once the
/// consistency level's count of them applied it. With `commitlog_sync:
/// batch`, applied means on disk.
pub async fn mutate(
    mutation: Mutation,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    timeout: Duration,
) -> Result<(), CoordinatorError> {
    let deadline = deadline(timeout);
    if write_type == WriteType::Counter {
        return Box::pin(counter_write::write(mutation, consistency, deadline)).await;
    }
    write_handler::mutate(mutation, consistency, write_type, deadline).await
}

/// Reads from as many of the partitions' replicas as the consistency
/// level needs, repairing those that answered differently.
pub async fn read(
    command: ReadCommand,
    consistency: ConsistencyLevel,
    timeout: Duration,
) -> Result<ReadResult, CoordinatorError> {
    let deadline = deadline(timeout);
    if let Some((topology, keyspace)) = placement(command.table) {
        if consistency.is_serial() {
            Box::pin(settle_for_serial_read(&topology, &keyspace, &command, consistency)).await?;
        }
        return Box::pin(read_executor::read(topology, keyspace, command, consistency, deadline)).await;
    }
    // Boxed too: the replica's read (memtables, row cache, SSTables) is
    // ~4 KB of state, and inline every CQL request's future carried it,
    // writes included, copied twice per request by the transport.
    Box::pin(read_local(&command, consistency, deadline)).await
}

/// Cassandra's refusal of a serial read of several partitions.
fn one_partition_serial() -> CoordinatorError {
    CoordinatorError::Invalid(
        "SERIAL/LOCAL_SERIAL consistency may only be requested for one partition at a time".into(),
    )
}

/// Before a read at SERIAL or LOCAL_SERIAL of a partition other nodes
/// hold: a Paxos round that settles what conditional writes left in
/// flight, so the read sees every write chosen before it.
async fn settle_for_serial_read(
    topology: &Rc<Topology>,
    keyspace: &Arc<KeyspaceMeta>,
    command: &ReadCommand,
    serial: ConsistencyLevel,
) -> Result<(), CoordinatorError> {
    let PartitionSelection::Keys(keys) = &command.partitions else {
        return Err(one_partition_serial());
    };
    let [position] = keys.as_slice() else {
        return Err(one_partition_serial());
    };
    if topology.write_targets(keyspace, position.token).only(topology.me) {
        return Ok(());
    }
    let cas_deadline = deadline(timeouts().cas);
    let round = paxos::Round::new(
        Rc::clone(topology),
        Arc::clone(keyspace),
        command.table,
        position.clone(),
        serial,
        true,
        cas_deadline,
    );
    round.settle().await
}

/// Removes every row of `table` on every node of the cluster, all of
/// which must be up (as in Cassandra: TRUNCATE is at ALL).
pub async fn truncate(table: Uuid, timeout: Duration) -> Result<(), CoordinatorError> {
    let deadline = deadline(timeout);
    let topology = topology();
    if !topology.is_cluster() {
        return truncate_local(table, deadline).await;
    }
    Box::pin(truncate_everywhere(&topology, table, deadline)).await
}

async fn truncate_everywhere(topology: &Topology, table: Uuid, deadline: Instant) -> Result<(), CoordinatorError> {
    let members: Vec<Uuid> = topology.members().collect();
    let alive = members.iter().filter(|host| topology.is_up(**host)).count();
    if alive < members.len() {
        return Err(CoordinatorError::Unavailable {
            consistency: ConsistencyLevel::All,
            required: members.len(),
            alive,
        });
    }
    let wait = deadline.saturating_duration_since(Instant::now());
    let answers = join_all(members.iter().map(|host| {
        let target = Target { topology, host: *host };
        shoal_runtime::time::timeout(wait, async move { target.truncate(table, deadline).await })
    }))
    .await;
    let received = answers.iter().filter(|a| matches!(a, Ok(Ok(())))).count();
    for answer in answers {
        match answer {
            Ok(Ok(())) => {}
            Ok(Err(e @ CoordinatorError::Invalid(_))) => return Err(e),
            _ => {
                return Err(CoordinatorError::WriteTimeout {
                    consistency: ConsistencyLevel::All,
                    write_type: WriteType::Simple,
                    received,
                    block_for: members.len(),
                })
            }
        }
    }
    Ok(())
}

/// A conditional write (compare-and-set): on the shard owning the
/// partition, under its lock, the conditions are checked and the mutation
/// applied when all hold; with other replicas, by Paxos ([`crate::paxos`]).
/// `serial` is the consistency of the check (SERIAL or LOCAL_SERIAL),
/// `consistency` that of the commit.
pub async fn cas(
    request: CasRequest,
    consistency: ConsistencyLevel,
    serial: ConsistencyLevel,
    timeout: Duration,
) -> Result<CasResult, CoordinatorError> {
    assert!(serial.is_serial(), "a conditional write's serial consistency is SERIAL or LOCAL_SERIAL");
    let deadline = deadline(timeout);
    if let Some((topology, keyspace)) = placement(request.table) {
        if !topology.write_targets(&keyspace, request.position.token).only(topology.me) {
            let (table, position) = (request.table, request.position.clone());
            let round = paxos::Round::new(topology, keyspace, table, position, serial, false, deadline);
            return Box::pin(round.cas(paxos::Conditional { request, consistency, serial })).await;
        }
    }
    cas_local(request, consistency, deadline).await
}
