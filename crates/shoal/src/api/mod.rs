//! The HTTP API on `--api-port`, under ScyllaDB's REST paths where it has
//! one. Every answer is JSON (serde_json), errors included
//! (`{"code": 404, "message": ...}`), except `/metrics` (Prometheus text).
//! [`Route`] lists the endpoints; `node` answers the node's and the
//! cluster's state, `ops` runs operations, `snapshots` lists and clears
//! snapshots, `compactions` shows and steers compactions,
//! `top_partitions` samples the busiest partitions and `refresh` loads
//! uploaded SSTables into the cluster.
//!
//! The server is Shoal's own, on the shard runtime (compio): HTTP/1.1, one
//! request per connection, no body, a head of at most
//! [`shoal_http::HEAD_BYTES_MAX`] bytes read within [`HEAD_READ_TIMEOUT`]
//! and an answer written within [`WRITE_TIMEOUT`]; the decoding is in the
//! `shoal-http` crate (unit tested, fuzzed). Why not a general HTTP crate:
//! docs/operations.md, "The HTTP API". Data stays on its shard: what a
//! shard holds is asked of it by message (`submit_to`); file system work
//! that would block (listing and removing uploaded SSTables) runs on a
//! helper thread ([`blocking`]).

mod compactions;
mod node;
mod ops;
mod refresh;
mod routes;
mod snapshots;
mod top_partitions;

use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use shoal_http::{HttpError, Request, Response, Status};
use shoal_runtime::net::{AsyncRead, AsyncWrite, AsyncWriteExt, BufResult, TcpListener, TcpStream};

pub use refresh::COLUMNS_FILE;
pub use routes::Route;

/// How long a client has to send its whole request head; one that is
/// slower (or never finishes) is dropped, so it cannot hold a connection.
pub const HEAD_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the answer may take to be written to a client that reads it.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections served at once; the API is for a few operators' tools and
/// a scraper, so this is far above use and bounds what a flood holds.
pub const CONNECTIONS_MAX: usize = 64;

/// How long, and how many bytes, a closing connection's leftover input is
/// read for (see `handle`).
const LINGER_TIMEOUT: Duration = Duration::from_secs(1);
const LINGER_BYTES_MAX: usize = 64 * 1024;

static STARTED: OnceLock<Instant> = OnceLock::new();
/// `--data-dir`, where the snapshots are.
static DATA_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Serves the API on `listener` until the process exits, at most
/// [`CONNECTIONS_MAX`] connections at a time: one past it is closed at
/// once (its client retries).
pub async fn serve(listener: TcpListener, data_dir: PathBuf) {
    STARTED.get_or_init(Instant::now);
    DATA_DIR.get_or_init(|| data_dir);
    let open = Rc::new(Cell::new(0usize));
    loop {
        match listener.accept().await {
            Ok(_) if open.get() >= CONNECTIONS_MAX => {
                tracing::debug!("api connection refused: {CONNECTIONS_MAX} already open");
            }
            Ok((stream, _)) => {
                open.set(open.get() + 1);
                let open = open.clone();
                shoal_runtime::spawn(async move {
                    handle(stream).await;
                    open.set(open.get() - 1);
                });
            }
            Err(e) => {
                tracing::warn!("api accept failed: {e}");
                shoal_runtime::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn handle(mut stream: TcpStream) {
    let response = match shoal_runtime::time::timeout(HEAD_READ_TIMEOUT, read_head(&mut stream)).await {
        Err(_) => {
            tracing::debug!("api client dropped: no whole request within {HEAD_READ_TIMEOUT:?}");
            return;
        }
        Ok(None) => return,
        Ok(Some(Err(e))) => Response::error(e.status(), e),
        Ok(Some(Ok(request))) => match Route::of(&request) {
            Ok(route) => route.answer(&request).await,
            Err(status) => Response::error(status, format!("{} {}", refusal(status), request.path)),
        },
    };
    let write = stream.write_all(response.to_bytes());
    if shoal_runtime::time::timeout(WRITE_TIMEOUT, write).await.is_err() {
        tracing::debug!("api client dropped: the answer not taken within {WRITE_TIMEOUT:?}");
        return;
    }
    // A refused request may have left bytes unread (a body, an oversized
    // head); closing over them would reset the connection and could
    // discard the answer before the client read it. Say we are done
    // writing, then read what is left, bounded, until the client closes.
    let _ = stream.shutdown().await;
    let _ = shoal_runtime::time::timeout(LINGER_TIMEOUT, drain_input(&mut stream)).await;
}

/// Reads and drops what the client still sends, up to
/// [`LINGER_BYTES_MAX`], until it closes.
async fn drain_input(stream: &mut TcpStream) {
    let mut left = LINGER_BYTES_MAX;
    while left > 0 {
        let BufResult(read, _) = stream.read(Vec::with_capacity(4096)).await;
        match read {
            Ok(n) if n > 0 => left = left.saturating_sub(n),
            _ => return,
        }
    }
}

fn refusal(status: Status) -> &'static str {
    match status {
        Status::MethodNotAllowed => "method not allowed on",
        _ => "no such endpoint:",
    }
}

/// Reads until the request head is whole; `None` when the client closed
/// the connection first.
async fn read_head(stream: &mut TcpStream) -> Option<Result<Request, HttpError>> {
    let mut head = Vec::new();
    loop {
        match Request::parse(&head) {
            Ok(None) => {}
            done => return done.transpose(),
        }
        let BufResult(read, buf) = stream.read(Vec::with_capacity(1024)).await;
        match read {
            Ok(n) if n > 0 => head.extend_from_slice(&buf),
            _ => return None,
        }
    }
}

/// A helper thread's work that ended without an answer.
#[derive(Debug, thiserror::Error)]
#[error("helper thread: {0}")]
pub struct HelperError(String);

/// Runs `work` on a thread of its own and answers its result, so that
/// blocking file system calls do not stall the shard.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, HelperError> {
    let (done, answer) = futures_channel::oneshot::channel();
    std::thread::Builder::new()
        .name("shoal-api-files".to_string())
        .spawn(move || {
            let _ = done.send(work());
        })
        .map_err(|e| HelperError(e.to_string()))?;
    answer.await.map_err(|_| HelperError("ended without answering".to_string()))
}

/// A JSON answer, or a 500 with the error's text.
fn json_or_500<T: serde::Serialize, E: std::fmt::Display>(result: Result<T, E>) -> Response {
    match result.map(|value| serde_json::to_value(value)) {
        Ok(Ok(value)) => Response::json(&value),
        Ok(Err(e)) => Response::error(Status::InternalError, e),
        Err(e) => Response::error(Status::InternalError, e),
    }
}
