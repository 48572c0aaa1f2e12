//! Literal adaptation: the one place a value takes a type it was not written with.
//!
//! A numeric literal or `NULL` has no declared type, so the checker keeps it *pending* until it
//! meets a typed operand, parameter or expected type, and only then gives it that type — if the
//! value fits (integers by range, floats exactly, decimals only as floats). A pending literal that
//! meets nothing typed takes its default (`I64`, `F64`); a lone `NULL` is refused. Because only
//! literal leaves are rewritten, this never changes the type of a field read or a computed value,
//! which is what "no implicit casts" protects.

use nervix_nspl::Span;

use super::{DataType, FieldType, TypeError, TypedExpr, TypedKind, Value};

/// A checked subexpression: typed, or a literal still waiting for a type.
#[derive(Debug, Clone)]
pub(crate) enum Operand {
    Typed(TypedExpr),
    Pending { literal: Pending, span: Span },
}

/// An untyped literal value; integers are widened so `-9223372036854775808` and `u64::MAX`
/// both fit.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pending {
    Int(i128),
    Decimal(f64),
    Null,
}

impl Operand {
    pub(crate) fn span(&self) -> Span {
        match self {
            Operand::Typed(t) => t.span,
            Operand::Pending { span, .. } => *span,
        }
    }

    /// The value of a numeric literal, for parameters that must be constants.
    pub(crate) fn numeric_literal(&self) -> Option<f64> {
        match self {
            Operand::Pending {
                literal: Pending::Int(v),
                ..
            } => Some(*v as f64),
            Operand::Pending {
                literal: Pending::Decimal(v),
                ..
            } => Some(*v),
            _ => None,
        }
    }

    /// The value of an integer literal, for parameters that must be integer constants.
    pub(crate) fn integer_literal(&self) -> Option<i128> {
        match self {
            Operand::Pending {
                literal: Pending::Int(v),
                ..
            } => Some(*v),
            _ => None,
        }
    }
}

/// The type pending literals among `operands` should take: the first typed operand's type, else
/// `F64` if any is a decimal, else `I64` if any is an integer, else none (all `NULL`).
pub(crate) fn common_target<'a>(
    operands: impl IntoIterator<Item = &'a Operand>,
) -> Option<DataType> {
    let mut default = None;
    for operand in operands {
        match operand {
            Operand::Typed(t) => return Some(t.ty.data_type.clone()),
            Operand::Pending {
                literal: Pending::Decimal(_),
                ..
            } => default = Some(DataType::F64),
            Operand::Pending {
                literal: Pending::Int(_),
                ..
            } => {
                if default.is_none() {
                    default = Some(DataType::I64);
                }
            }
            Operand::Pending {
                literal: Pending::Null,
                ..
            } => {}
        }
    }
    default
}

/// Gives `operand` a type: a typed operand is returned unchanged (the caller compares types); a
/// pending literal takes `target` when it is a type the literal can be and the value fits,
/// otherwise its default type.
pub(crate) fn resolve(operand: Operand, target: Option<&DataType>) -> Result<TypedExpr, TypeError> {
    let (literal, span) = match operand {
        Operand::Typed(t) => return Ok(t),
        Operand::Pending { literal, span } => (literal, span),
    };
    let (data_type, value, nullable) = match literal {
        Pending::Null => match target {
            Some(t) => (t.clone(), Value::Null, true),
            None => {
                return Err(TypeError::new(
                    span,
                    "cannot infer the type of NULL here: write NULL AS <type>",
                ))
            }
        },
        Pending::Int(v) => {
            let ty = match target {
                Some(t) if t.is_numeric() => t.clone(),
                _ => DataType::I64,
            };
            (ty.clone(), integer_value(v, &ty, span)?, false)
        }
        Pending::Decimal(v) => {
            let ty = match target {
                Some(DataType::F32) => DataType::F32,
                _ => DataType::F64,
            };
            if ty == DataType::F32 && v.abs() > f64::from(f32::MAX) {
                return Err(TypeError::new(
                    span,
                    format!("decimal literal {v:?} does not fit F32"),
                ));
            }
            (ty, Value::Float(v), false)
        }
    };
    Ok(TypedExpr {
        kind: TypedKind::Literal(value),
        ty: FieldType {
            data_type,
            nullable,
            sensitive: false,
        },
        span,
    })
}

/// The value of integer literal `v` as numeric type `ty`, or why it does not fit.
fn integer_value(v: i128, ty: &DataType, span: Span) -> Result<Value, TypeError> {
    let range: Option<(i128, i128)> = match ty {
        DataType::U8 => Some((0, u8::MAX.into())),
        DataType::I8 => Some((i8::MIN.into(), i8::MAX.into())),
        DataType::U16 => Some((0, u16::MAX.into())),
        DataType::I16 => Some((i16::MIN.into(), i16::MAX.into())),
        DataType::U32 => Some((0, u32::MAX.into())),
        DataType::I32 => Some((i32::MIN.into(), i32::MAX.into())),
        DataType::U64 => Some((0, u64::MAX.into())),
        DataType::I64 => Some((i64::MIN.into(), i64::MAX.into())),
        _ => None,
    };
    if let Some((low, high)) = range {
        if v < low || v > high {
            return Err(TypeError::new(
                span,
                format!("integer literal {v} does not fit {ty} ({low} to {high})"),
            ));
        }
        return Ok(if ty.is_unsigned() {
            Value::UInt(u64::try_from(v).unwrap_or(u64::MAX))
        } else {
            Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
        });
    }
    // Floats: only values the float represents exactly (every integer up to its mantissa).
    let exact_bits = if *ty == DataType::F32 { 24 } else { 53 };
    if v.unsigned_abs() > 1u128 << exact_bits {
        return Err(TypeError::new(
            span,
            format!("integer literal {v} is not exactly representable as {ty}; write it as a decimal literal"),
        ));
    }
    Ok(Value::Float(v as f64))
}
