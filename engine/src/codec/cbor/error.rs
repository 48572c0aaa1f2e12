//! The errors of the CBOR codec when a payload is refused ([`DecodeError`]); a plan that cannot
//! be built from the catalog is a [`crate::codec::document_plan::CodecError`].
//!
//! A [`DecodeError`] says what and where: the record's index within the payload (0-based), the
//! field (the wire key), the byte offset into the payload and the [`DecodeCause`]. It is built
//! only on the error path, so its `String`s cost nothing while decoding succeeds.

use crate::codec::decoding::from_column_error;
use crate::types::DataType;

use super::{MAX_CBOR_DEPTH, MAX_RECORDS_PER_PAYLOAD};

/// Where a payload was refused and why.
pub type DecodeError = crate::codec::decoding::DecodeError<DecodeCause>;

/// What is wrong with a payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeCause {
    #[error("unexpected end of input")]
    End,
    #[error("malformed CBOR: {0}")]
    Malformed(&'static str),
    #[error("invalid UTF-8 in a text string")]
    Utf8,
    #[error("expected {expected}, found {found}")]
    Mismatch {
        expected: &'static str,
        found: &'static str,
    },
    #[error("{value} is out of range for {target}")]
    OutOfRange { value: String, target: DataType },
    #[error("CBOR tag {0} is not accepted here (only tags 0 and 1, on an RFC3339 DATETIME field)")]
    Tag(u64),
    #[error("{0} has no JSON form")]
    NotJson(&'static str),
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
    #[error("invalid datetime: {0}")]
    Datetime(String),
    #[error("nesting deeper than {MAX_CBOR_DEPTH}")]
    TooDeep,
    #[error("the payload holds more than {MAX_RECORDS_PER_PAYLOAD} records")]
    TooManyRecords,
    #[error("the payload holds no CBOR item")]
    Empty,
    #[error("content after the payload's array of records")]
    Trailing,
    #[error("the decoder's buffered {0} bytes are full; finish the batch first")]
    BufferFull(&'static str),
}

from_column_error!(DecodeCause);
