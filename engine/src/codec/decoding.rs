//! What the streaming decoders of WIRE JSON, CBOR and AVRO share, so that the three place a
//! refused payload and refuse a column value alike:
//!
//! - `Fail`, a failure at a byte offset before its record is known, and `decode_atomically`,
//!   which walks one payload's records, cuts a refused payload's rows and places its failure
//!   in a [`DecodeError`] (WIRE CBOR's and AVRO's; WIRE JSON's adds the line and column, after
//!   the same `Place`).
//! - Appending decoded values to the column builders: integers range-checked against the
//!   column's width (`push_integer`), floats narrowed to F32 (`push_float`), the end offset of
//!   a string or list row (`push_end`) and whole list rows (`push_list`). Their refusals
//!   (`ColumnError`) become the variants of the same names in each format's `DecodeCause`,
//!   which carry the same messages (`from_column_error!`).
//!
//! All of it is generic and inlined into each decoder: nothing here allocates or dispatches
//! dynamically per row; errors allocate only when a payload is refused.

use std::fmt;

use crate::types::DataType;

use super::json::columns::{Column, ColumnSet, Data};

/// A failure at a byte offset, before its record and field are attached.
#[derive(Debug)]
pub(crate) struct Fail<C> {
    pub offset: usize,
    pub field: Option<String>,
    pub cause: C,
}

pub(crate) fn fail<C>(offset: usize, cause: C) -> Fail<C> {
    Fail {
        offset,
        field: None,
        cause,
    }
}

/// Where a payload of a WIRE CBOR or AVRO codec was refused, and why (`C`, the format's
/// `DecodeCause`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}at byte {offset}: {cause}", Place(.record, .field))]
pub struct DecodeError<C> {
    /// The record's 0-based index within the payload; `None` outside any record.
    pub record: Option<u32>,
    /// The wire field being decoded, when inside one: the record's key (CBOR) or a dotted
    /// path inside records (Avro).
    pub field: Option<String>,
    /// The byte offset into the payload.
    pub offset: usize,
    pub cause: C,
}

/// The record and field a decode error names, as its message starts: empty, or ending in a
/// space before the position.
pub(crate) struct Place<'e>(pub &'e Option<u32>, pub &'e Option<String>);

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (Some(record), Some(field)) => write!(f, "record {record}, field '{field}' "),
            (Some(record), None) => write!(f, "record {record} "),
            (None, Some(field)) => write!(f, "field '{field}' "),
            (None, None) => Ok(()),
        }
    }
}

/// Decodes one payload atomically into `decoder`, whose buffered rows `rows` reaches: `walk`
/// decodes the payload's records, counting them in its `&mut u32`, and on failure says whether
/// it failed inside the record counted there. A refused payload's rows are cut back and its
/// failure is placed in that record (or in none). Returns the rows the payload added.
pub(crate) fn decode_atomically<D, C>(
    decoder: &mut D,
    rows: impl Fn(&mut D) -> &mut ColumnSet,
    walk: impl FnOnce(&mut D, &mut u32) -> Result<(), (bool, Fail<C>)>,
) -> Result<u32, DecodeError<C>> {
    let before = rows(decoder).rows();
    let mut record = 0u32;
    match walk(decoder, &mut record) {
        Ok(()) => Ok(record),
        Err((in_record, f)) => {
            rows(decoder).truncate(before);
            Err(DecodeError {
                record: in_record.then_some(record),
                field: f.field,
                offset: f.offset,
                cause: f.cause,
            })
        }
    }
}

