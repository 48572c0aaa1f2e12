//! [`JsonDecoder`]: payloads decoded in one pass straight into truncatable column builders.
//!
//! A payload is one object, a JSON array of objects, or NDJSON (objects separated by
//! whitespace, usually newlines). Each record is walked key by key with the scanner; a
//! declared key's value is decoded into its column at once (no value tree), an undeclared key
//! is refused (`MODE STRICT`) or skipped (`MODE LOOSE`), and when the record closes, required
//! wire fields must have been seen and unfed columns get a null. A payload is atomic: on any
//! error every column is truncated back to the rows it held before the payload.
//!
//! The hot path allocates nothing per row: keys are found by [`JsonCodecPlan::lookup`],
//! duplicate keys by a per-field record stamp, escaped keys are decoded into one reused scratch
//! buffer and strings straight into their column's bytes.

use std::fmt;
use std::sync::Arc;

use nervix_nspl::ast::catalog::{DocType, WireMode};

use super::columns::{Column, Data};
use super::datetime::parse_rfc3339;
use super::error::{DecodeCause, DecodeError, ScanError, SyntaxError};
use super::scanner::{kind_of, unescape_into, Scanner};
use super::JsonCodecPlan;
use super::{MAX_JSON_DEPTH, MAX_RECORDS_PER_PAYLOAD};
use crate::codec::decoding::{
    self, decode_atomically, fail, push_end, push_integer, push_list, DecodedInteger,
};
use crate::codec::document_decoder::DocumentDecoder;
use crate::codec::document_plan::{Json, Rule};
use crate::types::DataType as T;

/// A decoding failure before its record and position are attached.
type Fail = decoding::Fail<DecodeCause>;

impl From<ScanError> for Fail {
    fn from(e: ScanError) -> Fail {
        fail(e.offset, DecodeCause::Syntax(e.error))
    }
}

/// `expected` is not at `offset`: a type mismatch when a JSON value starts there, else a
/// syntax error.
fn mismatch(offset: usize, expected: &'static str, found: Option<u8>) -> Fail {
    let cause = match found {
        None => DecodeCause::Syntax(SyntaxError::End),
        Some(b'"' | b'{' | b'[' | b't' | b'f' | b'n' | b'-' | b'0'..=b'9') => {
            DecodeCause::Mismatch {
                expected,
                found: kind_of(found),
            }
        }
        Some(b) => DecodeCause::Syntax(SyntaxError::Unexpected(b)),
    };
    fail(offset, cause)
}

/// A WIRE JSON codec's decoder, one per shard per ingestor.
pub type JsonDecoder = DocumentDecoder<Json>;

impl JsonDecoder {
    /// Decodes one payload: one object, a JSON array of objects, or NDJSON (objects separated
    /// by newlines / whitespace). Atomic: on `Err` no row of this payload stays buffered.
    /// Returns the rows it added.
    pub fn decode_payload(&mut self, payload: &[u8]) -> Result<u32, DecodeError> {
        decode_atomically(
            self,
            |d| d.buffered.column_set(),
            |d, record| d.records(payload, record),
        )
        .map_err(|placed| DecodeError::located(payload, placed))
    }

