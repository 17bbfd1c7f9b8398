//! TCP for the shards: the executor's completion-based sockets. Buffers are
//! moved into each call and handed back with the result (`BufResult`).
//!
//! A connection accepted on one shard is moved to the shard that will serve
//! it with [`detach`] (here) and [`attach`] (there): the socket travels as a
//! plain file descriptor, because a shard's socket objects belong to its own
//! executor.

use std::os::fd::AsFd;

pub use compio::buf::BufResult;
pub use compio::io::{AsyncRead, AsyncWriteExt};
pub use compio::net::{TcpListener, TcpStream};

use compio::net::TcpSocket;

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
