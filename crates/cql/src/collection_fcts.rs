//! Cassandra 5's collection functions (`CollectionFcts`): `map_keys`,
//! `map_values`, `collection_count`, `collection_min`, `collection_max`,
//! `collection_sum` and `collection_avg`, of one collection argument.
//!
//! A null collection (a non-frozen one with no elements reads as null)
//! gives null; an empty frozen one gives an empty result, a count of 0,
//! no minimum or maximum (null), and a sum and average of zero. Sums and
//! averages are `sum()`'s and `avg()`'s arithmetic on the elements
//! (integers wrap in a sum and average exactly, decimals average at the
//! sum's scale, half to even).
//!
//! Also ScyllaDB's `set_intersection(a, b)` of two sets of one element
//! type (frozen or not): the elements of `a` that `b` holds, in order.

use bytes::Bytes;
use shoal_schema::value::{add, compare, divide_for_avg, to_varint, zero_of};
use shoal_schema::{CqlType, Value};

use crate::error::{invalid, CqlResult};

/// The collection functions' names.
pub const NAMES: [&str; 7] = [
    "map_keys",
    "map_values",
    "collection_count",
    "collection_min",
    "collection_max",
    "collection_sum",
    "collection_avg",
];

/// Refuses an argument of a type function `name` does not take, with
/// Cassandra's message.
pub fn check(name: &str, arg: &str, ty: &CqlType) -> CqlResult<()> {
    let (takes, what) = match name {
        "map_keys" | "map_values" => (matches!(ty.unfrozen(), CqlType::Map(..)), "map"),
        "collection_count" => {
            (matches!(ty.unfrozen(), CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..)), "collection")
        }
        "collection_min" | "collection_max" => (element(ty).is_some(), "set or list"),
        _ => (element(ty).is_some_and(is_number), "numeric set/list"),
    };
    match takes {
        true => Ok(()),
        false => Err(invalid(format!(
            "Function system.{name} requires a {what} argument, but found argument {arg} of type {ty}"
        ))),
    }
}

/// A set's or list's element type.
fn element(ty: &CqlType) -> Option<&CqlType> {
    match ty.unfrozen() {
        CqlType::Set(e) | CqlType::List(e) => Some(e),
        _ => None,
    }
}

fn is_number(ty: &CqlType) -> bool {
    zero_of(ty.unfrozen()).is_ok()
}

/// What function `name` returns for an argument of `ty`.
pub fn result_type(name: &str, ty: &CqlType) -> Option<CqlType> {
    Some(match (name, ty.unfrozen()) {
        ("map_keys", CqlType::Map(k, _)) => CqlType::Set(k.clone()),
        ("map_values", CqlType::Map(_, v)) => CqlType::List(v.clone()),
        ("collection_count", _) => CqlType::Int,
        (_, _) => element(ty)?.unfrozen().clone(),
    })
}

/// Function `name` of a serialized collection of `ty`; `None` for null.
pub fn apply(name: &str, ty: &CqlType, arg: &[u8]) -> CqlResult<Option<Bytes>> {
    let corrupt = |e: shoal_schema::ValueError| invalid(format!("In call to function system.{name}, value {e}"));
    let value = Value::deserialize(ty.unfrozen(), arg).map_err(corrupt)?;
    let (items, entries) = match value {
        Value::List(items) | Value::Set(items) => (items, Vec::new()),
        Value::Map(entries) => (Vec::new(), entries),
        _ => return Err(invalid(format!("Function system.{name} requires a collection argument"))),
    };
    let out = match name {
        "map_keys" => Value::Set(entries.into_iter().map(|(k, _)| k).collect()),
        "map_values" => Value::List(entries.into_iter().map(|(_, v)| v).collect()),
        "collection_count" => Value::Int(i32::try_from(items.len() + entries.len()).unwrap_or(i32::MAX)),
        "collection_min" | "collection_max" => {
            let Some(elem) = element(ty) else { return Ok(None) };
            let ordered = items.into_iter().map(|v| Bytes::from(v.to_bytes()));
            let pick = match name {
                "collection_min" => ordered.min_by(|a, b| compare(elem, a, b)),
                _ => ordered.max_by(|a, b| compare(elem, a, b)),
            };
            return Ok(pick);
        }
        _ => {
            let Some(elem) = element(ty).map(CqlType::unfrozen) else { return Ok(None) };
            let zero = zero_of(elem).map_err(corrupt)?;
            let count = items.len() as u64;
            let avg = name == "collection_avg";
            // An average sums integers wide, as avg() does, so it is exact.
            let wide = |v: Value| if avg { to_varint(&v).unwrap_or(v) } else { v };
            let start = wide(zero);
            let sum = items.into_iter().try_fold(start, |acc, v| add(&acc.cql_type(), &acc, &wide(v)));
            let sum = sum.map_err(corrupt)?;
            match avg {
                true => divide_for_avg(elem, &sum, count).map_err(corrupt)?,
                false => sum,
            }
        }
    };
    Ok(Some(Bytes::from(out.to_bytes())))
}

/// ScyllaDB's set function, of two arguments.
pub const SET_INTERSECTION: &str = "set_intersection";

