//! The WebSocket frame codec (RFC 6455 §5): [`WsDecoder`] turns client bytes into events
//! (whole messages, pings, pongs, closes) and the `encode_*` functions write server frames.
//!
//! Pure and I/O free. The decoder consumes a frame header only once it is complete (the caller
//! keeps unconsumed bytes), and payload bytes as they come, unmasking with a mask position that
//! survives across calls; so any split of the input yields the same events. Every protocol rule
//! a server must enforce maps to the close code RFC 6455 §7.4.1 assigns: unmasked client frames,
//! reserved bits, unknown opcodes, fragmented or oversized control frames and broken
//! fragmentation → 1002; a message over the limit → 1009 (refused from the frame header, before
//! its payload is buffered); text that is not UTF-8 → 1007.

use base64::Engine as _;
use sha1::{Digest, Sha1};

/// Largest control-frame payload (RFC 6455 §5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;
/// Longest frame header: 2 bytes + 8-byte length + 4-byte mask.
const MAX_HEADER_BYTES: usize = 14;
/// The GUID RFC 6455 §1.3 appends to the client key.
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Close codes (RFC 6455 §7.4.1).
pub const CLOSE_GOING_AWAY: u16 = 1001;
pub const CLOSE_PROTOCOL: u16 = 1002;
pub const CLOSE_INVALID_DATA: u16 = 1007;
pub const CLOSE_TOO_BIG: u16 = 1009;

/// Frame opcodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    Continuation = 0,
    Text = 1,
    Binary = 2,
    Close = 8,
    Ping = 9,
    Pong = 10,
}

impl Opcode {
    fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0 => Opcode::Continuation,
            1 => Opcode::Text,
            2 => Opcode::Binary,
            8 => Opcode::Close,
            9 => Opcode::Ping,
            10 => Opcode::Pong,
            _ => return None,
        })
    }

    fn is_control(self) -> bool {
        self as u8 >= 8
    }
}

/// A protocol violation by the client: close the connection with this code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("websocket close {code}: {reason}")]
pub struct WsError {
    pub code: u16,
    pub reason: &'static str,
}

const fn violation(reason: &'static str) -> WsError {
    WsError {
        code: CLOSE_PROTOCOL,
        reason,
    }
}

/// What a complete frame meant. Payloads are read from the decoder
/// ([`WsDecoder::message`], [`WsDecoder::control`]) until the next `decode` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsEvent {
    /// A whole data message (text is valid UTF-8).
    Message {
        text: bool,
    },
    Ping,
    Pong,
    /// A close frame with its code (None when it carried no payload); the reason is in
    /// [`WsDecoder::control`] after the two code bytes.
    Close {
        code: Option<u16>,
    },
}

#[derive(Debug, Clone, Copy)]
enum State {
    Header,
    Payload {
        opcode: Opcode,
        fin: bool,
        remaining: u64,
        mask: [u8; 4],
        mask_pos: usize,
    },
}

/// Decodes the frames of one connection's client side.
#[derive(Debug)]
pub struct WsDecoder {
    max_message: usize,
    state: State,
    /// The message being reassembled (reused across messages).
    message: Vec<u8>,
    /// Some(text?) while a fragmented message is in progress.
    in_progress: Option<bool>,
    control: [u8; MAX_CONTROL_PAYLOAD],
    control_len: usize,
}

impl WsDecoder {
    pub fn new(max_message: usize) -> WsDecoder {
        WsDecoder {
            max_message,
            state: State::Header,
            message: Vec::new(),
            in_progress: None,
            control: [0; MAX_CONTROL_PAYLOAD],
            control_len: 0,
        }
    }

    /// The last whole data message.
    pub fn message(&self) -> &[u8] {
        &self.message
    }

    /// The payload of the last control frame.
    pub fn control(&self) -> &[u8] {
        &self.control[..self.control_len]
    }

