//! A memcached item as a read finds it: from a single row the memtable or
//! the row cache shares (`shoal_storage::found`), its cells taken straight
//! from the compact bytes, the value a slice of them (a hit decodes no
//! partition and copies no value); or from a partition in the general
//! form (a row written by CQL, one merged from several sources). It owns
//! what an item is as read ([`Item`], its [`Lifetime`]) and the columns it
//! is read from ([`ItemTable`]); `item` runs the operations on them.

use bytes::Bytes;
use shoal_storage::{Cell, ColumnData, Expiry, FoundRef, Partition, RowRef, RowValue};
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

/// An item as a read found it, its value left where it lies until an
/// operation keeps it ([`Held::into_item`]) or looks at it
/// ([`Held::with_value`]): a delete, an `incr` or a `cas` check on a
/// memtable slot copies and shares nothing.
#[derive(Debug, Clone)]
pub(crate) struct Held<'a> {
    value: HeldValue<'a>,
    pub flags: u32,
    pub cas: u64,
    pub lifetime: Lifetime,
    /// As [`Item::access`].
    pub access: Access,
}

#[derive(Debug, Clone)]
enum HeldValue<'a> {
    /// A cell of a borrowed compact row.
    Row(RowRef<'a>, RowValue<'a>),
    Owned(Bytes),
}

impl Held<'_> {
    /// An item read elsewhere, held.
    #[cfg(test)]
    pub(crate) fn of(item: Item) -> Held<'static> {
        let Item { value, flags, cas, lifetime, access, won: _ } = item;
        Held { value: HeldValue::Owned(value), flags, cas, lifetime, access }
    }

    /// The item, its value shared (a slice of the row's bytes) or, held
    /// as a word, copied.
    pub(crate) fn into_item(self) -> Item {
        let value = match self.value {
            HeldValue::Row(row, RowValue::Bytes(slice)) => row.share(slice),
            HeldValue::Row(_, RowValue::Word(word)) => Bytes::copy_from_slice(&word.to_be_bytes()),
            HeldValue::Owned(bytes) => bytes,
        };
        Item { value, flags: self.flags, cas: self.cas, lifetime: self.lifetime, access: self.access, won: false }
    }

    /// `f` of the value's bytes, where they lie (a word on the stack).
    pub(crate) fn with_value<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match &self.value {
            HeldValue::Row(_, RowValue::Bytes(slice)) => f(slice),
            HeldValue::Row(_, RowValue::Word(word)) => f(&word.to_be_bytes()),
            HeldValue::Owned(bytes) => f(bytes),
        }
    }
}