/// Why a decoded value cannot join its column. Each format's `DecodeCause` has a variant of
/// the same name and message for each ([`from_column_error`]).
#[derive(Debug)]
pub(crate) enum ColumnError {
    OutOfRange { value: String, target: DataType },
    BufferFull(&'static str),
    ArrayLength { expected: usize, found: usize },
}

/// Implements `From<ColumnError>` for a decoder's `DecodeCause`.
macro_rules! from_column_error {
    ($cause:ident) => {
        $crate::codec::from_shared_variants!($crate::codec::decoding::ColumnError => $cause:
            OutOfRange { value, target }, BufferFull(what), ArrayLength { expected, found });
    };
}
pub(crate) use from_column_error;

/// An integer as a wire format decoded it: its value, and how a message shows it.
pub(crate) trait DecodedInteger: Copy + fmt::Display {
    /// The value; `None` when no integer column could hold it.
    fn value(self) -> Option<i128>;
}

impl DecodedInteger for i64 {
    fn value(self) -> Option<i128> {
        Some(i128::from(self))
    }
}

impl DecodedInteger for i128 {
    fn value(self) -> Option<i128> {
        Some(self)
    }
}

/// Appends `integer` as one row of an integer column, range-checked against the column's
/// type; `None`, appending nothing, when the column holds no integers.
pub(crate) fn push_integer<C: From<ColumnError>>(
    column: &mut Column,
    at: usize,
    integer: impl DecodedInteger,
) -> Option<Result<(), Fail<C>>> {
    fn narrow<T: TryFrom<i128>>(
        integer: impl DecodedInteger,
        target: DataType,
    ) -> Result<T, ColumnError> {
        integer
            .value()
            .and_then(|value| T::try_from(value).ok())
            .ok_or_else(|| ColumnError::OutOfRange {
                value: integer.to_string(),
                target,
            })
    }
    let pushed = match &mut column.data {
        Data::U8(v) => narrow(integer, DataType::U8).map(|n| v.push(n)),
        Data::I8(v) => narrow(integer, DataType::I8).map(|n| v.push(n)),
        Data::U16(v) => narrow(integer, DataType::U16).map(|n| v.push(n)),
        Data::I16(v) => narrow(integer, DataType::I16).map(|n| v.push(n)),
        Data::U32(v) => narrow(integer, DataType::U32).map(|n| v.push(n)),
        Data::I32(v) => narrow(integer, DataType::I32).map(|n| v.push(n)),
        Data::U64(v) => narrow(integer, DataType::U64).map(|n| v.push(n)),
        Data::I64(v) => narrow(integer, DataType::I64).map(|n| v.push(n)),
        _ => return None,
    };
    Some(end_row(column, at, pushed))
}

/// Appends `x` as one row of an F32 or F64 column: into F32 the nearest `f32`, refused for a
/// finite `x` beyond F32's range (NaN and infinities are kept). `None`, appending nothing, when
/// the column holds no floats.
pub(crate) fn push_float<C: From<ColumnError>>(
    column: &mut Column,
    at: usize,
    x: f64,
) -> Option<Result<(), Fail<C>>> {
    let pushed = match &mut column.data {
        Data::F64(v) => {
            v.push(x);
            Ok(())
        }
        Data::F32(v) => {
            let narrow = x as f32;
            if x.is_finite() && !narrow.is_finite() {
                Err(ColumnError::OutOfRange {
                    value: format!("{x:?}"),
                    target: DataType::F32,
                })
            } else {
                v.push(narrow);
                Ok(())
            }
        }
        _ => return None,
    };
    Some(end_row(column, at, pushed))
}

/// Appends one row of a VEC / LIST or ARRAY column: `elements(child, max)` appends the row's
/// elements to the child column, only checking those past `max`, and returns how many there
/// were. An ARRAY row must have exactly its dimension's elements. `None`, calling nothing, when
/// the column holds no lists.
pub(crate) fn push_list<C: From<ColumnError>>(
    column: &mut Column,
    at: usize,
    elements: impl FnOnce(&mut Column, usize) -> Result<usize, Fail<C>>,
) -> Option<Result<(), Fail<C>>> {
    let pushed = match &mut column.data {
        Data::List { offsets, child } => match elements(child, usize::MAX) {
            Ok(_) => push_end(offsets, child.len(), "list"),
            Err(f) => return Some(Err(f)),
        },
        Data::Fixed { size, child } => match elements(child, *size) {
            Ok(count) if count == *size => Ok(()),
            Ok(count) => Err(ColumnError::ArrayLength {
                expected: *size,
                found: count,
            }),
            Err(f) => return Some(Err(f)),
        },
        _ => return None,
    };
    Some(end_row(column, at, pushed))
}

/// Ends a row of a string or list column at `end`, the length of its bytes or child column:
/// refused past what `i32` offsets address (`what` names the buffer).
pub(crate) fn push_end(
    offsets: &mut Vec<i32>,
    end: usize,
    what: &'static str,
) -> Result<(), ColumnError> {
    let end = i32::try_from(end).map_err(|_| ColumnError::BufferFull(what))?;
    offsets.push(end);
    Ok(())
}

/// Counts the row whose value was `pushed` (the value is valid), or refuses it at `at`.
fn end_row<C: From<ColumnError>>(
    column: &mut Column,
    at: usize,
    pushed: Result<(), ColumnError>,
) -> Result<(), Fail<C>> {
    match pushed {
        Ok(()) => {
            column.valid.push(true);
            Ok(())
        }
        Err(error) => Err(fail(at, C::from(error))),
    }
}
