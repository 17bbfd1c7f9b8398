//! The query processor: runs QUERY, PREPARE, EXECUTE and BATCH requests for
//! one connection's session on the shard the connection lives on.
//!
//! Prepared statements are cached per shard under an id derived from the
//! statement text and keyspace, so every shard gives the same id. A PREPARE
//! fills every shard's cache before it answers, as ScyllaDB does: drivers
//! prepare on one connection per node and expect an EXECUTE on any other
//! connection to that node to find the statement. A shard that still lacks
//! it (evicted, or a shard that failed to prepare) answers Unprepared and
//! the driver prepares it there. Schema statements go to the coordinator's schema
//! service as transitions (`ddl::apply`).

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::join_all;
use shoal_coordinator::data::{Mutation, PartitionPosition};
use shoal_coordinator::{timeouts, ConsistencyLevel, CoordinatorError, WriteType};
use shoal_runtime::clock;
use shoal_schema::{CqlType, Schema, TableMeta};
use uuid::Uuid;

use crate::ast::{BatchKind, Insert, InsertJson, Parsed, Select, Statement, Term};
use crate::bind_types::{bind_specs, partition_key_indexes};
use crate::ddl::qualify;
use crate::error::{invalid, CqlError, CqlResult};
use crate::json;
use crate::lwt::{self, Conditional};
use crate::metrics::{self, Op};
use crate::modification::{self, WriteContext};
use crate::result::{PreparedInfo, QueryResult};
use crate::select::{self, CompiledSelect, SelectOptions};
use crate::values::{eval_required, Bindings, BoundValue, Receiver};

/// Prepared statements kept per shard; past this, the oldest half goes.
const PREPARED_CACHE_ENTRIES_MAX: usize = 10_000;

/// A connection's session state.
#[derive(Debug, Default, Clone)]
pub struct Session {
    pub keyspace: Option<String>,
    /// The role logged in on the connection (`None`: no authentication).
    pub user: Option<Arc<str>>,
}

/// Per-request options (the protocol's query parameters).
#[derive(Debug, Default, Clone)]
pub struct QueryOptions {
    pub values: Vec<BoundValue>,
    /// Names of `values`, when sent by name.
    pub names: Option<Vec<String>>,
    pub page_size: Option<i32>,
    pub paging_state: Option<Bytes>,
    /// Client-side write timestamp (µs).
    pub timestamp: Option<i64>,
    /// The request's consistency level. One node serves every level alike;
    /// only the rules on serial levels apply.
    pub consistency: ConsistencyLevel,
    /// The serial consistency level, when the request gives one.
    pub serial_consistency: Option<ConsistencyLevel>,
    /// The request's trace, when it is traced.
    pub trace: Option<crate::traces::SharedTrace>,
}

/// One statement of a BATCH request.
#[derive(Debug, Clone)]
pub enum BatchStatement {
    Query(String),
    Prepared(Bytes),
}

struct Prepared {
    parsed: Arc<Parsed>,
    /// The statement's text, which a traced EXECUTE records as its query.
    text: Arc<str>,
    keyspace: Option<String>,
    sequence: u64,
    /// A SELECT compiled against the schema version it names; compiled
    /// again once the schema has moved on.
    compiled: Option<Arc<CompiledSelect>>,
}

#[derive(Default)]
struct PreparedCache {
    entries: HashMap<Bytes, Prepared>,
    sequence: u64,
}

thread_local! {
    static PREPARED: RefCell<PreparedCache> = RefCell::new(PreparedCache::default());
}

/// Parses `text` sent in a session using `keyspace`.
fn parse(text: &str, keyspace: Option<&str>) -> CqlResult<Parsed> {
    let mut parsed = crate::parser::parse_statement(text).map_err(|e| CqlError::Syntax(e.to_string()))?;
    if let (Statement::Select(select), Some(keyspace)) = (&mut parsed.statement, keyspace) {
        if select.without_from {
            crate::functions::qualify_calls(select, &shoal_coordinator::schema(), keyspace);
        }
    }
    // ScyllaDB refuses markers in a view's definition, prepared or not.
    if matches!(parsed.statement, Statement::CreateView(_)) && !parsed.bind_markers.is_empty() {
        return Err(invalid("Cannot use query parameters in CREATE MATERIALIZED VIEW statements"));
    }
    Ok(parsed)
}

