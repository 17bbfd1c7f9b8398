//! WHERE relations that are only ever row filters: `LIKE`, `NOT IN`, and a
//! subscripted collection (`m[key] = v`, `l[index] = v`). Each becomes one
//! [`RowFilter`], checked by the replica on every row a scan reads, so all
//! need ALLOW FILTERING. Checks and texts are ScyllaDB's
//! (`cql3/expr/restrictions.cc`, `expression.cc`); nulls follow its SQL
//! rules: a comparison with null is null, and selects no row.

use shoal_coordinator::data::{FilterOp, RowFilter};
use shoal_schema::{ColumnMeta, CqlType};

use crate::ast::{InValues, Operator, Term};
use crate::error::{invalid, CqlResult};
use crate::values::{collection_items, eval, Bindings, BoundValue, Receiver};

/// `c LIKE pattern`, on a text or ascii column of any kind.
pub(crate) fn like(index: usize, column: &ColumnMeta, term: &Term, bindings: Bindings<'_>) -> CqlResult<RowFilter> {
    if !matches!(column.ty.unfrozen(), CqlType::Text | CqlType::Ascii) {
        return Err(invalid(format!("LIKE is allowed only on string types, which {} is not", column.name)));
    }
    Ok(match eval(term, Receiver { name: &column.name, ty: &column.ty }, bindings)? {
        BoundValue::Value(pattern) => RowFilter { column: index, op: FilterOp::Like, values: vec![pattern] },
        BoundValue::Null => matches_nothing(index),
        BoundValue::Unset => return Err(unset_error(&column.name)),
    })
}

/// `c NOT IN (v1, ...)` or `c NOT IN ?`. A null list, or a null in the
/// list, makes the relation null for every row (`3 NOT IN (1, null)` is
/// not known to hold), so it selects nothing; an empty list selects every
/// row whose `c` is not null.
pub(crate) fn not_in(
    index: usize,
    column: &ColumnMeta,
    values: &InValues,
    bindings: Bindings<'_>,
) -> CqlResult<RowFilter> {
    check_not_collection(column, "NOT IN")?;
    let receiver = Receiver { name: &column.name, ty: &column.ty };
    let mut candidates = Vec::new();
    match values {
        InValues::Terms(terms) => {
            for term in terms {
                match eval(term, receiver, bindings)? {
                    BoundValue::Value(value) => candidates.push(value),
                    BoundValue::Null => return Ok(matches_nothing(index)),
                    BoundValue::Unset => return Err(unset_error(&column.name)),
                }
            }
        }
        InValues::Bind(i) => {
            let list_ty = CqlType::List(Box::new(column.ty.clone()));
            let name = in_marker_name(true, &column.name);
            match eval(&Term::Bind(*i), Receiver { name: &name, ty: &list_ty }, bindings)? {
                BoundValue::Value(list) => candidates = collection_items(&list),
                BoundValue::Null => return Ok(matches_nothing(index)),
                BoundValue::Unset => return Err(unset_error(&column.name)),
            }
        }
    }
    Ok(RowFilter { column: index, op: FilterOp::NotIn, values: candidates })
}

/// `m[key] = value` on a non-frozen map, `l[index] = value` on a
/// non-frozen list. A null key, index or value matches nothing (ScyllaDB's
/// choice; Cassandra refuses a null map key); an unset one is an error.
pub(crate) fn subscript(
    index: usize,
    column: &ColumnMeta,
    key: &Term,
    op: Operator,
    value: &Term,
    bindings: Bindings<'_>,
) -> CqlResult<RowFilter> {
    let frozen = matches!(column.ty, CqlType::Frozen(_));
    let (key_name, key_ty, value_ty, filter_op) = match column.ty.unfrozen() {
        CqlType::Map(..) if frozen => {
            return Err(invalid(format!(
                "Map-entry equality predicates on frozen map column {} are not supported",
                column.name
            )))
        }
        CqlType::List(_) if frozen => {
            return Err(invalid(format!(
                "List element equality predicates on frozen list column {} are not supported",
                column.name
            )))
        }
        CqlType::Map(key_ty, value_ty) => {
            (format!("key({})", column.name), key_ty.as_ref(), value_ty, FilterOp::EntryEq)
        }
        CqlType::List(elem_ty) => (format!("idx({})", column.name), &CqlType::Int, elem_ty, FilterOp::ElementEq),
        _ => return Err(invalid(format!("Column {} of type {} cannot be subscripted", column.name, column.ty))),
    };
    if op != Operator::Eq {
        return Err(invalid("Only EQ relations are supported on map/list entries"));
    }
    let value_name = format!("value({})", column.name);
    let key = eval(key, Receiver { name: &key_name, ty: key_ty }, bindings)?;
    let value = eval(value, Receiver { name: &value_name, ty: value_ty }, bindings)?;
    let what = if filter_op == FilterOp::EntryEq { "map" } else { "list" };
    Ok(match (key, value) {
        (BoundValue::Unset, _) => {
            let key = if filter_op == FilterOp::EntryEq { "key" } else { "index" };
            return Err(invalid(format!("Unsupported unset {what} {key} for column {}", column.name)));
        }
        (_, BoundValue::Unset) => {
            return Err(invalid(format!("Unsupported unset {what} value for column {}", column.name)))
        }
        (BoundValue::Value(key), BoundValue::Value(value)) => {
            RowFilter { column: index, op: filter_op, values: vec![key, value] }
        }
        _ => matches_nothing(index),
    })
}

/// A filter no row passes: equal to one of no values. What a comparison
/// with null selects.
pub(crate) fn matches_nothing(column: usize) -> RowFilter {
    RowFilter { column, op: FilterOp::In, values: Vec::new() }
}

