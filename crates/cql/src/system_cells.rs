//! The cells of system tables' rows, encoded as CQL serializes them: the
//! small vocabulary `system`, `clients`, `traces` and `auth::tables` build
//! their rows from. It sits below all of them and names none.

use std::collections::BTreeMap;
use std::net::IpAddr;

use bytes::Bytes;
use uuid::Uuid;

use crate::values::serialize_items;

/// One row's values, in its table's column order.
pub(crate) type Values = Vec<Option<Bytes>>;

pub(crate) fn text(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}

pub(crate) fn inet(address: IpAddr) -> Option<Bytes> {
    Some(match address {
        IpAddr::V4(a) => Bytes::copy_from_slice(&a.octets()),
        IpAddr::V6(a) => Bytes::copy_from_slice(&a.octets()),
    })
}

pub(crate) fn uuid(id: Uuid) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(id.as_bytes()))
}

pub(crate) fn int(v: i32) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}

pub(crate) fn bigint(v: i64) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}

pub(crate) fn double(v: f64) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}

pub(crate) fn boolean(v: bool) -> Option<Bytes> {
    Some(Bytes::from_static(if v { &[1] } else { &[0] }))
}

pub(crate) fn text_map(map: &BTreeMap<String, String>) -> Option<Bytes> {
    Some(shoal_schema::collection::serialize_map(
        map.iter().flat_map(|(k, v)| [Some(k.as_bytes()), Some(v.as_bytes())]),
        map.len(),
    ))
}

pub(crate) fn text_set<'a>(items: impl Iterator<Item = &'a str> + Clone) -> Option<Bytes> {
    Some(serialize_items(items.clone().map(str::as_bytes), items.count()))
}
