//! String functions and `||`.
//!
//! Strings are UTF-8 and every position, length and count is in characters (Unicode scalar
//! values), never bytes, so no kernel can split a character. `contains`, `starts_with` and
//! `ends_with` are Arrow's `like` kernels (`contains` with a literal needle searches the
//! whole values buffer at once, [`super::substring`]); `upper`/`lower` transform the values
//! buffer byte-wise when it is ASCII (one pass, offsets and nulls reused, no second UTF-8
//! check) and fall back to Unicode case mapping per row otherwise. Other
//! functions have no Arrow kernel and run one allocation-free pass per row into a builder.
//! Results larger than [`MAX_STRING_BYTES`] are row errors, so `repeat`/`lpad` cannot exhaust
//! memory.

use std::fmt::Write as _;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, StringArray};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::ArrowError;
use md5::{Digest, Md5};

use super::{build_prim, build_strings, finish, shape, Ints, Strs};
use crate::types::Function;
use crate::vm::compile::Node;
use crate::vm::eval::{Col, Out};

/// The largest string a function may build (16 MiB).
pub(crate) const MAX_STRING_BYTES: usize = 16 << 20;

fn too_large(name: &str) -> String {
    format!("{name} result exceeds {} MiB", MAX_STRING_BYTES >> 20)
}

/// `a || b`; null when either is null.
pub(crate) fn concat_op(a: &Col, b: &Col, n: usize) -> Result<Col, ArrowError> {
    let (rows, scalar) = shape(&[a, b], n);
    let (x, y) = (a.to_array(rows), b.to_array(rows));
    let (Some(x), Some(y)) = (x.as_string_opt::<i32>(), y.as_string_opt::<i32>()) else {
        return Err(ArrowError::InvalidArgumentError("|| needs STRING".into()));
    };
    let total = x.value_data().len().saturating_add(y.value_data().len());
    if total > i32::MAX as usize {
        return Err(ArrowError::ComputeError("|| result too large".into()));
    }
    let out = arrow_string::concat_elements::concat_elements_utf8(x, y)?;
    Ok(Col::new(Arc::new(out), scalar))
}

/// ASCII case mapping over the whole values buffer, reusing nulls and (rebased) offsets;
/// `None` when the strings are not all ASCII.
fn ascii_case(a: &StringArray, upper: bool) -> Option<StringArray> {
    let offsets = a.value_offsets();
    let (start, end) = (
        usize::try_from(*offsets.first()?).ok()?,
        usize::try_from(*offsets.last()?).ok()?,
    );
    let bytes = a.value_data().get(start..end)?;
    if !bytes.is_ascii() {
        return None;
    }
    let mapped: Vec<u8> = if upper {
        bytes.iter().map(u8::to_ascii_uppercase).collect()
    } else {
        bytes.iter().map(u8::to_ascii_lowercase).collect()
    };
    let new_offsets = if start == 0 {
        a.offsets().clone()
    } else {
        let base = offsets[0];
        OffsetBuffer::new(ScalarBuffer::from(
            offsets.iter().map(|o| o - base).collect::<Vec<i32>>(),
        ))
    };
    let values = Buffer::from(mapped);
    debug_assert!(
        StringArray::try_new(new_offsets.clone(), values.clone(), a.nulls().cloned()).is_ok()
    );
    // SAFETY: `a` is a valid array, so its (rebased) offsets fit `values`, which has the same
    // length as its values; `values` is ASCII mapped to ASCII, so every offset is a character
    // boundary of valid UTF-8. (`try_new` would re-validate all of it: a pass over the bytes
    // the case mapping has just proved.)
    #[allow(unsafe_code)]
    let mapped = unsafe { StringArray::new_unchecked(new_offsets, values, a.nulls().cloned()) };
    Some(mapped)
}

fn case_map(c: &Col, upper: bool) -> Out {
    let Some(a) = c.array().as_string_opt::<i32>() else {
        return finish(
            arrow_array::new_null_array(&arrow_schema::DataType::Utf8, 1),
            true,
            vec![(0, Arc::from("internal error: not STRING"))],
        );
    };
    if let Some(mapped) = ascii_case(a, upper) {
        return Out::ok(Col::new(Arc::new(mapped), c.is_scalar()));
    }
    // Unicode case mapping has no Arrow kernel; one pass per row.
    let s = Strs::new(c);
    let (array, errs) = build_strings(a.len(), |i, buf| {
        let Some(v) = s.get(i) else { return Ok(false) };
        if upper {
            buf.extend(v.chars().flat_map(char::to_uppercase));
        } else {
            buf.extend(v.chars().flat_map(char::to_lowercase));
        }
        Ok(true)
    });
    finish(array, c.is_scalar(), errs)
}

