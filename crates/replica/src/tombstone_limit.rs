//! Counting the tombstones a paged read passes, for ScyllaDB's
//! `query_tombstone_page_limit` (see `read`): which dead rows count, and
//! where the bounds of a partition's range tombstones fall among its rows
//! in read order, so that a page can stop on one and the next page resume
//! right after it.
//!
//! Positions inside a partition, in read order: a key's row sits between
//! the point just before it (`at_key`) and the point just after it. A
//! resume position has passed everything up to and including its point;
//! the row of a key and the point just after it are adjacent, so resuming
//! after a row has passed both.

use std::cmp::Ordering;
use std::ops::Bound;

use bytes::Bytes;
use shoal_storage::{ClusteringRange, ColumnData, Partition, Row, Tombstone};

/// A range tombstone's bound as a point of the read order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Point {
    /// Before every row: an unbounded edge the read meets first.
    First,
    /// Just before (`at_key`) or just after `key`, in read order.
    Key { key: Bytes, at_key: bool },
    /// After every row.
    Last,
}

impl Point {
    fn of(bound: &Bound<Bytes>, is_start: bool, reversed: bool) -> Point {
        // `below`: the point lies just under the key in storage order.
        let (key, below) = match bound {
            Bound::Unbounded => return if is_start != reversed { Point::First } else { Point::Last },
            Bound::Included(key) => (key, is_start),
            Bound::Excluded(key) => (key, !is_start),
        };
        Point::Key { key: key.clone(), at_key: below != reversed }
    }

    /// Whether the row at `key` comes after this point in read order.
    pub(crate) fn before_row(&self, key: &[u8], reversed: bool) -> bool {
        match self {
            Point::First => true,
            Point::Last => false,
            Point::Key { key: at, at_key } => match key_order(at, key, reversed) {
                Ordering::Less => true,
                Ordering::Equal => *at_key,
                Ordering::Greater => false,
            },
        }
    }
}

/// Where a read resumes inside a partition.
#[derive(Debug, Clone)]
pub(crate) struct Resume {
    pub(crate) key: Bytes,
    /// Just before `key` in read order (its row still to read), else just
    /// after it.
    pub(crate) at_key: bool,
}

impl Resume {
    /// Whether the row at `key` was read by an earlier page.
    pub(crate) fn passed_row(&self, key: &[u8], reversed: bool) -> bool {
        match key_order(key, &self.key, reversed) {
            Ordering::Less => true,
            Ordering::Equal => !self.at_key,
            Ordering::Greater => false,
        }
    }

    fn passed_point(&self, point: &Point, reversed: bool) -> bool {
        match point {
            Point::First => true,
            Point::Last => false,
            Point::Key { key, at_key } => {
                key_order(key, &self.key, reversed).then(rank(*at_key).cmp(&rank(self.at_key))).is_le()
            }
        }
    }
}

/// The bounds of `partition`'s range tombstones that a read of `ranges`
/// counts, in read order: those of tombstones overlapping a range and
/// newer than the partition tombstone (ScyllaDB drops the others before
/// counting), not passed before `resume`.
pub(crate) fn range_tombstone_points(
    partition: &Partition,
    ranges: &[ClusteringRange],
    reversed: bool,
    resume: Option<&Resume>,
) -> Vec<Point> {
    let mut points = Vec::new();
    for rt in &partition.range_tombstones {
        if partition.tombstone.is_some_and(|p| p.timestamp >= rt.tombstone.timestamp) {
            continue;
        }
        if !ranges.iter().any(|range| overlaps(range, &rt.range)) {
            continue;
        }
        for point in [Point::of(&rt.range.start, true, reversed), Point::of(&rt.range.end, false, reversed)] {
            if resume.is_none_or(|r| !r.passed_point(&point, reversed)) {
                points.push(point);
            }
        }
    }
    points.sort_by(|a, b| read_order(a, b, reversed));
    points
}

/// Whether a dead row counts as a tombstone: it still holds something the
/// deletion covering it (partition and range tombstones) does not shadow —
/// its own deletion, an expired marker or cell, a cell or collection
/// tombstone.
pub(crate) fn dead_row_counts(row: &Row, covering: Option<Tombstone>) -> bool {
    let newer = |timestamp: i64| covering.is_none_or(|c| !c.shadows(timestamp));
    row.deletion.is_some_and(|d| newer(d.timestamp))
        || row.marker.is_some_and(|m| newer(m.timestamp))
        || row.columns.values().any(|data| match data {
            ColumnData::Atomic(cell) => newer(cell.timestamp),
            ColumnData::Collection(collection) => {
                collection.tombstone.is_some_and(|t| newer(t.timestamp))
                    || collection.cells.values().any(|c| newer(c.cell.timestamp))
            }
        })
}

