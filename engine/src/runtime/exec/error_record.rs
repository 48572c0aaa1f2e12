//! `ON MESSAGE ERROR SEND TO <relay> SET …`: the error records of a route's failed rows.
//!
//! A record is built from what exists when its row failed (spec): `input.*` (the failed rows of
//! the input), `partial_output.*` (the route's output columns as construction left them) and
//! `error.reference, code, operation, message`, with the error SETs applied in order. Records
//! keep the failing branch: the incoming branch when the node runs inside one, the route's
//! constructed branch read from the record's fields of the same names otherwise.
//!
//! An ingestor's captured source envelope stays readable here (spec "Header Context"): the
//! error SETs see the failed rows' own payload headers and `metadata.` values, taken from the
//! route's envelope view with the same row indices as `input.*`.

use std::sync::Arc;

use arrow_array::{
    new_null_array, Array, ArrayRef, NullArray, RecordBatch, StringArray, UInt32Array,
};
use arrow_select::take::take;
use nervix_shards::branch_key::{BranchKey, BranchKeyEncoder};

use super::route::Failures;
use crate::runtime::plan::{BranchOut, DomainPlan, ErrorSetPlan, RoutePlan};
use crate::vm::{EnvelopeView, EvalContext};

/// The error code every expression failure carries in `error.code`.
pub const EXPRESSION_ERROR_CODE: &str = "message_error";
/// The error code of a row refused at admission (spec: code validation, operation admit).
pub const ADMISSION_ERROR_CODE: &str = "validation";

/// Error records for `failed` rows: one batch per branch, each with its input rows; plus
/// the rows whose error record itself failed (they follow LOG).
pub struct ErrorRecords {
    pub groups: Vec<(BranchKey, RecordBatch, UInt32Array)>,
    pub failed: Vec<(u32, String)>,
}

/// What a route's failure left to build error records from.
pub struct Failed<'a> {
    /// The node's input columns (after its filters).
    pub input: &'a [ArrayRef],
    /// The route's output columns as construction left them.
    pub partial: &'a [ArrayRef],
    /// Failed rows (indices into `input`) with their first failure.
    pub rows: &'a [(u32, String)],
    /// The branch the node ran in.
    pub incoming: &'a BranchKey,
    /// `relay_state.*` columns (constant per frame), at least as many rows as `rows`.
    pub state: &'a [ArrayRef],
    /// The source envelope of `input`'s rows (ingestors that read it), else None.
    pub envelope: Option<&'a EnvelopeView>,
    pub now_ns: i64,
    /// `error.code` of every record ([`EXPRESSION_ERROR_CODE`] for expression failures).
    pub code: &'a str,
}

pub fn build(
    plan: &DomainPlan,
    route: &RoutePlan,
    error: &ErrorSetPlan,
    failed_rows: &Failed<'_>,
) -> ErrorRecords {
    let Failed {
        input,
        partial,
        rows: failed,
        incoming,
        state,
        envelope,
        now_ns,
        code,
    } = *failed_rows;
    let indices = UInt32Array::from_iter_values(failed.iter().map(|(row, _)| *row));
    let n = failed.len();
    let gather = |columns: &[ArrayRef]| -> Vec<ArrayRef> {
        columns
            .iter()
            .map(|c| {
                if c.data_type() == &arrow_schema::DataType::Null {
                    Arc::new(NullArray::new(n)) as ArrayRef
                } else {
                    take(c.as_ref(), &indices, None)
                        .unwrap_or_else(|_| new_null_array(c.data_type(), n))
                }
            })
            .collect()
    };
    let input_rows = gather(input);
    let envelope = envelope.map(|view| view.take(&indices));
    let metadata = envelope.as_ref().map_or(&[][..], EnvelopeView::metadata);
    let partial_rows = gather(partial);
    let error_columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![route.label.as_str(); n])),
        Arc::new(StringArray::from(vec![code; n])),
        Arc::new(StringArray::from_iter_values(
            failed
                .iter()
                .map(|(_, m)| m.split(':').next().unwrap_or("")),
        )),
        Arc::new(StringArray::from_iter_values(
            failed.iter().map(|(_, m)| m.as_str()),
        )),
    ];
    let schema = error.schema.clone();
    let mut record: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| new_null_array(f.data_type(), n))
        .collect();
    let mut failures = Failures::new();
    for (out, program) in &error.sets {
        let evaluated = {
            let state_rows: Vec<ArrayRef> = state.iter().map(|c| c.slice(0, n)).collect();
            let sources: [&[ArrayRef]; 6] = [
                &input_rows,
                &partial_rows,
                &error_columns,
                &record,
                &state_rows,
                metadata,
            ];
            program.eval(&EvalContext {
                sources: &sources,
                num_rows: n,
                now_ns,
                envelope: envelope.as_ref(),
            })
        };
        failures.add(&evaluated.errors, "error record SET");
        record[*out] = evaluated.values;
    }
    for (index, field) in schema.fields().iter().enumerate() {
        if !field.is_nullable() && record[index].null_count() > 0 {
            for row in 0..n {
                // Naming each failing record needs its index; no kernel returns it.
                if record[index].is_null(row) {
                    failures.add_row(
                        row as u32,
                        format!("error record field '{}' is null", field.name()),
                    );
                }
            }
        }
    }
    let keep = failures.keep_mask(n);
    let bad: Vec<(u32, String)> = failures
        .into_sorted()
        .into_iter()
        .map(|(i, m)| (failed[i as usize].0, m))
        .collect();
    let columns: Vec<ArrayRef> = record
        .iter()
        .map(|c| arrow_select::filter::filter(c.as_ref(), &keep).unwrap_or_else(|_| c.clone()))
        .collect();
    let rows = arrow_select::filter::filter(&indices, &keep)
        .ok()
        .and_then(|a| a.as_any().downcast_ref::<UInt32Array>().cloned())
        .unwrap_or_else(|| UInt32Array::from(Vec::<u32>::new()));
    let Ok(batch) = RecordBatch::try_new(schema, columns) else {
        return ErrorRecords {
            groups: Vec::new(),
            failed: failed.to_vec(),
        };
    };
    if batch.num_rows() == 0 {
        return ErrorRecords {
            groups: Vec::new(),
            failed: bad,
        };
    }
    let relay = &plan.relays[error.relay];
    let key = match (&route.branch, relay.branch) {
        (_, None) => BranchKey::Unbranched,
        (BranchOut::Keep { .. }, Some(_)) => incoming.clone(),
        (_, Some(branch)) => {
            // A constructed branch: every record is keyed by its own fields of the key's names.
            let declaration = &plan.branches[branch];
            let Ok(mut encoder) = BranchKeyEncoder::new(declaration.key_schema.fields()) else {
                return ErrorRecords {
                    groups: Vec::new(),
                    failed: failed.to_vec(),
                };
            };
            let mut groups = Vec::new();
            match encoder.encode(&batch) {
                Ok(keys) => {
                    for row in 0..batch.num_rows() {
                        // Error records are rare; one group per record keeps this simple.
                        groups.push((
                            BranchKey::Key(keys.row(row).data().into()),
                            batch.slice(row, 1),
                            rows.slice(row, 1),
                        ));
                    }
                    return ErrorRecords {
                        groups,
                        failed: bad,
                    };
                }
                Err(_) => {
                    return ErrorRecords {
                        groups: Vec::new(),
                        failed: failed.to_vec(),
                    }
                }
            }
        }
    };
    ErrorRecords {
        groups: vec![(key, batch, rows)],
        failed: bad,
    }
}
