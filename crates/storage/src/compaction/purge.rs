//! What compaction may throw away from a merged partition.
//!
//! Always: data shadowed by a deletion in the same partition (the deletion
//! goes on to the output, so nothing can come back). An expired cell loses
//! its value but keeps its timestamp and expiry, so reconciliation at equal
//! timestamps stays the total order of `partition`: it still beats a
//! same-timestamp value without expiry and still loses to one expiring
//! later, as it did while it lived (a tombstone at its timestamp would beat
//! both, one a microsecond below would lose to both); where two of them
//! tie to the expiry, both are expired, so their values no longer matter.
//! It goes as a tombstone dated at its expiry would. A tombstone itself goes only when
//! both hold: it is older than `gc_grace_seconds` (so every replica has had
//! time to see it), and no data it could shadow remains outside this
//! compaction — its timestamp is below `max_purgeable_timestamp`, the oldest
//! write any other SSTable or memtable holding the partition may have.

use bytes::Bytes;

use crate::partition::{Cell, CellValue, ColumnData, Partition, Row, Tombstone};

#[derive(Debug, Clone, Copy)]
pub struct PurgeRules<'a> {
    pub now_s: i64,
    pub gc_grace_s: i64,
    /// Tombstones at or above this timestamp may shadow data elsewhere.
    pub max_purgeable_timestamp: i64,
    /// Dropped columns (id, drop time): their cells at or before the drop
    /// time are gone for good, whatever other SSTables hold.
    pub dropped_columns: &'a [(u32, i64)],
}

impl PurgeRules<'_> {
    fn purgeable(&self, t: Tombstone) -> bool {
        t.deletion_time_s.saturating_add(self.gc_grace_s) < self.now_s && t.timestamp < self.max_purgeable_timestamp
    }
}

/// Purges `p` in place; returns whether anything of it is left.
pub fn purge(p: &mut Partition, rules: &PurgeRules) -> bool {
    let partition_deletion = p.tombstone;
    let ranges = std::mem::take(&mut p.range_tombstones);
    purge_row(&mut p.static_row, partition_deletion, rules);
    p.rows.retain(|key, row| {
        let covering = ranges
            .iter()
            .filter(|rt| rt.range.contains(key))
            .map(|rt| rt.tombstone)
            .fold(partition_deletion, max_tombstone);
        purge_row(&mut row.row, covering, rules);
        !row.row.is_empty()
    });
    // A range tombstone older than the partition deletion is redundant.
    p.range_tombstones = ranges
        .into_iter()
        .filter(|rt| partition_deletion.is_none_or(|pd| rt.tombstone.timestamp > pd.timestamp))
        .filter(|rt| !rules.purgeable(rt.tombstone))
        .collect();
    if p.tombstone.is_some_and(|t| rules.purgeable(t)) {
        p.tombstone = None;
    }
    p.tombstone.is_some() || !p.static_row.is_empty() || !p.rows.is_empty() || !p.range_tombstones.is_empty()
}

fn max_tombstone(a: Option<Tombstone>, b: Tombstone) -> Option<Tombstone> {
    Some(match a {
        Some(a) if a.timestamp >= b.timestamp => a,
        _ => b,
    })
}

fn purge_row(row: &mut Row, covering: Option<Tombstone>, rules: &PurgeRules) {
    let covering = match (covering, row.deletion) {
        (c, Some(d)) => max_tombstone(c, d),
        (c, None) => c,
    };
    if row.deletion.is_some_and(|d| covering.is_some_and(|c| c.timestamp > d.timestamp) || rules.purgeable(d)) {
        row.deletion = None;
    }
    let shadowed = |ts: i64| covering.is_some_and(|c| c.shadows(ts));
    if let Some(m) = row.marker {
        let expired_long_ago = m.expiry.is_some_and(|x| x.expires_at_s.saturating_add(rules.gc_grace_s) < rules.now_s);
        if shadowed(m.timestamp) || expired_long_ago {
            row.marker = None;
        }
    }
    row.columns.retain(|id, data| {
        // A dropped column's cells at or before the drop read as deleted
        // by it, so they and the deletions among them go.
        let covering = match rules.dropped_columns.iter().find(|(dropped, _)| dropped == id) {
            Some(&(_, timestamp)) => max_tombstone(covering, Tombstone { timestamp, deletion_time_s: 0 }),
            None => covering,
        };
        purge_column(data, covering, rules)
    });
}

