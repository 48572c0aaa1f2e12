//! jq values ([`jaq_json::Val`]) to Arrow column values and back.
//!
//! [`push_record`] appends one program output to the decoder's columns by the rules in the
//! module docs of [`super`]; it pushes exactly one row into every column or returns an error
//! (the caller then discards all the payload's columns, so a half-pushed row never escapes).
//! [`row_value`] turns one row of a batch into the object ON EMITTING reads: every column by
//! name, DATETIME as RFC 3339 text, BYTES as a byte string, lists as arrays, nulls as `null`.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampNanosecondType,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType as Arrow;
use jaq_json::{Map, Num, Val};

use crate::codec::json::columns::{Column, Data, MAX_OFFSET};
use crate::codec::json::datetime::{parse_rfc3339, write_rfc3339};
use crate::types::DataType;

use super::error::DecodeCause;
use super::format::json_text;
use super::plan::JaqCodecPlan;

/// The jq type name of `v`, for messages.
pub(crate) fn type_name(v: &Val) -> &'static str {
    match v {
        Val::Null => "null",
        Val::Bool(_) => "boolean",
        Val::Num(_) => "number",
        Val::TStr(_) => "string",
        Val::BStr(_) => "bytes",
        Val::Arr(_) => "array",
        Val::Obj(_) => "object",
    }
}

/// Appends output `record` as one row. On error, says which field failed.
pub(crate) fn push_record(
    plan: &JaqCodecPlan,
    columns: &mut [Column],
    found: &mut [Option<Val>],
    record: &Val,
) -> Result<(), (Option<String>, DecodeCause)> {
    let Val::Obj(map) = record else {
        return Err((
            None,
            DecodeCause::Mismatch {
                expected: "object",
                found: type_name(record),
            },
        ));
    };
    found.fill(None);
    for (key, value) in map.iter() {
        if let Val::TStr(key) = key {
            if let Some(&c) = plan.by_name.get(&***key) {
                found[c] = Some(value.clone());
            }
        }
    }
    for (c, field) in plan.fields.iter().enumerate() {
        let column = &mut columns[c];
        match found[c].take() {
            None | Some(Val::Null) if field.nullable => column.push_null(),
            None => return Err((Some(field.name.clone()), DecodeCause::Missing)),
            Some(Val::Null) => return Err((Some(field.name.clone()), DecodeCause::Null)),
            Some(value) => push_value(column, &field.ty, &value)
                .map_err(|cause| (Some(field.name.clone()), cause))?,
        }
    }
    Ok(())
}

/// Appends non-null `v` as one value of `column`, whose type is `ty`.
fn push_value(column: &mut Column, ty: &DataType, v: &Val) -> Result<(), DecodeCause> {
    macro_rules! int {
        ($values:expr, $t:ty) => {{
            let wide = integer(v, ty)?;
            let narrow = <$t>::try_from(wide).map_err(|_| DecodeCause::OutOfRange {
                value: wide.to_string(),
                target: ty.clone(),
            })?;
            $values.push(narrow);
        }};
    }
    match &mut column.data {
        Data::U8(values) => int!(values, u8),
        Data::I8(values) => int!(values, i8),
        Data::U16(values) => int!(values, u16),
        Data::I16(values) => int!(values, i16),
        Data::U32(values) => int!(values, u32),
        Data::I32(values) => int!(values, i32),
        Data::U64(values) => int!(values, u64),
        Data::I64(values) => int!(values, i64),
        Data::F32(values) => {
            let wide = float(v, ty)?;
            // Narrowing is the point: F32 takes the nearest f32.
            #[allow(clippy::cast_possible_truncation)]
            let narrow = wide as f32;
            if !narrow.is_finite() {
                return Err(DecodeCause::OutOfRange {
                    value: format!("{wide:?}"),
                    target: ty.clone(),
                });
            }
            values.push(narrow);
        }
        Data::F64(values) => values.push(float(v, ty)?),
        Data::Bool(values) => match v {
            Val::Bool(b) => values.push(*b),
            other => return Err(mismatch("boolean", other)),
        },
        Data::Timestamp(values) => match v {
            Val::TStr(text) => values.push(parse_rfc3339(text).map_err(DecodeCause::Datetime)?),
            other => return Err(mismatch("RFC3339 string", other)),
        },
        Data::Bytes {
            utf8,
            offsets,
            bytes,
        } => {
            match (v, *utf8) {
                (Val::TStr(text), true) => bytes
                    .extend_from_slice(String::from_utf8_lossy(text.as_ref().as_ref()).as_bytes()),
                (Val::Obj(_), true) => bytes.extend_from_slice(json_text(v).as_bytes()),
                (_, true) => return Err(mismatch("string or object", v)),
                (Val::TStr(b) | Val::BStr(b), false) => bytes.extend_from_slice(b),
                (_, false) => return Err(mismatch("bytes or string", v)),
            }
            offsets.push(offset(bytes.len(), "string")?);
        }
        Data::List { offsets, child } => {
            let item = match ty {
                DataType::Vec(item) | DataType::List(item) => item.as_ref(),
                _ => return Err(mismatch("array", v)),
            };
            let Val::Arr(items) = v else {
                return Err(mismatch("array", v));
            };
            for element in items.iter() {
                push_element(child, item, element)?;
            }
            offsets.push(offset(child.len(), "list")?);
        }
        Data::Fixed { size, child } => {
            let DataType::Array(item, dims) = ty else {
                return Err(mismatch("array", v));
            };
            let inner = match dims.get(1..) {
                Some(rest) if !rest.is_empty() => DataType::Array(item.clone(), rest.to_vec()),
                _ => item.as_ref().clone(),
            };
            let Val::Arr(items) = v else {
                return Err(mismatch("array", v));
            };
            if items.len() != *size {
                return Err(DecodeCause::ArrayLength {
                    expected: *size,
                    found: items.len(),
                });
            }
            for element in items.iter() {
                push_element(child, &inner, element)?;
            }
        }
    }
    column.valid.push(true);
    Ok(())
}

