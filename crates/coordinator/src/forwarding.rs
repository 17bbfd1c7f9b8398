//! Cassandra's write forwarding across data centers: a coordinator sends a
//! write's replicas in another data center one copy, to one of them (the
//! forwarder), with the list of the others; the forwarder applies it and
//! relays it to them, and each of them answers the coordinator itself
//! (`MutationDone`, a one-way message), so acknowledgements need not wait
//! on the forwarder.
//! The DC link carries each write once rather than once per replica.
//!
//! The coordinating shard waits on a response id ([`send`]) until every
//! replica of the group answered or the write's own timeout
//! (`write_request_timeout_in_ms`) passed: one that failed, or had not
//! answered by then, gets a hint as a direct write's replica does, so a
//! forwarder that dies costs its group a hint once the client was told of
//! the timeout, not after the verb's 60 s. A relayed copy that does not
//! arrive is reported failed by the forwarder, so it is hinted without
//! waiting for the timeout.
//!
//! `--cross-dc-forwarding false` sends every replica its own copy
//! (measuring what forwarding saves).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Instant;

use bytes::Bytes;
use futures_channel::mpsc;
use futures_util::StreamExt;
use shoal_cluster::messaging;
use shoal_cluster::verb::Verb;
use uuid::Uuid;

use crate::local::mutate_local;
use crate::metrics::{note_forwarded_write, note_relayed_write};
use crate::target::{answer_body, encode_answer, malformed, Target};
use crate::timeouts::{deadline, timeouts};
use crate::topology::{topology, Replica, Topology};
use crate::wire::{self, Forward};
use crate::{hints, ConsistencyLevel, CoordinatorError, WriteType};

static ENABLED: OnceLock<bool> = OnceLock::new();

/// Sets whether writes are forwarded across data centers; call once at
/// start (on without it).
pub fn set_cross_dc_forwarding(enabled: bool) {
    // A second call (several nodes in one test process) keeps the first.
    let _ = ENABLED.set(enabled);
}

/// A replica's outcome as a write's handler counts it: the replica's index
/// in the handler's list of data centers, the outcome, and whether it
/// was hinted.
pub(crate) type Answer = (usize, Result<(), CoordinatorError>, bool);

/// One replica's outcome, as a forwarded group's waiter receives it.
type Done = (Uuid, Result<(), CoordinatorError>);

thread_local! {
    /// The forwarded writes this shard coordinates, by response id.
    static WAITING: RefCell<HashMap<u64, mpsc::UnboundedSender<Done>>> = RefCell::default();
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// Splits a write's live replicas into those the coordinator sends to
/// itself and, per other data center with two or more of them, a group
/// whose first replica forwards to the rest.
pub(crate) fn split<'a>(topology: &Topology, live: Vec<Replica<'a>>) -> (Vec<Replica<'a>>, Vec<Vec<Replica<'a>>>) {
    if !*ENABLED.get().unwrap_or(&true) {
        return (live, Vec::new());
    }
    let mut direct = Vec::new();
    let mut remote: Vec<Vec<Replica<'a>>> = Vec::new();
    for replica in live {
        if replica.1 == topology.local_dc {
            direct.push(replica);
        } else if let Some(group) = remote.iter_mut().find(|group| group[0].1 == replica.1) {
            group.push(replica);
        } else {
            remote.push(vec![replica]);
        }
    }
    let (groups, single): (Vec<_>, Vec<_>) = remote.into_iter().partition(|group| group.len() > 1);
    direct.extend(single.into_iter().flatten());
    (direct, groups)
}

/// Removes a response id's waiter when its group is done.
struct Waiter(u64);

impl Waiter {
    fn new(answers: mpsc::UnboundedSender<Done>) -> Waiter {
        let id = NEXT_ID.with(|next| {
            let id = next.get();
            next.set(id.wrapping_add(1));
            id
        });
        WAITING.with(|waiting| waiting.borrow_mut().insert(id, answers));
        Waiter(id)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        WAITING.with(|waiting| waiting.borrow_mut().remove(&self.0));
    }
}

