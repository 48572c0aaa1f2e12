//! The request-head parser: finds where a head ends in the bytes read so far ([`HeadScanner`])
//! and parses it ([`parse_head`]) into a [`RequestHead`] plus the facts the connection loop
//! needs (body framing, `Expect: 100-continue`, keep-alive, WebSocket upgrade validity).
//!
//! Pure and I/O free. Correctness rests on three rules: a head ends at the first empty line
//! (CRLF or bare LF, RFC 9112 §2.2); anything the grammar does not allow is refused with the
//! status RFC 9110/9112 prescribes (400 malformed, 431 too large, 501 unknown transfer coding,
//! 505 version, 417 expectation) rather than guessed at; and the body framing is decided
//! without ambiguity (both `Transfer-Encoding` and `Content-Length` → 400, conflicting lengths
//! → 400), which closes request-smuggling gaps.

use base64::Engine as _;

use super::ServerLimits;

/// The only WebSocket protocol version (RFC 6455 §4.1).
const WS_VERSION: &[u8] = b"13";
/// A `Sec-WebSocket-Key` is 16 random bytes (RFC 6455 §4.1).
const WS_KEY_BYTES: usize = 16;

/// An HTTP request method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Patch,
    Options,
    Connect,
    Trace,
    /// Any other token, verbatim (methods are case-sensitive).
    Other(String),
}

impl Method {
    fn from_token(token: &[u8]) -> Method {
        match token {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"PATCH" => Method::Patch,
            b"OPTIONS" => Method::Options,
            b"CONNECT" => Method::Connect,
            b"TRACE" => Method::Trace,
            // Tokens are ASCII (checked by the caller), so this is lossless.
            other => Method::Other(String::from_utf8_lossy(other).into_owned()),
        }
    }
}

/// A parsed request head, as the service sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: Method,
    /// The path of the request target, without the query (not percent-decoded).
    pub path: String,
    /// The query after `?`, if any (not percent-decoded).
    pub query: Option<String>,
    /// The host (from an absolute-form target, else `Host`), lower-case, port stripped.
    pub host: Option<String>,
    /// Every header field in arrival order: lower-case name, value with surrounding
    /// whitespace trimmed.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Whether the connection stays open after the response (HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`).
    pub keep_alive: bool,
    /// A valid WebSocket upgrade request (GET, HTTP/1.1, `Upgrade: websocket`,
    /// `Connection: upgrade`, version 13, a 16-byte key).
    pub websocket: bool,
}

impl Default for RequestHead {
    fn default() -> Self {
        RequestHead {
            method: Method::Get,
            path: String::new(),
            query: None,
            host: None,
            headers: Vec::new(),
            keep_alive: false,
            websocket: false,
        }
    }
}

impl RequestHead {
    /// The first value of header `name` (compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// Every value of header `name` (compared case-insensitively), in arrival order.
    pub fn headers<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }
}

/// How the request body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    None,
    /// Exactly this many bytes follow.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// What the connection loop needs besides the [`RequestHead`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadFacts {
    pub framing: BodyFraming,
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    pub expect_continue: bool,
    /// HTTP/1.1 (else 1.0).
    pub http11: bool,
    /// The client asked for a WebSocket upgrade that is not valid: answer this status
    /// (400, or 426 for an unsupported version).
    pub ws_refusal: Option<u16>,
}

/// Why a head was refused; [`HeadError::status`] is the response status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("malformed request head: {0}")]
    Malformed(&'static str),
    #[error("request head too large")]
    TooLarge,
    #[error("too many header fields")]
    TooManyHeaders,
    #[error("HTTP version not supported")]
    Version,
    #[error("unsupported transfer coding")]
    TransferCoding,
    #[error("unsupported expectation")]
    Expectation,
}

impl HeadError {
    /// The status to answer with (the connection is closed afterwards).
    pub fn status(self) -> u16 {
        match self {
            HeadError::Malformed(_) => 400,
            HeadError::TooLarge | HeadError::TooManyHeaders => 431,
            HeadError::Version => 505,
            HeadError::TransferCoding => 501,
            HeadError::Expectation => 417,
        }
    }
}

/// Finds the end of a head in a growing buffer without rescanning what it has seen.
#[derive(Debug, Default, Clone)]
pub struct HeadScanner {
    scanned: usize,
}

impl HeadScanner {
    /// Forget progress (a new head starts).
    pub fn reset(&mut self) {
        self.scanned = 0;
    }

    /// `buf` holds the head's bytes so far (starting at its first byte; it may only grow
    /// between calls until `reset`). Returns the head's length including the empty line.
    pub fn scan(&mut self, buf: &[u8]) -> Option<usize> {
        let mut from = self.scanned;
        while let Some(off) = memchr::memchr(b'\n', &buf[from.min(buf.len())..]) {
            let nl = from + off;
            match (buf.get(nl + 1), buf.get(nl + 2)) {
                (Some(b'\n'), _) => return Some(nl + 2),
                (Some(b'\r'), Some(b'\n')) => return Some(nl + 3),
                (None, _) | (Some(b'\r'), None) => {
                    // Undecidable yet: look at this newline again when more bytes arrive.
                    self.scanned = nl;
                    return None;
                }
                _ => from = nl + 1,
            }
        }
        self.scanned = buf.len();
        None
    }
}

