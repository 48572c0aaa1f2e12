//! Arithmetic (`+ - * / %`, unary `-`) and the numeric functions.
//!
//! Integers are checked: the Arrow checked kernel runs first over the whole batch (the common,
//! fast case); only when it reports an overflow or a zero divisor does a per-row pass recompute
//! the batch, so each failing row gets its own null and message ("division by zero",
//! "I64 overflow in +") and the others keep their values. Floats follow IEEE 754 (no errors).
//! The F64 functions convert their argument with Arrow's numeric cast, which is exact for every
//! integer up to 2^53 and rounds beyond, as any F64 computation would.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowPrimitiveType, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrowNativeTypeOp, Float64Array};
use arrow_schema::{ArrowError, DataType as Arrow};

use super::{build_prim, finish, shape, Ints};
use crate::types::{DataType, Function};
use crate::vm::compile::{Arith, Node};
use crate::vm::eval::{Col, Out};

macro_rules! int_dispatch {
    ($ty:expr, $f:ident ( $($arg:expr),* ), $other:expr) => {
        match $ty {
            DataType::I8 => $f::<Int8Type>($($arg),*),
            DataType::I16 => $f::<Int16Type>($($arg),*),
            DataType::I32 => $f::<Int32Type>($($arg),*),
            DataType::I64 => $f::<Int64Type>($($arg),*),
            DataType::U8 => $f::<UInt8Type>($($arg),*),
            DataType::U16 => $f::<UInt16Type>($($arg),*),
            DataType::U32 => $f::<UInt32Type>($($arg),*),
            DataType::U64 => $f::<UInt64Type>($($arg),*),
            _ => $other,
        }
    };
}

/// `l op r` for one numeric type.
pub(crate) fn arith(node: &Node, op: Arith, l: &Col, r: &Col) -> Out {
    let scalar = l.is_scalar() && r.is_scalar();
    let fast = match op {
        Arith::Add => arrow_arith::numeric::add(l, r),
        Arith::Sub => arrow_arith::numeric::sub(l, r),
        Arith::Mul => arrow_arith::numeric::mul(l, r),
        Arith::Div => arrow_arith::numeric::div(l, r),
        Arith::Rem => arrow_arith::numeric::rem(l, r),
    };
    match fast {
        Ok(a) => Out::ok(Col::new(a, scalar)),
        Err(ArrowError::DivideByZero) | Err(ArrowError::ArithmeticOverflow(_)) => {
            let rows = if scalar {
                1
            } else {
                l.array().len().max(r.array().len())
            };
            let name = node.ty.to_string();
            int_dispatch!(
                &node.ty,
                checked_rows(op, l, r, rows, &name, &node.arrow, scalar),
                Out::fail(node, "internal error: checked arithmetic on a non-integer")
            )
        }
        Err(e) => Out::fail(node, format!("internal error: {e}")),
    }
}

/// The per-row pass after the batch kernel failed: one error per failing row.
fn checked_rows<T: ArrowPrimitiveType>(
    op: Arith,
    l: &Col,
    r: &Col,
    rows: usize,
    name: &str,
    arrow: &Arrow,
    scalar: bool,
) -> Out
where
    T::Native: ArrowNativeTypeOp,
{
    let (Some(la), Some(ra)) = (
        l.array().as_primitive_opt::<T>(),
        r.array().as_primitive_opt::<T>(),
    ) else {
        return finish(arrow_array::new_null_array(arrow, rows), scalar, Vec::new());
    };
    let (array, errs) = build_prim::<T>(rows, arrow, |i| {
        let (li, ri) = (l.idx(i), r.idx(i));
        if la.is_null(li) || ra.is_null(ri) {
            return Ok(None);
        }
        let (a, b) = (la.value(li), ra.value(ri));
        let result = match op {
            Arith::Add => a.add_checked(b),
            Arith::Sub => a.sub_checked(b),
            Arith::Mul => a.mul_checked(b),
            Arith::Div if b.is_zero() => Err(ArrowError::DivideByZero),
            Arith::Div => a.div_checked(b),
            Arith::Rem if b.is_zero() => Err(ArrowError::DivideByZero),
            Arith::Rem => Ok(a.mod_wrapping(b)),
        };
        match result {
            Ok(v) => Ok(Some(v)),
            Err(ArrowError::DivideByZero) => Err("division by zero".to_string()),
            Err(_) => Err(format!("{name} overflow in {}", op.symbol())),
        }
    });
    finish(array, scalar, errs)
}

/// Unary `-` (signed integers checked, floats IEEE).
pub(crate) fn neg(node: &Node, c: &Col) -> Out {
    match arrow_arith::numeric::neg(c.array().as_ref()) {
        Ok(a) => Out::ok(Col::new(a, c.is_scalar())),
        Err(ArrowError::ArithmeticOverflow(_)) => {
            let name = node.ty.to_string();
            int_dispatch!(
                &node.ty,
                neg_rows(c, &name, &node.arrow),
                Out::fail(node, "internal error: checked negation on a non-integer")
            )
        }
        Err(e) => Out::fail(node, format!("internal error: {e}")),
    }
}

