//! Conditional writes and serial reads when several nodes hold the
//! partition: Paxos per partition, as Cassandra and ScyllaDB run it
//! (prepare/promise with the read, propose/accept, commit). Any
//! coordinator may run a round; replicas keep their side
//! ([`shoal_replica::Ballot`], `replica::paxos`) durable.
//!
//! A round:
//! 1. **Prepare.** A ballot above any this coordinator saw is sent to
//!    every live replica (natural and pending); a quorum of the level —
//!    SERIAL's over all replicas, LOCAL_SERIAL's in this data center, one
//!    more per live pending replica — must promise it. A refusal means a
//!    higher ballot is out: wait a random moment and start again above it.
//!    A promise carries the replica's stored copy of the rows the
//!    conditions need, read under the lock that records it (as ScyllaDB
//!    does: three round trips, not Cassandra's classic four).
//! 2. **Settle.** If a promise carries an accepted proposal with something
//!    to write that some promising replica has not committed, it may have
//!    been chosen: it is proposed again under this ballot and committed
//!    at the level's quorum before starting again. So, when nothing is
//!    left to settle, every promising replica had applied every chosen
//!    write when it read its copy.
//! 3. **Read**: the promisers' copies merged, stale copies repaired.
//! 4. **Propose** what the request writes when its conditions hold — at
//!    the ballot's timestamp, list operations resolved — or an empty
//!    update when they do not (or for a serial read), so that no older
//!    proposal accepted by a minority can complete after this answer.
//!    A quorum must accept. None accepting is contention (start again);
//!    some but not a quorum is a timeout whose write may yet happen.
//! 5. **Commit** a write to every replica at the commit consistency.
//!
//! The whole round is bounded by `cas_contention_timeout_in_ms`; timeouts
//! are WriteTimeout (type CAS) or, for a serial read, ReadTimeout, at the
//! serial level.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::{select, Either};
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use shoal_replica::{Ballot, CasRequest, CasResult, Mutation, Proposal, ReadCommand};
use shoal_runtime::lowres;
use shoal_schema::KeyspaceMeta;
use shoal_storage::{ClusteringRange, Partition, PartitionPosition};
use uuid::Uuid;

use crate::read_executor::repair_copies;
use crate::target::Target;
use crate::timeouts::{deadline, timeouts};
use crate::topology::{ReplicaPlan, Topology, WriteTargets};
use crate::wire::PaxosPrepare;
use crate::write_handler::Delivery;
use crate::{write_handler, ConsistencyLevel, CoordinatorError, WriteType};

/// Longest random wait before a round starts again after contention
/// (Cassandra's 100 ms).
const CONTENTION_BACKOFF_MAX_US: u64 = 100_000;

/// A conditional write, its consistency levels and its deadline.
pub(crate) struct Conditional {
    pub request: CasRequest,
    /// Of the commit.
    pub consistency: ConsistencyLevel,
    /// Of the rounds: SERIAL or LOCAL_SERIAL.
    pub serial: ConsistencyLevel,
}

/// One partition's Paxos, run by this node.
pub(crate) struct Round {
    pub topology: Rc<Topology>,
    pub keyspace: Arc<KeyspaceMeta>,
    pub table: Uuid,
    pub position: PartitionPosition,
    pub serial: ConsistencyLevel,
    /// For a serial read, whose timeouts are read timeouts.
    pub reading: bool,
    pub deadline: Instant,
}

/// What a replica answered to a round's message.
enum Answer<T> {
    Yes(T),
    No(T),
}

/// What the replicas answered to a round's message.
enum Gathered<T> {
    /// The level's quorum said yes: their answers, by replica.
    Quorum(Vec<(Uuid, T)>),
    /// A replica said no (the first one's answer), `received` of the
    /// `block_for` needed said yes, and `unsure` failed or had not answered.
    Refused { refusal: T, received: usize, block_for: usize, unsure: usize },
    /// Too few said yes.
    Short { received: usize, block_for: usize },
}

impl Round {
    pub(crate) fn new(
        topology: Rc<Topology>,
        keyspace: Arc<KeyspaceMeta>,
        table: Uuid,
        position: PartitionPosition,
        serial: ConsistencyLevel,
        reading: bool,
        deadline: Instant,
    ) -> Round {
        assert!(serial.is_serial(), "a Paxos round runs at SERIAL or LOCAL_SERIAL");
        Round { topology, keyspace, table, position, serial, reading, deadline }
    }

    fn targets(&self) -> WriteTargets {
        self.topology.write_targets(&self.keyspace, self.position.token)
    }

    /// The quorum level of the serial one, for commits that settle.
    fn quorum(&self) -> ConsistencyLevel {
        match self.serial {
            ConsistencyLevel::LocalSerial => ConsistencyLevel::LocalQuorum,
            _ => ConsistencyLevel::Quorum,
        }
    }

    fn timeout(&self, received: usize, block_for: usize) -> CoordinatorError {
        let consistency = self.serial;
        match self.reading {
            true => CoordinatorError::ReadTimeout { consistency, received, block_for, data_present: false },
            false => CoordinatorError::WriteTimeout { consistency, write_type: WriteType::Cas, received, block_for },
        }
    }

