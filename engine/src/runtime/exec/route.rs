//! The working-message model on whole batches (spec order of operations; DESIGN §5 item 2):
//! INHERIT, the ordered SETs, the route WHERE on the finalized output, and the outgoing branch,
//! for every row of an input batch at once.
//!
//! [`run_route`] never fails as a whole: a row whose SET, required-field check, WHERE or branch
//! key fails is reported in [`RouteOutput::failed`] with the first thing that failed, and its
//! batch-mates carry on. Every output row remembers the input row it came from
//! ([`RouteGroup::input_rows`]), which is how acknowledgements follow rows through a node.
//!
//! Why it is correct: output columns start as zero-cost null placeholders and are replaced in
//! construction order, so a SET reads exactly the columns the compile-time resolver chose
//! (`plan/route.rs`); the output batch is assembled only from rows that passed every step, so
//! `RecordBatch::try_new` sees no null in a required column.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{
    new_null_array, Array, ArrayRef, BooleanArray, NullArray, RecordBatch, UInt32Array,
};
use arrow_select::filter::FilterBuilder;
use nervix_shards::branch_key::{BranchKey, BranchKeyEncoder};

use super::branch_groups::group_by_key;
use crate::runtime::plan::{BranchOut, DomainPlan, RoutePlan};
use crate::vm::{eval_predicate, EnvelopeView, EvalContext, Program, RowErrors};

/// One concrete branch's share of a route's output: `rows` rows of the output's batch from
/// `offset` ([`RouteOutput::batch`]). A group is a range rather than a batch of its own so a
/// fan-out over thousands of branches builds no array per branch unless a branch's rows
/// travel alone (`RouteOutput::group_batch`).
pub struct RouteGroup {
    pub key: BranchKey,
    pub offset: usize,
    pub rows: usize,
    /// For each output row, the input row it came from (ascending); empty when the caller
    /// did not ask to track rows (its input holds one payload's rows).
    pub input_rows: UInt32Array,
}

/// What one route made of an input batch.
pub struct RouteOutput {
    /// Every output row, group after group; None when no row passed.
    pub batch: Option<RecordBatch>,
    pub groups: Vec<RouteGroup>,
    /// Rows that failed, ascending, with the first failure's message.
    pub failed: Vec<(u32, String)>,
    /// The output columns as they stood when construction ended (for error records'
    /// `partial_output`), one per target field.
    pub partial: Vec<ArrayRef>,
    /// When the groups were sliced from one batch in group order (see `group_by_key`) and
    /// rows are tracked: the input rows of every group, group after group; each group's
    /// `input_rows` is its slice. Lets per-row companions (event times) be taken once.
    pub grouped_rows: Option<UInt32Array>,
}

/// Records each row's first failure.
pub(crate) struct Failures {
    first: HashMap<u32, String>,
}

impl Failures {
    pub(crate) fn new() -> Failures {
        Failures {
            first: HashMap::new(),
        }
    }

    pub(crate) fn add(&mut self, errors: &RowErrors, what: &str) {
        for (row, message) in errors.iter() {
            self.first
                .entry(row)
                .or_insert_with(|| format!("{what}: {message}"));
        }
    }

