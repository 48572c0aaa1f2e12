//! Decoding: [`unfold`] (parse, ON INGESTION, convert; runs anywhere, typically on an
//! extension worker) and [`JaqDecoder`] (per shard per ingestor: buffers unfolded payloads
//! and hands out batches in the plan's schema).
//!
//! Atomicity: [`unfold`] builds a payload's rows in columns of its own and returns them only
//! when every output converted, so a refused payload never reaches a decoder; appending is
//! moving one finished batch.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;
use jaq_json::Val;

use super::error::{DecodeCause, DecodeError};
use super::format::parse;
use super::plan::JaqCodecPlan;
use super::program::{run, RunError};
use super::value::{push_record, type_name};
use super::MAX_RECORDS_PER_PAYLOAD;

/// One payload's records, converted into the plan's schema; `Send`, so it can travel back
/// from a worker thread.
#[derive(Debug, Clone)]
pub struct Unfolded {
    batch: RecordBatch,
}

impl Unfolded {
    pub fn rows(&self) -> usize {
        self.batch.num_rows()
    }

    pub fn into_batch(self) -> RecordBatch {
        self.batch
    }
}

/// Parses `payload` in the plan's format, runs ON INGESTION (or takes the payload's object /
/// array of objects as the records), and converts every record. All or nothing.
pub fn unfold(plan: &JaqCodecPlan, payload: &[u8]) -> Result<Unfolded, DecodeError> {
    let input = parse(plan.format, payload).map_err(DecodeError::payload)?;
    let mut columns = plan.columns();
    let mut found: Vec<Option<Val>> = vec![None; plan.fields.len()];
    let mut record = |index: usize, v: &Val| {
        push_record(plan, &mut columns, &mut found, v).map_err(|(field, cause)| DecodeError {
            output: Some(u32::try_from(index).unwrap_or(u32::MAX)),
            field,
            cause,
        })
    };
    let rows = match &plan.ingestion {
        Some(filter) => run(filter, input, MAX_RECORDS_PER_PAYLOAD, |i, v| record(i, &v)).map_err(
            |e| match e {
                RunError::Program(message) => DecodeError::payload(DecodeCause::Program(message)),
                RunError::Steps => DecodeError::payload(DecodeCause::StepLimit),
                RunError::Stack => DecodeError::payload(DecodeCause::StackLimit),
                RunError::Outputs => DecodeError::payload(DecodeCause::TooManyRecords),
                RunError::Stop(e) => e,
            },
        )?,
        None => match &input {
            Val::Arr(items) => {
                if items.len() > MAX_RECORDS_PER_PAYLOAD {
                    return Err(DecodeError::payload(DecodeCause::TooManyRecords));
                }
                for (i, item) in items.iter().enumerate() {
                    record(i, item)?;
                }
                items.len()
            }
            Val::Obj(_) => {
                record(0, &input)?;
                1
            }
            other => {
                return Err(DecodeError::payload(DecodeCause::Mismatch {
                    expected: "object or array of objects",
                    found: type_name(other),
                }))
            }
        },
    };
    let schema = plan.schema();
    let arrays = columns
        .iter_mut()
        .zip(schema.fields().iter())
        .map(|(column, field)| column.finish(field.data_type()))
        .collect();
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
    let batch = RecordBatch::try_new_with_options(schema, arrays, &options)
        .unwrap_or_else(|e| unreachable!("columns follow the plan's schema: {e}"));
    Ok(Unfolded { batch })
}

/// One decoder per shard per ingestor, with [`crate::codec::JsonDecoder`]'s API.
#[derive(Debug)]
pub struct JaqDecoder {
    plan: Arc<JaqCodecPlan>,
    pending: Vec<RecordBatch>,
    rows: usize,
}

impl JaqDecoder {
    pub fn new(plan: Arc<JaqCodecPlan>) -> JaqDecoder {
        JaqDecoder {
            plan,
            pending: Vec::new(),
            rows: 0,
        }
    }

    pub fn plan(&self) -> &Arc<JaqCodecPlan> {
        &self.plan
    }

    /// Unfolds and appends one payload on the calling thread. Atomic: on `Err` no row of
    /// this payload is buffered. Returns the rows it added.
    pub fn decode_payload(&mut self, payload: &[u8]) -> Result<u32, DecodeError> {
        let unfolded = unfold(&self.plan, payload)?;
        self.append(unfolded)
    }

    /// Appends a payload [`unfold`]ed elsewhere with this decoder's plan; refuses rows of
    /// another schema. Returns the rows it added.
    pub fn append(&mut self, unfolded: Unfolded) -> Result<u32, DecodeError> {
        let batch = unfolded.batch;
        if batch.schema_ref().fields() != self.plan.schema().fields() {
            return Err(DecodeError::payload(DecodeCause::ForeignSchema));
        }
        let rows = batch.num_rows();
        if rows > 0 {
            self.rows += rows;
            self.pending.push(batch);
        }
        Ok(u32::try_from(rows).unwrap_or(u32::MAX))
    }

    /// Rows appended since the last [`JaqDecoder::finish`].
    pub fn buffered_rows(&self) -> usize {
        self.rows
    }

    /// The buffered rows as one `RecordBatch` in `plan.schema()`.
    pub fn finish(&mut self) -> RecordBatch {
        let schema = self.plan.schema();
        self.rows = 0;
        let pending = std::mem::take(&mut self.pending);
        match pending.len() {
            0 => RecordBatch::new_empty(schema),
            1 => pending
                .into_iter()
                .next()
                .unwrap_or_else(|| unreachable!("one batch is pending")),
            _ => concat_batches(&schema, &pending)
                .unwrap_or_else(|e| unreachable!("append admits only the plan's schema: {e}")),
        }
    }
}
