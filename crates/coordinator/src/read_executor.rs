//! A read from a partition's replicas (ScyllaDB's read executors): as many
//! replicas as the consistency level needs, this node first when it is
//! one, then its data center's. The first is asked for the rows, the
//! others for a digest of theirs. Equal digests answer the read.
//!
//! Different digests mean a replica missed writes: read repair. Every
//! asked replica returns its stored partitions as they are (tombstones and
//! timestamps kept); they are merged, and each replica whose copy differs
//! from the merge gets the merge written to it. Then the rows are read
//! again from the first replica, which now holds the merge. For a range,
//! the partitions to repair are those any replica returned rows of.
//! Counter cells merge by their replicas' shards, so writing a merge again
//! counts nothing twice; a counter cell still holding a delta (written
//! before counter shards existed: each replica's held its whole count) is
//! never merged across replicas, and its partition is left as it is.
//!
//! A range is read in pieces, one per run of vnode ranges with the same
//! replicas, in ring order, until its row limit.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::{join_all, select, Either};
use shoal_replica::{Mutation, PartitionSelection, ReadCommand, ReadResult};
use shoal_runtime::lowres;
use shoal_schema::KeyspaceMeta;
use shoal_storage::{Partition, PartitionPosition};
use uuid::Uuid;

use crate::local::{digest, merge_answers};
use crate::target::Target;
use crate::topology::{Replica, ReplicaPlan, Topology};
use crate::{wire, ConsistencyLevel, CoordinatorError, WriteType};

/// A read at `consistency` of `command`, whose table is in `keyspace`.
pub(crate) async fn read(
    topology: Rc<Topology>,
    keyspace: Arc<KeyspaceMeta>,
    command: ReadCommand,
    consistency: ConsistencyLevel,
    deadline: Instant,
) -> Result<ReadResult, CoordinatorError> {
    if consistency == ConsistencyLevel::EachQuorum {
        return Err(CoordinatorError::Invalid("EACH_QUORUM ConsistencyLevel is only supported for writes".to_string()));
    }
    let reader = Reader { topology: &topology, consistency, deadline };
    match &command.partitions {
        PartitionSelection::Keys(keys) => {
            let map = topology.replica_map(&keyspace);
            if let [key] = keys.as_slice() {
                // One partition (nearly every read): its replicas, with no
                // grouping of keys by replica set.
                return reader.read_from(&map.replicas(key.token), &command).await;
            }
            let mut groups: BTreeMap<Vec<Uuid>, Vec<PartitionPosition>> = BTreeMap::new();
            for key in keys {
                groups.entry(map.replicas(key.token)).or_default().push(key.clone());
            }
            if groups.len() == 1 {
                let (replicas, _) = groups.pop_first().expect("one group");
                return reader.read_from(&replicas, &command).await;
            }
            let row_limit = command.row_limit;
            let answers = join_all(groups.into_iter().map(|(replicas, keys)| {
                let command = ReadCommand { partitions: PartitionSelection::Keys(keys), ..command.clone() };
                let reader = &reader;
                async move { reader.read_from(&replicas, &command).await }
            }))
            .await;
            merge_answers(answers, row_limit)
        }
        PartitionSelection::Range { from, to } => {
            let map = topology.replica_map(&keyspace);
            let mut pieces: Vec<(Vec<Uuid>, ReadCommand)> = Vec::new();
            for (from, to, token) in topology.split_range(from, to) {
                let replicas = map.replicas(token);
                match pieces.last_mut() {
                    // The same replicas as the piece before: one read.
                    Some((last, command)) if *last == replicas => {
                        if let PartitionSelection::Range { to: end, .. } = &mut command.partitions {
                            *end = to;
                        }
                    }
                    _ => {
                        let partitions = PartitionSelection::Range { from, to };
                        pieces.push((replicas, ReadCommand { partitions, ..command.clone() }));
                    }
                }
            }
            let mut merged = ReadResult::default();
            for (replicas, mut piece) in pieces {
                piece.row_limit = command.row_limit - merged.rows.len();
                let answer = reader.read_from(&replicas, &piece).await?;
                merged.rows.extend(answer.rows);
                merged.short = answer.short;
                if answer.limit_reached || merged.rows.len() >= command.row_limit {
                    merged.limit_reached = true;
                    break;
                }
            }
            Ok(merged)
        }
    }
}

struct Reader<'a> {
    topology: &'a Topology,
    consistency: ConsistencyLevel,
    deadline: Instant,
}

