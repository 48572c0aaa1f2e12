//! Fuzzes the data listeners' protocol parsers — request heads, chunked bodies and WebSocket
//! frames — with any bytes in any chunking: each must answer a value or an error, never
//! panic, and never hold more than its bound.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nervix_net::http::chunked::ChunkedDecoder;
use nervix_net::http::head::{parse_head, HeadScanner, RequestHead};
use nervix_net::http::ws::WsDecoder;
use nervix_net::http::ServerLimits;

/// The bodies and messages the fuzzer may make the parsers hold.
const MAX_BODY_BYTES: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, bytes)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let limits = ServerLimits::default();

    // A request head: scanned across chunks, then parsed.
    let mut scanner = HeadScanner::default();
    let mut seen = 0;
    for piece in bytes.chunks(chunk) {
        seen += piece.len();
        if let Some(end) = scanner.scan(&bytes[..seen]) {
            let mut head = RequestHead::default();
            let _ = parse_head(&bytes[..end.min(bytes.len())], &limits, &mut head);
            break;
        }
    }

    // A chunked body.
    let mut chunked = ChunkedDecoder::default();
    let mut body = Vec::new();
    for piece in bytes.chunks(chunk) {
        match chunked.decode(piece, &mut body, MAX_BODY_BYTES) {
            Ok(_) => assert!(body.len() <= MAX_BODY_BYTES),
            Err(_) => break,
        }
        if chunked.is_done() {
            break;
        }
    }

    // WebSocket frames: a connection keeps the bytes a partial frame header left over.
    let mut frames = WsDecoder::new(MAX_BODY_BYTES);
    let mut pending: Vec<u8> = Vec::new();
    for piece in bytes.chunks(chunk) {
        pending.extend_from_slice(piece);
        let mut at = 0;
        while at < pending.len() {
            match frames.decode(&pending[at..]) {
                Ok((0, None)) => break,
                Ok((used, _)) => {
                    assert!(frames.message().len() <= MAX_BODY_BYTES);
                    at += used;
                }
                Err(_) => return,
            }
        }
        pending.drain(..at);
    }
});
