//! Which types hold a `duration`, and how ScyllaDB's messages name them.
//! Durations have no order, so no key and no slice may use one; the DDL
//! checks, index and view definitions and WHERE restrictions all ask here.

use shoal_schema::CqlType;

/// Whether `ty` is a duration or holds one, even nested in a frozen
/// collection, tuple or vector (Cassandra's `referencesDuration`).
pub(crate) fn references_duration(ty: &CqlType) -> bool {
    match ty {
        CqlType::Duration => true,
        CqlType::List(e) | CqlType::Set(e) | CqlType::Frozen(e) | CqlType::Vector(e, _) => references_duration(e),
        CqlType::Map(k, v) => references_duration(k) || references_duration(v),
        CqlType::Tuple(fields) => fields.iter().any(references_duration),
        CqlType::Udt(udt) => udt.field_types().any(references_duration),
        _ => false,
    }
}

/// How messages name a type that references a duration (ScyllaDB's words).
pub(crate) fn duration_holder(ty: &CqlType) -> &'static str {
    match ty.unfrozen() {
        CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..) => "collections containing durations",
        CqlType::Tuple(_) => "tuples containing durations",
        CqlType::Udt(_) => "UDTs containing durations",
        _ => "duration columns",
    }
}
