//! One client connection, on the shard it was placed on.
//!
//! A reader loop splits frames off the socket and runs each request as its
//! own task, so many streams are in flight at once and answer out of order as
//! they complete. Responses go through one writer task that sends whatever
//! has queued up in a single write. A request counts as in flight until its
//! response is written to the socket, and in-flight requests per connection
//! are bounded: past the bound the reader stops reading, so a client that
//! sends without reading cannot grow the server's memory. Requests run in
//! the CPU scheduling group of the role's service level; while that group
//! is ahead of other levels' by more than its share, the reader waits
//! before it starts the next request (docs/scheduling.md).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use futures_channel::mpsc;
use futures_util::{FutureExt, StreamExt};
use shoal_cql::clients;
use shoal_cql::processor::{self, QueryOptions, Session};
use shoal_cql::traces::SharedTrace;
use shoal_cql::{BatchStatement, CqlError, QueryResult};
use shoal_runtime::net::{BufResult, TcpStream};
use shoal_schema::{SchemaChange as SchemaEvent, SchemaChangeKind, SchemaChangeTarget as EventTarget};
use shoal_tls::Socket;

use crate::authentication::Login;
use crate::compression::Compression;
use crate::frame::{begin_response, begin_response_with, finish_frame, FrameDecoder, Opcode, PROTOCOL_VERSION};
use crate::metrics::{InFlight, OpenConnection};
use crate::request::{self, Request};
use crate::request_trace;
use crate::response::{self, ColumnSpec, ErrorBody, ErrorKind, RowsWriter, WriteType};

/// Requests one connection may have running at once (the protocol allows
/// 32768 streams; drivers use far fewer).
const IN_FLIGHT_REQUESTS_MAX: usize = 1024;
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// ScyllaDB's `SCYLLA_LWT_ADD_METADATA_MARK` extension: the bit set in a
/// PREPARED result's metadata flags when the statement is conditional, for
/// clients that named the extension in STARTUP (drivers route such
/// statements to the partition's primary replica).
const LWT_ADD_METADATA_MARK: &str = "SCYLLA_LWT_ADD_METADATA_MARK";
const LWT_METADATA_BIT: u32 = 0x8000_0000;

/// What every connection of the node shares, fixed at start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub max_frame_bytes: usize,
    pub shard_aware_port: u16,
    /// The shard-aware port that speaks TLS, if any (ScyllaDB's
    /// `SCYLLA_SHARD_AWARE_PORT_SSL`).
    pub shard_aware_port_ssl: Option<u16>,
    pub nr_shards: usize,
    pub sharding_ignore_msb: u32,
    /// Whether clients must log in (`authenticator`).
    pub authenticator: shoal_cql::auth::Authenticator,
    /// A client that has not logged in after this long is hung up on.
    pub login_timeout: std::time::Duration,
}

struct Connection {
    config: Arc<ServerConfig>,
    /// The client's address, for traces.
    client: IpAddr,
    /// Requests read and not yet answered on the socket; shared with the
    /// writer, which must not hold the connection itself (its sender would
    /// then keep the writer alive forever).
    in_flight: Rc<InFlight>,
    session: RefCell<Session>,
    login: Login,
    compression: Cell<Option<Compression>>,
    /// The client negotiated [`LWT_ADD_METADATA_MARK`].
    lwt_mark: Cell<bool>,
    out: mpsc::UnboundedSender<Outgoing>,
    /// Schema listener id, once the client REGISTERed for SCHEMA_CHANGE.
    listener: Cell<Option<u64>>,
    /// Topology listener id, once the client REGISTERed for
    /// TOPOLOGY_CHANGE or STATUS_CHANGE.
    topology_listener: Cell<Option<u64>>,
    /// This connection's row of `system.clients`, while it is open.
    listed: clients::Registration,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(id) = self.listener.get() {
            shoal_coordinator::unsubscribe_schema_changes(id);
        }
        if let Some(id) = self.topology_listener.get() {
            shoal_coordinator::unsubscribe_topology_changes(id);
        }
    }
}

