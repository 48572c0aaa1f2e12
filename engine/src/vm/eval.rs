//! The evaluator: walks the compiled tree over one batch.
//!
//! Every node yields an [`Out`]: a column ([`Col`], either a full array of `num_rows` rows or a
//! one-row *scalar* that stands for every row) and its row errors ([`Errs`]). Correctness rests
//! on three rules applied uniformly:
//! * a scalar result is produced only when every input was a scalar, so a scalar's error
//!   (`Errs::all`) is an error of every row, and is expanded to rows when it meets an array;
//! * conditional evaluation restricts a branch's errors to the rows that take the branch
//!   (`Errs::restrict`), so `IF x = 0 THEN 0 ELSE 1 / x END` reports nothing;
//! * at the end, every failed row is nulled in the output, whatever the parents computed.

use std::sync::Arc;

use arrow_arith::boolean::{and, and_kleene, and_not, is_not_null, is_null, not, or_kleene};
use arrow_array::{new_null_array, Array, ArrayRef, BooleanArray, Datum, UInt32Array};
use arrow_ord::cmp;
use arrow_schema::ArrowError;

use super::compile::{Cmp, Node, NodeKind};
use super::{EvalContext, Evaluated, RowErrors};

/// A node's value: a full column, or a one-row scalar standing for every row.
#[derive(Debug, Clone)]
pub(crate) enum Col {
    Array(ArrayRef),
    Scalar(ArrayRef),
}

impl Datum for Col {
    fn get(&self) -> (&dyn Array, bool) {
        match self {
            Col::Array(a) => (a.as_ref(), false),
            Col::Scalar(a) => (a.as_ref(), true),
        }
    }
}

impl Col {
    /// Wraps a kernel result: a scalar when every input was.
    pub(crate) fn new(array: ArrayRef, scalar: bool) -> Col {
        if scalar {
            Col::Scalar(array)
        } else {
            Col::Array(array)
        }
    }

    pub(crate) fn array(&self) -> &ArrayRef {
        match self {
            Col::Array(a) | Col::Scalar(a) => a,
        }
    }

    pub(crate) fn is_scalar(&self) -> bool {
        matches!(self, Col::Scalar(_))
    }

    /// The index to read for row `i`.
    #[inline]
    pub(crate) fn idx(&self, i: usize) -> usize {
        if self.is_scalar() {
            0
        } else {
            i
        }
    }

    /// The column as `n` rows (a scalar is repeated).
    pub(crate) fn to_array(&self, n: usize) -> ArrayRef {
        match self {
            Col::Array(a) => a.clone(),
            Col::Scalar(a) => broadcast(a, n),
        }
    }
}

/// Repeats row 0 of `a` `n` times.
pub(crate) fn broadcast(a: &ArrayRef, n: usize) -> ArrayRef {
    if a.is_empty() || a.is_null(0) {
        return new_null_array(a.data_type(), n);
    }
    let indices = UInt32Array::new(vec![0u32; n].into(), None);
    arrow_select::take::take(a.as_ref(), &indices, None)
        .unwrap_or_else(|_| new_null_array(a.data_type(), n))
}

/// Row errors of one node.
#[derive(Debug, Default)]
pub(crate) struct Errs {
    /// An error of every row (a scalar that failed).
    pub all: Option<Arc<str>>,
    /// Errors of single rows, unsorted until [`Errs::finish`].
    pub rows: Vec<(u32, Arc<str>)>,
}