/// Runs a statement. The session is only read: a USE answers
/// `SetKeyspace`, and the connection applies it, so a request in flight
/// never overwrites a USE that finished while it ran.
pub async fn query(text: &str, session: &Session, options: QueryOptions) -> CqlResult<QueryResult> {
    let started = Instant::now();
    let parsed =
        parse(text, session.keyspace.as_deref()).inspect_err(|_| metrics::record(Op::Other, started, false))?;
    // ScyllaDB prepares a query before it counts the values: a marker
    // nothing gives a type is refused first (`SELECT count(?)` unbound).
    if options.values.len() != parsed.bind_markers.len() {
        let keyspace = session.keyspace.as_deref();
        bind_specs(&shoal_coordinator::schema(), &parsed, keyspace)
            .inspect_err(|_| metrics::record(Op::Other, started, false))?;
    }
    metrics::timed(
        Op::of(&parsed.statement),
        started,
        execute_parsed(&parsed, session.keyspace.as_deref(), session.user.as_deref(), None, options),
    )
    .await
}

/// Prepares `text` on this shard, then on every other one (their errors
/// are left for an EXECUTE there to meet as Unprepared).
pub async fn prepare(text: &str, session: &Session) -> CqlResult<PreparedInfo> {
    let info = prepare_here(text, session)?;
    let here = shoal_runtime::this_shard();
    let others = (0..shoal_runtime::nr_shards()).filter(|&shard| shard != here).map(|shard| {
        let (text, session) = (text.to_string(), session.clone());
        shoal_runtime::submit_to(shard, move || async move {
            let _ = prepare_here(&text, &session);
        })
    });
    join_all(others).await;
    Ok(info)
}

/// Prepares `text` in this shard's cache.
fn prepare_here(text: &str, session: &Session) -> CqlResult<PreparedInfo> {
    let parsed = parse(text, session.keyspace.as_deref())?;
    let keyspace = session.keyspace.clone();
    let schema = shoal_coordinator::schema();
    let variables = bind_specs(&schema, &parsed, keyspace.as_deref())?;
    // A write's WHERE clause is refused at PREPARE as at execution, before
    // a marker of a restriction it cannot take gets a type.
    let write_where = match &parsed.statement {
        Statement::Update(u) => Some((u.keyspace.as_deref(), &u.table, &u.where_clause)),
        Statement::Delete(d) => Some((d.keyspace.as_deref(), &d.table, &d.where_clause)),
        _ => None,
    };
    if let Some((named, name, relations)) = write_where {
        let meta = table(&schema, named, keyspace.as_deref(), name)?;
        crate::modification_where::check(&meta, relations)?;
    }
    // CREATE TABLE's options are checked at PREPARE, as ScyllaDB checks
    // them, so nothing is cached that an execution would refuse.
    if let Statement::CreateTable(create) = &parsed.statement {
        crate::ddl::table_options(&create.options, shoal_schema::TableOptions::default())?;
    }
    let pk_indexes = partition_key_indexes(&schema, &parsed, keyspace.as_deref());
    let compiled = match &parsed.statement {
        Statement::Select(s) => {
            let meta = table(&schema, s.keyspace.as_deref(), keyspace.as_deref(), &s.table)?;
            crate::restrictions::check_unbound(&meta, &s.where_clause)?;
            // Compiled for SELECT JSON too: it checks the selection.
            Some(Arc::new(select::compile(&schema, meta, s)?))
        }
        _ => None,
    };
    let result_columns = match (&parsed.statement, &compiled) {
        (Statement::Select(s), Some(compiled)) if s.json => {
            vec![json::json_column(&compiled.meta.keyspace, &compiled.meta.name)]
        }
        (_, Some(compiled)) => compiled.columns.to_vec(),
        _ => Vec::new(),
    };
    let conditional = lwt::is_conditional(&parsed.statement);
    let id = statement_id(text, keyspace.as_deref());
    PREPARED.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.entries.len() >= PREPARED_CACHE_ENTRIES_MAX {
            let mut sequences: Vec<u64> = cache.entries.values().map(|p| p.sequence).collect();
            sequences.sort_unstable();
            let cutoff = sequences[sequences.len() / 2];
            cache.entries.retain(|_, p| p.sequence > cutoff);
        }
        cache.sequence += 1;
        let sequence = cache.sequence;
        let prepared = Prepared { parsed: Arc::new(parsed), text: Arc::from(text), keyspace, sequence, compiled };
        cache.entries.insert(id.clone(), prepared);
    });
    Ok(PreparedInfo { id, variables, pk_indexes, result_columns, conditional })
}