/// Serves `stream` until the client closes it or sends a broken frame;
/// with `tls`, after the TLS handshake.
pub async fn run(stream: TcpStream, config: Arc<ServerConfig>, tls: Option<shoal_tls::Acceptor>) {
    let _open = OpenConnection::new();
    let _ = stream.set_nodelay(true);
    let address = stream.peer_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let client = address.ip();
    let socket = match shoal_tls::accept(tls.as_ref(), stream).await {
        Ok(socket) => socket,
        Err(e) => {
            tracing::debug!("CQL connection from {client} refused: {e}");
            return;
        }
    };
    let tls = socket
        .negotiated()
        .map(|(protocol, cipher_suite)| clients::TlsInfo { protocol: protocol.to_string(), cipher_suite });
    let listed = clients::Registration::open(address, tls);
    let (reader, writer) = socket.into_split();
    let (out, frames) = mpsc::unbounded();
    let (written, mut written_rx) = mpsc::unbounded();
    let in_flight = Rc::new(InFlight::default());
    shoal_runtime::spawn(write_loop(writer, frames, Rc::clone(&in_flight), written));
    let login = Login::new(config.authenticator, config.login_timeout);
    let connection = Rc::new(Connection {
        login,
        config,
        client,
        in_flight,
        session: RefCell::new(Session::default()),
        compression: Cell::new(None),
        lwt_mark: Cell::new(false),
        out,
        listener: Cell::new(None),
        topology_listener: Cell::new(None),
        listed,
    });
    if let Err(e) = read_loop(reader, &connection, &mut written_rx).await {
        tracing::debug!("connection closed: {e}");
    }
}

/// A frame to write; `answers` says whether it completes a request (events
/// and connection-level errors do not).
struct Outgoing {
    frame: Vec<u8>,
    answers: bool,
}

async fn write_loop(
    mut writer: Socket,
    mut frames: mpsc::UnboundedReceiver<Outgoing>,
    in_flight: Rc<InFlight>,
    written: mpsc::UnboundedSender<()>,
) {
    while let Some(first) = frames.next().await {
        let mut answered = usize::from(first.answers);
        let mut batch = first.frame;
        while let Ok(next) = frames.try_recv() {
            answered += usize::from(next.answers);
            batch.extend_from_slice(&next.frame);
        }
        let BufResult(result, _) = writer.write_all(batch).await;
        if result.is_err() {
            return;
        }
        in_flight.answered(answered);
        // The reader may be gone (connection closing); nobody to wake then.
        let _ = written.unbounded_send(());
    }
}

async fn read_loop(
    mut reader: Socket,
    connection: &Rc<Connection>,
    written: &mut mpsc::UnboundedReceiver<()>,
) -> std::io::Result<()> {
    let decoder = FrameDecoder::new(connection.config.max_frame_bytes);
    let mut pending = BytesMut::new();
    let mut buffer = Vec::with_capacity(READ_BUFFER_BYTES);
    loop {
        while connection.in_flight.get() >= IN_FLIGHT_REQUESTS_MAX {
            if written.next().await.is_none() {
                return Ok(());
            }
        }
        buffer.clear();
        let read = reader.read_appending(buffer, READ_BUFFER_BYTES);
        let BufResult(read, returned) = match connection.login.time_left() {
            None => read.await,
            Some(left) => match shoal_runtime::time::timeout(left, read).await {
                Ok(done) => done,
                Err(_) => {
                    tracing::debug!("CQL client {} did not log in in time", connection.client);
                    return Ok(());
                }
            },
        };
        buffer = returned;
        if read? == 0 {
            return Ok(());
        }
        pending.extend_from_slice(&buffer);
        loop {
            let frame = match decoder.decode(&mut pending) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    // The stream is out of step (or speaks another version):
                    // answer on the offending stream, then hang up.
                    let mut frame = Vec::new();
                    if response::encode_frame_error(&mut frame, &e).is_ok() {
                        let _ = connection.out.unbounded_send(Outgoing { frame, answers: false });
                    }
                    return Ok(());
                }
            };
            connection.in_flight.read_one();
            // The role's service level's group; when that group has had
            // more than its share beside other levels' requests, the next
            // request waits for them (the one place a request waits for
            // the CPU scheduler; a flag read when no level exists).
            let group = connection.statement_group();
            if shoal_runtime::sched::statement_ahead(group) {
                shoal_runtime::sched::give_way(group).await;
            }
            let connection = Rc::clone(connection);
            let stream = frame.header.stream;
            // The request's state (KBs) is boxed as it is made, so it is
            // copied once, into the box; the panic guard, the answer and
            // the task around it move a pointer. (Built inside an `async`
            // block instead, it was made on the stack and copied again
            // into the block's state on the first poll.)
            let handling = Box::pin(handle(Rc::clone(&connection), frame));
            // In its statement scheduling group: its CPU time is
            // accounted there, and background groups give the core back
            // while requests are under way (`shoal_runtime::sched`).
            let mut request = shoal_runtime::sched::in_group(
                group,
                contained(handling).map(move |response| connection.send(stream, response)),
            );
            // Most requests (a read from memtables, a write acknowledged
            // before its fsync) finish without waiting: run them here, and
            // pay for a task of their own only when they must wait.
            if poll_once(Pin::new(&mut request)).await.is_pending() {
                shoal_runtime::spawn(request);
            }
        }
    }
}

