//! Leading a counter write (Cassandra's counter leader): turning each
//! counter delta of an update into this replica's new shard of that
//! counter, which every replica then merges by its clock
//! (`shoal_storage::counter`).
//!
//! The new shard is this replica's current shard plus the delta, one clock
//! tick on. Reading the current shard may await SSTable I/O, so the whole
//! step runs under the partition's lock (`Database::lead_counter_update`):
//! two increments this replica leads to one counter never read the same
//! clock. Only this replica writes its shard, so no other node's write can
//! come between.

use std::ops::Bound;

use shoal_storage::counter::{self, CounterShard};
use shoal_storage::{Cell, CellValue, ClusteringRange, ColumnData, Partition, PartitionUpdate, Row};

use crate::database::ReplicaError;

/// The rows of `update` a leader reads: each one's own clustering key
/// (the static row always comes with a partition).
pub(crate) fn rows_read(update: &PartitionUpdate) -> Vec<ClusteringRange> {
    update
        .rows
        .keys()
        .map(|key| ClusteringRange { start: Bound::Included(key.clone()), end: Bound::Included(key.clone()) })
        .collect()
}

/// Replaces every counter delta of `update` with this replica's (`leader`)
/// shard grown by it, given the partition's `current` stored state.
pub(crate) fn lead(
    current: Option<&Partition>,
    update: &mut PartitionUpdate,
    leader: u128,
) -> Result<(), ReplicaError> {
    assert_ne!(leader, CounterShard::DELTA_ID, "a leader has a host id");
    lead_row(current.map(|p| &p.static_row), &mut update.static_row, leader)?;
    for (key, row) in &mut update.rows {
        let stored = current.and_then(|p| p.rows.get(key)).map(|r| &r.row);
        lead_row(stored, &mut row.row, leader)?;
    }
    Ok(())
}

fn lead_row(stored: Option<&Row>, row: &mut Row, leader: u128) -> Result<(), ReplicaError> {
    for (column, data) in &mut row.columns {
        let ColumnData::Atomic(cell) = data else { continue };
        let CellValue::Counter { shards } = &cell.value else { continue };
        if shards.iter().any(|s| s.id != CounterShard::DELTA_ID) {
            return Err(ReplicaError::Invalid("a counter update carries a replica's shard, not a delta".into()));
        }
        let delta = counter::total(shards);
        let own = match stored.and_then(|r| r.columns.get(column)) {
            Some(ColumnData::Atomic(Cell { value: CellValue::Counter { shards }, .. })) => {
                counter::shard_of(shards, leader)
            }
            _ => None,
        }
        .unwrap_or(CounterShard { id: leader, clock: 0, value: 0 });
        let clock = own.clock.checked_add(1).ok_or_else(|| {
            ReplicaError::Invalid("a counter's shard has led its last increment (its clock is at the limit)".into())
        })?;
        let grown = CounterShard { id: leader, clock, value: own.value.wrapping_add(delta) };
        *cell = Cell::counter(cell.timestamp, Box::new([grown]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use shoal_storage::ClusteredRow;

    use super::*;

    fn update_of(cell: Cell) -> PartitionUpdate {
        let mut row = Row::default();
        row.columns.insert(1, ColumnData::Atomic(cell));
        let mut update = Partition::default();
        update.rows.insert(Bytes::from_static(b"k"), ClusteredRow { clustering: vec![Bytes::from_static(b"k")], row });
        update
    }

    fn cell_of(update: &PartitionUpdate) -> &Cell {
        match update.rows.values().next().and_then(|r| r.row.columns.get(&1)) {
            Some(ColumnData::Atomic(cell)) => cell,
            other => panic!("no counter cell: {other:?}"),
        }
    }

    #[test]
    fn a_delta_grows_the_leaders_shard_and_leaves_the_others() {
        let stored = [CounterShard { id: 3, clock: 4, value: 10 }, CounterShard { id: 9, clock: 2, value: 5 }];
        let current = update_of(Cell::counter(1, Box::new(stored)));
        let mut update = update_of(Cell::counter_delta(2, 7));
        lead(Some(&current), &mut update, 3).expect("a delta");
        let led = cell_of(&update);
        assert_eq!(led, &Cell::counter(2, Box::new([CounterShard { id: 3, clock: 5, value: 17 }])));
        let merged = Cell::reconcile(cell_of(&current).clone(), led.clone());
        assert_eq!(merged.live_value(0), Some(Bytes::copy_from_slice(&22i64.to_be_bytes())));
    }

    #[test]
    fn a_first_increment_starts_the_leaders_shard() {
        let mut update = update_of(Cell::counter_delta(2, -4));
        lead(None, &mut update, 8).expect("a delta");
        assert_eq!(cell_of(&update), &Cell::counter(2, Box::new([CounterShard { id: 8, clock: 1, value: -4 }])));
    }

    #[test]
    fn a_replicas_shard_in_an_update_is_refused() {
        let mut update = update_of(Cell::counter(2, Box::new([CounterShard { id: 8, clock: 1, value: 1 }])));
        assert!(matches!(lead(None, &mut update, 8), Err(ReplicaError::Invalid(_))));
    }
}