    pub(crate) fn add_row(&mut self, row: u32, message: String) {
        self.first.entry(row).or_insert(message);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// `true` for every row that has not failed.
    pub(crate) fn keep_mask(&self, num_rows: usize) -> BooleanArray {
        let mut keep = vec![true; num_rows];
        for row in self.first.keys() {
            if let Some(slot) = keep.get_mut(*row as usize) {
                *slot = false;
            }
        }
        BooleanArray::from(keep)
    }

    pub(crate) fn into_sorted(self) -> Vec<(u32, String)> {
        let mut rows: Vec<(u32, String)> = self.first.into_iter().collect();
        rows.sort_unstable_by_key(|(row, _)| *row);
        rows
    }
}

fn and_masks(a: &BooleanArray, b: &BooleanArray) -> BooleanArray {
    // Both masks have no nulls, so plain AND is the intersection.
    arrow_arith::boolean::and(a, b).unwrap_or_else(|_| a.clone())
}

/// Builds the output columns of `route` over `input` (`num_rows` rows): INHERIT then SETs in
/// order, with per-row failures; returns the columns and the failures so far.
pub(crate) fn construct(
    route: &RoutePlan,
    input: &[ArrayRef],
    state: &[ArrayRef],
    envelope: Option<&EnvelopeView>,
    num_rows: usize,
    now_ns: i64,
    failures: &mut Failures,
) -> Vec<ArrayRef> {
    let metadata = envelope.map_or(&[][..], EnvelopeView::metadata);
    let placeholder: ArrayRef = Arc::new(NullArray::new(num_rows));
    let mut output: Vec<ArrayRef> = vec![placeholder; route.schema.fields().len()];
    for (out, inp) in &route.inherit {
        output[*out] = input[*inp].clone();
    }
    for (out, program) in &route.sets {
        let evaluated = {
            let sources: [&[ArrayRef]; 6] = [input, &output, &[], &[], state, metadata];
            program.eval(&EvalContext {
                sources: &sources,
                num_rows,
                now_ns,
                envelope,
            })
        };
        if !evaluated.errors.is_empty() {
            let name = route.schema.field(*out).name();
            failures.add(&evaluated.errors, &format!("SET {name}"));
        }
        output[*out] = evaluated.values;
    }
    for (index, field) in route.schema.fields().iter().enumerate() {
        let column = &output[index];
        if column.data_type() != field.data_type() {
            // Never set (validation allows that only for OPTIONAL fields): null.
            output[index] = new_null_array(field.data_type(), num_rows);
            continue;
        }
        if !field.is_nullable() && column.null_count() > 0 {
            for row in 0..num_rows {
                // A per-row scan only over a column that has nulls: naming each failing row
                // needs its index, which no kernel returns.
                if column.is_null(row) {
                    failures.add_row(
                        row as u32,
                        format!("required field '{}' is null", field.name()),
                    );
                }
            }
        }
    }
    output
}

/// Runs one route over an input batch (already past the node's filters). `envelope` is the
/// source envelope of exactly these rows (ingestors whose programs read it), else None.
#[allow(clippy::too_many_arguments)]
pub fn run_route(
    plan: &DomainPlan,
    route: &RoutePlan,
    input: &[ArrayRef],
    state: &[ArrayRef],
    envelope: Option<&EnvelopeView>,
    num_rows: usize,
    incoming: &BranchKey,
    now_ns: i64,
    encoders: &mut HashMap<usize, BranchKeyEncoder>,
    track_rows: bool,
) -> RouteOutput {
    let mut failures = Failures::new();
    let output = construct(
        route,
        input,
        state,
        envelope,
        num_rows,
        now_ns,
        &mut failures,
    );
    let metadata = envelope.map_or(&[][..], EnvelopeView::metadata);
    let mut keep = None;
    if let Some(program) = &route.filter {
        let sources: [&[ArrayRef]; 6] = [input, &output, &[], &[], state, metadata];
        let (mask, errors) = eval_predicate(
            program,
            &EvalContext {
                sources: &sources,
                num_rows,
                now_ns,
                envelope,
            },
        );
        failures.add(&errors, "WHERE");
        keep = Some(mask);
    }
    // Branch key columns over every row, so a key failure is a row failure like any other.
    let key_columns = match &route.branch {
        BranchOut::Construct { branch, keys } => {
            let declaration = &plan.branches[*branch];
            let mut columns = Vec::with_capacity(keys.len());
            for (field, program) in declaration.key_fields.iter().zip(keys) {
                match program {
                    Some(program) => {
                        let sources: [&[ArrayRef]; 6] = [input, &output, &[], &[], state, metadata];
                        let evaluated = program.eval(&EvalContext {
                            sources: &sources,
                            num_rows,
                            now_ns,
                            envelope,
                        });
                        failures.add(
                            &evaluated.errors,
                            &format!("BRANCHED BY {}", declaration.name),
                        );
                        columns.push(evaluated.values);
                    }
                    None => columns.push(new_null_array(field.data_type(), num_rows)),
                }
            }
            Some((*branch, columns))
        }
        _ => None,
    };
    let mut mask = if failures.is_empty() {
        None
    } else {
        Some(failures.keep_mask(num_rows))
    };
    if let Some(filter_mask) = keep {
        mask = Some(match mask {
            Some(m) => and_masks(&m, &filter_mask),
            None => filter_mask,
        });
    }
    // Row indices only matter when the input's rows belong to several payloads.
    let all_rows = if track_rows {
        UInt32Array::from_iter_values(0..num_rows as u32)
    } else {
        UInt32Array::from(Vec::<u32>::new())
    };
    let (rows, columns, key_columns) = match &mask {
        Some(mask) => {
            // One prepared selection shared by every column.
            let predicate = FilterBuilder::new(mask).optimize().build();
            let rows = if track_rows {
                predicate.filter(&all_rows).map(|a| downcast_u32(&a))
            } else {
                Ok(all_rows)
            };
            let columns: Result<Vec<ArrayRef>, _> = output
                .iter()
                .map(|c| predicate.filter(c.as_ref()))
                .collect();
            let keys = key_columns.map(|(b, cols)| {
                (
                    b,
                    cols.iter()
                        .map(|c| predicate.filter(c.as_ref()))
                        .collect::<Result<Vec<_>, _>>(),
                )
            });
            match (rows, columns) {
                (Ok(rows), Ok(columns)) => (rows, columns, keys),
                _ => return internal_failure(num_rows, output, "cannot filter the route's rows"),
            }
        }
        None => (
            all_rows,
            output.clone(),
            key_columns.map(|(b, cols)| (b, Ok(cols))),
        ),
    };
    let failed = failures.into_sorted();
    let kept = columns.first().map_or(num_rows, |c| c.len());
    if kept == 0 {
        return RouteOutput {
            batch: None,
            groups: Vec::new(),
            failed,
            partial: output,
            grouped_rows: None,
        };
    }
    let batch = match RecordBatch::try_new(route.schema.clone(), columns) {
        Ok(batch) => batch,
        Err(error) => {
            return internal_failure(
                num_rows,
                output,
                &format!("cannot build the output: {error}"),
            )
        }
    };
    let output_rows = batch.num_rows();
    let whole = |key: BranchKey, input_rows: UInt32Array| RouteGroup {
        key,
        offset: 0,
        rows: output_rows,
        input_rows,
    };
    let (batch, groups, grouped_rows) = match (&route.branch, key_columns) {
        (BranchOut::Unbranched, _) => (batch, vec![whole(BranchKey::Unbranched, rows)], None),
        (BranchOut::Keep { .. }, _) => (batch, vec![whole(incoming.clone(), rows)], None),
        (BranchOut::Construct { .. }, Some((branch, Ok(keys)))) => {
            let schema = plan.branches[branch].key_schema.clone();
            let encoder = match encoders.entry(branch) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    match BranchKeyEncoder::new(schema.fields()) {
                        Ok(encoder) => v.insert(encoder),
                        Err(error) => {
                            return internal_failure(num_rows, output, &error.to_string())
                        }
                    }
                }
            };
            // Without a mask, output row i is input row i.
            let identity = mask.is_none();
            match group_by_key(encoder, &schema, keys, batch, rows, identity, track_rows) {
                Ok(grouped) => grouped,
                Err(message) => return internal_failure(num_rows, output, &message),
            }
        }
        _ => return internal_failure(num_rows, output, "cannot compute the branch keys"),
    };
    RouteOutput {
        batch: Some(batch),
        groups,
        failed,
        partial: output,
        grouped_rows,
    }
}

