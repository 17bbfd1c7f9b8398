//! One memcached TCP connection: a batch of requests goes out in one write
//! while the replies are read back in order.
//!
//! Writing and reading run concurrently (on the two halves of the socket):
//! with a long pipeline of large values, the server's replies could otherwise
//! fill the socket buffers while the client is still blocked writing, and
//! both sides would wait on each other until the timeout.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::protocol::{parse_reply, Reply};
use crate::error::OpError;

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// An open connection and the bytes read but not yet parsed.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    read_buf: BytesMut,
}

impl Connection {
    /// Connects to `address` (`host:port`) within `timeout`.
    pub async fn open(address: &str, timeout: Duration) -> Result<Connection, String> {
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("no connection within {timeout:?}")),
        };
        // Requests are written whole; Nagle would only delay them.
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Connection { stream, read_buf: BytesMut::with_capacity(READ_CHUNK_BYTES) })
    }

    /// Writes `request` (which holds `replies` requests) and hands each reply
    /// to `each` as it arrives, in order, until all have come or `deadline`
    /// passes. An error means the connection is unusable; the replies not
    /// handed to `each` were lost with it.
    pub async fn round_trip(
        &mut self,
        request: &[u8],
        replies: usize,
        deadline: Instant,
        timeout: Duration,
        mut each: impl FnMut(Reply),
    ) -> Result<(), OpError> {
        let (mut reader, mut writer) = self.stream.split();
        let read_buf = &mut self.read_buf;
        let write = async { writer.write_all(request).await.map_err(|e| OpError::Connection(e.to_string())) };
        let read = async {
            for _ in 0..replies {
                each(next_reply(&mut reader, read_buf).await?);
            }
            Ok(())
        };
        match tokio::time::timeout_at(deadline, async { tokio::try_join!(write, read) }).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(OpError::Timeout(timeout)),
        }
    }
}

/// Parses the next reply out of `buf`, reading from `reader` as needed.
async fn next_reply(reader: &mut (impl AsyncReadExt + Unpin), buf: &mut BytesMut) -> Result<Reply, OpError> {
    loop {
        if let Some((reply, used)) = parse_reply(buf).map_err(|e| OpError::Connection(e.to_string()))? {
            buf.advance(used);
            return Ok(reply);
        }
        buf.reserve(READ_CHUNK_BYTES);
        let n = reader.read_buf(buf).await.map_err(|e| OpError::Connection(e.to_string()))?;
        if n == 0 {
            return Err(OpError::Connection("closed by the server".into()));
        }
    }
}
