//! Typed reads of evaluated aggregate arguments: one type dispatch per call (or per chunk of
//! [`PAIR_CHUNK_ROWS`] rows), then a tight monomorphized loop over the values and validity bits.
//!
//! Correct because every reader visits exactly the rows of its range whose validity bit is set,
//! reads values through the typed buffers (which honour slice offsets), and converts them with a
//! fixed, documented rule: integers and `F32` widen to `f64` (exact up to 2^53; `I64`/`U64`
//! beyond that round to nearest), integers widen to `i128` exactly, and the fixed-width keys of
//! the sketches are order-preserving `u64` encodings that [`fixed_keys_array`] inverts exactly.
//! An array of a type a reader does not know yields no rows; [`super::Accumulator::fold`] checks
//! every argument's type before reading, so that never happens to a checked call.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampNanosecondType,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BinaryArray, BooleanArray, PrimitiveArray, StringArray,
};
use arrow_schema::{DataType as Arrow, TimeUnit};

/// Rows read side by side into stack buffers when an aggregate reads two arguments.
pub(super) const PAIR_CHUNK_ROWS: usize = 256;

/// Runs `$body` with `$T` bound to the Arrow primitive type of `$ty` (numbers and `DATETIME`),
/// or evaluates `$other` for any other type.
macro_rules! with_primitive {
    ($ty:expr, $T:ident => $body:expr, _ => $other:expr) => {
        match $ty {
            arrow_schema::DataType::Int8 => {
                type $T = arrow_array::types::Int8Type;
                $body
            }
            arrow_schema::DataType::Int16 => {
                type $T = arrow_array::types::Int16Type;
                $body
            }
            arrow_schema::DataType::Int32 => {
                type $T = arrow_array::types::Int32Type;
                $body
            }
            arrow_schema::DataType::Int64 => {
                type $T = arrow_array::types::Int64Type;
                $body
            }
            arrow_schema::DataType::UInt8 => {
                type $T = arrow_array::types::UInt8Type;
                $body
            }
            arrow_schema::DataType::UInt16 => {
                type $T = arrow_array::types::UInt16Type;
                $body
            }
            arrow_schema::DataType::UInt32 => {
                type $T = arrow_array::types::UInt32Type;
                $body
            }
            arrow_schema::DataType::UInt64 => {
                type $T = arrow_array::types::UInt64Type;
                $body
            }
            arrow_schema::DataType::Float32 => {
                type $T = arrow_array::types::Float32Type;
                $body
            }
            arrow_schema::DataType::Float64 => {
                type $T = arrow_array::types::Float64Type;
                $body
            }
            arrow_schema::DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, _) => {
                type $T = arrow_array::types::TimestampNanosecondType;
                $body
            }
            _ => $other,
        }
    };
}
pub(super) use with_primitive;

/// Calls `f(row, value)` for every valid row of `range` of a primitive array of type `T`.
fn each_valid<T: ArrowPrimitiveType>(
    array: &dyn Array,
    range: Range<usize>,
    mut f: impl FnMut(usize, T::Native),
) {
    let Some(array) = array.as_any().downcast_ref::<PrimitiveArray<T>>() else {
        return;
    };
    let values = array.values();
    match array.nulls() {
        None => {
            for row in range {
                f(row, values[row]);
            }
        }
        Some(nulls) => {
            for row in range {
                if nulls.is_valid(row) {
                    f(row, values[row]);
                }
            }
        }
    }
}

/// Calls `f(row, value)` for every valid row of a numeric array, widened to `f64`.
pub(super) fn for_each_f64(array: &dyn Array, range: Range<usize>, mut f: impl FnMut(usize, f64)) {
    match array.data_type() {
        Arrow::Int8 => each_valid::<Int8Type>(array, range, |r, v| f(r, f64::from(v))),
        Arrow::Int16 => each_valid::<Int16Type>(array, range, |r, v| f(r, f64::from(v))),
        Arrow::Int32 => each_valid::<Int32Type>(array, range, |r, v| f(r, f64::from(v))),
        Arrow::Int64 => each_valid::<Int64Type>(array, range, |r, v| f(r, v as f64)),
        Arrow::UInt8 => each_valid::<UInt8Type>(array, range, |r, v| f(r, f64::from(v))),
        Arrow::UInt16 => each_valid::<UInt16Type>(array, range, |r, v| f(r, f64::from(v))),
        Arrow::UInt32 => each_valid::<UInt32Type>(array, range, |r, v| f(r, f64::from(v))),
        Arrow::UInt64 => each_valid::<UInt64Type>(array, range, |r, v| f(r, v as f64)),
        Arrow::Float32 => each_valid::<Float32Type>(array, range, |r, v| f(r, f64::from(v))),
        Arrow::Float64 => each_valid::<Float64Type>(array, range, f),
        _ => {}
    }
}

