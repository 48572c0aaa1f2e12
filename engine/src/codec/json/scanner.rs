//! A one-pass, allocation-free RFC 8259 tokenizer over `&[u8]`.
//!
//! The scanner owns the JSON grammar; the decoder walks objects with it and asks it for one
//! token at a time. Correct by following RFC 8259 §2–§8 production by production:
//! - whitespace is exactly space, tab, LF and CR;
//! - numbers are `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` (no leading zeros, no
//!   `+`, no bare `.`), and the byte after a number is left to the caller, so `01` fails there;
//! - strings hold no unescaped byte below 0x20, are valid UTF-8 (checked chunk-wise between
//!   `"` and `\`, which are ASCII and so never split a UTF-8 sequence), and take only the eight
//!   escapes and `\uXXXX`; a high surrogate must be followed by a `\u` low surrogate, and a lone
//!   surrogate is refused because it has no UTF-8 form;
//! - literals are exactly `true`, `false`, `null`;
//! - [`Scanner::skip_value`] is iterative, keeping object/array kinds in a fixed bit stack, so a
//!   payload nested beyond [`MAX_JSON_DEPTH`] is an error, never a stack overflow.
//!
//! Nothing here indexes past the input: every read goes through `get`, so any bytes at all
//! produce a token or a [`ScanError`].

use memchr::memchr2;

use super::error::{DecodeError, ScanError, SyntaxError};
use super::MAX_JSON_DEPTH;

/// 64-bit words of the container-kind stack of [`Scanner::skip_value`].
const STACK_WORDS: usize = MAX_JSON_DEPTH.div_ceil(64);

/// A cursor over one payload.
pub(crate) struct Scanner<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

/// What a JSON value starting with `byte` is, for "found …" messages.
pub(crate) fn kind_of(byte: Option<u8>) -> &'static str {
    match byte {
        Some(b'"') => "string",
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b't' | b'f') => "boolean",
        Some(b'n') => "null",
        Some(b'-' | b'0'..=b'9') => "number",
        Some(_) => "invalid JSON",
        None => "end of input",
    }
}

