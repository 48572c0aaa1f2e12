//! The chunked transfer-coding decoder (RFC 9112 §7.1): a byte-level state machine that is fed
//! whatever the socket delivered and appends the decoded data to the body buffer.
//!
//! Correct for any split of the input because every piece of framing state (partial size,
//! position in an extension or trailer line, bytes left in a chunk) lives in the decoder, never
//! in the caller's buffer. The body limit is enforced from each chunk's declared size before a
//! byte of it is copied, so an oversized body is refused (413) without being buffered.
//! Extensions and trailers are skipped, bounded by named constants.

/// Longest chunk-size line extension accepted (`;name=value…`), bytes.
pub const MAX_CHUNK_EXT_BYTES: usize = 4096;
/// Most trailer bytes accepted after the last chunk.
pub const MAX_TRAILER_BYTES: usize = 16 * 1024;
/// Hex digits in a chunk size (16 fill a u64; leading zeros beyond that are refused).
const MAX_SIZE_DIGITS: u8 = 16;

/// Why a chunked body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChunkedError {
    /// Bad framing → 400.
    #[error("malformed chunked body: {0}")]
    Invalid(&'static str),
    /// The decoded body would exceed the limit → 413.
    #[error("chunked body exceeds the limit")]
    TooLarge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size { size: u64, digits: u8 },
    Ext { size: u64, len: usize },
    SizeLf { size: u64 },
    Data { remaining: u64 },
    DataCr,
    DataLf,
    TrailerStart,
    TrailerLine,
    TrailerLf,
    FinalLf,
    Done,
}

/// Decodes one chunked body.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    decoded: u64,
    trailer: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder {
            state: State::Size { size: 0, digits: 0 },
            decoded: 0,
            trailer: 0,
        }
    }
}

