//! TCP for the shards: the executor's completion-based sockets. Buffers are
//! moved into each call and handed back with the result (`BufResult`).
//!
//! A connection accepted on one shard is moved to the shard that will serve
//! it with [`detach`] (here) and [`attach`] (there): the socket travels as a
//! plain file descriptor, because a shard's socket objects belong to its own
//! executor.
//!
//! Listeners are of two kinds: [`serve`] for clients (CQL, memcached),
//! which a stopping node closes ([`stop_accepting`]) and whose open
//! connections it ends cleanly ([`stop_reading`]: the requests read are
//! answered, then the connection closes), and [`serve_peers`] for other
//! nodes, served until the process ends.

use std::os::fd::AsFd;

use compio::buf::IntoInner;
pub use compio::buf::{BufResult, IoBufMut};
pub use compio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
pub use compio::net::{TcpListener, TcpStream};

use compio::net::TcpSocket;

/// Reads what `stream` has into `buf` after its bytes (making room for at
/// least `min_spare_bytes` first), so what a connection reads is never
/// copied out of a read buffer. `buf` is a `Vec<u8>` or a `BytesMut`: both
/// grow on demand (a `BytesMut` whose earlier bytes were split off and are
/// still held moves to a new allocation when it grows).
pub async fn read_appending<B: IoBufMut>(
    stream: &mut TcpStream,
    mut buf: B,
    min_spare_bytes: usize,
) -> BufResult<usize, B> {
    // No room would read 0 bytes, which reads as the end of the stream.
    debug_assert!(min_spare_bytes > 0, "a read needs room");
    if let Err(e) = IoBufMut::reserve(&mut buf, min_spare_bytes) {
        return BufResult(Err(e.into()), buf);
    }
    let BufResult(result, buf) = stream.read(buf.uninit()).await;
    BufResult(result, buf.into_inner())
}

/// Connections a listener queues before `accept` takes them.
const LISTEN_BACKLOG: i32 = 1024;

/// A listening socket with SO_REUSEADDR, so a restarted node can bind its
/// ports while connections of the previous process linger in TIME_WAIT.
pub async fn listen(address: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() { TcpSocket::new_v4().await? } else { TcpSocket::new_v6().await? };
    socket.set_reuseaddr(true)?;
    socket.bind(address).await?;
    socket.listen(LISTEN_BACKLOG).await
}

/// A connection ready to move to another shard.
#[derive(Debug)]
pub struct DetachedStream(std::net::TcpStream);

/// Takes a connection off this shard's executor. The original is closed;
/// the returned descriptor (a duplicate) keeps the connection open.
pub fn detach(stream: TcpStream) -> std::io::Result<DetachedStream> {
    let fd = stream.as_fd().try_clone_to_owned()?;
    drop(stream);
    Ok(DetachedStream(std::net::TcpStream::from(fd)))
}

/// Puts a detached connection on the current shard's executor.
pub fn attach(stream: DetachedStream) -> std::io::Result<TcpStream> {
    TcpStream::from_std(stream.0)
}

/// How a listener places the connections it accepts on shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The shards in turn.
    RoundRobin,
    /// Shard `client source port % shards` (ScyllaDB's shard-aware port:
    /// a driver picks its source port to reach the shard it wants).
    BySourcePort,
}

/// How long to keep trying a port that is still taken at start.
const BIND_RETRY_MS: u64 = 10_000;
const BIND_RETRY_STEP_MS: u64 = 50;

/// Binds `address`; returns the listener so the caller can report it bound
/// before serving. A port still held when we start is retried for a while:
/// after a kill -9 the kernel releases a dead process's io_uring (and the
/// listening sockets its pending accepts hold) a few milliseconds later.
pub async fn bind(address: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let mut waited_ms = 0;
    loop {
        match listen(address).await {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && waited_ms < BIND_RETRY_MS => {
                if waited_ms == 0 {
                    tracing::info!("{address} is in use; retrying for up to {} s", BIND_RETRY_MS / 1000);
                }
                crate::time::sleep(std::time::Duration::from_millis(BIND_RETRY_STEP_MS)).await;
                waited_ms += BIND_RETRY_STEP_MS;
            }
            result => return result,
        }
    }
}

/// Accepts client connections (CQL, memcached) until [`stop_accepting`]
/// runs on this shard, placing each on its shard and running
/// `serve_connection` there; each is known to its shard until it ends, so
/// [`stop_reading`] can end it cleanly.
pub async fn serve<S, Fut>(listener: TcpListener, placement: Placement, serve_connection: S)
where
    S: Fn(TcpStream) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    accept_loop(listener, placement, Audience::Clients, serve_connection).await
}

/// Accepts other nodes' connections (internode messaging) for as long as
/// the process runs: a node stopping still answers what its peers sent.
pub async fn serve_peers<S, Fut>(listener: TcpListener, placement: Placement, serve_connection: S)
where
    S: Fn(TcpStream) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    accept_loop(listener, placement, Audience::Peers, serve_connection).await
}

/// Who a listener serves, which says whether it stops with the clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Audience {
    Clients,
    Peers,
}