/// Runs prepared statement `id` for the connection's `session` (its role;
/// the statement keeps the keyspace it was prepared in).
pub async fn execute(id: &[u8], session: &Session, options: QueryOptions) -> CqlResult<QueryResult> {
    let started = Instant::now();
    let (parsed, keyspace, compiled) = lookup(id).inspect_err(|_| metrics::record(Op::Other, started, false))?;
    // No named local for the statement's future: one would be kept beside
    // the `timed` future that holds it, doubling the request's state.
    metrics::timed(
        Op::of(&parsed.statement),
        started,
        execute_parsed(&parsed, keyspace.as_deref(), session.user.as_deref(), Some((id, compiled)), options),
    )
    .await
}

/// The text prepared statement `id` was prepared from, if this shard has it.
pub fn prepared_text(id: &[u8]) -> Option<Arc<str>> {
    PREPARED.with(|cache| cache.borrow().entries.get(id).map(|prepared| Arc::clone(&prepared.text)))
}

/// A prepared statement's syntax, keyspace and compiled form.
type Lookup = (Arc<Parsed>, Option<String>, Option<Arc<CompiledSelect>>);

fn lookup(id: &[u8]) -> CqlResult<Lookup> {
    PREPARED.with(|cache| {
        let cache = cache.borrow();
        let prepared = cache.entries.get(id).ok_or_else(|| CqlError::Unprepared(id.to_vec()))?;
        Ok((Arc::clone(&prepared.parsed), prepared.keyspace.clone(), prepared.compiled.clone()))
    })
}

/// The compiled form of SELECT `s` for the current `schema`: the prepared
/// statement's when still current, else compiled now (and kept by the
/// prepared statement `id`, if any, for its next executions).
fn compiled_select(
    schema: &Arc<Schema>,
    s: &Select,
    keyspace: Option<&str>,
    prepared: Option<(&[u8], Option<Arc<CompiledSelect>>)>,
) -> CqlResult<Arc<CompiledSelect>> {
    let (id, cached) = prepared.map_or((None, None), |(id, compiled)| (Some(id), compiled));
    if let Some(compiled) = cached.filter(|c| c.schema_version == schema.version) {
        return Ok(compiled);
    }
    let meta = table(schema, s.keyspace.as_deref(), keyspace, &s.table)?;
    let compiled = Arc::new(select::compile(schema, meta, s)?);
    if let Some(id) = id {
        PREPARED.with(|cache| {
            if let Some(prepared) = cache.borrow_mut().entries.get_mut(id) {
                prepared.compiled = Some(Arc::clone(&compiled));
            }
        });
    }
    Ok(compiled)
}

/// The same 16-byte id on every shard for the same text and keyspace.
fn statement_id(text: &str, keyspace: Option<&str>) -> Bytes {
    let key = format!("{}\u{0}{text}", keyspace.unwrap_or(""));
    Bytes::copy_from_slice(uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, key.as_bytes()).as_bytes())
}

/// Values in marker order, whether sent by position or by name.
fn ordered_values(parsed: &Parsed, options: &mut QueryOptions) -> CqlResult<Vec<BoundValue>> {
    let values = std::mem::take(&mut options.values);
    let values = match options.names.take() {
        None => values,
        Some(names) => {
            let by_name: HashMap<String, BoundValue> =
                names.into_iter().map(|n| n.to_lowercase()).zip(values).collect();
            parsed
                .bind_markers
                .iter()
                .map(|m| {
                    let name = m
                        .name
                        .as_deref()
                        .ok_or_else(|| invalid("Named values were sent for a statement with positional markers"))?;
                    by_name
                        .get(&name.to_lowercase())
                        .cloned()
                        .ok_or_else(|| invalid(format!("No value given for bind marker :{name}")))
                })
                .collect::<CqlResult<Vec<_>>>()?
        }
    };
    if values.len() != parsed.bind_markers.len() {
        return Err(invalid(format!(
            "There were {} markers(?) in CQL but {} bound variables",
            parsed.bind_markers.len(),
            values.len()
        )));
    }
    Ok(values)
}

fn table(schema: &Schema, named: Option<&str>, session: Option<&str>, table: &str) -> CqlResult<Arc<TableMeta>> {
    let keyspace = qualify(named, session)?;
    if schema.keyspace(keyspace).is_none() {
        return Err(invalid(format!("Keyspace {keyspace} does not exist")));
    }
    schema.table(keyspace, table).cloned().ok_or_else(|| invalid(format!("unconfigured table {table}")))
}

