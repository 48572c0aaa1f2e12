//! ON EMITTING: one row becomes a jq object (by column name, see [`super::value`]), the
//! program runs on it and must yield exactly one value, which is written in the codec's
//! format. A failure leaves `out` as it was.

use arrow_array::RecordBatch;

use super::error::EmitError;
use super::format::write;
use super::plan::JaqCodecPlan;
use super::program::{run, RunError};
use super::value::row_value;
use crate::codec::rows::EncodedRows;

/// Appends row `row` of `batch` (in the plan's schema, columns found by name), transformed by
/// ON EMITTING, to `out`.
pub fn emit(
    plan: &JaqCodecPlan,
    batch: &RecordBatch,
    row: usize,
    out: &mut Vec<u8>,
) -> Result<(), EmitError> {
    let Some(filter) = &plan.emitting else {
        return Err(EmitError::NoProgram);
    };
    if row >= batch.num_rows() {
        return Err(EmitError::NoRow {
            row,
            rows: batch.num_rows(),
        });
    }
    let mut value = None;
    let count = run(filter, row_value(batch, row), 1, |_, v| {
        value = Some(v);
        Ok::<(), std::convert::Infallible>(())
    })
    .map_err(|e| match e {
        RunError::Program(message) => EmitError::Program(message),
        RunError::Steps => EmitError::StepLimit,
        RunError::Stack => EmitError::StackLimit,
        RunError::Outputs => EmitError::ManyOutputs,
        RunError::Stop(never) => match never {},
    })?;
    let Some(value) = value.filter(|_| count == 1) else {
        return Err(EmitError::NoOutput);
    };
    let before = out.len();
    write(plan.format, &value, out).map_err(|message| {
        out.truncate(before);
        EmitError::Write {
            format: plan.format.keyword(),
            message,
        }
    })
}

/// Appends every row of `batch`, transformed by ON EMITTING, to `out`, recording each row's
/// range: the per-message bodies of an emitter. A row the program or the format refuses is
/// refused on its own. Runs on the extension workers (the program's cost is unbounded).
pub fn emit_rows(plan: &JaqCodecPlan, batch: &RecordBatch, out: &mut EncodedRows) {
    for row in 0..batch.num_rows() {
        out.push_row(|bytes| emit(plan, batch, row, bytes));
    }
}
