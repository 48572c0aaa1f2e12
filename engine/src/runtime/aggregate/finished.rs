//! What a finished aggregate call gives ([`Finished`]), and the column of many windows' results
//! ([`column`]).
//!
//! An emission pass can close thousands of windows at once (Nexmark q5 closes one per auction
//! and hop), and their records leave as one batch. Built as a one-row array each, a `COUNT`
//! cost three allocations per record (the value's buffer, the buffer's shared header, the
//! array) and the pass then concatenated the rows again. The scalar results — every aggregate
//! but the pickers and `APPROX_TOP_K` — stay plain values until the pass builds each call's
//! column with one buffer.
//!
//! Why it is correct: a value's variant is the Arrow type [`super::Accumulator::finish`]
//! checked against the call's declared result type, and [`column`] gives the same array as
//! concatenating each value's one-row array ([`Finished::into_array`]) — which it falls back to
//! whenever the values are not all of one scalar variant.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array};
use arrow_schema::{ArrowError, DataType};

/// One aggregate call's result for one window.
#[derive(Debug, Clone)]
pub enum Finished {
    Int64(Option<i64>),
    Float64(Option<f64>),
    Boolean(Option<bool>),
    /// A one-row array (the pickers' copied row, `APPROX_TOP_K`'s list, a typed null).
    Array(ArrayRef),
}

impl Finished {
    /// The Arrow type of the value.
    pub fn data_type(&self) -> DataType {
        match self {
            Finished::Int64(_) => DataType::Int64,
            Finished::Float64(_) => DataType::Float64,
            Finished::Boolean(_) => DataType::Boolean,
            Finished::Array(array) => array.data_type().clone(),
        }
    }

    /// The value as a one-row array.
    pub fn into_array(self) -> ArrayRef {
        match self {
            Finished::Int64(value) => Arc::new(
                value.map_or_else(|| Int64Array::new_null(1), |v| Int64Array::from_value(v, 1)),
            ),
            Finished::Float64(value) => Arc::new(value.map_or_else(
                || Float64Array::new_null(1),
                |v| Float64Array::from_value(v, 1),
            )),
            Finished::Boolean(value) => Arc::new(BooleanArray::from(vec![value])),
            Finished::Array(array) => array,
        }
    }
}

/// The column of `values` (one call's results, one per window, in order).
pub fn column(values: &[&Finished]) -> Result<ArrayRef, ArrowError> {
    fn all<T>(values: &[&Finished], pick: impl Fn(&Finished) -> Option<T>) -> Option<Vec<T>> {
        values.iter().map(|value| pick(value)).collect()
    }
    match values.first() {
        Some(Finished::Int64(_)) => {
            if let Some(ints) = all(values, |v| match v {
                Finished::Int64(value) => Some(*value),
                _ => None,
            }) {
                return Ok(Arc::new(Int64Array::from(ints)));
            }
        }
        Some(Finished::Float64(_)) => {
            if let Some(floats) = all(values, |v| match v {
                Finished::Float64(value) => Some(*value),
                _ => None,
            }) {
                return Ok(Arc::new(Float64Array::from(floats)));
            }
        }
        Some(Finished::Boolean(_)) => {
            if let Some(bools) = all(values, |v| match v {
                Finished::Boolean(value) => Some(*value),
                _ => None,
            }) {
                return Ok(Arc::new(BooleanArray::from(bools)));
            }
        }
        Some(Finished::Array(_)) | None => {}
    }
    let arrays: Vec<ArrayRef> = values.iter().map(|v| (*v).clone().into_array()).collect();
    let parts: Vec<&dyn Array> = arrays.iter().map(|array| array.as_ref()).collect();
    arrow_select::concat::concat(&parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::StringArray;

    /// The reference: every value's one-row array, concatenated.
    fn concatenated(values: &[&Finished]) -> ArrayRef {
        let arrays: Vec<ArrayRef> = values.iter().map(|v| (*v).clone().into_array()).collect();
        let parts: Vec<&dyn Array> = arrays.iter().map(|array| array.as_ref()).collect();
        arrow_select::concat::concat(&parts).unwrap()
    }

    #[test]
    fn a_column_of_scalars_equals_their_one_row_arrays_concatenated() {
        let cases: Vec<Vec<Finished>> = vec![
            vec![
                Finished::Int64(Some(3)),
                Finished::Int64(None),
                Finished::Int64(Some(-7)),
            ],
            vec![Finished::Int64(Some(1))],
            vec![Finished::Float64(Some(0.5)), Finished::Float64(None)],
            vec![Finished::Boolean(None), Finished::Boolean(Some(true))],
            vec![
                Finished::Array(Arc::new(StringArray::from(vec!["a"]))),
                Finished::Array(Arc::new(StringArray::from(vec![None::<&str>]))),
            ],
        ];
        for values in &cases {
            let refs: Vec<&Finished> = values.iter().collect();
            let built = column(&refs).unwrap();
            assert_eq!(built.as_ref(), concatenated(&refs).as_ref(), "{values:?}");
            assert_eq!(built.data_type(), &values[0].data_type());
        }
    }

    #[test]
    fn values_of_different_types_are_refused_as_concatenation_refuses_them() {
        let mixed = [Finished::Int64(Some(1)), Finished::Float64(Some(1.0))];
        let refs: Vec<&Finished> = mixed.iter().collect();
        assert!(column(&refs).is_err());
    }
}