    /// Walks the payload's records; on error says whether it happened inside record `record`.
    fn records(&mut self, payload: &[u8], record: &mut u32) -> Result<(), (bool, Fail)> {
        let plan = Arc::clone(&self.plan);
        let plan = plan.as_ref();
        let mut s = Scanner::new(payload);
        let outside = |e: ScanError| (false, Fail::from(e));
        s.skip_ws();
        match s.peek() {
            None => return Err((false, fail(s.pos, DecodeCause::Empty))),
            Some(b'[') => {
                s.pos += 1;
                s.skip_ws();
                if s.peek() == Some(b']') {
                    s.pos += 1;
                } else {
                    loop {
                        self.record(plan, &mut s, *record, 1)
                            .map_err(|f| (true, f))?;
                        *record += 1;
                        s.skip_ws();
                        match s.peek() {
                            Some(b',') => {
                                s.pos += 1;
                                s.skip_ws();
                            }
                            Some(b']') => {
                                s.pos += 1;
                                break;
                            }
                            _ => return Err(outside(s.unexpected(s.pos))),
                        }
                    }
                }
                s.skip_ws();
                if s.pos < payload.len() {
                    return Err(outside(ScanError {
                        offset: s.pos,
                        error: SyntaxError::Trailing,
                    }));
                }
            }
            Some(_) => loop {
                self.record(plan, &mut s, *record, 0)
                    .map_err(|f| (true, f))?;
                *record += 1;
                let end = s.pos;
                s.skip_ws();
                if s.pos == payload.len() {
                    break;
                }
                if s.pos == end {
                    // NDJSON records are separated by whitespace.
                    return Err(outside(s.unexpected(s.pos)));
                }
            },
        }
        Ok(())
    }

    /// Decodes record `index`, an object inside `depth` containers, into one row.
    fn record(
        &mut self,
        plan: &JsonCodecPlan,
        s: &mut Scanner<'_>,
        index: u32,
        depth: usize,
    ) -> Result<(), Fail> {
        if index as usize >= MAX_RECORDS_PER_PAYLOAD {
            return Err(fail(s.pos, DecodeCause::TooManyRecords));
        }
        if s.peek() != Some(b'{') {
            return Err(mismatch(s.pos, "object", s.peek()));
        }
        s.pos += 1;
        let depth = depth + 1;
        self.buffered.begin_record();
        let mut guess = 0;
        s.skip_ws();
        if s.peek() == Some(b'}') {
            s.pos += 1;
        } else {
            loop {
                let key_at = s.pos;
                if s.peek() != Some(b'"') {
                    return Err(s.unexpected(s.pos).into());
                }
                let (raw, escaped) = s.string()?;
                let key = if escaped {
                    self.scratch.clear();
                    unescape_into(raw, &mut self.scratch);
                    self.scratch.as_slice()
                } else {
                    raw
                };
                let slot = plan.lookup(key, guess);
                let name = || String::from_utf8_lossy(key).into_owned();
                if slot.is_none() && plan.mode == WireMode::Strict {
                    return Err(Fail {
                        field: Some(name()),
                        ..fail(key_at, DecodeCause::UndeclaredKey)
                    });
                }
                if let Some(w) = slot {
                    if !self.buffered.hold(w) {
                        return Err(Fail {
                            field: Some(name()),
                            ..fail(key_at, DecodeCause::DuplicateKey)
                        });
                    }
                }
                s.skip_ws();
                s.expect(b':')?;
                s.skip_ws();
                match slot {
                    None => s.skip_value(depth).map_err(|e| Fail {
                        field: Some(name()),
                        ..e.into()
                    })?,
                    Some(w) => {
                        self.field(plan, s, w, depth).map_err(|f| Fail {
                            field: Some(plan.wire[w].name.clone()),
                            ..f
                        })?;
                        guess = w + 1;
                    }
                }
                s.skip_ws();
                match s.peek() {
                    Some(b',') => {
                        s.pos += 1;
                        s.skip_ws();
                    }
                    Some(b'}') => {
                        s.pos += 1;
                        break;
                    }
                    _ => return Err(s.unexpected(s.pos).into()),
                }
            }
        }
        self.buffered.end_record(plan).map_err(|w| Fail {
            field: Some(plan.wire[w].name.clone()),
            ..fail(s.pos - 1, DecodeCause::Missing)
        })?;
        Ok(())
    }

