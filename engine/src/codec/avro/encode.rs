//! Avro binary encoding for emitters: one bare datum of the wire schema per row, back to back,
//! so that [`super::AvroDecoder`] reads the bytes back into the same rows.
//!
//! Every wire field is written, in order, since a datum has no keys: from the schema column it
//! feeds, or — when no column feeds it — as null (OPTIONAL fields) or the type's zero value
//! (`0`, `false`, `""`, no items, the first enum symbol, `n` zero bytes for `fixed(n)`, a record
//! of zero values). OPTIONAL fields are the union `["null", T]`. DATETIME is written as an
//! RFC 3339 string; a STRING fed by a record or map is parsed from its JSON text (as the decoder
//! writes it, `bytes` and `fixed` as strings of code points U+0000–U+00FF). A value the wire type
//! cannot hold (an integer beyond `int`, an unknown enum symbol, JSON text of another shape, a
//! null for a required field) is refused with an [`EncodeError`].

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampNanosecondType,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType as Arrow;
use ciborium::Value as Json;
use nervix_nspl::ast::catalog::AvroType;

use crate::codec::json::datetime::write_rfc3339;
use crate::codec::rows::EncodedRows;

use super::error::EncodeError;
use super::plan::{avro_name, AvroCodecPlan};

/// Each wire field's feeding column over `batch`, in wire order.
fn wire_arrays<'a>(batch: &'a RecordBatch, plan: &'a AvroCodecPlan) -> Vec<Option<&'a dyn Array>> {
    plan.wire
        .iter()
        .map(|slot| {
            let c = slot.column?;
            let name = plan.schema.field(c).name();
            batch.column_by_name(name).map(|a| a.as_ref())
        })
        .collect()
}

/// Appends every row of `batch` (in `plan.schema()`, columns found by name) to `out` as one
/// datum. On error `out` may hold a partial datum after the rows already written.
pub fn encode_avro_datum(
    batch: &RecordBatch,
    plan: &AvroCodecPlan,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let arrays = wire_arrays(batch, plan);
    for row in 0..batch.num_rows() {
        write_row(plan, &arrays, row, out)?;
    }
    Ok(())
}

/// Appends every row of `batch` to `out` as one bare datum (no container, no schema), recording
/// each row's range: the per-message bodies of an emitter. A row the wire type cannot hold is
/// refused on its own; the rows around it are written.
pub fn encode_avro_rows(batch: &RecordBatch, plan: &AvroCodecPlan, out: &mut EncodedRows) {
    let arrays = wire_arrays(batch, plan);
    for row in 0..batch.num_rows() {
        // The frame's row number means nothing to the reader of a single message's refusal.
        out.push_row(|bytes| {
            write_row(plan, &arrays, row, bytes)
                .map_err(|error| format!("field '{}': {}", error.field, error.reason))
        });
    }
}

/// Appends row `row` as one datum; on error `out` may hold part of it.
fn write_row(
    plan: &AvroCodecPlan,
    arrays: &[Option<&dyn Array>],
    row: usize,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    for (slot, array) in plan.wire.iter().zip(arrays) {
        let refuse = |reason: String| EncodeError {
            row,
            field: slot.name.clone(),
            reason,
        };
        let value = array.filter(|a| a.is_valid(row) && slot.ty != AvroType::Null);
        match (value, slot.optional) {
            (None, true) => out.push(0),
            (None, false) if array.is_some() && slot.ty != AvroType::Null => {
                return Err(refuse("null for a required wire field".to_string()))
            }
            (None, false) => zero(&slot.ty, out),
            (Some(array), optional) => {
                if optional {
                    out.push(2);
                }
                write_value(array, row, &slot.ty, out).map_err(refuse)?;
            }
        }
    }
    Ok(())
}

fn long(value: i64, out: &mut Vec<u8>) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn bytes(value: &[u8], out: &mut Vec<u8>) {
    long(value.len() as i64, out);
    out.extend_from_slice(value);
}

/// The zero value of `ty`.
fn zero(ty: &AvroType, out: &mut Vec<u8>) {
    match ty {
        AvroType::Null => {}
        AvroType::Float => out.extend_from_slice(&[0; 4]),
        AvroType::Double => out.extend_from_slice(&[0; 8]),
        AvroType::Fixed(n) => out.resize(out.len() + *n as usize, 0),
        AvroType::Record(fields) => {
            for f in fields {
                if f.optional {
                    out.push(0);
                } else {
                    zero(&f.ty, out);
                }
            }
        }
        // One zero byte: false, 0, empty bytes or string, enum index 0, an empty array or map.
        _ => out.push(0),
    }
}