/// Runs a statement for role `user`; `prepared` names the prepared
/// statement it came from (its id and compiled form), if any.
async fn execute_parsed(
    parsed: &Parsed,
    keyspace: Option<&str>,
    user: Option<&str>,
    prepared: Option<(&[u8], Option<Arc<CompiledSelect>>)>,
    mut options: QueryOptions,
) -> CqlResult<QueryResult> {
    crate::auth::access::check(&parsed.statement, keyspace, user)?;
    let values = ordered_values(parsed, &mut options)?;
    let bindings = Bindings::of(&values, user);
    let schema = shoal_coordinator::schema();
    match &parsed.statement {
        Statement::Use(name) => {
            if schema.keyspace(name).is_none() {
                return Err(invalid(format!("Keyspace '{name}' does not exist")));
            }
            Ok(QueryResult::SetKeyspace(name.clone()))
        }
        Statement::CreateKeyspace(_)
        | Statement::AlterKeyspace(_)
        | Statement::DropKeyspace(_)
        | Statement::CreateTable(_)
        | Statement::AlterTable(_)
        | Statement::DropTable(_)
        | Statement::CreateType(_)
        | Statement::AlterType(_)
        | Statement::DropType(_)
        | Statement::CreateIndex(_)
        | Statement::CreateView(_)
        | Statement::AlterView(_)
        | Statement::DropView(_)
        | Statement::DropIndex(_)
        | Statement::CreateFunction(_)
        | Statement::CreateAggregate(_)
        | Statement::DropFunction(_) => {
            check_data_centers(&parsed.statement)?;
            crate::replication_guardrails::check(&parsed.statement)?;
            let mut statement = parsed.statement.clone();
            crate::dropped_columns::bind(&mut statement, bindings)?;
            crate::dropped_columns::stamp(&mut statement, clock::next_write_timestamp_us);
            let session = keyspace.map(str::to_string);
            let transition = move |current: &Schema| crate::ddl::apply(current, &statement, session.as_deref());
            // Boxed, as every rare branch here: a future is as large as its
            // largest branch, and a SELECT's is moved several times per
            // request.
            let change = Box::pin(shoal_coordinator::announce_schema_change(transition)).await??;
            if change.is_some() {
                Box::pin(crate::auth::permissions::after_schema_change(&parsed.statement, keyspace, user)).await?;
            }
            Ok(change.map_or(QueryResult::Void, QueryResult::SchemaChange))
        }
        Statement::Describe(d) => Ok(QueryResult::Rows(crate::auth::describe::execute(d, &schema, keyspace, user)?)),
        Statement::Role(role) => {
            let result = Box::pin(crate::auth::roles::execute(role, user)).await?;
            Box::pin(crate::auth::permissions::after_schema_change(&parsed.statement, keyspace, user)).await?;
            Ok(result)
        }
        Statement::Permission(p) => Box::pin(crate::auth::permissions::execute(p, keyspace, user)).await,
        Statement::ServiceLevel(s) => Box::pin(crate::auth::service_levels::execute(s)).await,
        Statement::Truncate(t) => {
            let meta = table(&schema, t.keyspace.as_deref(), keyspace, &t.name)?;
            if crate::system::is_system_keyspace(&meta.keyspace) {
                return Err(invalid("Cannot truncate a system table"));
            }
            if meta.view_of.is_some() {
                return Err(invalid("Cannot TRUNCATE materialized view directly; must truncate base table instead"));
            }
            let timeout = crate::using_timeout::of(t.timeout.as_ref(), bindings)?.unwrap_or(timeouts().truncate);
            let views = schema.keyspace(&meta.keyspace).map(|ks| shoal_schema::view::views_of(ks, &meta.name));
            let view_ids = meta.indexes.iter().map(|i| i.view_id).chain(views.into_iter().flatten().map(|v| v.id));
            for id in std::iter::once(meta.id).chain(view_ids).collect::<Vec<_>>() {
                // ScyllaDB's truncate_exception, a server error a driver
                // may try on another node, not a write timeout.
                Box::pin(shoal_coordinator::truncate(id, timeout)).await.map_err(|e| match e {
                    CoordinatorError::WriteTimeout { .. } => CqlError::Server(format!("Error during truncate: {e}")),
                    other => CqlError::from(other),
                })?;
            }
            Ok(QueryResult::Void)
        }
        Statement::Select(s) => {
            let compiled = compiled_select(&schema, s, keyspace, prepared)?;
            crate::auth::authorizer::check_execute(|| compiled.user_functions(), user)?;
            let page_size = options.page_size.filter(|p| *p > 0).map(|p| p as usize);
            let select_options = SelectOptions {
                bindings: bindings.in_keyspace(&compiled.meta.keyspace),
                page_size,
                paging_state: options.paging_state.clone(),
                now_s: clock::now_s(),
                consistency: options.consistency,
                trace: options.trace.as_ref(),
                timeout: crate::using_timeout::of(s.timeout.as_ref(), bindings)?
                    .or_else(|| crate::auth::service_levels::timeout_of(&schema, user)),
            };
            // Boxed: a SELECT's state is ~4 KB, and inline every request's
            // future, writes included, was that large.
            let rows = Box::pin(select::execute(&compiled, Arc::clone(&schema), s, select_options)).await?;
            // SELECT JSON is the plain SELECT with each row then rendered
            // as one JSON object, so it pages and aggregates alike.
            let meta = &compiled.meta;
            let rows = if s.json { json::rows_to_json(rows, &meta.keyspace, &meta.name)? } else { rows };
            Ok(QueryResult::Rows(rows))
        }
        Statement::Insert(_)
        | Statement::InsertJson(_)
        | Statement::Update(_)
        | Statement::Delete(_)
        | Statement::Batch(_) => {
            if let Statement::Update(s) = &parsed.statement {
                if crate::live_config::is_config_update(s, keyspace) {
                    crate::live_config::update(s, bindings).await?;
                    return Ok(QueryResult::Void);
                }
            }
            let ctx = WriteContext {
                bindings,
                timestamp: options.timestamp.unwrap_or_else(clock::next_write_timestamp_us),
                now_s: clock::now_s(),
            };
            let mut conditions = Vec::new();
            let writes = writes(&schema, &parsed.statement, keyspace, ctx, &mut conditions)?;
            let batch = match &parsed.statement {
                Statement::Batch(b) => Some(b.kind),
                _ => None,
            };
            check_write_consistency(&options, lwt::any_condition(&conditions))?;
            let timeout = crate::using_timeout::of_write(&parsed.statement, bindings)?
                .or_else(|| crate::auth::service_levels::timeout_of(&schema, user));
            apply_or_check(writes, conditions, &options, ctx.timestamp, ctx.now_s, batch, timeout).await
        }
    }
}

