//! NDJSON encoding for emitters: one JSON object per row, keyed by wire names, in the wire
//! schema's terms so that [`super::JsonDecoder`] reads it back into the same rows. This is the
//! row writer; `encode_rows` writes the same bytes column-wise for per-message bodies.
//!
//! Each schema column with a wire field becomes one member (columns without one, and wire
//! fields without a column, are left out); a null is written `null`. DATETIME fields are
//! written as RFC 3339 strings (the plan only feeds them through `ENCODE f AS RFC3339`), an
//! object-as-text STRING is embedded as its JSON text when that text is a JSON object and as a
//! JSON string otherwise (a value an expression produced, which the decoder then refuses),
//! and floats use Rust's shortest round-trip form; NaN and infinities, which JSON cannot
//! write, become `null`. Strings are escaped per RFC 8259 §7 (`"`, `\` and control bytes).

use std::io::Write;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampNanosecondType,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType as Arrow;

use super::datetime::write_rfc3339;
use super::scanner::validate_json_text;
use super::JsonCodecPlan;
use crate::codec::document_plan::{Members, Rule};

/// Appends every row of `batch` (in `plan.schema()`, columns found by name) to `out` as one
/// JSON object and a newline.
pub fn encode_ndjson(batch: &RecordBatch, plan: &JsonCodecPlan, out: &mut Vec<u8>) {
    let members = plan.members(batch);
    for row in 0..batch.num_rows() {
        write_row(&members, row, out);
        out.push(b'\n');
    }
}

fn write_row(members: &Members<'_>, row: usize, out: &mut Vec<u8>) {
    out.push(b'{');
    for (i, (name, rule, array)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(name.as_bytes(), out);
        out.push(b':');
        match array {
            Some(array) if *rule != Rule::Null && array.is_valid(row) => {
                write_member(*array, row, *rule, out)
            }
            _ => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
}

pub(super) fn write_member(array: &dyn Array, row: usize, rule: Rule, out: &mut Vec<u8>) {
    match rule {
        Rule::ObjectText => match array.as_string_opt::<i32>() {
            Some(strings) => {
                let text = strings.value(row).as_bytes();
                if text.first() == Some(&b'{') && validate_json_text(text).is_ok() {
                    out.extend_from_slice(text);
                } else {
                    write_string(text, out);
                }
            }
            None => out.extend_from_slice(b"null"),
        },
        _ => write_value(array, row, out),
    }
}

/// Writes element `row` of `array` (which is valid there) as JSON.
fn write_value(array: &dyn Array, row: usize, out: &mut Vec<u8>) {
    macro_rules! prim {
        ($t:ty) => {
            match array.as_primitive_opt::<$t>() {
                Some(a) => {
                    let _ = write!(out, "{}", a.value(row));
                }
                None => out.extend_from_slice(b"null"),
            }
        };
    }
    match array.data_type() {
        Arrow::UInt8 => prim!(UInt8Type),
        Arrow::Int8 => prim!(Int8Type),
        Arrow::UInt16 => prim!(UInt16Type),
        Arrow::Int16 => prim!(Int16Type),
        Arrow::UInt32 => prim!(UInt32Type),
        Arrow::Int32 => prim!(Int32Type),
        Arrow::UInt64 => prim!(UInt64Type),
        Arrow::Int64 => prim!(Int64Type),
        Arrow::Float32 => match array.as_primitive_opt::<Float32Type>() {
            Some(a) if a.value(row).is_finite() => {
                let _ = write!(out, "{:?}", a.value(row));
            }
            _ => out.extend_from_slice(b"null"),
        },
        Arrow::Float64 => match array.as_primitive_opt::<Float64Type>() {
            Some(a) if a.value(row).is_finite() => {
                let _ = write!(out, "{:?}", a.value(row));
            }
            _ => out.extend_from_slice(b"null"),
        },
        Arrow::Boolean => match array.as_boolean_opt() {
            Some(a) if a.value(row) => out.extend_from_slice(b"true"),
            Some(_) => out.extend_from_slice(b"false"),
            None => out.extend_from_slice(b"null"),
        },
        Arrow::Utf8 => match array.as_string_opt::<i32>() {
            Some(a) => write_string(a.value(row).as_bytes(), out),
            None => out.extend_from_slice(b"null"),
        },
        Arrow::Timestamp(..) => match array.as_primitive_opt::<TimestampNanosecondType>() {
            Some(a) => {
                out.push(b'"');
                write_rfc3339(a.value(row), out);
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        },
        Arrow::List(_) => match array.as_list_opt::<i32>() {
            Some(a) => write_elements(a.value(row).as_ref(), out),
            None => out.extend_from_slice(b"null"),
        },
        Arrow::FixedSizeList(..) => match array.as_fixed_size_list_opt() {
            Some(a) => write_elements(a.value(row).as_ref(), out),
            None => out.extend_from_slice(b"null"),
        },
        // BYTES and anything else JSON cannot carry.
        _ => out.extend_from_slice(b"null"),
    }
}

fn write_elements(values: &dyn Array, out: &mut Vec<u8>) {
    out.push(b'[');
    for i in 0..values.len() {
        if i > 0 {
            out.push(b',');
        }
        if values.is_valid(i) {
            write_value(values, i, out);
        } else {
            out.extend_from_slice(b"null");
        }
    }
    out.push(b']');
}

/// Writes `text` (UTF-8) as a JSON string.
pub(crate) fn write_string(text: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in text.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1F => b"",
            _ => continue,
        };
        out.extend_from_slice(&text[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xF)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&text[start..]);
    out.push(b'"');
}
