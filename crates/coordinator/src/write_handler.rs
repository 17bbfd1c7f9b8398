//! A write to a partition's replicas (ScyllaDB's write response handler):
//! sent to every live replica at once, answered as soon as the consistency
//! level's count of replicas applied it.
//!
//! Too few live replicas for the level fail the write before anything is
//! sent (Unavailable). Replicas that answer after the client was answered
//! still apply the write: their requests run on. A replica that is down,
//! or fails the write, gets it later as a hint ([`crate::hints`]); at ANY a
//! hint kept counts as an answer. Counter writes get no hints: a counter
//! cell is a delta, and a replica that applied a write it did not answer
//! in time would count the hint's copy again. A replica that applied the write already
//! (a conditional write's primary) counts without being sent it.

use std::rc::Rc;
use std::time::Instant;

use futures_channel::mpsc;
use futures_util::StreamExt;
use shoal_replica::Mutation;
use uuid::Uuid;

use crate::consistency::Tally;
use crate::topology::Topology;
use crate::verbs::Target;
use crate::{hints, wire, ConsistencyLevel, CoordinatorError, WriteType};

/// A replica and its data center.
type Replica = (Uuid, String);

/// Unavailable if too few of `replicas` are up to meet `consistency`
/// (ANY is met by a hint).
pub(crate) fn check_available(
    topology: &Topology,
    replicas: &[Uuid],
    consistency: ConsistencyLevel,
) -> Result<(), CoordinatorError> {
    if consistency == ConsistencyLevel::Any {
        return Ok(());
    }
    let data_centers: Vec<String> = replicas.iter().map(|host| topology.data_center(*host)).collect();
    let tally = Tally::new(consistency, &data_centers, &crate::cluster::node().data_center);
    let live: Vec<String> =
        replicas.iter().zip(data_centers).filter(|(host, _)| topology.is_up(**host)).map(|(_, dc)| dc).collect();
    match tally.unmet_by(&live) {
        Some((required, alive)) => Err(CoordinatorError::Unavailable { consistency, required, alive }),
        None => Ok(()),
    }
}

pub(crate) async fn write(
    topology: Rc<Topology>,
    replicas: Vec<Uuid>,
    mutation: Mutation,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    deadline: Instant,
    applied_by: Option<Uuid>,
) -> Result<(), CoordinatorError> {
    assert!(!replicas.is_empty(), "a partition has at least one replica");
    check_available(&topology, &replicas, consistency)?;
    let data_centers: Vec<String> = replicas.iter().map(|host| topology.data_center(*host)).collect();
    let mut tally = Tally::new(consistency, &data_centers, &crate::cluster::node().data_center);
    let (live, down): (Vec<Replica>, Vec<Replica>) =
        replicas.into_iter().zip(data_centers).partition(|(host, _)| topology.is_up(*host));
    let payload: Rc<[u8]> = wire::encode_mutation(&mutation).into();
    let token = mutation.position.token;
    let hinted = write_type != WriteType::Counter;
    for (host, dc) in down.into_iter().filter(|_| hinted) {
        if hints::store(host, token, Rc::clone(&payload)) && consistency == ConsistencyLevel::Any {
            tally.count(&dc);
        }
    }
    let mutation = Rc::new(mutation);
    let (answered, mut answers) = mpsc::unbounded();
    for (host, dc) in live {
        if Some(host) == applied_by {
            tally.count(&dc);
            continue;
        }
        let (topology, mutation, payload, answered) =
            (Rc::clone(&topology), Rc::clone(&mutation), Rc::clone(&payload), answered.clone());
        shoal_runtime::spawn(async move {
            let target = Target { topology: &topology, host };
            let outcome = target.mutate(&mutation, &payload, write_type, deadline).await;
            let hinted = match &outcome {
                Err(e) if hinted && !matches!(e, CoordinatorError::Invalid(_)) => {
                    hints::store(host, token, Rc::clone(&payload))
                }
                _ => false,
            };
            let _ = answered.unbounded_send((dc, outcome, hinted));
        });
    }
    drop(answered);
    let mut failure = None;
    while !tally.is_met() {
        let wait = deadline.saturating_duration_since(Instant::now());
        match shoal_runtime::time::timeout(wait, answers.next()).await {
            Ok(Some((dc, Ok(()), _))) => tally.count(&dc),
            Ok(Some((dc, Err(_), true))) if consistency == ConsistencyLevel::Any => tally.count(&dc),
            Ok(Some((_, Err(e), _))) => {
                tracing::debug!("a replica failed a write: {e}");
                // The client's to fix, or to slow down for; any other
                // failure (a replica unreachable) reads as no answer.
                if matches!(e, CoordinatorError::Invalid(_) | CoordinatorError::Overloaded(_)) {
                    failure.get_or_insert(e);
                }
            }
            // Every replica answered, too few of them with success.
            Ok(None) => {
                return Err(failure.unwrap_or(CoordinatorError::WriteTimeout {
                    consistency,
                    write_type,
                    received: tally.received(),
                    block_for: tally.block_for(),
                }))
            }
            Err(_) => {
                return Err(CoordinatorError::WriteTimeout {
                    consistency,
                    write_type,
                    received: tally.received(),
                    block_for: tally.block_for(),
                })
            }
        }
    }
    Ok(())
}
