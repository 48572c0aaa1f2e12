//! CBOR encoding for emitters: one map per row, keyed by wire names, written as an RFC 8742
//! CBOR sequence, in the wire schema's terms so that [`super::CborDecoder`] reads it back into
//! the same rows.
//!
//! Each schema column with a wire field becomes one entry (columns without one, and wire
//! fields without a column, are left out); a null is written as CBOR `null`. Heads use the
//! shortest argument encoding (RFC 8949 §4.2.1). Integers are major types 0/1, F32 and F64
//! single and double floats, STRING text strings, BYTES byte strings, DATETIME an RFC 3339 text
//! string (the plan only feeds DATETIME through `ENCODE f AS RFC3339`), and lists arrays. An
//! object-as-text STRING is written as the map its JSON text describes when that text is a
//! JSON object, and as a text string otherwise (a value an expression produced, which the
//! decoder then refuses).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampNanosecondType,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType as Arrow;

use crate::codec::json::datetime::write_rfc3339;
use crate::codec::rows::EncodedRows;

use super::CborCodecPlan;
use crate::codec::document_plan::{Members, Rule};

const NULL: u8 = 0xF6;

/// Appends every row of `batch` (in `plan.schema()`, columns found by name) to `out` as one
/// CBOR map.
pub fn encode_cbor(batch: &RecordBatch, plan: &CborCodecPlan, out: &mut Vec<u8>) {
    let members = plan.members(batch);
    for row in 0..batch.num_rows() {
        write_row(&members, row, out);
    }
}

/// Appends every row of `batch` to `out` as one CBOR map, recording each row's range: the
/// per-message bodies of an emitter.
pub fn encode_cbor_rows(batch: &RecordBatch, plan: &CborCodecPlan, out: &mut EncodedRows) {
    let members = plan.members(batch);
    for row in 0..batch.num_rows() {
        out.push_row(|bytes| {
            write_row(&members, row, bytes);
            Ok::<(), std::convert::Infallible>(())
        });
    }
}

fn write_row(members: &Members<'_>, row: usize, out: &mut Vec<u8>) {
    head(5, members.len() as u64, out);
    for (name, rule, array) in members {
        head(3, name.len() as u64, out);
        out.extend_from_slice(name.as_bytes());
        match array {
            Some(array) if *rule != Rule::Null && array.is_valid(row) => {
                write_member(*array, row, *rule, out)
            }
            _ => out.push(NULL),
        }
    }
}

/// Writes a head of `major` type with argument `n`, in its shortest form.
fn head(major: u8, n: u64, out: &mut Vec<u8>) {
    let major = major << 5;
    if n < 24 {
        out.push(major | n as u8);
    } else if let Ok(n) = u8::try_from(n) {
        out.extend_from_slice(&[major | 24, n]);
    } else if let Ok(n) = u16::try_from(n) {
        out.push(major | 25);
        out.extend_from_slice(&n.to_be_bytes());
    } else if let Ok(n) = u32::try_from(n) {
        out.push(major | 26);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(major | 27);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn integer(value: i128, out: &mut Vec<u8>) {
    if value >= 0 {
        head(0, value as u64, out);
    } else {
        head(1, (-1 - value) as u64, out);
    }
}

fn text(value: &[u8], out: &mut Vec<u8>) {
    head(3, value.len() as u64, out);
    out.extend_from_slice(value);
}

fn write_member(array: &dyn Array, row: usize, rule: Rule, out: &mut Vec<u8>) {
    match rule {
        Rule::ObjectText => match array.as_string_opt::<i32>() {
            Some(strings) => {
                let json = strings.value(row);
                match serde_json::from_str::<ciborium::Value>(json) {
                    Ok(value @ ciborium::Value::Map(_))
                        if ciborium::into_writer(&value, &mut *out).is_ok() => {}
                    _ => text(json.as_bytes(), out),
                }
            }
            None => out.push(NULL),
        },
        _ => write_value(array, row, out),
    }
}

/// Writes element `row` of `array` (which is valid there) as CBOR.
fn write_value(array: &dyn Array, row: usize, out: &mut Vec<u8>) {
    macro_rules! int {
        ($t:ty) => {
            match array.as_primitive_opt::<$t>() {
                Some(a) => integer(i128::from(a.value(row)), out),
                None => out.push(NULL),
            }
        };
    }
    match array.data_type() {
        Arrow::UInt8 => int!(UInt8Type),
        Arrow::Int8 => int!(Int8Type),
        Arrow::UInt16 => int!(UInt16Type),
        Arrow::Int16 => int!(Int16Type),
        Arrow::UInt32 => int!(UInt32Type),
        Arrow::Int32 => int!(Int32Type),
        Arrow::UInt64 => int!(UInt64Type),
        Arrow::Int64 => int!(Int64Type),
        Arrow::Float32 => match array.as_primitive_opt::<Float32Type>() {
            Some(a) => {
                out.push(0xFA);
                out.extend_from_slice(&a.value(row).to_be_bytes());
            }
            None => out.push(NULL),
        },
        Arrow::Float64 => match array.as_primitive_opt::<Float64Type>() {
            Some(a) => {
                out.push(0xFB);
                out.extend_from_slice(&a.value(row).to_be_bytes());
            }
            None => out.push(NULL),
        },
        Arrow::Boolean => match array.as_boolean_opt() {
            Some(a) => out.push(if a.value(row) { 0xF5 } else { 0xF4 }),
            None => out.push(NULL),
        },
        Arrow::Utf8 => match array.as_string_opt::<i32>() {
            Some(a) => text(a.value(row).as_bytes(), out),
            None => out.push(NULL),
        },
        Arrow::Binary => match array.as_binary_opt::<i32>() {
            Some(a) => {
                let bytes = a.value(row);
                head(2, bytes.len() as u64, out);
                out.extend_from_slice(bytes);
            }
            None => out.push(NULL),
        },
        Arrow::Timestamp(..) => match array.as_primitive_opt::<TimestampNanosecondType>() {
            Some(a) => {
                // Written in place, then its head moved in front (no buffer per value).
                let at = out.len();
                write_rfc3339(a.value(row), out);
                let (len, end) = (out.len() - at, out.len());
                head(3, len as u64, out);
                let prefix = out.len() - end;
                out[at..].rotate_right(prefix);
            }
            None => out.push(NULL),
        },
        Arrow::List(_) => match array.as_list_opt::<i32>() {
            Some(a) => write_elements(a.value(row).as_ref(), out),
            None => out.push(NULL),
        },
        Arrow::FixedSizeList(..) => match array.as_fixed_size_list_opt() {
            Some(a) => write_elements(a.value(row).as_ref(), out),
            None => out.push(NULL),
        },
        _ => out.push(NULL),
    }
}

fn write_elements(values: &dyn Array, out: &mut Vec<u8>) {
    head(4, values.len() as u64, out);
    for i in 0..values.len() {
        if values.is_valid(i) {
            write_value(values, i, out);
        } else {
            out.push(NULL);
        }
    }
}
