//! The messaging service (ScyllaDB's `messaging_service`): each shard's
//! connections to other nodes' shards, requests answered within their
//! verb's timeout, and the serving side of the storage port.
//!
//! Connections go shard to shard. Shard s of this node sends to shard t of
//! a peer over a connection of its own, opened on first use with a
//! [`Hello`], so a message lands on the shard that owns its data with no
//! hop in between (ScyllaDB's shard-aware RPC). A connection carries its
//! opener's requests one way and their answers back; the peer sends its own
//! requests over its own connections. The listener accepts on any shard,
//! reads the Hello, and moves the connection to the shard it names before
//! answering it. With internode encryption ([`crate::encryption`]) a
//! connection to a peer goes to its TLS port when the policy asks, and
//! the TLS listener's handshake runs before the Hello is read; the
//! connection then moves with its TLS session.
//!
//! Handlers are registered per verb on every shard ([`register`]); a
//! request whose verb has none is answered with a failure, and so is one
//! whose handler fails or panics: nothing a peer sends leaves a request
//! unanswered or its in-flight slot held. Bytes that do not decode close
//! that connection with a log line naming the peer; the node goes on. A
//! connection that closes fails the requests waiting on it, and the next
//! request opens a new one.
//!
//! Queues are bounded: a connection holds at most [`QUEUED_BYTES_MAX`] of
//! requests not yet written (a slow or stuck peer makes further requests
//! fail at once with [`MessagingError::Overloaded`]); an incoming
//! connection runs at most [`IN_FLIGHT_REQUESTS_MAX`] requests and stops
//! reading while more than [`QUEUED_BYTES_MAX`] of answers wait to be
//! written (a caller that does not read is held back by TCP). A connection
//! whose write fails is closed, and the next request opens a new one.

use hashbrown::HashMap;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::{FutureExt, LocalBoxFuture, Shared};
use shoal_runtime::net::{BufResult, Placement, TcpListener, TcpStream};
use shoal_runtime::time::timeout;
use shoal_tls::Socket;
use thiserror::Error;
use uuid::Uuid;

use crate::encryption;
use crate::frame::{self, Frame, FrameError, Kind};
use crate::hello::{Hello, HelloError, Welcome, PROTOCOL_VERSION};
use crate::outbox::{write_loop, Outbox};
use crate::requests::{Answer, Failure, Requests};
use crate::verb::Verb;

/// How long opening a TCP connection to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Requests a connection runs at once before its reader waits.
pub const IN_FLIGHT_REQUESTS_MAX: usize = 1024;
/// Request bytes a connection queues for writing before it refuses more.
pub const QUEUED_BYTES_MAX: usize = 64 << 20;
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// This node, as its handshakes present it. Set once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub cluster_name: String,
    pub host_id: Uuid,
    pub address: IpAddr,
    pub storage_port: u16,
    pub shard_count: u16,
}

static IDENTITY: OnceLock<Identity> = OnceLock::new();

/// Sets this node's identity; call once, before any shard sends or serves.
pub fn set_identity(identity: Identity) {
    assert!(identity.shard_count > 0);
    // A second call (several nodes in one test process) keeps the first.
    let _ = IDENTITY.set(identity);
}

fn identity() -> &'static Identity {
    IDENTITY.get().expect("messaging::set_identity is called at start")
}

/// Who sent a request: the caller's handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub host_id: Uuid,
    /// Its storage port's address: where it answers requests.
    pub address: SocketAddr,
    pub shard: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MessagingError {
    #[error("cannot connect to {peer}: {message}")]
    Connect { peer: SocketAddr, message: String },
    #[error("{peer} refused the handshake: {message}")]
    Refused { peer: SocketAddr, message: String },
    #[error("no answer to {verb:?} from {peer} within {timeout_ms} ms")]
    Timeout { verb: Verb, peer: SocketAddr, timeout_ms: u128 },
    #[error("the connection to {peer} closed")]
    Closed { peer: SocketAddr },
    #[error("{peer} failed the request: {message}")]
    Failed { peer: SocketAddr, message: String },
    #[error("{queued_bytes} bytes of requests to {peer} wait to be written: refusing more")]
    Overloaded { peer: SocketAddr, queued_bytes: usize },
}