/// The response of `handling`, or a ServerError when it panics: a bug in
/// one request fails that request, as ScyllaDB's `on_internal_error` does,
/// and the connection (with its other requests) goes on. A combinator, not
/// an `async fn`, which would hold `handling` twice (its argument and the
/// future it awaits), doubling every request's state.
fn contained(handling: impl Future<Output = Response>) -> impl Future<Output = Response> {
    AssertUnwindSafe(handling).catch_unwind().map(|outcome| match outcome {
        Ok(response) => response,
        Err(panic) => {
            let message = match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
                (Some(text), _) => text.to_string(),
                (_, Some(text)) => text.clone(),
                _ => "a panic".to_string(),
            };
            tracing::error!("a CQL request panicked: {message}");
            error_response(ErrorBody::server(format!("internal error: {message}")))
        }
    })
}

/// Polls `future` once, with the calling task's waker. A future that
/// answers Pending registers that waker, and again the task's own when it
/// is spawned and polled there, so only the latest poll's waker is woken.
async fn poll_once<F: Future + ?Sized>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

/// A response body and its opcode; `compressed` is false only for the
/// answers that precede compression being in force (STARTUP's READY).
struct Response {
    opcode: Opcode,
    body: Vec<u8>,
    compressed: bool,
    /// The trace session of a request sent with the TRACING flag.
    tracing_id: Option<[u8; 16]>,
}

impl Connection {
    /// The scheduling group of the logged-in role's requests: its
    /// effective service level's (ScyllaDB's per-level statement groups),
    /// `Statements` when it has none or no level exists.
    fn statement_group(&self) -> shoal_runtime::Group {
        if !shoal_runtime::sched::service_levels_defined() {
            return shoal_runtime::Group::Statements;
        }
        let session = self.session.borrow();
        shoal_cql::auth::service_levels::group_of(&shoal_coordinator::schema(), session.user.as_deref())
    }

    /// A USE that succeeded becomes the connection's keyspace.
    fn apply_use(&self, result: &QueryResult) {
        if let QueryResult::SetKeyspace(keyspace) = result {
            self.session.borrow_mut().keyspace = Some(keyspace.clone());
        }
    }

    fn send(&self, stream: i16, response: Response) {
        let mut out = Vec::with_capacity(response.body.len() + 32);
        let no_warnings: [&str; 0] = [];
        let start = begin_response_with(&mut out, stream, response.opcode, response.tracing_id.as_ref(), &no_warnings);
        out.extend_from_slice(&response.body);
        let compression = if response.compressed { self.compression.get() } else { None };
        if finish_frame(&mut out, start, compression).is_err() {
            // Only a body over 4 GiB fails here; answer that instead.
            out.clear();
            let start = begin_response(&mut out, stream, Opcode::Error);
            ErrorBody::server("response too large for one frame").write(&mut out);
            let _ = finish_frame(&mut out, start, None);
        }
        // The writer only stops when the socket is gone; nothing to do then.
        let _ = self.out.unbounded_send(Outgoing { frame: out, answers: true });
    }
}

fn reply(opcode: Opcode, body: Vec<u8>) -> Response {
    Response { opcode, body, compressed: true, tracing_id: None }
}

