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
//! Invariants:
//! - every view column has the name and type of a base column, except the
//!   liveness column;
//! - the view's primary key covers the base's primary key.

use std::sync::Arc;

use bytes::Bytes;
use uuid::Uuid;

use crate::index::{EntryKey, LIVENESS_COLUMN};
use crate::schema::{ColumnKind, KeyspaceMeta, TableMeta};

/// The definition of a materialized view, kept on its table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterializedView {
    /// The base table's id (`system_schema.views.base_table_id`).
    pub base_id: Uuid,
    /// Defined with `SELECT *`: columns added to the base join the view.
    pub include_all_columns: bool,
    /// The WHERE clause as CQL (`system_schema.views.where_clause`).
    pub where_clause: String,
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
        Some(ViewMapping { partition, clustering, key_column, payload })
    }

    /// The view key of the base row with partition key components
    /// `base_pk` and clustering values `base_ck`, whose key column (if the
    /// view has one) holds `value`.
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

/// Whether `column` of `table` is hidden from clients: a view's liveness
/// column.
pub fn is_hidden(table: &TableMeta, column: &str) -> bool {
    table.materialized.is_some() && column == LIVENESS_COLUMN
}

/// The materialized views of table `base` in `keyspace`.
pub fn views_of<'a>(keyspace: &'a KeyspaceMeta, base: &'a str) -> impl Iterator<Item = &'a Arc<TableMeta>> + 'a {
    keyspace.tables.values().filter(move |t| t.materialized.is_some() && t.view_of.as_deref() == Some(base))
}