/// The number of empty lines (CRLF or LF) at the start of `buf`, in bytes; RFC 9112 §2.2 says
/// a server should ignore them before a request line.
pub fn leading_empty_lines(buf: &[u8]) -> usize {
    let mut at = 0;
    loop {
        match (buf.get(at), buf.get(at + 1)) {
            (Some(b'\n'), _) => at += 1,
            (Some(b'\r'), Some(b'\n')) => at += 2,
            _ => return at,
        }
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// Comma-separated list elements of a header value, trimmed, empties skipped.
fn list(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

fn has_token(v: &[u8], token: &str) -> bool {
    list(v).any(|e| e.eq_ignore_ascii_case(token.as_bytes()))
}

/// Lower-cases a host and strips its port; refuses characters a host cannot contain.
fn normalize_host(raw: &[u8]) -> Result<Option<String>, HeadError> {
    const BAD: HeadError = HeadError::Malformed("invalid host");
    if raw.is_empty() {
        return Ok(None);
    }
    let host = if raw[0] == b'[' {
        let end = raw.iter().position(|&b| b == b']').ok_or(BAD)?;
        let rest = &raw[end + 1..];
        if !(rest.is_empty() || (rest[0] == b':' && rest[1..].iter().all(u8::is_ascii_digit))) {
            return Err(BAD);
        }
        &raw[..=end]
    } else {
        match raw.iter().rposition(|&b| b == b':') {
            Some(colon) if raw[colon + 1..].iter().all(u8::is_ascii_digit) => &raw[..colon],
            Some(_) => return Err(BAD),
            None => raw,
        }
    };
    let ok = |b: &u8| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:[]".contains(b);
    if host.is_empty() || !host.iter().all(ok) {
        return Err(BAD);
    }
    Ok(Some(String::from_utf8_lossy(host).to_ascii_lowercase()))
}

fn utf8(bytes: &[u8]) -> Result<String, HeadError> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| HeadError::Malformed("request target is not UTF-8"))
}

/// A request target split into its parts.
struct Target<'t> {
    path: String,
    query: Option<String>,
    /// The authority of an absolute-form target.
    authority: Option<&'t [u8]>,
}

/// Splits a request target into path, query and (absolute-form) authority.
fn parse_target<'t>(target: &'t [u8], method: &Method) -> Result<Target<'t>, HeadError> {
    let (authority, rest) = if target.starts_with(b"/") {
        (None, target)
    } else if target == b"*" {
        if *method != Method::Options {
            return Err(HeadError::Malformed("`*` target outside OPTIONS"));
        }
        return Ok(Target {
            path: "*".to_owned(),
            query: None,
            authority: None,
        });
    } else {
        let lower = |p: &[u8]| target.len() >= p.len() && target[..p.len()].eq_ignore_ascii_case(p);
        let after = if lower(b"http://") {
            &target[7..]
        } else if lower(b"https://") {
            &target[8..]
        } else {
            return Err(HeadError::Malformed("unsupported request target form"));
        };
        let end = after
            .iter()
            .position(|&b| b == b'/' || b == b'?')
            .unwrap_or(after.len());
        (Some(&after[..end]), &after[end..])
    };
    let rest = match rest.iter().position(|&b| b == b'#') {
        Some(hash) => &rest[..hash],
        None => rest,
    };
    let (path, query) = match rest.iter().position(|&b| b == b'?') {
        Some(q) => (&rest[..q], Some(utf8(&rest[q + 1..])?)),
        None => (rest, None),
    };
    let path = if path.is_empty() {
        "/".to_owned()
    } else {
        utf8(path)?
    };
    Ok(Target {
        path,
        query,
        authority,
    })
}

