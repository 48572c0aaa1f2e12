//! Truncatable column builders: plain `Vec`s of values, offsets and validity that the decoder
//! appends to and cuts back to a row count when a payload is refused (Arrow's builders cannot
//! be truncated), turned into Arrow arrays by [`Column::finish`].
//!
//! Invariants, kept by every method: `valid.len()` is the row count; a primitive column holds
//! one value per row (a default under a null); `offsets` of strings and lists hold rows + 1
//! entries, starting at 0, each ≤ the child length; a fixed-size list's child holds exactly
//! `size` rows per row (nulls under a null row). These are exactly the layouts Arrow's
//! constructors require, so [`Column::finish`] cannot fail on them. A [`ColumnSet`] holds a
//! decoder's columns and ends every row in all of them, so they never disagree on length.

use std::sync::Arc;

use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, FixedSizeListArray, ListArray, PrimitiveArray,
    RecordBatch, RecordBatchOptions, StringArray, TimestampNanosecondArray,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType as Arrow, FieldRef, SchemaRef};

use crate::types::DataType;

/// The largest byte or child count an `i32`-offset column may hold.
pub(crate) const MAX_OFFSET: usize = i32::MAX as usize;

/// A decoder's columns, one per schema column, and the rows they hold.
#[derive(Debug)]
pub(crate) struct ColumnSet {
    columns: Vec<Column>,
    rows: usize,
}

impl ColumnSet {
    pub fn new<'t>(types: impl Iterator<Item = &'t DataType>) -> ColumnSet {
        ColumnSet {
            columns: types.map(Column::new).collect(),
            rows: 0,
        }
    }

    /// Rows held since the last [`ColumnSet::finish`].
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Column `c`'s builder.
    pub fn column(&mut self, c: usize) -> &mut Column {
        &mut self.columns[c]
    }

    #[cfg(test)]
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Drops every row after the first `rows` (a refused payload's).
    pub fn truncate(&mut self, rows: usize) {
        for column in &mut self.columns {
            column.truncate(rows);
        }
        self.rows = rows;
    }

    /// Ends a row: each column `c` for which `fed(c)` is false gets a null, and the row counts.
    pub fn end_row(&mut self, fed: impl Fn(usize) -> bool) {
        for (c, column) in self.columns.iter_mut().enumerate() {
            if !fed(c) {
                column.push_null();
            }
        }
        self.rows += 1;
    }

    /// The rows as one `RecordBatch` in `schema` (whose fields are the columns' types); the
    /// builders are reused.
    pub fn finish(&mut self, schema: SchemaRef) -> RecordBatch {
        let arrays = self
            .columns
            .iter_mut()
            .zip(schema.fields().iter())
            .map(|(column, field)| column.finish(field.data_type()))
            .collect();
        let options = RecordBatchOptions::new().with_row_count(Some(self.rows));
        self.rows = 0;
        RecordBatch::try_new_with_options(schema, arrays, &options)
            .unwrap_or_else(|e| unreachable!("columns follow the plan's schema: {e}"))
    }
}

/// One column being built.
#[derive(Debug)]
pub(crate) struct Column {
    /// One entry per row: `false` is null.
    pub valid: Vec<bool>,
    pub data: Data,
}

#[derive(Debug)]
pub(crate) enum Data {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    /// DATETIME as UTC nanoseconds.
    Timestamp(Vec<i64>),
    /// STRING (UTF-8 by construction) or BYTES.
    Bytes {
        utf8: bool,
        offsets: Vec<i32>,
        bytes: Vec<u8>,
    },
    /// VEC<T> and LIST<T>.
    List {
        offsets: Vec<i32>,
        child: Box<Column>,
    },
    /// One dimension of ARRAY<T, d…>.
    Fixed {
        size: usize,
        child: Box<Column>,
    },
}

