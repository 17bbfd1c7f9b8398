//! The HTTP/1.1 of the node's API (`--api-port`), free of I/O: a request
//! head decoded from bytes ([`Request::parse`]), a response written to
//! bytes ([`Response`]). The server that reads and writes the socket lives
//! in the `shoal` binary; keeping the decoder here lets it be unit tested
//! and fuzzed (`fuzz/fuzz_targets/http_request.rs`) without a runtime.
//!
//! What is served is deliberately small: one request per connection, no
//! request body (every operation takes its arguments in the path and the
//! query), a head of at most [`HEAD_BYTES_MAX`] bytes. Anything else is a
//! typed [`HttpError`] that the server answers with its status and a JSON
//! error body, then closes the connection.

mod percent;
mod request;
mod response;

pub use percent::{percent_decode, percent_encode};
pub use request::{HttpError, Method, Request, HEAD_BYTES_MAX};
pub use response::{Response, Status};