    /// Decodes the value of wire field `w` at the cursor.
    fn field(
        &mut self,
        plan: &JsonCodecPlan,
        s: &mut Scanner<'_>,
        w: usize,
        depth: usize,
    ) -> Result<(), Fail> {
        let slot = &plan.wire[w];
        let at = s.pos;
        if s.peek() == Some(b'n') {
            s.literal(b"null")?;
            if !self.buffered.push_null(slot) {
                return Err(fail(at, DecodeCause::Null));
            }
            return Ok(());
        }
        let Some(c) = slot.column else {
            return skip_typed(s, slot.ty, depth);
        };
        let column = self.buffered.column(c);
        match slot.rule {
            Rule::Skip => skip_typed(s, slot.ty, depth),
            Rule::Null => Err(mismatch(at, "null", s.peek())),
            Rule::Text => {
                if s.peek() != Some(b'"') {
                    return Err(mismatch(at, "string", s.peek()));
                }
                let (raw, escaped) = s.string()?;
                push_bytes(column, raw, escaped, at)
            }
            Rule::ObjectText => {
                if s.peek() != Some(b'{') {
                    return Err(mismatch(at, "object", s.peek()));
                }
                s.skip_value(depth)?;
                push_bytes(column, &s.bytes[at..s.pos], false, at)
            }
            Rule::Rfc3339 => {
                if s.peek() != Some(b'"') {
                    return Err(mismatch(at, "string", s.peek()));
                }
                let (raw, escaped) = s.string()?;
                let text = if escaped {
                    self.scratch.clear();
                    unescape_into(raw, &mut self.scratch);
                    self.scratch.as_slice()
                } else {
                    raw
                };
                let nanos = parse_rfc3339(text).map_err(|e| fail(at, DecodeCause::Datetime(e)))?;
                if let Data::Timestamp(values) = &mut column.data {
                    values.push(nanos);
                    column.valid.push(true);
                }
                Ok(())
            }
            Rule::Typed => typed(s, column, depth, slot.ty.word()),
        }
    }
}

/// Checks that the value at the cursor is of wire type `ty` (or null), then skips it.
fn skip_typed(s: &mut Scanner<'_>, ty: DocType, depth: usize) -> Result<(), Fail> {
    let at = s.pos;
    let found = s.peek();
    let fits = match (ty, found) {
        (_, Some(b'n')) => true,
        (DocType::Integer, Some(b'-' | b'0'..=b'9')) => {
            let (_, integer) = s.number()?;
            if !integer {
                return Err(mismatch(at, "integer", found));
            }
            return Ok(());
        }
        (DocType::String, Some(b'"'))
        | (DocType::Number, Some(b'-' | b'0'..=b'9'))
        | (DocType::Boolean, Some(b't' | b'f'))
        | (DocType::Object, Some(b'{'))
        | (DocType::Array, Some(b'[')) => true,
        _ => false,
    };
    if !fits {
        return Err(mismatch(at, ty.word(), found));
    }
    Ok(s.skip_value(depth)?)
}

/// Appends a string (raw content, unescaped here when `escaped`) as one row of a STRING
/// column.
fn push_bytes(column: &mut Column, raw: &[u8], escaped: bool, at: usize) -> Result<(), Fail> {
    let Data::Bytes { offsets, bytes, .. } = &mut column.data else {
        return Err(mismatch(at, "bytes", Some(b'"')));
    };
    if escaped {
        unescape_into(raw, bytes);
    } else {
        bytes.extend_from_slice(raw);
    }
    push_end(offsets, bytes.len(), "string").map_err(|e| fail(at, e.into()))?;
    column.valid.push(true);
    Ok(())
}