fn error_response(error: ErrorBody) -> Response {
    let mut body = Vec::new();
    error.write(&mut body);
    reply(Opcode::Error, body)
}

async fn handle(connection: Rc<Connection>, frame: crate::frame::Frame) -> Response {
    let compression = connection.compression.get();
    let flags = frame.header.flags;
    let opcode = frame.header.opcode;
    let traced = frame.header.wants_tracing();
    let body = match frame.into_body(compression, connection.config.max_frame_bytes) {
        Ok(body) => body,
        Err(e) => return error_response(ErrorBody::protocol(e.to_string())),
    };
    let request = match Request::decode_with_flags(flags, opcode, body) {
        Ok((request, _payload)) => request,
        Err(e) => return error_response(ErrorBody::protocol(e.to_string())),
    };
    let sampled = !traced && shoal_cql::traces::sampled();
    let trace = (traced || sampled)
        .then(|| request_trace::begin(connection.client, &request))
        .flatten()
        .map(|trace| Rc::new(RefCell::new(trace)));
    if let Some(trace) = &trace {
        let event = format!("Executing {} on shard {}", opcode_name(opcode), shoal_runtime::this_shard());
        trace.borrow_mut().event(event);
    }
    let mut response = match execute(&connection, request, trace.clone()).await {
        Ok(response) => response,
        Err(e) => error_response(to_error_body(e)),
    };
    if let Some(shared) = trace {
        shared.borrow_mut().event(match response.opcode {
            Opcode::Error => "Request failed",
            _ => "Request complete",
        });
        // A sampled request's client did not ask for the session's id.
        response.tracing_id = traced.then(|| shared.borrow().id());
        // The statement that shared it has finished, and dropped its share.
        if let Ok(trace) = Rc::try_unwrap(shared) {
            trace.into_inner().finish();
        }
    }
    response
}

fn opcode_name(code: u8) -> &'static str {
    Opcode::from_u8(code).map_or("request", Opcode::name)
}

async fn execute(
    connection: &Rc<Connection>,
    request: Request,
    trace: Option<SharedTrace>,
) -> Result<Response, CqlError> {
    connection.login.admit(request.opcode())?;
    match request {
        Request::Startup { options } => startup(connection, &options),
        Request::Options => Ok(reply(Opcode::Supported, supported(&connection.config))),
        Request::Register { events } => {
            register(connection, &events);
            Ok(reply(Opcode::Ready, Vec::new()))
        }
        Request::AuthResponse { token } => {
            // Boxed, as PREPARE's and BATCH's: a request's future is as large
            // as its largest branch, and QUERY's and EXECUTE's are moved
            // several times per request.
            let user = Box::pin(connection.login.authenticate(token.as_deref())).await?;
            connection.listed.logged_in(&user);
            connection.session.borrow_mut().user = Some(user.into());
            let mut body = Vec::new();
            response::write_auth_success(&mut body, None);
            Ok(reply(Opcode::AuthSuccess, body))
        }
        Request::Prepare { query } => {
            let session = connection.session.borrow().clone();
            let info = Box::pin(processor::prepare(&query, &session)).await?;
            let bind: Vec<ColumnSpec<'_>> = info.variables.iter().map(spec).collect();
            let result: Vec<ColumnSpec<'_>> = info.result_columns.iter().map(spec).collect();
            let prepared = response::Prepared {
                id: &info.id,
                bind_columns: &bind,
                pk_indexes: &info.pk_indexes,
                result_columns: Some(&result),
                extra_flags: if info.conditional && connection.lwt_mark.get() { LWT_METADATA_BIT as i32 } else { 0 },
            };
            let mut body = Vec::new();
            response::write_prepared(&mut body, &prepared);
            Ok(reply(Opcode::Result, body))
        }
        Request::Query { query, params } => {
            let skip_metadata = params.skip_metadata;
            let session = connection.session.borrow().clone();
            let result = processor::query(&query, &session, options(params, trace)).await?;
            connection.apply_use(&result);
            Ok(reply(Opcode::Result, encode_result(&result, skip_metadata)))
        }
        Request::Execute { id, params } => {
            let skip_metadata = params.skip_metadata;
            let session = connection.session.borrow().clone();
            let result = processor::execute(&id, &session, options(params, trace)).await?;
            connection.apply_use(&result);
            Ok(reply(Opcode::Result, encode_result(&result, skip_metadata)))
        }
        Request::Batch(batch) => {
            let kind = match batch.batch_type {
                request::BatchType::Logged => shoal_cql::ast::BatchKind::Logged,
                request::BatchType::Unlogged => shoal_cql::ast::BatchKind::Unlogged,
                request::BatchType::Counter => shoal_cql::ast::BatchKind::Counter,
            };
            let statements = batch
                .statements
                .into_iter()
                .map(|s| {
                    let statement = match s.query {
                        request::BatchQuery::Query(text) => BatchStatement::Query(text),
                        request::BatchQuery::Prepared(id) => BatchStatement::Prepared(id),
                    };
                    (statement, s.values)
                })
                .collect();
            let session = connection.session.borrow().clone();
            let options = QueryOptions {
                timestamp: batch.timestamp,
                consistency: batch.consistency,
                serial_consistency: batch.serial_consistency,
                ..QueryOptions::default()
            };
            let result = Box::pin(processor::batch(kind, statements, &session, options)).await?;
            Ok(reply(Opcode::Result, encode_result(&result, false)))
        }
    }
}