/// Refuses `set_intersection` arguments other than two sets of one
/// element type (the stored ScyllaDB tests' texts).
pub fn check_set_intersection(args: &[(String, CqlType)]) -> CqlResult<()> {
    let [(_, a), (_, b)] = args else {
        return Err(invalid("set_intersection() accepts 2 arguments only"));
    };
    match (a.unfrozen(), b.unfrozen()) {
        (CqlType::Set(x), CqlType::Set(y)) if x == y => Ok(()),
        (CqlType::Set(_), CqlType::Set(_)) => {
            Err(invalid("set_intersection() requires that both arguments are of the same set type"))
        }
        _ => Err(invalid("set_intersection() requires that both arguments are of set type")),
    }
}

/// The elements of serialized set `a` that serialized set `b` holds.
pub fn set_intersection(ty: &CqlType, a: &[u8], b: &[u8]) -> CqlResult<Bytes> {
    let corrupt =
        |e: shoal_schema::ValueError| invalid(format!("In call to function system.set_intersection, value {e}"));
    let (Value::Set(a), Value::Set(b)) = (
        Value::deserialize(ty.unfrozen(), a).map_err(corrupt)?,
        Value::deserialize(ty.unfrozen(), b).map_err(corrupt)?,
    ) else {
        return Err(invalid("set_intersection() requires that both arguments are of set type"));
    };
    Ok(Bytes::from(Value::Set(a.into_iter().filter(|v| b.contains(v)).collect()).to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_intersection_keeps_common_elements_of_one_type() {
        let ty = CqlType::Set(Box::new(CqlType::Int));
        let set = |items: &[i32]| Value::Set(items.iter().map(|i| Value::Int(*i)).collect()).to_bytes();
        let out = set_intersection(&ty, &set(&[1, 2, 3]), &set(&[-1, 2, 3, 4])).expect("intersection");
        assert_eq!(Value::deserialize(&ty, &out).expect("set"), Value::Set(vec![Value::Int(2), Value::Int(3)]));
        let frozen = CqlType::Frozen(Box::new(ty.clone()));
        let args = |b: CqlType| vec![("a".to_string(), ty.clone()), ("b".to_string(), b)];
        assert!(check_set_intersection(&args(frozen)).is_ok());
        let refusal = |b: Option<CqlType>| {
            let given = match b {
                Some(b) => args(b),
                None => args(ty.clone())[..1].to_vec(),
            };
            check_set_intersection(&given).expect_err("refused").to_string()
        };
        assert!(refusal(Some(CqlType::Set(Box::new(CqlType::Tinyint)))).contains("of the same set type"));
        assert!(refusal(Some(CqlType::Int)).contains("of set type"));
        assert!(refusal(None).contains("accepts 2 arguments"));
    }

    fn run(name: &str, ty: &CqlType, value: Value) -> Option<Value> {
        let out = apply(name, ty, &value.to_bytes()).expect("apply")?;
        let ret = result_type(name, ty).expect("result type");
        Some(Value::deserialize(&ret, &out).expect("result"))
    }

    #[test]
    fn maps_give_keys_values_and_count() {
        let ty = CqlType::Map(Box::new(CqlType::Int), Box::new(CqlType::Text));
        let m = Value::Map(vec![(Value::Int(1), Value::Text("a".into())), (Value::Int(3), Value::Text("b".into()))]);
        assert_eq!(run("map_keys", &ty, m.clone()), Some(Value::Set(vec![Value::Int(1), Value::Int(3)])));
        let values = Value::List(vec![Value::Text("a".into()), Value::Text("b".into())]);
        assert_eq!(run("map_values", &ty, m.clone()), Some(values));
        assert_eq!(run("collection_count", &ty, m), Some(Value::Int(2)));
    }

    #[test]
    fn numbers_aggregate_as_sum_and_avg_do() {
        let ty = CqlType::Frozen(Box::new(CqlType::List(Box::new(CqlType::Tinyint))));
        let l = Value::List(vec![Value::Tinyint(100), Value::Tinyint(101)]);
        assert_eq!(run("collection_sum", &ty, l.clone()), Some(Value::Tinyint(-55)), "wraps as sum()");
        assert_eq!(run("collection_avg", &ty, l.clone()), Some(Value::Tinyint(100)), "exact as avg()");
        assert_eq!(run("collection_min", &ty, l.clone()), Some(Value::Tinyint(100)));
        assert_eq!(run("collection_max", &ty, l), Some(Value::Tinyint(101)));
        let empty = Value::List(Vec::new());
        assert_eq!(run("collection_sum", &ty, empty.clone()), Some(Value::Tinyint(0)));
        assert_eq!(run("collection_avg", &ty, empty.clone()), Some(Value::Tinyint(0)));
        assert_eq!(run("collection_min", &ty, empty), None);
    }

    #[test]
    fn wrong_arguments_get_cassandras_messages() {
        let uuid = CqlType::Uuid;
        let e = check("collection_sum", "v", &uuid).expect_err("uuid is no collection").to_string();
        assert!(e.contains("Function system.collection_sum requires a numeric set/list argument, but found argument v of type uuid"), "{e}");
        let texts = CqlType::Set(Box::new(CqlType::Text));
        assert!(check("collection_avg", "s", &texts).is_err());
        assert!(check("collection_max", "s", &texts).is_ok());
        assert!(check("map_keys", "s", &texts).is_err());
    }
}