/// The first `count` characters' byte length in `s` (all of `s` when shorter).
fn char_prefix_len(s: &str, count: usize) -> usize {
    s.char_indices().nth(count).map_or(s.len(), |(i, _)| i)
}

/// Characters `start..start+count` (0-based, clamped) of `s`.
fn char_slice(s: &str, start: usize, count: Option<usize>) -> &str {
    let from = char_prefix_len(s, start);
    let rest = &s[from..];
    match count {
        Some(c) => &rest[..char_prefix_len(rest, c)],
        None => rest,
    }
}

fn trim_with<'s>(s: &'s str, set: Option<&str>, left: bool, right: bool) -> &'s str {
    let in_set = |c: char| match set {
        Some(set) => set.contains(c),
        None => c.is_whitespace(),
    };
    let mut out = s;
    if left {
        out = out.trim_start_matches(in_set);
    }
    if right {
        out = out.trim_end_matches(in_set);
    }
    out
}

fn pad(s: &str, len: i64, fill: &str, left: bool, buf: &mut String) -> Result<bool, String> {
    let len = usize::try_from(len.max(0)).unwrap_or(usize::MAX);
    let have = s.chars().count();
    if have >= len || fill.is_empty() {
        buf.push_str(&s[..char_prefix_len(s, len)]);
        return Ok(true);
    }
    let missing = len - have;
    if missing
        .saturating_mul(fill.len().max(1))
        .saturating_add(s.len())
        > MAX_STRING_BYTES
    {
        return Err(too_large(if left { "lpad" } else { "rpad" }));
    }
    if !left {
        buf.push_str(s);
    }
    buf.extend(fill.chars().cycle().take(missing));
    if left {
        buf.push_str(s);
    }
    Ok(true)
}

fn initcap(s: &str, buf: &mut String) {
    let mut start = true;
    for c in s.chars() {
        if c.is_alphanumeric() {
            if start {
                buf.extend(c.to_uppercase());
            } else {
                buf.extend(c.to_lowercase());
            }
            start = false;
        } else {
            buf.push(c);
            start = true;
        }
    }
}

fn split_part<'s>(s: &'s str, delimiter: &str, index: i64) -> Result<&'s str, String> {
    if index == 0 {
        return Err("split_part index must not be 0".to_string());
    }
    if delimiter.is_empty() {
        return Ok(if index == 1 || index == -1 { s } else { "" });
    }
    let part = if index > 0 {
        s.split(delimiter)
            .nth(usize::try_from(index - 1).unwrap_or(usize::MAX))
    } else {
        s.rsplit(delimiter)
            .nth(usize::try_from(-(index + 1)).unwrap_or(usize::MAX))
    };
    Ok(part.unwrap_or(""))
}

/// A `like`-family kernel with two STRING datums.
fn predicate(
    node: &Node,
    a: &Col,
    b: &Col,
    f: fn(
        &dyn arrow_array::Datum,
        &dyn arrow_array::Datum,
    ) -> Result<arrow_array::BooleanArray, ArrowError>,
) -> Out {
    let scalar = a.is_scalar() && b.is_scalar();
    Out::from_kernel(node, f(a, b).map(|r| Col::new(Arc::new(r), scalar)))
}

