//! The errors of JAQ codecs: [`CodecError`] when a plan cannot be built, [`DecodeError`] when
//! a payload is refused, [`EmitError`] when a row cannot be emitted.

use std::fmt;

use crate::types::DataType;

use super::{MAX_JAQ_STACK_BYTES, MAX_JAQ_STEPS, MAX_RECORDS_PER_PAYLOAD};

/// Why a [`super::JaqCodecPlan`] cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("codec '{codec}' is not a JAQ codec")]
    NotJaq { codec: String },
    #[error("codec '{codec}' has neither an ON INGESTION nor an ON EMITTING program")]
    NoProgram { codec: String },
    #[error("codec '{codec}': the {clause} program does not compile: {message}")]
    Compile {
        codec: String,
        clause: &'static str,
        message: String,
    },
    #[error("schema field '{field}' appears twice")]
    DuplicateField { field: String },
    #[error("schema field '{field}' has type {ty}, which a JAQ codec cannot decode")]
    Undecodable { field: String, ty: DataType },
}

/// A refused payload: which output, which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", Where(self))]
pub struct DecodeError {
    /// The 0-based index of the program's output (or of the payload's record without ON
    /// INGESTION); `None` when the payload failed as a whole.
    pub output: Option<u32>,
    /// The schema field being converted.
    pub field: Option<String>,
    pub cause: DecodeCause,
}

struct Where<'a>(&'a DecodeError);

impl fmt::Display for Where<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        match (e.output, &e.field) {
            (Some(output), Some(field)) => write!(f, "output {output}, field '{field}': ")?,
            (Some(output), None) => write!(f, "output {output}: ")?,
            (None, Some(field)) => write!(f, "field '{field}': ")?,
            (None, None) => {}
        }
        write!(f, "{}", e.cause)
    }
}

impl DecodeError {
    pub(crate) fn payload(cause: DecodeCause) -> DecodeError {
        DecodeError {
            output: None,
            field: None,
            cause,
        }
    }
}

/// What is wrong with a payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeCause {
    #[error("invalid {format}: {message}")]
    Parse {
        format: &'static str,
        message: String,
    },
    #[error("the program failed: {0}")]
    Program(String),
    #[error("the program took more than {MAX_JAQ_STEPS} steps")]
    StepLimit,
    #[error("the program nested deeper than {MAX_JAQ_STACK_BYTES} bytes of stack")]
    StackLimit,
    #[error("more than {MAX_RECORDS_PER_PAYLOAD} records")]
    TooManyRecords,
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
    #[error("expected an array of {expected} elements, found {found}")]
    ArrayLength { expected: usize, found: usize },
    #[error("invalid RFC3339 datetime: {0}")]
    Datetime(String),
    #[error("a payload's {0} values exceed what one Arrow column holds")]
    BufferFull(&'static str),
    #[error("the unfolded rows were built for another codec's schema")]
    ForeignSchema,
}

/// Why a row could not be emitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    #[error("codec has no ON EMITTING program")]
    NoProgram,
    #[error("row {row} is out of range for a batch of {rows} rows")]
    NoRow { row: usize, rows: usize },
    #[error("the ON EMITTING program failed: {0}")]
    Program(String),
    #[error("the ON EMITTING program took more than {MAX_JAQ_STEPS} steps")]
    StepLimit,
    #[error("the ON EMITTING program nested deeper than {MAX_JAQ_STACK_BYTES} bytes of stack")]
    StackLimit,
    #[error("the ON EMITTING program yielded no value; it must yield exactly one")]
    NoOutput,
    #[error("the ON EMITTING program yielded more than one value; it must yield exactly one")]
    ManyOutputs,
    #[error("cannot write the value as {format}: {message}")]
    Write {
        format: &'static str,
        message: String,
    },
}
