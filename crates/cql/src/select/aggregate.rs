//! Aggregates folded row by row: `count`, `min`, `max`, `sum`, `avg`, and
//! functions of them (`toDate(max(ts))`), over the rows of a statement or
//! of a GROUP BY group.
//!
//! A fold holds one running value per selector, never the rows: a
//! `SELECT count(*)` over a large table reads it page by page and keeps
//! a counter. Selectors that are not aggregates take the first row's
//! value, as in Cassandra.

use bytes::Bytes;
use shoal_coordinator::data::ResultRow;
use shoal_schema::value::{add, compare, divide_for_avg, to_varint, zero_of, Value};
use shoal_schema::{fields, CqlType, TableMeta};

use super::{evaluate, operate, AggregateKind, Sel};
use crate::error::{invalid, CqlError, CqlResult};
use crate::functions;
use crate::user_functions::{self, Aggregate};
use shoal_schema::arithmetic::NumericOp;
use shoal_schema::UserFunction;

/// The running state of one selector.
enum Fold<'s> {
    Aggregate {
        kind: AggregateKind,
        arg: Option<&'s Sel>,
        ty: &'s CqlType,
        state: Running,
    },
    Function {
        name: &'s str,
        arg_types: &'s [CqlType],
        args: Vec<Fold<'s>>,
    },
    /// A user function of aggregates (`f(max(v))`).
    UserFunction {
        function: &'s UserFunction,
        args: Vec<Fold<'s>>,
    },
    /// A user-defined aggregate: its state so far.
    UserAggregate {
        aggregate: &'s Aggregate,
        args: &'s [Sel],
        state: Option<Bytes>,
    },
    Field {
        value: Box<Fold<'s>>,
        index: usize,
    },
    Arithmetic {
        op: NumericOp,
        types: &'s (CqlType, CqlType),
        ty: &'s CqlType,
        left: Box<Fold<'s>>,
        right: Box<Fold<'s>>,
    },
    /// A selector without aggregates: its value on the first row.
    First {
        sel: &'s Sel,
        value: Option<Option<Bytes>>,
    },
}

/// What an aggregate has seen so far.
enum Running {
    Count(i64),
    /// The least (min) or greatest (max) value so far.
    Best(Option<Bytes>),
    /// The sum so far (in `sum_ty`) and how many values it adds.
    Sum {
        sum: Value,
        sum_ty: CqlType,
        values: u64,
    },
    /// A float or double sum, compensated (Kahan) as Cassandra's: summing
    /// 0.1 .. 1.7 gives 15.3, not 15.299999999999999.
    FloatSum(CompensatedSum),
}

/// Kahan summation in double precision, as Java's `DoubleSummaryStatistics`
/// (which Cassandra's float and double `sum` and `avg` follow).
#[derive(Default)]
struct CompensatedSum {
    sum: f64,
    compensation: f64,
    /// The plain sum: the answer when compensation turned an infinite sum
    /// into NaN (`inf - inf`).
    simple: f64,
    values: u64,
}

impl CompensatedSum {
    fn add(&mut self, value: f64) {
        let corrected = value - self.compensation;
        let rounded = self.sum + corrected;
        self.compensation = (rounded - self.sum) - corrected;
        self.sum = rounded;
        self.simple += value;
        self.values += 1;
    }

    fn total(&self) -> f64 {
        let total = self.sum - self.compensation;
        if total.is_nan() && self.simple.is_infinite() {
            self.simple
        } else {
            total
        }
    }

    /// The sum, or the average for `avg` (0 over no values), as `ty`.
    fn finish(&self, kind: AggregateKind, ty: &CqlType) -> Bytes {
        let value = match (kind, self.values) {
            (AggregateKind::Avg, 0) => 0.0,
            (AggregateKind::Avg, n) => self.total() / n as f64,
            _ => self.total(),
        };
        match ty {
            CqlType::Float => Bytes::copy_from_slice(&(value as f32).to_be_bytes()),
            _ => Bytes::copy_from_slice(&value.to_be_bytes()),
        }
    }
}

/// The folds of a statement's selectors.
pub(super) struct Folds<'s> {
    folds: Vec<Fold<'s>>,
}

