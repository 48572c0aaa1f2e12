//! Unit and property tests of the WebSocket frame codec.

use super::*;
use proptest::prelude::*;

/// A masked client frame.
fn client_frame(fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut v = vec![if fin { 0x80 } else { 0 } | opcode];
    match payload.len() {
        n if n < 126 => v.push(0x80 | n as u8),
        n if n <= u16::MAX as usize => {
            v.push(0x80 | 126);
            v.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            v.push(0x80 | 127);
            v.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    v.extend_from_slice(&mask);
    v.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    v
}

/// Events with their payloads, as a caller would see them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Message(bool, Vec<u8>),
    Ping(Vec<u8>),
    Pong,
    Close(Option<u16>),
    Error(u16),
}

/// Feeds `chunks` the way the connection loop does: unconsumed bytes stay in the caller's
/// buffer and are offered again with the next chunk.
fn run(max: usize, chunks: &[&[u8]]) -> Vec<Seen> {
    let mut d = WsDecoder::new(max);
    let mut buf = Vec::new();
    let mut seen = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match d.decode(&buf) {
                Err(e) => {
                    seen.push(Seen::Error(e.code));
                    return seen;
                }
                Ok((used, event)) => {
                    buf.drain(..used);
                    match event {
                        None => break,
                        Some(WsEvent::Message { text }) => {
                            seen.push(Seen::Message(text, d.message().to_vec()))
                        }
                        Some(WsEvent::Ping) => seen.push(Seen::Ping(d.control().to_vec())),
                        Some(WsEvent::Pong) => seen.push(Seen::Pong),
                        Some(WsEvent::Close { code }) => seen.push(Seen::Close(code)),
                    }
                }
            }
        }
    }
    seen
}

const M: [u8; 4] = [1, 2, 3, 4];

#[test]
fn reassembles_fragments_around_control_frames() {
    let mut input = client_frame(false, 1, b"hel", M);
    input.extend(client_frame(true, 9, b"p", M));
    input.extend(client_frame(false, 0, b"lo ", M));
    input.extend(client_frame(true, 0, "wörld".as_bytes(), M));
    input.extend(client_frame(true, 2, &[0, 255], M));
    input.extend(client_frame(true, 10, b"", M));
    input.extend(client_frame(true, 8, &[3, 232, b'o', b'k'], M));
    assert_eq!(
        run(1024, &[&input]),
        vec![
            Seen::Ping(b"p".to_vec()),
            Seen::Message(true, "hello wörld".as_bytes().to_vec()),
            Seen::Message(false, vec![0, 255]),
            Seen::Pong,
            Seen::Close(Some(1000)),
        ]
    );
}

#[test]
fn protocol_violations_map_to_close_codes() {
    let unmasked = [0x81, 0x01, b'a'];
    assert_eq!(run(1024, &[&unmasked]), vec![Seen::Error(1002)]);
    let rsv = [0xC1, 0x80, 0, 0, 0, 0];
    assert_eq!(run(1024, &[&rsv]), vec![Seen::Error(1002)]);
    let opcode = client_frame(true, 3, b"", M);
    assert_eq!(run(1024, &[&opcode]), vec![Seen::Error(1002)]);
    let fragmented_ping = client_frame(false, 9, b"", M);
    assert_eq!(run(1024, &[&fragmented_ping]), vec![Seen::Error(1002)]);
    let long_ping = client_frame(true, 9, &[0; 126], M);
    assert_eq!(run(1024, &[&long_ping]), vec![Seen::Error(1002)]);
    let orphan = client_frame(true, 0, b"x", M);
    assert_eq!(run(1024, &[&orphan]), vec![Seen::Error(1002)]);
    let mut interleaved = client_frame(false, 1, b"x", M);
    interleaved.extend(client_frame(true, 2, b"y", M));
    assert_eq!(run(1024, &[&interleaved]), vec![Seen::Error(1002)]);
    let bad_code = client_frame(true, 8, &[3, 237], M); // 1005 may not be sent
    assert_eq!(run(1024, &[&bad_code]), vec![Seen::Error(1002)]);
    let one_byte = client_frame(true, 8, &[3], M);
    assert_eq!(run(1024, &[&one_byte]), vec![Seen::Error(1002)]);
    let bad_text = client_frame(true, 1, &[0xff, 0xfe], M);
    assert_eq!(run(1024, &[&bad_text]), vec![Seen::Error(1007)]);
    let bad_reason = client_frame(true, 8, &[3, 232, 0xff], M);
    assert_eq!(run(1024, &[&bad_reason]), vec![Seen::Error(1007)]);
}

#[test]
fn the_message_limit_counts_every_fragment_before_buffering() {
    let mut input = client_frame(false, 2, &[0; 600], M);
    input.extend(client_frame(true, 0, &[0; 600], M));
    assert_eq!(run(1000, &[&input]), vec![Seen::Error(1009)]);
    // Refused from the header alone: the payload has not arrived.
    let header = &client_frame(true, 2, &[0; 70_000], M)[..14];
    assert_eq!(run(1000, &[header]), vec![Seen::Error(1009)]);
    assert_eq!(
        run(1200, &[&input]),
        vec![Seen::Message(false, vec![0; 1200])]
    );
}

#[test]
fn encodes_server_frames_and_accept_keys() {
    let mut out = Vec::new();
    encode_frame(&mut out, Opcode::Text, b"hi");
    assert_eq!(out, [0x81, 2, b'h', b'i']);
    out.clear();
    encode_frame(&mut out, Opcode::Binary, &[7; 300]);
    assert_eq!(&out[..4], &[0x82, 126, 1, 44]);
    out.clear();
    encode_close(&mut out, 1013, &"é".repeat(100));
    assert_eq!(out[0], 0x88);
    assert!(out[1] as usize <= MAX_CONTROL_PAYLOAD);
    assert!(std::str::from_utf8(&out[4..]).is_ok());
    // RFC 6455 §1.3's example.
    assert_eq!(
        accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
}

fn frames() -> impl Strategy<Value = Vec<(bool, u8, Vec<u8>)>> {
    // (fin, opcode, payload) sequences forming valid messages with pings interleaved.
    proptest::collection::vec(
        (
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..4),
            any::<bool>(),
        ),
        0..5,
    )
    .prop_map(|messages| {
        let mut frames = Vec::new();
        for (parts, ping) in messages {
            let n = parts.len();
            for (i, part) in parts.into_iter().enumerate() {
                let opcode = if i == 0 { 2 } else { 0 };
                frames.push((i + 1 == n, opcode, part));
                if ping && i == 0 {
                    frames.push((true, 9, b"ping".to_vec()));
                }
            }
        }
        frames
    })
}

proptest! {
    #[test]
    fn every_split_decodes_the_same(frames in frames(), mask in any::<[u8; 4]>()) {
        let input: Vec<u8> = frames
            .iter()
            .flat_map(|(fin, op, p)| client_frame(*fin, *op, p, mask))
            .collect();
        let whole = run(1 << 20, &[&input]);
        prop_assert!(!whole.iter().any(|s| matches!(s, Seen::Error(_))));
        for split in 0..=input.len() {
            prop_assert_eq!(&run(1 << 20, &[&input[..split], &input[split..]]), &whole);
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        prop_assert_eq!(&run(1 << 20, &bytes), &whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(input in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = run(64, &[&input]);
    }
}