impl<'a> Scanner<'a> {
    pub fn new(bytes: &'a [u8]) -> Scanner<'a> {
        Scanner { bytes, pos: 0 }
    }

    #[inline]
    pub fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    pub fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The error for the byte at `offset`: unexpected byte, or end of input.
    pub fn unexpected(&self, offset: usize) -> ScanError {
        let error = match self.bytes.get(offset) {
            Some(&b) => SyntaxError::Unexpected(b),
            None => SyntaxError::End,
        };
        ScanError { offset, error }
    }

    fn error(offset: usize, error: SyntaxError) -> ScanError {
        ScanError { offset, error }
    }

    /// Consumes `byte` at the cursor.
    #[inline]
    pub fn expect(&mut self, byte: u8) -> Result<(), ScanError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(self.pos))
        }
    }

    /// Consumes exactly `literal` (`true`, `false` or `null`).
    pub fn literal(&mut self, literal: &[u8]) -> Result<(), ScanError> {
        for (i, &want) in literal.iter().enumerate() {
            if self.bytes.get(self.pos + i) != Some(&want) {
                return Err(self.unexpected(self.pos + i));
            }
        }
        self.pos += literal.len();
        Ok(())
    }

    /// Scans the string at the cursor (which must be `"`). Returns its raw content between the
    /// quotes and whether it holds escapes (decode those with [`unescape_into`]).
    pub fn string(&mut self) -> Result<(&'a [u8], bool), ScanError> {
        self.expect(b'"')?;
        let start = self.pos;
        let mut i = start;
        let mut escaped = false;
        loop {
            let rest = self.bytes.get(i..).unwrap_or_default();
            let Some(k) = memchr2(b'"', b'\\', rest) else {
                check_chunk(rest, i)?;
                return Err(Self::error(self.bytes.len(), SyntaxError::End));
            };
            check_chunk(&rest[..k], i)?;
            i += k;
            if self.bytes.get(i) == Some(&b'"') {
                self.pos = i + 1;
                return Ok((&self.bytes[start..i], escaped));
            }
            escaped = true;
            i = self.escape(i)?;
        }
    }

    /// Checks the escape whose `\` is at `at`; returns the index after it.
    fn escape(&self, at: usize) -> Result<usize, ScanError> {
        match self.bytes.get(at + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(at + 2),
            Some(b'u') => {
                let unit = self.hex4(at + 2)?;
                match unit {
                    0xD800..=0xDBFF => {
                        if self.bytes.get(at + 6) != Some(&b'\\')
                            || self.bytes.get(at + 7) != Some(&b'u')
                        {
                            return Err(Self::error(at, SyntaxError::Surrogate));
                        }
                        match self.hex4(at + 8)? {
                            0xDC00..=0xDFFF => Ok(at + 12),
                            _ => Err(Self::error(at, SyntaxError::Surrogate)),
                        }
                    }
                    0xDC00..=0xDFFF => Err(Self::error(at, SyntaxError::Surrogate)),
                    _ => Ok(at + 6),
                }
            }
            Some(_) => Err(Self::error(at, SyntaxError::Escape)),
            None => Err(Self::error(self.bytes.len(), SyntaxError::End)),
        }
    }

    fn hex4(&self, at: usize) -> Result<u32, ScanError> {
        let mut value = 0u32;
        for i in at..at + 4 {
            let digit = match self.bytes.get(i) {
                Some(&b) => hex_digit(b).ok_or(Self::error(i, SyntaxError::Escape))?,
                None => return Err(Self::error(self.bytes.len(), SyntaxError::End)),
            };
            value = value * 16 + digit;
        }
        Ok(value)
    }

    /// Scans the number at the cursor; returns its text and whether it is an integer (no
    /// fraction, no exponent).
    pub fn number(&mut self) -> Result<(&'a [u8], bool), ScanError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.number_error()),
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.number_error());
            }
            self.digits();
            integer = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.number_error());
            }
            self.digits();
            integer = false;
        }
        Ok((&self.bytes[start..self.pos], integer))
    }

    fn number_error(&self) -> ScanError {
        match self.peek() {
            None => Self::error(self.pos, SyntaxError::End),
            Some(_) => Self::error(self.pos, SyntaxError::Number),
        }
    }

    #[inline]
    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    /// Skips (and validates) the value at the cursor, which sits inside `depth` containers.
    pub fn skip_value(&mut self, depth: usize) -> Result<(), ScanError> {
        // Bit i of `objects` says whether local level i + 1 is an object (else an array).
        let mut objects = [0u64; STACK_WORDS];
        let mut level = 0usize;
        loop {
            // A value is expected at the cursor.
            self.skip_ws();
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if depth + level + 1 > MAX_JSON_DEPTH {
                        return Err(Self::error(self.pos, SyntaxError::TooDeep));
                    }
                    self.pos += 1;
                    let (word, bit) = (level / 64, level % 64);
                    level += 1;
                    if open == b'{' {
                        objects[word] |= 1 << bit;
                        self.skip_ws();
                        if self.peek() == Some(b'}') {
                            self.pos += 1;
                            level -= 1;
                        } else {
                            self.member_key()?;
                            continue;
                        }
                    } else {
                        objects[word] &= !(1 << bit);
                        self.skip_ws();
                        if self.peek() == Some(b']') {
                            self.pos += 1;
                            level -= 1;
                        } else {
                            continue;
                        }
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                }
                _ => return Err(self.unexpected(self.pos)),
            }
            // A value ended: close containers until one continues with `,`.
            loop {
                if level == 0 {
                    return Ok(());
                }
                let top = level - 1;
                let in_object = objects[top / 64] & (1 << (top % 64)) != 0;
                self.skip_ws();
                match (self.peek(), in_object) {
                    (Some(b','), true) => {
                        self.pos += 1;
                        self.skip_ws();
                        self.member_key()?;
                        break;
                    }
                    (Some(b','), false) => {
                        self.pos += 1;
                        break;
                    }
                    (Some(b'}'), true) | (Some(b']'), false) => {
                        self.pos += 1;
                        level -= 1;
                    }
                    _ => return Err(self.unexpected(self.pos)),
                }
            }
        }
    }

    /// Scans `"key" :` with the cursor at the key.
    fn member_key(&mut self) -> Result<(), ScanError> {
        self.string()?;
        self.skip_ws();
        self.expect(b':')
    }
}

fn hex_digit(b: u8) -> Option<u32> {
    char::from(b).to_digit(16)
}

