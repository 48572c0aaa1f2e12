//! The errors of the JSON codec when a payload is refused ([`DecodeError`]); a plan that cannot
//! be built from the catalog is a [`crate::codec::document_plan::CodecError`].
//!
//! A [`DecodeError`] says what and where: the record's index within the payload (0-based), the
//! field (the wire key), the byte offset into the payload, its 1-based line and column (useful
//! for NDJSON), and the [`DecodeCause`]. It is built only on the error path, so its `String`s
//! cost nothing while decoding succeeds.

use std::fmt;

use crate::codec::decoding::{self, from_column_error, Place};
use crate::types::DataType;

use super::{MAX_JSON_DEPTH, MAX_RECORDS_PER_PAYLOAD};

/// Where a [`DecodeError`] happened and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}at byte {offset} (line {line}, column {column}): {cause}", Place(.record, .field))]
pub struct DecodeError {
    /// The record's 0-based index within the payload; `None` outside any record.
    pub record: Option<u32>,
    /// The wire key being decoded, when inside one.
    pub field: Option<String>,
    /// The byte offset into the payload.
    pub offset: usize,
    /// 1-based line of `offset`.
    pub line: u32,
    /// 1-based column (in bytes) of `offset`.
    pub column: u32,
    pub cause: DecodeCause,
}

/// What is wrong with a payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeCause {
    #[error("invalid JSON: {0}")]
    Syntax(SyntaxError),
    #[error("expected {expected}, found {found}")]
    Mismatch {
        expected: &'static str,
        found: &'static str,
    },
    #[error("{value} is out of range for {target}")]
    OutOfRange { value: String, target: DataType },
    #[error("required field is missing")]
    Missing,
    #[error("required field is null")]
    Null,
    #[error("key is not declared by the wire schema (MODE STRICT)")]
    UndeclaredKey,
    #[error("key appears twice in the record")]
    DuplicateKey,
    #[error("expected an array of {expected} elements, found {found}")]
    ArrayLength { expected: usize, found: usize },
    #[error("invalid RFC3339 datetime: {0}")]
    Datetime(String),
    #[error("the payload holds more than {MAX_RECORDS_PER_PAYLOAD} records")]
    TooManyRecords,
    #[error("the payload holds no JSON value")]
    Empty,
    #[error("the decoder's buffered {0} bytes are full; finish the batch first")]
    BufferFull(&'static str),
}

from_column_error!(DecodeCause);

/// A violation of RFC 8259.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    #[error("unexpected end of input")]
    End,
    #[error("unexpected {}", Byte(*.0))]
    Unexpected(u8),
    #[error("invalid escape sequence")]
    Escape,
    #[error("unpaired UTF-16 surrogate in \\u escape")]
    Surrogate,
    #[error("invalid UTF-8")]
    Utf8,
    #[error("unescaped control character in string")]
    Control,
    #[error("number does not follow the JSON grammar")]
    Number,
    #[error("nesting deeper than {MAX_JSON_DEPTH}")]
    TooDeep,
    #[error("content after the JSON value")]
    Trailing,
}

/// A byte as a message shows it: printable ASCII quoted, anything else in hex.
struct Byte(u8);

impl fmt::Display for Byte {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() {
            write!(f, "'{}'", char::from(self.0))
        } else {
            write!(f, "byte 0x{:02x}", self.0)
        }
    }
}

/// A syntax error at a byte offset, as the scanner reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScanError {
    pub offset: usize,
    pub error: SyntaxError,
}

/// The 1-based line and column of `offset` in `bytes` (computed only for errors).
fn line_col(bytes: &[u8], offset: usize) -> (u32, u32) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let column = before.len() - start + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

impl DecodeError {
    /// An error at `offset` of `payload`, outside any record.
    pub(crate) fn at(payload: &[u8], offset: usize, cause: DecodeCause) -> DecodeError {
        DecodeError::located(
            payload,
            decoding::DecodeError {
                record: None,
                field: None,
                offset,
                cause,
            },
        )
    }

    /// `placed`, with the line and column of its offset in `payload`.
    pub(crate) fn located(
        payload: &[u8],
        placed: decoding::DecodeError<DecodeCause>,
    ) -> DecodeError {
        let (line, column) = line_col(payload, placed.offset);
        DecodeError {
            record: placed.record,
            field: placed.field,
            offset: placed.offset,
            line,
            column,
            cause: placed.cause,
        }
    }
}