/// A checked unary integer operation over every row of `c`: `op` gives the row's result or
/// None on overflow, which fails that row as "`name` overflow in `what`"; nulls stay null.
fn checked_unary<T: ArrowPrimitiveType>(
    c: &Col,
    name: &str,
    arrow: &Arrow,
    what: &str,
    op: impl Fn(T::Native) -> Option<T::Native>,
) -> Out {
    let Some(a) = c.array().as_primitive_opt::<T>() else {
        return finish(
            arrow_array::new_null_array(arrow, c.array().len()),
            c.is_scalar(),
            Vec::new(),
        );
    };
    let (array, errs) = build_prim::<T>(a.len(), arrow, |i| {
        if a.is_null(i) {
            return Ok(None);
        }
        op(a.value(i))
            .map(Some)
            .ok_or_else(|| format!("{name} overflow in {what}"))
    });
    finish(array, c.is_scalar(), errs)
}

fn neg_rows<T: ArrowPrimitiveType>(c: &Col, name: &str, arrow: &Arrow) -> Out
where
    T::Native: ArrowNativeTypeOp,
{
    checked_unary::<T>(c, name, arrow, "unary -", |v| v.neg_checked().ok())
}

fn as_f64(c: &Col) -> Option<Float64Array> {
    arrow_cast::cast(c.array().as_ref(), &Arrow::Float64)
        .ok()
        .and_then(|a| a.as_primitive_opt::<Float64Type>().cloned())
}

fn f64_unary(node: &Node, c: &Col, f: impl Fn(f64) -> f64) -> Out {
    match as_f64(c) {
        Some(a) => Out::ok(Col::new(
            Arc::new(a.unary::<_, Float64Type>(f)),
            c.is_scalar(),
        )),
        None => Out::fail(node, "internal error: not numeric"),
    }
}

/// Round half away from zero to `digits` decimal places.
fn round_f64(x: f64, digits: i64) -> f64 {
    if digits == 0 {
        return x.round();
    }
    let d = digits.clamp(-400, 400) as i32;
    let scale = 10f64.powi(d.abs());
    if !scale.is_finite() {
        return if d > 0 { x } else { 0.0 * x };
    }
    if d > 0 {
        let r = (x * scale).round() / scale;
        if r.is_finite() {
            r
        } else {
            x
        }
    } else {
        (x / scale).round() * scale
    }
}

/// Integer round to `digits` (negative digits round to tens, hundreds…; half away from zero).
fn round_int<T: ArrowPrimitiveType>(
    c: &Col,
    digits: Option<&Ints>,
    rows: usize,
    scalar: bool,
    name: &str,
    arrow: &Arrow,
) -> Out
where
    T::Native: ArrowNativeTypeOp + Into<i128> + TryFrom<i128>,
{
    let Some(a) = c.array().as_primitive_opt::<T>() else {
        return finish(arrow_array::new_null_array(arrow, rows), scalar, Vec::new());
    };
    let (array, errs) = build_prim::<T>(rows, arrow, |i| {
        let j = c.idx(i);
        if a.is_null(j) {
            return Ok(None);
        }
        let d = match digits {
            None => 0,
            Some(d) => match d.get(i) {
                None => return Ok(None),
                Some(d) => d,
            },
        };
        let v: i128 = a.value(j).into();
        if d >= 0 {
            return Ok(Some(a.value(j)));
        }
        let Some(scale) = 10i128.checked_pow(u32::try_from(d.unsigned_abs()).unwrap_or(u32::MAX))
        else {
            return T::Native::try_from(0)
                .map(Some)
                .map_err(|_| format!("{name} overflow in round"));
        };
        let half = scale / 2;
        let rounded = if v >= 0 {
            (v + half) / scale * scale
        } else {
            -((-v + half) / scale * scale)
        };
        T::Native::try_from(rounded)
            .map(Some)
            .map_err(|_| format!("{name} overflow in round"))
    });
    finish(array, scalar, errs)
}

fn abs_int<T: ArrowPrimitiveType>(c: &Col, name: &str, arrow: &Arrow) -> Out
where
    T::Native: ArrowNativeTypeOp,
{
    checked_unary::<T>(c, name, arrow, "abs", |v| {
        if v >= T::Native::ZERO {
            Some(v)
        } else {
            v.neg_checked().ok()
        }
    })
}

