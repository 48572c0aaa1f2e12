//! Function kernels and the call dispatcher, plus the row accessors and builders they share.
//!
//! Correct because every function is dispatched on its checked [`Function`] and argument
//! types (the checker's table in `types::functions` is the contract), inputs are read through
//! accessors that map an output row to the right input index (a scalar argument is row 0 of a
//! one-row array; an array argument honours its slice offset through Arrow's `value`/`is_null`),
//! and outputs are built to exactly the number of rows their inputs have (one when every
//! argument is a scalar). A row whose value cannot be computed yields null and an error.

pub(crate) mod datetime;
pub(crate) mod headers;
pub(crate) mod numeric;
pub(crate) mod regex;
pub(crate) mod strings;
pub(crate) mod substring;

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, PrimitiveBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{new_null_array, Array, ArrayRef, ArrowPrimitiveType, Int64Array, StringArray};
use arrow_schema::DataType as Arrow;

use super::compile::{Node, Prepared};
use super::eval::{eval, Col, Errs, Out};
use super::EvalContext;
use crate::types::Function;

/// Row errors as kernels report them: (output index, message).
pub(crate) type RowErrs = Vec<(u32, Arc<str>)>;

/// How many rows a kernel over `args` produces, and whether that is a scalar.
pub(crate) fn shape(args: &[&Col], n: usize) -> (usize, bool) {
    if args.iter().all(|a| a.is_scalar()) {
        (1, true)
    } else {
        (n, false)
    }
}

/// A STRING argument read per output row.
pub(crate) struct Strs<'a> {
    array: Option<&'a StringArray>,
    scalar: bool,
}

