//! A WINDOW PROCESSOR's plan: the aggregate calls of its routes, their argument programs, and
//! routes compiled against the calls' results.
//!
//! Window routes are set-only and read live input only inside aggregate arguments (validation
//! enforces both). So a route is compiled as an ordinary route over a one-row "input" whose
//! columns are the aggregate results: every aggregate call in a SET becomes a read of
//! `input.__agg<i>` with the call's type, and call `i`'s arguments are compiled separately
//! against the processor's input fields. `branch.<field>` reads become reads of
//! `input.__branch_<field>`, a column emission fills from the branch key. Emission then
//! finishes each call into one-row column `i` and runs the routes unchanged (exec VM, error
//! policies, branch keep).

use std::collections::HashMap;

use arrow_schema::{FieldRef, SchemaRef};
use nervix_nspl::ast::processor::{CreateProcessor, WindowExtent};

use super::{arrow_schema, route, PlanError, TypedIndex};
use crate::runtime::aggregate::{Accumulator, AggregateCall};
use crate::types::{FieldType, TypedExpr, TypedKind};
use crate::validate::route::Field;
use crate::vm::Program;

/// The column name aggregate call `index` is read through in a window route.
fn result_name(index: usize) -> String {
    format!("__agg{index}")
}

/// The column name branch key field `field` is read through in a window route.
fn branch_name(field: &str) -> String {
    format!("__branch_{field}")
}

/// One aggregate call: how it folds, and its per-row argument programs (value arguments only;
/// literal parameters live in the call).
pub struct WindowCall {
    pub call: AggregateCall,
    pub args: Vec<Program>,
}

/// The per-branch state cap of a window that declares no MAX STATE SIZE.
pub const UNDECLARED_STATE_CAP_BYTES: u64 = 256 * 1024 * 1024;

/// How a window processor runs (spec "Window processor").
pub struct WindowPlan {
    pub width_ns: u64,
    pub step_ns: u64,
    /// `MAX STATE SIZE`: the cap on one concrete branch's live state.
    pub max_state_bytes: Option<u64>,
    pub calls: Vec<WindowCall>,
    /// The schema of an emission's one-row input: one column per call, then one per branch
    /// key field the routes read.
    pub results: SchemaRef,
    /// The branch key fields the routes read (`branch.<field>`), by position in the key.
    pub branch_fields: Vec<usize>,
    /// What the calls' fixed-capacity state (sketches) reserves per branch, charged to MAX
    /// STATE SIZE before any row.
    pub reserved_bytes: u64,
    /// Identifies the window model a snapshot was taken under (width, step, calls).
    pub model: u64,
}

impl WindowPlan {
    /// The most live state one branch may hold: MAX STATE SIZE, or
    /// [`UNDECLARED_STATE_CAP_BYTES`] without one.
    pub fn branch_cap_bytes(&self) -> u64 {
        self.max_state_bytes.unwrap_or(UNDECLARED_STATE_CAP_BYTES)
    }
}

/// The window processors of `windows` (name, plan) whose branches may hold more state than
/// `storable_bytes`, the largest snapshot entry the runtime state store can take, with their
/// caps: such a branch, once that large, cannot be snapshotted (its encoding holds the row
/// times besides the charged state, so it is larger still), and its rows stay unacknowledged
/// until its window emits them.
pub fn windows_over_storable<'a>(
    windows: impl IntoIterator<Item = (&'a str, &'a WindowPlan)>,
    storable_bytes: u64,
) -> Vec<(&'a str, u64)> {
    windows
        .into_iter()
        .map(|(name, window)| (name, window.branch_cap_bytes()))
        .filter(|(_, cap)| *cap > storable_bytes)
        .collect()
}

impl std::fmt::Debug for WindowPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowPlan")
            .field("width_ns", &self.width_ns)
            .field("step_ns", &self.step_ns)
            .field("max_state_bytes", &self.max_state_bytes)
            .field("calls", &self.calls.len())
            .field("branch_fields", &self.branch_fields)
            .finish_non_exhaustive()
    }
}