/// Sends `payload` (a mutation of `token`) to `group`'s first replica,
/// which applies it and relays it to the others; each replica's outcome
/// goes to `answered` as it arrives, failures hinted, and the replicas
/// still silent at the write's `deadline` hinted then.
pub(crate) fn send(
    topology: Rc<Topology>,
    group: Vec<(Uuid, usize)>,
    token: i64,
    payload: Bytes,
    deadline: Instant,
    answered: mpsc::UnboundedSender<Answer>,
) {
    note_forwarded_write();
    shoal_runtime::spawn(async move {
        let (done, mut answers) = mpsc::unbounded();
        let waiter = Waiter::new(done.clone());
        let forwarder = group[0].0;
        let forward = Forward {
            coordinator: topology.me,
            shard: shard_id(),
            response_id: waiter.0,
            relay_to: group[1..].iter().map(|(host, _)| *host).collect(),
        };
        let message = wire::encode_forward(&forward, &payload);
        let target_topology = Rc::clone(&topology);
        shoal_runtime::spawn(async move {
            let target = Target { topology: &target_topology, host: forwarder };
            let outcome = target.call(Verb::MutationForward, token, &message).await.map(drop);
            let _ = done.unbounded_send((forwarder, outcome));
        });
        let give_up = shoal_runtime::lowres::expiry(deadline);
        let hint = |host| hints::store(host, token, payload.clone());
        let silent = gather(group.into_iter().collect(), &mut answers, give_up, |host, replica, outcome| {
            let hinted = match &outcome {
                Err(e) if !matches!(e, CoordinatorError::Invalid(_)) => hint(host),
                _ => false,
            };
            let _ = answered.unbounded_send((replica, outcome, hinted));
        })
        .await;
        drop(waiter);
        for (host, replica) in silent {
            let unanswered = CoordinatorError::Remote(format!("node {host} did not answer a forwarded write"));
            let _ = answered.unbounded_send((replica, Err(unanswered), hint(host)));
        }
    });
}

/// Hands each answer of a replica still in `waiting` (host to its index)
/// to `on_answer`, until every one answered or `give_up` completes (the
/// write's timeout); the replicas that had not answered by then.
async fn gather(
    mut waiting: HashMap<Uuid, usize>,
    answers: &mut mpsc::UnboundedReceiver<Done>,
    give_up: impl Future<Output = ()>,
    mut on_answer: impl FnMut(Uuid, usize, Result<(), CoordinatorError>),
) -> HashMap<Uuid, usize> {
    futures_util::pin_mut!(give_up);
    while !waiting.is_empty() {
        let next = futures_util::future::select(answers.next(), give_up.as_mut()).await;
        let futures_util::future::Either::Left((Some((host, outcome)), _)) = next else { break };
        if let Some(replica) = waiting.remove(&host) {
            on_answer(host, replica, outcome);
        }
    }
    waiting
}

fn shard_id() -> u16 {
    // Invariant: a node runs far fewer than 65,536 shards.
    u16::try_from(shoal_runtime::this_shard()).expect("a shard number fits in 16 bits")
}

/// A write sent across a data center link to this node: relayed to the
/// replicas it names, applied here; this replica's own answer.
pub(crate) async fn serve_forward(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let (mut forward, mutation_bytes) = wire::decode_forward(&payload).map_err(malformed)?;
    let mutation = wire::decode_mutation(mutation_bytes).map_err(malformed)?;
    let token = mutation.position.token;
    let relay_to = std::mem::take(&mut forward.relay_to);
    let relay: Rc<[u8]> = wire::encode_forward(&forward, mutation_bytes).into();
    let forward = Rc::new(forward);
    for host in relay_to {
        let (relay, forward) = (Rc::clone(&relay), Rc::clone(&forward));
        note_relayed_write();
        shoal_runtime::spawn(async move {
            let topology = topology();
            let outcome = Target { topology: &topology, host }.call(Verb::MutationRelay, token, &relay).await;
            if let Err(e) = outcome {
                // The copy may not have arrived: the coordinator hints it.
                report(&topology, &forward, host, Err(e)).await;
            }
        });
    }
    mutate_local(mutation, ConsistencyLevel::One, WriteType::Simple, deadline(timeouts().write)).await?;
    Ok(Vec::new())
}

