//! WHERE clauses: which partitions, which clustering ranges, which filters.
//!
//! Restrictions on the partition key become partition keys (`=`, `IN`) or a
//! token range (`token(...)`); restrictions on a prefix of the clustering key
//! become byte ranges over the order-preserving clustering encoding (so a
//! `DESC` column flips its bounds); everything else becomes a row filter,
//! which needs ALLOW FILTERING, as in Cassandra.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use shoal_coordinator::data::{ClusteringRange, PartitionPosition};
use shoal_coordinator::data::{FilterOp, RowFilter};
use shoal_schema::comparable;
use shoal_schema::token::{murmur3_token, serialize_partition_key, TokenError, MAX_KEY_LEN};
use shoal_schema::value::compare;
use shoal_schema::{ClusteringOrder, ColumnKind, ColumnMeta, CqlType, TableMeta};

use crate::ast::{InValues, Operator, Relation, Term};
use crate::error::{invalid, CqlError, CqlResult};
use crate::filter_relations::{self, check_not_collection, matches_nothing, unset_error};
use crate::values::{collection_items, eval, eval_required, Bindings, BoundValue, Receiver};

/// Combinations of IN values above this are refused (Cassandra's
/// `max_clustering_key_restrictions_per_query` default is 100).
const CARTESIAN_PRODUCT_MAX: usize = 100;

#[derive(Debug, Clone)]
pub enum PartitionRestriction {
    /// Exactly these partitions.
    Keys(Vec<PartitionPosition>),
    /// The partitions whose tokens lie between the bounds.
    TokenRange { from: Bound<i64>, to: Bound<i64> },
}

#[derive(Debug, Clone)]
pub struct Restrictions {
    pub partitions: PartitionRestriction,
    /// Full clustering keys when every clustering column is restricted by
    /// `=`/`IN` (what UPDATE needs), as (encoding, values).
    pub clustering_keys: Option<Vec<(Bytes, Vec<Bytes>)>>,
    /// The clustering ranges selected, in clustering order; empty when the
    /// restrictions exclude every row (`c > 5 AND c < 3`, `c IN ()`).
    pub clustering_ranges: Vec<ClusteringRange>,
    /// Whether some clustering column is restricted. The ranges alone do
    /// not say it: `c <= 2147483647` selects every row as `[all()]` does,
    /// yet a DELETE with it removes rows, never the partition's static row.
    pub clustering_restricted: bool,
    pub filters: Vec<RowFilter>,
    /// Restrictions that make the read scan more than it returns.
    pub needs_filtering: bool,
}

impl Restrictions {
    /// Restrictions no row meets (a key `= null` in a read).
    fn nothing(clustering_restricted: bool) -> Restrictions {
        Restrictions {
            partitions: PartitionRestriction::Keys(Vec::new()),
            clustering_keys: None,
            clustering_ranges: Vec::new(),
            clustering_restricted,
            filters: Vec::new(),
            needs_filtering: false,
        }
    }
}

struct Analysis<'a> {
    meta: &'a TableMeta,
    bindings: Bindings<'a>,
    /// For an UPDATE or DELETE.
    write: bool,
    /// Values per column index for `=` (one) and `IN` (several). Ordered
    /// maps, not hash maps: they hold a handful of entries, and this runs
    /// on every request, where hashing with a fresh seed costs more.
    equal: BTreeMap<usize, Vec<Bytes>>,
    /// Slice bounds per clustering column index.
    slices: BTreeMap<usize, Vec<(Operator, Bytes)>>,
    token_from: Bound<i64>,
    token_to: Bound<i64>,
    has_token: bool,
    filters: Vec<RowFilter>,
    /// Multi-column relations: (column indexes, operator, tuples).
    multi: Vec<(Vec<usize>, Operator, Vec<Vec<Bytes>>)>,
}

pub fn analyze(meta: &TableMeta, relations: &[Relation], bindings: Bindings<'_>) -> CqlResult<Restrictions> {
    analyze_for(meta, relations, bindings, false)
}

/// [`analyze`] for an UPDATE or DELETE, where a key `IN ?` bound to null
/// is an error rather than no rows.
/// The refusals of a SELECT's WHERE clause that need no bound value, made
/// at PREPARE as ScyllaDB makes them: a driver told a statement prepared
/// would bind its markers and never meet the error.
/// (A relation on a column the table lacks is left for the execution's
/// own error.)
pub fn check_unbound(meta: &TableMeta, relations: &[Relation]) -> CqlResult<()> {
    let known = |column: &str| meta.column(column).is_some();
    relations.iter().try_for_each(|relation| match relation {
        Relation::IsNotNull { column } if known(column) => Err(is_not_null_error(column)),
        Relation::Simple { column, op: Operator::Ne, value } if known(column) => Err(not_equal_error(column, value)),
        Relation::MultiColumn { columns, op: Operator::Ne, value } if columns.iter().all(|c| known(c)) => {
            Err(not_equal_error(&format!("({})", columns.join(", ")), value))
        }
        Relation::Token { columns, op: Operator::Ne, value } => {
            Err(not_equal_error(&format!("token({})", columns.join(", ")), value))
        }
        _ => Ok(()),
    })
}

fn is_not_null_error(column: &str) -> CqlError {
    invalid(format!("restriction '{column} IS NOT NULL' is only supported in materialized view creation"))
}

fn not_equal_error(left: &str, term: &Term) -> CqlError {
    invalid(format!("Unsupported \"!=\" relation: {left} != {term}"))
}

pub fn analyze_write(meta: &TableMeta, relations: &[Relation], bindings: Bindings<'_>) -> CqlResult<Restrictions> {
    analyze_for(meta, relations, bindings, true)
}

fn analyze_for(
    meta: &TableMeta,
    relations: &[Relation],
    bindings: Bindings<'_>,
    write: bool,
) -> CqlResult<Restrictions> {
    let mut a = Analysis {
        meta,
        bindings,
        write,
        equal: BTreeMap::new(),
        slices: BTreeMap::new(),
        token_from: Bound::Unbounded,
        token_to: Bound::Unbounded,
        has_token: false,
        filters: Vec::new(),
        multi: Vec::new(),
    };
    for relation in relations {
        a.relation(relation)?;
    }
    a.finish()
}

/// The WHERE shape of prepared point reads and writes, resolved once at
/// PREPARE: every partition key column, and a prefix of the clustering
/// columns, restricted by `=` to a term (usually a bind marker), and
/// nothing else. Executing it only evaluates and validates the terms; it
/// gives exactly what [`analyze`] would. Other shapes (IN, slices, token,
/// filters) go through [`analyze`] on every execution.
#[derive(Debug, Clone)]
pub struct EqPlan {
    /// (column index, term) for the partition key columns, in key order.
    partition_key: Vec<(usize, Term)>,
    /// (column index, term) for a clustering prefix, in key order.
    clustering_prefix: Vec<(usize, Term)>,
    /// The prefix is the whole clustering key.
    full_clustering_key: bool,
}

