//! One memcached client connection: the TLS handshake when the port has
//! TLS, authentication when the node has an auth file, then read, parse
//! every complete request in the buffer, run them as one batch, write
//! every answer in one write, in order; then read again.
//!
//! Reading waits while a batch runs and its answers are written, so a
//! client that sends without reading its answers is throttled by TCP, not
//! buffered: the connection holds at most one batch of requests (bounded
//! by the parser's limits) and its answers (bounded by the executor).
//!
//! A batch is parsed from the read buffer frozen (`Bytes`), so its keys
//! and values are cut from it, not copied (`batch_bytes`); once the batch
//! is answered the buffer is taken back, in place (nothing else holds it
//! then), less the bytes the batch took.

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};

use shoal_runtime::net::{BufResult, TcpStream};
use shoal_tls::Socket;

use crate::auth;
use crate::execute::{Config, Control, Session, Sink};
use crate::parse::{parse, Parsed};
use crate::request::Request;
use crate::scratch::recycle;
use crate::stats::{self, OpenConnection, Stat};

/// Room made in the buffer for each read, at least.
const READ_BYTES: usize = 64 * 1024;
/// Requests run as one batch, at most; the rest wait in the buffer.
const REQUESTS_PER_BATCH_MAX: usize = 1024;

pub async fn run(stream: TcpStream, config: Arc<Config>) {
    let _open = OpenConnection::new();
    let _ = stream.set_nodelay(true);
    let socket = match shoal_tls::accept(config.tls.as_ref(), stream).await {
        Ok(socket) => socket,
        Err(e) => {
            tracing::debug!("memcached connection refused: {e}");
            return;
        }
    };
    let authenticated = config.auth.is_none();
    let mut connection = Connection { socket, session: Session::new(Arc::clone(&config)), config, authenticated };
    match connection.serve().await {
        Ok(()) => connection.socket.close().await,
        Err(e) => tracing::debug!("memcached connection closed: {e}"),
    }
}

struct Connection {
    socket: Socket,
    session: Session,
    config: Arc<Config>,
    /// The connection may run commands: it sent a user and password the
    /// auth file allows, or the node has no auth file.
    authenticated: bool,
}

/// The socket, as the executor's sink for answers.
struct Writer<'s>(&'s mut Socket);

impl Sink for Writer<'_> {
    async fn write(&mut self, answers: &mut Vec<u8>) -> std::io::Result<()> {
        if answers.is_empty() {
            return Ok(());
        }
        stats::add(Stat::BytesWritten, answers.len() as u64);
        let BufResult(result, mut buffer) = self.0.write_all(std::mem::take(answers)).await;
        buffer.clear();
        *answers = buffer;
        result
    }
}

/// What the first bytes of an unauthenticated connection lead to.
enum Gate {
    /// Bytes of the buffer answered.
    Answered(usize),
    ReadMore,
    Close,
}

impl Connection {
    async fn serve(&mut self) -> std::io::Result<()> {
        let mut pending = BytesMut::with_capacity(READ_BYTES);
        let mut answers: Vec<u8> = Vec::with_capacity(READ_BYTES);
        // Bytes of a refused data block still to arrive and be dropped.
        let mut skip = 0usize;
        // The batches' request vector, empty between batches: one
        // allocation for the connection, not one per batch.
        let mut spare: Vec<Request<'static>> = Vec::new();
        loop {
            if !self.authenticated {
                match self.authenticate(&pending, &mut answers) {
                    Gate::Answered(consumed) => {
                        Writer(&mut self.socket).write(&mut answers).await?;
                        pending.advance(consumed);
                    }
                    Gate::ReadMore => {
                        if !self.read(&mut pending, &mut skip).await? {
                            return Ok(());
                        }
                    }
                    Gate::Close => return Ok(()),
                }
                continue;
            }
            let buffer = pending.split().freeze();
            let batch = self.batch(&buffer, &mut skip, recycle(std::mem::take(&mut spare)));
            if batch.requests.is_empty() && !batch.close {
                spare = recycle(batch.requests);
                pending = rejoin(buffer, 0, pending);
                if !self.read(&mut pending, &mut skip).await? {
                    return Ok(());
                }
                continue;
            }
            // A batch runs in the statements scheduling group, as a CQL
            // request does (`shoal_runtime::sched`).
            let mut sink = Writer(&mut self.socket);
            let run = self.session.run(&batch.requests, &buffer, &mut answers, &mut sink);
            let control = shoal_runtime::sched::in_group(shoal_runtime::Group::Statements, run).await?;
            Writer(&mut self.socket).write(&mut answers).await?;
            let Batch { requests, consumed, close } = batch;
            spare = recycle(requests);
            pending = rejoin(buffer, consumed, pending);
            if close || control == Control::Close {
                return Ok(());
            }
        }
    }