pub(crate) fn unset_error(column: &str) -> crate::error::CqlError {
    invalid(format!("Invalid unset value for column {column}"))
}

/// A non-frozen collection is compared only by CONTAINS, CONTAINS KEY and
/// a subscript (Cassandra's and ScyllaDB's refusal).
pub(crate) fn check_not_collection(column: &ColumnMeta, op: &str) -> CqlResult<()> {
    match column.ty {
        CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..) => Err(invalid(format!(
            "Collection column '{}' ({}) cannot be restricted by a '{op}' relation",
            column.name, column.ty
        ))),
        _ => Ok(()),
    }
}

/// The name of the bind marker of `c IN ?` (`NOT IN ?`): ScyllaDB's
/// `IN(c)` / `NOT IN(c)`, which applications bind values by, or
/// Cassandra's `in(c)` / `not in(c)` when the node is set so.
pub fn in_marker_name(negated: bool, column: &str) -> String {
    let operator = match (negated, crate::live_config::uppercase_in_marker_name()) {
        (true, true) => "NOT IN",
        (false, true) => "IN",
        (true, false) => "not in",
        (false, false) => "in",
    };
    format!("{operator}({column})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::Literal;
    use shoal_schema::{ClusteringOrder, ColumnKind};

    fn column(ty: CqlType) -> ColumnMeta {
        ColumnMeta { id: 1, name: "c".into(), ty, kind: ColumnKind::Regular, position: -1, order: ClusteringOrder::Asc }
    }

    fn text(s: &str) -> Term {
        Term::Literal(Literal::String(s.into()))
    }

    fn int(s: &str) -> Term {
        Term::Literal(Literal::Integer(s.into()))
    }

    const NONE: Bindings<'static> = Bindings::NONE;

    #[test]
    fn like_needs_a_string_column() {
        let filter = like(3, &column(CqlType::Text), &text("a%"), NONE).expect("accepted");
        assert_eq!((filter.column, filter.op, &filter.values[0][..]), (3, FilterOp::Like, &b"a%"[..]));
        assert!(like(0, &column(CqlType::Ascii), &text("a%"), NONE).is_ok());
        let err = like(0, &column(CqlType::Int), &text("a%"), NONE).expect_err("refused");
        assert_eq!(err.to_string(), "LIKE is allowed only on string types, which c is not");
        // A collection of strings is no string.
        let list = column(CqlType::List(Box::new(CqlType::Text)));
        let err = like(0, &list, &text("a%"), NONE).expect_err("refused");
        assert_eq!(err.to_string(), "LIKE is allowed only on string types, which c is not");
        // LIKE null selects nothing.
        let filter = like(0, &column(CqlType::Text), &Term::Literal(Literal::Null), NONE).expect("accepted");
        assert_eq!((filter.op, filter.values.len()), (FilterOp::In, 0));
    }

    #[test]
    fn not_in_with_a_null_selects_nothing() {
        let values = InValues::Terms(vec![int("1"), int("2")]);
        let filter = not_in(1, &column(CqlType::Int), &values, NONE).expect("accepted");
        assert_eq!((filter.op, filter.values.len()), (FilterOp::NotIn, 2));
        let values = InValues::Terms(vec![int("1"), Term::Literal(Literal::Null)]);
        let filter = not_in(1, &column(CqlType::Int), &values, NONE).expect("accepted");
        assert_eq!((filter.op, filter.values.len()), (FilterOp::In, 0));
        let empty = not_in(1, &column(CqlType::Int), &InValues::Terms(Vec::new()), NONE).expect("accepted");
        assert_eq!((empty.op, empty.values.len()), (FilterOp::NotIn, 0));
        let list = column(CqlType::List(Box::new(CqlType::Int)));
        assert!(not_in(1, &list, &InValues::Terms(Vec::new()), NONE).is_err());
    }

    #[test]
    fn subscripts_on_maps_and_lists_only() {
        let list = column(CqlType::List(Box::new(CqlType::Text)));
        let filter = subscript(2, &list, &int("1"), Operator::Eq, &text("x"), NONE).expect("accepted");
        assert_eq!(filter.op, FilterOp::ElementEq);
        assert_eq!(&filter.values[0][..], &1i32.to_be_bytes());
        let err = subscript(2, &list, &text("a"), Operator::Eq, &text("x"), NONE).expect_err("refused");
        assert!(err.to_string().contains("Invalid STRING constant"), "{err}");
        let err = subscript(2, &list, &int("1"), Operator::Eq, &int("3"), NONE).expect_err("refused");
        assert!(err.to_string().contains("Invalid INTEGER constant"), "{err}");
        let err = subscript(2, &list, &int("1"), Operator::Gt, &text("x"), NONE).expect_err("refused");
        assert_eq!(err.to_string(), "Only EQ relations are supported on map/list entries");
        let frozen = column(CqlType::Frozen(Box::new(CqlType::List(Box::new(CqlType::Text)))));
        let err = subscript(2, &frozen, &int("1"), Operator::Eq, &text("x"), NONE).expect_err("refused");
        assert!(err.to_string().starts_with("List element equality predicates on frozen list column c"));
        let set = column(CqlType::Set(Box::new(CqlType::Int)));
        let err = subscript(2, &set, &int("1"), Operator::Eq, &int("1"), NONE).expect_err("refused");
        assert!(err.to_string().contains("cannot be subscripted"));
        let null =
            subscript(2, &list, &Term::Literal(Literal::Null), Operator::Eq, &text("x"), NONE).expect("accepted");
        assert_eq!((null.op, null.values.len()), (FilterOp::In, 0));
    }
}