impl EqPlan {
    /// The plan for `relations`, when they have the plan's shape.
    pub fn compile(meta: &TableMeta, relations: &[Relation]) -> Option<EqPlan> {
        let mut terms: BTreeMap<usize, &Term> = BTreeMap::new();
        for relation in relations {
            let Relation::Simple { column, op: Operator::Eq, value } = relation else { return None };
            let index = meta.column_index(column)?;
            if !meta.columns[index].kind.is_primary_key() || terms.insert(index, value).is_some() {
                return None;
            }
        }
        let in_key_order = |kind: ColumnKind| {
            (0..meta.columns.len()).filter(move |i| meta.columns[*i].kind == kind).collect::<Vec<usize>>()
        };
        let partition_key: Vec<(usize, Term)> = in_key_order(ColumnKind::PartitionKey)
            .into_iter()
            .map(|i| terms.remove(&i).map(|t| (i, t.clone())))
            .collect::<Option<_>>()?;
        let clustering = in_key_order(ColumnKind::Clustering);
        let clustering_prefix: Vec<(usize, Term)> =
            clustering.iter().map_while(|i| terms.remove(i).map(|t| (*i, t.clone()))).collect();
        // A clustering column restricted past a gap in the prefix is a
        // filter: not this shape.
        if !terms.is_empty() {
            return None;
        }
        let full_clustering_key = clustering_prefix.len() == clustering.len();
        Some(EqPlan { partition_key, clustering_prefix, full_clustering_key })
    }

    /// The restrictions for these bound values, as [`analyze`] gives them.
    pub fn restrictions(&self, meta: &TableMeta, bindings: Bindings<'_>) -> CqlResult<Restrictions> {
        // `None` for a null: a key `= null` matches nothing (see
        // [`Analysis::simple`]).
        let value = |(index, term): &(usize, Term)| -> CqlResult<Option<Bytes>> {
            let column = &meta.columns[*index];
            match eval(term, Receiver { name: &column.name, ty: &column.ty }, bindings)? {
                BoundValue::Value(value) => check_key_value(column, &value).map(|()| Some(value)),
                BoundValue::Null => Ok(None),
                BoundValue::Unset => Err(invalid(format!("Invalid unset value for {}", column.name))),
            }
        };
        let parts = self.partition_key.iter().map(value).collect::<CqlResult<Vec<Option<Bytes>>>>()?;
        let prefix = self.clustering_prefix.iter().map(value).collect::<CqlResult<Vec<Option<Bytes>>>>()?;
        let (Some(parts), Some(prefix)) =
            (parts.into_iter().collect::<Option<Vec<Bytes>>>(), prefix.into_iter().collect::<Option<Vec<Bytes>>>())
        else {
            return Ok(Restrictions::nothing(!self.clustering_prefix.is_empty()));
        };
        // A read of the empty key finds nothing in a table (ScyllaDB's
        // answer; a write of it is refused); a view may hold it.
        let positions = match is_empty_key(&parts) {
            true => empty_key_position(meta).into_iter().collect(),
            false => vec![position_of(&parts)?],
        };
        check_clustering_length(&prefix)?;
        let encoded = meta.encode_clustering(&prefix);
        let range = prefix_range(encoded.clone());
        let clustering_keys = self.full_clustering_key.then(|| vec![(encoded, prefix)]);
        Ok(Restrictions {
            partitions: PartitionRestriction::Keys(positions),
            clustering_keys,
            clustering_ranges: if range.is_empty() { Vec::new() } else { vec![range] },
            clustering_restricted: !self.clustering_prefix.is_empty(),
            filters: Vec::new(),
            needs_filtering: false,
        })
    }
}

impl<'a> Analysis<'a> {
    /// The column's index and metadata, borrowed from the table (not from
    /// `self`), so the analysis can go on changing while it is held.
    fn column(&self, name: &str) -> CqlResult<(usize, &'a ColumnMeta)> {
        let index = self.meta.column_index(name).ok_or_else(|| {
            invalid(format!("Undefined column name {name} in table {}.{}", self.meta.keyspace, self.meta.name))
        })?;
        let meta: &'a TableMeta = self.meta;
        Ok((index, &meta.columns[index]))
    }

    fn value(&self, term: &Term, column: &ColumnMeta) -> CqlResult<Bytes> {
        let value = eval_required(term, Receiver { name: &column.name, ty: &column.ty }, self.bindings)?;
        check_key_value(column, &value)?;
        Ok(value)
    }

    fn in_values(&self, values: &InValues, column: &ColumnMeta) -> CqlResult<Vec<Bytes>> {
        match values {
            InValues::Terms(terms) => terms.iter().map(|t| self.value(t, column)).collect(),
            InValues::Bind(i) => {
                let list_ty = CqlType::List(Box::new(column.ty.clone()));
                // `IN ?` bound to null matches nothing, as ScyllaDB has it.
                match eval(&Term::Bind(*i), Receiver { name: &column.name, ty: &list_ty }, self.bindings)? {
                    BoundValue::Value(list) => Ok(collection_items(&list)),
                    BoundValue::Null if self.write => Err(invalid(format!("Invalid null value for {}", column.name))),
                    BoundValue::Null => Ok(Vec::new()),
                    BoundValue::Unset => Err(unset_error(&column.name)),
                }
            }
        }
    }

    fn relation(&mut self, relation: &Relation) -> CqlResult<()> {
        match relation {
            Relation::Simple { column, op, value } => {
                let (index, meta) = self.column(column)?;
                self.simple(index, meta, *op, value)
            }
            Relation::In { column, values } => {
                let (index, meta) = self.column(column)?;
                check_not_collection(meta, "IN")?;
                let values = self.in_values(values, meta)?;
                if meta.kind.is_primary_key() {
                    self.restrict_equal(index, meta, values)
                } else {
                    self.filters.push(RowFilter { column: index, op: FilterOp::In, values });
                    Ok(())
                }
            }
            Relation::NotIn { column, values } => {
                let (index, meta) = self.column(column)?;
                self.filters.push(filter_relations::not_in(index, meta, values, self.bindings)?);
                Ok(())
            }
            Relation::Token { columns, op, value } => self.token(columns, *op, value),
            Relation::MultiColumn { columns, op, value } => {
                self.multi_column(columns, *op, std::slice::from_ref(value), None)
            }
            Relation::MultiColumnIn { columns, values } => match values {
                InValues::Terms(terms) => self.multi_column(columns, Operator::In, terms, None),
                InValues::Bind(i) => self.multi_column(columns, Operator::In, &[], Some(*i)),
            },
            Relation::IsNotNull { column } => Err(is_not_null_error(column)),
            Relation::Element { column, key, op, value } => {
                let (index, meta) = self.column(column)?;
                self.filters.push(filter_relations::subscript(index, meta, key, *op, value, self.bindings)?);
                Ok(())
            }
        }
    }

