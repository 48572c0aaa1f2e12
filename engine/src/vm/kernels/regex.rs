//! The regex functions, over patterns compiled once at compile time.
//!
//! Correct because the pattern and flags are literals prepared by the compiler (a bad pattern
//! never reaches evaluation), and each function is one call of the `regex` crate per row —
//! Arrow's regexp kernels compile their pattern per call, so with a prepared `Regex` a row loop
//! is the cheapest. The `regex` crate guarantees linear-time matching, so no input can make a
//! row take unbounded time. Replacement strings use the `regex` crate's syntax (`$1`, `${name}`).

use std::sync::Arc;

use super::{build_bools, build_strings, finish, shape, Strs};
use crate::types::Function;
use crate::vm::compile::{Node, Prepared};
use crate::vm::eval::{Col, Out};
use crate::vm::kernels::strings::MAX_STRING_BYTES;

pub(crate) fn call(
    node: &Node,
    function: Function,
    cols: &[Col],
    prepared: &Prepared,
    n: usize,
) -> Out {
    let Some(input) = cols.first() else {
        return Out::fail(node, "missing argument");
    };
    let s = Strs::new(input);
    match (function, prepared) {
        (Function::RegexpLike, Prepared::Regex { re, .. }) => {
            let (rows, scalar) = shape(&[input], n);
            let (array, errs) = build_bools(rows, |i| Ok(s.get(i).map(|v| re.is_match(v))));
            finish(array, scalar, errs)
        }
        (Function::RegexpSubstr, Prepared::Regex { re, .. }) => {
            let (rows, scalar) = shape(&[input], n);
            let (array, errs) = build_strings(rows, |i, buf| {
                let Some(m) = s.get(i).and_then(|v| re.find(v)) else {
                    return Ok(false);
                };
                buf.push_str(m.as_str());
                Ok(true)
            });
            finish(array, scalar, errs)
        }
        (Function::RegexpExtract, Prepared::RegexGroup { re, group }) => {
            let (rows, scalar) = shape(&[input], n);
            let (array, errs) = build_strings(rows, |i, buf| {
                let Some(m) = s
                    .get(i)
                    .and_then(|v| re.captures(v))
                    .and_then(|c| c.get(*group))
                else {
                    return Ok(false);
                };
                buf.push_str(m.as_str());
                Ok(true)
            });
            finish(array, scalar, errs)
        }
        (Function::RegexpReplace, Prepared::Regex { re, global }) => {
            let Some(replacement) = cols.get(2) else {
                return Out::fail(node, "missing argument");
            };
            let (rows, scalar) = shape(&[input, replacement], n);
            let r = Strs::new(replacement);
            let (array, errs) = build_strings(rows, |i, buf| {
                let (Some(v), Some(rep)) = (s.get(i), r.get(i)) else {
                    return Ok(false);
                };
                let limit = if *global { 0 } else { 1 };
                let out = re.replacen(v, limit, rep);
                if out.len() > MAX_STRING_BYTES {
                    return Err(format!(
                        "regexp_replace result exceeds {} MiB",
                        MAX_STRING_BYTES >> 20
                    ));
                }
                buf.push_str(&out);
                Ok(true)
            });
            finish(array, scalar, errs)
        }
        _ => Out::fail(
            node,
            Arc::<str>::from(format!("{} was not prepared", function.name())),
        ),
    }
}