/// An integer cell of any width.
fn integer(array: &dyn Array, row: usize) -> Option<i128> {
    macro_rules! get {
        ($t:ty) => {
            array
                .as_primitive_opt::<$t>()
                .map(|a| i128::from(a.value(row)))
        };
    }
    match array.data_type() {
        Arrow::UInt8 => get!(UInt8Type),
        Arrow::Int8 => get!(Int8Type),
        Arrow::UInt16 => get!(UInt16Type),
        Arrow::Int16 => get!(Int16Type),
        Arrow::UInt32 => get!(UInt32Type),
        Arrow::Int32 => get!(Int32Type),
        Arrow::UInt64 => get!(UInt64Type),
        Arrow::Int64 => get!(Int64Type),
        _ => None,
    }
}

fn float(array: &dyn Array, row: usize) -> Option<f64> {
    match array.data_type() {
        Arrow::Float32 => array
            .as_primitive_opt::<Float32Type>()
            .map(|a| f64::from(a.value(row))),
        Arrow::Float64 => array
            .as_primitive_opt::<Float64Type>()
            .map(|a| a.value(row)),
        _ => None,
    }
}

/// Writes cell `row` of `array` (valid there) as a value of `ty`.
fn write_value(
    array: &dyn Array,
    row: usize,
    ty: &AvroType,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let wrong = || {
        format!(
            "a {} cell cannot be written as {}",
            array.data_type(),
            avro_name(ty)
        )
    };
    match ty {
        AvroType::Null => {}
        AvroType::Boolean => {
            let b = array.as_boolean_opt().ok_or_else(wrong)?.value(row);
            out.push(u8::from(b));
        }
        AvroType::Int | AvroType::Long => {
            let n = integer(array, row).ok_or_else(wrong)?;
            let fits = if *ty == AvroType::Int {
                i32::try_from(n).map(i64::from).ok()
            } else {
                i64::try_from(n).ok()
            };
            long(
                fits.ok_or_else(|| format!("{n} does not fit Avro {}", avro_name(ty)))?,
                out,
            );
        }
        AvroType::Float => {
            let x = float(array, row).ok_or_else(wrong)?;
            out.extend_from_slice(&(x as f32).to_le_bytes());
        }
        AvroType::Double => {
            let x = float(array, row).ok_or_else(wrong)?;
            out.extend_from_slice(&x.to_le_bytes());
        }
        AvroType::Bytes => bytes(
            array.as_binary_opt::<i32>().ok_or_else(wrong)?.value(row),
            out,
        ),
        AvroType::Fixed(n) => {
            let b = array.as_binary_opt::<i32>().ok_or_else(wrong)?.value(row);
            if b.len() as u64 != *n {
                return Err(format!("{} bytes do not fit fixed({n})", b.len()));
            }
            out.extend_from_slice(b);
        }
        AvroType::String => match array.data_type() {
            Arrow::Timestamp(..) => {
                let nanos = array
                    .as_primitive_opt::<TimestampNanosecondType>()
                    .ok_or_else(wrong)?
                    .value(row);
                // Written in place, then its length moved in front (no buffer per value).
                let at = out.len();
                write_rfc3339(nanos, out);
                let (len, end) = (out.len() - at, out.len());
                long(len as i64, out);
                let prefix = out.len() - end;
                out[at..].rotate_right(prefix);
            }
            _ => bytes(
                array
                    .as_string_opt::<i32>()
                    .ok_or_else(wrong)?
                    .value(row)
                    .as_bytes(),
                out,
            ),
        },
        AvroType::Enum(symbols) => {
            let s = array.as_string_opt::<i32>().ok_or_else(wrong)?.value(row);
            let i = symbols
                .iter()
                .position(|x| x == s)
                .ok_or_else(|| format!("'{s}' is not a symbol of the enum"))?;
            long(i as i64, out);
        }
        AvroType::Record(_) | AvroType::Map(_) => {
            let text = array.as_string_opt::<i32>().ok_or_else(wrong)?.value(row);
            let json: Json =
                serde_json::from_str(text).map_err(|e| format!("the text is not JSON: {e}"))?;
            write_json(&json, ty, out)?;
        }
        AvroType::Array(item) => {
            let values = match array.data_type() {
                Arrow::List(_) => array.as_list_opt::<i32>().ok_or_else(wrong)?.value(row),
                Arrow::FixedSizeList(..) => {
                    array.as_fixed_size_list_opt().ok_or_else(wrong)?.value(row)
                }
                _ => return Err(wrong()),
            };
            if !values.is_empty() {
                long(values.len() as i64, out);
                for i in 0..values.len() {
                    if values.is_valid(i) {
                        write_value(values.as_ref(), i, item, out)?;
                    } else if **item != AvroType::Null {
                        return Err(format!("a null item in an array of {}", avro_name(item)));
                    }
                }
            }
            out.push(0);
        }
    }
    Ok(())
}