/// The partition updates of a modification statement (or a CQL-text batch);
/// each statement, with its condition if it has one, goes to `conditions`.
fn writes(
    schema: &Schema,
    statement: &Statement,
    keyspace: Option<&str>,
    ctx: WriteContext<'_>,
    conditions: &mut Vec<Conditional>,
) -> CqlResult<Vec<Mutation>> {
    let (meta, writes) = match statement {
        Statement::Insert(s) => {
            let meta = writable_table(schema, s.keyspace.as_deref(), keyspace, &s.table)?;
            let writes = vec![modification::insert(&meta, s, ctx.in_keyspace(&meta.keyspace))?];
            (meta, writes)
        }
        Statement::InsertJson(s) => return insert_json_writes(schema, s, keyspace, ctx, conditions),
        Statement::Update(s) => {
            let meta = writable_table(schema, s.keyspace.as_deref(), keyspace, &s.table)?;
            let writes = modification::update(&meta, s, ctx.in_keyspace(&meta.keyspace))?;
            (meta, writes)
        }
        Statement::Delete(s) => {
            let meta = writable_table(schema, s.keyspace.as_deref(), keyspace, &s.table)?;
            let writes = modification::delete(&meta, s, ctx.in_keyspace(&meta.keyspace))?;
            (meta, writes)
        }
        Statement::Batch(batch) => {
            let ctx = match &batch.using.timestamp {
                Some(term) => {
                    let receiver = crate::values::Receiver { name: "[timestamp]", ty: &shoal_schema::CqlType::Bigint };
                    let ts = crate::values::eval_required(term, receiver, ctx.bindings)?;
                    WriteContext {
                        timestamp: i64::from_be_bytes(ts[..].try_into().map_err(|_| invalid("Invalid timestamp"))?),
                        ..ctx
                    }
                }
                None => ctx,
            };
            let mut all = Vec::new();
            for statement in &batch.statements {
                all.extend(writes(schema, statement, keyspace, ctx, conditions)?);
            }
            if batch.using.timestamp.is_some() && lwt::any_condition(conditions) {
                return Err(invalid("Cannot provide custom timestamp for conditional BATCH"));
            }
            // Counter updates take the replica's time (Cassandra's text).
            if batch.using.timestamp.is_some() && batch.kind == BatchKind::Counter {
                return Err(invalid("Cannot provide custom timestamp for counter BATCH"));
            }
            check_batch_kind(batch.kind, schema, &all)?;
            return Ok(all);
        }
        _ => return Err(invalid("Only INSERT, UPDATE and DELETE statements are allowed in a batch")),
    };
    conditions.push(lwt::conditional(&meta, statement, &writes, ctx.bindings)?);
    Ok(writes)
}