/// The string functions (and `to_hex`).
pub(crate) fn call(node: &Node, function: Function, cols: &[Col], n: usize) -> Out {
    use Function as F;
    let refs: Vec<&Col> = cols.iter().collect();
    let (rows, scalar) = shape(&refs, n);
    let Some(first) = cols.first() else {
        return Out::fail(node, "missing argument");
    };
    let s0 = Strs::new(first);
    let str_at = |k: usize| cols.get(k).map(Strs::new);
    let int_at = |k: usize| cols.get(k).map(Ints::new);
    macro_rules! strings {
        ($f:expr) => {{
            let (array, errs) = build_strings(rows, $f);
            finish(array, scalar, errs)
        }};
    }
    let arg = |k: usize| cols.get(k);
    match function {
        F::Lower => case_map(first, false),
        F::Upper => case_map(first, true),
        F::Initcap => strings!(|i, buf| {
            let Some(s) = s0.get(i) else { return Ok(false) };
            initcap(s, buf);
            Ok(true)
        }),
        F::Reverse => strings!(|i, buf| {
            let Some(s) = s0.get(i) else { return Ok(false) };
            buf.extend(s.chars().rev());
            Ok(true)
        }),
        F::Md5 => strings!(|i, buf| {
            let Some(s) = s0.get(i) else { return Ok(false) };
            for byte in Md5::digest(s.as_bytes()) {
                let _ = write!(buf, "{byte:02x}");
            }
            Ok(true)
        }),
        F::Trim | F::Btrim | F::Ltrim | F::Rtrim => {
            let set = str_at(1);
            let (left, right) = match function {
                F::Ltrim => (true, false),
                F::Rtrim => (false, true),
                _ => (true, true),
            };
            strings!(|i, buf| {
                let Some(s) = s0.get(i) else { return Ok(false) };
                let chars = match &set {
                    None => None,
                    Some(set) => match set.get(i) {
                        None => return Ok(false),
                        Some(c) => Some(c),
                    },
                };
                buf.push_str(trim_with(s, chars, left, right));
                Ok(true)
            })
        }
        F::Length | F::CharLength => {
            let (array, errs) =
                build_prim::<arrow_array::types::Int64Type>(rows, &node.arrow, |i| {
                    Ok(s0.get(i).map(|s| s.chars().count() as i64))
                });
            finish(array, scalar, errs)
        }
        F::Concat => {
            let parts: Vec<Strs> = cols.iter().map(Strs::new).collect();
            strings!(|i, buf| {
                for p in &parts {
                    if let Some(s) = p.get(i) {
                        if buf.len() + s.len() > MAX_STRING_BYTES {
                            return Err(too_large("concat"));
                        }
                        buf.push_str(s);
                    }
                }
                Ok(true)
            })
        }
        F::Substr => {
            let (start, count) = (int_at(1), int_at(2));
            strings!(|i, buf| {
                let Some(s) = s0.get(i) else { return Ok(false) };
                let Some(start) = start.as_ref().and_then(|a| a.get(i)) else {
                    return Ok(false);
                };
                let count = match &count {
                    None => None,
                    Some(c) => match c.get(i) {
                        None => return Ok(false),
                        Some(c) if c < 0 => return Err("negative substr count".to_string()),
                        Some(c) => Some(c),
                    },
                };
                // 1-based start; positions before 1 consume count without yielding.
                let begin = start.max(1);
                let count = count.map(|c| {
                    let end = start.saturating_add(c);
                    usize::try_from(end.saturating_sub(begin).max(0)).unwrap_or(usize::MAX)
                });
                let begin = usize::try_from(begin - 1).unwrap_or(usize::MAX);
                buf.push_str(char_slice(s, begin, count));
                Ok(true)
            })
        }
        F::Left | F::Right => {
            let count = int_at(1);
            let left = function == F::Left;
            strings!(|i, buf| {
                let Some(s) = s0.get(i) else { return Ok(false) };
                let Some(k) = count.as_ref().and_then(|c| c.get(i)) else {
                    return Ok(false);
                };
                let total = s.chars().count();
                let keep = if k >= 0 {
                    usize::try_from(k).unwrap_or(usize::MAX).min(total)
                } else {
                    total.saturating_sub(usize::try_from(k.unsigned_abs()).unwrap_or(usize::MAX))
                };
                if left {
                    buf.push_str(char_slice(s, 0, Some(keep)));
                } else {
                    buf.push_str(char_slice(s, total - keep, None));
                }
                Ok(true)
            })
        }
        F::Lpad | F::Rpad => {
            let (len, fill) = (int_at(1), str_at(2));
            let left = function == F::Lpad;
            strings!(|i, buf| {
                let Some(s) = s0.get(i) else { return Ok(false) };
                let Some(len) = len.as_ref().and_then(|c| c.get(i)) else {
                    return Ok(false);
                };
                let fill = match &fill {
                    None => " ",
                    Some(f) => match f.get(i) {
                        None => return Ok(false),
                        Some(f) => f,
                    },
                };
                pad(s, len, fill, left, buf)
            })
        }
        F::Replace => {
            let (from, to) = (str_at(1), str_at(2));
            strings!(|i, buf| {
                let (Some(s), Some(from), Some(to)) = (
                    s0.get(i),
                    from.as_ref().and_then(|a| a.get(i)),
                    to.as_ref().and_then(|a| a.get(i)),
                ) else {
                    return Ok(false);
                };
                if from.is_empty() {
                    buf.push_str(s);
                    return Ok(true);
                }
                let hits = s.matches(from).count();
                if s.len().saturating_add(hits.saturating_mul(to.len())) > MAX_STRING_BYTES {
                    return Err(too_large("replace"));
                }
                let mut last = 0;
                for (at, _) in s.match_indices(from) {
                    buf.push_str(&s[last..at]);
                    buf.push_str(to);
                    last = at + from.len();
                }
                buf.push_str(&s[last..]);
                Ok(true)
            })
        }
        F::Repeat => {
            let count = int_at(1);
            strings!(|i, buf| {
                let Some(s) = s0.get(i) else { return Ok(false) };
                let Some(k) = count.as_ref().and_then(|c| c.get(i)) else {
                    return Ok(false);
                };
                let k = usize::try_from(k.max(0)).unwrap_or(usize::MAX);
                if s.len().saturating_mul(k) > MAX_STRING_BYTES {
                    return Err(too_large("repeat"));
                }
                for _ in 0..k {
                    buf.push_str(s);
                }
                Ok(true)
            })
        }
        F::SplitPart => {
            let (delimiter, index) = (str_at(1), int_at(2));
            strings!(|i, buf| {
                let (Some(s), Some(d), Some(k)) = (
                    s0.get(i),
                    delimiter.as_ref().and_then(|a| a.get(i)),
                    index.as_ref().and_then(|a| a.get(i)),
                ) else {
                    return Ok(false);
                };
                buf.push_str(split_part(s, d, k)?);
                Ok(true)
            })
        }
        F::Strpos => {
            let needle = str_at(1);
            let (array, errs) =
                build_prim::<arrow_array::types::Int64Type>(rows, &node.arrow, |i| {
                    let (Some(s), Some(t)) = (s0.get(i), needle.as_ref().and_then(|a| a.get(i)))
                    else {
                        return Ok(None);
                    };
                    Ok(Some(match s.find(t) {
                        Some(at) => s[..at].chars().count() as i64 + 1,
                        None => 0,
                    }))
                });
            finish(array, scalar, errs)
        }
        F::StartsWith | F::EndsWith | F::Contains => {
            let Some(b) = arg(1) else {
                return Out::fail(node, "missing argument");
            };
            if function == F::Contains {
                if let Some(result) = super::substring::contains_scalar(first, b) {
                    return Out::ok(Col::new(Arc::new(result), false));
                }
            }
            let f = match function {
                F::StartsWith => arrow_string::like::starts_with,
                F::EndsWith => arrow_string::like::ends_with,
                _ => arrow_string::like::contains,
            };
            predicate(node, first, b, f)
        }
        F::ToHex => to_hex(node, first, rows, scalar),
        _ => Out::fail(
            node,
            format!("{} is not a string function", function.name()),
        ),
    }
}