/// Calls `f(value)` for every valid row of an integer array, widened exactly to `i128`.
pub(super) fn for_each_i128(array: &dyn Array, range: Range<usize>, mut f: impl FnMut(i128)) {
    match array.data_type() {
        Arrow::Int8 => each_valid::<Int8Type>(array, range, |_, v| f(i128::from(v))),
        Arrow::Int16 => each_valid::<Int16Type>(array, range, |_, v| f(i128::from(v))),
        Arrow::Int32 => each_valid::<Int32Type>(array, range, |_, v| f(i128::from(v))),
        Arrow::Int64 => each_valid::<Int64Type>(array, range, |_, v| f(i128::from(v))),
        Arrow::UInt8 => each_valid::<UInt8Type>(array, range, |_, v| f(i128::from(v))),
        Arrow::UInt16 => each_valid::<UInt16Type>(array, range, |_, v| f(i128::from(v))),
        Arrow::UInt32 => each_valid::<UInt32Type>(array, range, |_, v| f(i128::from(v))),
        Arrow::UInt64 => each_valid::<UInt64Type>(array, range, |_, v| f(i128::from(v))),
        _ => {}
    }
}

/// Calls `f(x, y)` for every row of `range` where both numeric arrays are valid. Each chunk of
/// rows is widened into stack buffers first, so the type dispatch happens once per chunk.
pub(super) fn for_each_f64_pair(
    x: &dyn Array,
    y: &dyn Array,
    range: Range<usize>,
    mut f: impl FnMut(f64, f64),
) {
    let mut xs = [0.0f64; PAIR_CHUNK_ROWS];
    let mut ys = [0.0f64; PAIR_CHUNK_ROWS];
    let mut x_valid = [false; PAIR_CHUNK_ROWS];
    let mut y_valid = [false; PAIR_CHUNK_ROWS];
    let mut start = range.start;
    while start < range.end {
        let end = range.end.min(start + PAIR_CHUNK_ROWS);
        let len = end - start;
        x_valid[..len].fill(false);
        y_valid[..len].fill(false);
        for_each_f64(x, start..end, |row, v| {
            xs[row - start] = v;
            x_valid[row - start] = true;
        });
        for_each_f64(y, start..end, |row, v| {
            ys[row - start] = v;
            y_valid[row - start] = true;
        });
        for i in 0..len {
            if x_valid[i] && y_valid[i] {
                f(xs[i], ys[i]);
            }
        }
        start = end;
    }
}

const SIGN_BIT: u64 = 1 << 63;

/// The order-preserving key of a signed value: flipping the sign bit maps `i64::MIN..=MAX` onto
/// `0..=u64::MAX` monotonically.
fn signed_key(v: i64) -> u64 {
    (v as u64) ^ SIGN_BIT
}

/// The order-preserving key of a float (IEEE total order), after folding `-0.0` into `0.0` and
/// every NaN into one canonical NaN, so values that compare equal count as one value.
fn float_key(v: f64) -> u64 {
    let v = if v == 0.0 {
        0.0
    } else if v.is_nan() {
        f64::NAN
    } else {
        v
    };
    let bits = v.to_bits();
    if bits & SIGN_BIT != 0 {
        !bits
    } else {
        bits | SIGN_BIT
    }
}

fn float_from_key(key: u64) -> f64 {
    let bits = if key & SIGN_BIT != 0 {
        key & !SIGN_BIT
    } else {
        !key
    };
    f64::from_bits(bits)
}

/// Whether `ty` is read by [`for_each_fixed_key`] (numbers, `BOOL`, `DATETIME`).
pub(super) fn has_fixed_key(ty: &Arrow) -> bool {
    ty.is_numeric()
        || matches!(
            ty,
            Arrow::Boolean | Arrow::Timestamp(TimeUnit::Nanosecond, _)
        )
}

/// Calls `f(key)` with the order-preserving `u64` key of every valid row of a fixed-width scalar
/// array (see [`has_fixed_key`]).
pub(super) fn for_each_fixed_key(array: &dyn Array, range: Range<usize>, mut f: impl FnMut(u64)) {
    match array.data_type() {
        Arrow::Int8 => each_valid::<Int8Type>(array, range, |_, v| f(signed_key(i64::from(v)))),
        Arrow::Int16 => each_valid::<Int16Type>(array, range, |_, v| f(signed_key(i64::from(v)))),
        Arrow::Int32 => each_valid::<Int32Type>(array, range, |_, v| f(signed_key(i64::from(v)))),
        Arrow::Int64 => each_valid::<Int64Type>(array, range, |_, v| f(signed_key(v))),
        Arrow::Timestamp(TimeUnit::Nanosecond, _) => {
            each_valid::<TimestampNanosecondType>(array, range, |_, v| f(signed_key(v)))
        }
        Arrow::UInt8 => each_valid::<UInt8Type>(array, range, |_, v| f(u64::from(v))),
        Arrow::UInt16 => each_valid::<UInt16Type>(array, range, |_, v| f(u64::from(v))),
        Arrow::UInt32 => each_valid::<UInt32Type>(array, range, |_, v| f(u64::from(v))),
        Arrow::UInt64 => each_valid::<UInt64Type>(array, range, |_, v| f(v)),
        Arrow::Float32 => {
            each_valid::<Float32Type>(array, range, |_, v| f(float_key(f64::from(v))))
        }
        Arrow::Float64 => each_valid::<Float64Type>(array, range, |_, v| f(float_key(v))),
        Arrow::Boolean => {
            if let Some(array) = array.as_any().downcast_ref::<BooleanArray>() {
                for row in range {
                    if array.is_valid(row) {
                        f(u64::from(array.value(row)));
                    }
                }
            }
        }
        _ => {}
    }
}