/// Answers one verb's requests: the payload of the response, or why not.
pub type Handler = Rc<dyn Fn(Caller, Bytes) -> LocalBoxFuture<'static, Result<Bytes, String>>>;

type Connecting = Shared<LocalBoxFuture<'static, Result<Rc<Outgoing>, MessagingError>>>;

#[derive(Default)]
struct Messaging {
    /// Per (peer storage address, peer shard): the connection, opened or
    /// opening. This map, the handlers' and each connection's waiting
    /// requests are looked up on every request: foldhash, not SipHash.
    connections: RefCell<HashMap<(SocketAddr, u16), Connecting>>,
    handlers: RefCell<HashMap<Verb, Handler>>,
}

thread_local! {
    static LOCAL: Rc<Messaging> = Rc::default();
}

fn local() -> Rc<Messaging> {
    LOCAL.with(Rc::clone)
}

/// Makes `handler` answer `verb`'s requests that arrive on this shard.
pub fn register(verb: Verb, handler: Handler) {
    local().handlers.borrow_mut().insert(verb, handler);
}

/// Sends `verb` with `payload` to shard `shard` of the node whose storage
/// port is `peer`, and waits for the answer at most the verb's timeout
/// (and up to two low-resolution ticks: [`crate::requests`]) after sending it; opening
/// a connection first takes at most the verb's timeout too.
pub async fn request(peer: SocketAddr, shard: u16, verb: Verb, payload: &[u8]) -> Result<Bytes, MessagingError> {
    if let Some(sent) = send_request(peer, shard, verb, payload) {
        return sent?.await;
    }
    // Rare, and its future is large: boxed, so that the common path's
    // future stays small.
    let connection = Box::pin(connect_within(peer, shard, verb)).await?;
    start(&connection, verb, payload)?.await
}

/// [`request`] on a connection this shard has open to `(peer, shard)`:
/// the frame is queued at once, and [`Sent`] is its answer; `None` when
/// no connection is open ([`request`] opens one).
pub fn send_request(peer: SocketAddr, shard: u16, verb: Verb, payload: &[u8]) -> Option<Result<Sent, MessagingError>> {
    open_connection(peer, shard).map(|connection| start(&connection, verb, payload))
}

fn start(connection: &Outgoing, verb: Verb, payload: &[u8]) -> Result<Sent, MessagingError> {
    let answer = connection.requests.start(verb.timeout(), |id| connection.queue(Kind::Request, verb, id, payload))?;
    Ok(Sent { answer, peer: connection.peer, verb })
}

/// A request sent ([`send_request`]): its answer once it comes, within
/// the verb's timeout. It borrows nothing and needs no pinning, so a
/// caller can hold many in a plain list and poll them from one task.
/// Dropping it forgets the request.
pub struct Sent {
    answer: Answer,
    peer: SocketAddr,
    verb: Verb,
}

impl Future for Sent {
    type Output = Result<Bytes, MessagingError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (peer, verb) = (self.peer, self.verb);
        Pin::new(&mut self.answer).poll(cx).map(|outcome| {
            outcome.map_err(|failure| match failure {
                Failure::Failed(message) => MessagingError::Failed { peer, message },
                Failure::Closed => MessagingError::Closed { peer },
                Failure::TimedOut => MessagingError::Timeout { verb, peer, timeout_ms: verb.timeout().as_millis() },
            })
        })
    }
}

/// Sends `verb` with `payload` to shard `shard` of the node whose storage
/// port is `peer`, unanswered: done once the frame is queued on the
/// connection (opened within the verb's timeout).
pub async fn send(peer: SocketAddr, shard: u16, verb: Verb, payload: &[u8]) -> Result<(), MessagingError> {
    let connection = match open_connection(peer, shard) {
        Some(connection) => connection,
        None => connect_within(peer, shard, verb).await?,
    };
    connection.queue(Kind::OneWay, verb, 0, payload)
}

