//! The errors of the Avro codec: [`CodecError`] when a plan cannot be built from the catalog,
//! [`DecodeError`] when a payload is refused, [`EncodeError`] when a row cannot be written.
//!
//! A [`DecodeError`] says what and where: the record's index within the payload (0-based), the
//! wire field (a dotted path inside records), the byte offset into the payload and the
//! [`DecodeCause`]. Inside a deflate-compressed container block the offset is the block's
//! start in the payload, since the decoded bytes are not the payload's. It is built only on
//! the error path, so its `String`s cost nothing while decoding succeeds.

use crate::codec::decoding::from_column_error;
use crate::codec::wire_plan::from_plan_refusal;
use crate::types::DataType;

use super::{MAX_AVRO_BLOCK_BYTES, MAX_RECORDS_PER_PAYLOAD};

/// Why a [`super::AvroCodecPlan`] cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("codec '{codec}' is not a WIRE AVRO codec")]
    NotWireAvro { codec: String },
    #[error("codec '{codec}' reads wire schema '{expected}', not '{given}'")]
    WrongWireSchema {
        codec: String,
        expected: String,
        given: String,
    },
    #[error("wire schema '{wire}' is not a WIRE AVRO schema")]
    WireNotAvro { wire: String },
    #[error("wire schema '{wire}' declares field '{field}' twice")]
    DuplicateWireField { wire: String, field: String },
    #[error("wire field '{field}' is null OPTIONAL, a union listing null twice")]
    NullOptional { field: String },
    #[error("schema field '{field}' appears twice")]
    DuplicateField { field: String },
    #[error("required field '{field}' has no required wire field of the same name")]
    Unproducible { field: String },
    #[error("wire field '{field}' ({wire_type}) does not decode into {target}")]
    Undecodable {
        field: String,
        wire_type: String,
        target: DataType,
    },
    #[error("ENCODE {field} AS RFC3339 needs a DATETIME field fed by a wire string")]
    BadEncoding { field: String },
}

from_plan_refusal!(CodecError);

/// Where a payload was refused and why.
pub type DecodeError = crate::codec::decoding::DecodeError<DecodeCause>;

/// What is wrong with a payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeCause {
    #[error("unexpected end of input")]
    End,
    #[error("varint longer than {0} bytes")]
    Varint(usize),
    #[error("{0} does not fit an Avro int (32 bits)")]
    Int(i64),
    #[error("negative length {0}")]
    NegativeLength(i64),
    #[error("length {length} runs past the end of the input ({left} bytes left)")]
    Length { length: i64, left: usize },
    #[error("block of {count} items cannot fit in the {left} bytes left")]
    Block { count: i64, left: usize },
    #[error("invalid boolean byte 0x{0:02x}")]
    Boolean(u8),
    #[error("union branch {0} of an OPTIONAL field; expected 0 (null) or 1")]
    Union(i64),
    #[error("enum index {index} is outside the {symbols} symbols")]
    Enum { index: i64, symbols: usize },
    #[error("invalid UTF-8 in a string")]
    Utf8,
    #[error("{value} is out of range for {target}")]
    OutOfRange { value: String, target: DataType },
    #[error("expected an array of {expected} elements, found {found}")]
    ArrayLength { expected: usize, found: usize },
    #[error("invalid RFC3339 datetime: {0}")]
    Datetime(String),
    #[error("the payload holds more than {MAX_RECORDS_PER_PAYLOAD} records")]
    TooManyRecords,
    #[error("the payload is empty")]
    Empty,
    #[error("{0} bytes after the datum")]
    Trailing(usize),
    #[error("bad magic: an object container file starts with 'Obj' 0x01")]
    Magic,
    #[error("invalid container file: {0}")]
    Container(String),
    #[error("the writer schema does not match the wire schema: {0}")]
    Schema(String),
    #[error("container codec '{0}' is not supported (supported: null, deflate)")]
    Codec(String),
    #[error("a block's sync marker differs from the header's")]
    Sync,
    #[error("deflate block does not inflate within {MAX_AVRO_BLOCK_BYTES} bytes: {0}")]
    Inflate(String),
    #[error("the decoder's buffered {0} bytes are full; finish the batch first")]
    BufferFull(&'static str),
    #[error("the column's type cannot hold {0}")]
    Column(&'static str),
}

from_column_error!(DecodeCause);

/// Why [`super::encode_avro_datum`] cannot write a row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("row {row}, field '{field}': {reason}")]
pub struct EncodeError {
    pub row: usize,
    pub field: String,
    pub reason: String,
}