/// Checks an escape-free run of string content starting at `offset`: no control bytes, UTF-8.
#[inline]
fn check_chunk(chunk: &[u8], offset: usize) -> Result<(), ScanError> {
    // Printable ASCII is the common case; a fold without an early exit vectorizes (a byte is
    // outside 0x20..0x80 exactly when `b - 0x20`, wrapping, is 0x60 or more).
    let outside = chunk
        .iter()
        .fold(0u8, |any, &b| any | u8::from(b.wrapping_sub(0x20) >= 0x60));
    if outside == 0 {
        return Ok(());
    }
    if let Some(p) = chunk.iter().position(|&b| b < 0x20) {
        return Err(Scanner::error(offset + p, SyntaxError::Control));
    }
    std::str::from_utf8(chunk)
        .map(|_| ())
        .map_err(|e| Scanner::error(offset + e.valid_up_to(), SyntaxError::Utf8))
}

/// Appends the decoded form of raw string content that [`Scanner::string`] accepted.
pub(crate) fn unescape_into(raw: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < raw.len() {
        let run = memchr::memchr(b'\\', &raw[i..]).unwrap_or(raw.len() - i);
        out.extend_from_slice(&raw[i..i + run]);
        i += run;
        let Some(&kind) = raw.get(i + 1) else {
            return;
        };
        let simple = match kind {
            b'b' => Some(0x08),
            b'f' => Some(0x0C),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'u' => None,
            other => Some(other),
        };
        if let Some(byte) = simple {
            out.push(byte);
            i += 2;
            continue;
        }
        let unit = hex_at(raw, i + 2);
        let (code, used) = if (0xD800..0xDC00).contains(&unit) {
            let low = hex_at(raw, i + 8);
            (
                0x10000 + ((unit - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF),
                12,
            )
        } else {
            (unit, 6)
        };
        let ch = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
        out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
        i += used;
    }
}

/// The four hex digits at `at` (already validated; 0 where absent, which cannot happen).
fn hex_at(raw: &[u8], at: usize) -> u32 {
    raw.get(at..at + 4)
        .unwrap_or_default()
        .iter()
        .fold(0, |acc, &b| acc * 16 + hex_digit(b).unwrap_or(0))
}

/// Accepts exactly one RFC 8259 JSON text: one value, surrounded by optional whitespace.
pub fn validate_json_text(bytes: &[u8]) -> Result<(), DecodeError> {
    let mut scanner = Scanner::new(bytes);
    let result = (|| {
        scanner.skip_ws();
        scanner.skip_value(0)?;
        scanner.skip_ws();
        if scanner.pos < bytes.len() {
            return Err(ScanError {
                offset: scanner.pos,
                error: SyntaxError::Trailing,
            });
        }
        Ok(())
    })();
    result.map_err(|e| DecodeError::at(bytes, e.offset, super::DecodeCause::Syntax(e.error)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> bool {
        validate_json_text(text.as_bytes()).is_ok()
    }

    #[test]
    fn grammar() {
        for good in [
            "0",
            "-0",
            "1.5e-3",
            "[]",
            "{}",
            " {\"a\" : [1, {\"b\": null}]} ",
            "\"\\ud83d\\ude00\"",
            "\"é\"",
            "true",
            "[false,null]",
        ] {
            assert!(ok(good), "{good}");
        }
        for bad in [
            "",
            "01",
            "1.",
            ".5",
            "+1",
            "[1,]",
            "{\"a\":1,}",
            "\"\\ud800\"",
            "\"\\udc00x\"",
            "\"\t\"",
            "tru",
            "nul",
            "[1 2]",
            "{\"a\" 1}",
            "1 2",
            "\"\\x\"",
            "-",
            "1e",
            "[",
            "\u{feff}{}",
        ] {
            assert!(!ok(bad), "{bad:?}");
        }
        assert!(!ok("\"\u{0}\""));
        assert!(validate_json_text(b"\"\xff\"").is_err());
    }

    #[test]
    fn depth_is_bounded() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(ok(&deep(MAX_JSON_DEPTH)));
        let err = validate_json_text(deep(MAX_JSON_DEPTH + 1).as_bytes()).unwrap_err();
        assert_eq!(
            err.cause,
            super::super::DecodeCause::Syntax(SyntaxError::TooDeep)
        );
        assert!(!ok(&"[{\"a\":".repeat(100_000)));
    }

    #[test]
    fn unescapes() {
        let mut s = Scanner::new(br#""a\n\u00e9\ud83d\ude00\"\/""#);
        let (raw, escaped) = s.string().unwrap();
        assert!(escaped);
        let mut out = Vec::new();
        unescape_into(raw, &mut out);
        assert_eq!(out, "a\né😀\"/".as_bytes());
    }
}