    /// Runs a conditional write.
    pub(crate) async fn cas(&self, op: Conditional) -> Result<CasResult, CoordinatorError> {
        let Conditional { request, consistency, serial } = op;
        assert_eq!((request.table, &request.position, serial), (self.table, &self.position, self.serial));
        let schema = crate::schema::schema();
        let meta =
            Arc::clone(schema.table_by_id(self.table).ok_or(shoal_replica::ReplicaError::NoSuchTable(self.table))?);
        let mut floor_us = i64::MIN;
        loop {
            let ranges = request.read_ranges();
            let (ballot, promised) = self.begin(&mut floor_us, Some(&ranges)).await?;
            let command = ReadCommand::of_partitions(self.table, vec![self.position.clone()], ranges, request.now_s);
            let targets: Vec<Target> =
                promised.iter().map(|(host, _)| Target { topology: &self.topology, host: *host }).collect();
            let copies = promised.into_iter().map(|(_, data)| vec![data]).collect();
            let current = repair_copies(&targets, &command, copies, self.deadline).await?.merged.pop().flatten();
            let result = request.evaluate(&meta, current.as_ref(), ballot.micros)?;
            let update = result.written.as_ref().map_or_else(Partition::default, |w| w.update.clone());
            let proposal = Proposal { ballot, update };
            if !self.propose(&proposal, result.written.is_some()).await? {
                floor_us = floor_us.max(ballot.micros + 1);
                self.back_off().await;
                continue;
            }
            if let Some(written) = &result.written {
                let (topology, targets, until) =
                    (Rc::clone(&self.topology), self.targets(), deadline(timeouts().write));
                write_handler::write(
                    topology,
                    targets,
                    written.clone(),
                    consistency,
                    WriteType::Cas,
                    until,
                    Delivery::PaxosCommit(ballot),
                )
                .await?;
            }
            return Ok(result);
        }
    }

    /// Makes a serial read linearizable: settles what earlier rounds left
    /// and fences out older proposals; the caller then reads at the
    /// serial level (a quorum), which sees every chosen write.
    pub(crate) async fn settle(&self) -> Result<(), CoordinatorError> {
        let mut floor_us = i64::MIN;
        loop {
            let (ballot, _) = self.begin(&mut floor_us, None).await?;
            if self.propose(&Proposal { ballot, update: Partition::default() }, false).await? {
                return Ok(());
            }
            floor_us = floor_us.max(ballot.micros + 1);
            self.back_off().await;
        }
    }

