//! The HTTP/1.1 + WebSocket + TLS server that runs on the shard executors (DESIGN §3, §8).
//!
//! Every shard binds the same data address with `SO_REUSEPORT` ([`Listener`]) and runs
//! [`serve`] on its own glommio executor with its own [`HttpService`]; nothing here is shared
//! between shards except the TLS certificate store ([`CertStore`], behind an `Arc`), which is
//! read only during handshakes.
//!
//! The protocol logic is pure and I/O free, so it is tested byte by byte:
//! - [`head`] parses a request head (request line, headers, body framing, WebSocket upgrade
//!   validity) under [`ServerLimits`];
//! - [`chunked`] decodes a chunked body incrementally and enforces the body limit while reading;
//! - [`ws`] decodes and encodes RFC 6455 frames and reassembles fragmented messages.
//!
//! [`server`] and `websocket` drive those state machines over a connection (plain TCP or
//! rustls via [`tls`]) and own the connection-level rules: keep-alive, pipelining, idle timeout,
//! connection bound, and the shutdown signal.

pub mod chunked;
pub mod head;
mod response;
pub mod server;
pub mod tls;
mod websocket;
pub mod ws;

use std::future::Future;
use std::path::PathBuf;

pub use head::{Method, RequestHead};
pub use response::Response;
pub use server::{serve, Listener};
pub use tls::{CertStore, CertifiedKeyBundle, TlsAcceptor};

/// Default bound on a request head (request line + headers), in bytes; larger → 431.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 16 * 1024;
/// Default bound on the number of header fields in one request; more → 431.
pub const DEFAULT_MAX_HEADERS: usize = 100;
/// Default bound on a request body (DESIGN §8, §9); larger → 413.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Default bound on one reassembled WebSocket message; larger → close 1009.
pub const DEFAULT_MAX_WS_MESSAGE_BYTES: usize = 1024 * 1024;
/// Default time a connection may stay silent (between requests, or mid-request) before the
/// server closes it.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 60_000;
/// Default bound on open connections per listener per shard.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// The bounds one listener enforces. Every field is a hard limit; memory per connection is
/// bounded by `max_head_bytes` + `max_body_bytes` (or `max_ws_message_bytes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Request line + headers, bytes ([`DEFAULT_MAX_HEAD_BYTES`]); larger → 431.
    pub max_head_bytes: usize,
    /// Header fields per request ([`DEFAULT_MAX_HEADERS`]); more → 431.
    pub max_headers: usize,
    /// Request body, bytes ([`DEFAULT_MAX_BODY_BYTES`]); larger → 413 and close.
    pub max_body_bytes: usize,
    /// One reassembled WebSocket message, bytes; larger → close 1009.
    pub max_ws_message_bytes: usize,
    /// Silence allowed on an HTTP connection before it is closed, milliseconds. WebSockets
    /// are not subject to it (they are closed by the client, the service or shutdown).
    pub idle_timeout_ms: u64,
    /// Open connections per listener per shard; beyond it the shard stops accepting until one
    /// closes (the kernel backlog holds the rest).
    pub max_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            max_headers: DEFAULT_MAX_HEADERS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_ws_message_bytes: DEFAULT_MAX_WS_MESSAGE_BYTES,
            idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// What the service decides once it has seen a request head.
#[derive(Debug)]
pub enum HeadDecision<R> {
    /// Answer now without reading the body (the server discards a body within the limit so
    /// the connection stays reusable).
    Respond(Response),
    /// Read the whole body, then call [`HttpService::request`] with this route.
    ReadBody(R),
    /// Accept the WebSocket upgrade (only honoured when [`RequestHead::websocket`] is true;
    /// otherwise the server answers 426).
    Upgrade(R),
}

/// One WebSocket data message, reassembled from its fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsMessage<'a> {
    /// A text message; already checked to be UTF-8.
    Text(&'a [u8]),
    /// A binary message.
    Binary(&'a [u8]),
}

/// What the service wants after a WebSocket message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsVerdict {
    /// Keep the connection open.
    Continue,
    /// Close the connection with this status code and reason.
    Close { code: u16, reason: &'static str },
}

/// A data message the server sends on an established WebSocket (e.g. a server-side signaling
/// handshake's frames), queued by the service and written by the connection loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WsOutgoing {
    Text(String),
    Binary(Vec<u8>),
}

/// The application behind a listener: one per shard, never shared across threads.
///
/// The server is generic over it, so the async methods are called without boxing; implement
/// them with `async fn`. Their futures need not be `Send`: a service runs on exactly one
/// glommio executor.
pub trait HttpService: 'static {
    /// What `head` resolved a request to; handed back with the body or each message.
    type Route;

    /// After the request head: decide (route by host + path). `tls` says which listener the
    /// request arrived on.
    fn head(&self, head: &RequestHead, tls: bool) -> HeadDecision<Self::Route>;

    /// The whole body (Content-Length or chunked, at most `max_body_bytes`; a larger body is
    /// answered 413 by the server without calling this).
    fn request(
        &self,
        route: Self::Route,
        head: &RequestHead,
        body: &[u8],
    ) -> impl Future<Output = Response>;

    /// A WebSocket message (reassembled from fragments; text already UTF-8 checked).
    fn websocket_message(
        &self,
        route: &Self::Route,
        head: &RequestHead,
        msg: WsMessage<'_>,
    ) -> impl Future<Output = WsVerdict>;

    /// Resolves, with a close code, when the server must close this established WebSocket
    /// itself (e.g. 1013 when the ingestor quiesces). Never resolving is fine. The connection
    /// loop races it against reads; it is created once per connection.
    fn websocket_closed(&self, route: &Self::Route) -> impl Future<Output = u16>;

    /// Once after the upgrade, before any message is read (e.g. to start a server-side
    /// handshake); a `Close` verdict closes the WebSocket before it reads anything. Then
    /// [`HttpService::websocket_outgoing`] is drained. The default does nothing.
    fn websocket_opened(
        &self,
        route: &Self::Route,
        head: &RequestHead,
    ) -> impl Future<Output = WsVerdict> {
        let _ = (route, head);
        async { WsVerdict::Continue }
    }

    /// Messages the service queued for the client; drained after
    /// [`HttpService::websocket_opened`] and after every [`HttpService::websocket_message`],
    /// and written before a close the verdict asks for. The default sends nothing.
    fn websocket_outgoing(&self, route: &Self::Route) -> Vec<WsOutgoing> {
        let _ = route;
        Vec::new()
    }
}

/// Errors of the HTTP server and the TLS certificate store. Protocol errors of one request are
/// answered on the wire (4xx/5xx or a WebSocket close) and never surface here.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The listen address could not be bound (in use, not local, no permission). Retrying helps
    /// only once whatever holds the address lets go of it.
    #[error("cannot bind the HTTP listener on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// Accepting failed in a way that is not about one connection (the listening socket
    /// itself broke); `serve` stops. Retrying means binding a new listener.
    #[error("the HTTP listener failed: {0}")]
    Listener(#[source] std::io::Error),
    /// A bundle file could not be read. Retrying helps if the file appears (e.g. an upload
    /// still in progress).
    #[error("cannot read TLS bundle file {path}: {source}")]
    BundleRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The bundle's content is unusable (bad PEM, no certificate, no or unsupported key, key
    /// does not match the certificate). Retrying cannot help: the bundle must be replaced.
    #[error("invalid TLS bundle: {0}")]
    BundleInvalid(String),
    /// The TLS configuration could not be built (no protocol version the provider supports).
    /// Retrying cannot help.
    #[error("cannot build the TLS configuration: {0}")]
    TlsConfig(String),
}
