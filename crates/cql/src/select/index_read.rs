//! SELECTs served by a secondary index.
//!
//! An index serves a restriction on its column (`v = x`, `c CONTAINS x`,
//! `m CONTAINS KEY k`, `m[k] = x`, `l = [...]` for `full()`), which then
//! needs no ALLOW FILTERING. Where the partition key is restricted, the
//! partition is read and filtered as it is (the index saves nothing
//! there). Otherwise a global index turns the scan into a read of one view
//! partition, whose entries name base rows in the order a scan meets them
//! (token, partition key, clustering key), and then reads of those rows.
//!
//! The base reads keep every restriction of the statement, the indexed one
//! included, so an entry the base row no longer matches (a view update not
//! yet applied, or an index still being built) costs a read, never a wrong
//! row. Results, limits and paging states are those of the scan the index
//! replaces, so paging, aggregates and GROUP BY work unchanged.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shoal_coordinator::data::{ClusteringRange, PartitionPosition, PartitionSelection, ReadCommand, ReadResult};
use shoal_coordinator::ConsistencyLevel;
use shoal_schema::index::{entry_value, per_partition, value_type};
use shoal_schema::token::{murmur3_token, serialize_partition_key, split_partition_key};
use shoal_schema::{ColumnKind, CqlType, IndexKind, Schema, TableMeta};

use crate::ast::{Operator, Relation};
use crate::error::{invalid, CqlError, CqlResult};
use crate::restrictions::{position_of, PartitionRestriction, Restrictions};
use crate::values::{eval, eval_required, Bindings, BoundValue, Receiver};

/// View rows read per step.
const VIEW_PAGE_ROWS: usize = 1_000;

/// A restriction an index serves.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    /// The restricted column's index in the base table.
    pub column: usize,
    /// The index's name.
    pub index: String,
    /// The view read that replaces the scan; `None` where the partition
    /// key is restricted.
    pub scan: Option<IndexScan>,
}

#[derive(Debug, Clone)]
pub(crate) struct IndexScan {
    base: Arc<TableMeta>,
    view: Arc<TableMeta>,
    /// The view partition holding the entries; `None` for `= null`, which
    /// no row matches (ScyllaDB answers it with no rows, not an error).
    partition: Option<PartitionPosition>,
    /// The index holds one entry per base partition (a static column's).
    per_partition: bool,
}