/// Parses one head (`bytes` as found by [`HeadScanner::scan`], terminator included) into
/// `head` (cleared first, so its allocations are reused across requests).
pub fn parse_head(
    bytes: &[u8],
    limits: &ServerLimits,
    head: &mut RequestHead,
) -> Result<HeadFacts, HeadError> {
    if bytes.len() > limits.max_head_bytes {
        return Err(HeadError::TooLarge);
    }
    head.headers.clear();
    head.query = None;
    head.host = None;
    head.websocket = false;
    let mut lines = bytes.split(|&b| b == b'\n').map(|l| match l {
        [rest @ .., b'\r'] => rest,
        l => l,
    });
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed("bad request line"));
    };
    if !is_token(method) {
        return Err(HeadError::Malformed("bad method"));
    }
    if target.is_empty() || target.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(HeadError::Malformed("bad request target"));
    }
    let http11 = match version {
        b"HTTP/1.1" => true,
        b"HTTP/1.0" => false,
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            return Err(HeadError::Version)
        }
        _ => return Err(HeadError::Malformed("bad HTTP version")),
    };
    head.method = Method::from_token(method);
    let Target {
        path,
        query,
        authority,
    } = parse_target(target, &head.method)?;
    head.path = path;
    head.query = query;

    let mut host_header: Option<&[u8]> = None;
    let mut content_length: Option<u64> = None;
    let mut te_seen = false;
    let mut te_chunked_count = 0usize;
    let mut te_other = false;
    let (mut conn_close, mut conn_keep_alive, mut conn_upgrade) = (false, false, false);
    let (mut upgrade_ws, mut expect_continue) = (false, false);
    let (mut ws_version, mut ws_key): (Option<&[u8]>, Option<&[u8]>) = (None, None);

    for line in lines {
        if line.is_empty() {
            break;
        }
        if matches!(line[0], b' ' | b'\t') {
            return Err(HeadError::Malformed("obsolete line folding"));
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or(HeadError::Malformed("header without colon"))?;
        let name = &line[..colon];
        if !is_token(name) {
            return Err(HeadError::Malformed("bad header name"));
        }
        let value = trim_ows(&line[colon + 1..]);
        if value.iter().any(|&b| b == b'\r' || b == 0) {
            return Err(HeadError::Malformed("bad header value"));
        }
        if head.headers.len() == limits.max_headers {
            return Err(HeadError::TooManyHeaders);
        }
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        match name.as_str() {
            "host" if host_header.is_some() => {
                return Err(HeadError::Malformed("several Host headers"))
            }
            "host" => host_header = Some(value),
            "content-length" => {
                for element in value.split(|&b| b == b',').map(trim_ows) {
                    if element.is_empty() || !element.iter().all(u8::is_ascii_digit) {
                        return Err(HeadError::Malformed("bad Content-Length"));
                    }
                    // Too many digits for u64 is simply "too large" (→ 413 later).
                    let n = std::str::from_utf8(element)
                        .ok()
                        .and_then(|s| s.parse::<u64>().ok())
                        .unwrap_or(u64::MAX);
                    if content_length.is_some_and(|c| c != n) {
                        return Err(HeadError::Malformed("conflicting Content-Length"));
                    }
                    content_length = Some(n);
                }
            }
            "transfer-encoding" => {
                te_seen = true;
                for coding in list(value) {
                    if coding.eq_ignore_ascii_case(b"chunked") {
                        te_chunked_count += 1;
                    } else {
                        te_other = true;
                    }
                }
            }
            "connection" => {
                conn_close |= has_token(value, "close");
                conn_keep_alive |= has_token(value, "keep-alive");
                conn_upgrade |= has_token(value, "upgrade");
            }
            "upgrade" => upgrade_ws |= has_token(value, "websocket"),
            "expect" => {
                if value.eq_ignore_ascii_case(b"100-continue") {
                    expect_continue = true;
                } else {
                    return Err(HeadError::Expectation);
                }
            }
            "sec-websocket-version" => ws_version = Some(value),
            "sec-websocket-key" => ws_key = Some(value),
            _ => {}
        }
        head.headers.push((name, value.to_vec()));
    }

    head.host = match authority {
        Some(authority) => normalize_host(authority)?,
        None => normalize_host(host_header.unwrap_or_default())?,
    };
    if http11 && host_header.is_none() {
        return Err(HeadError::Malformed("missing Host header"));
    }
    let framing = if te_seen {
        if content_length.is_some() {
            return Err(HeadError::Malformed(
                "both Transfer-Encoding and Content-Length",
            ));
        }
        if te_other {
            return Err(HeadError::TransferCoding);
        }
        if te_chunked_count != 1 || !http11 {
            return Err(HeadError::Malformed("bad Transfer-Encoding"));
        }
        BodyFraming::Chunked
    } else {
        match content_length {
            None | Some(0) => BodyFraming::None,
            Some(n) => BodyFraming::Length(n),
        }
    };
    head.keep_alive = if http11 {
        !conn_close
    } else {
        conn_keep_alive && !conn_close
    };

    let mut ws_refusal = None;
    if upgrade_ws {
        let key_ok = ws_key.is_some_and(|k| {
            base64::engine::general_purpose::STANDARD
                .decode(k)
                .is_ok_and(|d| d.len() == WS_KEY_BYTES)
        });
        if ws_version != Some(WS_VERSION) {
            ws_refusal = Some(426);
        } else if head.method != Method::Get || !http11 || !conn_upgrade || !key_ok {
            ws_refusal = Some(400);
        } else {
            head.websocket = true;
        }
    }
    Ok(HeadFacts {
        framing,
        expect_continue: expect_continue && http11,
        http11,
        ws_refusal,
    })
}

#[cfg(test)]
#[path = "head_tests.rs"]
mod tests;
