//! RFC 8949 items read in place: [`Reader::head`] decodes one initial byte and its argument,
//! [`Reader::string_into`] appends a (possibly indefinite-length) string's content,
//! [`Reader::skip`] checks and skips a whole item, and [`Reader::json_into`] writes one as JSON
//! text.
//!
//! Correctness: every read is bounds-checked against the payload (a declared length past the
//! end is refused before anything is copied), arguments use only the encodings RFC 8949 §3
//! defines (additional information 28–30 is malformed), indefinite-length strings take only
//! definite chunks of their own major type, `break` appears only where an indefinite-length
//! item may end, and nesting is bounded by [`MAX_CBOR_DEPTH`], so no input recurses without
//! bound or panics. Tags are refused everywhere but where the decoder accepts them.

use crate::codec::json::encode::write_string;

use super::error::DecodeCause;
use super::MAX_CBOR_DEPTH;

pub(crate) use crate::codec::decoding::fail;

/// A failure at a byte offset, before its record and field are attached.
pub(crate) type Fail = crate::codec::decoding::Fail<DecodeCause>;

/// One item's initial byte and argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Head {
    Uint(u64),
    /// The value `-1 - n`.
    Nint(u64),
    /// Byte string of this length, `None` for indefinite length.
    Bytes(Option<u64>),
    Text(Option<u64>),
    Array(Option<u64>),
    Map(Option<u64>),
    Tag(u64),
    Bool(bool),
    Null,
    Undefined,
    /// Any other simple value.
    Simple(u8),
    Float(f64),
    Break,
}

impl Head {
    /// How an error message names the item.
    pub fn kind(self) -> &'static str {
        match self {
            Head::Uint(_) | Head::Nint(_) => "integer",
            Head::Bytes(_) => "byte string",
            Head::Text(_) => "text string",
            Head::Array(_) => "array",
            Head::Map(_) => "map",
            Head::Tag(_) => "tag",
            Head::Bool(_) => "boolean",
            Head::Null => "null",
            Head::Undefined => "undefined",
            Head::Simple(_) => "simple value",
            Head::Float(_) => "float",
            Head::Break => "break",
        }
    }
}