/// What window routes read: the aggregate call nodes and the `branch.<field>` reads with types.
type RouteReads<'e> = (Vec<&'e TypedExpr>, Vec<(String, FieldType)>);

/// A window's plan, the fields its routes read, and each aggregate call's result column by
/// the call's span.
type Planned = (WindowPlan, Vec<Field>, HashMap<(u32, u32), usize>);

/// Every aggregate call in the SETs of `create`'s routes (in span order) and every
/// `branch.<field>` they read (by name, first read first).
fn route_reads<'e>(
    typed: &TypedIndex<'e>,
    create: &CreateProcessor,
) -> Result<RouteReads<'e>, PlanError> {
    let mut calls: Vec<&'e TypedExpr> = Vec::new();
    let mut branch_reads: Vec<(String, FieldType)> = Vec::new();
    for written in &create.routes {
        let trees = written
            .set
            .iter()
            .map(|a| &a.value)
            .chain(written.filter.as_ref());
        for expr in trees {
            let mut stack = vec![typed.get(expr)?];
            while let Some(node) = stack.pop() {
                match &node.kind {
                    // Aggregates do not nest (validation), so their arguments are not walked.
                    TypedKind::Aggregate { .. } => calls.push(node),
                    TypedKind::Field(path) if path.len() == 2 && path[0] == "branch" => {
                        if !branch_reads.iter().any(|(name, _)| *name == path[1]) {
                            branch_reads.push((path[1].clone(), node.ty.clone()));
                        }
                    }
                    _ => node.push_children(&mut stack),
                }
            }
        }
    }
    calls.sort_by_key(|c| (c.span.start, c.span.end));
    calls.dedup_by_key(|c| (c.span.start, c.span.end));
    Ok((calls, branch_reads))
}

fn duration_ns(extent: &WindowExtent, what: &str, owner: &str) -> Result<u64, PlanError> {
    match extent {
        WindowExtent::Duration(d) if d.nanos > 0 => Ok(d.nanos),
        WindowExtent::Duration(_) => Err(PlanError::Compile {
            entity: owner.to_string(),
            message: format!("the window's {what} must be longer than zero"),
        }),
        WindowExtent::Rows(_) => Err(PlanError::Unsupported {
            entity: owner.to_string(),
            what: format!("a {what} counted in rows"),
        }),
    }
}

/// The window's plan and the fields its routes read (the call results), and the spans of the
/// calls with their column, for compiling the routes.
pub(super) fn plan(
    typed: &TypedIndex<'_>,
    create: &CreateProcessor,
    (width, step, max_state_size): (
        &WindowExtent,
        &WindowExtent,
        Option<&nervix_nspl::ast::ByteSize>,
    ),
    input: &[Field],
    branch_key: &[FieldRef],
    owner: &str,
) -> Result<Planned, PlanError> {
    let width_ns = duration_ns(width, "WIDTH", owner)?;
    let step_ns = duration_ns(step, "STEP", owner)?;
    let (trees, branch_reads) = route_reads(typed, create)?;
    let mut calls = Vec::with_capacity(trees.len());
    let mut fields = Vec::with_capacity(trees.len());
    let mut columns = HashMap::with_capacity(trees.len());
    let mut reserved_bytes = 0u64;
    let mut argument_shapes = Vec::new();
    for (index, tree) in trees.into_iter().enumerate() {
        let call = AggregateCall::from_typed(tree).map_err(|error| PlanError::Compile {
            entity: owner.to_string(),
            message: error.to_string(),
        })?;
        let TypedKind::Aggregate { args, .. } = &tree.kind else {
            unreachable!("aggregate_calls returns aggregate nodes")
        };
        let programs = call
            .value_args()
            .iter()
            .map(|position| typed.compile_typed(&args[*position], &route::input_resolver(input)))
            .collect::<Result<Vec<_>, _>>()?;
        argument_shapes.extend(
            call.value_args()
                .iter()
                .map(|position| without_spans(&format!("{:?}", args[*position]))),
        );
        reserved_bytes += Accumulator::new(&call).reserved_bytes() as u64;
        fields.push(Field {
            name: result_name(index),
            ty: tree.ty.clone(),
        });
        columns.insert((tree.span.start, tree.span.end), index);
        calls.push(WindowCall {
            call,
            args: programs,
        });
    }
    // The argument expressions belong to the model: retained rows hold their evaluated
    // values, which another expression (or the same ones in another order) must not read.
    let model = xxhash_rust::xxh3::xxh3_64(
        format!(
            "{width_ns}/{step_ns}/{:?}/{}",
            calls.iter().map(|c| &c.call).collect::<Vec<_>>(),
            argument_shapes.join(";")
        )
        .as_bytes(),
    );
    let branch_fields = super::branch_scope::key_columns(
        branch_reads,
        branch_key,
        owner,
        branch_name,
        &mut fields,
    )?;
    Ok((
        WindowPlan {
            width_ns,
            step_ns,
            max_state_bytes: max_state_size.map(|size| size.bytes),
            calls,
            results: arrow_schema(&fields),
            branch_fields,
            reserved_bytes,
            model,
        },
        fields,
        columns,
    ))
}

