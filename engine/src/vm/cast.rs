//! `AS T` and `TRY_CAST(x AS T)`.
//!
//! Correct because each legal conversion (types::check's `castable`) has one rule: identity
//! for same-type casts; `STRING → DATETIME` parses RFC 3339 and `DATETIME → STRING` formats
//! RFC 3339 with `Z` (chrono, per row — Arrow's timestamp parser accepts more than RFC 3339);
//! `STRING → BOOL` accepts `true`/`false` in any case; everything else is Arrow's cast
//! (numeric ranges checked, float → integer truncates toward zero, invalid UTF-8 refused).
//! A value that does not convert is a row error "cannot cast '<value>' to <T>" for `AS`
//! (SENSITIVE values are quoted as `<masked>`) and a null for `TRY_CAST`. Arrow's strict cast
//! runs first; only when it fails is the lenient cast compared with the input to find the
//! failing rows.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampNanosecondType;
use arrow_array::{Array, ArrayRef};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_cast::CastOptions;
use chrono::{DateTime, SecondsFormat};

use super::compile::Node;
use super::eval::{Col, Out};
use super::kernels::datetime::to_datetime;
use super::kernels::{build_bools, build_prim, build_strings, finish, RowErrs, Strs};
use crate::types::DataType;

/// The longest value text quoted in a cast error.
const MAX_QUOTED: usize = 64;

fn quoted(source: &Node, array: &dyn Array, i: usize) -> String {
    if source.sensitive {
        return "<masked>".to_string();
    }
    let text = ArrayFormatter::try_new(array, &FormatOptions::default())
        .map(|f| f.value(i).to_string())
        .unwrap_or_default();
    if text.chars().count() > MAX_QUOTED {
        let cut: String = text.chars().take(MAX_QUOTED).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// Parses an RFC 3339 instant into nanoseconds since the epoch.
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s.trim())
        .ok()?
        .timestamp_nanos_opt()
}

pub(crate) fn cast(node: &Node, source: &Node, c: &Col, try_cast: bool) -> Out {
    if source.ty == node.ty {
        return Out::ok(c.clone());
    }
    let array = c.array();
    let rows = array.len();
    let scalar = c.is_scalar();
    let target = node.ty.to_string();
    let fail = |i: usize| -> Result<Option<i64>, String> {
        if try_cast {
            Ok(None)
        } else {
            Err(format!(
                "cannot cast '{}' to {target}",
                quoted(source, array.as_ref(), i)
            ))
        }
    };
    match (&source.ty, &node.ty) {
        (DataType::String, DataType::Datetime) => {
            let s = Strs::new(c);
            let (out, errs) =
                build_prim::<TimestampNanosecondType>(rows, &node.arrow, |i| match s.get(i) {
                    None => Ok(None),
                    Some(v) => match parse_rfc3339(v) {
                        Some(ns) => Ok(Some(ns)),
                        None => fail(i),
                    },
                });
            finish(out, scalar, errs)
        }
        (DataType::Datetime, DataType::String) => {
            let Some(t) = array.as_primitive_opt::<TimestampNanosecondType>() else {
                return Out::fail(node, "internal error: not DATETIME");
            };
            let (out, errs) = build_strings(rows, |i, buf| {
                if t.is_null(i) {
                    return Ok(false);
                }
                buf.push_str(&to_datetime(t.value(i)).to_rfc3339_opts(SecondsFormat::AutoSi, true));
                Ok(true)
            });
            finish(out, scalar, errs)
        }
        (DataType::String, DataType::Bool) => {
            let s = Strs::new(c);
            let (out, errs) = build_bools(rows, |i| match s.get(i) {
                None => Ok(None),
                Some(v) if v.trim().eq_ignore_ascii_case("true") => Ok(Some(true)),
                Some(v) if v.trim().eq_ignore_ascii_case("false") => Ok(Some(false)),
                Some(_) => fail(i).map(|_| None),
            });
            finish(out, scalar, errs)
        }
        (DataType::F64, DataType::F32) => {
            let Some(a) = array.as_primitive_opt::<arrow_array::types::Float64Type>() else {
                return Out::fail(node, "internal error: not F64");
            };
            // A finite F64 beyond F32's range is a failed cast, not an infinity.
            let (out, errs) =
                build_prim::<arrow_array::types::Float32Type>(rows, &node.arrow, |i| {
                    if a.is_null(i) {
                        return Ok(None);
                    }
                    let v = a.value(i);
                    let narrowed = v as f32;
                    if v.is_finite() && !narrowed.is_finite() {
                        return fail(i).map(|_| None);
                    }
                    Ok(Some(narrowed))
                });
            finish(out, scalar, errs)
        }
        _ => arrow_cast_rows(node, source, array, scalar, try_cast),
    }
}

fn arrow_cast_rows(
    node: &Node,
    source: &Node,
    array: &ArrayRef,
    scalar: bool,
    try_cast: bool,
) -> Out {
    let strict = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    if !try_cast {
        if let Ok(out) = arrow_cast::cast_with_options(array.as_ref(), &node.arrow, &strict) {
            return Out::ok(Col::new(out, scalar));
        }
    }
    let lenient =
        match arrow_cast::cast_with_options(array.as_ref(), &node.arrow, &CastOptions::default()) {
            Ok(out) => out,
            Err(e) => {
                return Out::fail(
                    node,
                    format!("cannot cast {} to {}: {e}", source.ty, node.ty),
                )
            }
        };
    if try_cast {
        return Out::ok(Col::new(lenient, scalar));
    }
    let target = node.ty.to_string();
    let errs: RowErrs = (0..array.len())
        .filter(|&i| array.is_valid(i) && lenient.is_null(i))
        .map(|i| {
            (
                i as u32,
                Arc::from(format!(
                    "cannot cast '{}' to {target}",
                    quoted(source, array.as_ref(), i)
                )),
            )
        })
        .collect();
    finish(lenient, scalar, errs)
}

#[cfg(test)]
mod tests {
    use super::parse_rfc3339;

    #[test]
    fn rfc3339_only() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:01Z"), Some(1_000_000_000));
        assert_eq!(parse_rfc3339("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_rfc3339("1970-01-01"), None);
        assert_eq!(parse_rfc3339("9999999-01-01T00:00:00Z"), None);
    }
}