    fn simple(&mut self, index: usize, column: &ColumnMeta, op: Operator, term: &Term) -> CqlResult<()> {
        if op == Operator::Ne {
            return Err(not_equal_error(&column.name, term));
        }
        // Before the collection check, as ScyllaDB prepares it: a
        // collection is no string.
        if op == Operator::Like {
            self.filters.push(filter_relations::like(index, column, term, self.bindings)?);
            return Ok(());
        }
        if op != Operator::Contains && op != Operator::ContainsKey {
            check_not_collection(column, op.text())?;
        }
        // Durations have no order (ScyllaDB's refusal and text).
        let slice = matches!(op, Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge);
        if slice && crate::durations::references_duration(&column.ty) {
            let what = crate::durations::duration_holder(&column.ty);
            return Err(invalid(format!("Slice restrictions are not supported on {what}")));
        }
        // A counter compared with null: ScyllaDB's text, from its
        // counter-update check.
        if column.ty.is_counter() && matches!(term, Term::Literal(crate::ast::Literal::Null)) {
            return Err(invalid("Invalid null value for counter increment/decrement"));
        }
        let filter_op = match op {
            Operator::Eq => FilterOp::Eq,
            Operator::Ne => FilterOp::Ne,
            Operator::Lt => FilterOp::Lt,
            Operator::Le => FilterOp::Le,
            Operator::Gt => FilterOp::Gt,
            Operator::Ge => FilterOp::Ge,
            Operator::Contains | Operator::ContainsKey => {
                let elem_ty = contained_type(column, op)?;
                let op = if op == Operator::Contains { FilterOp::Contains } else { FilterOp::ContainsKey };
                let filter = match eval(term, Receiver { name: &column.name, ty: &elem_ty }, self.bindings)? {
                    BoundValue::Value(value) => RowFilter { column: index, op, values: vec![value] },
                    BoundValue::Null => matches_nothing(index),
                    BoundValue::Unset => return Err(unset_error(&column.name)),
                };
                self.filters.push(filter);
                return Ok(());
            }
            Operator::In | Operator::NotIn | Operator::Like => {
                // IN and NOT IN parse as relations of their own; LIKE is
                // taken above.
                return Err(invalid(format!("Unsupported operator on column {}", column.name)));
            }
        };
        if !column.kind.is_primary_key() {
            // A filter on a null (`v = NULL`, `v > NULL`) matches nothing,
            // as in SQL and ScyllaDB; it still needs ALLOW FILTERING.
            let filter = match eval(term, Receiver { name: &column.name, ty: &column.ty }, self.bindings)? {
                BoundValue::Value(value) => RowFilter { column: index, op: filter_op, values: vec![value] },
                BoundValue::Null => matches_nothing(index),
                BoundValue::Unset => return Err(unset_error(&column.name)),
            };
            self.filters.push(filter);
            return Ok(());
        }
        // A key `= null` in a read matches nothing (ScyllaDB's answer, so
        // `count(*)` of it is 0); a write of it is refused.
        let value = match eval(term, Receiver { name: &column.name, ty: &column.ty }, self.bindings)? {
            BoundValue::Value(value) => check_key_value(column, &value).map(|()| value)?,
            BoundValue::Null if op == Operator::Eq && !self.write => {
                return self.restrict_equal(index, column, Vec::new());
            }
            BoundValue::Null => return Err(invalid(format!("Invalid null value for {}", column.name))),
            BoundValue::Unset => return Err(invalid(format!("Invalid unset value for {}", column.name))),
        };
        match (column.kind, op) {
            (ColumnKind::PartitionKey | ColumnKind::Clustering, Operator::Eq) => {
                self.restrict_equal(index, column, vec![value])
            }
            (ColumnKind::Clustering, Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge) => {
                self.slices.entry(index).or_default().push((op, value));
                Ok(())
            }
            _ => {
                self.filters.push(RowFilter { column: index, op: filter_op, values: vec![value] });
                Ok(())
            }
        }
    }

    /// `=` or `IN` on a key column. Several on one column select the values
    /// all of them name (`c = 1 AND c IN (1, 2)` is `c = 1`, `c = 1 AND c
    /// = 2` nothing): ScyllaDB's extension, where Cassandra refuses.
    fn restrict_equal(&mut self, index: usize, column: &ColumnMeta, values: Vec<Bytes>) -> CqlResult<()> {
        let ty = column.ty.unfrozen();
        self.equal
            .entry(index)
            .and_modify(|held| held.retain(|v| values.iter().any(|w| compare(ty, v, w).is_eq())))
            .or_insert(values);
        Ok(())
    }

    fn token(&mut self, columns: &[String], op: Operator, term: &Term) -> CqlResult<()> {
        let key: Vec<&str> = self.meta.partition_key().map(|c| c.name.as_str()).collect();
        if op == Operator::Ne {
            return Err(not_equal_error(&format!("token({})", columns.join(", ")), term));
        }
        check_token_arity(self.meta, columns.len())?;
        if columns.iter().enumerate().any(|(i, c)| columns[..i].contains(c)) {
            return Err(invalid("The token() function contains duplicate partition key components"));
        }
        if columns.iter().map(String::as_str).ne(key.iter().copied()) {
            return Err(invalid(format!(
                "The token function arguments must be in the partition key order: {}",
                key.join(", ")
            )));
        }
        let token = match term {
            Term::FunctionCall { name, args } if name == "token" || name == "system.token" => self.token_of(args)?,
            _ => {
                let receiver = Receiver { name: "partition key token", ty: &CqlType::Bigint };
                let value = eval_required(term, receiver, self.bindings)?;
                i64::from_be_bytes(value[..].try_into().map_err(|_| invalid("token must be a bigint"))?)
            }
        };
        self.has_token = true;
        match op {
            Operator::Gt => self.token_from = Bound::Excluded(token),
            Operator::Ge => self.token_from = Bound::Included(token),
            Operator::Lt => self.token_to = Bound::Excluded(token),
            Operator::Le => self.token_to = Bound::Included(token),
            Operator::Eq => {
                self.token_from = Bound::Included(token);
                self.token_to = Bound::Included(token);
            }
            _ => return Err(invalid("Only =, <, <=, > and >= are supported on token()")),
        }
        Ok(())
    }

    /// `token(v1, ...)` on the right of a token relation: the token of the
    /// partition key made of the values, each typed as its key column.
    fn token_of(&self, args: &[Term]) -> CqlResult<i64> {
        check_token_arity(self.meta, args.len())?;
        let key: Vec<&ColumnMeta> = self.meta.partition_key().collect();
        let parts = args.iter().zip(key).map(|(arg, column)| self.value(arg, column)).collect::<CqlResult<Vec<_>>>()?;
        Ok(position_of(&parts)?.token)
    }

    /// The refusal of a multi-column relation not on a clustering key
    /// prefix in key order (ScyllaDB's text).
    fn multi_column_order_error(names: &[String]) -> crate::error::CqlError {
        invalid(format!(
            "Clustering columns may not be skipped in multi-column relations. They should appear in the PRIMARY KEY \
             order. Got ({})",
            names.join(", ")
        ))
    }