/// One array element: `null` is a null item.
fn push_element(child: &mut Column, ty: &DataType, v: &Val) -> Result<(), DecodeCause> {
    match v {
        Val::Null => {
            child.push_null();
            Ok(())
        }
        other => push_value(child, ty, other),
    }
}

fn offset(len: usize, what: &'static str) -> Result<i32, DecodeCause> {
    if len > MAX_OFFSET {
        return Err(DecodeCause::BufferFull(what));
    }
    i32::try_from(len).map_err(|_| DecodeCause::BufferFull(what))
}

fn mismatch(expected: &'static str, found: &Val) -> DecodeCause {
    DecodeCause::Mismatch {
        expected,
        found: type_name(found),
    }
}

/// The integer `v` holds, as an `i128` so every target range check is one `try_from`.
/// A float without fraction counts (jq does not tell `1` from `1.0`).
fn integer(v: &Val, target: &DataType) -> Result<i128, DecodeCause> {
    let out_of_range = |value: String| DecodeCause::OutOfRange {
        value,
        target: target.clone(),
    };
    let Val::Num(n) = v else {
        return Err(mismatch("integer", v));
    };
    let from_float = |f: f64| {
        if !f.is_finite() || f.abs() >= 1e38 {
            Err(out_of_range(f.to_string()))
        } else if f.fract() != 0.0 {
            Err(DecodeCause::Mismatch {
                expected: "integer",
                found: "number with a fraction",
            })
        } else {
            // Integral and well inside i128: exact.
            #[allow(clippy::cast_possible_truncation)]
            Ok(f as i128)
        }
    };
    match n {
        Num::Int(i) => i128::try_from(*i).map_err(|_| out_of_range(i.to_string())),
        Num::Float(f) => from_float(*f),
        other => {
            let text = other.to_string();
            match text.parse::<i128>() {
                Ok(i) => Ok(i),
                Err(_) => match text.parse::<f64>() {
                    Ok(f) if f.fract() != 0.0 => from_float(f),
                    _ => Err(out_of_range(text)),
                },
            }
        }
    }
}

/// The finite number `v` holds.
fn float(v: &Val, target: &DataType) -> Result<f64, DecodeCause> {
    let Val::Num(n) = v else {
        return Err(mismatch("number", v));
    };
    #[allow(clippy::cast_precision_loss)]
    let f = match n {
        Num::Int(i) => *i as f64,
        Num::Float(f) => *f,
        other => other.to_string().parse::<f64>().unwrap_or(f64::NAN),
    };
    if f.is_finite() {
        Ok(f)
    } else {
        Err(DecodeCause::OutOfRange {
            value: n.to_string(),
            target: target.clone(),
        })
    }
}

/// Row `row` of `batch` as a jq object keyed by column name.
pub(crate) fn row_value(batch: &RecordBatch, row: usize) -> Val {
    let mut map = Map::default();
    for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
        map.insert(
            Val::from(field.name().clone()),
            cell_value(array.as_ref(), row),
        );
    }
    Val::obj(map)
}

/// Element `i` of `array` as a jq value.
fn cell_value(array: &dyn Array, i: usize) -> Val {
    if array.is_null(i) {
        return Val::Null;
    }
    macro_rules! int {
        ($t:ty) => {
            match array.as_primitive_opt::<$t>() {
                Some(a) => Val::Num(Num::from_integral(a.value(i))),
                None => Val::Null,
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
        Arrow::Float32 => array
            .as_primitive_opt::<Float32Type>()
            .map_or(Val::Null, |a| Val::from(f64::from(a.value(i)))),
        Arrow::Float64 => array
            .as_primitive_opt::<Float64Type>()
            .map_or(Val::Null, |a| Val::from(a.value(i))),
        Arrow::Boolean => array
            .as_boolean_opt()
            .map_or(Val::Null, |a| Val::Bool(a.value(i))),
        Arrow::Utf8 => array
            .as_string_opt::<i32>()
            .map_or(Val::Null, |a| Val::from(a.value(i).to_string())),
        Arrow::Binary => array
            .as_binary_opt::<i32>()
            .map_or(Val::Null, |a| Val::byte_str(a.value(i).to_vec())),
        Arrow::Timestamp(..) => {
            array
                .as_primitive_opt::<TimestampNanosecondType>()
                .map_or(Val::Null, |a| {
                    let mut text = Vec::new();
                    write_rfc3339(a.value(i), &mut text);
                    Val::from(String::from_utf8_lossy(&text).into_owned())
                })
        }
        Arrow::List(_) => array
            .as_list_opt::<i32>()
            .map_or(Val::Null, |a| elements(a.value(i).as_ref())),
        Arrow::FixedSizeList(..) => array
            .as_fixed_size_list_opt()
            .map_or(Val::Null, |a| elements(a.value(i).as_ref())),
        _ => Val::Null,
    }
}

fn elements(values: &dyn Array) -> Val {
    (0..values.len()).map(|i| cell_value(values, i)).collect()
}