impl Reader<'_> {
    fn timeout(&self, received: usize, block_for: usize, data_present: bool) -> CoordinatorError {
        CoordinatorError::ReadTimeout { consistency: self.consistency, received, block_for, data_present }
    }

    /// Reads `command` from `replicas`, as many as the level needs.
    async fn read_from(&self, replicas: &[Uuid], command: &ReadCommand) -> Result<ReadResult, CoordinatorError> {
        let topology = self.topology;
        let ReplicaPlan { tally: mut plan, live: mut chosen, .. } =
            topology.plan(replicas, &[], self.consistency, false)?;
        // This node first, then its data center: the cheapest answers.
        chosen.sort_by_key(|(host, dc)| (*host != topology.me, *dc != topology.local_dc));
        // The live replicas' list keeps those chosen, in order; the rest
        // are spares (none, most often: no allocation).
        let mut spares = Vec::new();
        chosen.retain(|&(host, dc)| {
            let wanted = plan.wants(dc);
            match wanted {
                true => plan.count(dc),
                false => spares.push((host, dc)),
            }
            wanted
        });
        let block_for = chosen.len();
        let spares = RefCell::new(spares);
        let (first, rest) = chosen.split_first().expect("a level needs at least one replica");
        // Who answered so far, for the timeout's counts.
        let (data_answered, digests_answered) = (Cell::new(false), Cell::new(0));
        let asked = async {
            futures_util::join!(
                async {
                    let data = self.ask(*first, &spares, |t| async move { t.read_data(command, self.deadline).await });
                    let data = data.await;
                    data_answered.set(data.is_ok());
                    data
                },
                join_all(rest.iter().map(|replica| async {
                    let digest =
                        self.ask(*replica, &spares, |t| async move { t.read_digest(command, self.deadline).await });
                    let digest = digest.await;
                    digests_answered.set(digests_answered.get() + usize::from(digest.is_ok()));
                    digest
                }))
            )
        };
        // One low-resolution deadline for every replica's answer, not a
        // runtime timer per replica.
        let (data, digests) = match select(pin!(asked), lowres::expiry(self.deadline)).await {
            Either::Left((answers, _)) => answers,
            Either::Right(_) => {
                let data_present = data_answered.get();
                let received = digests_answered.get() + usize::from(data_present);
                return Err(self.timeout(received, block_for, data_present));
            }
        };
        let (data_host, data) = match data {
            Ok(answer) => answer,
            Err(e @ CoordinatorError::Invalid(_)) => return Err(e),
            Err(_) => return Err(self.timeout(digests_answered.get(), block_for, false)),
        };
        let digests: Vec<(Uuid, u128)> = digests.into_iter().filter_map(Result::ok).collect();
        if digests.len() < rest.len() {
            return Err(self.timeout(digests.len() + 1, block_for, true));
        }
        let expected = digest(&data);
        if digests.iter().all(|(_, d)| *d == expected) {
            return Ok(data);
        }
        // Those that answered, the data's first.
        let targets: Vec<Target<'_>> = [data_host]
            .into_iter()
            .chain(digests.iter().map(|(host, _)| *host))
            .map(|host| Target { topology, host })
            .collect();
        self.repair(&targets, command, &data).await?;
        targets[0].read_data(command, self.deadline).await
    }

    /// Asks `replica` with `ask`; when it fails (it may be down and not
    /// yet known to be), asks a spare live replica of the same data center
    /// instead, so the answer counts the same. Returns who answered. The
    /// caller bounds the wait by the read's deadline.
    async fn ask<'t, T, F, Fut>(
        &self,
        replica: Replica<'_>,
        spares: &RefCell<Vec<Replica<'_>>>,
        ask: F,
    ) -> Result<(Uuid, T), CoordinatorError>
    where
        F: Fn(Target<'t>) -> Fut,
        Fut: std::future::Future<Output = Result<T, CoordinatorError>>,
        Self: 't,
    {
        let (mut host, dc) = replica;
        loop {
            let failure = match ask(Target { topology: self.topology, host }).await {
                Ok(answer) => return Ok((host, answer)),
                Err(e @ CoordinatorError::Invalid(_)) => return Err(e),
                Err(e) => e,
            };
            tracing::debug!("replica {host} failed a read: {failure}");
            let mut spares = spares.borrow_mut();
            match spares.iter().position(|(_, spare_dc)| *spare_dc == dc) {
                Some(i) => host = spares.remove(i).0,
                None => return Err(failure),
            }
        }
    }

    /// Brings `targets` in line for the partitions `command` read: each
    /// gets the merge of every target's copy where its own differs.
    async fn repair(
        &self,
        targets: &[Target<'_>],
        command: &ReadCommand,
        data: &ReadResult,
    ) -> Result<(), CoordinatorError> {
        let block_for = targets.len();
        let keys: Vec<PartitionPosition> = match &command.partitions {
            PartitionSelection::Keys(keys) => keys.clone(),
            PartitionSelection::Range { .. } => {
                let answers = join_all(targets[1..].iter().map(|t| t.read_data(command, self.deadline))).await;
                let mut keys: Vec<PartitionPosition> = data.rows.iter().map(|r| r.position.partition.clone()).collect();
                for answer in answers {
                    let answer = answer.map_err(|_| self.timeout(0, block_for, true))?;
                    keys.extend(answer.rows.into_iter().map(|r| r.position.partition));
                }
                keys.sort();
                keys.dedup();
                keys
            }
        };
        if keys.is_empty() {
            return Ok(());
        }
        let raw_command = ReadCommand { partitions: PartitionSelection::Keys(keys), ..command.clone() };
        let repaired = reconcile(targets, &raw_command, self.deadline).await;
        repaired.map_err(|_| self.timeout(0, block_for, true))?;
        Ok(())
    }
}

/// What [`reconcile`] did: each partition's merge (in the command's key
/// order; `None` where no target holds it) and how many copies it wrote.
pub(crate) struct Reconciled {
    pub merged: Vec<Option<Partition>>,
    pub written: usize,
}

/// Brings `targets` in line for the partitions `command` names (its keys):
/// their stored copies are read as they are, merged, and each target whose
/// copy differs from the merge gets the merge written to it. Read repair
/// and repair use it; Paxos has its copies from the promises already
/// ([`repair_copies`]).
pub(crate) async fn reconcile(
    targets: &[Target<'_>],
    command: &ReadCommand,
    deadline: Instant,
) -> Result<Reconciled, CoordinatorError> {
    let copies = join_all(targets.iter().map(|t| t.read_raw(command))).await;
    let copies: Vec<Vec<Option<Partition>>> = copies.into_iter().collect::<Result<_, _>>()?;
    repair_copies(targets, command, copies, deadline).await
}

/// [`reconcile`] of `copies` already read: per target, its stored copy of
/// each of `command`'s partitions.
pub(crate) async fn repair_copies(
    targets: &[Target<'_>],
    command: &ReadCommand,
    copies: Vec<Vec<Option<Partition>>>,
    deadline: Instant,
) -> Result<Reconciled, CoordinatorError> {
    let PartitionSelection::Keys(keys) = &command.partitions else {
        unreachable!("a reconciliation names its partitions");
    };
    assert_eq!(copies.len(), targets.len(), "a copy per target");
    assert!(copies.iter().all(|c| c.len() == keys.len()), "each target's copies are the keys'");
    let mut repairs = Vec::new();
    let mut merges = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        if copies.iter().any(|c| c[i].as_ref().is_some_and(Partition::holds_counter_deltas)) {
            merges.push(copies.iter().find_map(|c| c[i].clone()));
            continue;
        }
        let mut merged: Option<Partition> = None;
        for copy in copies.iter().filter_map(|c| c[i].clone()) {
            match &mut merged {
                None => merged = Some(copy),
                Some(m) => m.merge(copy),
            }
        }
        merges.push(merged.clone());
        let Some(merged) = merged else { continue };
        for (target, copy) in targets.iter().zip(&copies) {
            if copy[i].as_ref() != Some(&merged) {
                let mutation = Mutation {
                    table: command.table,
                    position: key.clone(),
                    update: merged.clone(),
                    list_ops: Vec::new(),
                };
                repairs.push((target, mutation));
            }
        }
    }
    tracing::debug!("reconcile: {} partition copies differ", repairs.len());
    crate::metrics::note_reconcile_writes(repairs.len());
    let repaired = repairs.len();
    let written = join_all(repairs.into_iter().map(|(target, mutation)| {
        let payload = wire::encode_mutation(&mutation);
        async move { target.mutate(mutation, &payload, WriteType::Simple, deadline).await }
    }))
    .await;
    written.into_iter().collect::<Result<Vec<()>, _>>()?;
    Ok(Reconciled { merged: merges, written: repaired })
}
