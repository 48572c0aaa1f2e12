//! Logical Arrow bytes: what a batch or column holds in values, offsets and validity, not
//! allocation slack, and for a slice only the slice's share (exactly as Arrow's
//! `ArrayData::get_slice_memory_size` counts). `MAX BATCH SIZE`, collectors, admission counters
//! and a window's MAX STATE SIZE measure with it, so two branches whose rows are slices of one
//! shared buffer are each charged their own rows, not the whole buffer.

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;

/// Logical Arrow bytes of a batch as `MAX BATCH SIZE` counts them: values, offsets and
/// validity, not allocation slack.
pub fn logical_bytes(batch: &RecordBatch) -> u64 {
    batch
        .columns()
        .iter()
        .map(|c| column_logical_bytes(c.as_ref()))
        .sum()
}

/// One column's logical bytes, exactly as Arrow's `ArrayData::get_slice_memory_size` counts
/// them. Flat columns (fixed width, boolean, strings and binaries) are read in place: every
/// frame is measured on the way into a buffer or collector, and building an `ArrayData` per
/// column there cost more than the rest of the measurement. Nested types take Arrow's path.
pub fn column_logical_bytes(column: &dyn Array) -> u64 {
    let rows = column.len();
    let validity = if column.nulls().is_some() {
        rows.div_ceil(8)
    } else {
        0
    };
    let data_type = column.data_type();
    let body = match data_type {
        DataType::Boolean => rows.div_ceil(8),
        DataType::Utf8 => variable_width_bytes(column.as_string::<i32>().value_offsets(), 4),
        DataType::LargeUtf8 => variable_width_bytes(column.as_string::<i64>().value_offsets(), 8),
        DataType::Binary => variable_width_bytes(column.as_binary::<i32>().value_offsets(), 4),
        DataType::LargeBinary => variable_width_bytes(column.as_binary::<i64>().value_offsets(), 8),
        _ => match data_type.primitive_width() {
            Some(width) if data_type.is_primitive() => rows * width,
            _ => return column.to_data().get_slice_memory_size().unwrap_or(0) as u64,
        },
    };
    (body + validity) as u64
}

/// Offsets (`len + 1` of `offset_width` bytes) plus the values they span.
fn variable_width_bytes<O: arrow_array::OffsetSizeTrait>(
    offsets: &[O],
    offset_width: usize,
) -> usize {
    let spanned = match (offsets.first(), offsets.last()) {
        (Some(first), Some(last)) => (*last - *first).as_usize(),
        _ => 0,
    };
    offsets.len() * offset_width + spanned
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{ListBuilder, StringBuilder};
    use arrow_array::{
        Array, ArrayRef, BinaryArray, BooleanArray, Float64Array, Int64Array, LargeStringArray,
        StringArray, TimestampNanosecondArray,
    };

    use super::column_logical_bytes;

    fn arrow_count(array: &dyn Array) -> u64 {
        array.to_data().get_slice_memory_size().unwrap() as u64
    }

    #[test]
    fn flat_columns_count_what_arrow_counts_whole_and_sliced() {
        let mut list = ListBuilder::new(StringBuilder::new());
        list.values().append_value("a");
        list.append(true);
        list.append(false);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
            Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])),
            Arc::new(Float64Array::from(vec![1.5; 9])),
            Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
            Arc::new(StringArray::from(vec![
                Some("alpha"),
                None,
                Some("γδ"),
                Some(""),
            ])),
            Arc::new(LargeStringArray::from(vec!["x", "yy", "zzz"])),
            Arc::new(BinaryArray::from(vec![&b"ab"[..], &b""[..], &b"cde"[..]])),
            Arc::new(TimestampNanosecondArray::from(vec![7, 8])),
            Arc::new(StringArray::from(Vec::<&str>::new())),
            Arc::new(list.finish()),
        ];
        for column in &columns {
            assert_eq!(
                column_logical_bytes(column.as_ref()),
                arrow_count(column.as_ref()),
                "{column:?}"
            );
            for (offset, len) in [(1, 1), (0, column.len().saturating_sub(1))] {
                if offset + len <= column.len() {
                    let slice = column.slice(offset, len);
                    assert_eq!(
                        column_logical_bytes(slice.as_ref()),
                        arrow_count(slice.as_ref()),
                        "{slice:?}"
                    );
                }
            }
        }
    }
}
