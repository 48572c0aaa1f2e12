//! The expression VM: compiles a checked [`TypedExpr`] once and evaluates it over whole Arrow
//! batches (DESIGN §4 batches are the unit of work, §7 expressions).
//!
//! This module owns the public surface the runtime codes against — [`Program`],
//! [`EvalContext`], [`Evaluated`], [`RowErrors`], [`eval_predicate`], [`arrow_type`] and
//! [`VmError`] — and nothing else; the node tree lives in `compile`, the evaluator in `eval`,
//! casts in `cast`, `JSON_VALUE` in `json`, the function kernels in `kernels::*`, and the
//! source envelope that `read_header` / `read_headers` read ([`EnvelopeView`], `envelope`).
//!
//! # Why it is correct
//!
//! * **Compile once.** [`Program::compile`] resolves every field to a [`ColumnSlot`], turns every
//!   literal into a one-row Arrow array of the node's exact Arrow type (kept as a *scalar* and
//!   broadcast only when a kernel needs it), compiles every regex and JSONPath and prepares every
//!   literal parameter; anything that cannot be prepared is a [`VmError`] before deployment.
//! * **Types by construction.** Every node's output is an array of `arrow_type(node.ty)`; field
//!   reads are checked (and, where Arrow allows, cast) against the type the checker resolved, so
//!   kernels downcast arrays whose type they know.
//! * **Row errors, not batch errors.** A value that cannot be computed (integer overflow,
//!   division by zero, bad cast, …) makes *that row* null and records `(row, message)`; the rest
//!   of the batch is unaffected. A branch's errors count only for rows that take the branch
//!   (`IF`, `CASE`, the right side of `AND`/`OR` where the left side did not decide, later
//!   `coalesce` arguments where earlier ones were null). Rows that failed are null in
//!   [`Evaluated::values`] whatever their parents computed from the null.
//! * **No panics.** Kernels index only within the lengths they check, sliced arrays are read
//!   through Arrow accessors that honour offsets, and every Arrow kernel error becomes a row
//!   error, never an unwrap.

mod arrow_types;
mod cast;
mod compile;
mod envelope;
mod eval;
mod json;
mod kernels;

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray};
use arrow_buffer::BooleanBufferBuilder;

use crate::types::TypedExpr;

pub use arrow_types::arrow_type;
pub use envelope::{EnvelopeView, HeaderTable, NameRule};

/// Where a field read finds its column at evaluation time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSlot {
    pub source: usize,
    pub column: usize,
}

/// Why an expression could not be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VmError {
    /// A field path the resolver does not know.
    #[error("unknown field `{path}`")]
    UnknownField { path: String },
    /// Something the VM does not evaluate here (window aggregates, `write_header`).
    #[error("unsupported: {what}")]
    Unsupported { what: String },
    /// A regex pattern that does not compile.
    #[error("invalid regular expression '{pattern}': {message}")]
    InvalidRegex { pattern: String, message: String },
    /// A literal parameter the VM cannot prepare (a JSONPath, a regex group, …).
    #[error("{message}")]
    InvalidArgument { message: String },
}

/// The compiled, typed program of one expression. `Send + Sync`; evaluating it allocates
/// only the output arrays.
pub struct Program {
    root: compile::Node,
    data_type: arrow_schema::DataType,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("data_type", &self.data_type)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Compiles a checked tree. `resolve` maps a field path exactly as written to its column;
    /// None → [`VmError::UnknownField`] naming the path. Window aggregates →
    /// [`VmError::Unsupported`] (they belong to windows).
    pub fn compile(
        expr: &TypedExpr,
        resolve: &dyn Fn(&[String]) -> Option<ColumnSlot>,
    ) -> Result<Program, VmError> {
        let root = compile::compile(expr, resolve)?;
        Ok(Program {
            data_type: root.arrow.clone(),
            root,
        })
    }