/// This shard's connection to `(peer, shard)`, opened within `verb`'s
/// timeout.
async fn connect_within(peer: SocketAddr, shard: u16, verb: Verb) -> Result<Rc<Outgoing>, MessagingError> {
    let limit = verb.timeout();
    match timeout(limit, connection(peer, shard)).await {
        Ok(connection) => connection,
        Err(_) => Err(MessagingError::Timeout { verb, peer, timeout_ms: limit.as_millis() }),
    }
}

/// This shard's open connection to `(peer, shard)`, if it has one.
fn open_connection(peer: SocketAddr, shard: u16) -> Option<Rc<Outgoing>> {
    LOCAL.with(|messaging| match messaging.connections.borrow().get(&(peer, shard))?.peek() {
        Some(Ok(connection)) if !connection.outbox.is_closed() => Some(Rc::clone(connection)),
        _ => None,
    })
}

/// What a peer said of itself when this shard last connected to its shard
/// `shard`: its host id and shard count.
pub fn welcome_of(peer: SocketAddr, shard: u16) -> Option<Welcome> {
    let connecting = local().connections.borrow().get(&(peer, shard)).cloned()?;
    match connecting.peek() {
        Some(Ok(connection)) if !connection.outbox.is_closed() => Some(connection.welcome),
        _ => None,
    }
}

/// This shard's connection to `(peer, shard)`: the open one, the one being
/// opened, or a new one.
async fn connection(peer: SocketAddr, shard: u16) -> Result<Rc<Outgoing>, MessagingError> {
    let messaging = local();
    let key = (peer, shard);
    let existing = messaging.connections.borrow().get(&key).cloned();
    let usable = match existing.as_ref().and_then(|c| c.peek()) {
        Some(Ok(connection)) => !connection.outbox.is_closed(),
        Some(Err(_)) => false,
        None => existing.is_some(),
    };
    let connecting = match (usable, existing) {
        (true, Some(connecting)) => connecting,
        _ => {
            let connecting = open(peer, shard).boxed_local().shared();
            messaging.connections.borrow_mut().insert(key, connecting.clone());
            connecting
        }
    };
    connecting.await
}

/// One connection this shard opened to a peer's shard.
struct Outgoing {
    peer: SocketAddr,
    welcome: Welcome,
    /// Its requests on their way out; shared with its writer, which closes
    /// it when a write fails.
    outbox: Rc<Outbox>,
    /// Its requests waiting for their answers.
    requests: Rc<Requests>,
}

impl Outgoing {
    /// Queues a frame for the writer, unless too many bytes wait already.
    fn queue(&self, kind: Kind, verb: Verb, id: u64, payload: &[u8]) -> Result<(), MessagingError> {
        let queued_bytes = self.outbox.queued_bytes();
        if queued_bytes + frame::FRAME_HEADER_BYTES + frame::BODY_HEADER_BYTES + payload.len() > QUEUED_BYTES_MAX {
            return Err(MessagingError::Overloaded { peer: self.peer, queued_bytes });
        }
        if !self.outbox.push(kind, verb, id, payload) {
            return Err(MessagingError::Closed { peer: self.peer });
        }
        Ok(())
    }

    /// The connection is gone: every waiting request fails.
    fn close(&self) {
        self.outbox.close();
        self.requests.close_all();
    }
}

