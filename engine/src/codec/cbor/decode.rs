//! [`CborDecoder`]: payloads decoded in one pass straight into truncatable column builders.
//!
//! A payload is one map, an array of maps, or an RFC 8742 CBOR sequence of maps. Each record
//! is walked key by key; a declared key's value is decoded into its column at once (no value
//! tree), an undeclared key is refused (`MODE STRICT`) or skipped (`MODE LOOSE`), and when the
//! record closes, required wire fields must have been seen and unfed columns get a null. A
//! payload is atomic: on any error every column is truncated back to the rows it held before.

use std::sync::Arc;

use nervix_nspl::ast::catalog::{DocType, WireMode};

use crate::codec::decoding::{decode_atomically, push_end, push_float, push_integer, push_list};
use crate::codec::json::columns::{Column, Data};
use crate::codec::json::datetime::parse_rfc3339;

use super::error::{DecodeCause, DecodeError};
use super::reader::{fail, Fail, Head, Reader};
use super::CborCodecPlan;
use super::MAX_RECORDS_PER_PAYLOAD;
use crate::codec::document_decoder::DocumentDecoder;
use crate::codec::document_plan::{Cbor, Rule};

/// Nanoseconds per second, for tag 1 (epoch seconds).
const NANOS_PER_SECOND: f64 = 1e9;

fn mismatch(at: usize, expected: &'static str, found: Head) -> Fail {
    fail(
        at,
        DecodeCause::Mismatch {
            expected,
            found: found.kind(),
        },
    )
}

/// A WIRE CBOR codec's decoder, one per shard per ingestor.
pub type CborDecoder = DocumentDecoder<Cbor>;

impl CborDecoder {
    /// Decodes one payload: one map, an array of maps, or a CBOR sequence of maps. Atomic: on
    /// `Err` no row of this payload stays buffered. Returns the rows it added.
    pub fn decode_payload(&mut self, payload: &[u8]) -> Result<u32, DecodeError> {
        decode_atomically(
            self,
            |d| d.buffered.column_set(),
            |d, record| d.records(payload, record),
        )
    }

    /// Walks the payload's records; on error says whether it happened inside record `record`.
    fn records(&mut self, payload: &[u8], record: &mut u32) -> Result<(), (bool, Fail)> {
        let plan = Arc::clone(&self.plan);
        let plan = plan.as_ref();
        let mut r = Reader::new(payload);
        let outside = |f: Fail| (false, f);
        if r.at_end() {
            return Err(outside(fail(0, DecodeCause::Empty)));
        }
        match r.peek().map_err(outside)? {
            Head::Array(n) => {
                r.head().map_err(outside)?;
                let count = r.enter(n, 0, 0).map_err(outside)?;
                let mut done = 0;
                while r.more(count, done).map_err(outside)? {
                    self.record(plan, &mut r, *record, 1)
                        .map_err(|f| (true, f))?;
                    *record += 1;
                    done += 1;
                }
                if !r.at_end() {
                    return Err(outside(fail(r.pos, DecodeCause::Trailing)));
                }
            }
            _ => {
                while !r.at_end() {
                    self.record(plan, &mut r, *record, 0)
                        .map_err(|f| (true, f))?;
                    *record += 1;
                }
            }
        }
        Ok(())
    }

    /// Decodes record `index`, a map inside `depth` containers, into one row.
    fn record(
        &mut self,
        plan: &CborCodecPlan,
        r: &mut Reader<'_>,
        index: u32,
        depth: usize,
    ) -> Result<(), Fail> {
        if index as usize >= MAX_RECORDS_PER_PAYLOAD {
            return Err(fail(r.pos, DecodeCause::TooManyRecords));
        }
        let at = r.pos;
        let head = r.head()?;
        let Head::Map(n) = head else {
            return Err(mismatch(at, "map", head));
        };
        let count = r.enter(n, at, depth)?;
        let depth = depth + 1;
        self.buffered.begin_record();
        let mut guess = 0;
        let mut done = 0;
        while r.more(count, done)? {
            done += 1;
            let key_at = r.pos;
            let key = r.head()?;
            let Head::Text(len) = key else {
                return Err(mismatch(key_at, "text string key", key));
            };
            self.scratch.clear();
            r.string_into(true, len, key_at, &mut self.scratch)?;
            let slot = plan.lookup(&self.scratch, guess);
            let name = |scratch: &[u8]| Some(String::from_utf8_lossy(scratch).into_owned());
            if slot.is_none() && plan.mode == WireMode::Strict {
                return Err(Fail {
                    field: name(&self.scratch),
                    ..fail(key_at, DecodeCause::UndeclaredKey)
                });
            }
            let Some(w) = slot else {
                r.skip(depth).map_err(|e| Fail {
                    field: name(&self.scratch),
                    ..e
                })?;
                continue;
            };
            if !self.buffered.hold(w) {
                return Err(Fail {
                    field: name(&self.scratch),
                    ..fail(key_at, DecodeCause::DuplicateKey)
                });
            }
            self.field(plan, r, w, depth).map_err(|f| Fail {
                field: Some(plan.wire[w].name.clone()),
                ..f
            })?;
            guess = w + 1;
        }
        self.buffered.end_record(plan).map_err(|w| Fail {
            field: Some(plan.wire[w].name.clone()),
            ..fail(at, DecodeCause::Missing)
        })?;
        Ok(())
    }

