//! TCP for the shards: the executor's completion-based sockets. Buffers are
//! moved into each call and handed back with the result (`BufResult`).

pub use compio::buf::{BufResult, IoBuf, IoBufMut};
pub use compio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
pub use compio::net::{TcpListener, TcpStream};