async fn accept_loop<S, Fut>(listener: TcpListener, placement: Placement, audience: Audience, serve_connection: S)
where
    S: Fn(TcpStream) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let nr_shards = crate::nr_shards();
    let mut next = 0usize;
    let address = listener.local_addr().map_or_else(|e| format!("(unknown: {e})"), |a| a.to_string());
    loop {
        let accepted = match audience {
            Audience::Peers => listener.accept().await,
            Audience::Clients => {
                let stopped = std::pin::pin!(clients::accepting_stopped());
                match futures_util::future::select(std::pin::pin!(listener.accept()), stopped).await {
                    futures_util::future::Either::Left((accepted, _)) => accepted,
                    futures_util::future::Either::Right(_) => {
                        tracing::info!("stopped accepting client connections on {address}");
                        return;
                    }
                }
            }
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors or a connection reset while queued:
                // keep accepting, the next may work.
                tracing::warn!("accept failed: {e}");
                crate::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let shard = match placement {
            Placement::RoundRobin => {
                next = next.wrapping_add(1);
                next % nr_shards
            }
            Placement::BySourcePort => usize::from(peer.port()) % nr_shards,
        };
        assert!(shard < nr_shards);
        tracing::debug!("connection from {peer} placed on shard {shard} ({placement:?})");
        if let Err(e) = hand_over(stream, shard, audience, serve_connection.clone()).await {
            tracing::warn!("cannot place connection from {peer} on shard {shard}: {e}");
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum HandOverError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Shard(#[from] crate::ShardError),
}

async fn hand_over<S, Fut>(
    stream: TcpStream,
    shard: usize,
    audience: Audience,
    serve_connection: S,
) -> Result<(), HandOverError>
where
    S: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let detached = detach(stream)?;
    crate::submit_to(shard, move || async move {
        if audience == Audience::Peers {
            crate::spawn(serve_connection(attach(detached)?));
            return Ok(());
        }
        // A client placed here after this shard stopped reading its
        // clients is closed at once (dropped), unserved.
        let Some(client) = clients::admit(&detached.0)? else { return Ok(()) };
        let stream = attach(detached)?;
        crate::spawn(async move {
            serve_connection(stream).await;
            // The connection's socket is closed (its serving future is
            // done): forget it before anything else runs on this shard.
            clients::forget(client);
        });
        Ok::<(), std::io::Error>(())
    })
    .await??;
    Ok(())
}

/// Stops this shard's client listeners (those [`serve`] runs here) and
/// refuses clients placed on this shard from now on; connections already
/// open go on. Call on every shard when the node stops.
pub fn stop_accepting() {
    clients::stop_accepting();
}

/// Shuts the reading side of every client connection served on this
/// shard: each one's next read sees the end of the stream once what the
/// client already sent is read, so the requests read are answered and the
/// connection closes. Returns how many there were.
pub fn stop_reading() -> usize {
    clients::stop_reading()
}

/// Client connections this shard still serves.
pub fn client_connections() -> usize {
    clients::open()
}

/// The client connections each shard serves, and whether it still takes
/// new ones: shard-local, like everything a shard owns.
mod clients {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use futures_channel::oneshot;

    #[derive(Default)]
    struct Clients {
        /// The shard stopped accepting ([`stop_accepting`] ran).
        stopped: bool,
        /// The shard stopped reading: clients placed here are refused.
        closing: bool,
        /// A duplicate of each open connection's socket, to shut its
        /// reading side from outside the task that serves it.
        open: HashMap<u64, std::net::TcpStream>,
        next_id: u64,
        /// Listeners waiting for [`stop_accepting`].
        waiting: Vec<oneshot::Sender<()>>,
    }

    thread_local! {
        static CLIENTS: RefCell<Clients> = RefCell::default();
    }

    /// Resolves once this shard stops accepting clients.
    pub(super) async fn accepting_stopped() {
        let waiting = CLIENTS.with(|c| {
            let mut c = c.borrow_mut();
            if c.stopped {
                return None;
            }
            let (tx, rx) = oneshot::channel();
            c.waiting.push(tx);
            Some(rx)
        });
        if let Some(rx) = waiting {
            // A dropped sender (never: the list lives as long as the
            // thread) would also mean "stop".
            let _ = rx.await;
        }
    }

    pub(super) fn stop_accepting() {
        CLIENTS.with(|c| {
            let mut c = c.borrow_mut();
            c.stopped = true;
            for waiting in c.waiting.drain(..) {
                let _ = waiting.send(());
            }
        });
    }

    /// Registers a client connection about to be served here; `None` when
    /// this shard no longer serves clients.
    pub(super) fn admit(stream: &std::net::TcpStream) -> std::io::Result<Option<u64>> {
        let closing = CLIENTS.with(|c| c.borrow().closing);
        if closing {
            return Ok(None);
        }
        let duplicate = stream.try_clone()?;
        Ok(Some(CLIENTS.with(|c| {
            let mut c = c.borrow_mut();
            let id = c.next_id;
            c.next_id += 1;
            c.open.insert(id, duplicate);
            id
        })))
    }

    pub(super) fn forget(id: u64) {
        CLIENTS.with(|c| c.borrow_mut().open.remove(&id));
    }

    pub(super) fn stop_reading() -> usize {
        stop_accepting();
        CLIENTS.with(|c| {
            let mut c = c.borrow_mut();
            c.closing = true;
            for stream in c.open.values() {
                // A socket the client already closed fails here: nothing
                // left to stop.
                let _ = stream.shutdown(std::net::Shutdown::Read);
            }
            c.open.len()
        })
    }

    pub(super) fn open() -> usize {
        CLIENTS.with(|c| c.borrow().open.len())
    }
}