    /// Decodes the value of wire field `w` at the cursor.
    fn field(
        &mut self,
        plan: &CborCodecPlan,
        r: &mut Reader<'_>,
        w: usize,
        depth: usize,
    ) -> Result<(), Fail> {
        let slot = &plan.wire[w];
        let at = r.pos;
        let head = r.peek()?;
        if head == Head::Null {
            r.head()?;
            if !self.buffered.push_null(slot) {
                return Err(fail(at, DecodeCause::Null));
            }
            return Ok(());
        }
        let Some(c) = slot.column else {
            return skip_typed(r, slot.ty, depth);
        };
        let column = self.buffered.column(c);
        match slot.rule {
            Rule::Skip => skip_typed(r, slot.ty, depth),
            Rule::Null => Err(mismatch(at, "null", head)),
            Rule::Text => {
                r.head()?;
                match head {
                    Head::Text(len) => push_string(r, column, true, len, at),
                    Head::Bytes(len) => push_string(r, column, false, len, at),
                    Head::Tag(t) => Err(fail(at, DecodeCause::Tag(t))),
                    _ => Err(mismatch(at, "string", head)),
                }
            }
            Rule::ObjectText => {
                if !matches!(head, Head::Map(_)) {
                    return Err(mismatch(at, "map", head));
                }
                push_json(r, column, depth, at)
            }
            Rule::Rfc3339 => {
                let nanos = datetime(r, &mut self.scratch)?;
                if let Data::Timestamp(values) = &mut column.data {
                    values.push(nanos);
                    column.valid.push(true);
                }
                Ok(())
            }
            Rule::Typed => typed(r, column, depth, slot.ty.word()),
        }
    }
}

/// A DATETIME from an RFC 3339 text string, that string under tag 0, or tag 1's epoch
/// seconds (an integer or a float), as UTC nanoseconds.
fn datetime(r: &mut Reader<'_>, scratch: &mut Vec<u8>) -> Result<i64, Fail> {
    let at = r.pos;
    let mut head = r.head()?;
    let mut tag = None;
    if let Head::Tag(t) = head {
        if t > 1 {
            return Err(fail(at, DecodeCause::Tag(t)));
        }
        tag = Some(t);
        head = r.head()?;
    }
    let range = |value: String| {
        fail(
            at,
            DecodeCause::Datetime(format!(
                "{value} is outside the DATETIME range (years 1677 to 2262)"
            )),
        )
    };
    match (tag, head) {
        (None | Some(0), Head::Text(len)) => {
            scratch.clear();
            r.string_into(true, len, at, scratch)?;
            parse_rfc3339(scratch).map_err(|e| fail(at, DecodeCause::Datetime(e)))
        }
        (Some(1), Head::Uint(s)) => i64::try_from(s)
            .ok()
            .and_then(|s| s.checked_mul(1_000_000_000))
            .ok_or_else(|| range(s.to_string())),
        (Some(1), Head::Nint(n)) => i64::try_from(n)
            .ok()
            .and_then(|n| (-1 - n).checked_mul(1_000_000_000))
            .ok_or_else(|| range(format!("-{}", i128::from(n) + 1))),
        (Some(1), Head::Float(s)) => {
            let nanos = (s * NANOS_PER_SECOND).round();
            // `i64::MAX as f64` rounds up to 2^63, itself out of range.
            if nanos.is_finite() && nanos >= i64::MIN as f64 && nanos < i64::MAX as f64 {
                Ok(nanos as i64)
            } else {
                Err(range(s.to_string()))
            }
        }
        (Some(0), found) => Err(mismatch(at, "text string under tag 0", found)),
        (Some(_), found) => Err(mismatch(at, "number under tag 1", found)),
        (None, found) => Err(mismatch(at, "string", found)),
    }
}

/// Checks that the value at the cursor is of wire type `ty` (or null), then skips it.
fn skip_typed(r: &mut Reader<'_>, ty: DocType, depth: usize) -> Result<(), Fail> {
    let at = r.pos;
    let head = r.peek()?;
    let fits = match (ty, head) {
        (_, Head::Null) => true,
        (_, Head::Tag(t)) => return Err(fail(at, DecodeCause::Tag(t))),
        (DocType::String, Head::Text(_) | Head::Bytes(_))
        | (DocType::Integer, Head::Uint(_) | Head::Nint(_))
        | (DocType::Number, Head::Uint(_) | Head::Nint(_) | Head::Float(_))
        | (DocType::Boolean, Head::Bool(_))
        | (DocType::Object, Head::Map(_))
        | (DocType::Array, Head::Array(_)) => true,
        _ => false,
    };
    if !fits {
        return Err(mismatch(at, ty.word(), head));
    }
    r.skip(depth)
}

