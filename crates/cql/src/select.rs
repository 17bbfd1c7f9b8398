//! SELECT: from a statement to a read command, and from the rows read to
//! the result clients see (selectors, aggregates, paging).
//!
//! Paging: a page reads at most `page_size` rows, and ends early past 1 MiB
//! of row data or once its replicas passed `query_tombstone_page_limit`
//! tombstones (then with fewer rows, maybe none); when the read stopped at
//! a limit, the result carries a paging state naming where it stopped (the
//! last row, or the position the tombstones reached) and the rows left of
//! the statement's LIMIT, and the next page resumes after it. Unpaged
//! reads, and the pages a statement reads internally (aggregates, GROUP
//! BY, ORDER BY after the read, index reads), pass tombstones unlimited,
//! as in ScyllaDB.
//! GROUP BY queries page by groups (see `group_by`).

mod aggregate;
mod group_by;
mod index_read;
mod post_order;

use std::future::Future;
use std::ops::Bound;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use shoal_coordinator::data::{ClusteringRange, PartitionPosition};
use shoal_coordinator::data::{PartitionSelection, ReadCommand, ReadResult, ResultRow, RowPosition};
use shoal_coordinator::{timeouts, ConsistencyLevel};
use shoal_schema::arithmetic::{self, NumericOp};
use shoal_schema::temporal_arithmetic;
use shoal_schema::token::split_partition_key;
use shoal_schema::value::compare;
use shoal_schema::{cast, collection, fields, Value};
use shoal_schema::{ClusteringOrder, ColumnKind, CqlType, Schema, TableMeta};
use uuid::Uuid;

use crate::ast::{operation_text, InValues, Literal, Operator, Order, Relation, Select, Selection, SelectorExpr, Term};
use crate::error::{invalid, CqlError, CqlResult};
use crate::live_config;
use crate::restrictions::{analyze, clustering_filtering_error, EqPlan, PartitionRestriction};
use crate::result::{ColumnSpec, Rows};
use crate::system;
use crate::term_operations::{self, concatenation_type, operate};
use crate::user_functions::{self, Callee};
use crate::values::{collection_items, eval, eval_required, Bindings, BoundValue, Receiver};
use crate::{format_fcts, functions};

const PAGING_STATE_VERSION: u8 = 2;
/// Row data past which a page ends early (ScyllaDB's 1 MiB).
const PAGE_BYTES: usize = 1 << 20;

/// Where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PagingState {
    /// The last row returned (for GROUP BY, the last row of the last group).
    position: RowPosition,
    /// Rows (or groups) left of the statement's LIMIT.
    remaining: usize,
    /// Rows (groups for GROUP BY) already returned from `position`'s
    /// partition, counted against PER PARTITION LIMIT.
    in_partition: usize,
    /// `position` lies just before its clustering key, which is still to
    /// read (a page that stopped on a range tombstone's bound).
    at_key: bool,
}