fn startup(connection: &Connection, options: &HashMap<String, String>) -> Result<Response, CqlError> {
    if let Some(name) = options.get("COMPRESSION") {
        let compression = Compression::from_name(name).ok_or_else(|| {
            CqlError::Protocol(format!("Unknown compression algorithm: {name}; this node supports lz4 and snappy"))
        })?;
        connection.compression.set(Some(compression));
    }
    connection.lwt_mark.set(options.contains_key(LWT_ADD_METADATA_MARK));
    let (opcode, mut body) = (Opcode::Ready, Vec::new());
    let (opcode, stage) = match connection.login.started() {
        true => {
            response::write_authenticate(&mut body, shoal_cql::auth::Authenticator::PASSWORD_CLASS);
            (Opcode::Authenticate, clients::Stage::Authenticating)
        }
        false => (opcode, clients::Stage::Ready),
    };
    connection.listed.started(PROTOCOL_VERSION, options, stage);
    // READY (or AUTHENTICATE) itself goes out uncompressed: the client switches after it.
    Ok(Response { opcode, body, compressed: false, tracing_id: None })
}

fn supported(config: &ServerConfig) -> Vec<u8> {
    let shard = shoal_runtime::this_shard().to_string();
    let mut options: Vec<(&str, Vec<String>)> = vec![
        ("CQL_VERSION", vec![shoal_cql::system::CQL_VERSION.to_string()]),
        ("COMPRESSION", vec!["lz4".to_string(), "snappy".to_string()]),
        ("PROTOCOL_VERSIONS", vec!["4/v4".to_string()]),
        ("SCYLLA_SHARD", vec![shard]),
        ("SCYLLA_NR_SHARDS", vec![config.nr_shards.to_string()]),
        ("SCYLLA_PARTITIONER", vec!["org.apache.cassandra.dht.Murmur3Partitioner".to_string()]),
        ("SCYLLA_SHARDING_ALGORITHM", vec!["biased-token-round-robin".to_string()]),
        ("SCYLLA_SHARDING_IGNORE_MSB", vec![config.sharding_ignore_msb.to_string()]),
        ("SCYLLA_SHARD_AWARE_PORT", vec![config.shard_aware_port.to_string()]),
        ("SCYLLA_SHARD_AWARE_PORT_SSL", config.shard_aware_port_ssl.iter().map(u16::to_string).collect()),
        (LWT_ADD_METADATA_MARK, vec![format!("LWT_OPTIMIZATION_META_BIT_MASK={LWT_METADATA_BIT}")]),
    ];
    // An option without values is not offered (no TLS shard-aware port).
    options.retain(|(_, values)| !values.is_empty());
    let mut body = Vec::new();
    response::write_supported(&mut body, &options);
    body
}