impl Column {
    /// An empty column of `ty`.
    pub fn new(ty: &DataType) -> Column {
        let data = match ty {
            DataType::U8 => Data::U8(Vec::new()),
            DataType::I8 => Data::I8(Vec::new()),
            DataType::U16 => Data::U16(Vec::new()),
            DataType::I16 => Data::I16(Vec::new()),
            DataType::U32 => Data::U32(Vec::new()),
            DataType::I32 => Data::I32(Vec::new()),
            DataType::U64 => Data::U64(Vec::new()),
            DataType::I64 => Data::I64(Vec::new()),
            DataType::F32 => Data::F32(Vec::new()),
            DataType::F64 => Data::F64(Vec::new()),
            DataType::Bool => Data::Bool(Vec::new()),
            DataType::Datetime => Data::Timestamp(Vec::new()),
            DataType::String | DataType::Bytes => Data::Bytes {
                utf8: *ty == DataType::String,
                offsets: vec![0],
                bytes: Vec::new(),
            },
            DataType::Vec(item) | DataType::List(item) => Data::List {
                offsets: vec![0],
                child: Box::new(Column::new(item)),
            },
            DataType::Array(item, dims) => {
                // ARRAY<T, d1, d2…> is d1 lists of ARRAY<T, d2…>.
                let inner = match dims.get(1..) {
                    Some(rest) if !rest.is_empty() => {
                        Column::new(&DataType::Array(item.clone(), rest.to_vec()))
                    }
                    _ => Column::new(item),
                };
                Data::Fixed {
                    size: dims.first().map_or(0, |&d| d as usize),
                    child: Box::new(inner),
                }
            }
        };
        Column {
            valid: Vec::new(),
            data,
        }
    }

    pub fn len(&self) -> usize {
        self.valid.len()
    }

    /// Appends a null row.
    pub fn push_null(&mut self) {
        self.valid.push(false);
        match &mut self.data {
            Data::U8(v) => v.push(0),
            Data::I8(v) => v.push(0),
            Data::U16(v) => v.push(0),
            Data::I16(v) => v.push(0),
            Data::U32(v) => v.push(0),
            Data::I32(v) => v.push(0),
            Data::U64(v) => v.push(0),
            Data::I64(v) | Data::Timestamp(v) => v.push(0),
            Data::F32(v) => v.push(0.0),
            Data::F64(v) => v.push(0.0),
            Data::Bool(v) => v.push(false),
            Data::Bytes { offsets, .. } | Data::List { offsets, .. } => {
                let last = offsets.last().copied().unwrap_or(0);
                offsets.push(last);
            }
            Data::Fixed { size, child } => {
                for _ in 0..*size {
                    child.push_null();
                }
            }
        }
    }

    /// Cuts the column back to `rows` rows, and drops child values or bytes past the last
    /// row's end (a row that failed half-way may have left some).
    pub fn truncate(&mut self, rows: usize) {
        self.valid.truncate(rows);
        match &mut self.data {
            Data::U8(v) => v.truncate(rows),
            Data::I8(v) => v.truncate(rows),
            Data::U16(v) => v.truncate(rows),
            Data::I16(v) => v.truncate(rows),
            Data::U32(v) => v.truncate(rows),
            Data::I32(v) => v.truncate(rows),
            Data::U64(v) => v.truncate(rows),
            Data::I64(v) | Data::Timestamp(v) => v.truncate(rows),
            Data::F32(v) => v.truncate(rows),
            Data::F64(v) => v.truncate(rows),
            Data::Bool(v) => v.truncate(rows),
            Data::Bytes { offsets, bytes, .. } => {
                offsets.truncate(rows + 1);
                bytes.truncate(end_of(offsets));
            }
            Data::List { offsets, child } => {
                offsets.truncate(rows + 1);
                child.truncate(end_of(offsets));
            }
            Data::Fixed { size, child } => child.truncate(rows * *size),
        }
    }