impl Errs {
    /// Errors a kernel reported at output indices: for a scalar output, index 0 is every row.
    pub(crate) fn from_rows(rows: Vec<(u32, Arc<str>)>, scalar: bool) -> Errs {
        if scalar {
            Errs {
                all: rows.into_iter().next().map(|(_, m)| m),
                rows: Vec::new(),
            }
        } else {
            Errs { all: None, rows }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.all.is_none() && self.rows.is_empty()
    }

    pub(crate) fn merge(&mut self, other: Errs) {
        if self.all.is_none() {
            self.all = other.all;
        }
        if self.rows.is_empty() {
            self.rows = other.rows;
        } else {
            self.rows.extend(other.rows);
        }
    }

    /// Keeps only errors of rows where `mask` (no nulls, `n` rows) is true.
    pub(crate) fn restrict(self, mask: &BooleanArray) -> Errs {
        if self.is_empty() {
            return self;
        }
        let mut rows: Vec<(u32, Arc<str>)> = self
            .rows
            .into_iter()
            .filter(|(r, _)| (*r as usize) < mask.len() && mask.value(*r as usize))
            .collect();
        if let Some(all) = self.all {
            rows.extend(mask.values().set_indices().map(|r| (r as u32, all.clone())));
        }
        Errs { all: None, rows }
    }

    /// Sorted, one error per row (the first recorded wins), `all` expanded to `n` rows.
    fn finish(mut self, n: usize) -> Vec<(u32, Arc<str>)> {
        if let Some(all) = self.all.take() {
            self.rows.extend((0..n).map(|r| (r as u32, all.clone())));
        }
        self.rows.retain(|(r, _)| (*r as usize) < n);
        self.rows.sort_by_key(|(r, _)| *r);
        self.rows.dedup_by_key(|(r, _)| *r);
        self.rows
    }
}

/// A node's value and errors.
pub(crate) struct Out {
    pub col: Col,
    pub errs: Errs,
}

impl Out {
    pub(crate) fn ok(col: Col) -> Out {
        Out {
            col,
            errs: Errs::default(),
        }
    }

    /// A null result of `node`'s type failing on every row with `message`.
    pub(crate) fn fail(node: &Node, message: impl Into<Arc<str>>) -> Out {
        Out {
            col: Col::Scalar(new_null_array(&node.arrow, 1)),
            errs: Errs {
                all: Some(message.into()),
                rows: Vec::new(),
            },
        }
    }

