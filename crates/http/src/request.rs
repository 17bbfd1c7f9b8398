//! A request head (request line and headers) decoded from the bytes read
//! so far: incomplete until its blank line, refused past
//! [`HEAD_BYTES_MAX`], and its target split into a percent-decoded path
//! and query parameters.

use crate::percent_decode;

/// The longest request head read; a client that sends more is answered
/// 431 and dropped.
pub const HEAD_BYTES_MAX: usize = 8 * 1024;

/// Why a request cannot be served; each maps to a status
/// ([`HttpError::status`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("the request head is longer than {HEAD_BYTES_MAX} bytes")]
    HeadTooLarge,
    #[error("malformed request line; expected `METHOD /path HTTP/1.1`")]
    BadRequestLine,
    #[error("only HTTP/1.0 and HTTP/1.1 are served")]
    BadVersion,
    #[error("malformed header line; expected `Name: value`")]
    BadHeader,
    #[error("the request target must be a path starting with /")]
    BadTarget,
    #[error("bad percent-escape in the request target")]
    BadEscape,
    #[error("the request target is not UTF-8 once decoded")]
    NotUtf8,
    #[error("request bodies are not accepted; arguments go in the path and the query")]
    BodyNotAccepted,
}

impl HttpError {
    /// The status this error is answered with.
    pub fn status(&self) -> crate::Status {
        match self {
            HttpError::HeadTooLarge => crate::Status::HeadTooLarge,
            _ => crate::Status::BadRequest,
        }
    }
}

/// The methods the API tells apart; any other is answered 405.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Delete,
    Other(String),
}

/// A decoded request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// The percent-decoded path, without the query.
    pub path: String,
    /// The query's `name=value` pairs, percent-decoded, in order; a name
    /// without `=` has an empty value.
    pub query: Vec<(String, String)>,
}

impl Request {
    /// The request whose head `bytes` start with; `Ok(None)` while the
    /// head's blank line has not arrived and `bytes` are under
    /// [`HEAD_BYTES_MAX`].
    pub fn parse(bytes: &[u8]) -> Result<Option<Request>, HttpError> {
        let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
            return if bytes.len() >= HEAD_BYTES_MAX { Err(HttpError::HeadTooLarge) } else { Ok(None) };
        };
        if end + 4 > HEAD_BYTES_MAX {
            return Err(HttpError::HeadTooLarge);
        }
        let head = std::str::from_utf8(&bytes[..end]).map_err(|_| HttpError::NotUtf8)?;
        let mut lines = head.split("\r\n");
        let request = parse_request_line(lines.next().unwrap_or_default())?;
        for line in lines {
            let (name, value) = line.split_once(':').ok_or(HttpError::BadHeader)?;
            if name.is_empty() || name.contains(|c: char| c.is_ascii_whitespace() || c.is_ascii_control()) {
                return Err(HttpError::BadHeader);
            }
            if name.eq_ignore_ascii_case("content-length") && value.trim() != "0" {
                return Err(HttpError::BodyNotAccepted);
            }
            if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(HttpError::BodyNotAccepted);
            }
        }
        Ok(Some(request))
    }

    /// The decoded value of query parameter `name`, if given.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The path's part after `prefix` and its slash: `Some("")` for the
    /// prefix itself, `None` when the path is not under it.
    pub fn rest_of<'a>(&'a self, prefix: &str) -> Option<&'a str> {
        let rest = self.path.strip_prefix(prefix)?;
        match rest {
            "" => Some(""),
            _ => rest.strip_prefix('/'),
        }
    }
}

fn parse_request_line(line: &str) -> Result<Request, HttpError> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::BadRequestLine);
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(HttpError::BadRequestLine);
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(HttpError::BadVersion);
    }
    if !target.starts_with('/') {
        return Err(HttpError::BadTarget);
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((percent_decode(name, true)?, percent_decode(value, true)?))
        })
        .collect::<Result<_, HttpError>>()?;
    let method = match method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "DELETE" => Method::Delete,
        other => Method::Other(other.to_string()),
    };
    Ok(Request { method, path: percent_decode(path, false)?, query })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<Request>, HttpError> {
        Request::parse(text.as_bytes())
    }

    #[test]
    fn decodes_a_request() {
        let request = parse("POST /storage_service/snapshots?tag=a%20b&kn=ks&reset HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("valid")
            .expect("complete");
        assert_eq!(request.method, Method::Post);
        assert_eq!(request.path, "/storage_service/snapshots");
        assert_eq!(request.param("tag"), Some("a b"));
        assert_eq!(request.param("kn"), Some("ks"));
        assert_eq!(request.param("reset"), Some(""));
        assert_eq!(request.param("cf"), None);
    }

    #[test]
    fn decodes_the_path() {
        let request = parse("GET /system/logger/shoal_cluster%3A%3Agroup0 HTTP/1.0\r\n\r\n").expect("valid");
        let request = request.expect("complete");
        assert_eq!(request.path, "/system/logger/shoal_cluster::group0");
        assert_eq!(request.rest_of("/system/logger"), Some("shoal_cluster::group0"));
        assert_eq!(request.rest_of("/system/log"), None);
        assert_eq!(request.rest_of("/system/logger/shoal_cluster::group0"), Some(""));
    }

    #[test]
    fn waits_for_the_blank_line() {
        assert_eq!(parse("GET / HTTP/1.1\r\nHost: x\r\n"), Ok(None));
        assert_eq!(parse(""), Ok(None));
    }

    #[test]
    fn bounds_the_head() {
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(HEAD_BYTES_MAX));
        assert_eq!(parse(&long), Err(HttpError::HeadTooLarge));
        assert_eq!(parse(&format!("{long}\r\n")), Err(HttpError::HeadTooLarge));
        assert_eq!(HttpError::HeadTooLarge.status(), crate::Status::HeadTooLarge);
    }

    #[test]
    fn refuses_malformed_heads() {
        assert_eq!(parse("GET\r\n\r\n"), Err(HttpError::BadRequestLine));
        assert_eq!(parse("GET  / HTTP/1.1\r\n\r\n"), Err(HttpError::BadRequestLine));
        assert_eq!(parse("get / HTTP/1.1\r\n\r\n"), Err(HttpError::BadRequestLine));
        assert_eq!(parse("GET / HTTP/2\r\n\r\n"), Err(HttpError::BadVersion));
        assert_eq!(parse("GET x HTTP/1.1\r\n\r\n"), Err(HttpError::BadTarget));
        assert_eq!(parse("GET /%g0 HTTP/1.1\r\n\r\n"), Err(HttpError::BadEscape));
        assert_eq!(parse("GET /?a=%ff HTTP/1.1\r\n\r\n"), Err(HttpError::NotUtf8));
        assert_eq!(parse("GET / HTTP/1.1\r\nno colon\r\n\r\n"), Err(HttpError::BadHeader));
        assert_eq!(parse("GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"), Err(HttpError::BodyNotAccepted));
        assert_eq!(parse("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").map(|r| r.is_some()), Ok(true));
        assert_eq!(Request::parse(b"GET /\xff HTTP/1.1\r\n\r\n"), Err(HttpError::NotUtf8));
        let other = parse("PUT / HTTP/1.1\r\n\r\n").expect("valid").expect("complete");
        assert_eq!(other.method, Method::Other("PUT".into()));
    }
}