/// INSERT JSON as the INSERT it stands for: the JSON's values become bind
/// values after the statement's own (which USING may refer to), and the
/// INSERT binds its columns to them.
fn insert_json_writes(
    schema: &Schema,
    statement: &InsertJson,
    keyspace: Option<&str>,
    ctx: WriteContext<'_>,
    conditions: &mut Vec<Conditional>,
) -> CqlResult<Vec<Mutation>> {
    let meta = writable_table(schema, statement.keyspace.as_deref(), keyspace, &statement.table)?;
    let receiver = Receiver { name: json::JSON_COLUMN, ty: &CqlType::Text };
    let text = eval_required(&statement.json, receiver, ctx.bindings)?;
    // The value was validated as text, so it is UTF-8.
    let text = String::from_utf8_lossy(&text);
    let given = json::insert_values(&meta, &text, statement.default_unset)?;
    let mut values = ctx.bindings.values.to_vec();
    let first = values.len();
    let (columns, json_values): (Vec<String>, Vec<BoundValue>) = given.into_iter().unzip();
    values.extend(json_values);
    let insert = Statement::Insert(Insert {
        keyspace: statement.keyspace.clone(),
        table: statement.table.clone(),
        values: (first..values.len()).map(Term::Bind).collect(),
        columns,
        if_not_exists: statement.if_not_exists,
        using: statement.using.clone(),
    });
    let ctx = WriteContext { bindings: Bindings { values: &values, ..ctx.bindings }, ..ctx };
    writes(schema, &insert, keyspace, ctx, conditions)
}

/// Applies `writes`, or, when some of their statements are conditional,
/// checks the conditions and applies them if all hold.
async fn apply_or_check(
    writes: Vec<Mutation>,
    conditions: Vec<Conditional>,
    options: &QueryOptions,
    timestamp_us: i64,
    now_s: i64,
    batch: Option<BatchKind>,
    timeout: Option<Duration>,
) -> CqlResult<QueryResult> {
    if !lwt::any_condition(&conditions) {
        apply_writes(writes, options.consistency, batch, timeout).await?;
        return Ok(QueryResult::Void);
    }
    lwt::check_single_partition(&conditions, &writes)?;
    // Boxed: the conditional path's state is ~3 KB, and every request's
    // task would otherwise carry (and copy, as it is spawned) that much.
    let (consistency, serial) = (options.consistency, options.serial_consistency);
    Box::pin(lwt::execute(conditions, writes, consistency, serial, timestamp_us, now_s, batch.is_some())).await
}

/// A client's CREATE or ALTER KEYSPACE names only data centers the
/// cluster has (Cassandra's and ScyllaDB's check). Here, not in
/// `ddl::apply`: a schema read back at start, or agreed through Raft,
/// may name data centers not yet seen.
fn check_data_centers(statement: &Statement) -> CqlResult<()> {
    let (name, options) = match statement {
        Statement::CreateKeyspace(s) => (&s.name, &s.options),
        Statement::AlterKeyspace(s) => (&s.name, &s.options),
        _ => return Ok(()),
    };
    let Some(entries) = options.iter().find_map(|(option, value)| match value {
        crate::ast::OptionValue::Map(entries) if option.eq_ignore_ascii_case("replication") => Some(entries),
        _ => None,
    }) else {
        return Ok(());
    };
    let class = entries.iter().find(|(k, _)| k == "class").map_or("NetworkTopologyStrategy", |(_, v)| v.as_str());
    if !class.ends_with("NetworkTopologyStrategy") {
        return Ok(());
    }
    let local = shoal_coordinator::cluster::node().data_center;
    let peers = shoal_coordinator::cluster::peers();
    let known = |dc: &str| dc == local || peers.iter().any(|p| p.data_center == dc);
    match entries.iter().find(|(k, _)| k != "class" && k != "replication_factor" && !known(k)) {
        Some((dc, _)) => Err(CqlError::Config(format!(
            "Unrecognized strategy option {{{dc}}} passed to org.apache.cassandra.locator.NetworkTopologyStrategy for keyspace {name}"
        ))),
        None => Ok(()),
    }
}