    /// A kernel's result, or a failure of every row naming the Arrow error.
    pub(crate) fn from_kernel(node: &Node, result: Result<Col, ArrowError>) -> Out {
        match result {
            Ok(col) => Out::ok(col),
            Err(e) => Out::fail(node, format!("internal error: {e}")),
        }
    }
}

/// A null scalar of `node`'s type.
pub(crate) fn null_scalar(node: &Node) -> Col {
    Col::Scalar(new_null_array(&node.arrow, 1))
}

/// Evaluates the whole program: the output has exactly `num_rows` rows and failed rows are null.
pub(crate) fn eval_program(root: &Node, ctx: &EvalContext<'_>) -> Evaluated {
    let n = ctx.num_rows;
    let out = eval(root, ctx);
    let mut values = out.col.to_array(n);
    if values.len() != n || values.data_type() != &root.arrow {
        values = new_null_array(&root.arrow, n);
    }
    let errors = out.errs.finish(n);
    if !errors.is_empty() {
        let errors = RowErrors::from_sorted(errors);
        let failed = errors.mask(n);
        values = arrow_select::nullif::nullif(values.as_ref(), &failed)
            .unwrap_or_else(|_| new_null_array(&root.arrow, n));
        return Evaluated { values, errors };
    }
    Evaluated {
        values,
        errors: RowErrors::default(),
    }
}

/// `true` where a BOOL column is true, `false` where it is false or null; `n` rows, no nulls.
pub(crate) fn truthy_mask(col: &Col, n: usize) -> BooleanArray {
    let array = col.to_array(n);
    let Some(b) = array.as_any().downcast_ref::<BooleanArray>() else {
        return BooleanArray::new(arrow_buffer::BooleanBuffer::new_unset(n), None);
    };
    match b.nulls() {
        Some(nulls) if nulls.null_count() > 0 => {
            BooleanArray::new(b.values() & nulls.inner(), None)
        }
        _ => BooleanArray::new(b.values().clone(), None),
    }
}

/// Applies a BOOL kernel of two equal-length arrays to two columns.
pub(crate) fn bool_pair(
    a: &Col,
    b: &Col,
    n: usize,
    f: impl Fn(&BooleanArray, &BooleanArray) -> Result<BooleanArray, ArrowError>,
) -> Result<Col, ArrowError> {
    let scalar = a.is_scalar() && b.is_scalar();
    let rows = if scalar { 1 } else { n };
    let (x, y) = (a.to_array(rows), b.to_array(rows));
    let (Some(x), Some(y)) = (
        x.as_any().downcast_ref::<BooleanArray>(),
        y.as_any().downcast_ref::<BooleanArray>(),
    ) else {
        return Err(ArrowError::InvalidArgumentError("expected BOOL".into()));
    };
    Ok(Col::new(Arc::new(f(x, y)?), scalar))
}

fn compare(op: Cmp, a: &Col, b: &Col) -> Result<Col, ArrowError> {
    let result = match op {
        Cmp::Eq => cmp::eq(a, b),
        Cmp::NotEq => cmp::neq(a, b),
        Cmp::Lt => cmp::lt(a, b),
        Cmp::LtEq => cmp::lt_eq(a, b),
        Cmp::Gt => cmp::gt(a, b),
        Cmp::GtEq => cmp::gt_eq(a, b),
    }?;
    Ok(Col::new(Arc::new(result), a.is_scalar() && b.is_scalar()))
}

fn not_col(c: &Col) -> Result<Col, ArrowError> {
    let Some(b) = c.array().as_any().downcast_ref::<BooleanArray>() else {
        return Err(ArrowError::InvalidArgumentError("expected BOOL".into()));
    };
    Ok(Col::new(Arc::new(not(b)?), c.is_scalar()))
}

/// Evaluates one node.
pub(crate) fn eval(node: &Node, ctx: &EvalContext<'_>) -> Out {
    let n = ctx.num_rows;
    match &node.kind {
        NodeKind::Literal(a) => Out::ok(Col::Scalar(a.clone())),
        NodeKind::Field { slot, path } => field(node, ctx, *slot, path),
        NodeKind::Neg(inner) => {
            let mut out = eval(inner, ctx);
            let r = super::kernels::numeric::neg(node, &out.col);
            out.errs.merge(r.errs);
            Out {
                col: r.col,
                errs: out.errs,
            }
        }
        NodeKind::Not(inner) => {
            let out = eval(inner, ctx);
            let mut r = Out::from_kernel(node, not_col(&out.col));
            r.errs.merge(out.errs);
            r
        }
        NodeKind::Arith(op, l, r) => {
            let (a, b) = (eval(l, ctx), eval(r, ctx));
            let mut out = super::kernels::numeric::arith(node, *op, &a.col, &b.col);
            out.errs.merge(a.errs);
            out.errs.merge(b.errs);
            out
        }
        NodeKind::Concat(l, r) => {
            let (a, b) = (eval(l, ctx), eval(r, ctx));
            let mut out =
                Out::from_kernel(node, super::kernels::strings::concat_op(&a.col, &b.col, n));
            out.errs.merge(a.errs);
            out.errs.merge(b.errs);
            out
        }
        NodeKind::Cmp(op, l, r) => {
            let (a, b) = (eval(l, ctx), eval(r, ctx));
            let mut out = Out::from_kernel(node, compare(*op, &a.col, &b.col));
            out.errs.merge(a.errs);
            out.errs.merge(b.errs);
            out
        }
        NodeKind::And(l, r) => logic(node, ctx, l, r, false),
        NodeKind::Or(l, r) => logic(node, ctx, l, r, true),
        NodeKind::Cast { expr, try_cast } => {
            let inner = eval(expr, ctx);
            let mut out = super::cast::cast(node, expr, &inner.col, *try_cast);
            out.errs.merge(inner.errs);
            out
        }
        NodeKind::IsNull { expr, negated } => {
            let inner = eval(expr, ctx);
            let a = inner.col.array();
            let r = if *negated {
                is_not_null(a.as_ref())
            } else {
                is_null(a.as_ref())
            };
            let mut out = Out::from_kernel(
                node,
                r.map(|b| Col::new(Arc::new(b), inner.col.is_scalar())),
            );
            out.errs.merge(inner.errs);
            out
        }
        NodeKind::InList {
            expr,
            list,
            negated,
        } => in_list(node, ctx, expr, list, *negated),
        NodeKind::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let x = eval(expr, ctx);
            let lo = eval(low, ctx);
            let hi = eval(high, ctx);
            let result = compare(Cmp::GtEq, &x.col, &lo.col).and_then(|ge| {
                let le = compare(Cmp::LtEq, &x.col, &hi.col)?;
                let both = bool_pair(&ge, &le, n, and_kleene)?;
                if *negated {
                    not_col(&both)
                } else {
                    Ok(both)
                }
            });
            let mut out = Out::from_kernel(node, result);
            out.errs.merge(x.errs);
            out.errs.merge(lo.errs);
            out.errs.merge(hi.errs);
            out
        }
        NodeKind::If {
            condition,
            then,
            otherwise,
        } => if_node(node, ctx, condition, then, otherwise),
        NodeKind::Case {
            operand,
            branches,
            otherwise,
        } => case_node(
            node,
            ctx,
            operand.as_deref(),
            branches,
            otherwise.as_deref(),
        ),
        NodeKind::Call {
            function,
            args,
            prepared,
        } => super::kernels::call(node, *function, args, prepared, ctx),
        NodeKind::JsonValue { doc, path } => {
            let d = eval(doc, ctx);
            let mut out = super::json::json_value(node, &d.col, path);
            out.errs.merge(d.errs);
            out
        }
    }
}

