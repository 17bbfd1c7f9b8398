//! One memcached TCP connection: a batch of requests goes out in one write
//! while the replies are read back in order, parsed in place out of one large
//! read buffer.
//!
//! Writing and reading run concurrently (on the two halves of the socket):
//! with a long pipeline of large values, the server's replies could otherwise
//! fill the socket buffers while the client is still blocked writing, and
//! both sides would wait on each other until the timeout.
//!
//! Costs per batch are kept flat, because at hundreds of thousands of
//! operations a second the loader must not be what is measured: replies are
//! parsed straight out of the read buffer (no copy, no allocation), every
//! reply parsed from one read gets the same arrival time (one clock read per
//! read, and they did arrive together), and the operation timeout is one
//! timer per connection that is re-armed only when it fires early, instead
//! of a timer registered and cancelled per batch.

use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::protocol::{parse_reply, Reply};
use crate::error::OpError;

/// Initial size of the read buffer: room for many pipelined 1 KiB replies
/// per read. It grows (doubling) only for a single reply larger than this.
const READ_BUFFER_BYTES: usize = 256 << 10;
/// Unparsed bytes are moved to the front of the buffer once less than this
/// is free behind them, so reads stay large.
const READ_MIN_BYTES: usize = 64 << 10;

/// An open connection and the bytes read but not yet parsed.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    /// `buf[start..end]` is read and not yet parsed.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Fires at or before the current batch's deadline (see the module doc).
    timer: Pin<Box<Sleep>>,
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
        let timer = Box::pin(tokio::time::sleep(timeout));
        Ok(Connection { stream, buf: vec![0; READ_BUFFER_BYTES], start: 0, end: 0, timer })
    }

    /// Writes `request` (which holds `replies` requests) and hands each reply
    /// to `each`, with the time it arrived, in order, until all have come or
    /// `deadline` passes. An error means the connection is unusable; the
    /// replies not handed to `each` were lost with it.
    pub async fn round_trip(
        &mut self,
        request: &[u8],
        replies: usize,
        deadline: Instant,
        timeout: Duration,
        mut each: impl FnMut(Reply, Instant),
    ) -> Result<(), OpError> {
        let Connection { stream, buf, start, end, timer } = self;
        let (mut reader, mut writer) = stream.split();
        let write = async { writer.write_all(request).await.map_err(|e| OpError::Connection(e.to_string())) };
        let read = async {
            let mut left = replies;
            while left > 0 {
                make_room(buf, start, end);
                let n = reader.read(&mut buf[*end..]).await.map_err(|e| OpError::Connection(e.to_string()))?;
                if n == 0 {
                    return Err(OpError::Connection("closed by the server".into()));
                }
                *end += n;
                let arrived = Instant::now();
                while left > 0 {
                    let parsed = parse_reply(&buf[*start..*end]).map_err(|e| OpError::Connection(e.to_string()))?;
                    let Some((reply, used)) = parsed else { break };
                    *start += used;
                    left -= 1;
                    each(reply, arrived);
                }
            }
            Ok(())
        };
        let io = async { tokio::try_join!(write, read).map(|_| ()) };
        tokio::pin!(io);
        loop {
            tokio::select! {
                biased;
                done = &mut io => return done,
                () = timer.as_mut() => {
                    if Instant::now() >= deadline {
                        return Err(OpError::Timeout(timeout));
                    }
                    timer.as_mut().reset(deadline);
                }
            }
        }
    }
}

/// Makes at least [`READ_MIN_BYTES`] free behind `buf[start..end]`: moves the
/// unparsed bytes to the front, and doubles the buffer if that is not enough
/// (one reply larger than the buffer).
fn make_room(buf: &mut Vec<u8>, start: &mut usize, end: &mut usize) {
    if buf.len() - *end >= READ_MIN_BYTES {
        return;
    }
    buf.copy_within(*start..*end, 0);
    *end -= *start;
    *start = 0;
    if buf.len() - *end < READ_MIN_BYTES {
        buf.resize(2 * buf.len(), 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_made_by_moving_then_by_growing() {
        let mut buf = vec![0; READ_BUFFER_BYTES];
        let (mut start, mut end) = (READ_BUFFER_BYTES - 10, READ_BUFFER_BYTES - 5);
        buf[start..end].copy_from_slice(b"hello");
        make_room(&mut buf, &mut start, &mut end);
        assert_eq!((start, end, &buf[..5]), (0, 5, &b"hello"[..]));
        assert_eq!(buf.len(), READ_BUFFER_BYTES);
        // A partial reply filling nearly all of the buffer makes it grow.
        let (mut start, mut end) = (0, READ_BUFFER_BYTES - 1);
        make_room(&mut buf, &mut start, &mut end);
        assert_eq!((start, end, buf.len()), (0, READ_BUFFER_BYTES - 1, 2 * READ_BUFFER_BYTES));
        // Enough room: nothing moves.
        let (mut start, mut end) = (7, 9);
        make_room(&mut buf, &mut start, &mut end);
        assert_eq!((start, end), (7, 9));
    }
}