/// A copy relayed by a forwarder: applied here, answered to its
/// coordinator.
pub(crate) async fn serve_relay(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let (forward, mutation_bytes) = wire::decode_forward(&payload).map_err(malformed)?;
    let mutation = wire::decode_mutation(mutation_bytes).map_err(malformed)?;
    let outcome = mutate_local(mutation, ConsistencyLevel::One, WriteType::Simple, deadline(timeouts().write)).await;
    let topology = topology();
    report(&topology, &forward, topology.me, outcome).await;
    Ok(Vec::new())
}

/// Tells a forwarded write's coordinator how `replica` did.
async fn report(topology: &Topology, forward: &Forward, replica: Uuid, outcome: Result<(), CoordinatorError>) {
    let answer = encode_answer(outcome.map(|()| Vec::new()));
    let message = wire::encode_write_done(forward.response_id, replica, &answer);
    let Some(endpoint) = topology.endpoint(forward.coordinator) else {
        tracing::debug!("the coordinator {} of a forwarded write left the cluster", forward.coordinator);
        return;
    };
    if let Err(e) = messaging::send(endpoint.address, forward.shard, Verb::MutationDone, &message).await {
        // The coordinator hints this replica once it stops waiting.
        tracing::debug!("cannot answer a forwarded write's coordinator: {e}");
    }
}

/// A replica's answer to a write this shard forwarded: handed to the
/// write's waiter, if it still waits.
pub(crate) async fn serve_done(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let (response_id, replica, answer) = wire::decode_write_done(&payload).map_err(malformed)?;
    let address = topology().endpoint(replica).map(|endpoint| endpoint.address);
    let outcome = match address {
        Some(address) => answer_body(address, Bytes::copy_from_slice(answer)).map(drop),
        None => Err(CoordinatorError::Remote(format!("node {replica} left the cluster"))),
    };
    WAITING.with(|waiting| {
        if let Some(answers) = waiting.borrow().get(&response_id) {
            let _ = answers.unbounded_send((replica, outcome));
        }
    });
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_header_round_trips_and_leaves_the_mutation_as_it_is() {
        let forward = Forward {
            coordinator: Uuid::from_u128(1),
            shard: 3,
            response_id: 1 << 40,
            relay_to: vec![Uuid::from_u128(2), Uuid::from_u128(3)],
        };
        let encoded = wire::encode_forward(&forward, b"mutation");
        let (decoded, mutation) = wire::decode_forward(&encoded).expect("decodes");
        assert_eq!((decoded, mutation), (forward, &b"mutation"[..]));
        let done = wire::encode_write_done(7, Uuid::from_u128(9), &[0]);
        assert_eq!(wire::decode_write_done(&done).expect("decodes"), (7, Uuid::from_u128(9), &[0][..]));
        assert!(wire::decode_forward(&encoded[..20]).is_err());
    }

    #[test]
    fn replicas_silent_when_the_write_times_out_are_left_to_hint_and_answers_count_once() {
        use futures_util::FutureExt;
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let (done, mut answers) = mpsc::unbounded();
        done.unbounded_send((a, Ok(()))).expect("open");
        done.unbounded_send((b, Err(CoordinatorError::Remote("down".into())))).expect("open");
        // A second answer from the same replica (the forwarder's own call
        // and its report) is not counted twice; a stranger's not at all.
        done.unbounded_send((a, Ok(()))).expect("open");
        done.unbounded_send((Uuid::from_u128(9), Ok(()))).expect("open");
        let mut seen = Vec::new();
        let waiting = HashMap::from([(a, 0), (b, 1), (c, 2)]);
        // The write's timeout has passed once the queued answers are taken:
        // `c` (the forwarder's group member that never answered) is left.
        let silent = gather(waiting, &mut answers, std::future::ready(()), |host, replica, outcome| {
            seen.push((host, replica, outcome.is_ok()))
        })
        .now_or_never()
        .expect("the timeout ends the wait");
        assert_eq!(seen, vec![(a, 0, true), (b, 1, false)]);
        assert_eq!(silent, HashMap::from([(c, 2)]));
        // Every replica answered: nothing is left, whatever the timeout.
        done.unbounded_send((c, Ok(()))).expect("open");
        let waiting = HashMap::from([(c, 2)]);
        let silent = gather(waiting, &mut answers, std::future::pending(), |_, _, _| {})
            .now_or_never()
            .expect("answered without waiting");
        assert!(silent.is_empty());
    }
}