fn field(node: &Node, ctx: &EvalContext<'_>, slot: super::ColumnSlot, path: &str) -> Out {
    let Some(column) = ctx
        .sources
        .get(slot.source)
        .and_then(|s| s.get(slot.column))
    else {
        return Out::fail(node, format!("field `{path}` has no column in this batch"));
    };
    if column.len() != ctx.num_rows {
        return Out::fail(
            node,
            format!(
                "field `{path}` has {} rows, the batch {}",
                column.len(),
                ctx.num_rows
            ),
        );
    }
    if column.data_type() == &node.arrow {
        return Out::ok(Col::Array(column.clone()));
    }
    // The same values under another spelling (a timestamp zone written "+00:00", list item
    // fields named differently): reinterpret; any other type is refused on every row.
    let same_values = match (column.data_type(), &node.arrow) {
        (
            arrow_schema::DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, _),
            arrow_schema::DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, _),
        ) => true,
        (have, want) => have.equals_datatype(want),
    };
    let converted = if same_values {
        arrow_cast::cast(column.as_ref(), &node.arrow).ok()
    } else {
        None
    };
    match converted {
        Some(converted) if converted.len() == ctx.num_rows => Out::ok(Col::Array(converted)),
        _ => Out::fail(
            node,
            format!(
                "field `{path}` is {} in this batch, expected {}",
                column.data_type(),
                node.arrow
            ),
        ),
    }
}

/// `AND` (`or = false`) and `OR` with SQL three-valued logic; the right side's errors count
/// only where the left side did not decide the result.
fn logic(node: &Node, ctx: &EvalContext<'_>, l: &Node, r: &Node, or: bool) -> Out {
    let n = ctx.num_rows;
    let a = eval(l, ctx);
    let decided = |c: &Col, rows: usize| -> BooleanArray {
        // Rows where the left side is non-null and equals `or` (TRUE for OR, FALSE for AND).
        let array = c.to_array(rows);
        match array.as_any().downcast_ref::<BooleanArray>() {
            Some(b) => {
                let hit = if or { b.values().clone() } else { !b.values() };
                match b.nulls() {
                    Some(nulls) => BooleanArray::new(&hit & nulls.inner(), None),
                    None => BooleanArray::new(hit, None),
                }
            }
            None => BooleanArray::new(arrow_buffer::BooleanBuffer::new_unset(rows), None),
        }
    };
    if a.col.is_scalar() {
        let d = decided(&a.col, 1);
        if d.value(0) {
            return a;
        }
    }
    let b = eval(r, ctx);
    let kernel = if or { or_kleene } else { and_kleene };
    let mut out = Out::from_kernel(node, bool_pair(&a.col, &b.col, n, kernel));
    let right_errs = if b.errs.is_empty() || a.col.is_scalar() {
        b.errs
    } else {
        let d = decided(&a.col, n);
        match not(&d) {
            Ok(open) => b.errs.restrict(&open),
            Err(_) => b.errs,
        }
    };
    out.errs.merge(a.errs);
    out.errs.merge(right_errs);
    out
}

