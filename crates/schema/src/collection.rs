//! The CQL collection wire layout, in one place: a list or set is `[int n]`
//! then n `[bytes]` elements, a map `[int n]` then n key/value `[bytes]`
//! pairs; a `[bytes]` of negative length is null.
//!
//! And the one normal form of values holding sets and maps. A driver may
//! send a set's elements, or a map's entries, in any order (a Python set
//! has none); Cassandra keeps them sorted by the element (key) type's
//! order without duplicates. Shoal normalizes every incoming value the same
//! way, once, where it is validated ([`normalize`]), so stored values,
//! keys and comparisons never depend on the order a client chose — sets
//! nested in lists, tuples, user types and map values included.
//!
//! Values handled here have been validated against their type first.

use std::cmp::Ordering;

use bytes::{BufMut, Bytes, BytesMut};

use crate::types::CqlType;
use crate::value::{compare, Reader, ValueError};

/// The `[bytes]` items of a serialized collection, in order: a list or
/// set's elements, a map's keys and values alternating. `None` is null.
/// Stops at the first malformed item (values are validated before).
pub struct Items<'a> {
    reader: Reader<'a>,
    left: usize,
}

impl<'a> Items<'a> {
    /// The elements of a list or set.
    pub fn new(value: &'a [u8]) -> Items<'a> {
        Items::with_items_per_count(value, 1)
    }

    /// The keys and values of a map, alternating (its count is of pairs).
    pub fn entries(value: &'a [u8]) -> Items<'a> {
        Items::with_items_per_count(value, 2)
    }

    fn with_items_per_count(value: &'a [u8], per_count: usize) -> Items<'a> {
        let mut reader = Reader::new(value);
        let left = reader.read_count("collection size").unwrap_or(0).saturating_mul(per_count);
        Items { reader, left }
    }
}

impl<'a> Iterator for Items<'a> {
    type Item = Option<&'a [u8]>;

    fn next(&mut self) -> Option<Option<&'a [u8]>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let item = self.reader.read_item("collection item").ok();
        if item.is_none() {
            self.left = 0;
        }
        item
    }
}

/// The elements of a serialized list, checked for layout, where an element
/// may be null (`None`): a stored list may not hold one, but a bound list
/// of `IF c IN ?` candidates may, and ScyllaDB takes a null candidate.
pub fn list_items_with_nulls<'a>(value: &'a [u8], ty: &CqlType) -> Result<Vec<Option<&'a [u8]>>, ValueError> {
    let mut reader = Reader::new(value);
    let count = reader.read_count("list size")?;
    let items = (0..count).map(|_| reader.read_item("list element")).collect::<Result<Vec<_>, _>>()?;
    reader.finish(ty)?;
    Ok(items)
}

/// A list or set of `count` items (`None`: null) in the wire layout.
pub fn serialize<'a>(items: impl IntoIterator<Item = Option<&'a [u8]>>, count: usize) -> Bytes {
    serialize_counted(items, count, 1)
}

/// A map of `count` entries, its keys and values alternating in `items`.
pub fn serialize_map<'a>(items: impl IntoIterator<Item = Option<&'a [u8]>>, count: usize) -> Bytes {
    serialize_counted(items, count, 2)
}

fn serialize_counted<'a>(items: impl IntoIterator<Item = Option<&'a [u8]>>, count: usize, per_count: usize) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i32(i32::try_from(count).unwrap_or(i32::MAX));
    let mut written = 0;
    for item in items {
        put_item(&mut out, item);
        written += 1;
    }
    assert_eq!(written, count * per_count, "a collection's count matches its items");
    out.freeze()
}

/// Appends one `[bytes]` item (`None`: null, length -1).
pub fn put_item(out: &mut BytesMut, item: Option<&[u8]>) {
    match item {
        Some(bytes) => {
            out.put_i32(i32::try_from(bytes.len()).unwrap_or(i32::MAX));
            out.put_slice(bytes);
        }
        None => out.put_i32(-1),
    }
}

/// Whether values of `ty` may hold a set or map, so [`normalize`] may
/// change them.
pub fn may_need_normalizing(ty: &CqlType) -> bool {
    match ty.unfrozen() {
        CqlType::Set(_) | CqlType::Map(..) => true,
        CqlType::List(e) | CqlType::Vector(e, _) => may_need_normalizing(e),
        CqlType::Tuple(fields) => fields.iter().any(may_need_normalizing),
        CqlType::Udt(udt) => udt.fields.iter().any(|(_, t)| may_need_normalizing(t)),
        _ => false,
    }
}