/// The numeric functions.
pub(crate) fn call(node: &Node, function: Function, cols: &[Col], n: usize) -> Out {
    use Function as F;
    let Some(x) = cols.first() else {
        return Out::fail(node, "missing argument");
    };
    let name = node.ty.to_string();
    match function {
        F::Abs => match &node.ty {
            DataType::F32 => Out::ok(Col::new(
                Arc::new(
                    x.array()
                        .as_primitive::<Float32Type>()
                        .unary::<_, Float32Type>(f32::abs),
                ),
                x.is_scalar(),
            )),
            DataType::F64 => Out::ok(Col::new(
                Arc::new(
                    x.array()
                        .as_primitive::<Float64Type>()
                        .unary::<_, Float64Type>(f64::abs),
                ),
                x.is_scalar(),
            )),
            t if t.is_unsigned() => Out::ok(x.clone()),
            t => int_dispatch!(
                t,
                abs_int(x, &name, &node.arrow),
                Out::fail(node, "abs needs a number")
            ),
        },
        F::Ceil | F::Floor => {
            let up = function == F::Ceil;
            match &node.ty {
                DataType::F32 => Out::ok(Col::new(
                    Arc::new(
                        x.array()
                            .as_primitive::<Float32Type>()
                            .unary::<_, Float32Type>(|v| if up { v.ceil() } else { v.floor() }),
                    ),
                    x.is_scalar(),
                )),
                DataType::F64 => Out::ok(Col::new(
                    Arc::new(
                        x.array()
                            .as_primitive::<Float64Type>()
                            .unary::<_, Float64Type>(|v| if up { v.ceil() } else { v.floor() }),
                    ),
                    x.is_scalar(),
                )),
                _ => Out::ok(x.clone()),
            }
        }
        F::Round => {
            let digits = cols.get(1).map(Ints::new);
            let mut refs = vec![x];
            refs.extend(cols.get(1));
            let (rows, scalar) = shape(&refs, n);
            match &node.ty {
                DataType::F32 | DataType::F64 => {
                    let Some(a) = as_f64(x) else {
                        return Out::fail(node, "internal error: not numeric");
                    };
                    let (array, errs) = build_prim::<Float64Type>(rows, &Arrow::Float64, |i| {
                        let j = x.idx(i);
                        if a.is_null(j) {
                            return Ok(None);
                        }
                        let d = match &digits {
                            None => 0,
                            Some(d) => match d.get(i) {
                                None => return Ok(None),
                                Some(d) => d,
                            },
                        };
                        Ok(Some(round_f64(a.value(j), d)))
                    });
                    let array = if node.ty == DataType::F32 {
                        match arrow_cast::cast(array.as_ref(), &Arrow::Float32) {
                            Ok(a) => a,
                            Err(e) => return Out::fail(node, format!("internal error: {e}")),
                        }
                    } else {
                        array
                    };
                    finish(array, scalar, errs)
                }
                t => int_dispatch!(
                    t,
                    round_int(x, digits.as_ref(), rows, scalar, &name, &node.arrow),
                    Out::fail(node, "round needs a number")
                ),
            }
        }
        F::Sqrt => f64_unary(node, x, f64::sqrt),
        F::Exp => f64_unary(node, x, f64::exp),
        F::Ln => f64_unary(node, x, f64::ln),
        F::Sin => f64_unary(node, x, f64::sin),
        F::Cos => f64_unary(node, x, f64::cos),
        F::Tan => f64_unary(node, x, f64::tan),
        F::Log if cols.len() == 1 => f64_unary(node, x, f64::log10),
        F::Log | F::Pow => {
            let Some(y) = cols.get(1) else {
                return Out::fail(node, "missing argument");
            };
            let (Some(a), Some(b)) = (as_f64(x), as_f64(y)) else {
                return Out::fail(node, "internal error: not numeric");
            };
            let (rows, scalar) = shape(&[x, y], n);
            let log = function == F::Log;
            let (array, errs) = build_prim::<Float64Type>(rows, &Arrow::Float64, |i| {
                let (xi, yi) = (x.idx(i), y.idx(i));
                if a.is_null(xi) || b.is_null(yi) {
                    return Ok(None);
                }
                let (p, q) = (a.value(xi), b.value(yi));
                Ok(Some(if log { q.ln() / p.ln() } else { p.powf(q) }))
            });
            finish(array, scalar, errs)
        }
        F::Mod => match cols.get(1) {
            Some(y) => arith(node, Arith::Rem, x, y),
            None => Out::fail(node, "missing argument"),
        },
        _ => Out::fail(
            node,
            format!("{} is not a numeric function", function.name()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::round_f64;

    #[test]
    fn rounds_half_away_from_zero() {
        assert_eq!(round_f64(2.5, 0), 3.0);
        assert_eq!(round_f64(-2.5, 0), -3.0);
        assert_eq!(round_f64(1.2345, 2), 1.23);
        assert_eq!(round_f64(1250.0, -2), 1300.0);
        assert!(round_f64(f64::NAN, 2).is_nan());
        assert_eq!(round_f64(1e300, 400), 1e300);
    }
}