/// Connects, says hello and waits for the welcome.
async fn open(peer: SocketAddr, shard: u16) -> Result<Rc<Outgoing>, MessagingError> {
    let me = identity();
    let connect_failed = |message: String| MessagingError::Connect { peer, message };
    let tls = encryption::must_encrypt(peer);
    let port = tls.map_or(peer, |tls| SocketAddr::new(peer.ip(), tls.ssl_port));
    let stream = match timeout(CONNECT_TIMEOUT, TcpStream::connect(port)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(connect_failed(e.to_string())),
        Err(_) => return Err(connect_failed(format!("no connection within {} ms", CONNECT_TIMEOUT.as_millis()))),
    };
    let _ = stream.set_nodelay(true);
    let socket = match tls {
        Some(tls) => tls.connector.connect(stream, peer.ip()).await.map_err(|e| connect_failed(e.to_string()))?,
        None => Socket::Plain(stream),
    };
    let (mut reader, mut writer) = socket.into_split();
    let hello = Hello {
        version: PROTOCOL_VERSION,
        cluster_name: me.cluster_name.clone(),
        host_id: me.host_id,
        address: me.address,
        storage_port: me.storage_port,
        shard_count: me.shard_count,
        from_shard: shoal_runtime::this_shard() as u16,
        to_shard: shard,
    };
    let mut payload = Vec::new();
    hello.encode(&mut payload);
    let mut frame = Vec::new();
    frame::encode(&mut frame, Kind::Request, Verb::Hello, 0, &payload);
    let BufResult(written, _) = writer.write_all(frame).await;
    written.map_err(|e| connect_failed(e.to_string()))?;
    let mut incoming = BytesMut::new();
    let answer = match timeout(Verb::Hello.timeout(), read_frame(&mut reader, &mut incoming)).await {
        Ok(Ok(Some(answer))) => answer,
        Ok(Ok(None)) => return Err(MessagingError::Closed { peer }),
        Ok(Err(e)) => return Err(connect_failed(e.to_string())),
        Err(_) => return Err(connect_failed("no answer to the handshake".to_string())),
    };
    let welcome = match answer.kind {
        Kind::Response if answer.verb == Verb::Hello => {
            Welcome::decode(answer.payload).map_err(|e| connect_failed(e.to_string()))?
        }
        Kind::Failure => {
            let message = String::from_utf8_lossy(&answer.payload).into_owned();
            return Err(MessagingError::Refused { peer, message });
        }
        _ => return Err(connect_failed("the handshake's answer is not a welcome".to_string())),
    };
    let outbox = Rc::new(Outbox::default());
    let connection = Rc::new(Outgoing { peer, welcome, outbox: Rc::clone(&outbox), requests: Requests::new() });
    shoal_runtime::spawn(write_loop(writer, outbox));
    shoal_runtime::spawn(answers_loop(reader, incoming, Rc::clone(&connection)));
    Ok(connection)
}

/// Hands each answer to the request waiting for it, until the connection
/// ends.
async fn answers_loop(mut reader: Socket, mut incoming: BytesMut, connection: Rc<Outgoing>) {
    let peer = connection.peer;
    loop {
        match read_frame(&mut reader, &mut incoming).await {
            Ok(Some(answer)) => {
                let outcome = match answer.kind {
                    Kind::Response => Ok(answer.payload),
                    Kind::Failure => Err(Failure::Failed(String::from_utf8_lossy(&answer.payload).into())),
                    Kind::Request | Kind::OneWay => {
                        tracing::warn!("internode connection to {peer}: a request came back on it; closing");
                        break;
                    }
                };
                connection.requests.complete(answer.id, outcome);
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("internode connection to {peer} closed: {e}");
                break;
            }
        }
    }
    connection.close();
}

#[derive(Debug, Error)]
enum ReadError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// The next frame from `reader` (`None` at a clean end of stream). What
/// the connection has read and not yet decoded stays in `pending`, and
/// reads land straight in its spare room: a frame's payload is split off
/// the bytes the socket wrote, never copied out of a read buffer first.
async fn read_frame(reader: &mut Socket, pending: &mut BytesMut) -> Result<Option<Frame>, ReadError> {
    loop {
        if let Some(frame) = frame::decode(pending)? {
            return Ok(Some(frame));
        }
        // The rest of a frame whose header is here has room already
        // (`decode` made it): read into that, not into a bigger buffer the
        // partial frame would be copied to. Otherwise, room for a read.
        let spare_bytes = frame::bytes_to_come(pending).unwrap_or(READ_BUFFER_BYTES).max(1);
        let BufResult(read, buffer) = reader.read_appending(std::mem::take(pending), spare_bytes).await;
        *pending = buffer;
        if read? == 0 {
            return Ok(None);
        }
    }
}