    /// Moves the buffered rows into an array of `ty` (the plan's Arrow type of this column)
    /// and leaves the column empty, with its capacity kept.
    pub fn finish(&mut self, ty: &Arrow) -> ArrayRef {
        let nulls = take_nulls(&mut self.valid);
        match (&mut self.data, ty) {
            (Data::U8(v), _) => prim::<UInt8Type>(v, nulls),
            (Data::I8(v), _) => prim::<Int8Type>(v, nulls),
            (Data::U16(v), _) => prim::<UInt16Type>(v, nulls),
            (Data::I16(v), _) => prim::<Int16Type>(v, nulls),
            (Data::U32(v), _) => prim::<UInt32Type>(v, nulls),
            (Data::I32(v), _) => prim::<Int32Type>(v, nulls),
            (Data::U64(v), _) => prim::<UInt64Type>(v, nulls),
            (Data::I64(v), _) => prim::<Int64Type>(v, nulls),
            (Data::F32(v), _) => prim::<Float32Type>(v, nulls),
            (Data::F64(v), _) => prim::<Float64Type>(v, nulls),
            (Data::Timestamp(v), _) => Arc::new(
                TimestampNanosecondArray::new(ScalarBuffer::from(take_keep(v)), nulls)
                    .with_timezone("UTC"),
            ),
            (Data::Bool(v), _) => {
                let values = BooleanBuffer::from(v.as_slice());
                v.clear();
                Arc::new(BooleanArray::new(values, nulls))
            }
            (
                Data::Bytes {
                    utf8,
                    offsets,
                    bytes,
                },
                _,
            ) => {
                let offsets = take_offsets(offsets);
                let values = Buffer::from_vec(take_keep(bytes));
                if *utf8 {
                    Arc::new(StringArray::new(offsets, values, nulls))
                } else {
                    Arc::new(BinaryArray::new(offsets, values, nulls))
                }
            }
            (Data::List { offsets, child }, Arrow::List(item)) => {
                let offsets = take_offsets(offsets);
                let values = child.finish(item.data_type());
                Arc::new(ListArray::new(
                    FieldRef::clone(item),
                    offsets,
                    values,
                    nulls,
                ))
            }
            (Data::Fixed { size, child }, Arrow::FixedSizeList(item, _)) => {
                let values = child.finish(item.data_type());
                let size = i32::try_from(*size).unwrap_or(i32::MAX);
                Arc::new(FixedSizeListArray::new(
                    FieldRef::clone(item),
                    size,
                    values,
                    nulls,
                ))
            }
            // The plan builds columns and the schema from the same types, so nested data
            // always meets its list type; an empty array of `ty` keeps `finish` total.
            (_, ty) => arrow_array::new_empty_array(ty),
        }
    }
}

fn end_of(offsets: &[i32]) -> usize {
    offsets
        .last()
        .map_or(0, |&o| usize::try_from(o).unwrap_or(0))
}

/// Moves `v` out, leaving an empty vector of the same capacity behind.
fn take_keep<T>(v: &mut Vec<T>) -> Vec<T> {
    let capacity = v.capacity();
    std::mem::replace(v, Vec::with_capacity(capacity))
}

fn take_nulls(valid: &mut Vec<bool>) -> Option<NullBuffer> {
    let nulls = valid
        .contains(&false)
        .then(|| NullBuffer::from(valid.as_slice()));
    valid.clear();
    nulls
}

fn take_offsets(offsets: &mut Vec<i32>) -> OffsetBuffer<i32> {
    let taken = take_keep(offsets);
    offsets.push(0);
    OffsetBuffer::new(ScalarBuffer::from(taken))
}

fn prim<T: arrow_array::ArrowPrimitiveType>(
    v: &mut Vec<T::Native>,
    nulls: Option<NullBuffer>,
) -> ArrayRef {
    Arc::new(PrimitiveArray::<T>::new(
        ScalarBuffer::from(take_keep(v)),
        nulls,
    ))
}