impl<'s> Folds<'s> {
    pub fn new(sels: &'s [Sel]) -> CqlResult<Folds<'s>> {
        Ok(Folds { folds: sels.iter().map(fold_of).collect::<CqlResult<_>>()? })
    }

    pub fn add(&mut self, meta: &TableMeta, row: &ResultRow) -> CqlResult<()> {
        self.folds.iter_mut().try_for_each(|f| f.add(meta, row))
    }

    pub fn finish(self) -> CqlResult<Vec<Option<Bytes>>> {
        self.folds.into_iter().map(Fold::finish).collect()
    }
}

/// The aggregated row of `rows` (a GROUP BY group).
pub(super) fn aggregate_row(meta: &TableMeta, sels: &[Sel], rows: &[ResultRow]) -> CqlResult<Vec<Option<Bytes>>> {
    let mut folds = Folds::new(sels)?;
    rows.iter().try_for_each(|row| folds.add(meta, row))?;
    folds.finish()
}

/// Whether `sel` aggregates, itself or in an argument.
pub(super) fn has_aggregate(sel: &Sel) -> bool {
    match sel {
        Sel::Aggregate { .. } | Sel::UserAggregate { .. } => true,
        Sel::Function { args, .. } | Sel::UserFunction { args, .. } => args.iter().any(has_aggregate),
        Sel::Field { value, .. } | Sel::Cast { value, .. } | Sel::Element { value, .. } | Sel::Slice { value, .. } => {
            has_aggregate(value)
        }
        Sel::Arithmetic { left, right, .. } => has_aggregate(left) || has_aggregate(right),
        Sel::Column(_) | Sel::WriteTime(_) | Sel::Ttl(_) | Sel::ElementStamp { .. } | Sel::Literal(_) => false,
    }
}

fn fold_of(sel: &Sel) -> CqlResult<Fold<'_>> {
    Ok(match sel {
        Sel::Aggregate { kind, arg, ty } => {
            let state = match kind {
                AggregateKind::Count => Running::Count(0),
                AggregateKind::Min | AggregateKind::Max => Running::Best(None),
                AggregateKind::Sum | AggregateKind::Avg
                    if matches!(ty.unfrozen(), CqlType::Float | CqlType::Double) =>
                {
                    Running::FloatSum(CompensatedSum::default())
                }
                AggregateKind::Sum | AggregateKind::Avg => {
                    let ty = ty.unfrozen();
                    let numeric =
                        |e: shoal_schema::ValueError| invalid(format!("Invalid call to a numeric aggregate: {e}"));
                    let zero = zero_of(ty).map_err(numeric)?;
                    // avg sums integers as varint so the sum cannot wrap
                    // (sum does wrap, as in Cassandra); the end narrows back.
                    if *kind == AggregateKind::Avg && to_varint(&zero).is_some() {
                        Running::Sum { sum: Value::Varint(vec![0]), sum_ty: CqlType::Varint, values: 0 }
                    } else {
                        Running::Sum { sum: zero, sum_ty: ty.clone(), values: 0 }
                    }
                }
            };
            Fold::Aggregate { kind: *kind, arg: arg.as_deref(), ty, state }
        }
        Sel::Function { name, arg_types, args } if args.iter().any(has_aggregate) => {
            Fold::Function { name, arg_types, args: args.iter().map(fold_of).collect::<CqlResult<_>>()? }
        }
        Sel::UserFunction { function, args } if args.iter().any(has_aggregate) => {
            Fold::UserFunction { function, args: args.iter().map(fold_of).collect::<CqlResult<_>>()? }
        }
        Sel::UserAggregate { aggregate, args } => {
            Fold::UserAggregate { aggregate, args, state: aggregate.initial.clone() }
        }
        Sel::Field { value, index } if has_aggregate(value) => {
            Fold::Field { value: Box::new(fold_of(value)?), index: *index }
        }
        Sel::Arithmetic { op, left, right, types, ty } if has_aggregate(sel) => {
            Fold::Arithmetic { op: *op, types, ty, left: Box::new(fold_of(left)?), right: Box::new(fold_of(right)?) }
        }
        _ => Fold::First { sel, value: None },
    })
}

impl Fold<'_> {
    fn add(&mut self, meta: &TableMeta, row: &ResultRow) -> CqlResult<()> {
        match self {
            Fold::Aggregate { kind, arg, ty, state } => {
                let value = match arg {
                    None => None,
                    Some(arg) => match evaluate(meta, arg, row)? {
                        Some(value) => Some(value),
                        // Aggregates skip nulls.
                        None => return Ok(()),
                    },
                };
                state.add(*kind, ty.unfrozen(), value)
            }
            Fold::Function { args, .. } | Fold::UserFunction { args, .. } => {
                args.iter_mut().try_for_each(|a| a.add(meta, row))
            }
            Fold::UserAggregate { aggregate, args, state } => {
                let values = args.iter().map(|a| evaluate(meta, a, row)).collect::<CqlResult<Vec<_>>>()?;
                *state = user_functions::step(aggregate, state.take(), values)?;
                Ok(())
            }
            Fold::Field { value, .. } => value.add(meta, row),
            Fold::Arithmetic { left, right, .. } => {
                left.add(meta, row)?;
                right.add(meta, row)
            }
            Fold::First { sel, value } => {
                if value.is_none() {
                    *value = Some(evaluate(meta, sel, row)?);
                }
                Ok(())
            }
        }
    }

    fn finish(self) -> CqlResult<Option<Bytes>> {
        match self {
            Fold::Aggregate { kind, ty, state, .. } => state.finish(kind, ty.unfrozen()),
            Fold::Function { name, arg_types, args } => {
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    match arg.finish()? {
                        Some(value) => values.push(value),
                        None => return Ok(None),
                    }
                }
                Ok(functions::apply(name, arg_types, &values)?.1)
            }
            Fold::UserFunction { function, args } => {
                let values = args.into_iter().map(Fold::finish).collect::<CqlResult<Vec<_>>>()?;
                crate::lua::call(function, &values)
            }
            Fold::UserAggregate { aggregate, state, .. } => user_functions::finish(aggregate, state),
            Fold::Field { value, index } => match value.finish()? {
                Some(v) => Ok(fields::field(&v, index)
                    .map_err(|e| CqlError::Server(format!("corrupt user type value: {e}")))?
                    .map(|f| v.slice_ref(f))),
                None => Ok(None),
            },
            Fold::Arithmetic { op, types, ty, left, right } => operate(op, types, ty, left.finish()?, right.finish()?),
            Fold::First { value, .. } => Ok(value.flatten()),
        }
    }
}