    /// Consumes as much of `input` as it can; returns the bytes consumed and the event of the
    /// frame that completed, if any (at most one per call: call again with the rest).
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Option<WsEvent>), WsError> {
        let mut at = 0;
        loop {
            match self.state {
                State::Header => match self.header(&input[at..])? {
                    Some(len) => at += len,
                    None => return Ok((at, None)),
                },
                State::Payload {
                    opcode,
                    fin,
                    remaining,
                    mask,
                    mask_pos,
                } => {
                    let take = remaining.min((input.len() - at) as u64) as usize;
                    let src = &input[at..at + take];
                    let dst = if opcode.is_control() {
                        let start = self.control_len;
                        self.control_len += take;
                        &mut self.control[start..start + take]
                    } else {
                        let start = self.message.len();
                        self.message.extend_from_slice(src);
                        &mut self.message[start..]
                    };
                    for (i, (d, s)) in dst.iter_mut().zip(src).enumerate() {
                        *d = s ^ mask[(mask_pos + i) % 4];
                    }
                    at += take;
                    let remaining = remaining - take as u64;
                    if remaining > 0 {
                        self.state = State::Payload {
                            opcode,
                            fin,
                            remaining,
                            mask,
                            mask_pos: (mask_pos + take) % 4,
                        };
                        return Ok((at, None));
                    }
                    self.state = State::Header;
                    if let Some(event) = self.complete(opcode, fin)? {
                        return Ok((at, Some(event)));
                    }
                }
            }
        }
    }

    /// Parses a complete frame header at the start of `input` (None: not complete yet).
    fn header(&mut self, input: &[u8]) -> Result<Option<usize>, WsError> {
        let (Some(&b0), Some(&b1)) = (input.first(), input.get(1)) else {
            return Ok(None);
        };
        let fin = b0 & 0x80 != 0;
        if b0 & 0x70 != 0 {
            return Err(violation("reserved bits set"));
        }
        let opcode = Opcode::from_bits(b0 & 0x0f).ok_or(violation("unknown opcode"))?;
        if b1 & 0x80 == 0 {
            return Err(violation("client frames must be masked"));
        }
        let ext = match b1 & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let header_len = 2 + ext + 4;
        debug_assert!(header_len <= MAX_HEADER_BYTES);
        if input.len() < header_len {
            return Ok(None);
        }
        let len = match ext {
            2 => u16::from_be_bytes([input[2], input[3]]) as u64,
            8 => {
                let mut b = [0; 8];
                b.copy_from_slice(&input[2..10]);
                let len = u64::from_be_bytes(b);
                if len >> 63 != 0 {
                    return Err(violation("frame length has its high bit set"));
                }
                len
            }
            _ => (b1 & 0x7f) as u64,
        };
        let mut mask = [0; 4];
        mask.copy_from_slice(&input[2 + ext..header_len]);
        if opcode.is_control() {
            if !fin {
                return Err(violation("fragmented control frame"));
            }
            if len > MAX_CONTROL_PAYLOAD as u64 {
                return Err(violation("control frame too long"));
            }
            self.control_len = 0;
        } else {
            match (opcode, self.in_progress) {
                (Opcode::Continuation, None) => {
                    return Err(violation("continuation without a message"))
                }
                (Opcode::Continuation, Some(_)) => {}
                (_, Some(_)) => return Err(violation("new message inside a fragmented one")),
                (_, None) => {
                    self.message.clear();
                    self.in_progress = Some(opcode == Opcode::Text);
                }
            }
            if (self.message.len() as u64).saturating_add(len) > self.max_message as u64 {
                return Err(WsError {
                    code: CLOSE_TOO_BIG,
                    reason: "message too big",
                });
            }
        }
        self.state = State::Payload {
            opcode,
            fin,
            remaining: len,
            mask,
            mask_pos: 0,
        };
        Ok(Some(header_len))
    }

    fn complete(&mut self, opcode: Opcode, fin: bool) -> Result<Option<WsEvent>, WsError> {
        Ok(Some(match opcode {
            Opcode::Ping => WsEvent::Ping,
            Opcode::Pong => WsEvent::Pong,
            Opcode::Close => {
                let payload = self.control();
                if payload.is_empty() {
                    return Ok(Some(WsEvent::Close { code: None }));
                }
                if payload.len() == 1 {
                    return Err(violation("close payload of one byte"));
                }
                let code = u16::from_be_bytes([payload[0], payload[1]]);
                if !valid_close_code(code) {
                    return Err(violation("invalid close code"));
                }
                if std::str::from_utf8(&payload[2..]).is_err() {
                    return Err(WsError {
                        code: CLOSE_INVALID_DATA,
                        reason: "close reason is not UTF-8",
                    });
                }
                WsEvent::Close { code: Some(code) }
            }
            Opcode::Text | Opcode::Binary | Opcode::Continuation => {
                if !fin {
                    return Ok(None);
                }
                let text = self.in_progress.take().unwrap_or(false);
                if text && std::str::from_utf8(&self.message).is_err() {
                    return Err(WsError {
                        code: CLOSE_INVALID_DATA,
                        reason: "text message is not UTF-8",
                    });
                }
                WsEvent::Message { text }
            }
        }))
    }
}

/// Whether a peer may send this close code (RFC 6455 §7.4, IANA registry).
pub fn valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// Writes one unmasked, final server frame.
pub fn encode_frame(out: &mut Vec<u8>, opcode: Opcode, payload: &[u8]) {
    out.push(0x80 | opcode as u8);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= u16::MAX as usize => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// Writes a close frame with `code` and `reason` (truncated to fit a control frame at a char
/// boundary).
pub fn encode_close(out: &mut Vec<u8>, code: u16, reason: &str) {
    let mut end = reason.len().min(MAX_CONTROL_PAYLOAD - 2);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut payload = [0u8; MAX_CONTROL_PAYLOAD];
    payload[..2].copy_from_slice(&code.to_be_bytes());
    payload[2..2 + end].copy_from_slice(&reason.as_bytes()[..end]);
    encode_frame(out, Opcode::Close, &payload[..2 + end]);
}

/// The `Sec-WebSocket-Accept` value for a client key (RFC 6455 §4.2.2).
pub fn accept_key(key: &[u8]) -> String {
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(ACCEPT_GUID);
    base64::engine::general_purpose::STANDARD.encode(sha.finalize())
}

#[cfg(test)]
#[path = "ws_tests.rs"]
mod tests;