    /// Several multi-column relations: at most one bound of each side, and
    /// no equality beside anything else (Cassandra's and ScyllaDB's texts).
    fn check_multi_column_bounds(&self, names: &[String], op: Operator) -> CqlResult<()> {
        let first = names.first().map_or("", String::as_str);
        let start = |op: Operator| matches!(op, Operator::Gt | Operator::Ge);
        let end = |op: Operator| matches!(op, Operator::Lt | Operator::Le);
        for (_, existing, _) in &self.multi {
            let slice = |op: Operator| start(op) || end(op);
            let message = if !slice(op) && !slice(*existing) {
                format!("{first} cannot be restricted by more than one relation if it includes an Equal")
            } else if !slice(op) || !slice(*existing) {
                format!("Column \"{first}\" cannot be restricted by both an equality and an inequality relation")
            } else if start(op) && start(*existing) {
                format!("More than one restriction was found for the start bound on {first}")
            } else if end(op) && end(*existing) {
                format!("More than one restriction was found for the end bound on {first}")
            } else {
                continue;
            };
            return Err(invalid(message));
        }
        Ok(())
    }

    /// `(c1, c2) op tuple`, or `IN` with `terms` or one marker bound to
    /// the whole list of tuples (`list_marker`).
    fn multi_column(
        &mut self,
        names: &[String],
        op: Operator,
        terms: &[Term],
        list_marker: Option<usize>,
    ) -> CqlResult<()> {
        if op == Operator::Ne {
            names.iter().try_for_each(|name| self.column(name).map(drop))?;
            return Err(not_equal_error(&format!("({})", names.join(", ")), &terms[0]));
        }
        let mut indexes = Vec::new();
        let mut types = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let (index, column) = self.column(name)?;
            if column.kind != ColumnKind::Clustering {
                return Err(invalid(format!(
                    "Multi-column relations can only be applied to clustering columns but was applied to: {name}"
                )));
            }
            if column.position as usize != i {
                return Err(Self::multi_column_order_error(names));
            }
            indexes.push(index);
            types.push(column.ty.clone());
        }
        self.check_multi_column_bounds(names, op)?;
        let tuple_ty = CqlType::Tuple(types);
        let receiver_name = format!("({})", names.join(","));
        let mut tuples = Vec::new();
        for term in terms {
            check_tuple_literal(term, names, op, &tuple_ty)?;
            let tuple = eval_required(term, Receiver { name: &receiver_name, ty: &tuple_ty }, self.bindings)?;
            let fields = tuple_fields(&tuple, names.len())
                .ok_or_else(|| invalid(format!("Invalid tuple for {receiver_name}")))?;
            tuples.push(fields);
        }
        if let Some(marker) = list_marker {
            let list_ty = CqlType::List(Box::new(tuple_ty.clone()));
            let name = format!("in{receiver_name}");
            // Bound to null, it names no rows (as `c IN ?` does).
            let list = match eval(&Term::Bind(marker), Receiver { name: &name, ty: &list_ty }, self.bindings)? {
                BoundValue::Value(list) => collection_items(&list),
                BoundValue::Null => Vec::new(),
                BoundValue::Unset => return Err(unset_error(&receiver_name)),
            };
            for tuple in list {
                let fields = tuple_fields(&tuple, names.len())
                    .ok_or_else(|| invalid(format!("Invalid tuple for {receiver_name}")))?;
                tuples.push(fields);
            }
        }
        self.multi.push((indexes, op, tuples));
        Ok(())
    }

    fn finish(mut self) -> CqlResult<Restrictions> {
        let pk: Vec<usize> =
            (0..self.meta.columns.len()).filter(|i| self.meta.columns[*i].kind == ColumnKind::PartitionKey).collect();
        let pk_complete = pk.iter().all(|i| self.equal.contains_key(i));
        let partitions = if pk_complete && !self.has_token {
            PartitionRestriction::Keys(self.partition_keys(&pk)?)
        } else {
            // Partial key restrictions become filters over a scan.
            for index in pk {
                if let Some(values) = self.equal.remove(&index) {
                    let op = if values.len() == 1 { FilterOp::Eq } else { FilterOp::In };
                    self.filters.push(RowFilter { column: index, op, values });
                }
            }
            PartitionRestriction::TokenRange { from: self.token_from, to: self.token_to }
        };
        let single_partition = matches!(&partitions, PartitionRestriction::Keys(_));
        let is_clustering = |i: &usize| self.meta.columns[*i].kind == ColumnKind::Clustering;
        let clustering_restricted =
            !self.multi.is_empty() || !self.slices.is_empty() || self.equal.keys().any(is_clustering);
        let (clustering_keys, clustering_ranges, clustering_filtered) = self.clustering()?;
        // `c NOT IN ...` on a clustering column is checked row by row, but
        // like a clustering slice it needs no ALLOW FILTERING within one
        // partition (ScyllaDB's rule).
        let clustering_not_in = |f: &RowFilter| f.op == FilterOp::NotIn && is_clustering(&f.column);
        let row_filtered = self.filters.iter().any(|f| !clustering_not_in(f));
        let clustering_filtered = clustering_filtered || self.filters.iter().any(clustering_not_in);
        let needs_filtering = row_filtered || (clustering_filtered && !single_partition);
        Ok(Restrictions {
            partitions,
            clustering_keys,
            clustering_ranges,
            clustering_restricted,
            filters: self.filters,
            needs_filtering,
        })
    }

    /// The partitions named, in the order Cassandra and ScyllaDB return
    /// them: each key column's values sorted by its type and deduplicated,
    /// so the combinations come in key order.
    fn partition_keys(&self, pk: &[usize]) -> CqlResult<Vec<PartitionPosition>> {
        let sorted = |i: &usize| {
            let ty = self.meta.columns[*i].ty.unfrozen();
            let mut values = self.equal[i].clone();
            values.sort_by(|a, b| compare(ty, a, b));
            values.dedup_by(|a, b| compare(ty, a, b).is_eq());
            values
        };
        let combos = cartesian(pk.iter().map(sorted).collect())?;
        // A read of the empty key finds nothing in a table, where a write
        // of it is refused; a view may hold it.
        let mut positions = Vec::with_capacity(combos.len());
        for parts in combos {
            match is_empty_key(&parts) && !self.write {
                true => positions.extend(empty_key_position(self.meta)),
                false => positions.push(position_of(&parts)?),
            }
        }
        Ok(positions)
    }

    /// Clustering restrictions as (full keys if all restricted by =/IN,
    /// ranges, whether some restriction must be checked by filtering).
    #[allow(clippy::type_complexity)]
    fn clustering(&mut self) -> CqlResult<(Option<Vec<(Bytes, Vec<Bytes>)>>, Vec<ClusteringRange>, bool)> {
        let ck: Vec<usize> =
            (0..self.meta.columns.len()).filter(|i| self.meta.columns[*i].kind == ColumnKind::Clustering).collect();
        let single = ck.iter().any(|i| self.equal.contains_key(i) || self.slices.contains_key(i));
        if !self.multi.is_empty() && single {
            return Err(invalid(
                "Mixing single column relations and multi column relations on clustering columns is not allowed",
            ));
        }
        if !self.multi.is_empty() {
            let relations = std::mem::take(&mut self.multi);
            return self.multi_ranges(&ck, relations);
        }
        let mut prefix_values: Vec<Vec<Bytes>> = Vec::new();
        let mut used = 0;
        for index in &ck {
            match self.equal.remove(index) {
                Some(mut values) => {
                    // Slices beside `=`/`IN` on the same column narrow its
                    // values (ScyllaDB's extension: `c = 1 AND c > 0`).
                    if let Some(bounds) = self.slices.remove(index) {
                        let ty = self.meta.columns[*index].ty.unfrozen();
                        values.retain(|v| bounds.iter().all(|(op, bound)| holds(compare(ty, v, bound), *op)));
                    }
                    prefix_values.push(values);
                    used += 1;
                }
                None => break,
            }
        }
        let slice_column = ck.get(used).copied();
        let slice = slice_column.and_then(|i| self.slices.remove(&i));
        // Restrictions past the prefix (or past the slice) are filters.
        let mut filtered = false;
        for index in ck.iter().skip(used) {
            if let Some(values) = self.equal.remove(index) {
                let op = if values.len() == 1 { FilterOp::Eq } else { FilterOp::In };
                self.filters.push(RowFilter { column: *index, op, values });
                filtered = true;
            }
            if let Some(bounds) = self.slices.remove(index) {
                for (op, value) in bounds {
                    self.filters.push(RowFilter { column: *index, op: filter_op(op), values: vec![value] });
                }
                filtered = true;
            }
        }
        let prefixes = cartesian(prefix_values)?;
        prefixes.iter().try_for_each(|p| check_clustering_length(p))?;
        // A write to a dense COMPACT STORAGE table may name a row by a
        // clustering prefix (CASSANDRA-7990), as its INSERT may.
        let prefix_row = self.write && self.meta.is_dense() && used > 0 && slice.is_none() && !filtered;
        let full_keys = (used == ck.len() || prefix_row)
            .then(|| prefixes.iter().map(|p| (self.meta.encode_clustering(p), p.clone())).collect());
        let mut ranges: Vec<ClusteringRange> = prefixes
            .iter()
            .map(|prefix| {
                let encoded = self.meta.encode_clustering(prefix);
                match (&slice, slice_column) {
                    (Some(bounds), Some(column)) => self.slice_range(encoded, column, bounds),
                    _ => prefix_range(encoded),
                }
            })
            .filter(|r| !r.is_empty())
            .collect();
        ranges.sort_by(|a, b| bound_key(&a.start).cmp(&bound_key(&b.start)));
        Ok((full_keys, ranges, filtered || (used > 0 || slice.is_some())))
    }

    fn slice_range(&self, prefix: Bytes, column: usize, bounds: &[(Operator, Bytes)]) -> ClusteringRange {
        let meta = &self.meta.columns[column];
        let desc = meta.order == ClusteringOrder::Desc;
        let mut range = prefix_range(prefix.clone());
        for (op, value) in bounds {
            let mut key = prefix.to_vec();
            comparable::encode(meta.ty.unfrozen(), value, desc, &mut key);
            apply_bound(&mut range, Bytes::from(key), *op, desc);
        }
        range
    }

    /// `(c1, ..., cn) op (v1, ..., vn)` over clustering columns of mixed
    /// order, which is no single range in storage order: it is the union,
    /// for each i, of the rows equal to `v1..v(i-1)` whose `ci` is strictly
    /// beyond `vi` (a range inside that prefix, placed by `ci`'s own
    /// order), plus, for `>=` and `<=`, the rows starting with the whole
    /// tuple. ScyllaDB and Cassandra split the slice the same way.
    fn mixed_order_slice(&self, columns: &[usize], tuple: &[Bytes], op: Operator) -> Vec<ClusteringRange> {
        let strict = match op {
            Operator::Ge => Operator::Gt,
            Operator::Le => Operator::Lt,
            other => other,
        };
        let mut ranges: Vec<ClusteringRange> = (0..tuple.len())
            .map(|i| {
                let mut range = prefix_range(self.meta.encode_clustering(&tuple[..i]));
                let desc = self.meta.columns[columns[i]].order == ClusteringOrder::Desc;
                apply_bound(&mut range, self.meta.encode_clustering(&tuple[..=i]), strict, desc);
                range
            })
            .collect();
        if strict != op {
            ranges.push(prefix_range(self.meta.encode_clustering(tuple)));
        }
        ranges.retain(|r| !r.is_empty());
        ranges
    }

    /// Multi-column relations: one `=`/`IN` (keys), or slices intersected.
    #[allow(clippy::type_complexity)]
    fn multi_ranges(
        &self,
        ck: &[usize],
        relations: Vec<(Vec<usize>, Operator, Vec<Vec<Bytes>>)>,
    ) -> CqlResult<(Option<Vec<(Bytes, Vec<Bytes>)>>, Vec<ClusteringRange>, bool)> {
        let mut keys: Option<(usize, Vec<(Bytes, Vec<Bytes>)>)> = None;
        let mut slice: Option<Vec<ClusteringRange>> = None;
        for (indexes, op, tuples) in relations {
            let columns = &ck[..indexes.len()];
            let orders: Vec<bool> =
                columns.iter().map(|i| self.meta.columns[*i].order == ClusteringOrder::Desc).collect();
            match op {
                Operator::Eq | Operator::In => {
                    if keys.is_some() {
                        return Err(invalid(
                            "Clustering columns may be restricted by only one multi-column = or IN relation",
                        ));
                    }
                    keys = Some((
                        indexes.len(),
                        tuples.iter().map(|t| (self.meta.encode_clustering(t), t.clone())).collect(),
                    ));
                }
                _ => {
                    for tuple in &tuples {
                        let bound = match orders.iter().all(|d| *d == orders[0]) {
                            true => {
                                let mut range = ClusteringRange::all();
                                apply_bound(&mut range, self.meta.encode_clustering(tuple), op, orders[0]);
                                vec![range]
                            }
                            false => self.mixed_order_slice(columns, tuple, op),
                        };
                        slice = Some(match slice {
                            Some(ranges) => intersect(&ranges, &bound),
                            None => bound,
                        });
                    }
                }
            }
        }
        match (keys, slice) {
            (Some(_), Some(_)) => Err(invalid("Mixing multi-column = or IN with slices is not supported yet")),
            (Some((width, keys)), None) => {
                let mut ranges: Vec<ClusteringRange> =
                    keys.iter().map(|(encoded, _)| prefix_range(encoded.clone())).collect();
                ranges.sort_by(|a, b| bound_key(&a.start).cmp(&bound_key(&b.start)));
                Ok(((width == ck.len()).then_some(keys), ranges, true))
            }
            (None, Some(mut ranges)) => {
                ranges.retain(|r| !r.is_empty());
                ranges.sort_by(|a, b| bound_key(&a.start).cmp(&bound_key(&b.start)));
                Ok((None, ranges, true))
            }
            (None, None) => Ok((None, vec![ClusteringRange::all()], false)),
        }
    }
}