/// Decodes the value at the cursor, inside `depth` containers, by the type of `column`
/// (integers, floats, BOOL, and lists whose elements are decoded the same way, where a STRING
/// element may be a JSON string or an object's text). `wire` names the expected wire type.
fn typed(
    s: &mut Scanner<'_>,
    column: &mut Column,
    depth: usize,
    wire: &'static str,
) -> Result<(), Fail> {
    let at = s.pos;
    let found = s.peek();
    let unfit = || Err(mismatch(at, "nothing JSON can hold", found));
    match &mut column.data {
        Data::F32(v) => {
            let text = number(s, at)?;
            match text.parse::<f32>() {
                Ok(x) if x.is_finite() => v.push(x),
                _ => return Err(out_of_range(at, text, T::F32)),
            }
        }
        Data::F64(v) => {
            let text = number(s, at)?;
            match text.parse::<f64>() {
                Ok(x) if x.is_finite() => v.push(x),
                _ => return Err(out_of_range(at, text, T::F64)),
            }
        }
        Data::Bool(v) => match found {
            Some(b't') => {
                s.literal(b"true")?;
                v.push(true);
            }
            Some(b'f') => {
                s.literal(b"false")?;
                v.push(false);
            }
            _ => return Err(mismatch(at, "boolean", found)),
        },
        Data::Bytes { utf8: true, .. } => {
            return match found {
                Some(b'"') => {
                    let (raw, escaped) = s.string()?;
                    push_bytes(column, raw, escaped, at)
                }
                Some(b'{') => {
                    s.skip_value(depth)?;
                    push_bytes(column, &s.bytes[at..s.pos], false, at)
                }
                _ => Err(mismatch(at, "string", found)),
            };
        }
        Data::Bytes { utf8: false, .. } | Data::Timestamp(_) => return unfit(),
        Data::List { .. } | Data::Fixed { .. } => {
            return push_list(column, at, |child, max| {
                elements(s, child, depth, wire, max)
            })
            .unwrap_or_else(unfit);
        }
        // Every other column holds integers.
        _ => {
            let integer = integer(s, at)?;
            return push_integer(column, at, integer).unwrap_or_else(unfit);
        }
    }
    column.valid.push(true);
    Ok(())
}

/// Decodes the array at the cursor into `child`, one row per element (null elements are null
/// rows); past `max` elements the rest are only counted. Returns the element count.
fn elements(
    s: &mut Scanner<'_>,
    child: &mut Column,
    depth: usize,
    wire: &'static str,
    max: usize,
) -> Result<usize, Fail> {
    if s.peek() != Some(b'[') {
        return Err(mismatch(s.pos, wire, s.peek()));
    }
    if depth + 1 > MAX_JSON_DEPTH {
        return Err(fail(s.pos, DecodeCause::Syntax(SyntaxError::TooDeep)));
    }
    s.pos += 1;
    let depth = depth + 1;
    s.skip_ws();
    let mut count = 0;
    if s.peek() == Some(b']') {
        s.pos += 1;
        return Ok(0);
    }
    loop {
        if count >= max {
            s.skip_value(depth)?;
        } else if s.peek() == Some(b'n') {
            s.literal(b"null")?;
            child.push_null();
        } else {
            typed(s, child, depth, "array")?;
        }
        count += 1;
        s.skip_ws();
        match s.peek() {
            Some(b',') => {
                s.pos += 1;
                s.skip_ws();
            }
            Some(b']') => {
                s.pos += 1;
                return Ok(count);
            }
            _ => return Err(s.unexpected(s.pos).into()),
        }
    }
}

/// An integer as JSON writes it: a number without fraction or exponent, shown as written.
#[derive(Clone, Copy)]
struct JsonInteger<'a> {
    text: &'a [u8],
    /// `None` for a magnitude beyond `u64`, which fits no integer column.
    value: Option<i128>,
}

impl fmt::Display for JsonInteger<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.text))
    }
}

impl DecodedInteger for JsonInteger<'_> {
    fn value(self) -> Option<i128> {
        self.value
    }
}

/// The integer at the cursor, its value as an `i128` so every target range check is one
/// `try_from`.
fn integer<'a>(s: &mut Scanner<'a>, at: usize) -> Result<JsonInteger<'a>, Fail> {
    let found = s.peek();
    if !matches!(found, Some(b'-' | b'0'..=b'9')) {
        return Err(mismatch(at, "integer", found));
    }
    let (text, is_integer) = s.number()?;
    if !is_integer {
        return Err(mismatch(at, "integer", found));
    }
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let mut magnitude: u64 = 0;
    for &d in digits {
        magnitude = match magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(d - b'0')))
        {
            Some(m) => m,
            None => return Ok(JsonInteger { text, value: None }),
        };
    }
    let value = i128::from(magnitude);
    Ok(JsonInteger {
        text,
        value: Some(if negative { -value } else { value }),
    })
}