/// A batch whose mutations hold more than this is refused (ScyllaDB's
/// `batch_size_fail_threshold_in_kb` default, 1024).
const BATCH_SIZE_FAIL_THRESHOLD_BYTES: usize = 1024 * 1024;

/// The batch's size, then ScyllaDB's (and Cassandra's) rules: a COUNTER
/// batch holds only counter updates, a LOGGED one none, and an UNLOGGED
/// one either kind but not both.
fn check_batch_kind(kind: BatchKind, schema: &Schema, writes: &[Mutation]) -> CqlResult<()> {
    let size_bytes: usize = writes.iter().map(|w| w.update.size_estimate_bytes()).sum();
    if size_bytes > BATCH_SIZE_FAIL_THRESHOLD_BYTES {
        return Err(invalid(format!(
            "Batch too large: size of {} KiB is over the threshold of {} KiB",
            size_bytes / 1024,
            BATCH_SIZE_FAIL_THRESHOLD_BYTES / 1024
        )));
    }
    let is_counter =
        |write: &Mutation| schema.table_by_id(write.table).is_some_and(|t| crate::ddl::is_counter_table(t));
    let counters = writes.iter().any(is_counter);
    let others = !writes.iter().all(is_counter);
    match kind {
        BatchKind::Counter if others => Err(invalid("Cannot include non-counter statement in a counter batch")),
        BatchKind::Logged if counters => Err(invalid("Cannot include a counter statement in a logged batch")),
        _ if counters && others => Err(invalid("Counter and non-counter mutations cannot exist in the same batch")),
        _ => Ok(()),
    }
}

fn writable_table(
    schema: &Schema,
    named: Option<&str>,
    session: Option<&str>,
    name: &str,
) -> CqlResult<Arc<TableMeta>> {
    let meta = table(schema, named, session, name)?;
    if crate::system::is_system_keyspace(&meta.keyspace) {
        return Err(CqlError::Unauthorized(format!("{} keyspace is not user-modifiable.", meta.keyspace)));
    }
    if meta.view_of.is_some() {
        return Err(invalid("Cannot directly modify a materialized view"));
    }
    Ok(meta)
}

/// Applies writes, one mutation per partition: the writes of a batch to
/// one partition merge into one update, so they apply atomically (and
/// survive a crash, or not, together), as in Cassandra. A logged batch of
/// several partitions goes through the batchlog (`coordinator::batchlog`).
/// `timeout` is the statement's own (`USING TIMEOUT`), if it has one.
async fn apply_writes(
    writes: Vec<Mutation>,
    consistency: ConsistencyLevel,
    batch: Option<BatchKind>,
    timeout: Option<Duration>,
) -> CqlResult<()> {
    let writes = if writes.len() > 1 { merge_by_partition(writes) } else { writes };
    let schema = shoal_coordinator::schema();
    let first = writes.first().and_then(|w| schema.table_by_id(w.table));
    let counter = first.is_some_and(|t| crate::ddl::is_counter_table(t));
    // One table lookup for a single write (the one just made); a batch of
    // several looks each up.
    let logged = match writes.len() {
        1 => first.is_some_and(|t| crate::cdc::enabled(t)),
        _ => crate::cdc_log::any_logged(&schema, &writes),
    };
    let (write_type, timeout_default) = match (counter, batch.is_some()) {
        (true, _) => (WriteType::Counter, timeouts().counter_write),
        (false, true) => (WriteType::Batch, timeouts().write),
        (false, false) => (WriteType::Simple, timeouts().write),
    };
    let timeout = timeout.unwrap_or(timeout_default);
    if !counter && logged {
        // Boxed: only writes to CDC-enabled tables carry the log's state.
        return Box::pin(apply_logged_writes(writes, &schema, consistency, batch, write_type, timeout)).await;
    }
    if batch == Some(BatchKind::Logged) && !counter && writes.len() > 1 {
        // Boxed: a batchlog's state machine would make every write's future larger.
        return Ok(Box::pin(shoal_coordinator::mutate_logged(writes, consistency, timeout)).await?);
    }
    let results =
        join_all(writes.into_iter().map(|w| shoal_coordinator::mutate(w, consistency, write_type, timeout))).await;
    for result in results {
        result?;
    }
    Ok(())
}