impl<'a> Strs<'a> {
    pub(crate) fn new(col: &'a Col) -> Strs<'a> {
        Strs {
            array: col.array().as_string_opt::<i32>(),
            scalar: col.is_scalar(),
        }
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&'a str> {
        let a = self.array?;
        let j = if self.scalar { 0 } else { i };
        if j >= a.len() || a.is_null(j) {
            None
        } else {
            Some(a.value(j))
        }
    }
}

/// An integer argument of any integer type, read per row as `i64` (U64 saturates).
pub(crate) struct Ints {
    array: Int64Array,
    scalar: bool,
}

impl Ints {
    pub(crate) fn new(col: &Col) -> Ints {
        let a = col.array();
        let array = match a.data_type() {
            Arrow::Int64 => a.as_primitive::<Int64Type>().clone(),
            Arrow::UInt64 => a
                .as_primitive::<arrow_array::types::UInt64Type>()
                .unary(|v| i64::try_from(v).unwrap_or(i64::MAX)),
            _ => arrow_cast::cast(a.as_ref(), &Arrow::Int64)
                .ok()
                .and_then(|c| c.as_primitive_opt::<Int64Type>().cloned())
                .unwrap_or_else(|| Int64Array::new_null(a.len())),
        };
        Ints {
            array,
            scalar: col.is_scalar(),
        }
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<i64> {
        let j = if self.scalar { 0 } else { i };
        if j >= self.array.len() || self.array.is_null(j) {
            None
        } else {
            Some(self.array.value(j))
        }
    }
}

/// What one row of a kernel yields.
pub(crate) type RowResult<T> = Result<Option<T>, String>;

/// Builds a STRING column row by row; `f` writes the value into the buffer and returns
/// `Ok(true)`, or `Ok(false)` for null, or `Err` for a row error.
pub(crate) fn build_strings(
    rows: usize,
    mut f: impl FnMut(usize, &mut String) -> Result<bool, String>,
) -> (ArrayRef, RowErrs) {
    let mut builder = StringBuilder::with_capacity(rows, rows.saturating_mul(8));
    let mut buf = String::new();
    let mut errs = Vec::new();
    for i in 0..rows {
        buf.clear();
        match f(i, &mut buf) {
            Ok(true) => builder.append_value(&buf),
            Ok(false) => builder.append_null(),
            Err(message) => {
                builder.append_null();
                errs.push((i as u32, Arc::from(message)));
            }
        }
    }
    (Arc::new(builder.finish()), errs)
}

/// Builds a primitive column row by row.
pub(crate) fn build_prim<T: ArrowPrimitiveType>(
    rows: usize,
    arrow: &Arrow,
    mut f: impl FnMut(usize) -> RowResult<T::Native>,
) -> (ArrayRef, RowErrs) {
    let mut builder = PrimitiveBuilder::<T>::with_capacity(rows).with_data_type(arrow.clone());
    let mut errs = Vec::new();
    for i in 0..rows {
        match f(i) {
            Ok(Some(v)) => builder.append_value(v),
            Ok(None) => builder.append_null(),
            Err(message) => {
                builder.append_null();
                errs.push((i as u32, Arc::from(message)));
            }
        }
    }
    (Arc::new(builder.finish()), errs)
}

/// Builds a BOOL column row by row.
pub(crate) fn build_bools(
    rows: usize,
    mut f: impl FnMut(usize) -> RowResult<bool>,
) -> (ArrayRef, RowErrs) {
    let mut builder = BooleanBuilder::with_capacity(rows);
    let mut errs = Vec::new();
    for i in 0..rows {
        match f(i) {
            Ok(Some(v)) => builder.append_value(v),
            Ok(None) => builder.append_null(),
            Err(message) => {
                builder.append_null();
                errs.push((i as u32, Arc::from(message)));
            }
        }
    }
    (Arc::new(builder.finish()), errs)
}

/// A kernel's result: its array (of `rows` rows), scalar-ness and row errors.
pub(crate) fn finish(array: ArrayRef, scalar: bool, errs: RowErrs) -> Out {
    Out {
        errs: Errs::from_rows(errs, scalar),
        col: Col::new(array, scalar),
    }
}

/// Evaluates a call: arguments first (their errors always count, except `coalesce`'s, which
/// count only where earlier arguments were null), then the function's kernel.
pub(crate) fn call(
    node: &Node,
    function: Function,
    args: &[Node],
    prepared: &Prepared,
    ctx: &EvalContext<'_>,
) -> Out {
    use Function as F;
    let n = ctx.num_rows;
    match function {
        F::Coalesce => return coalesce(node, args, ctx),
        F::Now => {
            let a =
                arrow_array::TimestampNanosecondArray::from(vec![ctx.now_ns]).with_timezone("UTC");
            return Out::ok(Col::Scalar(Arc::new(a)));
        }
        F::UuidV4 | F::UuidV7 => {
            // One fresh value per row: generation is inherently per row.
            let (array, errs) = build_strings(n, |_, buf| {
                let id = if function == F::UuidV4 {
                    uuid::Uuid::new_v4()
                } else {
                    uuid::Uuid::now_v7()
                };
                let mut text = uuid::Uuid::encode_buffer();
                buf.push_str(id.hyphenated().encode_lower(&mut text));
                Ok(true)
            });
            return finish(array, false, errs);
        }
        F::WriteHeader => {
            return Out::fail(node, format!("{} is an emitter clause", function.name()))
        }
        _ => {}
    }
    let mut errs = Errs::default();
    let cols: Vec<Col> = args
        .iter()
        .map(|a| {
            let out = eval(a, ctx);
            errs.merge(out.errs);
            out.col
        })
        .collect();
    let mut out = match function {
        F::LeakSensitive => cols
            .first()
            .cloned()
            .map_or_else(|| Out::fail(node, "missing argument"), Out::ok),
        F::IsNull => match cols.first() {
            Some(c) => Out::from_kernel(
                node,
                arrow_arith::boolean::is_null(c.array().as_ref())
                    .map(|b| Col::new(Arc::new(b), c.is_scalar())),
            ),
            None => Out::fail(node, "missing argument"),
        },
        F::NullIf => nullif(node, &cols, n),
        F::ReadHeader | F::ReadHeaders => headers::call(node, function, &cols, ctx.envelope, n),
        F::RegexpLike | F::RegexpReplace | F::RegexpSubstr | F::RegexpExtract => {
            regex::call(node, function, &cols, prepared, n)
        }
        F::Abs
        | F::Ceil
        | F::Floor
        | F::Round
        | F::Sqrt
        | F::Exp
        | F::Ln
        | F::Log
        | F::Pow
        | F::Sin
        | F::Cos
        | F::Tan
        | F::Mod => numeric::call(node, function, &cols, n),
        F::DateTrunc | F::DateBin | F::Extract | F::ParseDatetime | F::FormatDatetime => {
            datetime::call(node, function, &cols, prepared, n)
        }
        _ => strings::call(node, function, &cols, n),
    };
    out.errs.merge(errs);
    out
}

fn coalesce(node: &Node, args: &[Node], ctx: &EvalContext<'_>) -> Out {
    let n = ctx.num_rows;
    let mut errs = Errs::default();
    let mut result: Option<Col> = None;
    for arg in args {
        let still_null = match &result {
            None => None,
            Some(r) => {
                let a = r.array();
                if a.null_count() == 0 {
                    break;
                }
                match arrow_arith::boolean::is_null(a.as_ref()) {
                    Ok(mask) => Some((mask, r.is_scalar())),
                    Err(e) => return Out::fail(node, format!("internal error: {e}")),
                }
            }
        };
        let v = eval(arg, ctx);
        let Some(prev) = result.take() else {
            errs.merge(v.errs);
            result = Some(v.col);
            continue;
        };
        let Some((null_mask, prev_scalar)) = still_null else {
            result = Some(prev);
            break;
        };
        let null_rows = if prev_scalar {
            super::eval::broadcast(&(Arc::new(null_mask) as ArrayRef), n)
        } else {
            Arc::new(null_mask) as ArrayRef
        };
        let Some(null_rows) = null_rows
            .as_any()
            .downcast_ref::<arrow_array::BooleanArray>()
        else {
            return Out::fail(node, "internal error: null mask");
        };
        errs.merge(v.errs.restrict(null_rows));
        let next = if prev.is_scalar() && v.col.is_scalar() {
            // Both scalars: the first non-null one.
            if prev.array().is_null(0) {
                v.col
            } else {
                prev
            }
        } else {
            match arrow_select::zip::zip(null_rows, &v.col, &prev) {
                Ok(a) => Col::Array(a),
                Err(e) => return Out::fail(node, format!("internal error: {e}")),
            }
        };
        result = Some(next);
    }
    let col = result.unwrap_or_else(|| Col::Scalar(new_null_array(&node.arrow, 1)));
    Out { col, errs }
}

fn nullif(node: &Node, cols: &[Col], n: usize) -> Out {
    let (Some(a), Some(b)) = (cols.first(), cols.get(1)) else {
        return Out::fail(node, "nullif takes 2 arguments");
    };
    let (rows, scalar) = shape(&[a, b], n);
    let result = arrow_ord::cmp::eq(a, b).and_then(|eq| {
        let eq = Col::new(Arc::new(eq), scalar);
        let mask = super::eval::truthy_mask(&eq, rows);
        arrow_select::nullif::nullif(a.to_array(rows).as_ref(), &mask)
    });
    Out::from_kernel(node, result.map(|r| Col::new(r, scalar)))
}