/// The number at the cursor, as text for `parse`.
fn number<'a>(s: &mut Scanner<'a>, at: usize) -> Result<&'a str, Fail> {
    let found = s.peek();
    if !matches!(found, Some(b'-' | b'0'..=b'9')) {
        return Err(mismatch(at, "number", found));
    }
    let (text, _) = s.number()?;
    // The grammar admits only ASCII, so this never fails.
    std::str::from_utf8(text).map_err(|_| fail(at, DecodeCause::Syntax(SyntaxError::Number)))
}

fn out_of_range(at: usize, text: &str, target: T) -> Fail {
    fail(
        at,
        DecodeCause::OutOfRange {
            value: text.to_string(),
            target,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DataType, FieldType};
    use crate::validate::route::Field;
    use nervix_nspl::ast::catalog::CatalogStmt;
    use nervix_nspl::Statement;

    fn decoder() -> JsonDecoder {
        let script = nervix_nspl::parse_script(
            "CREATE WIRE JSON SCHEMA w MODE STRICT (a integer, b string OPTIONAL);
             CREATE CODEC c FROM WIRE JSON SCHEMA w TO SCHEMA s;",
        );
        let mut statements = script.statements.into_iter().map(|s| s.statement);
        let Some(Statement::Catalog(CatalogStmt::CreateWireSchema(wire))) = statements.next()
        else {
            panic!("wire schema")
        };
        let Some(Statement::Catalog(CatalogStmt::CreateCodec(codec))) = statements.next() else {
            panic!("codec")
        };
        let fields = [
            Field {
                name: "a".into(),
                ty: FieldType::required(DataType::U8),
            },
            Field {
                name: "b".into(),
                ty: FieldType::optional(DataType::String),
            },
        ];
        let plan = JsonCodecPlan::build(&codec, &wire, &fields).expect("plan");
        JsonDecoder::new(Arc::new(plan))
    }

    #[test]
    fn duplicate_detection_survives_stamp_wrap() {
        let mut d = decoder();
        // As if the previous record (stamp MAX - 1) held every key.
        d.buffered.wind_stamp_to(u32::MAX - 1);
        assert_eq!(d.decode_payload(b"{\"a\":1} {\"b\":\"x\",\"a\":2}"), Ok(2));
        assert_eq!(d.buffered.stamp(), 1);
        let err = d.decode_payload(b"{\"a\":1,\"a\":2}").unwrap_err();
        assert_eq!(err.cause, DecodeCause::DuplicateKey);
        assert_eq!(d.decode_payload(b"{\"a\":3}"), Ok(1));
        assert_eq!(d.finish().num_rows(), 3);
    }

    #[test]
    fn a_failed_payload_leaves_no_partial_row() {
        let mut d = decoder();
        assert_eq!(d.decode_payload(b"{\"b\":\"kept\",\"a\":1}"), Ok(1));
        // Field `b` of the second record is buffered before `a` fails.
        let err = d
            .decode_payload(b"{\"b\":\"x\",\"a\":1}\n{\"b\":\"partial\",\"a\":300}")
            .unwrap_err();
        assert_eq!(err.record, Some(1));
        assert_eq!(err.field.as_deref(), Some("a"));
        assert_eq!((err.line, err.column), (2, 20));
        for column in d.buffered.columns() {
            assert_eq!(column.len(), 1);
        }
        let batch = d.finish();
        assert_eq!(batch.num_rows(), 1);
        let b = batch.column(1);
        assert_eq!(b.to_data().buffers()[1].len(), "kept".len());
    }
}
