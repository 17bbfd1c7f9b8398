//! A memcached item as a read finds it: from a single row the memtable or
//! the row cache shares (`shoal_storage::found`), its cells taken straight
//! from the compact bytes, the value a slice of them (a hit decodes no
//! partition and copies no value); or from a partition in the general
//! form (a row written by CQL, one merged from several sources). It owns
//! what an item is as read ([`Item`], its [`Lifetime`]) and the columns it
//! is read from ([`ItemTable`]); `item` runs the operations on them.

use bytes::Bytes;
use shoal_storage::{Cell, ColumnData, Expiry, Found, Partition, SharedRow, SharedValue};
use uuid::Uuid;

use crate::item_access::Access;

/// An items table: its id and the column ids of its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemTable {
    pub id: Uuid,
    pub value: u32,
    pub flags: u32,
    pub cas: u32,
}

/// When an item expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    Forever,
    /// At this unix second; at or before now means already expired.
    Until(i64),
}

impl Lifetime {
    /// Whether an item with it is still there at `now_s`.
    pub fn is_live(self, now_s: i64) -> bool {
        match self {
            Lifetime::Forever => true,
            Lifetime::Until(at) => at > now_s,
        }
    }
}

/// An item as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub value: Bytes,
    pub flags: u32,
    pub cas: u64,
    pub lifetime: Lifetime,
    /// Its hints as they were before this operation.
    pub access: Access,
    /// This operation handed the client the token to (re)cache it (`W`).
    pub won: bool,
}

/// The item `found` holds at `now_s`, if it holds a live one. Without
/// `with_value` (an operation that looks only at whether the item is there
/// and its CAS unique: a delete) its value may be left empty, where taking
/// it would copy it (an 8-byte value, held as a word).
pub(crate) fn found_item(table: ItemTable, found: &Found, now_s: i64, with_value: bool) -> Option<Item> {
    match found {
        Found::Row(row) => row_item(table, row, now_s, with_value),
        Found::Partition(partition) => live_item(table, partition, now_s),
    }
}

/// The item a shared single row holds: its cells share one timestamp and
/// expiry, and it has no deletions.
fn row_item(table: ItemTable, row: &SharedRow, now_s: i64, with_value: bool) -> Option<Item> {
    let (header, cells) = row.read();
    if !header.is_live(now_s) {
        return None;
    }
    let (mut value, mut flags, mut cas) = (None, None, None);
    for (id, cell) in cells {
        if id == table.value {
            value = Some(match cell {
                _ if !with_value => Bytes::new(),
                SharedValue::Bytes(bytes) => bytes,
                SharedValue::Word(word) => Bytes::copy_from_slice(&word.to_be_bytes()),
            });
        } else if id == table.flags {
            flags = number(cell);
        } else if id == table.cas {
            cas = number(cell);
        }
    }
    Some(item(value?, flags, cas, header.timestamp, header.expiry))
}

/// A bigint cell's number (an 8-byte value is kept as its word).
fn number(value: SharedValue) -> Option<i64> {
    match value {
        SharedValue::Word(word) => Some(word as i64),
        SharedValue::Bytes(bytes) => <[u8; 8]>::try_from(&bytes[..]).ok().map(i64::from_be_bytes),
    }
}

/// The item the partition holds at `now_s`: its value cell live and not
/// deleted.
pub(crate) fn live_item(table: ItemTable, partition: &Partition, now_s: i64) -> Option<Item> {
    let key = Bytes::new();
    let row = &partition.rows.get(&key)?.row;
    let deletion = [partition.deletion_for_row(&key), row.deletion].into_iter().flatten().max_by_key(|t| t.timestamp);
    let live = |column: u32| -> Option<(&Cell, Bytes)> {
        let Some(ColumnData::Atomic(cell)) = row.columns.get(&column) else { return None };
        if deletion.is_some_and(|d| d.shadows(cell.timestamp)) {
            return None;
        }
        Some((cell, cell.live_value(now_s)?))
    };
    let (value_cell, value) = live(table.value)?;
    let number = |column: u32| live(column).and_then(|(_, v)| <[u8; 8]>::try_from(&v[..]).ok()).map(i64::from_be_bytes);
    Some(item(value, number(table.flags), number(table.cas), value_cell.timestamp, value_cell.expiry()))
}