/// The index serving one of `relations` on `meta`, if any.
pub(crate) fn choose(
    schema: &Schema,
    meta: &Arc<TableMeta>,
    relations: &[Relation],
    restrictions: &Restrictions,
    bindings: Bindings<'_>,
) -> CqlResult<Option<Served>> {
    if meta.indexes.is_empty() {
        return Ok(None);
    }
    let keyed = matches!(restrictions.partitions, PartitionRestriction::Keys(_));
    // The first restriction an index serves, in the statement's order; in
    // a restricted partition a local index first (ScyllaDB's order, which
    // paging relies on staying the same).
    let local = |relation: &&Relation| match relation {
        Relation::Simple { column, .. } | Relation::Element { column, .. } => {
            meta.indexes.iter().any(|i| i.local && &i.column == column)
        }
        _ => false,
    };
    let ordered: Vec<&Relation> = match keyed {
        true => relations.iter().filter(local).chain(relations.iter().filter(|r| !local(r))).collect(),
        false => relations.iter().collect(),
    };
    for relation in ordered {
        let (name, kind, value) = match relation {
            Relation::Simple { column, op: Operator::Eq, value } => {
                // full() indexes a frozen collection's whole value; a plain
                // index a frozen user type's or tuple's, as any other value.
                let frozen_collection = meta
                    .column(column)
                    .is_some_and(|c| matches!(&c.ty, CqlType::Frozen(inner) if inner.is_multi_cell()));
                (column, if frozen_collection { IndexKind::Full } else { IndexKind::Values }, value)
            }
            Relation::Simple { column, op: Operator::Contains, value } => (column, IndexKind::Values, value),
            Relation::Simple { column, op: Operator::ContainsKey, value } => (column, IndexKind::Keys, value),
            Relation::Element { column, op: Operator::Eq, value, .. } => (column, IndexKind::Entries, value),
            _ => continue,
        };
        let Some(index) = meta.indexes.iter().find(|i| &i.column == name && i.kind == kind) else { continue };
        // Relations name existing columns: restrictions were analyzed.
        let Some(column) = meta.column_index(name) else { continue };
        let column_meta = &meta.columns[column];
        let collection = column_meta.ty.is_multi_cell();
        if kind == IndexKind::Values
            && collection != matches!(relation, Relation::Simple { op: Operator::Contains, .. })
        {
            continue;
        }
        if index.local && !keyed {
            continue;
        }
        // In a restricted partition an index on a partition key column has
        // nothing left to narrow; one on another restricted column serves
        // (ScyllaDB uses no partition key index once the key is restricted).
        if keyed && column_meta.kind == ColumnKind::PartitionKey {
            continue;
        }
        // Nor one on a clustering column whose restrictions already form
        // a prefix the read selects by range: ScyllaDB indexes clustering
        // restrictions only when they would otherwise need filtering.
        let clustering_filtered =
            || restrictions.filters.iter().any(|f| meta.columns[f.column].kind == ColumnKind::Clustering);
        if keyed && column_meta.kind == ColumnKind::Clustering && !clustering_filtered() {
            continue;
        }
        if keyed {
            return Ok(Some(Served { column, index: index.name.clone(), scan: None }));
        }
        let Some(view) = schema.keyspace(&meta.keyspace).and_then(|k| k.tables.get(&index.view_name())) else {
            continue;
        };
        let Some(value_ty) = value_type(&column_meta.ty, kind) else { continue };
        let indexed = match relation {
            Relation::Element { key, value, .. } => {
                let CqlType::Map(key_ty, value_ty) = column_meta.ty.unfrozen() else { continue };
                let key = eval_required(key, Receiver { name: name.as_str(), ty: key_ty }, bindings)?;
                let value = eval_required(value, Receiver { name: name.as_str(), ty: value_ty }, bindings)?;
                Some(entry_value(&key, &value))
            }
            _ => match eval(value, Receiver { name: name.as_str(), ty: &value_ty }, bindings)? {
                BoundValue::Value(value) => Some(value),
                BoundValue::Null => None,
                BoundValue::Unset => return Err(invalid(format!("Invalid unset value for column {name}"))),
            },
        };
        // The empty value is indexed too: its view partition is the empty
        // key (which no base table may have), at the minimum token.
        let partition = indexed
            .map(|indexed| {
                let key = serialize_partition_key(&[&indexed[..]])
                    .map_err(|e| invalid(format!("Index expression value of {name} is too long: {e}")))?;
                let key = Bytes::from(key);
                Ok::<_, CqlError>(PartitionPosition { token: murmur3_token(&key), key })
            })
            .transpose()?;
        let scan = IndexScan {
            base: Arc::clone(meta),
            view: Arc::clone(view),
            partition,
            per_partition: per_partition(column_meta),
        };
        return Ok(Some(Served { column, index: index.name.clone(), scan: Some(scan) }));
    }
    Ok(None)
}

/// Whether the restrictions still need ALLOW FILTERING once `served`
/// answers the indexed one: when other row filters remain, when the
/// indexed column is restricted twice (`c CONTAINS 1 AND c CONTAINS 2`:
/// the index serves one), or when an index scan also restricts other
/// clustering columns (every entry's row must be checked; in a restricted
/// partition, when the indexed column is a clustering column), as Cassandra
/// and ScyllaDB count them.
pub(crate) fn needs_filtering(
    meta: &TableMeta,
    relations: &[Relation],
    restrictions: &Restrictions,
    served: &Served,
) -> bool {
    let on_served = restrictions.filters.iter().filter(|f| f.column == served.column).count();
    if restrictions.filters.iter().any(|f| f.column != served.column) || on_served > 1 {
        return true;
    }
    let served_name = &meta.columns[served.column].name;
    let other_clustering =
        |name: &String| name != served_name && meta.column(name).is_some_and(|c| c.kind == ColumnKind::Clustering);
    // Where the partition key is restricted, an index on a clustering
    // column saves nothing: the others must form a prefix with it.
    let served_clustering = meta.columns[served.column].kind == ColumnKind::Clustering;
    (served.scan.is_some() || served_clustering)
        && relations.iter().any(|relation| match relation {
            Relation::Simple { column, .. } | Relation::In { column, .. } => other_clustering(column),
            Relation::MultiColumn { columns, .. } | Relation::MultiColumnIn { columns, .. } => {
                columns.iter().any(other_clustering)
            }
            _ => false,
        })
}