/// Accepts internode connections on the plain storage port for as long as
/// the process runs (a stopping node still answers what its peers sent).
pub async fn serve(listener: TcpListener) {
    shoal_runtime::net::serve_peers(listener, Placement::RoundRobin, |stream| accept(Socket::Plain(stream))).await
}

/// Accepts internode connections on `ssl_storage_port` as [`serve`] does:
/// each one's TLS handshake first, on the shard it was placed on.
pub async fn serve_tls(listener: TcpListener) {
    shoal_runtime::net::serve_peers(listener, Placement::RoundRobin, |stream: TcpStream| async move {
        let Some(tls) = encryption::internode_tls() else { return };
        let from = stream.peer_addr().map_or_else(|_| "an unknown address".to_string(), |a| a.to_string());
        match tls.acceptor.accept(stream).await {
            Ok(socket) => accept(socket).await,
            Err(e) => tracing::warn!("internode TLS connection from {from} refused: {e}"),
        }
    })
    .await
}

#[derive(Debug, Error)]
enum AcceptError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("closed before the handshake")]
    Closed,
    #[error("no handshake within {0} ms")]
    Timeout(u128),
    #[error("the first frame is not a handshake")]
    NotHello,
    #[error(transparent)]
    Hello(#[from] HelloError),
    #[error("internode_encryption asks {0} to connect with TLS")]
    NeedsTls(SocketAddr),
    #[error("cannot move the connection to its shard: {0}")]
    Move(String),
}

/// Reads a new connection's handshake and serves it on the shard it names.
async fn accept(stream: Socket) {
    let from = stream.peer_addr().map_or_else(|_| "an unknown address".to_string(), |a| a.to_string());
    if let Err(e) = accept_on_shard(stream).await {
        tracing::warn!("internode connection from {from} closed: {e}");
    }
}

async fn accept_on_shard(mut stream: Socket) -> Result<(), AcceptError> {
    let _ = stream.set_nodelay(true);
    let mut incoming = BytesMut::new();
    let limit = Verb::Hello.timeout();
    let first = match timeout(limit, read_frame(&mut stream, &mut incoming)).await {
        Ok(read) => read?.ok_or(AcceptError::Closed)?,
        Err(_) => return Err(AcceptError::Timeout(limit.as_millis())),
    };
    if first.kind != Kind::Request || first.verb != Verb::Hello {
        return Err(AcceptError::NotHello);
    }
    let me = identity();
    let checked = Hello::decode(first.payload)
        .and_then(|hello| hello.check(&me.cluster_name, me.host_id, me.shard_count).map(|()| hello))
        .map_err(AcceptError::from)
        .and_then(|hello| {
            let caller = SocketAddr::new(hello.address, hello.storage_port);
            match stream.is_tls() || encryption::plain_allowed(caller) {
                true => Ok(hello),
                false => Err(AcceptError::NeedsTls(caller)),
            }
        });
    let hello = match checked {
        Ok(hello) => hello,
        Err(e) => {
            let mut refusal = Vec::new();
            frame::encode(&mut refusal, Kind::Failure, Verb::Hello, first.id, e.to_string().as_bytes());
            let _ = stream.write_all(refusal).await;
            return Err(e);
        }
    };
    let (shard, id) = (usize::from(hello.to_shard), first.id);
    if shard == shoal_runtime::this_shard() {
        serve_incoming(stream, hello, id, incoming).await;
        return Ok(());
    }
    let detached = stream.detach().map_err(|e| AcceptError::Move(e.to_string()))?;
    // The caller waits for the welcome before it sends more: nothing
    // should follow the handshake yet, but what did goes along.
    let pending = incoming.freeze();
    shoal_runtime::submit_to(shard, move || {
        match detached.attach() {
            Ok(stream) => {
                let incoming = BytesMut::from(&pending[..]);
                shoal_runtime::spawn(serve_incoming(stream, hello, id, incoming))
            }
            Err(e) => tracing::warn!("internode connection lost moving to shard {shard}: {e}"),
        }
        std::future::ready(())
    })
    .await
    .map_err(|e| AcceptError::Move(e.to_string()))
}

