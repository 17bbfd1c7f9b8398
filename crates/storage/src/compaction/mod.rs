//! Compaction: merging SSTables into fewer, purging what is dead.
//!
//! A job's inputs are read in ring order through one [`Scanner`] each; the
//! versions of each partition are merged, purged ([`purge`]) and written to
//! new SSTables (split at the strategy's size, if it has one). The outputs
//! replace the inputs in one step; inputs' files are deleted once no read
//! uses them. Outputs record their inputs as ancestors, so a crash between
//! the swap and the deletion cannot leave both at the next start; and only
//! the last output of a split job is marked `last_of_run`, so a crash while
//! the outputs are still being written leaves the inputs, not half a run
//! (`Table::open` sorts it out).
//!
//! Compaction yields to the shard's other tasks after every partition it
//! writes, so foreground requests keep flowing beside it; run in the
//! `Compaction` scheduling group, it also gives the core back there when
//! it has had more than its shares (`shoal_runtime::sched`).
//!
//! Each job runs as a [`CompactionTask`] registered with its table while
//! it runs: its progress in input partitions (nodetool compactionstats)
//! and a flag that stops it at the next partition (nodetool stop,
//! disableautocompaction). A stopped job ends as a failed one does: its
//! outputs are deleted and its inputs stay.

pub mod backlog;
pub mod purge;
pub mod strategy;
pub mod task;

use shoal_io::IoClass;
use std::rc::Rc;

use shoal_runtime::sched::maybe_yield;

use crate::error::{StorageError, StorageResult};
use crate::partition::Partition;
use crate::sstable::writer::{self, Lineage, Writer};
use crate::sstable::{SSTable, Scanner};
use crate::table::Table;
use purge::PurgeRules;
use strategy::Job;
pub use task::{CompactionKind, CompactionTask};

/// How often cleanup looks whether a compaction in its way is done.
const COMPACTION_POLL_MS: u64 = 20;

/// What a compaction did, for logs and benchmarks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CompactionReport {
    pub inputs: usize,
    pub outputs: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub partitions_written: u64,
}

/// Runs the strategy's next job, if any; `None` when there was nothing to do.
pub async fn compact_next(table: &Table, now_s: i64) -> StorageResult<Option<CompactionReport>> {
    let strategy = table.options().strategy;
    let Some(job) = strategy.pick(&table.idle_sstables()) else { return Ok(None) };
    run(table, job, CompactionKind::Regular, now_s, &|_| true).await.map(Some)
}

/// Whether the strategy has a job for the SSTables no compaction is
/// using (nodetool compactionstats' pending tasks).
pub fn has_pending(table: &Table) -> bool {
    table.options().strategy.pick(&table.idle_sstables()).is_some()
}

/// The bytes the table's strategy still has to compact among the SSTables
/// no compaction is using (`backlog.rs`).
pub fn backlog_bytes(table: &Table) -> f64 {
    table.options().strategy.backlog_bytes(&table.idle_sstables())
}

/// Compacts every SSTable of the table (nodetool compact).
pub async fn compact_major(table: &Table, now_s: i64) -> StorageResult<Option<CompactionReport>> {
    compact_all(table, CompactionKind::Major, now_s, &|_| true).await
}

/// Compacts every SSTable of the table keeping only the partitions whose
/// token `keep` accepts (nodetool cleanup: those of ranges this node no
/// longer replicates go), then empties the table's row cache, which may
/// hold some of those.
pub async fn cleanup(table: &Table, now_s: i64, keep: &dyn Fn(i64) -> bool) -> StorageResult<Option<CompactionReport>> {
    // Every SSTable must pass through the filter: wait out a compaction
    // under way (no await between this check and the job's start).
    while table.idle_sstables().len() < table.sstable_set().len() {
        shoal_runtime::time::sleep(std::time::Duration::from_millis(COMPACTION_POLL_MS)).await;
    }
    let report = compact_all(table, CompactionKind::Cleanup, now_s, keep).await?;
    table.clear_cache();
    Ok(report)
}

async fn compact_all(
    table: &Table,
    kind: CompactionKind,
    now_s: i64,
    keep: &dyn Fn(i64) -> bool,
) -> StorageResult<Option<CompactionReport>> {
    let inputs = table.idle_sstables();
    if inputs.is_empty() {
        return Ok(None);
    }
    let job = table.options().strategy.major(inputs);
    run(table, job, kind, now_s, keep).await.map(Some)
}