impl Running {
    fn add(&mut self, kind: AggregateKind, ty: &CqlType, value: Option<Bytes>) -> CqlResult<()> {
        match self {
            Running::Count(n) => *n += 1,
            Running::Best(best) => {
                let Some(value) = value else { return Ok(()) };
                let better = match best {
                    None => true,
                    Some(current) if kind == AggregateKind::Min => compare(ty, &value, current).is_lt(),
                    Some(current) => compare(ty, &value, current).is_gt(),
                };
                if better {
                    *best = Some(value);
                }
            }
            Running::FloatSum(sum) => {
                let Some(value) = value.filter(|v| !v.is_empty()) else { return Ok(()) };
                match Value::deserialize(ty, &value).map_err(|e| CqlError::Server(e.to_string()))? {
                    Value::Float(v) => sum.add(f64::from(v)),
                    Value::Double(v) => sum.add(v),
                    other => return Err(CqlError::Server(format!("a float sum given {other:?}"))),
                }
            }
            Running::Sum { sum, sum_ty, values } => {
                // Empty values count as null, as in Cassandra.
                let Some(value) = value.filter(|v| !v.is_empty()) else { return Ok(()) };
                let value = Value::deserialize(ty, &value).map_err(|e| CqlError::Server(e.to_string()))?;
                let value = if *sum_ty == CqlType::Varint { to_varint(&value).unwrap_or(value) } else { value };
                *sum = add(sum_ty, sum, &value)
                    .map_err(|e| invalid(format!("Invalid call to a numeric aggregate: {e}")))?;
                *values += 1;
            }
        }
        Ok(())
    }

    fn finish(self, kind: AggregateKind, ty: &CqlType) -> CqlResult<Option<Bytes>> {
        Ok(match self {
            Running::Count(n) => Some(Bytes::copy_from_slice(&n.to_be_bytes())),
            Running::Best(best) => best,
            Running::FloatSum(sum) => Some(sum.finish(kind, ty)),
            Running::Sum { sum, values, .. } => {
                let sum = match kind {
                    AggregateKind::Avg => divide_for_avg(ty, &sum, values)
                        .map_err(|e| invalid(format!("Invalid call to a numeric aggregate: {e}")))?,
                    _ => sum,
                };
                Some(Bytes::from(sum.to_bytes()))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn double(bytes: &Bytes) -> f64 {
        f64::from_be_bytes(bytes.as_ref().try_into().expect("8 bytes"))
    }

    #[test]
    fn float_sums_are_compensated_as_cassandras() {
        let mut sum = CompensatedSum::default();
        (1..18).for_each(|i| sum.add(f64::from(i) / 10.0));
        assert_eq!(double(&sum.finish(AggregateKind::Sum, &CqlType::Double)), 15.3);
        assert_eq!(double(&sum.finish(AggregateKind::Avg, &CqlType::Double)), 15.3 / 17.0);
        let empty = CompensatedSum::default();
        assert_eq!(double(&empty.finish(AggregateKind::Avg, &CqlType::Double)), 0.0);
    }

    #[test]
    fn infinite_and_nan_float_sums() {
        let mut sum = CompensatedSum::default();
        [1.0, f64::INFINITY, 2.0].into_iter().for_each(|v| sum.add(v));
        assert_eq!(double(&sum.finish(AggregateKind::Sum, &CqlType::Double)), f64::INFINITY);
        assert_eq!(double(&sum.finish(AggregateKind::Avg, &CqlType::Double)), f64::INFINITY);
        sum.add(f64::NAN);
        assert!(double(&sum.finish(AggregateKind::Sum, &CqlType::Double)).is_nan());
        let float = sum.finish(AggregateKind::Sum, &CqlType::Float);
        assert!(f32::from_be_bytes(float.as_ref().try_into().expect("4 bytes")).is_nan());
    }
}