impl RouteOutput {
    /// `group`'s rows as a batch of their own: the output's batch itself when the group holds
    /// all of it, else a slice of it.
    pub fn group_batch(&self, group: &RouteGroup) -> RecordBatch {
        let batch = self
            .batch
            .as_ref()
            .expect("an output with groups has a batch");
        if group.offset == 0 && group.rows == batch.num_rows() {
            batch.clone()
        } else {
            batch.slice(group.offset, group.rows)
        }
    }
}

fn downcast_u32(array: &ArrayRef) -> UInt32Array {
    array
        .as_any()
        .downcast_ref::<UInt32Array>()
        .cloned()
        .unwrap_or_else(|| UInt32Array::from(Vec::<u32>::new()))
}

/// Every row fails with `message`: a broken invariant reported per row instead of a panic.
fn internal_failure(num_rows: usize, partial: Vec<ArrayRef>, message: &str) -> RouteOutput {
    RouteOutput {
        batch: None,
        groups: Vec::new(),
        failed: (0..num_rows as u32)
            .map(|row| (row, format!("internal error: {message}")))
            .collect(),
        partial,
        grouped_rows: None,
    }
}

/// Evaluates a node-level predicate over the input row (and, for an ingestor, the source
/// envelope of these rows); failing rows are reported.
pub fn node_filter(
    program: &Program,
    input: &[ArrayRef],
    envelope: Option<&EnvelopeView>,
    num_rows: usize,
    now_ns: i64,
) -> (BooleanArray, RowErrors) {
    let metadata = envelope.map_or(&[][..], EnvelopeView::metadata);
    let sources: [&[ArrayRef]; 6] = [input, &[], &[], &[], &[], metadata];
    eval_predicate(
        program,
        &EvalContext {
            sources: &sources,
            num_rows,
            now_ns,
            envelope,
        },
    )
}

/// The values of `program` read from the input row alone (a deduplicator's keys, a reorderer's
/// ordering values): one per row, failures per row.
pub fn input_values(
    program: &Program,
    input: &[ArrayRef],
    num_rows: usize,
    now_ns: i64,
) -> crate::vm::Evaluated {
    let sources: [&[ArrayRef]; 6] = [input, &[], &[], &[], &[], &[]];
    program.eval(&EvalContext {
        sources: &sources,
        num_rows,
        now_ns,
        envelope: None,
    })
}
