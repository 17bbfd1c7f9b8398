//! A response: a status and a JSON body (every answer of the API is JSON,
//! errors included, as `{"code": status, "message": text}` the way
//! ScyllaDB's REST API answers them), except `/metrics`, which is
//! Prometheus text.

/// The statuses the API answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    HeadTooLarge,
    InternalError,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::HeadTooLarge => 431,
            Status::InternalError => 500,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::HeadTooLarge => "Request Header Fields Too Large",
            Status::InternalError => "Internal Server Error",
        }
    }
}

/// A response ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: Status,
    content_type: &'static str,
    body: String,
}

impl Response {
    /// A 200 answer carrying `value`.
    pub fn json(value: &serde_json::Value) -> Response {
        Response::with_status(Status::Ok, value)
    }

    pub fn with_status(status: Status, value: &serde_json::Value) -> Response {
        Response { status, content_type: "application/json", body: format!("{value}\n") }
    }

    /// An error answer: `{"code": 404, "message": "..."}`.
    pub fn error(status: Status, message: impl std::fmt::Display) -> Response {
        let body = serde_json::json!({ "code": status.code(), "message": message.to_string() });
        Response::with_status(status, &body)
    }

    /// A 200 answer in Prometheus' text exposition format.
    pub fn prometheus(text: String) -> Response {
        Response { status: Status::Ok, content_type: "text/plain; version=0.0.4", body: text }
    }

    pub fn body(&self) -> &str {
        &self.body
    }

    /// The whole response, head and body, for a connection closed after it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.status.code(),
            self.status.reason(),
            self.content_type,
            self.body.len()
        );
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(self.body.as_bytes());
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_json() {
        let response = Response::error(Status::NotFound, "no \"such\" path");
        let text = String::from_utf8(response.to_bytes()).expect("utf-8");
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"));
        let body: serde_json::Value = serde_json::from_str(text.split_once("\r\n\r\n").expect("head").1).expect("json");
        assert_eq!(body, serde_json::json!({"code": 404, "message": "no \"such\" path"}));
        assert!(text.contains(&format!("Content-Length: {}\r\n", response.body().len())));
    }
}