/// Whether a value ordered `ordering` against a bound satisfies `value op
/// bound`, for a slice operator.
fn holds(ordering: std::cmp::Ordering, op: Operator) -> bool {
    match op {
        Operator::Lt => ordering.is_lt(),
        Operator::Le => ordering.is_le(),
        Operator::Gt => ordering.is_gt(),
        Operator::Ge => ordering.is_ge(),
        _ => ordering.is_eq(),
    }
}

/// The ranges of `a` narrowed by those of `b`: where a row falls in one of
/// each (both lists hold disjoint ranges, so the result does too).
fn intersect(a: &[ClusteringRange], b: &[ClusteringRange]) -> Vec<ClusteringRange> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let mut range = x.clone();
            if start_later(&y.start, &range.start) {
                range.start = y.start.clone();
            }
            if end_earlier(&y.end, &range.end) {
                range.end = y.end.clone();
            }
            if !range.is_empty() {
                out.push(range);
            }
        }
    }
    out
}

/// Narrows `range` by `key op` where `key` is an encoded clustering prefix;
/// `desc` says the restricted column sorts descending, which turns `>`
/// into a bound from above in storage order.
fn apply_bound(range: &mut ClusteringRange, key: Bytes, op: Operator, desc: bool) {
    let op = if desc { flip(op) } else { op };
    let (start, end) = match op {
        Operator::Gt => match successor(&key) {
            Some(next) => (Some(Bound::Included(next)), None),
            // No key follows every key starting with `key` (it is all 0xff
            // bytes): nothing is greater, and the range becomes empty.
            // Narrowing an empty range keeps it empty.
            None => {
                *range = ClusteringRange { start: Bound::Excluded(key.clone()), end: Bound::Excluded(key) };
                return;
            }
        },
        Operator::Ge => (Some(Bound::Included(key)), None),
        Operator::Lt => (None, Some(Bound::Excluded(key))),
        Operator::Le => (None, Some(successor(&key).map_or(Bound::Unbounded, Bound::Excluded))),
        _ => (None, None),
    };
    if let Some(start) = start {
        if start_later(&start, &range.start) {
            range.start = start;
        }
    }
    if let Some(end) = end {
        if end_earlier(&end, &range.end) {
            range.end = end;
        }
    }
}

