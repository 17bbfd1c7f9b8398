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

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures_channel::mpsc;
use futures_util::future::{select, Either};
use futures_util::{Stream, StreamExt};
use shoal_cluster::verb::Verb;
use shoal_replica::{Ballot, Mutation};
use shoal_runtime::lowres;
use uuid::Uuid;

use crate::consistency::Tally;
use crate::local::mutate_local;
use crate::target::{Call, Target};
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
    // Shared by the requests, hints and forwarding without a copy.
    let payload = Bytes::from(wire::encode_mutation(&mutation));
    let commit = match delivery {
        Delivery::PaxosCommit(ballot) => Some((ballot, Bytes::from(wire::encode_paxos_proposal(ballot, &mutation)))),
        Delivery::Mutation | Delivery::LedHere => None,
    };
    let token = mutation.position.token;
    for (host, dc) in down {
        if hints::store(host, token, payload.clone()) && consistency == ConsistencyLevel::Any {
            tally.count(dc);
        }
    }
    // A Paxos commit goes to each replica itself: it carries its ballot.
    // Otherwise another data center's replicas get one copy, which one of
    // them relays to the others.
    let (live, groups) = match commit {
        Some(_) => (live, Vec::new()),
        None => forwarding::split(&topology, live),
    };
    // Every replica's data center, by the index its answer carries: the
    // direct ones first, then the forwarded ones.
    let mut data_centers: Vec<&str> = live.iter().map(|(_, dc)| *dc).collect();
    let forwarded = match groups.is_empty() {
        true => None,
        false => {
            let (answered, forwarded) = mpsc::unbounded();
            for group in groups {
                let group = group
                    .into_iter()
                    .map(|(host, dc)| {
                        data_centers.push(dc);
                        (host, data_centers.len() - 1)
                    })
                    .collect();
                let payload = payload.clone();
                forwarding::send(Rc::clone(&topology), group, token, payload, deadline, answered.clone());
            }
            Some(forwarded)
        }
    };
    // This node's replica applies the mutation itself (no copy), boxed:
    // its apply's state is large. The others are sent the one encoding at
    // once, each answer a small `Call` in a plain list. This task polls
    // them all (then the task that outlives the client's answer does): no
    // task, waker or set node of their own each.
    let mut mine = Some(mutation);
    let writes = live
        .into_iter()
        .enumerate()
        .map(|(replica, (host, _))| {
            let target = Target { topology: &topology, host };
            let write = match (mine.take_if(|_| host == topology.me), &commit) {
                // Straight to this node's apply: no future around it that
                // holds the mutation again.
                (Some(own), None) => {
                    ReplicaWrite::Here(Box::pin(mutate_local(own, ConsistencyLevel::One, write_type, deadline)))
                }
                (Some(own), Some((ballot, commit))) => {
                    let (topology, ballot, commit) = (Rc::clone(&topology), *ballot, commit.clone());
                    ReplicaWrite::Here(Box::pin(async move {
                        Target { topology: &topology, host }.paxos_commit(own, ballot, &commit).await
                    }))
                }
                (None, Some((_, commit))) => {
                    ReplicaWrite::There(target.start_call(Verb::PaxosCommit, token, commit.clone()))
                }
                (None, None) => ReplicaWrite::There(target.start_call(Verb::Mutation, token, payload.clone())),
            };
            Some((replica, host, write))
        })
        .collect();
    let direct = Replicas { writes, token, payload: payload.clone() };
    // The forwarded replicas' answers come from their forwarding task,
    // which hints the ones that fail or stay silent itself.
    let mut answers = futures_util::stream::select(direct, futures_util::stream::iter(forwarded).flatten());
    let answered = tally_answers(&mut tally, &data_centers, &mut answers, consistency, write_type, deadline).await;
    // Replicas that answer after the client was answered still apply the
    // write, and a failure among them is still hinted: what is left runs
    // on in a task of its own.
    let (mut direct, _) = answers.into_inner();
    if !direct.is_done() {
        shoal_runtime::spawn(async move { while direct.next().await.is_some() {} });
    }
    answered
}

/// One replica's write under way: this node's own apply, or another
/// node's answer.
enum ReplicaWrite {
    Here(Pin<Box<dyn Future<Output = Result<(), CoordinatorError>>>>),
    There(Call),
}

impl Future for ReplicaWrite {
    type Output = Result<(), CoordinatorError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut *self {
            ReplicaWrite::Here(apply) => apply.as_mut().poll(cx),
            ReplicaWrite::There(call) => Pin::new(call).poll(cx).map(|answer| answer.map(drop)),
        }
    }
}

/// The direct replicas' writes, each with its index and host, until it
/// ends: a stream of their answers as [`tally_answers`] counts them (its
/// index, its outcome, and whether it was hinted: it failed for another
/// reason than bad input). Each poll polls every write still under way;
/// they are few, and their polls cheap.
struct Replicas {
    writes: Vec<Option<(usize, Uuid, ReplicaWrite)>>,
    token: i64,
    payload: Bytes,
}

impl Replicas {
    fn is_done(&self) -> bool {
        self.writes.iter().all(Option::is_none)
    }
}

impl Stream for Replicas {
    type Item = (usize, Result<(), CoordinatorError>, bool);

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let mut waiting = false;
        for slot in &mut this.writes {
            let Some((replica, host, write)) = slot else { continue };
            let Poll::Ready(outcome) = Pin::new(write).poll(cx) else {
                waiting = true;
                continue;
            };
            let (replica, host) = (*replica, *host);
            *slot = None;
            let hinted = match &outcome {
                Err(e) if !matches!(e, CoordinatorError::Invalid(_)) => {
                    hints::store(host, this.token, this.payload.clone())
                }
                _ => false,
            };
            return Poll::Ready(Some((replica, outcome, hinted)));
        }
        match waiting {
            true => Poll::Pending,
            false => Poll::Ready(None),
        }
    }
}

/// Counts `answers` (each its replica's index in `data_centers`, its
/// outcome, and whether it was hinted) until `tally` is met: Ok, or why
/// the write failed.
async fn tally_answers(
    tally: &mut Tally<'_>,
    data_centers: &[&str],
    answers: &mut (impl Stream<Item = (usize, Result<(), CoordinatorError>, bool)> + Unpin),
    consistency: ConsistencyLevel,
    write_type: WriteType,
    deadline: Instant,
) -> Result<(), CoordinatorError> {
    let mut failure = None;
    // One low-resolution deadline for the whole wait (no runtime timer),
    // taken only if an answer must be waited for.
    let mut expiry = None;
    while !tally.is_met() {
        let next = match futures_util::poll!(answers.next()) {
            Poll::Ready(next) => Ok(next),
            Poll::Pending => {
                let expiry = expiry.get_or_insert_with(|| lowres::expiry(deadline));
                match select(answers.next(), expiry).await {
                    Either::Left((next, _)) => Ok(next),
                    Either::Right(((), _)) => Err(()),
                }
            }
        };
        match next {
            Ok(Some((replica, Ok(()), _))) => tally.count(data_centers[replica]),
            Ok(Some((replica, Err(_), true))) if consistency == ConsistencyLevel::Any => {
                tally.count(data_centers[replica])
            }
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