/// Calls `f(bytes)` for every valid row of a `STRING` (its UTF-8) or `BYTES` array.
pub(super) fn for_each_bytes_key(array: &dyn Array, range: Range<usize>, mut f: impl FnMut(&[u8])) {
    if let Some(strings) = array.as_any().downcast_ref::<StringArray>() {
        for row in range {
            if strings.is_valid(row) {
                f(strings.value(row).as_bytes());
            }
        }
    } else if let Some(bytes) = array.as_any().downcast_ref::<BinaryArray>() {
        for row in range {
            if bytes.is_valid(row) {
                f(bytes.value(row));
            }
        }
    }
}

/// The array of type `ty` holding the values whose [`for_each_fixed_key`] keys are `keys`, in
/// order; `None` for a type without fixed keys.
pub(super) fn fixed_keys_array(keys: &[u64], ty: &Arrow) -> Option<ArrayRef> {
    fn signed(keys: &[u64]) -> impl Iterator<Item = i64> + '_ {
        keys.iter().map(|k| (k ^ SIGN_BIT) as i64)
    }
    // Every key came from a value of `ty`, so the narrowing casts below are exact.
    let array: ArrayRef = match ty {
        Arrow::Int8 => Arc::new(PrimitiveArray::<Int8Type>::from_iter_values(
            signed(keys).map(|v| v as i8),
        )),
        Arrow::Int16 => Arc::new(PrimitiveArray::<Int16Type>::from_iter_values(
            signed(keys).map(|v| v as i16),
        )),
        Arrow::Int32 => Arc::new(PrimitiveArray::<Int32Type>::from_iter_values(
            signed(keys).map(|v| v as i32),
        )),
        Arrow::Int64 => Arc::new(PrimitiveArray::<Int64Type>::from_iter_values(signed(keys))),
        Arrow::Timestamp(TimeUnit::Nanosecond, _) => Arc::new(
            PrimitiveArray::<TimestampNanosecondType>::from_iter_values(signed(keys))
                .with_data_type(ty.clone()),
        ),
        Arrow::UInt8 => Arc::new(PrimitiveArray::<UInt8Type>::from_iter_values(
            keys.iter().map(|k| *k as u8),
        )),
        Arrow::UInt16 => Arc::new(PrimitiveArray::<UInt16Type>::from_iter_values(
            keys.iter().map(|k| *k as u16),
        )),
        Arrow::UInt32 => Arc::new(PrimitiveArray::<UInt32Type>::from_iter_values(
            keys.iter().map(|k| *k as u32),
        )),
        Arrow::UInt64 => Arc::new(PrimitiveArray::<UInt64Type>::from_iter_values(
            keys.iter().copied(),
        )),
        Arrow::Float32 => Arc::new(PrimitiveArray::<Float32Type>::from_iter_values(
            keys.iter().map(|k| float_from_key(*k) as f32),
        )),
        Arrow::Float64 => Arc::new(PrimitiveArray::<Float64Type>::from_iter_values(
            keys.iter().map(|k| float_from_key(*k)),
        )),
        Arrow::Boolean => Arc::new(BooleanArray::from_iter(keys.iter().map(|k| Some(*k != 0)))),
        _ => return None,
    };
    Some(array)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_preserve_order_and_round_trip() {
        let signed_values = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        let keys: Vec<u64> = signed_values.iter().map(|v| signed_key(*v)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let floats = [
            f64::NEG_INFINITY,
            -2.5,
            -1e-300,
            0.0,
            1e-300,
            3.0,
            f64::INFINITY,
        ];
        let keys: Vec<u64> = floats.iter().map(|v| float_key(*v)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        for v in floats {
            assert_eq!(float_from_key(float_key(v)), v);
        }
        assert_eq!(float_key(-0.0), float_key(0.0));
        assert_eq!(float_key(f64::NAN), float_key(-f64::NAN));
    }

    #[test]
    fn pairs_skip_rows_where_either_side_is_null() {
        let x = PrimitiveArray::<Int32Type>::from(vec![Some(1), None, Some(3), Some(4)]);
        let y = PrimitiveArray::<Float64Type>::from(vec![Some(1.5), Some(2.5), None, Some(4.5)]);
        let mut seen = Vec::new();
        for_each_f64_pair(&x, &y, 0..4, |a, b| seen.push((a, b)));
        assert_eq!(seen, vec![(1.0, 1.5), (4.0, 4.5)]);
    }
}
