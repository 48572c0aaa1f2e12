//! `JSON_VALUE(doc, '$.path' AS T)`: a small JSONPath subset over serde_json.
//!
//! Supported steps: `$` (the root), `.name`, `['name']` / `["name"]`, `[index]` (0-based,
//! arrays only). The path is parsed once at compile time; a path outside the subset is a
//! compile error. Per row the document is parsed (no Arrow kernel parses JSON into scalars by
//! path), the path walked, and the value converted: numbers to numeric types when exactly
//! representable (integers in range; F32/F64 from any number), `BOOL` from booleans, `STRING`
//! from strings (numbers and booleans as their JSON text), `DATETIME` from RFC 3339 strings.
//! An invalid document, a missing step or a value that does not convert is null — never an
//! error, as the checker documents `JSON_VALUE` as always nullable.

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, StringBuilder};
use arrow_array::types::*;
use arrow_array::ArrayRef;
use serde_json::Value as Json;

use super::cast::parse_rfc3339;
use super::compile::Node;
use super::eval::{Col, Out};
use super::kernels::{build_prim, finish, Strs};
use crate::types::DataType;

/// One step of a JSONPath.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PathStep {
    Key(String),
    Index(usize),
}

/// Parses `$`, `.name`, `['name']`, `["name"]`, `[index]`.
pub(crate) fn parse_path(path: &str) -> Result<Vec<PathStep>, String> {
    let bad = |why: &str| format!("unsupported JSON_VALUE path '{path}': {why}");
    let rest = path
        .strip_prefix('$')
        .ok_or_else(|| bad("must start with $"))?;
    let chars: Vec<char> = rest.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                    end += 1;
                }
                if end == start {
                    return Err(bad("empty name after ."));
                }
                steps.push(PathStep::Key(chars[start..end].iter().collect()));
                i = end;
            }
            '[' => {
                let close = chars[i..]
                    .iter()
                    .position(|c| *c == ']')
                    .map(|p| p + i)
                    .ok_or_else(|| bad("unclosed ["))?;
                let inner: String = chars[i + 1..close].iter().collect();
                let inner = inner.trim();
                let quoted = (inner.starts_with('\'') && inner.ends_with('\''))
                    || (inner.starts_with('"') && inner.ends_with('"'));
                if quoted && inner.len() >= 2 {
                    steps.push(PathStep::Key(inner[1..inner.len() - 1].to_string()));
                } else {
                    let index = inner
                        .parse::<usize>()
                        .map_err(|_| bad("[…] holds a quoted name or an index ≥ 0"))?;
                    steps.push(PathStep::Index(index));
                }
                i = close + 1;
            }
            _ => return Err(bad("expected . or [")),
        }
    }
    Ok(steps)
}

fn walk<'j>(mut v: &'j Json, path: &[PathStep]) -> Option<&'j Json> {
    for step in path {
        v = match (step, v) {
            (PathStep::Key(k), Json::Object(map)) => map.get(k)?,
            (PathStep::Index(i), Json::Array(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

fn int_of<T: TryFrom<i64> + TryFrom<u64>>(v: &Json) -> Option<T> {
    let n = v.as_number()?;
    if let Some(i) = n.as_i64() {
        return T::try_from(i).ok();
    }
    if let Some(u) = n.as_u64() {
        return T::try_from(u).ok();
    }
    None
}

pub(crate) fn json_value(node: &Node, doc: &Col, path: &[PathStep]) -> Out {
    let rows = doc.array().len();
    let scalar = doc.is_scalar();
    let docs = Strs::new(doc);
    // Parsing each row's document is inherently per row.
    let mut values = (0..rows).map(|i| {
        docs.get(i)
            .and_then(|text| serde_json::from_str::<Json>(text).ok())
    });
    let mut value_at = |_: usize| values.next().flatten();
    macro_rules! ints {
        ($t:ty) => {{
            let (a, e) = build_prim::<$t>(rows, &node.arrow, |i| {
                Ok(value_at(i)
                    .as_ref()
                    .and_then(|j| walk(j, path))
                    .and_then(int_of))
            });
            finish(a, scalar, e)
        }};
    }
    match &node.ty {
        DataType::I8 => ints!(Int8Type),
        DataType::I16 => ints!(Int16Type),
        DataType::I32 => ints!(Int32Type),
        DataType::I64 => ints!(Int64Type),
        DataType::U8 => ints!(UInt8Type),
        DataType::U16 => ints!(UInt16Type),
        DataType::U32 => ints!(UInt32Type),
        DataType::U64 => ints!(UInt64Type),
        DataType::F64 => {
            let (a, e) = build_prim::<Float64Type>(rows, &node.arrow, |i| {
                Ok(value_at(i)
                    .as_ref()
                    .and_then(|j| walk(j, path))
                    .and_then(Json::as_f64))
            });
            finish(a, scalar, e)
        }
        DataType::F32 => {
            let (a, e) = build_prim::<Float32Type>(rows, &node.arrow, |i| {
                Ok(value_at(i)
                    .as_ref()
                    .and_then(|j| walk(j, path))
                    .and_then(Json::as_f64)
                    .map(|f| f as f32))
            });
            finish(a, scalar, e)
        }
        DataType::Datetime => {
            let (a, e) = build_prim::<TimestampNanosecondType>(rows, &node.arrow, |i| {
                Ok(value_at(i)
                    .as_ref()
                    .and_then(|j| walk(j, path))
                    .and_then(Json::as_str)
                    .and_then(parse_rfc3339))
            });
            finish(a, scalar, e)
        }
        DataType::Bool => {
            let mut b = BooleanBuilder::with_capacity(rows);
            for i in 0..rows {
                b.append_option(
                    value_at(i)
                        .as_ref()
                        .and_then(|j| walk(j, path))
                        .and_then(Json::as_bool),
                );
            }
            finish(Arc::new(b.finish()) as ArrayRef, scalar, Vec::new())
        }
        DataType::String => {
            let mut b = StringBuilder::with_capacity(rows, rows.saturating_mul(8));
            for i in 0..rows {
                let v = value_at(i);
                match v.as_ref().and_then(|j| walk(j, path)) {
                    Some(Json::String(s)) => b.append_value(s),
                    Some(j @ (Json::Number(_) | Json::Bool(_))) => b.append_value(j.to_string()),
                    _ => b.append_null(),
                }
            }
            finish(Arc::new(b.finish()) as ArrayRef, scalar, Vec::new())
        }
        other => Out::fail(node, format!("JSON_VALUE cannot read {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(parse_path("$"), Ok(vec![]));
        assert_eq!(
            parse_path("$.a['b c'][2]"),
            Ok(vec![
                PathStep::Key("a".into()),
                PathStep::Key("b c".into()),
                PathStep::Index(2)
            ])
        );
        assert!(parse_path("$..a").is_err());
        assert!(parse_path("$[x]").is_err());
        assert!(parse_path("$[").is_err());
        assert!(parse_path("a").is_err());
    }
}
