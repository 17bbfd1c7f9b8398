//! TCP for the shards: the executor's completion-based sockets. Buffers are
//! moved into each call and handed back with the result (`BufResult`).
//!
//! A connection accepted on one shard is moved to the shard that will serve
//! it with [`detach`] (here) and [`attach`] (there): the socket travels as a
//! plain file descriptor, because a shard's socket objects belong to its own
//! executor.

use std::os::fd::AsFd;

use compio::buf::IntoInner;
pub use compio::buf::{BufResult, IoBufMut};
pub use compio::io::{AsyncRead, AsyncWriteExt};
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

/// Accepts connections forever, placing each on its shard and running
/// `serve_connection` there: any protocol's listener (CQL, memcached).
pub async fn serve<S, Fut>(listener: TcpListener, placement: Placement, serve_connection: S)
where
    S: Fn(TcpStream) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let nr_shards = crate::nr_shards();
    let mut next = 0usize;
    loop {
        let (stream, peer) = match listener.accept().await {
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
        if let Err(e) = hand_over(stream, shard, serve_connection.clone()).await {
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

async fn hand_over<S, Fut>(stream: TcpStream, shard: usize, serve_connection: S) -> Result<(), HandOverError>
where
    S: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let detached = detach(stream)?;
    crate::submit_to(shard, move || async move {
        let stream = attach(detached)?;
        crate::spawn(serve_connection(stream));
        Ok::<(), std::io::Error>(())
    })
    .await??;
    Ok(())
}
