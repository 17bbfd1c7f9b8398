//! Materialized views: what a view is (its base, which base columns it
//! holds, its WHERE clause) and how a base row's values make a view row's
//! key.
//!
//! A view is a table of its own (`TableMeta` with `view_of` and
//! `materialized` set) whose primary key holds every primary key column of
//! its base and at most one other base column (Cassandra's rule: a base row
//! then gives at most one view row). Besides the selected columns, it has
//! the hidden liveness column of index views
//! ([`crate::index::LIVENESS_COLUMN`]): a view row is live exactly while an
//! element of it is, so a row whose key moved away leaves no live row
//! behind, whatever its other cells hold.
//!
//! A view's WHERE clause may also restrict base key columns and the base
//! regular column in the view's key (ScyllaDB's rule) beyond `IS NOT
//! NULL`: a base row outside the filter gives no view row. Base key
//! columns never change, so a row is in or out of the filter for good; the
//! key column's value can change, and a value outside the filter counts as
//! a null one (the row leaves the view, or never joins it).
//!
//! Invariants:
//! - every view column has the name and type of a base column, except the
//!   liveness column;
//! - the view's primary key covers the base's primary key;
//! - a filter restricts only base key columns and the view's key column.

use std::cmp::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use uuid::Uuid;

use crate::index::{EntryKey, LIVENESS_COLUMN};
use crate::schema::{ColumnKind, KeyspaceMeta, TableMeta};
use crate::types::CqlType;
use crate::value::compare;

/// The definition of a materialized view, kept on its table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterializedView {
    /// The base table's id (`system_schema.views.base_table_id`).
    pub base_id: Uuid,
    /// Defined with `SELECT *`: columns added to the base join the view.
    pub include_all_columns: bool,
    /// The WHERE clause as CQL (`system_schema.views.where_clause`).
    pub where_clause: String,
    /// The WHERE clause's restrictions other than `IS NOT NULL`.
    pub filter: Vec<ViewRestriction>,
}

/// How a restriction of a view's WHERE clause compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Equal to one of the values.
    In,
}

/// `columns op values`: one column, or (a multi-column relation) several
/// clustering columns compared as a tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewRestriction {
    pub columns: Vec<String>,
    pub op: Comparison,
    /// The value compared with, or the candidates of `In`: each one value
    /// per column.
    pub values: Vec<Vec<Bytes>>,
}

/// A restriction with its columns placed in a base row.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RowRestriction {
    columns: Vec<(KeySource, CqlType)>,
    op: Comparison,
    values: Vec<Vec<Bytes>>,
}

impl RowRestriction {
    /// Whether the row whose columns `pick` gives passes.
    fn matches<'v>(&self, pick: impl Fn(KeySource) -> Option<&'v Bytes>) -> bool {
        let Some(row) = self.columns.iter().map(|(source, _)| pick(*source)).collect::<Option<Vec<_>>>() else {
            return false;
        };
        let order = |wanted: &[Bytes]| {
            let pairs = self.columns.iter().zip(&row).zip(wanted);
            pairs.map(|(((_, ty), have), want)| compare(ty.unfrozen(), have, want)).find(|o| o.is_ne())
        };
        let first = || order(self.values.first().map_or(&[][..], |v| &v[..])).unwrap_or(Ordering::Equal);
        match self.op {
            Comparison::Eq => first() == Ordering::Equal,
            Comparison::Ne => first() != Ordering::Equal,
            Comparison::Lt => first() == Ordering::Less,
            Comparison::Le => first() != Ordering::Greater,
            Comparison::Gt => first() == Ordering::Greater,
            Comparison::Ge => first() != Ordering::Less,
            Comparison::In => self.values.iter().any(|v| order(v).is_none()),
        }
    }

    fn on_key_column(&self) -> bool {
        self.columns.iter().any(|(source, _)| *source == KeySource::Regular)
    }
}

/// Where a view key column's value comes from in a base row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeySource {
    BasePartition(usize),
    BaseClustering(usize),
    /// The base regular column in the view's key.
    Regular,
}

/// How the rows of a base table map to the rows of one of its views.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewMapping {
    partition: Vec<KeySource>,
    clustering: Vec<KeySource>,
    /// The base regular column in the view's primary key, if any.
    pub key_column: Option<String>,
    /// `(base column id, view column id)` of each selected non-key column.
    pub payload: Vec<(u32, u32)>,
    /// The view's filter.
    filter: Vec<RowRestriction>,
}