pub(crate) struct Reader<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, pos: 0 }
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Fail> {
        if n > self.remaining() {
            return Err(fail(self.bytes.len(), DecodeCause::End));
        }
        let slice = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    /// The head at the cursor, without moving it.
    pub fn peek(&mut self) -> Result<Head, Fail> {
        let at = self.pos;
        let head = self.head();
        self.pos = at;
        head
    }

    /// Reads one head.
    pub fn head(&mut self) -> Result<Head, Fail> {
        let at = self.pos;
        let initial = *self.take(1)?.first().unwrap_or(&0);
        let major = initial >> 5;
        let info = initial & 0x1F;
        let argument = match info {
            0..=23 => Some(u64::from(info)),
            24 => Some(u64::from(self.take(1)?[0])),
            25 => Some(u64::from(u16::from_be_bytes([
                self.take(1)?[0],
                self.take(1)?[0],
            ]))),
            26 => {
                let b = self.take(4)?;
                Some(u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
            }
            27 => {
                let b = self.take(8)?;
                Some(u64::from_be_bytes([
                    b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                ]))
            }
            28..=30 => {
                return Err(fail(
                    at,
                    DecodeCause::Malformed("reserved additional information 28 to 30"),
                ))
            }
            _ => None,
        };
        let indefinite = |h: fn(Option<u64>) -> Head| Ok(h(argument));
        match (major, argument) {
            (0, Some(n)) => Ok(Head::Uint(n)),
            (1, Some(n)) => Ok(Head::Nint(n)),
            (2, _) => indefinite(Head::Bytes),
            (3, _) => indefinite(Head::Text),
            (4, _) => indefinite(Head::Array),
            (5, _) => indefinite(Head::Map),
            (6, Some(n)) => Ok(Head::Tag(n)),
            (7, _) => Ok(match (info, argument) {
                (20, _) => Head::Bool(false),
                (21, _) => Head::Bool(true),
                (22, _) => Head::Null,
                (23, _) => Head::Undefined,
                (24, Some(n)) if n < 32 => {
                    return Err(fail(
                        at,
                        DecodeCause::Malformed("two-byte simple value below 32"),
                    ))
                }
                (25, Some(n)) => Head::Float(f16_to_f64(n as u16)),
                (26, Some(n)) => Head::Float(f64::from(f32::from_bits(n as u32))),
                (27, Some(n)) => Head::Float(f64::from_bits(n)),
                (31, None) => Head::Break,
                (_, Some(n)) => Head::Simple(n as u8),
                (_, None) => Head::Break,
            }),
            _ => Err(fail(
                at,
                DecodeCause::Malformed("indefinite length on an integer or tag"),
            )),
        }
    }

    /// A definite length or count, refused when it cannot fit in the rest of the payload
    /// (every item takes at least one byte).
    pub fn length(&self, n: u64, at: usize) -> Result<usize, Fail> {
        match usize::try_from(n) {
            Ok(n) if n <= self.remaining() => Ok(n),
            _ => Err(fail(at, DecodeCause::End)),
        }
    }

    /// Appends the content of the string whose head (`Bytes` or `Text`, of `len`) was just
    /// read at `at`; chunks of an indefinite-length string are concatenated. Text is checked
    /// to be UTF-8 (each chunk on its own, as RFC 8949 §3.2.3 requires).
    pub fn string_into(
        &mut self,
        text: bool,
        len: Option<u64>,
        at: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Fail> {
        match len {
            Some(n) => {
                let n = self.length(n, at)?;
                let chunk = self.take(n)?;
                if text && std::str::from_utf8(chunk).is_err() {
                    return Err(fail(at, DecodeCause::Utf8));
                }
                out.extend_from_slice(chunk);
                Ok(())
            }
            None => loop {
                let chunk_at = self.pos;
                match (text, self.head()?) {
                    (_, Head::Break) => return Ok(()),
                    (false, Head::Bytes(Some(n))) | (true, Head::Text(Some(n))) => {
                        self.string_into(text, Some(n), chunk_at, out)?
                    }
                    _ => {
                        return Err(fail(
                            chunk_at,
                            DecodeCause::Malformed(
                                "an indefinite-length string holds a chunk of another kind",
                            ),
                        ))
                    }
                }
            },
        }
    }

    /// Skips the string whose head was just read, checking text for UTF-8.
    fn skip_string(&mut self, text: bool, len: Option<u64>, at: usize) -> Result<(), Fail> {
        match len {
            Some(n) => {
                let n = self.length(n, at)?;
                let chunk = self.take(n)?;
                if text && std::str::from_utf8(chunk).is_err() {
                    return Err(fail(at, DecodeCause::Utf8));
                }
                Ok(())
            }
            None => loop {
                let chunk_at = self.pos;
                match (text, self.head()?) {
                    (_, Head::Break) => return Ok(()),
                    (false, Head::Bytes(Some(n))) | (true, Head::Text(Some(n))) => {
                        self.skip_string(text, Some(n), chunk_at)?
                    }
                    _ => {
                        return Err(fail(
                            chunk_at,
                            DecodeCause::Malformed(
                                "an indefinite-length string holds a chunk of another kind",
                            ),
                        ))
                    }
                }
            },
        }
    }

    /// Whether the container whose head said `count` has another item (consuming the `break`
    /// of an indefinite-length one). `done` counts the items read so far.
    pub fn more(&mut self, count: Option<usize>, done: usize) -> Result<bool, Fail> {
        match count {
            Some(n) => Ok(done < n),
            None => {
                if self.bytes.get(self.pos) == Some(&0xFF) {
                    self.pos += 1;
                    Ok(false)
                } else if self.at_end() {
                    Err(fail(self.pos, DecodeCause::End))
                } else {
                    Ok(true)
                }
            }
        }
    }

    /// A container's definite count (bounded by the payload), or `None` if indefinite.
    pub fn count(&self, n: Option<u64>, at: usize) -> Result<Option<usize>, Fail> {
        n.map(|n| self.length(n, at)).transpose()
    }

    /// Checks and skips one item, inside `depth` containers. Tags are refused.
    pub fn skip(&mut self, depth: usize) -> Result<(), Fail> {
        let at = self.pos;
        match self.head()? {
            Head::Bytes(len) => self.skip_string(false, len, at),
            Head::Text(len) => self.skip_string(true, len, at),
            Head::Array(n) => {
                let count = self.enter(n, at, depth)?;
                let mut done = 0;
                while self.more(count, done)? {
                    self.skip(depth + 1)?;
                    done += 1;
                }
                Ok(())
            }
            Head::Map(n) => {
                let count = self.enter(n, at, depth)?;
                let mut done = 0;
                while self.more(count, done)? {
                    self.skip(depth + 1)?;
                    self.skip(depth + 1)?;
                    done += 1;
                }
                Ok(())
            }
            Head::Tag(t) => Err(fail(at, DecodeCause::Tag(t))),
            Head::Break => Err(fail(
                at,
                DecodeCause::Malformed("break outside an indefinite-length item"),
            )),
            _ => Ok(()),
        }
    }

    /// Checks the depth of a container about to be entered and returns its count.
    pub fn enter(&self, n: Option<u64>, at: usize, depth: usize) -> Result<Option<usize>, Fail> {
        if depth + 1 > MAX_CBOR_DEPTH {
            return Err(fail(at, DecodeCause::TooDeep));
        }
        self.count(n, at)
    }

    /// Writes one item, inside `depth` containers, as JSON text: maps need text keys, and
    /// byte strings, tags, `undefined`, other simple values and non-finite floats, which
    /// JSON cannot write, are refused.
    pub fn json_into(&mut self, depth: usize, out: &mut Vec<u8>) -> Result<(), Fail> {
        use std::io::Write;
        let at = self.pos;
        let head = self.head()?;
        match head {
            Head::Uint(n) => {
                let _ = write!(out, "{n}");
            }
            Head::Nint(n) => {
                let _ = write!(out, "{}", -1 - i128::from(n));
            }
            Head::Float(x) if x.is_finite() => {
                let _ = write!(out, "{x:?}");
            }
            Head::Float(_) => {
                return Err(fail(at, DecodeCause::NotJson("a NaN or infinite float")))
            }
            Head::Bool(true) => out.extend_from_slice(b"true"),
            Head::Bool(false) => out.extend_from_slice(b"false"),
            Head::Null => out.extend_from_slice(b"null"),
            Head::Text(len) => self.json_string(len, at, out)?,
            Head::Array(n) => {
                let count = self.enter(n, at, depth)?;
                out.push(b'[');
                let mut done = 0;
                while self.more(count, done)? {
                    if done > 0 {
                        out.push(b',');
                    }
                    self.json_into(depth + 1, out)?;
                    done += 1;
                }
                out.push(b']');
            }
            Head::Map(n) => {
                let count = self.enter(n, at, depth)?;
                out.push(b'{');
                let mut done = 0;
                while self.more(count, done)? {
                    if done > 0 {
                        out.push(b',');
                    }
                    let key_at = self.pos;
                    match self.head()? {
                        Head::Text(len) => self.json_string(len, key_at, out)?,
                        _ => return Err(fail(key_at, DecodeCause::NotJson("a non-text map key"))),
                    }
                    out.push(b':');
                    self.json_into(depth + 1, out)?;
                    done += 1;
                }
                out.push(b'}');
            }
            Head::Tag(t) => return Err(fail(at, DecodeCause::Tag(t))),
            Head::Bytes(_) => return Err(fail(at, DecodeCause::NotJson("a byte string"))),
            Head::Undefined | Head::Simple(_) => {
                return Err(fail(at, DecodeCause::NotJson("a CBOR simple value")))
            }
            Head::Break => {
                return Err(fail(
                    at,
                    DecodeCause::Malformed("break outside an indefinite-length item"),
                ))
            }
        }
        Ok(())
    }

    /// Writes the text string whose head was just read as a JSON string.
    fn json_string(&mut self, len: Option<u64>, at: usize, out: &mut Vec<u8>) -> Result<(), Fail> {
        if let Some(n) = len {
            let n = self.length(n, at)?;
            let chunk = self.take(n)?;
            if std::str::from_utf8(chunk).is_err() {
                return Err(fail(at, DecodeCause::Utf8));
            }
            write_string(chunk, out);
            return Ok(());
        }
        let mut text = Vec::new();
        self.string_into(true, len, at, &mut text)?;
        write_string(&text, out);
        Ok(())
    }
}

/// An IEEE 754 half-precision float (RFC 8949 Appendix D).
fn f16_to_f64(half: u16) -> f64 {
    let exponent = i32::from((half >> 10) & 0x1F);
    let mantissa = f64::from(half & 0x3FF);
    let value = match exponent {
        0 => mantissa * 2f64.powi(-24),
        31 if mantissa == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (mantissa + 1024.0) * 2f64.powi(exponent - 25),
    };
    if half & 0x8000 != 0 {
        -value
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_floats() {
        assert_eq!(f16_to_f64(0x3C00), 1.0);
        assert_eq!(f16_to_f64(0xC400), -4.0);
        assert_eq!(f16_to_f64(0x7BFF), 65504.0);
        assert_eq!(f16_to_f64(0x0001), 5.960_464_477_539_063e-8);
        assert!(f16_to_f64(0x7E00).is_nan());
        assert_eq!(f16_to_f64(0xFC00), f64::NEG_INFINITY);
    }
}