/// Writes a JSON value (as the decoder renders records and maps) as a value of `ty`.
fn write_json(json: &Json, ty: &AvroType, out: &mut Vec<u8>) -> Result<(), String> {
    let wrong = || format!("JSON {json:?} does not fit {}", avro_name(ty));
    let latin1 = |text: &str| -> Result<Vec<u8>, String> {
        text.chars()
            .map(|c| u8::try_from(u32::from(c)).map_err(|_| wrong()))
            .collect()
    };
    match (ty, json) {
        (AvroType::Null, Json::Null) => {}
        (AvroType::Boolean, Json::Bool(b)) => out.push(u8::from(*b)),
        (AvroType::Int | AvroType::Long, Json::Integer(n)) => {
            let n = i128::from(*n);
            let fits = if *ty == AvroType::Int {
                i32::try_from(n).map(i64::from).ok()
            } else {
                i64::try_from(n).ok()
            };
            long(fits.ok_or_else(wrong)?, out);
        }
        (AvroType::Float, Json::Float(x)) => out.extend_from_slice(&(*x as f32).to_le_bytes()),
        (AvroType::Float, Json::Null) => out.extend_from_slice(&f32::NAN.to_le_bytes()),
        (AvroType::Double, Json::Float(x)) => out.extend_from_slice(&x.to_le_bytes()),
        (AvroType::Double, Json::Null) => out.extend_from_slice(&f64::NAN.to_le_bytes()),
        (AvroType::Float, Json::Integer(n)) => {
            out.extend_from_slice(&(i128::from(*n) as f32).to_le_bytes())
        }
        (AvroType::Double, Json::Integer(n)) => {
            out.extend_from_slice(&(i128::from(*n) as f64).to_le_bytes())
        }
        (AvroType::String, Json::Text(s)) => bytes(s.as_bytes(), out),
        (AvroType::Bytes, Json::Text(s)) => bytes(&latin1(s)?, out),
        (AvroType::Fixed(n), Json::Text(s)) => {
            let b = latin1(s)?;
            if b.len() as u64 != *n {
                return Err(wrong());
            }
            out.extend_from_slice(&b);
        }
        (AvroType::Enum(symbols), Json::Text(s)) => {
            let i = symbols.iter().position(|x| x == s).ok_or_else(wrong)?;
            long(i as i64, out);
        }
        (AvroType::Array(item), Json::Array(items)) => {
            if !items.is_empty() {
                long(items.len() as i64, out);
                for v in items {
                    write_json(v, item, out)?;
                }
            }
            out.push(0);
        }
        (AvroType::Map(value), Json::Map(entries)) => {
            if !entries.is_empty() {
                long(entries.len() as i64, out);
                for (k, v) in entries {
                    let Json::Text(k) = k else {
                        return Err(wrong());
                    };
                    bytes(k.as_bytes(), out);
                    write_json(v, value, out)?;
                }
            }
            out.push(0);
        }
        (AvroType::Record(fields), Json::Map(entries)) => {
            for f in fields {
                let v = entries
                    .iter()
                    .find(|(k, _)| k.as_text() == Some(f.name.as_str()))
                    .map(|(_, v)| v);
                match (v, f.optional) {
                    (None | Some(Json::Null), true) => out.push(0),
                    (Some(v), true) => {
                        out.push(2);
                        write_json(v, &f.ty, out)?;
                    }
                    (Some(v), false) => write_json(v, &f.ty, out)?,
                    (None, false) => return Err(format!("JSON lacks record field '{}'", f.name)),
                }
            }
        }
        _ => return Err(wrong()),
    }
    Ok(())
}
