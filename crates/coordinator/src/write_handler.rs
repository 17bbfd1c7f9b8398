//! A write to a partition's replicas (ScyllaDB's write response handler):
//! sent to every live replica at once, answered as soon as the consistency
//! level's count of replicas applied it.
//!
//! Too few live replicas for the level fail the write before anything is
//! sent (Unavailable). Replicas that answer after the client was answered
//! still apply the write: their requests run on. A replica that is down,
//! or fails the write, gets it later as a hint ([`crate::hints`]); at ANY a
//! hint kept counts as an answer. A counter write is sent by its leader,
//! which applied it already and counts as one answer; it carries the
//! leader's new counter shards, which a replica merges by clock, so a hint
//! of it applies once however often it arrives. A Paxos commit is such a
//! write sent with its ballot: replicas also record it committed; a hint
//! of it carries the write alone. Another data center's replicas get
//! one copy, which one of them forwards to the others
//! ([`crate::forwarding`]).

use std::rc::Rc;
use std::time::Instant;

use futures_channel::mpsc;
use futures_util::StreamExt;
use shoal_replica::{Ballot, Mutation};

use crate::local::mutate_local;
use crate::target::Target;
use crate::topology::{placement, ReplicaPlan, Topology, WriteTargets};
use crate::{forwarding, hints, wire, ConsistencyLevel, CoordinatorError, WriteType};

/// Unavailable if too few of `targets` are up to meet a write at
/// `consistency` (ANY is met by a hint).
pub(crate) fn check_available(
    topology: &Topology,
    targets: &WriteTargets,
    consistency: ConsistencyLevel,
) -> Result<(), CoordinatorError> {
    topology.plan(&targets.natural, &targets.pending, consistency, consistency == ConsistencyLevel::Any).map(drop)
}

/// How a write reaches its replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// As a mutation.
    Mutation,
    /// As a chosen Paxos proposal's commit, with its ballot.
    PaxosCommit(Ballot),
    /// As a write this node led (a counter's, a memcached item's): it
    /// applied it already, and the other replicas get it as a mutation.
    LedHere,
}

/// Applies a mutation that is not a counter update on its partition's
/// replicas, answered at `consistency`: this node's owning shard alone
/// when it is the only replica, otherwise [`write`] to every live one.
pub(crate) async fn mutate(
    mutation: Mutation,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    deadline: Instant,
) -> Result<(), CoordinatorError> {
    if let Some((topology, keyspace)) = placement(mutation.table) {
        let targets = topology.write_targets(&keyspace, mutation.position.token);
        if !targets.only(topology.me) {
            let delivery = Delivery::Mutation;
            let write = write(topology, targets, mutation, consistency, write_type, deadline, delivery);
            return Box::pin(write).await;
        }
    }
    mutate_local(mutation, consistency, write_type, deadline).await
}

pub(crate) async fn write(
    topology: Rc<Topology>,
    targets: WriteTargets,
    mutation: Mutation,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    deadline: Instant,
    delivery: Delivery,
) -> Result<(), CoordinatorError> {
    assert!(!targets.natural.is_empty(), "a partition has at least one replica");
    let ReplicaPlan { mut tally, mut live, down } =
        topology.plan(&targets.natural, &targets.pending, consistency, consistency == ConsistencyLevel::Any)?;
    if delivery == Delivery::LedHere {
        // The leader chose itself as a live natural replica in this snapshot.
        let here = live.iter().position(|(host, _)| *host == topology.me);
        debug_assert!(here.is_some(), "a leader is one of its live replicas");
        if let Some(here) = here {
            tally.count(live.swap_remove(here).1);
        }
    }
    let payload: Rc<[u8]> = wire::encode_mutation(&mutation).into();
    let commit = match delivery {
        Delivery::PaxosCommit(ballot) => Some(ballot),
        Delivery::Mutation | Delivery::LedHere => None,
    };
    let commit_payload: Option<Rc<[u8]>> = commit.map(|ballot| wire::encode_paxos_proposal(ballot, &mutation).into());
    let token = mutation.position.token;
    for (host, dc) in down {
        if hints::store(host, token, Rc::clone(&payload)) && consistency == ConsistencyLevel::Any {
            tally.count(dc);
        }
    }
    let mutation = Rc::new(mutation);
    let (answered, mut answers) = mpsc::unbounded();
    // A Paxos commit goes to each replica itself: it carries its ballot.
    let (live, groups) = match commit {
        Some(_) => (live, Vec::new()),
        None => forwarding::split(&topology, live),
    };
    for group in groups {
        let group = group.into_iter().map(|(host, dc)| (host, dc.to_string())).collect();
        forwarding::send(Rc::clone(&topology), group, token, Rc::clone(&payload), answered.clone());
    }
    for (host, dc) in live {
        let dc = dc.to_string();
        let (topology, mutation, payload, answered) =
            (Rc::clone(&topology), Rc::clone(&mutation), Rc::clone(&payload), answered.clone());
        let commit = commit.zip(commit_payload.clone());
        shoal_runtime::spawn(async move {
            let target = Target { topology: &topology, host };
            let outcome = match commit {
                Some((ballot, commit_payload)) => target.paxos_commit(&mutation, ballot, &commit_payload).await,
                None => target.mutate(&mutation, &payload, write_type, deadline).await,
            };
            let hinted = match &outcome {
                Err(e) if !matches!(e, CoordinatorError::Invalid(_)) => hints::store(host, token, Rc::clone(&payload)),
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