/// `value` (a valid `ty`) in normal form: set elements sorted by the
/// element type's order without duplicates, map entries sorted by key
/// without duplicate keys (the last one sent wins, as in Cassandra), at
/// every depth. Returns `value` itself when nothing changes.
pub fn normalize(ty: &CqlType, value: &Bytes) -> Bytes {
    if !may_need_normalizing(ty) {
        return value.clone();
    }
    match ty.unfrozen() {
        CqlType::Set(elem) => {
            let mut items: Vec<Bytes> =
                Items::new(value).flatten().map(|i| normalize(elem, &value.slice_ref(i))).collect();
            items.sort_by(|a, b| compare(elem.unfrozen(), a, b));
            items.dedup_by(|a, b| compare(elem.unfrozen(), a, b) == Ordering::Equal);
            serialize(items.iter().map(|i| Some(&i[..])), items.len())
        }
        CqlType::Map(key_ty, value_ty) => {
            let flat: Vec<Option<&[u8]>> = Items::entries(value).collect();
            let mut entries: Vec<(Bytes, Option<Bytes>)> = flat
                .chunks(2)
                .map(|kv| {
                    let key = normalize(key_ty, &value.slice_ref(kv[0].unwrap_or_default()));
                    let val = kv.get(1).copied().flatten().map(|v| normalize(value_ty, &value.slice_ref(v)));
                    (key, val)
                })
                .collect();
            // Stable, so among equal keys the last sent stays last.
            entries.sort_by(|a, b| compare(key_ty.unfrozen(), &a.0, &b.0));
            let mut unique: Vec<(Bytes, Option<Bytes>)> = Vec::with_capacity(entries.len());
            for entry in entries {
                match unique.last_mut() {
                    Some(last) if compare(key_ty.unfrozen(), &last.0, &entry.0) == Ordering::Equal => *last = entry,
                    _ => unique.push(entry),
                }
            }
            let items = unique.iter().flat_map(|(k, v)| [Some(&k[..]), v.as_deref()]);
            serialize_map(items, unique.len())
        }
        CqlType::List(elem) => {
            let items: Vec<Option<Bytes>> =
                Items::new(value).map(|i| i.map(|i| normalize(elem, &value.slice_ref(i)))).collect();
            serialize(items.iter().map(Option::as_deref), items.len())
        }
        CqlType::Tuple(fields) => normalize_fields(fields.iter(), value),
        CqlType::Udt(udt) => normalize_fields(udt.fields.iter().map(|(_, t)| t), value),
        // Vectors of sets or maps do not occur in practice (their elements
        // are frozen scalars in every client); kept as sent.
        _ => value.clone(),
    }
}

/// A tuple or user type value (`[bytes]` fields, no count; fewer fields
/// than the type means the rest are null) with each field normalized.
fn normalize_fields<'t>(types: impl Iterator<Item = &'t CqlType>, value: &Bytes) -> Bytes {
    let mut out = BytesMut::with_capacity(value.len());
    let mut rest: &[u8] = value;
    for ty in types {
        let Some(len_bytes) = rest.get(..4) else { break };
        let len = i32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        rest = &rest[4..];
        let Ok(len) = usize::try_from(len) else {
            out.put_i32(-1);
            continue;
        };
        let Some(field) = rest.get(..len) else { break };
        rest = &rest[len..];
        put_item(&mut out, Some(&normalize(ty, &value.slice_ref(field))));
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: &[i32]) -> Bytes {
        let items: Vec<[u8; 4]> = values.iter().map(|v| v.to_be_bytes()).collect();
        serialize(items.iter().map(|i| Some(&i[..])), items.len())
    }

    fn ty(text: &str) -> CqlType {
        CqlType::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn sets_are_sorted_by_their_element_order_without_duplicates() {
        assert_eq!(normalize(&ty("frozen<set<int>>"), &ints(&[3, -1, 2, 3])), ints(&[-1, 2, 3]));
        // A list keeps its order and duplicates.
        assert_eq!(normalize(&ty("frozen<list<int>>"), &ints(&[3, 1, 3])), ints(&[3, 1, 3]));
    }

    #[test]
    fn a_list_read_with_nulls_keeps_them_and_checks_its_layout() {
        let one = 1i32.to_be_bytes();
        let list = serialize([Some(&one[..]), None], 2);
        assert_eq!(list_items_with_nulls(&list, &ty("list<int>")), Ok(vec![Some(&one[..]), None]));
        assert!(list_items_with_nulls(&list[..list.len() - 1], &ty("list<int>")).is_err());
        let mut longer = list.to_vec();
        longer.push(0);
        assert!(list_items_with_nulls(&longer, &ty("list<int>")).is_err());
    }

    fn int_map(entries: &[i32]) -> Bytes {
        let items: Vec<[u8; 4]> = entries.iter().map(|v| v.to_be_bytes()).collect();
        serialize_map(items.iter().map(|i| Some(&i[..])), items.len() / 2)
    }

    #[test]
    fn maps_are_sorted_by_key_and_the_last_duplicate_wins() {
        let sorted = normalize(&ty("frozen<map<int, int>>"), &int_map(&[2, 20, 1, 10, 2, 21]));
        assert_eq!(sorted, int_map(&[1, 10, 2, 21]));
    }

    #[test]
    fn nested_sets_are_normalized_too() {
        let inner_a = ints(&[2, 1]);
        let inner_b = ints(&[1, 2]);
        let list = |inner: &Bytes| serialize([Some(&inner[..])], 1);
        let t = ty("frozen<list<frozen<set<int>>>>");
        assert_eq!(normalize(&t, &list(&inner_a)), normalize(&t, &list(&inner_b)));
        assert_eq!(normalize(&t, &list(&inner_a)), list(&inner_b));
    }

    #[test]
    fn items_iterates_nulls_and_stops_at_the_count() {
        let value = serialize([Some(&b"ab"[..]), None], 2);
        assert_eq!(Items::new(&value).collect::<Vec<_>>(), vec![Some(&b"ab"[..]), None]);
        assert!(!may_need_normalizing(&ty("list<int>")) && may_need_normalizing(&ty("tuple<int, set<int>>")));
    }
}