/// The item `found` holds at `now_s`, if it holds a live one.
pub(crate) fn found_item(table: ItemTable, found: FoundRef<'_>, now_s: i64) -> Option<Held<'_>> {
    match found {
        FoundRef::Row(row) => row_item(table, row, now_s),
        FoundRef::Partition(partition) => held_item(table, partition, now_s),
        FoundRef::Deleted(_) => None,
    }
}

/// The item a compact single row holds: its cells share one timestamp and
/// expiry, and it has no deletions.
fn row_item(table: ItemTable, row: RowRef<'_>, now_s: i64) -> Option<Held<'_>> {
    let (header, cells) = row.read();
    if !header.is_live(now_s) {
        return None;
    }
    let (mut value, mut flags, mut cas) = (None, None, None);
    for (id, cell) in cells {
        if id == table.value {
            value = Some(HeldValue::Row(row, cell));
        } else if id == table.flags {
            flags = number(cell);
        } else if id == table.cas {
            cas = number(cell);
        }
    }
    Some(held(value?, flags, cas, header.timestamp, header.expiry))
}

/// A bigint cell's number (an 8-byte value is kept as its word).
fn number(value: RowValue) -> Option<i64> {
    match value {
        RowValue::Word(word) => Some(word as i64),
        RowValue::Bytes(bytes) => <[u8; 8]>::try_from(bytes).ok().map(i64::from_be_bytes),
    }
}

/// The item the partition holds at `now_s`: its value cell live and not
/// deleted.
pub(crate) fn live_item(table: ItemTable, partition: &Partition, now_s: i64) -> Option<Item> {
    held_item(table, partition, now_s).map(Held::into_item)
}

fn held_item(table: ItemTable, partition: &Partition, now_s: i64) -> Option<Held<'static>> {
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
    let value = HeldValue::Owned(value);
    Some(held(value, number(table.flags), number(table.cas), value_cell.timestamp, value_cell.expiry()))
}

/// An item of these cells (the value's timestamp and expiry): a row
/// without `cas` (written by CQL) reports its value's timestamp. Its hints
/// are those of an item written and never fetched.
fn held<'a>(
    value: HeldValue<'a>,
    flags: Option<i64>,
    cas: Option<i64>,
    timestamp_us: i64,
    expiry: Option<Expiry>,
) -> Held<'a> {
    Held {
        value,
        // flags are a u32 kept in a bigint: the low 32 bits.
        flags: flags.map_or(0, |f| f as u32),
        cas: cas.unwrap_or(timestamp_us) as u64,
        lifetime: expiry.map_or(Lifetime::Forever, |e| Lifetime::Until(e.expires_at_s)),
        access: Access::written(timestamp_us.div_euclid(1_000_000)),
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

    /// A memtable holding `p`.
    fn memtable_of(p: Partition) -> (Memtable, PartitionPosition) {
        let position = PartitionPosition { token: 1, key: Bytes::from_static(b"k") };
        let mut memtable = Memtable::default();
        memtable.apply(position.clone(), p, None);
        (memtable, position)
    }

    /// An item as kept, and its value's bytes as it lay.
    type Read = Option<(Item, Vec<u8>)>;

    /// The item read borrowed from the memtable holding `p`; and the same
    /// read from what an owned read of the memtable finds.
    fn read_both(p: &Partition) -> (Read, Read) {
        let (memtable, position) = memtable_of(p.clone());
        let kept = |held: Held| (held.with_value(<[u8]>::to_vec), held.into_item());
        let borrowed = memtable.found_ref(&position).expect("the memtable holds it");
        assert!(matches!(borrowed, FoundRef::Row(_)), "not held compactly: {p:?}");
        let borrowed = found_item(TABLE, borrowed, NOW_S).map(kept).map(|(v, i)| (i, v));
        let owned = memtable.read_found(&position, &[ClusteringRange::all()]).expect("the memtable holds it");
        let owned = found_item(TABLE, owned.as_found_ref(), NOW_S).map(kept).map(|(v, i)| (i, v));
        (borrowed, owned)
    }

    #[test]
    fn an_item_read_in_place_is_the_item_its_partition_holds() {
        let cases = [
            partition(b"value", 7, Some(42), None),
            partition(b"", i64::from(u32::MAX), Some(1), None),
            // Expires later, expires now, expired.
            partition(b"soon", 0, Some(3), Some(NOW_S + 10)),
            partition(b"now", 0, Some(3), Some(NOW_S)),
            partition(b"gone", 0, Some(3), Some(NOW_S - 10)),
            // Written by CQL: no cas, which is then the write timestamp.
            partition(b"cql", 1, None, None),
            // An 8-byte value is held as a word: looked at on the stack,
            // copied only when kept.
            partition(b"12345678", 0, Some(9), None),
        ];
        for p in cases {
            let expected = live_item(TABLE, &p, NOW_S).map(|item| {
                let value = item.value.to_vec();
                (item, value)
            });
            let (borrowed, owned) = read_both(&p);
            assert_eq!(borrowed, expected, "{p:?}");
            assert_eq!(owned, expected, "{p:?}");
        }
        let (borrowed, _) = read_both(&partition(b"v", 5, Some(11), None));
        let item = borrowed.map(|(i, _)| (i.value, i.flags, i.cas));
        assert_eq!(item, Some((Bytes::from_static(b"v"), 5, 11)));
    }

    #[test]
    fn a_deleted_item_reads_as_none() {
        let (mut memtable, position) = memtable_of(partition(b"v", 0, Some(1), None));
        let tombstone = shoal_storage::Tombstone { timestamp: 1_800_000_000_000_000, deletion_time_s: NOW_S };
        memtable.apply_tombstone(position.clone(), tombstone, None);
        let found = memtable.found_ref(&position).expect("the memtable holds its tombstone");
        assert!(matches!(found, FoundRef::Deleted(_)), "{found:?}");
        assert!(found_item(TABLE, found, NOW_S).is_none());
    }
}