/// Welcomes the caller, then answers its requests until it hangs up.
async fn serve_incoming(stream: Socket, hello: Hello, hello_id: u64, mut incoming: BytesMut) {
    let me = identity();
    let caller = Caller {
        host_id: hello.host_id,
        address: SocketAddr::new(hello.address, hello.storage_port),
        shard: hello.from_shard,
    };
    let (mut reader, writer) = stream.into_split();
    let outbox = Rc::new(Outbox::default());
    let mut welcome = Vec::new();
    Welcome { host_id: me.host_id, shard_count: me.shard_count }.encode(&mut welcome);
    outbox.push(Kind::Response, Verb::Hello, hello_id, &welcome);
    shoal_runtime::spawn(write_loop(writer, Rc::clone(&outbox)));
    // However serving ends, the writer ends with it: nobody reads answers
    // any more.
    let _closing = Closing(Rc::clone(&outbox));
    let in_flight = Rc::new(Cell::new(0usize));
    loop {
        let room = || in_flight.get() < IN_FLIGHT_REQUESTS_MAX && outbox.queued_bytes() <= QUEUED_BYTES_MAX;
        if !outbox.wait_for_room(room).await {
            return;
        }
        let request = match read_frame(&mut reader, &mut incoming).await {
            Ok(Some(request)) if matches!(request.kind, Kind::Request | Kind::OneWay) => request,
            Ok(Some(_)) => {
                tracing::warn!("internode connection from {}: an answer came on it; closing", caller.address);
                return;
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("internode connection from {} closed: {e}", caller.address);
                return;
            }
        };
        let handler = local().handlers.borrow().get(&request.verb).cloned();
        let slot = InFlight::take(&in_flight, &outbox);
        let caller = caller.clone();
        shoal_runtime::spawn(async move {
            let (verb, id, one_way) = (request.verb, request.id, request.kind == Kind::OneWay);
            let outcome = answer(handler, caller, request).await;
            // A one-way message gets no answer; the connection may be gone:
            // nobody to answer then either.
            match outcome {
                _ if one_way => true,
                Ok(answer) => slot.outbox.push(Kind::Response, verb, id, &answer),
                Err(message) => slot.outbox.push(Kind::Failure, verb, id, message.as_bytes()),
            };
            drop(slot);
        });
    }
}

/// Closes an outbox when dropped.
struct Closing(Rc<Outbox>);

impl Drop for Closing {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// One of a connection's in-flight request slots, held until dropped:
/// however its request ends (answered, failed, panicked, dropped), the
/// slot is freed and the reader told, so the connection keeps reading.
struct InFlight {
    count: Rc<Cell<usize>>,
    /// Where its answer goes, and the reader waits for room.
    outbox: Rc<Outbox>,
}

impl InFlight {
    fn take(count: &Rc<Cell<usize>>, outbox: &Rc<Outbox>) -> InFlight {
        assert!(count.get() < IN_FLIGHT_REQUESTS_MAX, "the reader waits for a free slot");
        count.set(count.get() + 1);
        InFlight { count: Rc::clone(count), outbox: Rc::clone(outbox) }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.count.set(self.count.get() - 1);
        self.outbox.wake_waiting();
    }
}

/// The answer to `request`: its handler's response, or a failure when
/// there is no handler, the handler fails, or it panics. A panic is a bug
/// on this node, but it fails the one request, not the shard: the peer is
/// answered rather than left to time out.
async fn answer(handler: Option<Handler>, caller: Caller, request: Frame) -> Result<Bytes, String> {
    let Frame { verb, payload, .. } = request;
    match handler {
        Some(handler) => match AssertUnwindSafe(async move { handler(caller, payload).await }).catch_unwind().await {
            Ok(result) => result,
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!("the handler of {verb:?} panicked: {message}");
                Err(format!("the handler of {verb:?} failed: {message}"))
            }
        },
        None => Err(format!("this node does not answer {verb:?}")),
    }
}

/// What a panic said, when it said it with a string.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(message), _) => message,
        (_, Some(message)) => message,
        _ => "a panic",
    }
}
