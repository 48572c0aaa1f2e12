//! Responses: the [`Response`] a service returns and its serialization into the connection's
//! reused output buffer.
//!
//! The server owns the framing headers so they are always right: it writes `Content-Length`
//! on every response that may carry a body (RFC 9110 §8.6 forbids it on 1xx, 204 and 304),
//! `Connection: close` whenever it will close, `Connection: keep-alive` for an HTTP/1.0
//! client it keeps, and no body for HEAD. Service headers with those names are dropped.

use std::io::Write as _;

/// An HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Extra headers (framing headers are the server's and are ignored here).
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// An empty response with this status.
    pub fn status(code: u16) -> Response {
        Response {
            status: code,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &'static str, v: impl Into<String>) -> Self {
        self.headers.push((name, v.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }
}

/// The reason phrase for a status (the empty string for codes without a common one; the
/// phrase is informational, RFC 9112 §4).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// Header names the server writes itself.
fn is_framing(name: &str) -> bool {
    ["content-length", "transfer-encoding", "connection"]
        .iter()
        .any(|f| name.eq_ignore_ascii_case(f))
}

/// How to frame one response on the wire.
#[derive(Debug, Clone, Copy)]
pub struct Framing {
    /// The connection closes after this response.
    pub close: bool,
    /// The request was HTTP/1.0 (it needs an explicit keep-alive).
    pub http10: bool,
    /// The request was HEAD: announce the length, send no body.
    pub head: bool,
}

/// Appends `resp` to `out`.
pub fn write_response(out: &mut Vec<u8>, resp: &Response, framing: Framing) {
    // Writing to a Vec cannot fail.
    let _ = write!(out, "HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status));
    for (name, value) in &resp.headers {
        if is_framing(name) {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        // A service must not be able to split the response with a newline in a value.
        out.extend(value.bytes().filter(|&b| b != b'\r' && b != b'\n'));
        out.extend_from_slice(b"\r\n");
    }
    let bodyless = matches!(resp.status, 100..=199 | 204 | 304);
    if !bodyless {
        let _ = write!(out, "content-length: {}\r\n", resp.body.len());
    }
    if framing.close {
        out.extend_from_slice(b"connection: close\r\n");
    } else if framing.http10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !bodyless && !framing.head {
        out.extend_from_slice(&resp.body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_every_response() {
        let mut out = Vec::new();
        let r = Response::status(200)
            .header("content-type", "text/plain")
            .header("Content-Length", "999")
            .header("x-evil", "a\r\nb")
            .body("hi");
        let f = Framing {
            close: false,
            http10: false,
            head: false,
        };
        write_response(&mut out, &r, f);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-evil: ab\r\ncontent-length: 2\r\n\r\nhi"
        );
        out.clear();
        let f = Framing {
            close: true,
            http10: true,
            head: true,
        };
        write_response(&mut out, &r.clone(), f);
        assert!(out.ends_with(b"content-length: 2\r\nconnection: close\r\n\r\n"));
        out.clear();
        write_response(&mut out, &Response::status(204), f);
        assert_eq!(out, b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n");
    }
}