/// Purges one column's data under the deletion `covering` it; returns
/// whether anything of it stays.
fn purge_column(data: &mut ColumnData, covering: Option<Tombstone>, rules: &PurgeRules) -> bool {
    let shadowed = |ts: i64| covering.is_some_and(|c| c.shadows(ts));
    match data {
        ColumnData::Atomic(cell) => purge_cell(cell, shadowed(cell.timestamp), rules),
        ColumnData::Collection(c) => {
            let inner = match (covering, c.tombstone) {
                (cov, Some(t)) => max_tombstone(cov, t),
                (cov, None) => cov,
            };
            if c.tombstone.is_some_and(|t| inner.is_some_and(|i| i.timestamp > t.timestamp) || rules.purgeable(t)) {
                c.tombstone = None;
            }
            c.cells.retain(|_, cc| {
                let shadowed = inner.is_some_and(|i| i.shadows(cc.cell.timestamp));
                purge_cell(&mut cc.cell, shadowed, rules)
            });
            c.tombstone.is_some() || !c.cells.is_empty()
        }
    }
}

/// Returns whether the cell stays.
fn purge_cell(cell: &mut Cell, shadowed: bool, rules: &PurgeRules) -> bool {
    if shadowed {
        return false;
    }
    if let CellValue::Live { expiry: Some(x), value } = &mut cell.value {
        if x.expires_at_s <= rules.now_s {
            *value = Bytes::new();
            return !rules.purgeable(Tombstone { timestamp: cell.timestamp, deletion_time_s: x.expires_at_s });
        }
    }
    match cell.value {
        CellValue::Dead { deletion_time_s } => {
            !rules.purgeable(Tombstone { timestamp: cell.timestamp, deletion_time_s })
        }
        CellValue::Live { .. } | CellValue::Counter { .. } => true,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::partition::{ClusteredRow, Expiry};

    fn rules(now_s: i64, max_purgeable_timestamp: i64) -> PurgeRules<'static> {
        PurgeRules { now_s, gc_grace_s: 10, max_purgeable_timestamp, dropped_columns: &[] }
    }

    fn partition_with(cell: Cell) -> Partition {
        let mut row = Row::default();
        row.columns.insert(1, ColumnData::Atomic(cell));
        let mut p = Partition::default();
        p.rows.insert(Bytes::from_static(b"k"), ClusteredRow { clustering: vec![], row });
        p
    }

    #[test]
    fn tombstones_go_only_after_gc_grace_and_when_nothing_older_remains() {
        let mut p = partition_with(Cell::dead(5, 100));
        assert!(purge(&mut p, &rules(105, i64::MAX)), "within gc grace");
        assert!(purge(&mut p, &rules(200, 5)), "older data may remain elsewhere");
        assert!(!purge(&mut p, &rules(200, 6)));
    }

    #[test]
    fn shadowed_data_goes_and_expired_cells_lose_their_values() {
        let mut p = partition_with(Cell::live(5, Bytes::from_static(b"v"), None));
        p.tombstone = Some(Tombstone { timestamp: 6, deletion_time_s: 100 });
        assert!(purge(&mut p, &rules(101, i64::MAX)));
        assert!(p.rows.is_empty());
        let mut p =
            partition_with(Cell::live(5, Bytes::from_static(b"v"), Some(Expiry { ttl_s: 10, expires_at_s: 50 })));
        assert!(purge(&mut p, &rules(55, i64::MAX)));
        let cell = &p.rows[&Bytes::from_static(b"k")].row.columns[&1];
        let expired = Cell::live(5, Bytes::new(), Some(Expiry { ttl_s: 10, expires_at_s: 50 }));
        assert_eq!(cell, &ColumnData::Atomic(expired.clone()), "its place in the order kept, its value gone");
        // It still decides a tie the way the live cell did.
        let never_expires = Cell::live(5, Bytes::from_static(b"z"), None);
        assert_eq!(Cell::reconcile(expired.clone(), never_expires.clone()), expired);
        assert_eq!(Cell::reconcile(never_expires, expired.clone()), expired);
        let expires_later = Cell::live(5, Bytes::from_static(b"a"), Some(Expiry { ttl_s: 10, expires_at_s: 90 }));
        assert_eq!(Cell::reconcile(expired, expires_later.clone()), expires_later);
        assert!(!purge(&mut p, &rules(61, i64::MAX)));
    }

    #[test]
    fn cells_of_a_dropped_column_at_or_before_the_drop_go() {
        let dropped = [(1, 5)];
        let rules = PurgeRules { dropped_columns: &dropped, ..rules(0, i64::MAX) };
        for (timestamp, stays) in [(4, false), (5, false), (6, true)] {
            let mut p = partition_with(Cell::live(timestamp, Bytes::from_static(b"v"), None));
            assert_eq!(purge(&mut p, &rules), stays, "a cell at {timestamp}");
            let mut p = partition_with(Cell::dead(timestamp, 0));
            assert_eq!(purge(&mut p, &rules), stays, "a deletion at {timestamp}");
        }
        let mut p = partition_with(Cell::live(4, Bytes::from_static(b"v"), None));
        let other = [(2, 5)];
        assert!(purge(&mut p, &PurgeRules { dropped_columns: &other, ..rules }), "another column's drop");
    }
}