    /// Prepares ballots until a quorum promises one with nothing left to
    /// settle: that ballot, and the replicas that promised it with their
    /// stored copies of the rows in `read` (the promise carries them: no
    /// read round of its own). `floor_us` rises past every ballot seen.
    async fn begin(
        &self,
        floor_us: &mut i64,
        read: Option<&[ClusteringRange]>,
    ) -> Result<(Ballot, Vec<(Uuid, Option<Partition>)>), CoordinatorError> {
        loop {
            let micros = shoal_runtime::clock::next_write_timestamp_us().max(*floor_us);
            let ballot = Ballot { micros, node: self.topology.me };
            let read = read.map(<[ClusteringRange]>::to_vec);
            let prepare = PaxosPrepare { table: self.table, position: self.position.clone(), ballot, read };
            let answers = self
                .ask(false, |target: Target<'_>| {
                    let prepare = prepare.clone();
                    async move {
                        let promise = target.paxos_prepare(&prepare).await?;
                        Ok(match promise.promised {
                            true => Answer::Yes(promise),
                            false => Answer::No(promise),
                        })
                    }
                })
                .await?;
            let promises = match answers {
                Gathered::Quorum(promises) => promises,
                Gathered::Refused { refusal, .. } => {
                    *floor_us = (*floor_us).max(refusal.promised_ballot.micros + 1);
                    self.back_off().await;
                    continue;
                }
                Gathered::Short { received, block_for } => return Err(self.timeout(received, block_for)),
            };
            let in_progress = promises.iter().filter_map(|(_, p)| p.accepted.as_ref()).max_by_key(|p| p.ballot);
            let newest = promises.iter().map(|(_, p)| p.committed).max().unwrap_or(Ballot::ZERO);
            let seen_us = newest.micros.max(in_progress.map_or(i64::MIN, |p| p.ballot.micros));
            if let Some(in_progress) = in_progress.filter(|p| p.update != Partition::default()) {
                if promises.iter().any(|(_, p)| p.committed < in_progress.ballot) {
                    tracing::debug!("paxos: finishing the proposal of ballot {:?}", in_progress.ballot);
                    let again = Proposal { ballot, update: in_progress.update.clone() };
                    if self.propose(&again, false).await? {
                        self.commit_settling(&again).await?;
                    } else {
                        self.back_off().await;
                    }
                    *floor_us = (*floor_us).max(micros + 1);
                    continue;
                }
            }
            if micros <= seen_us {
                // Our writes must sort after every write chosen before.
                *floor_us = (*floor_us).max(seen_us + 1);
                continue;
            }
            return Ok((ballot, promises.into_iter().map(|(host, promise)| (host, promise.data)).collect()));
        }
    }

    /// Proposes `proposal`: whether a quorum accepted it (false: not,
    /// contention). A write is tried again only when every replica
    /// refused it; if any accepted it, or may have, it may yet be chosen
    /// by a later round, and the answer is a timeout (it may or may not
    /// apply). Anything else — nothing, or a write already proposed by
    /// another round — is simply tried again.
    async fn propose(&self, proposal: &Proposal, writes: bool) -> Result<bool, CoordinatorError> {
        let mutation = self.mutation(proposal);
        let ballot = proposal.ballot;
        let payload: Rc<[u8]> = crate::wire::encode_paxos_proposal(ballot, &mutation).into();
        let mutation = Rc::new(mutation);
        let answers = self
            .ask(writes, |target: Target<'_>| {
                let (payload, mutation) = (Rc::clone(&payload), Rc::clone(&mutation));
                async move {
                    Ok(match target.paxos_accept(&mutation, ballot, &payload).await? {
                        true => Answer::Yes(()),
                        false => Answer::No(()),
                    })
                }
            })
            .await?;
        match answers {
            Gathered::Quorum(_) => Ok(true),
            // Every replica refused: the write can never be chosen.
            Gathered::Refused { received: 0, unsure: 0, .. } => Ok(false),
            Gathered::Refused { received, block_for, .. } | Gathered::Short { received, block_for } if writes => {
                Err(self.timeout(received, block_for))
            }
            Gathered::Short { received, block_for } if Instant::now() >= self.deadline => {
                Err(self.timeout(received, block_for))
            }
            Gathered::Refused { .. } | Gathered::Short { .. } => Ok(false),
        }
    }

    /// Commits a proposal finished for an earlier round at the level's
    /// quorum, whatever the request's commit consistency: the read that
    /// follows must see it.
    async fn commit_settling(&self, proposal: &Proposal) -> Result<(), CoordinatorError> {
        let (topology, targets, level) = (Rc::clone(&self.topology), self.targets(), self.quorum());
        let mutation = self.mutation(proposal);
        let commit = Delivery::PaxosCommit(proposal.ballot);
        write_handler::write(topology, targets, mutation, level, WriteType::Cas, self.deadline, commit).await
    }

    fn mutation(&self, proposal: &Proposal) -> Mutation {
        let (table, position, update) = (self.table, self.position.clone(), proposal.update.clone());
        Mutation { table, position, update, list_ops: Vec::new() }
    }

    /// Sends `message` to every live replica (Unavailable when too few
    /// are up for the level) and gathers answers until the level's quorum
    /// said yes, or it cannot be had: every replica answered, the deadline
    /// passed or — unless `hear_all` — a replica said no. A replica that
    /// fails counts as one that did not answer.
    async fn ask<'s, T, F, Fut>(&'s self, hear_all: bool, message: F) -> Result<Gathered<T>, CoordinatorError>
    where
        F: Fn(Target<'s>) -> Fut,
        Fut: std::future::Future<Output = Result<Answer<T>, CoordinatorError>>,
    {
        let targets = self.targets();
        let ReplicaPlan { mut tally, live, .. } =
            self.topology.plan(&targets.natural, &targets.pending, self.serial, false)?;
        let mut waiting: FuturesUnordered<_> = live
            .into_iter()
            .map(|(host, dc)| {
                let answer = message(Target { topology: &self.topology, host });
                async move { (host, dc, answer.await) }
            })
            .collect();
        let mut yes = Vec::new();
        let mut refusal = None;
        let mut failed = 0;
        // One low-resolution deadline for the whole round, not a timer per
        // answer waited for.
        let mut expiry = lowres::expiry(self.deadline);
        while !tally.is_met() {
            let next = match select(waiting.next(), &mut expiry).await {
                Either::Left((next, _)) => Ok(next),
                Either::Right(((), _)) => Err(()),
            };
            match next {
                Ok(Some((host, dc, Ok(Answer::Yes(answer))))) => {
                    tally.count(dc);
                    yes.push((host, answer));
                }
                Ok(Some((_, _, Ok(Answer::No(no))))) => {
                    refusal.get_or_insert(no);
                    if !hear_all {
                        break;
                    }
                }
                Ok(Some((host, _, Err(e)))) => {
                    tracing::debug!("paxos: {host} did not answer: {e}");
                    failed += 1;
                }
                Ok(None) | Err(_) => break,
            }
        }
        let (received, block_for) = (tally.received(), tally.block_for());
        Ok(match refusal {
            _ if tally.is_met() => Gathered::Quorum(yes),
            Some(refusal) => Gathered::Refused { refusal, received, block_for, unsure: failed + waiting.len() },
            None => Gathered::Short { received, block_for },
        })
    }

    async fn back_off(&self) {
        let jitter_us = (shoal_runtime::clock::now_us() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        let wait = Duration::from_micros(jitter_us % CONTENTION_BACKOFF_MAX_US);
        let left = self.deadline.saturating_duration_since(Instant::now());
        shoal_runtime::time::sleep(wait.min(left)).await;
    }
}