    /// Reads more into `pending`, dropping what `skip` says; false at the
    /// end of the stream.
    async fn read(&mut self, pending: &mut BytesMut, skip: &mut usize) -> std::io::Result<bool> {
        let before = pending.len();
        let BufResult(read, returned) = self.socket.read_appending(std::mem::take(pending), READ_BYTES).await;
        *pending = returned;
        let read = read?;
        if read == 0 {
            return Ok(false);
        }
        stats::add(Stat::BytesRead, read as u64);
        let dropped = (*skip).min(read);
        *skip -= dropped;
        if dropped > 0 {
            let mut tail = pending.split_off(before);
            tail.advance(dropped);
            pending.unsplit(tail);
        }
        Ok(true)
    }

    /// Answers the authentication request at the front of `pending`.
    fn authenticate(&mut self, pending: &[u8], answers: &mut Vec<u8>) -> Gate {
        let request = auth::parse_auth(pending);
        let table = self.config.auth.as_ref().map(|table| table.load());
        let answered = table.and_then(|table| auth::answer(&request, &table));
        match (request, answered) {
            (auth::AuthRequest::Close, _) => Gate::Close,
            (_, Some((consumed, text, allowed))) => {
                answers.extend_from_slice(text);
                self.authenticated = allowed;
                Gate::Answered(consumed)
            }
            (_, None) => Gate::ReadMore,
        }
    }

    /// The complete requests at the front of `pending`, at most a batch,
    /// gathered in `requests` (empty).
    fn batch<'p>(&self, pending: &'p [u8], skip: &mut usize, requests: Vec<Request<'p>>) -> Batch<'p> {
        let mut batch = Batch { requests, consumed: 0, close: false };
        while batch.requests.len() < REQUESTS_PER_BATCH_MAX && *skip == 0 {
            match parse(&pending[batch.consumed..], &self.config.limits) {
                Parsed::Request { request, consumed, skip: refused } => {
                    batch.consumed += consumed;
                    let available = pending.len() - batch.consumed;
                    let dropped = refused.min(available);
                    batch.consumed += dropped;
                    *skip = refused - dropped;
                    let quit = request == Request::Quit;
                    batch.requests.push(request);
                    if quit {
                        break;
                    }
                }
                Parsed::Incomplete => break,
                Parsed::Close => {
                    batch.close = true;
                    break;
                }
            }
        }
        batch
    }
}

/// The read buffer again from `buffer` (a batch's bytes, frozen) and
/// `rest` (the empty room after them, split off): in place where the batch
/// left nothing holding `buffer`, less the `consumed` bytes it took.
fn rejoin(buffer: Bytes, consumed: usize, rest: BytesMut) -> BytesMut {
    debug_assert!(rest.is_empty(), "bytes are read only between batches");
    drop(rest);
    let mut pending = buffer.try_into_mut().unwrap_or_else(|held| BytesMut::from(&held[..]));
    pending.advance(consumed);
    pending
}

struct Batch<'p> {
    requests: Vec<Request<'p>>,
    /// Bytes of the buffer the requests took.
    consumed: usize,
    /// The buffer holds something that is not a request: close after
    /// answering the requests before it.
    close: bool,
}