fn start_later(a: &Bound<Bytes>, b: &Bound<Bytes>) -> bool {
    match (a, b) {
        (_, Bound::Unbounded) => true,
        (Bound::Unbounded, _) => false,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x > y || (x == y && matches!(a, Bound::Excluded(_)))
        }
    }
}

fn end_earlier(a: &Bound<Bytes>, b: &Bound<Bytes>) -> bool {
    match (a, b) {
        (_, Bound::Unbounded) => true,
        (Bound::Unbounded, _) => false,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x < y || (x == y && matches!(a, Bound::Excluded(_)))
        }
    }
}

fn filter_op(op: Operator) -> FilterOp {
    match op {
        Operator::Lt => FilterOp::Lt,
        Operator::Le => FilterOp::Le,
        Operator::Gt => FilterOp::Gt,
        _ => FilterOp::Ge,
    }
}

fn flip(op: Operator) -> Operator {
    match op {
        Operator::Gt => Operator::Lt,
        Operator::Ge => Operator::Le,
        Operator::Lt => Operator::Gt,
        Operator::Le => Operator::Ge,
        other => other,
    }
}

fn bound_key(bound: &Bound<Bytes>) -> Option<&Bytes> {
    match bound {
        Bound::Included(b) | Bound::Excluded(b) => Some(b),
        Bound::Unbounded => None,
    }
}

/// All keys that start with `prefix`.
fn prefix_range(prefix: Bytes) -> ClusteringRange {
    if prefix.is_empty() {
        return ClusteringRange::all();
    }
    let end = successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    ClusteringRange { start: Bound::Included(prefix), end }
}

/// Refuses a `token(...)` of other than one argument per partition key
/// column, on either side of a token relation: what a statement's text
/// alone decides, so PREPARE refuses it as execution would.
pub fn check_token_relations(meta: &TableMeta, relations: &[Relation]) -> CqlResult<()> {
    for relation in relations {
        let Relation::Token { columns, value, .. } = relation else { continue };
        check_token_arity(meta, columns.len())?;
        if let Term::FunctionCall { name, args } = value {
            if name == "token" || name == "system.token" {
                check_token_arity(meta, args.len())?;
            }
        }
    }
    Ok(())
}

fn check_token_arity(meta: &TableMeta, provided: usize) -> CqlResult<()> {
    let required = meta.partition_key().count();
    match provided == required {
        true => Ok(()),
        false => Err(invalid(format!(
            "Invalid number of arguments in call to function system.token: {required} required but {provided} provided"
        ))),
    }
}

/// Refuses a clustering value over 64 KiB (Cassandra's limit), and an
/// empty value of a clustering column whose type's key encoding cannot
/// place it ([`comparable::encodes_empty`]).
pub fn check_key_value(column: &ColumnMeta, value: &[u8]) -> CqlResult<()> {
    if column.kind == ColumnKind::Clustering {
        check_clustering_length(std::slice::from_ref(&value))?;
    }
    if value.is_empty() && column.kind == ColumnKind::Clustering && !comparable::encodes_empty(&column.ty) {
        return Err(invalid(format!(
            "Empty values of type {} are not supported in clustering column {}",
            column.ty, column.name
        )));
    }
    Ok(())
}

/// Refuses a clustering key (or prefix) whose components add up to more
/// than 64 KiB: Cassandra 5 and ScyllaDB limit the whole key, not each
/// component, and Cassandra 5 counts the values alone (so one component
/// may reach 65535 bytes), in Cassandra's text.
pub fn check_clustering_length<V: AsRef<[u8]>>(values: &[V]) -> CqlResult<()> {
    let length_bytes: usize = values.iter().map(|v| v.as_ref().len()).sum();
    match length_bytes > MAX_KEY_LEN {
        true => Err(invalid(format!("Key length of {length_bytes} is longer than maximum of {MAX_KEY_LEN}"))),
        false => Ok(()),
    }
}

/// Where the partition with these key components lives. A key of one empty
/// component is refused, as by Cassandra (a composite key is never empty).
pub fn position_of(parts: &[Bytes]) -> CqlResult<PartitionPosition> {
    if let [part] = parts {
        if part.is_empty() {
            return Err(invalid("Key may not be empty"));
        }
    }
    position_of_any(parts)
}