impl ChunkedDecoder {
    /// Whether the terminating chunk and trailers have been consumed.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Feeds `input`, appending decoded bytes to `out` (whose body must stay within
    /// `max_body`). Returns how many input bytes were consumed: all of them, or fewer when the
    /// body ended (the rest belongs to the next request).
    pub fn decode(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        max_body: usize,
    ) -> Result<usize, ChunkedError> {
        use ChunkedError::Invalid;
        let mut at = 0;
        while at < input.len() {
            if let State::Data { remaining } = self.state {
                let take = remaining.min((input.len() - at) as u64) as usize;
                out.extend_from_slice(&input[at..at + take]);
                at += take;
                self.state = match remaining - take as u64 {
                    0 => State::DataCr,
                    remaining => State::Data { remaining },
                };
                continue;
            }
            let b = input[at];
            at += 1;
            self.state = match self.state {
                State::Size { size, digits } => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        if digits == MAX_SIZE_DIGITS {
                            return Err(Invalid("chunk size too long"));
                        }
                        let d = (b as char).to_digit(16).unwrap_or(0) as u64;
                        State::Size {
                            size: size << 4 | d,
                            digits: digits + 1,
                        }
                    }
                    _ if digits == 0 => return Err(Invalid("missing chunk size")),
                    b';' | b' ' | b'\t' => State::Ext { size, len: 0 },
                    b'\r' => State::SizeLf { size },
                    _ => return Err(Invalid("bad chunk size")),
                },
                State::Ext { size, len } => match b {
                    b'\r' => State::SizeLf { size },
                    b'\n' => return Err(Invalid("bare LF in chunk line")),
                    _ if len == MAX_CHUNK_EXT_BYTES => {
                        return Err(Invalid("chunk extension too long"))
                    }
                    _ => State::Ext { size, len: len + 1 },
                },
                State::SizeLf { size } => match b {
                    b'\n' if size == 0 => State::TrailerStart,
                    b'\n' => {
                        let total = self.decoded.saturating_add(size);
                        if total > max_body as u64 {
                            return Err(ChunkedError::TooLarge);
                        }
                        self.decoded = total;
                        State::Data { remaining: size }
                    }
                    _ => return Err(Invalid("expected LF after chunk size")),
                },
                State::DataCr => match b {
                    b'\r' => State::DataLf,
                    _ => return Err(Invalid("expected CRLF after chunk data")),
                },
                State::DataLf => match b {
                    b'\n' => State::Size { size: 0, digits: 0 },
                    _ => return Err(Invalid("expected CRLF after chunk data")),
                },
                State::TrailerStart => match b {
                    b'\r' => State::FinalLf,
                    _ => self.trailer_byte(State::TrailerLine)?,
                },
                State::TrailerLine => match b {
                    b'\r' => self.trailer_byte(State::TrailerLf)?,
                    _ => self.trailer_byte(State::TrailerLine)?,
                },
                State::TrailerLf => match b {
                    b'\n' => self.trailer_byte(State::TrailerStart)?,
                    _ => return Err(Invalid("bare CR in trailer")),
                },
                State::FinalLf => match b {
                    b'\n' => {
                        self.state = State::Done;
                        return Ok(at);
                    }
                    _ => return Err(Invalid("expected LF after last chunk")),
                },
                State::Data { .. } | State::Done => return Ok(at - 1),
            };
        }
        Ok(at)
    }

    fn trailer_byte(&mut self, next: State) -> Result<State, ChunkedError> {
        self.trailer += 1;
        if self.trailer > MAX_TRAILER_BYTES {
            return Err(ChunkedError::Invalid("trailers too long"));
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(input: &[u8], max: usize) -> Result<(Vec<u8>, usize), ChunkedError> {
        let mut d = ChunkedDecoder::default();
        let mut out = Vec::new();
        let n = d.decode(input, &mut out, max)?;
        assert!(d.is_done() || n == input.len());
        Ok((out, n))
    }

    #[test]
    fn decodes_chunks_extensions_and_trailers() {
        let input =
            b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let (out, n) = decode_all(input, 1024).unwrap();
        assert_eq!(out, b"Wikipedia in\r\n\r\nchunks.");
        assert_eq!(&input[n..], b"NEXT");
    }

    #[test]
    fn refuses_over_limit_from_the_declared_size() {
        let input = b"10\r\n0123456789abcdef\r\n0\r\n\r\n";
        assert_eq!(decode_all(input, 15), Err(ChunkedError::TooLarge));
        assert!(decode_all(input, 16).is_ok());
        let mut d = ChunkedDecoder::default();
        let mut out = Vec::new();
        // Refused on the size line, before any data arrives.
        assert_eq!(
            d.decode(b"ffffffff\r\n", &mut out, 1 << 20),
            Err(ChunkedError::TooLarge)
        );
    }

    #[test]
    fn refuses_bad_framing() {
        for bad in [
            &b"\r\n"[..],
            b"g\r\n",
            b"4\r\nabcdX\r\n",
            b"4\nabcd\r\n",
            b"11111111111111111\r\n",
            b"0\r\n\r\r",
        ] {
            assert!(
                matches!(decode_all(bad, 1024), Err(ChunkedError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    fn encode(chunks: &[Vec<u8>], trailer: bool) -> Vec<u8> {
        let mut v = Vec::new();
        for c in chunks.iter().filter(|c| !c.is_empty()) {
            v.extend_from_slice(format!("{:x};e=v\r\n", c.len()).as_bytes());
            v.extend_from_slice(c);
            v.extend_from_slice(b"\r\n");
        }
        v.extend_from_slice(b"0\r\n");
        if trailer {
            v.extend_from_slice(b"Trailer-A: x\r\n");
        }
        v.extend_from_slice(b"\r\n");
        v
    }

    proptest! {
        #[test]
        fn every_split_decodes_the_same(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..6),
            trailer in any::<bool>(),
        ) {
            let input = encode(&chunks, trailer);
            let expected: Vec<u8> = chunks.concat();
            for split in 0..=input.len() {
                let mut d = ChunkedDecoder::default();
                let mut out = Vec::new();
                let a = d.decode(&input[..split], &mut out, 1 << 20).unwrap();
                prop_assert_eq!(a, split);
                let b = d.decode(&input[split..], &mut out, 1 << 20).unwrap();
                prop_assert!(d.is_done());
                prop_assert_eq!(a + b, input.len());
                prop_assert_eq!(&out, &expected);
            }
        }

        #[test]
        fn byte_at_a_time_never_panics(input in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut d = ChunkedDecoder::default();
            let mut out = Vec::new();
            for b in &input {
                if d.decode(std::slice::from_ref(b), &mut out, 64).is_err() || d.is_done() {
                    break;
                }
            }
            prop_assert!(out.len() <= 64);
        }
    }
}
