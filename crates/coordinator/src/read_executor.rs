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
//! Counter tables are not repaired this way: their cells are deltas, and
//! writing a merge again would count them twice.
//!
//! A range is read in pieces, one per run of vnode ranges with the same
//! replicas, in ring order, until its row limit.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use shoal_replica::{Mutation, PartitionSelection, ReadCommand, ReadResult};
use shoal_schema::KeyspaceMeta;
use shoal_storage::{Partition, PartitionPosition};
use uuid::Uuid;

use crate::consistency::Tally;
use crate::proxy::merge_answers;
use crate::topology::Topology;
use crate::verbs::{digest, Target};
use crate::{wire, ConsistencyLevel, CoordinatorError, WriteType};

/// A read at `consistency` of `command`, whose table is in `keyspace`.
pub(crate) async fn read(
    topology: Rc<Topology>,
    keyspace: Arc<KeyspaceMeta>,
    counters: bool,
    command: ReadCommand,
    consistency: ConsistencyLevel,
    deadline: Instant,
) -> Result<ReadResult, CoordinatorError> {
    if consistency == ConsistencyLevel::EachQuorum {
        return Err(CoordinatorError::Invalid("EACH_QUORUM ConsistencyLevel is only supported for writes".to_string()));
    }
    let reader = Reader { topology: &topology, counters, consistency, deadline };
    match &command.partitions {
        PartitionSelection::Keys(keys) => {
            let mut groups: BTreeMap<Vec<Uuid>, Vec<PartitionPosition>> = BTreeMap::new();
            for key in keys {
                groups.entry(topology.replicas(&keyspace, key.token)).or_default().push(key.clone());
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
            let mut pieces: Vec<(Vec<Uuid>, ReadCommand)> = Vec::new();
            for (from, to, token) in topology.split_range(from, to) {
                let replicas = topology.replicas(&keyspace, token);
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
    counters: bool,
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
        let local_dc = crate::cluster::node().data_center;
        let data_centers: Vec<String> = replicas.iter().map(|host| topology.data_center(*host)).collect();
        let tally = Tally::new(self.consistency, &data_centers, &local_dc);
        let mut live: Vec<(Uuid, String)> =
            replicas.iter().copied().zip(data_centers).filter(|(host, _)| topology.is_up(*host)).collect();
        let live_dcs: Vec<String> = live.iter().map(|(_, dc)| dc.clone()).collect();
        if let Some((required, alive)) = tally.unmet_by(&live_dcs) {
            return Err(CoordinatorError::Unavailable { consistency: self.consistency, required, alive });
        }
        // This node first, then its data center: the cheapest answers.
        live.sort_by_key(|(host, dc)| (*host != topology.me, *dc != local_dc));
        let mut plan = tally;
        let mut targets = Vec::new();
        for (host, dc) in live {
            if plan.wants(&dc) {
                plan.count(&dc);
                targets.push(Target { topology, host });
            }
            if plan.is_met() {
                break;
            }
        }
        let block_for = targets.len();
        let wait = self.deadline.saturating_duration_since(Instant::now());
        let (data, digests) = futures_util::join!(
            shoal_runtime::time::timeout(wait, targets[0].read_data(command, self.deadline)),
            join_all(
                targets[1..].iter().map(|t| shoal_runtime::time::timeout(wait, t.read_digest(command, self.deadline)))
            )
        );
        let data = match data {
            Ok(Ok(data)) => data,
            Ok(Err(e @ CoordinatorError::Invalid(_))) => return Err(e),
            failed => {
                if let Ok(Err(e)) = failed {
                    tracing::debug!("a replica failed a read: {e}");
                }
                let received = digests.iter().filter(|d| matches!(d, Ok(Ok(_)))).count();
                return Err(self.timeout(received, block_for, false));
            }
        };
        let digests: Vec<u64> = digests.into_iter().filter_map(|d| d.ok().and_then(Result::ok)).collect();
        if digests.len() + 1 < block_for {
            return Err(self.timeout(digests.len() + 1, block_for, true));
        }
        let expected = digest(&data);
        if self.counters || digests.iter().all(|d| *d == expected) {
            return Ok(data);
        }
        self.repair(&targets, command, &data).await?;
        targets[0].read_data(command, self.deadline).await
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
        let raw_command = ReadCommand { partitions: PartitionSelection::Keys(keys.clone()), ..command.clone() };
        let copies = join_all(targets.iter().map(|t| t.read_raw(&raw_command))).await;
        let copies: Vec<Vec<Option<Partition>>> =
            copies.into_iter().collect::<Result<_, _>>().map_err(|_| self.timeout(0, block_for, true))?;
        let mut repairs = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let mut merged: Option<Partition> = None;
            for copy in copies.iter().filter_map(|c| c[i].clone()) {
                match &mut merged {
                    None => merged = Some(copy),
                    Some(m) => m.merge(copy),
                }
            }
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
        tracing::debug!("read repair: {} partition copies differ", repairs.len());
        let written = join_all(repairs.iter().map(|(target, mutation)| {
            let payload = wire::encode_mutation(mutation);
            async move { target.mutate(mutation, &payload, WriteType::Simple, self.deadline).await }
        }))
        .await;
        written.into_iter().collect::<Result<Vec<()>, _>>().map_err(|_| self.timeout(block_for, block_for, true))?;
        Ok(())
    }
}
