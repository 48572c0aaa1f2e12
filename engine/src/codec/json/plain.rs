//! The body of an emitter without ENCODE USING: each row as a JSON object of its columns, as
//! `arrow_json` writes it (null members left out), one body per row.
//!
//! `arrow_json`'s own row encoder writes each row straight into the frame's buffer, so the
//! row's range is known when it ends; nothing is split afterwards.

use std::sync::Arc;

use arrow_array::{RecordBatch, StructArray};
use arrow_json::writer::{make_encoder, EncoderOptions};
use arrow_schema::Field;

use crate::codec::rows::EncodedRows;

/// Appends every row of `batch` to `out` as one JSON object. A batch `arrow_json` cannot
/// write (a column type it has no encoder for) refuses every row with its reason.
pub fn encode_plain_json_rows(batch: &RecordBatch, out: &mut EncodedRows) {
    let rows = StructArray::from(batch.clone());
    let field = Arc::new(Field::new_struct(
        "",
        batch.schema().fields().clone(),
        false,
    ));
    let options = EncoderOptions::default();
    let mut encoder = match make_encoder(&field, &rows, &options) {
        Ok(encoder) => encoder,
        Err(error) => {
            let reason = format!("cannot write the row as JSON: {error}");
            for _ in 0..batch.num_rows() {
                out.push_row(|_| Err(reason.as_str()));
            }
            return;
        }
    };
    for row in 0..batch.num_rows() {
        out.push_row(|bytes| {
            encoder.encode(row, bytes);
            Ok::<(), std::convert::Infallible>(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{DataType, Schema};

    #[test]
    fn each_row_is_one_object_with_nulls_left_out() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("note", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("a\nb"), None])),
            ],
        )
        .expect("batch");
        let mut out = EncodedRows::with_rows(2);
        encode_plain_json_rows(&batch, &mut out);
        assert_eq!(out.row(0), Ok(&br#"{"id":1,"note":"a\nb"}"#[..]));
        assert_eq!(out.row(1), Ok(&br#"{"id":2}"#[..]));
    }
}
