//! The WebSocket connection loop after a successful upgrade (RFC 6455): decodes client frames
//! with [`WsDecoder`] out of the connection's read buffer, hands whole messages to the
//! service, answers pings, and runs the close handshake.
//!
//! A service may also speak first and answer: [`HttpService::websocket_opened`] runs once
//! after the upgrade, and what [`HttpService::websocket_outgoing`] queued is written after it
//! and after every message (before any close the verdict asks for).
//!
//! Each wait for input races three things: the socket, the service's
//! [`HttpService::websocket_closed`] (created once per connection) and server shutdown; so a
//! quiesce (1013) or a stop (1001) closes an idle WebSocket at once. Every close, from either
//! side, sends a close frame and then gives the client [`CLOSE_GRACE_MS`] to answer before the
//! socket closes, so clients see a clean close rather than a reset.

use std::io;
use std::time::Duration;

use futures_lite::future::or;
use futures_lite::AsyncWriteExt;

use super::server::{Connection, Transport};
use super::ws::{encode_close, encode_frame, Opcode, WsDecoder, WsEvent, CLOSE_GOING_AWAY};
use super::{HttpService, WsMessage, WsOutgoing, WsVerdict};

/// How long the server waits for the client's close frame after sending its own.
pub const CLOSE_GRACE_MS: u64 = 2_000;
/// Reason sent with the close that accompanies server shutdown.
const SHUTDOWN_REASON: &str = "server shutting down";

/// What woke the loop while it waited for input.
enum Wake {
    Read(io::Result<usize>),
    Closed(u16),
    Stop,
}

/// Serves the WebSocket on `conn` until either side closes it.
pub(super) async fn run<S: HttpService, T: Transport>(
    conn: &mut Connection<'_, S, T>,
    route: S::Route,
) {
    // WebSockets stay open while silent; the read deadline is only for HTTP.
    conn.io.set_read_timeout(None);
    let mut decoder = WsDecoder::new(conn.limits.max_ws_message_bytes);
    let service = conn.service;
    let mut closed = std::pin::pin!(service.websocket_closed(&route));
    let opened = service.websocket_opened(&route, &conn.head).await;
    queue_outgoing(service, &route, &mut conn.out);
    if let WsVerdict::Close { code, reason } = opened {
        return close(conn, &mut decoder, code, reason).await;
    }
    loop {
        // Everything already buffered first (bytes that followed the upgrade request, or a
        // read that held several frames).
        loop {
            let (used, event) = match decoder.decode(conn.rb.filled()) {
                Ok(decoded) => decoded,
                Err(e) => return close(conn, &mut decoder, e.code, e.reason).await,
            };
            conn.rb.consume(used);
            match event {
                None => break,
                Some(WsEvent::Message { text }) => {
                    let msg = if text {
                        WsMessage::Text(decoder.message())
                    } else {
                        WsMessage::Binary(decoder.message())
                    };
                    let verdict = service.websocket_message(&route, &conn.head, msg).await;
                    queue_outgoing(service, &route, &mut conn.out);
                    if let WsVerdict::Close { code, reason } = verdict {
                        return close(conn, &mut decoder, code, reason).await;
                    }
                }
                Some(WsEvent::Ping) => encode_frame(&mut conn.out, Opcode::Pong, decoder.control()),
                Some(WsEvent::Pong) => {}
                Some(WsEvent::Close { code }) => {
                    // Echo the client's code (RFC 6455 §5.5.1), then close.
                    match code {
                        Some(code) => encode_close(&mut conn.out, code, ""),
                        None => encode_frame(&mut conn.out, Opcode::Close, &[]),
                    }
                    if conn.flush().await.is_ok() {
                        let _ = conn.io.close().await;
                    }
                    return;
                }
            }
        }
        if conn.flush().await.is_err() {
            return;
        }
        let wake = {
            let Connection {
                io, rb, stopped, ..
            } = &mut *conn;
            or(async { Wake::Read(rb.fill(io).await) }, async {
                or(async { Wake::Closed(closed.as_mut().await) }, async {
                    let _ = stopped.as_mut().await;
                    Wake::Stop
                })
                .await
            })
            .await
        };
        match wake {
            Wake::Read(Ok(0)) | Wake::Read(Err(_)) => return,
            Wake::Read(Ok(_)) => {}
            Wake::Closed(code) => return close(conn, &mut decoder, code, "").await,
            Wake::Stop => {
                return close(conn, &mut decoder, CLOSE_GOING_AWAY, SHUTDOWN_REASON).await
            }
        }
    }
}

/// Encodes the messages the service queued (flushed with the next flush or close).
fn queue_outgoing<S: HttpService>(service: &S, route: &S::Route, out: &mut Vec<u8>) {
    for message in service.websocket_outgoing(route) {
        match message {
            WsOutgoing::Text(text) => encode_frame(out, Opcode::Text, text.as_bytes()),
            WsOutgoing::Binary(bytes) => encode_frame(out, Opcode::Binary, &bytes),
        }
    }
}

/// Server-initiated close: send the close frame, wait (bounded) for the client's, close.
async fn close<S: HttpService, T: Transport>(
    conn: &mut Connection<'_, S, T>,
    decoder: &mut WsDecoder,
    code: u16,
    reason: &str,
) {
    encode_close(&mut conn.out, code, reason);
    if conn.flush().await.is_err() {
        return;
    }
    conn.io
        .set_read_timeout(Some(Duration::from_millis(CLOSE_GRACE_MS)));
    // Until the client's close frame, a protocol error, end of input or the grace timeout;
    // whatever else arrives is discarded (the connection is closing).
    'wait: loop {
        loop {
            match decoder.decode(conn.rb.filled()) {
                Ok((used, event)) => {
                    conn.rb.consume(used);
                    match event {
                        Some(WsEvent::Close { .. }) => break 'wait,
                        Some(_) => {}
                        None => break,
                    }
                }
                Err(_) => break 'wait,
            }
        }
        match conn.rb.fill(&mut conn.io).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let _ = conn.io.close().await;
}