fn register(connection: &Rc<Connection>, events: &[String]) {
    let wants = |name: &str| events.iter().any(|e| e == name);
    if wants("SCHEMA_CHANGE") && connection.listener.get().is_none() {
        let send = event_sender(connection);
        let id = shoal_coordinator::subscribe_schema_changes(Box::new(move |change: &SchemaEvent| {
            send(&response::Event::SchemaChange(schema_change(change)));
        }));
        connection.listener.set(Some(id));
    }
    let (topology, status) = (wants("TOPOLOGY_CHANGE"), wants("STATUS_CHANGE"));
    if (topology || status) && connection.topology_listener.get().is_none() {
        let send = event_sender(connection);
        let id = shoal_coordinator::subscribe_topology_changes(Box::new(move |event| {
            use response::{Event, StatusChangeType, TopologyChangeType};
            use shoal_coordinator::TopologyEvent;
            let event = match *event {
                TopologyEvent::NewNode(address) if topology => {
                    Event::TopologyChange { change: TopologyChangeType::NewNode, address }
                }
                TopologyEvent::RemovedNode(address) if topology => {
                    Event::TopologyChange { change: TopologyChangeType::RemovedNode, address }
                }
                TopologyEvent::Up(address) if status => Event::StatusChange { change: StatusChangeType::Up, address },
                TopologyEvent::Down(address) if status => {
                    Event::StatusChange { change: StatusChangeType::Down, address }
                }
                _ => return,
            };
            send(&event);
        }));
        connection.topology_listener.set(Some(id));
    }
}

/// Sends an event to this connection's client (on the event stream).
fn event_sender(connection: &Connection) -> impl Fn(&response::Event) + 'static {
    let out = connection.out.clone();
    let compression = connection.compression.get();
    move |event| {
        let mut body = Vec::new();
        response::write_event(&mut body, event);
        let mut frame = Vec::new();
        let start = begin_response(&mut frame, crate::frame::EVENT_STREAM, Opcode::Event);
        frame.extend_from_slice(&body);
        if finish_frame(&mut frame, start, compression).is_ok() {
            let _ = out.unbounded_send(Outgoing { frame, answers: false });
        }
    }
}

fn schema_change(change: &SchemaEvent) -> response::SchemaChange {
    let kind = match change.kind {
        SchemaChangeKind::Created => response::SchemaChangeType::Created,
        SchemaChangeKind::Updated => response::SchemaChangeType::Updated,
        SchemaChangeKind::Dropped => response::SchemaChangeType::Dropped,
    };
    let target = match &change.target {
        EventTarget::Keyspace(keyspace) => response::SchemaChangeTarget::Keyspace { keyspace: keyspace.clone() },
        EventTarget::Table { keyspace, table } => {
            response::SchemaChangeTarget::Table { keyspace: keyspace.clone(), table: table.clone() }
        }
        EventTarget::Type { keyspace, name } => {
            response::SchemaChangeTarget::Type { keyspace: keyspace.clone(), name: name.clone() }
        }
        EventTarget::Function { keyspace, name, arg_types } => response::SchemaChangeTarget::Function {
            keyspace: keyspace.clone(),
            name: name.clone(),
            arg_types: arg_types.clone(),
        },
        EventTarget::Aggregate { keyspace, name, arg_types } => response::SchemaChangeTarget::Aggregate {
            keyspace: keyspace.clone(),
            name: name.clone(),
            arg_types: arg_types.clone(),
        },
    };
    response::SchemaChange { change: kind, target }
}

fn spec(column: &shoal_cql::ColumnSpec) -> ColumnSpec<'_> {
    ColumnSpec { keyspace: &column.keyspace, table: &column.table, name: &column.name, ty: &column.ty }
}

fn options(params: request::QueryParams, trace: Option<SharedTrace>) -> QueryOptions {
    QueryOptions {
        values: params.values,
        names: params.names,
        page_size: params.page_size,
        paging_state: params.paging_state,
        timestamp: params.timestamp,
        consistency: params.consistency,
        serial_consistency: params.serial_consistency,
        trace,
    }
}