/// One output column's computation.
#[derive(Debug, Clone)]
enum Sel {
    Column(usize),
    WriteTime(usize),
    Ttl(usize),
    /// The write time (or TTL left) of the element `key` of the non-frozen
    /// map or set in `column`, or of a non-frozen user type's field cell;
    /// null for a null key or an absent element.
    ElementStamp {
        column: usize,
        key: Option<Bytes>,
        ttl: bool,
    },
    Function {
        name: String,
        arg_types: Vec<CqlType>,
        args: Vec<Sel>,
    },
    Literal(Option<Bytes>),
    /// Field `index` of a user type value.
    Field {
        value: Box<Sel>,
        index: usize,
    },
    /// `left op right`, computed in `ty` (`arithmetic::result_type`).
    Arithmetic {
        op: NumericOp,
        left: Box<Sel>,
        right: Box<Sel>,
        types: (CqlType, CqlType),
        ty: CqlType,
    },
    /// `CAST(value AS to)`, `value` of type `from` ([`cast::supported`]).
    Cast {
        value: Box<Sel>,
        from: CqlType,
        to: CqlType,
    },
    /// `value[key]` of a collection of type `collection` (unfrozen); a
    /// null key selects null.
    Element {
        value: Box<Sel>,
        collection: CqlType,
        key: Option<Bytes>,
    },
    /// `value[from..to]` of a map or set of type `collection` (unfrozen).
    Slice {
        value: Box<Sel>,
        collection: CqlType,
        from: Option<Bytes>,
        to: Option<Bytes>,
    },
    Aggregate {
        kind: AggregateKind,
        arg: Option<Box<Sel>>,
        ty: CqlType,
    },
    /// A call of a user-defined function (`user_functions`).
    UserFunction {
        function: Arc<shoal_schema::UserFunction>,
        args: Vec<Sel>,
    },
    /// A user-defined aggregate over `args`.
    UserAggregate {
        aggregate: Arc<user_functions::Aggregate>,
        args: Vec<Sel>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AggregateKind {
    Count,
    Min,
    Max,
    Sum,
    Avg,
}

pub struct SelectOptions<'a> {
    pub bindings: Bindings<'a>,
    pub page_size: Option<usize>,
    pub paging_state: Option<Bytes>,
    pub now_s: i64,
    pub consistency: ConsistencyLevel,
    pub trace: Option<&'a crate::traces::SharedTrace>,
    /// `USING TIMEOUT`, in place of the node's read timeouts.
    pub timeout: Option<std::time::Duration>,
}

/// A SELECT resolved against one schema version, once: its table, result
/// columns (shared by every execution's result), selectors, grouping and,
/// for key-equality WHERE clauses, the compiled restrictions. A prepared
/// SELECT keeps it, so EXECUTE only binds and validates values.
#[derive(Debug)]
pub struct CompiledSelect {
    pub schema_version: Uuid,
    pub meta: Arc<TableMeta>,
    pub columns: Arc<[ColumnSpec]>,
    sels: Vec<Sel>,
    /// Without GROUP BY, aggregates make one group of every row; selectors
    /// beside them take the first row's values, as in Cassandra.
    aggregate: bool,
    grouping: Option<group_by::Grouping>,
    plan: Option<EqPlan>,
    /// The selectors hold bind markers (`m[?]`): each execution resolves
    /// them again with its values.
    rebind: bool,
}

/// Resolves `select` (on table `meta` of `schema`) for execution.
pub fn compile(schema: &Schema, meta: Arc<TableMeta>, select: &Select) -> CqlResult<CompiledSelect> {
    if select.without_from && select.selection == Selection::Wildcard {
        return Err(invalid("SELECT * needs a FROM clause: without one, only constants and functions are selected"));
    }
    let selected = selectors(&meta, select, None)?;
    let rebind = match &select.selection {
        Selection::Selectors(list) => list.iter().any(|s| has_markers(&s.expr)),
        Selection::Wildcard => false,
    };
    let (columns, sels): (Vec<ColumnSpec>, Vec<Sel>) = selected.into_iter().unzip();
    let aggregate = sels.iter().any(aggregate::has_aggregate);
    let grouping = group_by::grouping(&meta, select)?;
    if select.per_partition_limit.is_some() {
        if select.distinct {
            return Err(invalid("PER PARTITION LIMIT is not allowed with SELECT DISTINCT queries"));
        }
        if aggregate && grouping.is_none() {
            return Err(invalid("PER PARTITION LIMIT is not allowed with aggregate queries."));
        }
    }
    crate::restrictions::check_token_relations(&meta, &select.where_clause)?;
    let plan = EqPlan::compile(&meta, &select.where_clause);
    Ok(CompiledSelect {
        schema_version: schema.version,
        columns: columns.into(),
        sels,
        aggregate,
        grouping,
        plan,
        rebind,
        meta,
    })
}

pub async fn execute(
    compiled: &CompiledSelect,
    schema: Arc<Schema>,
    select: &Select,
    options: SelectOptions<'_>,
) -> CqlResult<Rows> {
    let CompiledSelect { meta, sels, aggregate, grouping, plan, rebind, .. } = compiled;
    let rebound: Vec<Sel>;
    let sels = match *rebind {
        true => {
            rebound = selectors(meta, select, Some(options.bindings))?.into_iter().map(|(_, sel)| sel).collect();
            &rebound
        }
        false => sels,
    };
    let (aggregate, grouping) = (*aggregate, *grouping);
    let columns = Arc::clone(&compiled.columns);
    let (mut command, index) = read_command(&schema, meta, select, plan.as_ref(), options.bindings, options.now_s)?;
    if let (Some(trace), Some(served)) = (options.trace, &index) {
        // ScyllaDB's words, which tools and tests look for.
        trace.borrow_mut().event(format!("Consulting index {} for a single slice of keys", served.index));
    }
    let index_scan = index.and_then(|served| served.scan);
    let limit = limit(select.limit.as_ref(), "LIMIT", options.bindings)?.unwrap_or(usize::MAX);
    let state = options.paging_state.as_ref().map(decode_paging_state).transpose()?;
    let virtual_table = match system::is_system_keyspace(&meta.keyspace) {
        true => Some(Box::pin(system::contents(meta, &schema)).await?),
        false => None,
    };
    let consistency = options.consistency;
    let timeout = options.timeout.unwrap_or(match command.partitions {
        PartitionSelection::Keys(_) => timeouts().read,
        PartitionSelection::Range { .. } => timeouts().range,
    });
    // The rare ways (a virtual table, an index) and the rare shapes
    // (GROUP BY, ORDER BY after the read) are boxed: a future is as large
    // as its largest branch, and this one is moved several times per
    // request, so an inline index read made every point read copy its state.
    let read = |command: ReadCommand| {
        let virtual_table = virtual_table.as_ref();
        let index_scan = index_scan.as_ref();
        async move {
            match (virtual_table, index_scan) {
                (Some(table), _) => Box::pin(table.read(&command)).await.map_err(|e| CqlError::Server(e.to_string())),
                (None, Some(scan)) => Box::pin(index_read::read(scan, command, consistency, timeout)).await,
                (None, None) => Ok(shoal_coordinator::read(command, consistency, timeout).await?),
            }
        }
    };
    let read = |command: ReadCommand| in_key_order(command, &read);
    if let Some(grouping) = grouping {
        let query = group_by::GroupedQuery {
            meta,
            sels,
            grouping,
            page_size: options.page_size.unwrap_or(usize::MAX),
            remaining: state.as_ref().map_or(limit, |s| s.remaining),
            per_partition_limit: command.per_partition_limit,
        };
        let (rows, paging_state) = Box::pin(group_by::execute(query, command, state, read)).await?;
        return Ok(Rows { columns, rows, paging_state: paging_state.as_ref().map(encode_paging_state) });
    }
    let remaining = state.as_ref().map_or(limit, |s| s.remaining);
    command.start_partition_rows = state.as_ref().map_or(0, |s| s.in_partition);
    command.start_at_key = state.as_ref().is_some_and(|s| s.at_key);
    command.start_after = state.map(|s| s.position);
    if aggregate {
        // Folded page by page: the rows are never all in memory.
        let mut folds = aggregate::Folds::new(sels)?;
        command.row_limit = live_config::select_internal_page_size();
        loop {
            let page = read(command.clone()).await?;
            command.start_partition_rows = rows_in_last_partition(&page.rows, &command);
            command.start_after = page.rows.last().map(|r| r.position.clone());
            page.rows.iter().try_for_each(|row| folds.add(meta, row))?;
            if !page.limit_reached {
                break;
            }
        }
        return Ok(Rows { columns, rows: vec![folds.finish()?], paging_state: None });
    }
    let (rows, paging_state) = if post_order::needed(meta, select) {
        (Box::pin(post_order::read(meta, &select.order_by, command, remaining, options.page_size, read)).await?, None)
    } else {
        if options.page_size.is_some() && virtual_table.is_none() && index_scan.is_none() {
            command.tombstone_limit = live_config::query_tombstone_page_limit();
        }
        read_page(command, remaining, options.page_size, read).await?
    };
    let out = rows.iter().map(|row| sels.iter().map(|s| evaluate(meta, s, row)).collect()).collect::<CqlResult<_>>()?;
    Ok(Rows { columns, rows: out, paging_state })
}

/// Reads the partitions of a command naming several keys one after the
/// other, in the order of its keys (the IN values' order, which
/// `restrictions` sorts), as Cassandra and ScyllaDB return them — not in
/// ring order. A paging position names the key to resume in.
async fn in_key_order<F, Fut>(command: ReadCommand, read: &F) -> CqlResult<ReadResult>
where
    F: Fn(ReadCommand) -> Fut,
    Fut: Future<Output = CqlResult<ReadResult>>,
{
    let keys = match &command.partitions {
        PartitionSelection::Keys(keys) if keys.len() > 1 => keys.clone(),
        _ => return read(command).await,
    };
    let first = match &command.start_after {
        Some(after) => keys.iter().position(|k| *k == after.partition).unwrap_or(0),
        None => 0,
    };
    let count = keys.len();
    let mut out = ReadResult::default();
    for (i, key) in keys.into_iter().enumerate().skip(first) {
        let mut one = ReadCommand {
            partitions: PartitionSelection::Keys(vec![key]),
            row_limit: command.row_limit.saturating_sub(out.rows.len()),
            ..command.clone()
        };
        if i != first {
            one.start_after = None;
            one.start_at_key = false;
            one.start_partition_rows = 0;
        }
        let page = read(one).await?;
        out.rows.extend(page.rows);
        if page.short.is_some() {
            out.short = page.short;
            out.limit_reached = true;
            break;
        }
        if out.rows.len() >= command.row_limit {
            out.limit_reached = page.limit_reached || i + 1 < count;
            break;
        }
    }
    Ok(out)
}

/// One page of at most `page_size` of the `remaining` rows of `command`,
/// and the paging state to resume after it when rows are left.
async fn read_page<F, Fut>(
    mut command: ReadCommand,
    remaining: usize,
    page_size: Option<usize>,
    read: F,
) -> CqlResult<(Vec<ResultRow>, Option<Bytes>)>
where
    F: Fn(ReadCommand) -> Fut,
    Fut: Future<Output = CqlResult<ReadResult>>,
{
    let page_rows = page_size.unwrap_or(usize::MAX).min(remaining);
    if page_rows == 0 {
        return Ok((Vec::new(), None));
    }
    command.row_limit = page_rows;
    let ReadResult { mut rows, limit_reached, short } = read(command.clone()).await?;
    let full = limit_reached && rows.len() == page_rows;
    let cut = page_size.is_some() && cut_at_page_bytes(&mut rows);
    let left = remaining - rows.len();
    let stop = match short {
        // The tombstones stopped the read at or past its last row.
        Some(short) if !cut => Some((short.position, short.at_key)),
        _ if full || cut => rows.last().map(|last| (last.position.clone(), false)),
        _ => None,
    };
    let paging_state = match stop {
        Some((position, at_key)) if left > 0 => {
            let in_partition = rows_in_partition(&rows, &command, &position);
            Some(encode_paging_state(&PagingState { position, remaining: left, in_partition, at_key }))
        }
        _ => None,
    };
    Ok((rows, paging_state))
}

/// Ends a page past [`PAGE_BYTES`] of row data, whatever its row count,
/// as ScyllaDB does (a page of 5,000 rows of 1 MiB values would be 5 GB);
/// the row that crosses the mark stays. Whether rows were dropped.
fn cut_at_page_bytes(rows: &mut Vec<ResultRow>) -> bool {
    let mut bytes = 0;
    let size = |row: &ResultRow| {
        row.clustering.iter().map(Bytes::len).sum::<usize>()
            + row.cells.iter().flatten().map(|c| c.value.len()).sum::<usize>()
    };
    match rows.iter().position(|row| {
        bytes += size(row);
        bytes > PAGE_BYTES
    }) {
        Some(last) if last + 1 < rows.len() => {
            rows.truncate(last + 1);
            true
        }
        _ => false,
    }
}

/// How many rows of the last row's partition have been returned once `rows`
/// (read by `command`) are: those in `rows`, plus the earlier pages' when
/// `rows` all lie in the partition the command resumed in.
fn rows_in_last_partition(rows: &[ResultRow], command: &ReadCommand) -> usize {
    let Some(last) = rows.last() else { return command.start_partition_rows };
    rows_in_partition(rows, command, &last.position)
}

/// How many rows of `stop`'s partition have been returned once `rows`
/// (read by `command`, all at or before `stop`) are.
fn rows_in_partition(rows: &[ResultRow], command: &ReadCommand, stop: &RowPosition) -> usize {
    let here = rows.iter().rev().take_while(|r| r.position.partition == stop.partition).count();
    match &command.start_after {
        Some(start) if here == rows.len() && start.partition == stop.partition => command.start_partition_rows + here,
        _ => here,
    }
}

/// A LIMIT or PER PARTITION LIMIT; an unset bind value means none, as in
/// Cassandra.
fn limit(term: Option<&Term>, what: &str, bindings: Bindings<'_>) -> CqlResult<Option<usize>> {
    let Some(term) = term else { return Ok(None) };
    let name = format!("[{}]", what.to_ascii_lowercase());
    let value = match eval(term, Receiver { name: &name, ty: &CqlType::Int }, bindings)? {
        BoundValue::Value(value) => value,
        BoundValue::Unset => return Ok(None),
        BoundValue::Null => return Err(invalid(format!("Invalid null value of {}", what.to_ascii_lowercase()))),
    };
    let n = i32::from_be_bytes(value[..].try_into().map_err(|_| invalid(format!("Invalid {what}")))?);
    if n <= 0 {
        return Err(invalid(format!("{what} must be strictly positive")));
    }
    Ok(Some(n as usize))
}

/// The read `select` makes, and the index that serves it, if one does.
fn read_command(
    schema: &Schema,
    meta: &Arc<TableMeta>,
    select: &Select,
    plan: Option<&EqPlan>,
    bindings: Bindings<'_>,
    now_s: i64,
) -> CqlResult<(ReadCommand, Option<index_read::Served>)> {
    let restrictions = match plan {
        Some(plan) => plan.restrictions(meta, bindings)?,
        None => analyze(meta, &select.where_clause, bindings)?,
    };
    let index = match plan {
        Some(_) => None,
        None => index_read::choose(schema, meta, &select.where_clause, &restrictions, bindings)?,
    };
    let needs_filtering = match &index {
        Some(served) => index_read::needs_filtering(meta, &select.where_clause, &restrictions, served),
        None => restrictions.needs_filtering,
    };
    let system = system::is_system_keyspace(&meta.keyspace);
    if needs_filtering && !select.allow_filtering && !system {
        if let Some(e) = index.is_none().then(|| clustering_filtering_error(meta, &select.where_clause)).flatten() {
            return Err(e);
        }
        return Err(invalid("Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING"));
    }
    if !select.order_by.is_empty() && matches!(restrictions.partitions, PartitionRestriction::TokenRange { .. }) {
        return Err(invalid("ORDER BY is only supported when the partition key is restricted by an EQ or an IN."));
    }
    let partitions = match restrictions.partitions {
        PartitionRestriction::Keys(keys) => PartitionSelection::Keys(keys),
        PartitionRestriction::TokenRange { from, to } => {
            PartitionSelection::Range { from: token_start(from), to: token_end(to) }
        }
    };
    if select.distinct && matches!(partitions, PartitionSelection::Range { .. }) {
        check_distinct_selects_the_key(meta, select)?;
    }
    if select.distinct && !distinct_restrictable(meta, &select.where_clause) {
        return Err(invalid(
            "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns.",
        ));
    }
    let reversed = ordering_reversed(meta, select)?;
    let command = ReadCommand {
        table: meta.id,
        partitions,
        clustering: read_ranges(restrictions.clustering_ranges, restrictions.clustering_restricted),
        reversed,
        filters: restrictions.filters,
        distinct: select.distinct,
        row_limit: usize::MAX,
        per_partition_limit: limit(select.per_partition_limit.as_ref(), "PER PARTITION LIMIT", bindings)?
            .unwrap_or(usize::MAX),
        start_after: None,
        start_partition_rows: 0,
        now_s,
        bypass_cache: select.bypass_cache,
        start_at_key: false,
        tombstone_limit: usize::MAX,
    };
    Ok((command, index))
}

/// The clustering ranges a read asks for. A read of `[all()]` also
/// returns a partition's static row when it has no live rows, as a query
/// without clustering restrictions must; a restricted one must not, even
/// when its range holds every key (`c <= 2147483647`): that range starts
/// at the empty key, which sorts before every key, instead. No range at
/// all means the restrictions exclude every row.
fn read_ranges(ranges: Vec<ClusteringRange>, restricted: bool) -> Vec<ClusteringRange> {
    if ranges.is_empty() {
        return vec![ClusteringRange { start: Bound::Excluded(Bytes::new()), end: Bound::Excluded(Bytes::new()) }];
    }
    if restricted && ClusteringRange::is_whole(&ranges) {
        return vec![ClusteringRange { start: Bound::Included(Bytes::new()), end: Bound::Unbounded }];
    }
    ranges
}

/// Partitions with token > t begin at (t + 1, empty key): the empty key
/// sorts first among a token's partitions.
fn token_start(bound: Bound<i64>) -> Bound<PartitionPosition> {
    let at = |token: i64| PartitionPosition { token, key: Bytes::new() };
    match bound {
        Bound::Included(t) => Bound::Included(at(t)),
        Bound::Excluded(t) => t.checked_add(1).map_or(Bound::Excluded(at(i64::MAX)), |t| Bound::Included(at(t))),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn token_end(bound: Bound<i64>) -> Bound<PartitionPosition> {
    let at = |token: i64| PartitionPosition { token, key: Bytes::new() };
    match bound {
        Bound::Included(t) => t.checked_add(1).map_or(Bound::Unbounded, |t| Bound::Excluded(at(t))),
        Bound::Excluded(t) => Bound::Excluded(at(t)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn ordering_reversed(meta: &TableMeta, select: &Select) -> CqlResult<bool> {
    let clustering: Vec<_> = meta.clustering_key().collect();
    if let Some((name, _)) = select.order_by.iter().find(|(name, _)| !clustering.iter().any(|c| &c.name == name)) {
        return Err(invalid(format!(
            "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got {name}"
        )));
    }
    // ORDER BY may skip clustering columns restricted to one value
    // (CASSANDRA-10271): within them the order is the next column's.
    let single_valued = |name: &str| {
        select.where_clause.iter().any(|relation| match relation {
            Relation::Simple { column, op: Operator::Eq, .. } => column == name,
            Relation::In { column, values: InValues::Terms(values) } => values.len() == 1 && column == name,
            Relation::MultiColumn { columns, op: Operator::Eq, .. } => columns.iter().any(|c| c == name),
            Relation::MultiColumnIn { columns, values: InValues::Terms(values) } => {
                values.len() == 1 && columns.iter().any(|c| c == name)
            }
            _ => false,
        })
    };
    let mut next = 0;
    let mut reversed = None;
    for (name, order) in &select.order_by {
        while clustering.get(next).is_some_and(|c| &c.name != name && single_valued(&c.name)) {
            next += 1;
        }
        let column = clustering.get(next).filter(|c| &c.name == name).ok_or_else(|| {
            invalid(format!("Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY ({name})"))
        })?;
        next += 1;
        let natural = if column.order == ClusteringOrder::Desc { Order::Desc } else { Order::Asc };
        let this = *order != natural;
        if reversed.is_some_and(|r| r != this) {
            return Err(invalid("Unsupported order by relation"));
        }
        reversed = Some(this);
    }
    Ok(reversed.unwrap_or(false))
}

fn spec(meta: &TableMeta, name: String, ty: CqlType) -> ColumnSpec {
    ColumnSpec { keyspace: meta.keyspace.clone(), table: meta.name.clone(), name, ty }
}

fn selectors(meta: &TableMeta, select: &Select, binds: Binds<'_>) -> CqlResult<Vec<(ColumnSpec, Sel)>> {
    let list = match &select.selection {
        Selection::Wildcard => {
            return Ok(meta
                .columns
                .iter()
                .enumerate()
                .filter(|(_, c)| !select.distinct || matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Static))
                .filter(|(_, c)| !shoal_schema::view::is_hidden(meta, &c.name))
                .map(|(i, c)| (spec(meta, c.name.clone(), c.ty.clone()), Sel::Column(i)))
                .collect())
        }
        Selection::Selectors(list) => list,
    };
    list.iter()
        .map(|selector| {
            let (name, ty, sel) = selector_expr(meta, &selector.expr, binds)?;
            if select.distinct {
                if let Sel::Column(i) = sel {
                    if !matches!(meta.columns[i].kind, ColumnKind::PartitionKey | ColumnKind::Static) {
                        return Err(invalid(format!("SELECT DISTINCT queries must only request partition key columns and/or static columns (not {name})")));
                    }
                }
            }
            Ok((spec(meta, selector.alias.clone().unwrap_or(name), ty), sel))
        })
        .collect()
}

/// A SELECT DISTINCT over a range of partitions selects every partition
/// key column (Cassandra's rule, so rows need no grouping afterwards).
fn check_distinct_selects_the_key(meta: &TableMeta, select: &Select) -> CqlResult<()> {
    let Selection::Selectors(list) = &select.selection else { return Ok(()) };
    let selected = |name: &str| list.iter().any(|s| matches!(&s.expr, SelectorExpr::Column(n) if n == name));
    let missing: Vec<&str> = meta.partition_key().map(|c| c.name.as_str()).filter(|n| !selected(n)).collect();
    match missing.is_empty() {
        true => Ok(()),
        false => Err(invalid(format!(
            "SELECT DISTINCT queries must request all the partition key columns (missing {})",
            missing.join(", ")
        ))),
    }
}

/// Whether a SELECT DISTINCT's WHERE clause restricts only partition key
/// and static columns (what DISTINCT allows).
fn distinct_restrictable(meta: &TableMeta, relations: &[Relation]) -> bool {
    let allowed = |name: &String| {
        meta.column(name).is_none_or(|c| matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Static))
    };
    relations.iter().all(|relation| match relation {
        Relation::Simple { column, .. }
        | Relation::In { column, .. }
        | Relation::NotIn { column, .. }
        | Relation::IsNotNull { column }
        | Relation::Element { column, .. } => allowed(column),
        Relation::MultiColumn { columns, .. } | Relation::MultiColumnIn { columns, .. } => columns.iter().all(allowed),
        Relation::Token { .. } => true,
    })
}

/// `WRITETIME(c[key])` / `TTL(c[key])` of a non-frozen map's or set's
/// element and `WRITETIME(u.f)` / `TTL(u.f)` of a non-frozen user type's
/// field, which have write times of their own (ScyllaDB 2026's); everything
/// else ScyllaDB refuses, in its words.
fn write_time_of_part(
    meta: &TableMeta,
    ttl: bool,
    part: &SelectorExpr,
    binds: Binds<'_>,
) -> CqlResult<(String, CqlType, Sel)> {
    let what = if ttl { "TTL" } else { "WRITETIME" };
    let (SelectorExpr::Field { expr, .. } | SelectorExpr::Element { expr, .. } | SelectorExpr::Slice { expr, .. }) =
        part
    else {
        return Err(invalid(format!("{what} expects a column, a field or an element")));
    };
    let SelectorExpr::Column(name) = expr.as_ref() else {
        return Err(invalid(format!("{what} expects a column, a field or an element")));
    };
    let index = column_ref(meta, name)?;
    let column = &meta.columns[index];
    if column.kind.is_primary_key() {
        return Err(invalid(format!(
            "Cannot use selection function {} on PRIMARY KEY part {name}",
            what.to_lowercase()
        )));
    }
    let ty = &column.ty;
    Err(match (part, ty) {
        (SelectorExpr::Element { key, .. }, CqlType::Map(key_ty, _) | CqlType::Set(key_ty)) => {
            let display = format!("{}({part})", what.to_lowercase());
            let key = subscript(meta, key, Receiver { name: &display, ty: key_ty }, binds)?;
            let result_ty = if ttl { CqlType::Int } else { CqlType::Bigint };
            return Ok((display, result_ty, Sel::ElementStamp { column: index, key, ttl }));
        }
        (SelectorExpr::Field { field, .. }, CqlType::Udt(udt)) if udt.field_index(field).is_none() => {
            invalid(format!("{name} of type {} has no field {field}", udt.name))
        }
        (SelectorExpr::Field { field, .. }, CqlType::Udt(udt)) => {
            let key = udt.field_index(field).map(fields::cell_key);
            let result_ty = if ttl { CqlType::Int } else { CqlType::Bigint };
            return Ok((
                format!("{}({part})", what.to_lowercase()),
                result_ty,
                Sel::ElementStamp { column: index, key, ttl },
            ));
        }
        (SelectorExpr::Field { .. }, _) if matches!(ty.unfrozen(), CqlType::Udt(_)) => {
            invalid(format!("{what} on a field selection is only valid for non-frozen UDT columns"))
        }
        (SelectorExpr::Field { .. }, _) => {
            invalid(format!("Invalid field selection: {name} of type {ty} is not a user type"))
        }
        _ if matches!(ty.unfrozen(), CqlType::Map(..) | CqlType::Set(_) | CqlType::List(_)) => {
            invalid(format!("{what} on a subscript is only valid for non-frozen map or set columns"))
        }
        _ => invalid(format!("Invalid element selection: {name} is of type {ty} is not a collection")),
    })
}

fn column_ref(meta: &TableMeta, name: &str) -> CqlResult<usize> {
    meta.column_index(name).ok_or_else(|| invalid(format!("Undefined column name {name} in selection clause")))
}

fn selector_expr(meta: &TableMeta, expr: &SelectorExpr, binds: Binds<'_>) -> CqlResult<(String, CqlType, Sel)> {
    Ok(match expr {
        SelectorExpr::Column(name) => {
            let i = column_ref(meta, name)?;
            (name.clone(), meta.columns[i].ty.clone(), Sel::Column(i))
        }
        SelectorExpr::CountStar => (
            "count".to_string(),
            CqlType::Bigint,
            Sel::Aggregate { kind: AggregateKind::Count, arg: None, ty: CqlType::Bigint },
        ),
        SelectorExpr::WriteTime(name) | SelectorExpr::Ttl(name) => {
            let i = column_ref(meta, name)?;
            let column = &meta.columns[i];
            let is_ttl = matches!(expr, SelectorExpr::Ttl(_));
            let what = if is_ttl { "ttl" } else { "writetime" };
            if column.kind.is_primary_key() {
                return Err(invalid(format!("Cannot use selection function {what} on PRIMARY KEY part {name}")));
            }
            // ScyllaDB's text (Cassandra 5 answers a list of the elements'
            // write times instead); a non-frozen user type too.
            if column.ty.is_multi_cell() || matches!(column.ty, CqlType::Udt(_)) {
                return Err(invalid(format!(
                    "{} expects an atomic column, but {name} is a non-frozen collection",
                    what.to_uppercase()
                )));
            }
            let (ty, sel) = if is_ttl { (CqlType::Int, Sel::Ttl(i)) } else { (CqlType::Bigint, Sel::WriteTime(i)) };
            (format!("{what}({name})"), ty, sel)
        }
        SelectorExpr::WriteTimeOfPart { ttl, part } => write_time_of_part(meta, *ttl, part, binds)?,
        SelectorExpr::FunctionCall { name, args } => function_selector(meta, name, args, binds)?,
        SelectorExpr::Cast { expr, ty } => {
            let (name, from, sel) = selector_expr(meta, expr, binds)?;
            if !cast::supported(&from, ty) {
                // Cassandra's and ScyllaDB's text.
                return Err(invalid(format!("{name} cannot be cast to {ty}")));
            }
            // A cast to the value's own type is dropped, name and all, as
            // in ScyllaDB (`CAST(p AS int)` of an int is column `p`).
            match from.unfrozen() == ty.unfrozen() {
                true => (name, from, sel),
                false => (
                    format!("cast({name} as {ty})"),
                    ty.clone(),
                    Sel::Cast { value: Box::new(sel), from, to: ty.clone() },
                ),
            }
        }
        SelectorExpr::Field { expr, field } => {
            let (name, ty, sel) = selector_expr(meta, expr, binds)?;
            let CqlType::Udt(udt) = ty.unfrozen() else {
                return Err(invalid(format!("Invalid field selection: {name} of type {ty} is not a user type")));
            };
            let index = udt
                .field_index(field)
                .ok_or_else(|| invalid(format!("{name} of type {} has no field {field}", udt.name)))?;
            (format!("{name}.{field}"), udt.fields[index].1.clone(), Sel::Field { value: Box::new(sel), index })
        }
        // A user type literal or `{}` tells no type (Cassandra's refusal).
        SelectorExpr::Term(term @ (Term::UserType(_) | Term::EmptyBraces)) => {
            return Err(invalid(format!("Cannot infer type for term {term} in selection clause")));
        }
        SelectorExpr::Term(term) => literal_selector(meta, term, functions::constant_type(term), binds)?,
        SelectorExpr::Arithmetic { op, left, right } => arithmetic_selector(meta, *op, left, right, binds)?,
        SelectorExpr::Negation(operand) => {
            let zero = SelectorExpr::Term(crate::ast::Term::Literal(crate::ast::Literal::Integer("0".into())));
            let (_, ty, sel) = arithmetic_selector(meta, NumericOp::Sub, &zero, operand, binds)?;
            let name = selector_expr(meta, operand, binds)?.0;
            let name = match operator(operand) {
                Some(_) => format!("-({name})"),
                None => format!("-{name}"),
            };
            (name, ty, sel)
        }
        SelectorExpr::Element { expr, key } => {
            let (name, ty, sel) = selector_expr(meta, expr, binds)?;
            let collection = ty.unfrozen().clone();
            let (key_ty, result_ty) = match &collection {
                CqlType::Map(k, v) => (k.as_ref().clone(), v.as_ref().clone()),
                CqlType::Set(e) => (e.as_ref().clone(), e.as_ref().clone()),
                CqlType::List(e) => (CqlType::Int, e.as_ref().clone()),
                _ => {
                    return Err(invalid(format!(
                        "Invalid element selection: {name} is of type {ty} is not a collection"
                    )))
                }
            };
            let display = format!("{name}[{key}]");
            // `m[null]` is null, as in ScyllaDB (Cassandra refuses it).
            let key = subscript(meta, key, Receiver { name: &display, ty: &key_ty }, binds)?;
            (display, result_ty, Sel::Element { value: Box::new(sel), collection, key })
        }
        SelectorExpr::Slice { expr, from, to } => {
            let (name, ty, sel) = selector_expr(meta, expr, binds)?;
            let collection = ty.unfrozen().clone();
            let key_ty = match &collection {
                CqlType::Map(k, _) | CqlType::Set(k) => k.as_ref().clone(),
                _ => {
                    return Err(invalid(format!(
                        "Slice selection is only allowed on sets and maps, but {name} is a {ty}"
                    )))
                }
            };
            let text = |b: &Option<Term>| b.as_ref().map(Term::to_string).unwrap_or_default();
            let display = format!("{name}[{}..{}]", text(from), text(to));
            let bound = |b: &Option<Term>| match (b, binds) {
                (None, _) | (Some(Term::Bind(_)), None) => Ok(None),
                (Some(t), None) if functions::calls_user_function(t) => Ok(None),
                (Some(t), binds) => {
                    let receiver = Receiver { name: &display, ty: &key_ty };
                    eval_required(t, receiver, constant_bindings(meta, binds)).map(Some)
                }
            };
            let (from, to) = (bound(from)?, bound(to)?);
            (display, ty, Sel::Slice { value: Box::new(sel), collection, from, to })
        }
    })
}

/// The values of bind markers in selectors (`m[?]`): `None` while a
/// statement is compiled once for every execution, which then resolves its
/// selectors again with its values ([`CompiledSelect`]'s `rebind`).
type Binds<'a> = Option<Bindings<'a>>;

/// A constant in a selector (a subscript's key): a marker's value once
/// bound, a placeholder null while compiling.
fn subscript(meta: &TableMeta, term: &Term, receiver: Receiver<'_>, binds: Binds<'_>) -> CqlResult<Option<Bytes>> {
    match (term, binds) {
        (Term::Bind(_), None) => Ok(None),
        (term, None) if functions::calls_user_function(term) => Ok(None),
        (_, binds) => Ok(eval(term, receiver, constant_bindings(meta, binds))?.into_option()),
    }
}

/// What a constant in a selector is evaluated with: the execution's
/// values (none while compiling), user functions looked up in the table's
/// keyspace.
fn constant_bindings<'a>(meta: &'a TableMeta, binds: Binds<'a>) -> Bindings<'a> {
    binds.unwrap_or(Bindings::NONE).in_keyspace(&meta.keyspace)
}

impl CompiledSelect {
    /// The user-defined functions and aggregates its selectors call, an
    /// aggregate's state and final functions too, as `(keyspace, name,
    /// argument types)`: what the caller needs EXECUTE on (Cassandra's
    /// `getFunctions`).
    pub fn user_functions(&self) -> Vec<(&str, &str, &[CqlType])> {
        let mut out = Vec::new();
        for sel in &self.sels {
            called_functions(sel, &mut out);
        }
        out
    }
}

fn called_functions<'s>(sel: &'s Sel, out: &mut Vec<(&'s str, &'s str, &'s [CqlType])>) {
    let function = |f: &'s shoal_schema::UserFunction| (f.keyspace.as_str(), f.name.as_str(), f.arg_types.as_slice());
    let args: &[Sel] = match sel {
        Sel::UserFunction { function: f, args } => {
            out.push(function(f));
            args
        }
        Sel::UserAggregate { aggregate, args } => {
            let definition = &aggregate.definition;
            out.push((&definition.keyspace, &definition.name, &definition.arg_types));
            out.push(function(&aggregate.state_func));
            out.extend(aggregate.final_func.as_deref().map(function));
            args
        }
        Sel::Function { args, .. } => args,
        Sel::Aggregate { arg, .. } => return arg.iter().for_each(|a| called_functions(a, out)),
        Sel::Field { value, .. } | Sel::Cast { value, .. } | Sel::Element { value, .. } | Sel::Slice { value, .. } => {
            return called_functions(value, out)
        }
        Sel::Arithmetic { left, right, .. } => {
            called_functions(left, out);
            return called_functions(right, out);
        }
        Sel::Column(_) | Sel::WriteTime(_) | Sel::Ttl(_) | Sel::ElementStamp { .. } | Sel::Literal(_) => return,
    };
    for arg in args {
        called_functions(arg, out);
    }
}

/// Whether a selector holds bind markers as subscripts, whose values each
/// execution gives, or calls of user functions in constants, which each
/// execution runs.
fn has_markers(expr: &SelectorExpr) -> bool {
    let marker = |term: &Term| matches!(term, Term::Bind(_)) || functions::calls_user_function(term);
    match expr {
        SelectorExpr::Element { expr, key } => marker(key) || has_markers(expr),
        SelectorExpr::Slice { expr, from, to } => from.iter().chain(to.iter()).any(marker) || has_markers(expr),
        SelectorExpr::WriteTimeOfPart { part, .. } => has_markers(part),
        // A function's marker argument (an operand's) is typed by the
        // function (the other operand).
        SelectorExpr::FunctionCall { args, .. } => args.iter().any(|a| is_marker(a) || has_markers(a)),
        SelectorExpr::Cast { expr, .. } | SelectorExpr::Field { expr, .. } | SelectorExpr::Negation(expr) => {
            has_markers(expr)
        }
        SelectorExpr::Arithmetic { left, right, .. } => [left, right].iter().any(|a| is_marker(a) || has_markers(a)),
        // A marker standing alone has no type to read its value by
        // (refused, whatever the values) unless a cast gives one.
        SelectorExpr::Term(term) if functions::calls_user_function(term) => true,
        SelectorExpr::Term(term @ Term::Cast { .. }) => term.has_bind_marker(),
        SelectorExpr::Term(_)
        | SelectorExpr::Column(_)
        | SelectorExpr::CountStar
        | SelectorExpr::WriteTime(_)
        | SelectorExpr::Ttl(_) => false,
    }
}

/// Whether the selector is a constant holding a marker (`?`, `(int) ?`).
fn is_marker(expr: &SelectorExpr) -> bool {
    matches!(expr, SelectorExpr::Term(term) if term.has_bind_marker())
}

/// `left op right`: a constant operand takes the other's type (`v * 2`),
/// as Cassandra resolves it; the result is of the type both are brought to.
fn arithmetic_selector(
    meta: &TableMeta,
    op: NumericOp,
    left: &SelectorExpr,
    right: &SelectorExpr,
    binds: Binds<'_>,
) -> CqlResult<(String, CqlType, Sel)> {
    let (left_expr, right_expr) = (left, right);
    // Two constants, one a bare marker: nothing tells the marker's type.
    if let (SelectorExpr::Term(l), SelectorExpr::Term(r)) = (left, right) {
        if matches!(l, Term::Bind(_)) || matches!(r, Term::Bind(_)) {
            return Err(term_operations::ambiguous(op, l, r));
        }
    }
    let is_string = |ty: &CqlType| matches!(ty.unfrozen(), CqlType::Text | CqlType::Ascii);
    // Only a string constant is added to a string (`t + 1` is refused).
    let is_text = |term: &Term| matches!(term, Term::Literal(Literal::String(_) | Literal::Null) | Term::Bind(_));
    // A constant takes the other operand's type when that is a number, or
    // a string to add to.
    let other = |i: usize, term: &Term, types: &[Option<CqlType>]| {
        let other_type = types.get(1 - i).cloned().flatten();
        match term {
            Term::Literal(Literal::Duration(_)) => Some(CqlType::Duration),
            // A float constant is a double, unless beside a floating point
            // or decimal operand that can hold it, whose type it takes.
            Term::Literal(Literal::Float(text)) => {
                let finite = text.parse::<f64>().is_ok_and(f64::is_finite);
                let floating =
                    |t: &CqlType| matches!(t, CqlType::Float | CqlType::Double) || (finite && *t == CqlType::Decimal);
                Some(other_type.filter(floating).unwrap_or(CqlType::Double))
            }
            // An integer constant too large for the other operand's type
            // has its own (int, bigint or varint, by its size).
            Term::Literal(Literal::Integer(text))
                if other_type.as_ref().is_some_and(|t| arithmetic::result_type(t, t).is_some()) =>
            {
                let fits = |t: &CqlType| {
                    shoal_schema::literal::parse_literal(t, shoal_schema::literal::LiteralKind::Integer, text).is_ok()
                };
                Some(other_type.filter(fits).unwrap_or_else(|| term_operations::preferred_integer_type(text)))
            }
            _ => other_type.filter(|t| {
                arithmetic::result_type(t, t).is_some() || (op == NumericOp::Add && is_string(t) && is_text(term))
            }),
        }
    };
    let operands = function_arguments(meta, &[left.clone(), right.clone()], other, binds)?;
    let [(left_name, left_ty, left), (right_name, right_ty, right)] =
        <[_; 2]>::try_from(operands).map_err(|_| CqlError::Server("an operation without two operands".to_string()))?;
    let display = operation_text(op, (&left_name, operator(left_expr)), (&right_name, operator(right_expr)));
    let concatenation = (op == NumericOp::Add && is_string(&left_ty) && is_string(&right_ty))
        .then(|| concatenation_type(&left_ty, &right_ty));
    let temporal = (right_ty == CqlType::Duration && temporal_arithmetic::supported(op, left_ty.unfrozen()))
        .then(|| left_ty.unfrozen().clone());
    let ty = concatenation.or(temporal).or_else(|| arithmetic::result_type(&left_ty, &right_ty)).ok_or_else(|| {
        invalid(format!(
            "the '{}' operation is not supported between {left_name} and {right_name} (types {left_ty} and {right_ty})",
            op.symbol()
        ))
    })?;
    let sel = Sel::Arithmetic {
        op,
        left: Box::new(left),
        right: Box::new(right),
        types: (left_ty, right_ty),
        ty: ty.clone(),
    };
    Ok((display, ty, sel))
}

/// The operator of a selector that is an operation, which its column
/// name groups by.
fn operator(expr: &SelectorExpr) -> Option<NumericOp> {
    match expr {
        SelectorExpr::Arithmetic { op, .. } => Some(*op),
        _ => None,
    }
}

/// A constant selector, read as a value of `ty`.
fn literal_selector(meta: &TableMeta, term: &Term, ty: CqlType, binds: Binds<'_>) -> CqlResult<(String, CqlType, Sel)> {
    let text = term.to_string();
    // At PREPARE a marker has no value yet: only the type counts. A user
    // function's call is run at each execution, which checks EXECUTE.
    if binds.is_none() && (term.has_bind_marker() || functions::calls_user_function(term)) {
        return Ok((text, ty, Sel::Literal(None)));
    }
    let value = eval(term, Receiver { name: &text, ty: &ty }, constant_bindings(meta, binds))?;
    Ok((text, ty, Sel::Literal(value.into_option())))
}

/// A function's (or an operation's) arguments; a constant takes the type
/// `parameter_type` gives it from its position and the other arguments'
/// types (`similarity_cosine(v, [1, 2, 3])` reads the list as `v`'s vector
/// type), else int.
fn function_arguments(
    meta: &TableMeta,
    args: &[SelectorExpr],
    parameter_type: impl Fn(usize, &Term, &[Option<CqlType>]) -> Option<CqlType>,
    binds: Binds<'_>,
) -> CqlResult<Vec<(String, CqlType, Sel)>> {
    let typed = args
        .iter()
        .map(|a| match a {
            SelectorExpr::Term(_) => Ok(None),
            _ => selector_expr(meta, a, binds).map(Some),
        })
        .collect::<CqlResult<Vec<_>>>()?;
    let others: Vec<Option<CqlType>> = typed.iter().map(|t| t.as_ref().map(|(_, ty, _)| ty.clone())).collect();
    // A marker or a null also takes the type a literal beside it has on
    // its own (`similarity_cosine([1, 2], ?)`, `similarity_cosine(null,
    // [1, 2])`); other literals are typed by `others` alone.
    let untyped = |term: &Term| matches!(term, Term::Bind(_) | Term::Literal(crate::ast::Literal::Null));
    let hinted: Vec<Option<CqlType>> = args
        .iter()
        .zip(&others)
        .enumerate()
        .map(|(i, (arg, known))| match (known, arg) {
            (None, SelectorExpr::Term(term)) if !untyped(term) => parameter_type(i, term, &others),
            _ => known.clone(),
        })
        .collect();
    args.iter()
        .zip(typed)
        .enumerate()
        .map(|(i, (arg, typed))| match (typed, arg) {
            (Some(typed), _) => Ok(typed),
            (None, SelectorExpr::Term(term)) => {
                let context = if untyped(term) { &hinted } else { &others };
                // A cast says its type itself (`b + (tinyint) 1`).
                let ty = match term {
                    Term::Cast { ty, .. } => ty.clone(),
                    // Else the type the literal has on its own (ScyllaDB's
                    // inference: `count('abc')` counts a text).
                    _ => parameter_type(i, term, context).unwrap_or_else(|| functions::constant_type(term)),
                };
                // A marker's value comes with each execution (see
                // `has_markers`); `literal_selector` holds a placeholder
                // until then.
                literal_selector(meta, term, ty, binds)
            }
            // Only constants are left untyped above.
            (None, _) => selector_expr(meta, arg, binds),
        })
        .collect()
}

fn function_selector(
    meta: &TableMeta,
    name: &str,
    args: &[SelectorExpr],
    binds: Binds<'_>,
) -> CqlResult<(String, CqlType, Sel)> {
    let name = name.trim_start_matches("system.").to_ascii_lowercase();
    let callees = user_functions::candidates(&shoal_coordinator::schema(), &meta.keyspace, &name, args.len())?;
    if !callees.is_empty() {
        return user_function_selector(meta, callees, args, binds);
    }
    if name.contains('.') {
        return Err(invalid(format!("Unknown function '{name}'")));
    }
    let parameter_type = |i, term: &Term, others: &[Option<CqlType>]| functions::parameter_type(&name, i, term, others);
    functions::check_similarity_terms(
        &name,
        args.iter().map(|a| match a {
            SelectorExpr::Term(term) => Some(term),
            _ => None,
        }),
    )?;
    let compiled = function_arguments(meta, args, parameter_type, binds)?;
    let arg_names: Vec<&str> = compiled.iter().map(|(n, _, _)| n.as_str()).collect();
    let display = format!("system.{name}({})", arg_names.join(", "));
    let kind = match name.as_str() {
        "count" => Some(AggregateKind::Count),
        "min" => Some(AggregateKind::Min),
        "max" => Some(AggregateKind::Max),
        "sum" => Some(AggregateKind::Sum),
        "avg" => Some(AggregateKind::Avg),
        _ => None,
    };
    if let Some(kind) = kind {
        let [(_, ty, arg)] = <[_; 1]>::try_from(compiled)
            .map_err(|_| invalid(format!("Invalid number of arguments in call to function {display}")))?;
        if aggregate::has_aggregate(&arg) {
            return Err(invalid("aggregate functions cannot be used as arguments of aggregate functions"));
        }
        let result_ty = if kind == AggregateKind::Count { CqlType::Bigint } else { ty };
        // COUNT(v) is named `system.count(v)`, as the other aggregates are;
        // only COUNT(*) and COUNT(1) are `count` (Cassandra's and ScyllaDB's).
        let display = match (&arg, kind) {
            (Sel::Literal(..), AggregateKind::Count) => "count".to_string(),
            _ => display,
        };
        return Ok((display, result_ty.clone(), Sel::Aggregate { kind, arg: Some(Box::new(arg)), ty: result_ty }));
    }
    if name == "token" {
        let expected: Vec<usize> = meta.partition_key().filter_map(|c| meta.column_index(&c.name)).collect();
        if compiled.len() != expected.len() {
            return Err(invalid(format!(
                "Invalid number of arguments in call to function system.token: {} required but {} provided",
                expected.len(),
                compiled.len()
            )));
        }
        for (i, ((arg, ty, _), column)) in compiled.iter().zip(&expected).enumerate() {
            let want = &meta.columns[*column].ty;
            if ty != want {
                return Err(invalid(format!(
                    "Type error: {arg} cannot be passed as argument {i} of function system.token of type {want}"
                )));
            }
        }
        let given: Vec<Option<usize>> =
            compiled.iter().map(|(_, _, s)| if let Sel::Column(i) = s { Some(*i) } else { None }).collect();
        if given != expected.iter().map(|i| Some(*i)).collect::<Vec<_>>() {
            return Err(invalid("token() takes the partition key columns, in key order"));
        }
        return Ok((display, CqlType::Bigint, Sel::Function { name, arg_types: Vec::new(), args: Vec::new() }));
    }
    if name == "fromjson" {
        return Err(invalid("fromJson() cannot be used in the selection clause of a SELECT statement"));
    }
    let named: Vec<(String, CqlType)> = compiled.iter().map(|(n, t, _)| (n.clone(), t.clone())).collect();
    functions::check_arguments(&name, &named)?;
    let arg_types: Vec<CqlType> = named.into_iter().map(|(_, t)| t).collect();
    let ty = functions::result_type(&name, &arg_types).ok_or_else(|| invalid(format!("Unknown function '{name}'")))?;
    let args = compiled.into_iter().map(|(_, _, s)| s).collect();
    Ok((display, ty, Sel::Function { name, arg_types, args }))
}

/// A call of a user-defined function or aggregate, the overload picked by
/// the arguments' types (constants take the types of the only overload).
fn user_function_selector(
    meta: &TableMeta,
    callees: Vec<Callee>,
    args: &[SelectorExpr],
    binds: Binds<'_>,
) -> CqlResult<(String, CqlType, Sel)> {
    let declared: Vec<CqlType> = match callees.as_slice() {
        [only] => only.arg_types().to_vec(),
        _ => Vec::new(),
    };
    let name = callees[0].full_name();
    // A constant the declared parameter cannot hold is ScyllaDB's type
    // error, not a refused constant.
    for (i, (arg, want)) in args.iter().zip(&declared).enumerate() {
        // A plain constant only: a collection may hold calls only the
        // selector evaluates.
        let SelectorExpr::Term(term @ Term::Literal(literal)) = arg else { continue };
        if matches!(literal, Literal::Null) {
            continue;
        }
        let text = term.to_string();
        if eval(term, Receiver { name: &text, ty: want }, Bindings::NONE).is_err() {
            return Err(invalid(format!(
                "Type error: {text} cannot be passed as argument {i} of function {name} of type {want}"
            )));
        }
    }
    let parameter_type = |i: usize, _: &Term, _: &[Option<CqlType>]| declared.get(i).cloned();
    let compiled = function_arguments(meta, args, parameter_type, binds)?;
    let types: Vec<CqlType> = compiled.iter().map(|(_, ty, _)| ty.clone()).collect();
    let Some(callee) = callees.into_iter().find(|c| crate::function_ddl::same_types(c.arg_types(), &types)) else {
        let (i, (arg, ty, _)) = compiled
            .iter()
            .enumerate()
            .find(|(i, (_, ty, _))| {
                declared.get(*i).is_some_and(|d| {
                    !crate::function_ddl::same_types(std::slice::from_ref(d), std::slice::from_ref(ty))
                })
            })
            .unwrap_or((0, &compiled[0]));
        return Err(invalid(match declared.get(i) {
            Some(want) => {
                format!("Type error: {arg} cannot be passed as argument {i} of function {name} of type {want}")
            }
            None => format!("Invalid call to function {name}: no overload takes arguments of types {ty}"),
        }));
    };
    let arg_names: Vec<&str> = compiled.iter().map(|(n, _, _)| n.as_str()).collect();
    let display = format!("{name}({})", arg_names.join(", "));
    let ty = callee.return_type().clone();
    let args: Vec<Sel> = compiled.into_iter().map(|(_, _, s)| s).collect();
    let sel = match callee {
        Callee::Function(function) => Sel::UserFunction { function, args },
        Callee::Aggregate(aggregate) => {
            if args.iter().any(aggregate::has_aggregate) {
                return Err(invalid("aggregate functions cannot be used as arguments of aggregate functions"));
            }
            Sel::UserAggregate { aggregate, args }
        }
    };
    Ok((display, ty, sel))
}

/// The value of key column `index` in `row`.
pub(crate) fn column_value(meta: &TableMeta, index: usize, row: &ResultRow) -> CqlResult<Option<Bytes>> {
    let column = &meta.columns[index];
    Ok(match column.kind {
        ColumnKind::PartitionKey => {
            let key = &row.position.partition.key;
            let parts = split_partition_key(meta.partition_key_len(), key)
                .map_err(|e| CqlError::Server(format!("corrupt partition key: {e}")))?;
            parts.get(column.position as usize).map(|p| key.slice_ref(p))
        }
        ColumnKind::Clustering => row.clustering.get(column.position as usize).cloned(),
        _ => row.cells[index].as_ref().map(|c| c.value.clone()),
    })
}

fn evaluate(meta: &TableMeta, sel: &Sel, row: &ResultRow) -> CqlResult<Option<Bytes>> {
    Ok(match sel {
        Sel::Column(i) => column_value(meta, *i, row)?,
        Sel::WriteTime(i) => row.cells[*i].as_ref().map(|c| Bytes::copy_from_slice(&c.timestamp.to_be_bytes())),
        Sel::Ttl(i) => row.cells[*i].as_ref().and_then(|c| c.ttl_s).map(|t| Bytes::copy_from_slice(&t.to_be_bytes())),
        Sel::ElementStamp { column, key, ttl } => {
            let elements = row.cells[*column].as_ref().map_or(&[][..], |c| &c.elements[..]);
            let found = key.as_ref().and_then(|key| elements.iter().find(|e| e.key == key));
            match (found, ttl) {
                (None, _) => None,
                (Some(e), false) => Some(Bytes::copy_from_slice(&e.timestamp.to_be_bytes())),
                (Some(e), true) => e.ttl_s.map(|t| Bytes::copy_from_slice(&t.to_be_bytes())),
            }
        }
        Sel::Literal(v) => v.clone(),
        Sel::Field { value, index } => match evaluate(meta, value, row)? {
            Some(v) => fields::field(&v, *index)
                .map_err(|e| CqlError::Server(format!("corrupt user type value: {e}")))?
                .map(|f| v.slice_ref(f)),
            None => None,
        },
        Sel::Arithmetic { op, left, right, types, ty } => {
            operate(*op, types, ty, evaluate(meta, left, row)?, evaluate(meta, right, row)?)?
        }
        Sel::Cast { value, from, to } => match evaluate(meta, value, row)? {
            Some(v) => {
                let corrupt =
                    |e: shoal_schema::ValueError| CqlError::Server(format!("cannot cast a stored value: {e}"));
                let value = Value::deserialize(from, &v).map_err(corrupt)?;
                Some(Bytes::from(cast::cast(&value, to).map_err(corrupt)?.to_bytes()))
            }
            None => None,
        },
        Sel::Element { value, collection, key } => match (evaluate(meta, value, row)?, key) {
            (Some(v), Some(key)) => element(collection, &v, key),
            _ => None,
        },
        Sel::Slice { value, collection, from, to } => match evaluate(meta, value, row)? {
            Some(v) => slice(collection, &v, from.as_deref(), to.as_deref()),
            None => None,
        },
        Sel::Function { name, .. } if name == "token" => {
            Some(Bytes::copy_from_slice(&row.position.partition.token.to_be_bytes()))
        }
        Sel::Function { name, arg_types, args } => {
            let mut values = Vec::with_capacity(args.len());
            for (i, arg) in args.iter().enumerate() {
                match evaluate(meta, arg, row)? {
                    Some(v) => values.push(v),
                    // toJson renders null as JSON's `null`, as Cassandra does;
                    // a format function refuses a null unit (of a value that
                    // is not null); every other function of a null is null.
                    None if name == "tojson" => return Ok(Some(Bytes::from_static(b"null"))),
                    None if i > 0 && format_fcts::NAMES.contains(&name.as_str()) => {
                        return Err(format_fcts::null_unit())
                    }
                    None => return Ok(None),
                }
            }
            functions::apply(name, arg_types, &values)?.1
        }
        Sel::UserFunction { function, args } => {
            let values = args.iter().map(|a| evaluate(meta, a, row)).collect::<CqlResult<Vec<_>>>()?;
            crate::lua::call(function, &values)?
        }
        Sel::Aggregate { .. } | Sel::UserAggregate { .. } => {
            return Err(CqlError::Server("aggregate evaluated per row".to_string()))
        }
    })
}

/// `collection[key]`: a map's value at `key`, `key` if a set holds it, a
/// list's element at index `key`; null when there is none.
fn element(collection: &CqlType, value: &Bytes, key: &[u8]) -> Option<Bytes> {
    let items = collection_items(value);
    match collection {
        CqlType::Map(key_ty, _) => {
            items.chunks_exact(2).find(|pair| compare(key_ty, &pair[0], key).is_eq()).map(|pair| pair[1].clone())
        }
        CqlType::Set(elem) => items.into_iter().find(|item| compare(elem, item, key).is_eq()),
        CqlType::List(_) => {
            let index = usize::try_from(i32::from_be_bytes(key.try_into().ok()?)).ok()?;
            items.into_iter().nth(index)
        }
        _ => None,
    }
}

/// `collection[from..to]` of a map or set: the entries whose keys lie
/// between the bounds (both included); null when none does, as an empty
/// collection reads.
fn slice(collection: &CqlType, value: &Bytes, from: Option<&[u8]>, to: Option<&[u8]>) -> Option<Bytes> {
    let items = collection_items(value);
    let (key_ty, width) = match collection {
        CqlType::Map(key_ty, _) => (key_ty.as_ref(), 2),
        CqlType::Set(elem) => (elem.as_ref(), 1),
        _ => return None,
    };
    let within = |key: &Bytes| {
        from.is_none_or(|f| compare(key_ty, key, f).is_ge()) && to.is_none_or(|t| compare(key_ty, key, t).is_le())
    };
    let kept: Vec<&Bytes> = items.chunks_exact(width).filter(|entry| within(&entry[0])).flatten().collect();
    if kept.is_empty() {
        return None;
    }
    let items = kept.iter().map(|b| Some(&b[..]));
    Some(match width {
        2 => collection::serialize_map(items, kept.len() / 2),
        _ => collection::serialize(items, kept.len()),
    })
}

fn encode_paging_state(state: &PagingState) -> Bytes {
    let position = &state.position;
    let mut out = BytesMut::new();
    out.put_u8(PAGING_STATE_VERSION);
    out.put_i64(position.partition.token);
    out.put_u32(position.partition.key.len() as u32);
    out.put_slice(&position.partition.key);
    match &position.clustering {
        Some(ck) => {
            out.put_u8(if state.at_key { 2 } else { 1 });
            out.put_u32(ck.len() as u32);
            out.put_slice(ck);
        }
        None => out.put_u8(0),
    }
    out.put_u64(state.remaining as u64);
    out.put_u64(state.in_partition as u64);
    out.freeze()
}

fn decode_paging_state(state: &Bytes) -> CqlResult<PagingState> {
    let bad =
        || CqlError::Protocol("Invalid paging state: it was not produced by this server for this query".to_string());
    let mut buf = state.clone();
    let take = |buf: &mut Bytes, n: usize| if buf.remaining() >= n { Ok(buf.split_to(n)) } else { Err(bad()) };
    if take(&mut buf, 1)?[0] != PAGING_STATE_VERSION {
        return Err(bad());
    }
    let token = take(&mut buf, 8)?.get_i64();
    let key_len = take(&mut buf, 4)?.get_u32() as usize;
    let key = take(&mut buf, key_len)?;
    let kind = take(&mut buf, 1)?[0];
    let clustering = match kind {
        0 => None,
        1 | 2 => {
            let len = take(&mut buf, 4)?.get_u32() as usize;
            Some(take(&mut buf, len)?)
        }
        _ => return Err(bad()),
    };
    let remaining = take(&mut buf, 8)?.get_u64() as usize;
    let in_partition = take(&mut buf, 8)?.get_u64() as usize;
    let position = RowPosition { partition: PartitionPosition { token, key }, clustering };
    Ok(PagingState { position, remaining, in_partition, at_key: kind == 2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_state_round_trips_and_rejects_garbage() {
        let position = RowPosition {
            partition: PartitionPosition { token: -42, key: Bytes::from_static(b"key") },
            clustering: Some(Bytes::from_static(b"ck")),
        };
        let state = PagingState { position, remaining: 17, in_partition: 3, at_key: true };
        let encoded = encode_paging_state(&state);
        assert_eq!(decode_paging_state(&encoded).ok(), Some(state));
        let state = encoded;
        for len in 0..state.len() {
            assert!(decode_paging_state(&state.slice(..len)).is_err());
        }
        assert!(decode_paging_state(&Bytes::from_static(b"\x07garbage")).is_err());
    }

    #[test]
    fn token_bounds_become_partition_bounds() {
        assert_eq!(token_start(Bound::Excluded(5)), Bound::Included(PartitionPosition { token: 6, key: Bytes::new() }));
        assert_eq!(token_end(Bound::Included(i64::MAX)), Bound::Unbounded);
        assert_eq!(token_end(Bound::Excluded(0)), Bound::Excluded(PartitionPosition { token: 0, key: Bytes::new() }));
    }
}
