//! Which types read the stored values of which others: ScyllaDB's and
//! Cassandra's `is_value_compatible_with`, for a function's result given
//! to a column and for a column added again under a dropped column's name
//! (its old cells, written after the drop, are read as the new type); and
//! user types written out as tuples, the form a dropped column's type is
//! kept in.

use crate::types::CqlType;

impl CqlType {
    /// Whether a value serialized as `other` is a valid value of this type
    /// with the same meaning. Beyond equal types: bigint and timestamp are
    /// both 8-byte milliseconds, a varint reads any fixed-size integer's
    /// two's complement bytes, text reads ascii, uuid reads timeuuid, a
    /// blob reads any single cell; a tuple (or user type) reads a shorter
    /// one whose fields it reads (the fields it adds read as null);
    /// collections read collections of the same kind and frozenness whose
    /// elements they read (map keys must be equal: they order the cells).
    pub fn is_value_compatible_with(&self, other: &CqlType) -> bool {
        use CqlType as T;
        if self == other {
            return true;
        }
        match (self, other) {
            (T::Uuid, T::Timeuuid)
            | (T::Text, T::Ascii)
            | (T::Bigint, T::Timestamp)
            | (T::Timestamp, T::Bigint)
            | (T::Varint, T::Int | T::Bigint | T::Timestamp) => true,
            (T::Blob, other) => !other.is_multi_cell(),
            (T::Frozen(a), T::Frozen(b)) => a.is_value_compatible_with(b),
            (T::List(a), T::List(b)) | (T::Set(a), T::Set(b)) => a.is_value_compatible_with(b),
            (T::Map(ka, va), T::Map(kb, vb)) => ka == kb && va.is_value_compatible_with(vb),
            (T::Vector(a, n), T::Vector(b, m)) => n == m && a == b,
            (T::Tuple(_) | T::Udt(_), T::Tuple(_) | T::Udt(_)) => {
                let (new, old) = (fields(self), fields(other));
                new.len() >= old.len() && new.iter().zip(&old).all(|(n, o)| n.is_value_compatible_with(o))
            }
            _ => false,
        }
    }

    /// This type with every user type written out as a frozen tuple of its
    /// fields' types, at every depth (Cassandra's `expandUserTypes`).
    pub fn expand_user_types(&self) -> CqlType {
        use CqlType as T;
        let boxed = |t: &CqlType| Box::new(t.expand_user_types());
        match self {
            T::Udt(udt) => T::Frozen(Box::new(T::Tuple(udt.field_types().map(CqlType::expand_user_types).collect()))),
            T::Frozen(inner) => match inner.expand_user_types() {
                frozen @ T::Frozen(_) => frozen,
                other => T::Frozen(Box::new(other)),
            },
            T::List(e) => T::List(boxed(e)),
            T::Set(e) => T::Set(boxed(e)),
            T::Map(k, v) => T::Map(boxed(k), boxed(v)),
            T::Vector(e, n) => T::Vector(boxed(e), *n),
            T::Tuple(fields) => T::Tuple(fields.iter().map(CqlType::expand_user_types).collect()),
            scalar => scalar.clone(),
        }
    }
}

/// The field types of a tuple or user type.
fn fields(ty: &CqlType) -> Vec<&CqlType> {
    match ty {
        CqlType::Tuple(fields) => fields.iter().collect(),
        CqlType::Udt(udt) => udt.field_types().collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::types::UserType;

    fn ty(text: &str) -> CqlType {
        CqlType::parse(text).expect("test type parses")
    }

    fn udt(fields: &[(&str, CqlType)]) -> CqlType {
        let fields = fields.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
        CqlType::Udt(Arc::new(UserType { keyspace: "ks".into(), name: "u".into(), fields }))
    }

    #[test]
    fn scalars_follow_cassandra() {
        for (new, old) in [("blob", "int"), ("varint", "bigint"), ("text", "ascii"), ("bigint", "timestamp")] {
            assert!(ty(new).is_value_compatible_with(&ty(old)), "{new} reads {old}");
        }
        for (new, old) in [("int", "text"), ("ascii", "text"), ("int", "bigint"), ("blob", "list<int>")] {
            assert!(!ty(new).is_value_compatible_with(&ty(old)), "{new} does not read {old}");
        }
    }

    #[test]
    fn collections_keep_their_kind_and_frozenness() {
        assert!(ty("list<blob>").is_value_compatible_with(&ty("list<int>")));
        assert!(!ty("map<int, int>").is_value_compatible_with(&ty("list<text>")));
        assert!(!ty("frozen<list<text>>").is_value_compatible_with(&ty("list<text>")));
        assert!(!ty("map<blob, int>").is_value_compatible_with(&ty("map<int, int>")));
        assert!(ty("frozen<set<text>>").is_value_compatible_with(&ty("frozen<set<ascii>>")));
    }

    #[test]
    fn user_types_expand_to_tuples_that_they_read() {
        let u = udt(&[("a", CqlType::Int), ("l", ty("list<text>"))]);
        let set = CqlType::Set(Box::new(CqlType::Frozen(Box::new(u.clone()))));
        assert_eq!(set.expand_user_types().to_string(), "set<frozen<tuple<int, list<text>>>>");
        assert_eq!(u.expand_user_types().to_string(), "frozen<tuple<int, list<text>>>");
        let wider = udt(&[("a", CqlType::Int), ("l", ty("list<text>")), ("b", CqlType::Text)]);
        assert!(wider.is_value_compatible_with(&u.expand_user_types().unfrozen().clone()));
        assert!(!u.is_value_compatible_with(&wider));
    }
}