    /// The Arrow type of the result (DESIGN §4 mapping, see [`arrow_type`]).
    pub fn data_type(&self) -> &arrow_schema::DataType {
        &self.data_type
    }

    /// Whether the program calls `read_header` or `read_headers` (it needs an envelope).
    pub fn reads_headers(&self) -> bool {
        self.root.any(&|node| {
            matches!(
                node.kind,
                compile::NodeKind::Call {
                    function: crate::types::Function::ReadHeader
                        | crate::types::Function::ReadHeaders,
                    ..
                }
            )
        })
    }

    /// Whether the program reads a column of source `source`.
    pub fn reads_source(&self, source: usize) -> bool {
        self.root.any(
            &|node| matches!(node.kind, compile::NodeKind::Field { slot, .. } if slot.source == source),
        )
    }

    /// Evaluates on a whole batch. `sources[slot.source][slot.column]` is the column; every
    /// column has `ctx.num_rows` rows.
    pub fn eval(&self, ctx: &EvalContext<'_>) -> Evaluated {
        eval::eval_program(&self.root, ctx)
    }
}

/// What one evaluation reads.
pub struct EvalContext<'a> {
    pub sources: &'a [&'a [ArrayRef]],
    pub num_rows: usize,
    /// The execution snapshot: `now()` for every row of this execution (ns since epoch, UTC).
    pub now_ns: i64,
    /// The source envelope of these rows (`read_header` / `read_headers`), with exactly
    /// `num_rows` rows; None where the source captured none (header reads then fail per row).
    pub envelope: Option<&'a EnvelopeView>,
}

/// The result of one evaluation.
#[derive(Debug)]
pub struct Evaluated {
    /// One value per row; rows that failed are null here.
    pub values: ArrayRef,
    /// Rows that failed, in ascending row order; empty when none did.
    pub errors: RowErrors,
}

/// Per-row failures (cast of a bad value, division by zero, overflow, invalid regex input…).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowErrors {
    rows: Vec<(u32, Arc<str>)>,
}

impl RowErrors {
    pub(crate) fn from_sorted(rows: Vec<(u32, Arc<str>)>) -> RowErrors {
        RowErrors { rows }
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// (row, message) in ascending row order; message says what failed, e.g.
    /// "division by zero", "cannot cast 'abc' to I64", "I64 overflow in +".
    pub fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        self.rows.iter().map(|(row, message)| (*row, &**message))
    }

    /// A mask with `true` at every failed row (len `num_rows`; rows beyond it are ignored).
    pub fn mask(&self, num_rows: usize) -> BooleanArray {
        let mut bits = BooleanBufferBuilder::new(num_rows);
        bits.append_n(num_rows, false);
        for (row, _) in &self.rows {
            let row = *row as usize;
            if row < num_rows {
                bits.set_bit(row, true);
            }
        }
        BooleanArray::new(bits.finish(), None)
    }
}

/// For predicates (FILTER WHERE, route WHERE): evaluates a BOOL program; null → false.
/// Rows that failed are reported in errors and are false in the mask. A program of another
/// type yields an all-false mask and an error on every row.
pub fn eval_predicate(program: &Program, ctx: &EvalContext<'_>) -> (BooleanArray, RowErrors) {
    let evaluated = program.eval(ctx);
    let Some(values) = evaluated.values.as_any().downcast_ref::<BooleanArray>() else {
        let all = (0..ctx.num_rows)
            .map(|row| (row as u32, Arc::from("predicate is not BOOL")))
            .collect();
        let mask = BooleanArray::new(arrow_buffer::BooleanBuffer::new_unset(ctx.num_rows), None);
        return (mask, RowErrors::from_sorted(all));
    };
    let mask = match values.nulls() {
        Some(nulls) if nulls.null_count() > 0 => {
            BooleanArray::new(values.values() & nulls.inner(), None)
        }
        _ => BooleanArray::new(values.values().clone(), None),
    };
    (mask, evaluated.errors)
}

#[cfg(test)]
mod tests;