async fn run(
    table: &Table,
    job: Job,
    kind: CompactionKind,
    now_s: i64,
    keep: &dyn Fn(i64) -> bool,
) -> StorageResult<CompactionReport> {
    let task = Rc::new(CompactionTask::new(kind, &job));
    table.set_compacting(&job.inputs, true);
    table.add_compaction(Rc::clone(&task));
    let started = std::time::Instant::now();
    let result = merge(table, &job, &task, now_s, keep).await;
    crate::background_metrics::record_compaction(started.elapsed());
    table.remove_compaction(&task);
    table.set_compacting(&job.inputs, false);
    result
}

async fn merge(
    table: &Table,
    job: &Job,
    task: &CompactionTask,
    now_s: i64,
    keep: &dyn Fn(i64) -> bool,
) -> StorageResult<CompactionReport> {
    let epoch = table.epoch();
    let options = table.options();
    let gc_grace_s = options.gc_grace_s;
    let ancestors: Vec<u64> = job.inputs.iter().map(|s| s.generation()).collect();
    let lineage = |last_of_run| Lineage { ancestors: ancestors.clone(), last_of_run };
    let commitlog_position = job.inputs.iter().map(|s| s.stats().commitlog_position).max().unwrap_or_default();
    let expected: usize = job.inputs.iter().map(|s| s.stats().partitions as usize).sum();
    let mut report = CompactionReport {
        inputs: job.inputs.len(),
        bytes_read: job.inputs.iter().map(|s| s.data_bytes()).sum(),
        ..Default::default()
    };

    let mut scanners = Vec::with_capacity(job.inputs.len());
    for s in &job.inputs {
        let unbounded = std::ops::Bound::Unbounded;
        scanners.push(Scanner::new(Rc::clone(s), unbounded, std::ops::Bound::Unbounded, IoClass::Compaction).await?);
    }
    let all = [crate::partition::ClusteringRange::all()];
    let mut outputs: Vec<Rc<SSTable>> = Vec::new();
    let mut writer: Option<Writer> = None;
    let result: StorageResult<()> = async {
        loop {
            if task.is_stopped() {
                return Err(StorageError::CompactionStopped);
            }
            let Some(next) = scanners.iter().filter_map(|s| s.peek()).min().cloned() else { break };
            let mut merged: Option<Partition> = None;
            for scanner in scanners.iter_mut().filter(|s| s.peek() == Some(&next)) {
                // Invariant: peek() matched, so next() yields this partition.
                if let Some((_, p)) = scanner.next(&all).await? {
                    task.count_partition();
                    match merged.as_mut() {
                        Some(m) => m.merge(p),
                        None => merged = Some(p),
                    }
                }
            }
            let Some(mut partition) = merged else { continue };
            if !keep(next.token) {
                continue;
            }
            let rules = PurgeRules {
                now_s,
                gc_grace_s,
                max_purgeable_timestamp: table.max_purgeable_timestamp(&next, &job.inputs),
                dropped_columns: &options.dropped_columns,
            };
            if !purge::purge(&mut partition, &rules) {
                continue;
            }
            let w = match writer.as_mut() {
                Some(w) => w,
                None => writer.insert(table.new_writer(expected.max(1), IoClass::Compaction).await?),
            };
            w.add(&next, &partition).await?;
            report.partitions_written += 1;
            if job.max_output_bytes.is_some_and(|max| w.raw_bytes() >= max) {
                // Invariant: `writer` was just used above.
                #[allow(clippy::unwrap_used)]
                let full = writer.take().unwrap();
                outputs.push(finish(full, commitlog_position, job.output_level, lineage(false)).await?);
            }
            maybe_yield().await;
        }
        // Always at least one output: it carries the commitlog position
        // (a TRUNCATE's, say) even when nothing survived.
        if writer.is_none() && outputs.is_empty() {
            writer = Some(table.new_writer(1, IoClass::Compaction).await?);
        }
        if let Some(w) = writer.take() {
            outputs.push(finish(w, commitlog_position, job.output_level, lineage(true)).await?);
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        if let Some(w) = writer {
            w.abort().await;
        }
        for o in outputs {
            o.mark_obsolete();
        }
        return Err(e);
    }
    report.outputs = outputs.len();
    report.bytes_written = outputs.iter().map(|s| s.data_bytes()).sum();
    if table.epoch() == epoch {
        table.install(&job.inputs, outputs);
    } else {
        outputs.iter().for_each(|o| o.mark_obsolete());
    }
    Ok(report)
}

async fn finish(
    writer: Writer,
    commitlog_position: crate::commitlog::Position,
    level: u32,
    lineage: Lineage,
) -> StorageResult<Rc<SSTable>> {
    let target = writer.descriptor().clone();
    match writer.finish(commitlog_position, level, lineage).await {
        Ok(descriptor) => Ok(Rc::new(SSTable::open(descriptor, IoClass::Compaction).await?)),
        Err(e) => {
            writer::remove_files(&target).await;
            Err(e)
        }
    }
}