fn in_list(node: &Node, ctx: &EvalContext<'_>, expr: &Node, list: &[Node], negated: bool) -> Out {
    let n = ctx.num_rows;
    let x = eval(expr, ctx);
    let mut errs = x.errs;
    let mut acc: Option<Col> = None;
    for item in list {
        let v = eval(item, ctx);
        errs.merge(v.errs);
        let step = compare(Cmp::Eq, &x.col, &v.col).and_then(|eq| match &acc {
            None => Ok(eq),
            Some(prev) => bool_pair(prev, &eq, n, or_kleene),
        });
        match step {
            Ok(c) => acc = Some(c),
            Err(e) => {
                let mut out = Out::fail(node, format!("internal error: {e}"));
                out.errs.merge(errs);
                return out;
            }
        }
    }
    let result = match acc {
        Some(c) if negated => not_col(&c),
        Some(c) => Ok(c),
        None => Ok(Col::Scalar(Arc::new(BooleanArray::from(vec![negated])))),
    };
    let mut out = Out::from_kernel(node, result);
    out.errs.merge(errs);
    out
}

fn if_node(
    node: &Node,
    ctx: &EvalContext<'_>,
    condition: &Node,
    then: &Node,
    otherwise: &Node,
) -> Out {
    let n = ctx.num_rows;
    let c = eval(condition, ctx);
    let mut errs = c.errs;
    if c.col.is_scalar() {
        let take = truthy_mask(&c.col, 1).value(0);
        let mut out = eval(if take { then } else { otherwise }, ctx);
        out.errs.merge(errs);
        return out;
    }
    let mask = truthy_mask(&c.col, n);
    let t = if mask.true_count() > 0 {
        eval(then, ctx)
    } else {
        Out::ok(null_scalar(node))
    };
    let o = if mask.true_count() < n {
        eval(otherwise, ctx)
    } else {
        Out::ok(null_scalar(node))
    };
    errs.merge(t.errs.restrict(&mask));
    if let Ok(inverse) = not(&mask) {
        errs.merge(o.errs.restrict(&inverse));
    }
    let mut out = Out::from_kernel(
        node,
        arrow_select::zip::zip(&mask, &t.col, &o.col).map(Col::Array),
    );
    out.errs.merge(errs);
    out
}

fn case_node(
    node: &Node,
    ctx: &EvalContext<'_>,
    operand: Option<&Node>,
    branches: &[(Node, Node)],
    otherwise: Option<&Node>,
) -> Out {
    let n = ctx.num_rows;
    let mut errs = Errs::default();
    let operand = operand.map(|o| {
        let v = eval(o, ctx);
        errs.merge(v.errs);
        v.col
    });
    let mut remaining = BooleanArray::new(arrow_buffer::BooleanBuffer::new_set(n), None);
    let mut taken: Vec<(BooleanArray, Col)> = Vec::new();
    for (when, then) in branches {
        if remaining.true_count() == 0 {
            break;
        }
        let w = eval(when, ctx);
        errs.merge(w.errs.restrict(&remaining));
        let condition = match &operand {
            Some(x) => compare(Cmp::Eq, x, &w.col),
            None => Ok(w.col),
        };
        let step = condition.and_then(|cond| {
            let hit = truthy_mask(&cond, n);
            let take = and(&remaining, &hit)?;
            let rest = and_not(&remaining, &take)?;
            Ok((take, rest))
        });
        let (take, rest) = match step {
            Ok(pair) => pair,
            Err(e) => {
                let mut out = Out::fail(node, format!("internal error: {e}"));
                out.errs.merge(errs);
                return out;
            }
        };
        remaining = rest;
        if take.true_count() > 0 {
            let t = eval(then, ctx);
            errs.merge(t.errs.restrict(&take));
            taken.push((take, t.col));
        }
    }
    let mut result = match otherwise {
        Some(o) if remaining.true_count() > 0 => {
            let v = eval(o, ctx);
            errs.merge(v.errs.restrict(&remaining));
            v.col
        }
        _ => null_scalar(node),
    };
    for (take, col) in taken.into_iter().rev() {
        match arrow_select::zip::zip(&take, &col, &result) {
            Ok(a) => result = Col::Array(a),
            Err(e) => {
                let mut out = Out::fail(node, format!("internal error: {e}"));
                out.errs.merge(errs);
                return out;
            }
        }
    }
    let result = match result {
        Col::Scalar(a) => Col::Array(broadcast(&a, n)),
        array => array,
    };
    Out { col: result, errs }
}