/// A string-like value met a column of another type (the plan never lets this happen).
fn not_text(at: usize) -> Fail {
    fail(
        at,
        DecodeCause::Mismatch {
            expected: "a value of the column's type",
            found: "string",
        },
    )
}

/// Ends a row of a bytes column whose content was just appended.
fn end_bytes(column: &mut Column, at: usize) -> Result<(), Fail> {
    let Data::Bytes { offsets, bytes, .. } = &mut column.data else {
        return Err(not_text(at));
    };
    push_end(offsets, bytes.len(), "string").map_err(|e| fail(at, e.into()))?;
    column.valid.push(true);
    Ok(())
}

/// Appends the string whose head was just read as one row of a STRING or BYTES column; into
/// STRING a byte string must hold UTF-8.
fn push_string(
    r: &mut Reader<'_>,
    column: &mut Column,
    text: bool,
    len: Option<u64>,
    at: usize,
) -> Result<(), Fail> {
    let Data::Bytes { utf8, bytes, .. } = &mut column.data else {
        return Err(not_text(at));
    };
    let start = bytes.len();
    r.string_into(text, len, at, bytes)?;
    if *utf8 && !text && std::str::from_utf8(&bytes[start..]).is_err() {
        return Err(fail(at, DecodeCause::Utf8));
    }
    end_bytes(column, at)
}

/// Appends the map or array at the cursor, as JSON text, as one row of a STRING column.
fn push_json(r: &mut Reader<'_>, column: &mut Column, depth: usize, at: usize) -> Result<(), Fail> {
    let Data::Bytes { bytes, .. } = &mut column.data else {
        return Err(not_text(at));
    };
    r.json_into(depth, bytes)?;
    end_bytes(column, at)
}

/// Decodes the value at the cursor, inside `depth` containers, by the type of `column`
/// (integers, floats, BOOL, strings, and lists whose elements are decoded the same way, where
/// a STRING element may be a text string or a map's JSON text). `wire` names the expected wire
/// type.
fn typed(
    r: &mut Reader<'_>,
    column: &mut Column,
    depth: usize,
    wire: &'static str,
) -> Result<(), Fail> {
    let at = r.pos;
    let head = r.peek()?;
    if let Head::Tag(t) = head {
        return Err(fail(at, DecodeCause::Tag(t)));
    }
    let pushed = match &mut column.data {
        Data::F32(_) | Data::F64(_) => {
            let x = number(r, at)?;
            push_float(column, at, x)
        }
        Data::Bool(v) => {
            match r.head()? {
                Head::Bool(b) => v.push(b),
                found => return Err(mismatch(at, "boolean", found)),
            }
            column.valid.push(true);
            return Ok(());
        }
        Data::Bytes { utf8, .. } => {
            let utf8 = *utf8;
            r.head()?;
            return match head {
                Head::Text(len) => push_string(r, column, true, len, at),
                Head::Bytes(len) => push_string(r, column, false, len, at),
                Head::Map(_) if utf8 => {
                    r.pos = at;
                    push_json(r, column, depth, at)
                }
                _ => Err(mismatch(at, "string", head)),
            };
        }
        Data::Timestamp(_) => None,
        Data::List { .. } | Data::Fixed { .. } => push_list(column, at, |child, max| {
            elements(r, child, depth, wire, max)
        }),
        // Every other column holds integers.
        _ => {
            let value = match r.head()? {
                Head::Uint(n) => i128::from(n),
                Head::Nint(n) => -1 - i128::from(n),
                found => return Err(mismatch(at, "integer", found)),
            };
            push_integer(column, at, value)
        }
    };
    pushed.unwrap_or_else(|| Err(mismatch(at, "nothing CBOR can hold", head)))
}

/// An integer or float at the cursor, as `f64`.
fn number(r: &mut Reader<'_>, at: usize) -> Result<f64, Fail> {
    match r.head()? {
        Head::Uint(n) => Ok(n as f64),
        Head::Nint(n) => Ok(-1.0 - n as f64),
        Head::Float(x) => Ok(x),
        found => Err(mismatch(at, "number", found)),
    }
}

/// Decodes the array at the cursor into `child`, one row per element (null elements are null
/// rows); past `max` elements the rest are only checked. Returns the element count.
fn elements(
    r: &mut Reader<'_>,
    child: &mut Column,
    depth: usize,
    wire: &'static str,
    max: usize,
) -> Result<usize, Fail> {
    let at = r.pos;
    let head = r.head()?;
    let Head::Array(n) = head else {
        return Err(mismatch(at, wire, head));
    };
    let count = r.enter(n, at, depth)?;
    let depth = depth + 1;
    let mut done = 0;
    while r.more(count, done)? {
        if done >= max {
            r.skip(depth)?;
        } else if r.peek()? == Head::Null {
            r.head()?;
            child.push_null();
        } else {
            typed(r, child, depth, "array")?;
        }
        done += 1;
    }
    Ok(done)
}