/// [`position_of`] without the refusal of an empty key, for the rows a
/// node makes itself (ScyllaDB's `system.one_row` has one).
pub fn position_of_any(parts: &[Bytes]) -> CqlResult<PartitionPosition> {
    let refs: Vec<&[u8]> = parts.iter().map(|b| &b[..]).collect();
    let key = Bytes::from(serialize_partition_key(&refs).map_err(|e| match e {
        TokenError::KeyTooLong(_) => invalid(e.to_string()),
        _ => invalid(format!("Invalid partition key: {e}")),
    })?);
    Ok(PartitionPosition { token: murmur3_token(&key), key })
}

/// The empty value as a whole (one-column) partition key: no table's
/// partition can have it.
fn is_empty_key(parts: &[Bytes]) -> bool {
    matches!(parts, [part] if part.is_empty())
}

/// Where a view keeps the rows whose key column is empty (a base row's
/// empty text, say, as ScyllaDB keeps them), and `system.one_row` its one
/// row; `None` for a table, which refuses the empty key.
fn empty_key_position(meta: &TableMeta) -> Option<PartitionPosition> {
    let one_row = meta.keyspace == "system" && meta.name == "one_row";
    if meta.view_of.is_none() && !one_row {
        return None;
    }
    let key = Bytes::from(serialize_partition_key(&[&[][..]]).ok()?);
    Some(PartitionPosition { token: murmur3_token(&key), key })
}

/// Why `relations` on `meta`'s clustering columns need ALLOW FILTERING
/// when no index serves them, in ScyllaDB's words: a column restricted past
/// an unrestricted one or past a slice, or CONTAINS on a clustering column.
/// `None` when the clustering restrictions form a prefix (whatever else
/// needs filtering gets the general message).
pub fn clustering_filtering_error(meta: &TableMeta, relations: &[Relation]) -> Option<CqlError> {
    let mut clustering: BTreeMap<i32, bool> = BTreeMap::new();
    let mut contains: Vec<&ColumnMeta> = Vec::new();
    for relation in relations {
        let (column, equal) = match relation {
            Relation::Simple { column, op, .. } => (column, *op == Operator::Eq),
            Relation::In { column, .. } => (column, true),
            _ => continue,
        };
        let Some(meta_column) = meta.column(column).filter(|c| c.kind == ColumnKind::Clustering) else { continue };
        match relation {
            Relation::Simple { op: Operator::Contains | Operator::ContainsKey, .. } => contains.push(meta_column),
            _ => {
                let entry = clustering.entry(meta_column.position).or_insert(equal);
                *entry &= equal;
            }
        }
    }
    if let Err(e) = crate::modification_where::check_clustering_prefix(meta, &clustering) {
        return Some(e);
    }
    let names: Vec<&str> = meta.clustering_key().map(|c| c.name.as_str()).collect();
    let column = contains.first()?;
    let slice = (0..column.position).find(|p| clustering.get(p) == Some(&false));
    Some(invalid(match slice.and_then(|p| names.get(p as usize)) {
        Some(previous) => format!(
            "Clustering column \"{}\" cannot be restricted (preceding column \"{previous}\" is restricted by a non-EQ relation)",
            column.name
        ),
        None => "Cannot restrict clustering columns by a CONTAINS relation without a secondary index or filtering"
            .to_string(),
    }))
}

/// The type of what `column CONTAINS x` (or `CONTAINS KEY x`) looks for;
/// an error naming what the column is not (ScyllaDB's texts), at PREPARE
/// as at execution.
pub(crate) fn contained_type(column: &ColumnMeta, op: Operator) -> CqlResult<CqlType> {
    match (op, column.ty.unfrozen()) {
        (Operator::ContainsKey, CqlType::Map(k, _)) => Ok(k.as_ref().clone()),
        (Operator::Contains, CqlType::Map(_, v) | CqlType::List(v) | CqlType::Set(v)) => Ok(v.as_ref().clone()),
        (Operator::ContainsKey, _) => {
            Err(invalid(format!("Cannot use CONTAINS KEY on non-map column {}", column.name)))
        }
        _ => Err(invalid(format!("Cannot use CONTAINS on non-collection column {}", column.name))),
    }
}

/// A literal tuple of a multi-column relation: as many elements as
/// columns, none null (ScyllaDB's checks and texts).
fn check_tuple_literal(term: &Term, names: &[String], op: Operator, tuple_ty: &CqlType) -> CqlResult<()> {
    let Term::Tuple(items) = term else { return Ok(()) };
    if items.len() > names.len() && op == Operator::In {
        return Err(invalid(format!(
            "Invalid list literal for IN(({})): value {term} is not of type frozen<{tuple_ty}>",
            names.join(",")
        )));
    }
    if items.len() != names.len() {
        return Err(invalid(format!("Expected {} elements in value tuple, but got {}", names.len(), items.len())));
    }
    if let Some(i) = items.iter().position(|t| matches!(t, Term::Literal(crate::ast::Literal::Null))) {
        return Err(invalid(format!("Invalid null value in condition for column {}", names[i])));
    }
    Ok(())
}

/// The smallest byte string greater than every string starting with `key`.
fn successor(key: &[u8]) -> Option<Bytes> {
    let mut out = key.to_vec();
    while let Some(last) = out.pop() {
        if last < u8::MAX {
            out.push(last + 1);
            return Some(Bytes::from(out));
        }
    }
    None
}

fn cartesian(columns: Vec<Vec<Bytes>>) -> CqlResult<Vec<Vec<Bytes>>> {
    if columns.iter().all(|values| values.len() == 1) {
        // `=` on every column, the common case: the one combination.
        return Ok(vec![columns.into_iter().flatten().collect()]);
    }
    let mut combos: Vec<Vec<Bytes>> = vec![Vec::new()];
    for values in columns {
        if combos.len().saturating_mul(values.len()) > CARTESIAN_PRODUCT_MAX {
            return Err(invalid(format!(
                "IN restrictions produce more than {CARTESIAN_PRODUCT_MAX} key combinations; split the query"
            )));
        }
        combos = combos
            .iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut next = c.clone();
                    next.push(v.clone());
                    next
                })
            })
            .collect();
    }
    Ok(combos)
}