/// An item of these cells (the value's timestamp and expiry): a row
/// without `cas` (written by CQL) reports its value's timestamp. Its hints
/// are those of an item written and never fetched.
fn item(value: Bytes, flags: Option<i64>, cas: Option<i64>, timestamp_us: i64, expiry: Option<Expiry>) -> Item {
    Item {
        value,
        // flags are a u32 kept in a bigint: the low 32 bits.
        flags: flags.map_or(0, |f| f as u32),
        cas: cas.unwrap_or(timestamp_us) as u64,
        lifetime: expiry.map_or(Lifetime::Forever, |e| Lifetime::Until(e.expires_at_s)),
        access: Access::written(timestamp_us.div_euclid(1_000_000)),
        won: false,
    }
}

#[cfg(test)]
mod tests {
    use shoal_storage::memtable::Memtable;
    use shoal_storage::{ClusteredRow, ClusteringRange, PartitionPosition, Row};

    use super::*;

    const TABLE: ItemTable = ItemTable { id: uuid::Uuid::nil(), value: 1, flags: 2, cas: 3 };
    const NOW_S: i64 = 1_800_000_000;

    /// An item's partition as `item` writes it (`cas`: `None` as CQL
    /// writes a row without one).
    fn partition(value: &[u8], flags: i64, cas: Option<i64>, expires_at_s: Option<i64>) -> Partition {
        let expiry = expires_at_s.map(|at| Expiry { ttl_s: 60, expires_at_s: at });
        let cell =
            |bytes: &[u8]| ColumnData::Atomic(Cell::live(1_700_000_000_123_456, Bytes::copy_from_slice(bytes), expiry));
        let mut row = Row::default();
        row.columns.insert(TABLE.value, cell(value));
        row.columns.insert(TABLE.flags, cell(&flags.to_be_bytes()));
        if let Some(cas) = cas {
            row.columns.insert(TABLE.cas, cell(&cas.to_be_bytes()));
        }
        let mut p = Partition::default();
        p.rows.insert(Bytes::new(), ClusteredRow { clustering: Vec::new(), row });
        p
    }

    /// What a read of `p` from a memtable finds.
    fn found_in_memtable(p: Partition) -> Found {
        let position = PartitionPosition { token: 1, key: Bytes::from_static(b"k") };
        let mut memtable = Memtable::default();
        memtable.apply(position.clone(), p, None);
        memtable.read_found(&position, &[ClusteringRange::all()]).expect("the memtable holds it")
    }

    #[test]
    fn an_item_read_shared_is_the_item_its_partition_holds() {
        let cases = [
            partition(b"value", 7, Some(42), None),
            partition(b"", i64::from(u32::MAX), Some(1), None),
            // Expires later, expires now, expired.
            partition(b"soon", 0, Some(3), Some(NOW_S + 10)),
            partition(b"now", 0, Some(3), Some(NOW_S)),
            partition(b"gone", 0, Some(3), Some(NOW_S - 10)),
            // Written by CQL: no cas, which is then the write timestamp.
            partition(b"cql", 1, None, None),
            // An 8-byte value is held as a word.
            partition(b"12345678", 0, Some(9), None),
        ];
        for p in cases {
            let found = found_in_memtable(p.clone());
            assert!(matches!(found, Found::Row(_)), "not held compactly: {p:?}");
            assert_eq!(found_item(TABLE, &found, NOW_S, true), live_item(TABLE, &p, NOW_S), "{p:?}");
            // Without its value: the same item (present or not, its CAS
            // unique, flags and lifetime), its value left empty.
            let bare = live_item(TABLE, &p, NOW_S).map(|item| Item { value: Bytes::new(), ..item });
            assert_eq!(found_item(TABLE, &found, NOW_S, false), bare, "{p:?}");
        }
        let gone = found_in_memtable(partition(b"gone", 0, None, Some(NOW_S - 1)));
        assert!(found_item(TABLE, &gone, NOW_S, true).is_none());
        assert!(found_item(TABLE, &gone, NOW_S, false).is_none());
        let item = found_item(TABLE, &found_in_memtable(partition(b"v", 5, Some(11), None)), NOW_S, true);
        assert_eq!(item.map(|i| (i.value, i.flags, i.cas)), Some((Bytes::from_static(b"v"), 5, 11)));
    }
}