impl ViewMapping {
    /// The mapping of `base`'s rows to those of `view`; `None` where a view
    /// column is not in the base (a schema the DDL would not make).
    pub fn new(base: &TableMeta, view: &TableMeta) -> Option<ViewMapping> {
        let mut key_column = None;
        let mut source = |name: &str| -> Option<KeySource> {
            let column = base.column(name)?;
            let position = usize::try_from(column.position).ok();
            Some(match column.kind {
                ColumnKind::PartitionKey => KeySource::BasePartition(position?),
                ColumnKind::Clustering => KeySource::BaseClustering(position?),
                ColumnKind::Regular | ColumnKind::Static => {
                    key_column = Some(name.to_string());
                    KeySource::Regular
                }
            })
        };
        let partition = view.partition_key().map(|c| source(&c.name)).collect::<Option<Vec<_>>>()?;
        let clustering = view.clustering_key().map(|c| source(&c.name)).collect::<Option<Vec<_>>>()?;
        let payload = view
            .columns
            .iter()
            .filter(|c| !c.kind.is_primary_key() && c.name != LIVENESS_COLUMN)
            .map(|c| Some((base.column(&c.name)?.id, c.id)))
            .collect::<Option<Vec<_>>>()?;
        let restrictions = view.materialized.as_ref().map_or(&[][..], |m| &m.filter[..]);
        let filter = restrictions.iter().map(|r| restriction(base, r)).collect::<Option<Vec<_>>>()?;
        Some(ViewMapping { partition, clustering, key_column, payload, filter })
    }

    /// Whether the base row with partition key components `base_pk` and
    /// clustering values `base_ck` passes the filter's restrictions on
    /// base key columns (its rows never give view rows otherwise).
    pub fn key_matches(&self, base_pk: &[Bytes], base_ck: &[Bytes]) -> bool {
        self.filter.iter().filter(|r| !r.on_key_column()).all(|r| {
            r.matches(|source| match source {
                KeySource::BasePartition(i) => base_pk.get(i),
                KeySource::BaseClustering(i) => base_ck.get(i),
                KeySource::Regular => None,
            })
        })
    }

    /// Whether `value` of the view's key column passes the filter's
    /// restrictions on it (a value that does not gives no view row, as a
    /// null would not).
    pub fn value_matches(&self, value: &Bytes) -> bool {
        self.filter.iter().filter(|r| r.on_key_column()).all(|r| r.matches(|_| Some(value)))
    }

    /// The view key of the base row with partition key components
    /// `base_pk` and clustering values `base_ck`, whose key column (if the
    /// view has one) holds `value`.
    /// Whether `value` of the regular key column can key a view row: within
    /// the 64 KiB a key component holds, and, if empty, where the view can
    /// place it: in its partition key (ScyllaDB keeps a base row's empty
    /// text under the empty view key) or in a clustering column whose type
    /// orders the empty value.
    pub fn can_key(&self, view: &TableMeta, value: &[u8]) -> bool {
        if value.len() > usize::from(u16::MAX) {
            return false;
        }
        if !value.is_empty() || self.partition.iter().any(|s| matches!(s, KeySource::Regular)) {
            return true;
        }
        view.clustering_key().zip(&self.clustering).any(|(column, source)| {
            matches!(source, KeySource::Regular) && crate::comparable::encodes_empty(&column.ty)
        })
    }

    pub fn entry_key(&self, view: &TableMeta, value: &Bytes, base_pk: &[Bytes], base_ck: &[Bytes]) -> EntryKey {
        let pick = |source: &KeySource| match source {
            KeySource::BasePartition(i) => base_pk.get(*i).cloned().unwrap_or_default(),
            KeySource::BaseClustering(i) => base_ck.get(*i).cloned().unwrap_or_default(),
            KeySource::Regular => value.clone(),
        };
        let partition: Vec<Bytes> = self.partition.iter().map(pick).collect();
        let clustering: Vec<Bytes> = self.clustering.iter().map(pick).collect();
        let clustering_encoded = view.encode_clustering(&clustering);
        EntryKey { partition, clustering, clustering_encoded }
    }
}

/// `restriction` with its columns placed in `base`'s rows; `None` where a
/// column is not a base key column or a regular one.
fn restriction(base: &TableMeta, restriction: &ViewRestriction) -> Option<RowRestriction> {
    let place = |name: &String| {
        let column = base.column(name)?;
        let position = usize::try_from(column.position).ok();
        let source = match column.kind {
            ColumnKind::PartitionKey => KeySource::BasePartition(position?),
            ColumnKind::Clustering => KeySource::BaseClustering(position?),
            ColumnKind::Regular => KeySource::Regular,
            ColumnKind::Static => return None,
        };
        Some((source, column.ty.clone()))
    };
    let columns = restriction.columns.iter().map(place).collect::<Option<Vec<_>>>()?;
    Some(RowRestriction { columns, op: restriction.op, values: restriction.values.clone() })
}

/// Whether `column` of `table` is hidden from clients: a view's liveness
/// column.
pub fn is_hidden(table: &TableMeta, column: &str) -> bool {
    table.materialized.is_some() && column == LIVENESS_COLUMN
}

/// The materialized views of table `base` in `keyspace`.
pub fn views_of<'a>(keyspace: &'a KeyspaceMeta, base: &'a str) -> impl Iterator<Item = &'a Arc<TableMeta>> + 'a {
    keyspace.tables.values().filter(move |t| t.materialized.is_some() && t.view_of.as_deref() == Some(base))
}