fn key_order(a: &[u8], b: &[u8], reversed: bool) -> Ordering {
    let order = a.cmp(b);
    if reversed {
        order.reverse()
    } else {
        order
    }
}

/// A point's place around its key's row: before it (0) or after it (2).
fn rank(at_key: bool) -> u8 {
    if at_key {
        0
    } else {
        2
    }
}

fn read_order(a: &Point, b: &Point, reversed: bool) -> Ordering {
    match (a, b) {
        (Point::First, Point::First) | (Point::Last, Point::Last) => Ordering::Equal,
        (Point::First, _) | (_, Point::Last) => Ordering::Less,
        (_, Point::First) | (Point::Last, _) => Ordering::Greater,
        (Point::Key { key: ka, at_key: a }, Point::Key { key: kb, at_key: b }) => {
            key_order(ka, kb, reversed).then(rank(*a).cmp(&rank(*b)))
        }
    }
}

fn overlaps(a: &ClusteringRange, b: &ClusteringRange) -> bool {
    let start = match (&a.start, &b.start) {
        (Bound::Unbounded, other) | (other, Bound::Unbounded) => other,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) if x != y => {
            if x > y {
                &a.start
            } else {
                &b.start
            }
        }
        (Bound::Excluded(_), _) => &a.start,
        _ => &b.start,
    };
    let end = match (&a.end, &b.end) {
        (Bound::Unbounded, other) | (other, Bound::Unbounded) => other,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) if x != y => {
            if x < y {
                &a.end
            } else {
                &b.end
            }
        }
        (Bound::Excluded(_), _) => &a.end,
        _ => &b.end,
    };
    !ClusteringRange { start: start.clone(), end: end.clone() }.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_storage::RangeTombstone;

    fn key(k: &'static [u8]) -> Bytes {
        Bytes::from_static(k)
    }

    fn deleted(start: Bound<Bytes>, end: Bound<Bytes>) -> RangeTombstone {
        RangeTombstone {
            range: ClusteringRange { start, end },
            tombstone: Tombstone { timestamp: 5, deletion_time_s: 0 },
        }
    }

    #[test]
    fn bounds_fall_around_rows_in_read_order() {
        let mut partition = Partition::default();
        partition.range_tombstones.push(deleted(Bound::Included(key(b"b")), Bound::Excluded(key(b"d"))));
        let all = [ClusteringRange::all()];
        let forward = range_tombstone_points(&partition, &all, false, None);
        assert_eq!(forward, [Point::Key { key: key(b"b"), at_key: true }, Point::Key { key: key(b"d"), at_key: true }]);
        assert!(forward[0].before_row(b"b", false) && !forward[0].before_row(b"a", false));
        assert!(forward[1].before_row(b"d", false) && !forward[1].before_row(b"c", false));
        // Reversed: the end comes first, and lies after row d in that order.
        let reversed = range_tombstone_points(&partition, &all, true, None);
        assert_eq!(
            reversed,
            [Point::Key { key: key(b"d"), at_key: false }, Point::Key { key: key(b"b"), at_key: false }]
        );
        assert!(!reversed[0].before_row(b"d", true) && reversed[0].before_row(b"c", true));
        // Resuming at the first bound passes it, not the second.
        let resume = Resume { key: key(b"b"), at_key: true };
        assert_eq!(range_tombstone_points(&partition, &all, false, Some(&resume)).len(), 1);
        assert!(!resume.passed_row(b"b", false) && resume.passed_row(b"a", false));
        // Outside the read's ranges, or under the partition tombstone: not counted.
        let elsewhere = [ClusteringRange { start: Bound::Included(key(b"d")), end: Bound::Unbounded }];
        assert!(range_tombstone_points(&partition, &elsewhere, false, None).is_empty());
        partition.tombstone = Some(Tombstone { timestamp: 5, deletion_time_s: 0 });
        assert!(range_tombstone_points(&partition, &all, false, None).is_empty());
    }

    #[test]
    fn only_dead_rows_holding_their_own_deletion_count() {
        let covering = Some(Tombstone { timestamp: 10, deletion_time_s: 0 });
        let mut row = Row { deletion: Some(Tombstone { timestamp: 7, deletion_time_s: 0 }), ..Row::default() };
        assert!(dead_row_counts(&row, None));
        assert!(!dead_row_counts(&row, covering));
        row.deletion = Some(Tombstone { timestamp: 11, deletion_time_s: 0 });
        assert!(dead_row_counts(&row, covering));
    }
}