/// Writes to CDC-enabled tables: each with its log rows (`cdc_log`), sent
/// together (through the batchlog when the batch is logged), then the
/// post-images the log wants.
async fn apply_logged_writes(
    writes: Vec<Mutation>,
    schema: &Schema,
    consistency: ConsistencyLevel,
    batch: Option<BatchKind>,
    write_type: WriteType,
    timeout: Duration,
) -> CqlResult<()> {
    let now_s = clock::now_s();
    let (writes, images) = crate::cdc_log::with_log_rows(schema, writes, consistency, timeout, now_s).await?;
    if batch == Some(BatchKind::Logged) && writes.len() > 1 {
        shoal_coordinator::mutate_logged(writes, consistency, timeout).await?;
    } else {
        let results =
            join_all(writes.into_iter().map(|w| shoal_coordinator::mutate(w, consistency, write_type, timeout))).await;
        results.into_iter().try_for_each(|r| r.map(|_| ()))?;
    }
    images.write(consistency, timeout, now_s).await
}

/// The writes of several statements, one per partition, in first-seen order.
fn merge_by_partition(writes: Vec<Mutation>) -> Vec<Mutation> {
    let mut merged: Vec<Mutation> = Vec::with_capacity(writes.len());
    let mut index: HashMap<(Uuid, PartitionPosition), usize> = HashMap::new();
    for w in writes {
        match index.entry((w.table, w.position.clone())) {
            Entry::Occupied(at) => merged[*at.get()].absorb(w),
            Entry::Vacant(slot) => {
                slot.insert(merged.len());
                merged.push(w);
            }
        }
    }
    merged
}

/// Runs a BATCH request: every statement's updates, applied together.
pub async fn batch(
    kind: BatchKind,
    statements: Vec<(BatchStatement, Vec<BoundValue>)>,
    session: &Session,
    options: QueryOptions,
) -> CqlResult<QueryResult> {
    metrics::timed(Op::Write, Instant::now(), run_batch(kind, statements, session, options)).await
}

async fn run_batch(
    kind: BatchKind,
    statements: Vec<(BatchStatement, Vec<BoundValue>)>,
    session: &Session,
    options: QueryOptions,
) -> CqlResult<QueryResult> {
    let schema = shoal_coordinator::schema();
    let timestamp = options.timestamp.unwrap_or_else(clock::next_write_timestamp_us);
    let now = clock::now_s();
    let mut all = Vec::new();
    let mut conditions = Vec::new();
    for (statement, values) in statements {
        let (parsed, keyspace) = match statement {
            BatchStatement::Query(text) => {
                (Arc::new(parse(&text, session.keyspace.as_deref())?), session.keyspace.clone())
            }
            BatchStatement::Prepared(id) => {
                let (parsed, keyspace, _) = lookup(&id)?;
                (parsed, keyspace)
            }
        };
        crate::auth::access::check(&parsed.statement, keyspace.as_deref(), session.user.as_deref())?;
        let statement = &parsed.statement;
        if !matches!(
            statement,
            Statement::Insert(_) | Statement::InsertJson(_) | Statement::Update(_) | Statement::Delete(_)
        ) {
            return Err(invalid("Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed."));
        }
        let mut statement_options = QueryOptions { values, ..QueryOptions::default() };
        let values = ordered_values(&parsed, &mut statement_options)?;
        let ctx = WriteContext { bindings: Bindings::of(&values, session.user.as_deref()), timestamp, now_s: now };
        all.extend(writes(&schema, &parsed.statement, keyspace.as_deref(), ctx, &mut conditions)?);
    }
    check_batch_kind(kind, &schema, &all)?;
    check_write_consistency(&options, lwt::any_condition(&conditions))?;
    apply_or_check(all, conditions, &options, timestamp, now, Some(kind), None).await
}

/// Cassandra's rules on serial consistency levels for writes: SERIAL and
/// LOCAL_SERIAL are for conditional writes' serial phase (the serial
/// consistency), never the consistency of a write.
fn check_write_consistency(options: &QueryOptions, conditional: bool) -> CqlResult<()> {
    match Some(options.consistency).filter(|c| c.is_serial()) {
        Some(level) if conditional => Err(invalid(format!(
            "{level} is not supported as conditional update commit consistency. Use ANY if you mean \"make sure it \
             is accepted but I don't care how many replicas commit it for non-SERIAL reads\""
        ))),
        Some(_) => Err(invalid("You must use conditional updates for serializable writes")),
        None if conditional && options.serial_consistency.is_some_and(|s| !s.is_serial()) => {
            Err(invalid("Invalid consistency for conditional update. Must be one of SERIAL or LOCAL_SERIAL"))
        }
        None => Ok(()),
    }
}