/// The fields of a serialized tuple; `None` if malformed or a field is null.
fn tuple_fields(tuple: &[u8], count: usize) -> Option<Vec<Bytes>> {
    let mut fields = Vec::with_capacity(count);
    let mut rest = tuple;
    for _ in 0..count {
        let len = usize::try_from(i32::from_be_bytes(rest.get(..4)?.try_into().ok()?)).ok()?;
        fields.push(Bytes::copy_from_slice(rest.get(4..4 + len)?));
        rest = &rest[4 + len..];
    }
    Some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_greater_than_a_key_without_successor() {
        let last = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]);
        let mut range = ClusteringRange::all();
        apply_bound(&mut range, last.clone(), Operator::Gt, false);
        assert!(range.is_empty());
        // Keys that extend it (a later clustering column) are not greater.
        assert!(!range.contains(&[0xff, 0xff, 0xff, 0xff, 0x01]));
        // Narrowing an empty range keeps it empty.
        apply_bound(&mut range, Bytes::from_static(&[0x01]), Operator::Ge, false);
        apply_bound(&mut range, Bytes::from_static(&[0x02]), Operator::Lt, false);
        assert!(range.is_empty());
        // `<=` it holds everything from below: no end bound.
        let mut range = ClusteringRange::all();
        apply_bound(&mut range, last, Operator::Le, false);
        assert_eq!(range, ClusteringRange::all());
    }

    fn table(text: &str) -> TableMeta {
        let Ok(crate::ast::Statement::CreateTable(create)) = crate::parser::parse_statement(text).map(|p| p.statement)
        else {
            panic!("not a create table: {text}")
        };
        crate::ddl::create_table("ks", &create).expect("a valid table")
    }

    /// The (b, c) keys of a 3x3 grid that `where_clause` selects, read in
    /// storage order through the ranges it becomes.
    fn selected(meta: &TableMeta, where_clause: &str) -> Vec<(i32, i32)> {
        let text = format!("SELECT * FROM t WHERE {where_clause}");
        let Ok(crate::ast::Statement::Select(select)) = crate::parser::parse_statement(&text).map(|p| p.statement)
        else {
            panic!("not a select: {text}")
        };
        let restrictions = analyze(meta, &select.where_clause, Bindings::NONE).expect("valid restrictions");
        let int = |v: i32| Bytes::copy_from_slice(&v.to_be_bytes());
        let mut keys: Vec<(Bytes, (i32, i32))> = (0..3)
            .flat_map(|b| (0..3).map(move |c| (b, c)))
            .map(|(b, c)| (meta.encode_clustering(&[int(b), int(c)]), (b, c)))
            .collect();
        keys.sort();
        keys.into_iter()
            .filter(|(key, _)| restrictions.clustering_ranges.iter().any(|r| r.contains(key)))
            .map(|(_, bc)| bc)
            .collect()
    }

    #[test]
    fn several_restrictions_on_one_key_column_intersect() {
        let meta = table("CREATE TABLE t (a int, b int, c int, PRIMARY KEY (a, b, c))");
        assert_eq!(selected(&meta, "a = 0 AND b = 1 AND b > 0"), [(1, 0), (1, 1), (1, 2)]);
        assert_eq!(selected(&meta, "a = 0 AND b > 0 AND b = 1"), [(1, 0), (1, 1), (1, 2)]);
        assert!(selected(&meta, "a = 0 AND b = 0 AND b > 0").is_empty());
        assert!(selected(&meta, "a = 0 AND b = 1 AND b = 2").is_empty());
        assert_eq!(selected(&meta, "a = 0 AND b IN (0, 1, 2) AND b IN (2, 0) AND b < 2"), [(0, 0), (0, 1), (0, 2)]);
        assert_eq!(selected(&meta, "a = 0 AND b = 1 AND c > 0 AND c >= 2"), [(1, 2)]);
        let where_clause = |text: &str| {
            let text = format!("SELECT * FROM t WHERE {text}");
            match crate::parser::parse_statement(&text).map(|p| p.statement) {
                Ok(crate::ast::Statement::Select(select)) => select.where_clause,
                _ => panic!("not a select: {text}"),
            }
        };
        let none = Bindings::NONE;
        let r = analyze(&meta, &where_clause("a = 0 AND b = 1 AND b >= 1"), none).expect("valid");
        assert!(!r.needs_filtering);
        let r = analyze(&meta, &where_clause("a = 0 AND a = 1"), none).expect("valid");
        assert!(matches!(r.partitions, PartitionRestriction::Keys(keys) if keys.is_empty()));
        let r = analyze(&meta, &where_clause("a IN (0, 1) AND a = 1"), none).expect("valid");
        assert!(matches!(r.partitions, PartitionRestriction::Keys(keys) if keys.len() == 1));
    }

    #[test]
    fn a_clustering_not_in_filters_one_partition_without_allow_filtering() {
        let meta = table("CREATE TABLE t (a int, b int, c int, v int, PRIMARY KEY (a, b, c))");
        let none = Bindings::NONE;
        let needs_filtering = |text: &str| {
            let text = format!("SELECT * FROM t WHERE {text}");
            match crate::parser::parse_statement(&text).map(|p| p.statement) {
                Ok(crate::ast::Statement::Select(s)) => {
                    analyze(&meta, &s.where_clause, none).expect("valid").needs_filtering
                }
                _ => panic!("not a select: {text}"),
            }
        };
        assert!(!needs_filtering("a = 0 AND c NOT IN (1, 2)"));
        assert!(!needs_filtering("a = 0 AND b = 1 AND c NOT IN (1)"));
        assert!(needs_filtering("c NOT IN (1, 2)"));
        assert!(needs_filtering("a = 0 AND v NOT IN (1, 2)"));
    }

    #[test]
    fn multi_column_slices_over_mixed_order_columns() {
        let meta = table(
            "CREATE TABLE t (a int, b int, c int, PRIMARY KEY (a, b, c)) WITH CLUSTERING ORDER BY (b ASC, c DESC)",
        );
        assert_eq!(selected(&meta, "a = 0 AND (b, c) > (1, 1)"), [(1, 2), (2, 2), (2, 1), (2, 0)]);
        assert_eq!(selected(&meta, "a = 0 AND (b, c) >= (1, 1)"), [(1, 2), (1, 1), (2, 2), (2, 1), (2, 0)]);
        assert_eq!(selected(&meta, "a = 0 AND (b, c) < (1, 1)"), [(0, 2), (0, 1), (0, 0), (1, 0)]);
        assert_eq!(selected(&meta, "a = 0 AND (b, c) <= (1, 1)"), [(0, 2), (0, 1), (0, 0), (1, 1), (1, 0)]);
        assert_eq!(
            selected(&meta, "a = 0 AND (b, c) > (0, 1) AND (b, c) <= (2, 1)"),
            [(0, 2), (1, 2), (1, 1), (1, 0), (2, 1), (2, 0)]
        );
        assert!(selected(&meta, "a = 0 AND (b, c) > (2, 0) AND (b, c) < (0, 0)").is_empty());
        let meta = table(
            "CREATE TABLE t (a int, b int, c int, PRIMARY KEY (a, b, c)) WITH CLUSTERING ORDER BY (b DESC, c ASC)",
        );
        assert_eq!(selected(&meta, "a = 0 AND (b, c) > (1, 1)"), [(2, 0), (2, 1), (2, 2), (1, 2)]);
        assert_eq!(selected(&meta, "a = 0 AND (b, c) <= (1, 1)"), [(1, 0), (1, 1), (0, 0), (0, 1), (0, 2)]);
    }
}
