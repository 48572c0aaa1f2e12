//! Console subscriptions (`CREATE SUBSCRIPTION w TO relay [WHERE …] [BATCH SAMPLE RATE f]`):
//! a tap on a relay that sends its rows to one console session as JSON lines, SENSITIVE fields
//! masked as `<masked>`.
//!
//! A subscription observes; it is not a consumer. It never holds acknowledgements or
//! backpressures the graph: when the session's bounded queue is full, rows are skipped and
//! counted, and the next line that fits says how many were skipped.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use super::graph::Tap;
use crate::vm::{eval_predicate, EvalContext};

/// The text a SENSITIVE value is shown as.
pub const MASK: &str = "<masked>";

/// Feeds one frame's rows to a tap.
pub fn feed(tap: &mut Tap, batch: &RecordBatch, sensitive: &[bool], snapshot_ns: i64) {
    if tap.sink.is_closed() {
        return;
    }
    let mut batch = batch.clone();
    if let Some(program) = &tap.filter {
        let columns = batch.columns().to_vec();
        let sources: [&[ArrayRef]; 1] = [&columns];
        let (mask, _) = eval_predicate(
            program,
            &EvalContext {
                sources: &sources,
                num_rows: batch.num_rows(),
                now_ns: snapshot_ns,
                envelope: None,
            },
        );
        match arrow_select::filter::filter_record_batch(&batch, &mask) {
            Ok(filtered) => batch = filtered,
            Err(_) => return,
        }
    }
    if batch.num_rows() == 0 {
        return;
    }
    // BATCH SAMPLE RATE: a deterministic stride keeps about `rate` of the rows.
    if tap.sample_rate < 1.0 {
        let keep: Vec<u32> = (0..batch.num_rows() as u32)
            .filter(|_| {
                tap.sampler = tap.sampler.wrapping_add(1);
                let period = (1.0 / tap.sample_rate.max(1e-9)).round() as u64;
                tap.sampler.is_multiple_of(period.max(1))
            })
            .collect();
        let indices = arrow_array::UInt32Array::from(keep);
        match arrow_select::take::take_record_batch(&batch, &indices) {
            Ok(sampled) => batch = sampled,
            Err(_) => return,
        }
        if batch.num_rows() == 0 {
            return;
        }
    }
    let masked = mask(&batch, sensitive);
    let mut buffer = Vec::new();
    {
        let mut writer = arrow_json::LineDelimitedWriter::new(&mut buffer);
        if writer.write(&masked).is_err() || writer.finish().is_err() {
            return;
        }
    }
    let text = String::from_utf8_lossy(&buffer);
    for line in text.lines() {
        if tap.skipped_rows > 0 {
            let note = format!(
                "{}: -- {} rows skipped: the session read too slowly",
                tap.label, tap.skipped_rows
            );
            if tap.sink.try_send(note).is_err() {
                tap.skipped_rows += 1;
                continue;
            }
            tap.skipped_rows = 0;
        }
        if tap.sink.try_send(format!("{}: {line}", tap.label)).is_err() {
            tap.skipped_rows += 1;
        }
    }
}

/// The batch with every SENSITIVE column replaced by `<masked>` strings (nulls stay null).
pub fn mask(batch: &RecordBatch, sensitive: &[bool]) -> RecordBatch {
    if !sensitive.iter().any(|s| *s) {
        return batch.clone();
    }
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (index, field) in schema.fields().iter().enumerate() {
        let column = batch.column(index);
        if sensitive.get(index).copied().unwrap_or(false) {
            let masked: StringArray = (0..column.len())
                .map(|row| (!column.is_null(row)).then_some(MASK))
                .collect();
            fields.push(Field::new(field.name(), DataType::Utf8, true));
            columns.push(Arc::new(masked));
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap_or_else(|_| batch.clone())
}