/// A typed expression's debug text without its source positions (`span: Span { .. }`), so
/// an edit that only moves an expression in its statement keeps the window model.
fn without_spans(debug: &str) -> String {
    const SPAN: &str = "span: Span {";
    let mut out = String::with_capacity(debug.len());
    let mut rest = debug;
    while let Some(at) = rest.find(SPAN) {
        out.push_str(&rest[..at]);
        rest = &rest[at + SPAN.len()..];
        match rest.find('}') {
            Some(end) => rest = &rest[end + 1..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// `tree` with every aggregate call replaced by a read of its result column.
pub(super) fn read_results(tree: &TypedExpr, columns: &HashMap<(u32, u32), usize>) -> TypedExpr {
    let mut rewritten = tree.clone();
    rewritten.replace_nodes(&mut |node| match &node.kind {
        TypedKind::Aggregate { .. } => {
            columns
                .get(&(node.span.start, node.span.end))
                .map(|index| TypedExpr {
                    kind: TypedKind::Field(vec!["input".to_string(), result_name(*index)]),
                    ty: node.ty.clone(),
                    span: node.span,
                })
        }
        TypedKind::Field(path) if path.len() == 2 && path[0] == "branch" => Some(TypedExpr {
            kind: TypedKind::Field(vec!["input".to_string(), branch_name(&path[1])]),
            ty: node.ty.clone(),
            span: node.span,
        }),
        _ => None,
    });
    rewritten
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::Schema;

    use super::*;

    fn window(max_state_bytes: Option<u64>) -> WindowPlan {
        WindowPlan {
            width_ns: 10,
            step_ns: 10,
            max_state_bytes,
            calls: Vec::new(),
            results: Arc::new(Schema::empty()),
            branch_fields: Vec::new(),
            reserved_bytes: 0,
            model: 1,
        }
    }

    /// A branch cap over the storable size is named, with the cap (MAX STATE SIZE, or the
    /// undeclared cap); one at or under it is not.
    #[test]
    fn windows_whose_branches_may_outgrow_a_snapshot_are_named() {
        let (small, large, undeclared) =
            (window(Some(1 << 20)), window(Some(8 << 20)), window(None));
        let windows = [
            ("small", &small),
            ("large", &large),
            ("undeclared", &undeclared),
        ];
        assert_eq!(
            windows_over_storable(windows, 1 << 20),
            vec![
                ("large", 8 << 20),
                ("undeclared", UNDECLARED_STATE_CAP_BYTES)
            ]
        );
        assert!(windows_over_storable(windows, UNDECLARED_STATE_CAP_BYTES).is_empty());
    }
}