fn to_hex(node: &Node, c: &Col, rows: usize, scalar: bool) -> Out {
    let a: &ArrayRef = c.array();
    macro_rules! ints {
        ($t:ty) => {{
            let p = a.as_primitive::<$t>();
            let (array, errs) = build_strings(rows, |i, buf| {
                let j = c.idx(i);
                if p.is_null(j) {
                    return Ok(false);
                }
                let _ = write!(buf, "{:x}", p.value(j));
                Ok(true)
            });
            finish(array, scalar, errs)
        }};
    }
    use arrow_array::types::*;
    match a.data_type() {
        arrow_schema::DataType::Int8 => ints!(Int8Type),
        arrow_schema::DataType::Int16 => ints!(Int16Type),
        arrow_schema::DataType::Int32 => ints!(Int32Type),
        arrow_schema::DataType::Int64 => ints!(Int64Type),
        arrow_schema::DataType::UInt8 => ints!(UInt8Type),
        arrow_schema::DataType::UInt16 => ints!(UInt16Type),
        arrow_schema::DataType::UInt32 => ints!(UInt32Type),
        arrow_schema::DataType::UInt64 => ints!(UInt64Type),
        arrow_schema::DataType::Binary => {
            let b = a.as_binary::<i32>();
            let (array, errs) = build_strings(rows, |i, buf| {
                let j = c.idx(i);
                if b.is_null(j) {
                    return Ok(false);
                }
                let bytes = b.value(j);
                if bytes.len().saturating_mul(2) > MAX_STRING_BYTES {
                    return Err(too_large("to_hex"));
                }
                for byte in bytes {
                    let _ = write!(buf, "{byte:02x}");
                }
                Ok(true)
            });
            finish(array, scalar, errs)
        }
        _ => Out::fail(node, "to_hex needs an integer or BYTES"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_case_rebases_sliced_offsets() {
        let a = StringArray::from(vec![Some("ab"), None, Some("cD"), Some("e")]);
        let sliced = a.slice(2, 2);
        let up = ascii_case(&sliced, true).expect("ascii");
        assert_eq!(up.value(0), "CD");
        assert_eq!(up.value(1), "E");
        assert_eq!(up.len(), 2);
    }

    #[test]
    fn non_ascii_is_not_fast_pathed() {
        let a = StringArray::from(vec!["é"]);
        assert!(ascii_case(&a, true).is_none());
    }

    #[test]
    fn split_part_and_slices() {
        assert_eq!(split_part("a,b,c", ",", 2), Ok("b"));
        assert_eq!(split_part("a,b,c", ",", -1), Ok("c"));
        assert_eq!(split_part("a,b,c", ",", 9), Ok(""));
        assert!(split_part("a", ",", 0).is_err());
        assert_eq!(char_slice("héllo", 1, Some(3)), "éll");
        assert_eq!(char_slice("hé", 5, Some(3)), "");
    }
}