/// What the scan `command` would return, read through the index.
pub(crate) async fn read(
    scan: &IndexScan,
    command: ReadCommand,
    consistency: ConsistencyLevel,
    timeout: Duration,
) -> CqlResult<ReadResult> {
    let mut out = ReadResult::default();
    let Some(partition) = &scan.partition else { return Ok(out) };
    let mut start = match &command.start_after {
        // A per-partition entry names the partition paging stopped inside:
        // read it again (the base read resumes after the row).
        Some(after) if scan.per_partition && after.clustering.is_some() => {
            Bound::Included(view_key(scan, &after.partition, None))
        }
        Some(after) => Bound::Excluded(view_key(scan, &after.partition, after.clustering.as_ref())),
        None => Bound::Unbounded,
    };
    loop {
        let mut view_read = ReadCommand::of_partitions(
            scan.view.id,
            vec![partition.clone()],
            vec![ClusteringRange { start: start.clone(), end: Bound::Unbounded }],
            command.now_s,
        );
        view_read.row_limit = VIEW_PAGE_ROWS;
        let entries = shoal_coordinator::read(view_read, consistency, timeout).await?;
        let mut targets: Vec<(PartitionPosition, Vec<Bytes>)> = Vec::new();
        for entry in &entries.rows {
            let Some((position, clustering)) = base_row(scan, &entry.clustering) else { continue };
            if !in_range(&command.partitions, &position) {
                continue;
            }
            if let Some(key) = &clustering {
                if !command.clustering.iter().any(|r| r.contains(key)) {
                    continue;
                }
            }
            match targets.last_mut() {
                Some((last, keys)) if *last == position => keys.extend(clustering),
                _ => targets.push((position, clustering.into_iter().collect())),
            }
        }
        for (position, keys) in targets {
            let mut base_read = command.clone();
            base_read.partitions = PartitionSelection::Keys(vec![position]);
            if !scan.per_partition {
                base_read.clustering = keys
                    .into_iter()
                    .map(|k| ClusteringRange { start: Bound::Included(k.clone()), end: Bound::Included(k) })
                    .collect();
            }
            base_read.row_limit = command.row_limit - out.rows.len();
            let result = shoal_coordinator::read(base_read, consistency, timeout).await?;
            out.rows.extend(result.rows);
            if out.rows.len() >= command.row_limit {
                out.limit_reached = true;
                return Ok(out);
            }
        }
        match entries.rows.last() {
            Some(last) if entries.limit_reached => {
                start = Bound::Excluded(scan.view.encode_clustering(&last.clustering));
            }
            _ => return Ok(out),
        }
    }
}

/// The base row an entry's view clustering key names: its partition and,
/// for a per-row index, its clustering key's encoding.
fn base_row(scan: &IndexScan, clustering: &[Bytes]) -> Option<(PartitionPosition, Option<Bytes>)> {
    let pk_len = scan.base.partition_key_len();
    // The view's clustering key: token, base partition key, base clustering.
    let pk = clustering.get(1..1 + pk_len)?;
    let position = position_of(pk).ok()?;
    let ck = clustering.get(1 + pk_len..)?;
    Some((position, (!scan.per_partition).then(|| scan.base.encode_clustering(ck))))
}

/// The view clustering key of the base row at `partition`, `clustering`.
fn view_key(scan: &IndexScan, partition: &PartitionPosition, clustering: Option<&Bytes>) -> Bytes {
    let mut prefix = vec![Bytes::copy_from_slice(&partition.token.to_be_bytes())];
    if let Ok(parts) = split_partition_key(scan.base.partition_key_len(), &partition.key) {
        prefix.extend(parts.into_iter().map(Bytes::copy_from_slice));
    }
    let mut key = scan.view.encode_clustering(&prefix).to_vec();
    // The view's clustering columns after the prefix are the base's, in
    // the base's order: the base encoding continues the view's.
    if let Some(clustering) = clustering.filter(|_| !scan.per_partition) {
        key.extend_from_slice(clustering);
    }
    Bytes::from(key)
}

fn in_range(selection: &PartitionSelection, position: &PartitionPosition) -> bool {
    match selection {
        PartitionSelection::Keys(keys) => keys.contains(position),
        PartitionSelection::Range { from, to } => (from.as_ref(), to.as_ref()).contains(position),
    }
}