fn encode_result(result: &QueryResult, skip_metadata: bool) -> Vec<u8> {
    let mut body = Vec::with_capacity(encoded_size_hint(result, skip_metadata));
    match result {
        QueryResult::Void => response::write_void(&mut body),
        QueryResult::SetKeyspace(keyspace) => response::write_set_keyspace(&mut body, keyspace),
        QueryResult::SchemaChange(change) => response::write_schema_change_result(&mut body, &schema_change(change)),
        QueryResult::Rows(rows) => {
            let columns: Vec<ColumnSpec<'_>> = rows.columns.iter().map(spec).collect();
            let mut writer = RowsWriter::new(&mut body, &columns, skip_metadata);
            for row in &rows.rows {
                for cell in row {
                    writer.push_cell(cell.as_deref());
                }
            }
            // Every row has one cell per column by construction.
            let _ = writer.finish(rows.paging_state.as_deref());
        }
    }
    body
}

/// About the bytes a result encodes to, so its buffer is allocated once
/// rather than grown (and copied) a doubling at a time.
fn encoded_size_hint(result: &QueryResult, skip_metadata: bool) -> usize {
    const FIXED_BYTES: usize = 64;
    let QueryResult::Rows(rows) = result else { return FIXED_BYTES };
    let cells: usize = rows.rows.iter().flatten().map(|cell| 4 + cell.as_ref().map_or(0, |c| c.len())).sum();
    let metadata = match skip_metadata {
        true => 0,
        false => rows.columns.iter().map(|c| c.keyspace.len() + c.table.len() + c.name.len() + 16).sum(),
    };
    FIXED_BYTES + metadata + cells + rows.paging_state.as_ref().map_or(0, |p| p.len() + 4)
}

fn to_error_body(error: CqlError) -> ErrorBody {
    let message = error.to_string();
    let kind = match error {
        CqlError::Syntax(_) => ErrorKind::SyntaxError,
        CqlError::Invalid(_) => ErrorKind::Invalid,
        CqlError::AlreadyExists { keyspace, table, .. } => ErrorKind::AlreadyExists { keyspace, table },
        CqlError::Unprepared(id) => ErrorKind::Unprepared { id: Bytes::from(id) },
        CqlError::Unauthorized(_) => ErrorKind::Unauthorized,
        CqlError::BadCredentials(_) => ErrorKind::BadCredentials,
        CqlError::Config(_) => ErrorKind::ConfigError,
        CqlError::Protocol(_) => ErrorKind::ProtocolError,
        CqlError::Overloaded(_) => ErrorKind::Overloaded,
        CqlError::Server(_) => ErrorKind::ServerError,
        CqlError::FunctionFailure { keyspace, function, arg_types, .. } => {
            ErrorKind::FunctionFailure { keyspace, function, arg_types }
        }
        CqlError::WriteTimeout { consistency, write_type, received, block_for, .. } => ErrorKind::WriteTimeout {
            consistency: consistency.code(),
            received: count(received),
            block_for: count(block_for),
            write_type: match write_type {
                shoal_coordinator::WriteType::Simple => WriteType::Simple,
                shoal_coordinator::WriteType::Batch => WriteType::Batch,
                shoal_coordinator::WriteType::Counter => WriteType::Counter,
                shoal_coordinator::WriteType::Cas => WriteType::Cas,
            },
        },
        CqlError::ReadTimeout { consistency, received, block_for, data_present, .. } => ErrorKind::ReadTimeout {
            consistency: consistency.code(),
            received: count(received),
            block_for: count(block_for),
            data_present,
        },
        CqlError::Unavailable { consistency, required, alive, .. } => {
            ErrorKind::Unavailable { consistency: consistency.code(), required: count(required), alive: count(alive) }
        }
    };
    ErrorBody::new(kind, message)
}

/// A replica count as the protocol's `[int]`.
fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_panics_is_answered_with_a_server_error() {
        let answered = contained(async { panic!("an invariant broke") }).now_or_never();
        let response = answered.expect("a panic is answered at once");
        assert_eq!(response.opcode, Opcode::Error);
        let text = String::from_utf8_lossy(&response.body);
        assert!(text.contains("internal error: an invariant broke"), "{text}");
        let fine = contained(async { reply(Opcode::Ready, Vec::new()) }).now_or_never().expect("ready");
        assert_eq!(fine.opcode, Opcode::Ready);
    }
}
