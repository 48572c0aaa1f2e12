//! The DESIGN §4 mapping from NSPL types to Arrow types, and one-row literal arrays.
//!
//! Correct by being a direct transcription of the §4 table: integers, floats and BOOL map to
//! their Arrow namesakes, `DATETIME` to `Timestamp(Nanosecond, "UTC")`, `BYTES` to `Binary`,
//! `VEC<T>` to `List` and `LIST<STRING>` to `List<Utf8>` (item field "item", nullable),
//! `ARRAY<T, d1, d2, …>` to `FixedSizeList(d1)` of `FixedSizeList(d2)` … of `T`. A literal is
//! built in exactly its node's Arrow type, so kernels never see a mismatched scalar.

use std::sync::Arc;

use arrow_array::{
    new_null_array, ArrayRef, BinaryArray, BooleanArray, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, Int8Array, StringArray, TimestampNanosecondArray, UInt16Array,
    UInt32Array, UInt64Array, UInt8Array,
};
use arrow_schema::{DataType as Arrow, Field, TimeUnit};

use crate::types::{DataType, Value};

/// The Arrow type of the `DATETIME` type.
pub(crate) fn timestamp_type() -> Arrow {
    Arrow::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// DESIGN §4: U8..I64 → UInt8..Int64, F32/F64 → Float32/Float64, BOOL → Boolean, STRING →
/// Utf8, DATETIME → Timestamp(Nanosecond, Some("UTC")), BYTES → Binary, VEC<T> → List(item T
/// nullable=true, field name "item"), ARRAY<T,d…> → nested FixedSizeList (item name "item"),
/// LIST<STRING> → List<Utf8>.
pub fn arrow_type(ty: &DataType) -> Arrow {
    match ty {
        DataType::U8 => Arrow::UInt8,
        DataType::I8 => Arrow::Int8,
        DataType::U16 => Arrow::UInt16,
        DataType::I16 => Arrow::Int16,
        DataType::U32 => Arrow::UInt32,
        DataType::I32 => Arrow::Int32,
        DataType::U64 => Arrow::UInt64,
        DataType::I64 => Arrow::Int64,
        DataType::F32 => Arrow::Float32,
        DataType::F64 => Arrow::Float64,
        DataType::Bool => Arrow::Boolean,
        DataType::String => Arrow::Utf8,
        DataType::Datetime => timestamp_type(),
        DataType::Bytes => Arrow::Binary,
        DataType::Vec(item) | DataType::List(item) => {
            Arrow::List(Arc::new(Field::new("item", arrow_type(item), true)))
        }
        DataType::Array(item, dims) => {
            let mut out = arrow_type(item);
            for dim in dims.iter().rev() {
                let size = i32::try_from(*dim).unwrap_or(i32::MAX);
                out = Arrow::FixedSizeList(Arc::new(Field::new("item", out, true)), size);
            }
            out
        }
    }
}

/// A one-row array holding `value` as type `ty`; `None` when the value does not fit the type
/// (the checker never produces such a literal).
pub(crate) fn literal_array(value: &Value, ty: &DataType) -> Option<ArrayRef> {
    let array: ArrayRef = match (value, ty) {
        (Value::Null, _) => new_null_array(&arrow_type(ty), 1),
        (Value::Bool(b), DataType::Bool) => Arc::new(BooleanArray::from(vec![*b])),
        (Value::String(s), DataType::String) => Arc::new(StringArray::from(vec![s.as_str()])),
        (Value::String(s), DataType::Bytes) => Arc::new(BinaryArray::from(vec![s.as_bytes()])),
        (Value::Int(v), _) => int_array(i128::from(*v), ty)?,
        (Value::UInt(v), _) => int_array(i128::from(*v), ty)?,
        (Value::Float(v), DataType::F64) => Arc::new(Float64Array::from(vec![*v])),
        (Value::Float(v), DataType::F32) => Arc::new(Float32Array::from(vec![*v as f32])),
        _ => return None,
    };
    Some(array)
}

fn int_array(v: i128, ty: &DataType) -> Option<ArrayRef> {
    Some(match ty {
        DataType::U8 => Arc::new(UInt8Array::from(vec![u8::try_from(v).ok()?])),
        DataType::I8 => Arc::new(Int8Array::from(vec![i8::try_from(v).ok()?])),
        DataType::U16 => Arc::new(UInt16Array::from(vec![u16::try_from(v).ok()?])),
        DataType::I16 => Arc::new(Int16Array::from(vec![i16::try_from(v).ok()?])),
        DataType::U32 => Arc::new(UInt32Array::from(vec![u32::try_from(v).ok()?])),
        DataType::I32 => Arc::new(Int32Array::from(vec![i32::try_from(v).ok()?])),
        DataType::U64 => Arc::new(UInt64Array::from(vec![u64::try_from(v).ok()?])),
        DataType::I64 => Arc::new(Int64Array::from(vec![i64::try_from(v).ok()?])),
        DataType::F32 => Arc::new(Float32Array::from(vec![v as f32])),
        DataType::F64 => Arc::new(Float64Array::from(vec![v as f64])),
        DataType::Datetime => Arc::new(
            TimestampNanosecondArray::from(vec![i64::try_from(v).ok()?]).with_timezone("UTC"),
        ),
        _ => return None,
    })
}
