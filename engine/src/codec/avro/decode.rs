//! [`AvroDecoder`]: payloads decoded in one pass straight into truncatable column builders.
//!
//! The payload's framing is told apart by its first bytes (see the module docs of
//! [`super`]): `Obj` 0x01 is an object container file, `C3 01` a single-object encoding, and
//! anything else bare datums back to back. Each datum is read field by field in the wire
//! schema's order; a field feeding a column is decoded into it at once (no value tree), the
//! others are read and dropped. A payload is atomic: on any error every column is truncated
//! back to the rows it held before the payload.

use std::sync::Arc;

use arrow_array::RecordBatch;
use nervix_nspl::ast::catalog::AvroType;

use crate::codec::decoding::{decode_atomically, push_end, push_float, push_integer, push_list};
use crate::codec::json::columns::{Column, ColumnSet, Data};
use crate::codec::json::datetime::parse_rfc3339;

use super::container::{self, Codec};
use super::error::{DecodeCause, DecodeError};
use super::plan::{AvroCodecPlan, Rule, WireSlot};
use super::reader::{fail, Fail, Reader};
use super::{MAX_AVRO_BLOCK_BYTES, MAX_RECORDS_PER_PAYLOAD};

/// The magic of an object container file.
pub(crate) const CONTAINER_MAGIC: &[u8; 4] = b"Obj\x01";
/// The marker of a single-object encoding, followed by an 8-byte schema fingerprint.
pub(crate) const SINGLE_OBJECT_MARKER: [u8; 2] = [0xC3, 0x01];
const FINGERPRINT_BYTES: usize = 8;

/// One decoder per shard per ingestor: owns the reusable builders.
#[derive(Debug)]
pub struct AvroDecoder {
    plan: Arc<AvroCodecPlan>,
    buffered: ColumnSet,
}

impl AvroDecoder {
    pub fn new(plan: Arc<AvroCodecPlan>) -> AvroDecoder {
        AvroDecoder {
            buffered: ColumnSet::new(plan.columns.iter().map(|(ty, _)| ty)),
            plan,
        }
    }

    /// Decodes one payload: an object container file, a single-object encoding, or bare
    /// datums back to back. Atomic: on `Err` no row of this payload stays buffered. Returns
    /// the rows it added.
    pub fn decode_payload(&mut self, payload: &[u8]) -> Result<u32, DecodeError> {
        decode_atomically(
            self,
            |d| &mut d.buffered,
            |d, record| d.payload(payload, record),
        )
    }

    /// Rows decoded since the last [`AvroDecoder::finish`].
    pub fn buffered_rows(&self) -> usize {
        self.buffered.rows()
    }

    /// The buffered rows as one `RecordBatch` in `plan.schema()`; the builders are reused.
    pub fn finish(&mut self) -> RecordBatch {
        self.buffered.finish(self.plan.schema())
    }

    /// Decodes the payload's records; on error says whether it happened inside record
    /// `record`.
    fn payload(&mut self, payload: &[u8], record: &mut u32) -> Result<(), (bool, Fail)> {
        let plan = Arc::clone(&self.plan);
        let plan = plan.as_ref();
        let outside = |f: Fail| (false, f);
        if payload.is_empty() {
            return Err(outside(fail(0, DecodeCause::Empty)));
        }
        if payload.starts_with(b"Obj") {
            return self.container(plan, payload, record);
        }
        let mut r = Reader::new(payload);
        if payload.starts_with(&SINGLE_OBJECT_MARKER) {
            r.take(SINGLE_OBJECT_MARKER.len() + FINGERPRINT_BYTES)
                .map_err(outside)?;
            self.datum(plan, &mut r, *record).map_err(|f| (true, f))?;
            *record += 1;
            if r.left() > 0 {
                return Err(outside(fail(r.pos, DecodeCause::Trailing(r.left()))));
            }
            return Ok(());
        }
        while r.left() > 0 {
            let start = r.pos;
            self.datum(plan, &mut r, *record).map_err(|f| (true, f))?;
            *record += 1;
            if r.pos == start {
                // A datum of only `null` fields takes no bytes: the rest cannot be datums.
                return Err(outside(fail(r.pos, DecodeCause::Trailing(r.left()))));
            }
        }
        Ok(())
    }

    /// Decodes an object container file's blocks.
    fn container(
        &mut self,
        plan: &AvroCodecPlan,
        payload: &[u8],
        record: &mut u32,
    ) -> Result<(), (bool, Fail)> {
        let outside = |f: Fail| (false, f);
        let mut r = Reader::new(payload);
        let header = container::header(&mut r, plan).map_err(outside)?;
        while let Some(block) = container::block(&mut r, &header).map_err(outside)? {
            let inflated;
            let mut data = match header.codec {
                // Offsets stay the payload's: the reader sees the payload up to the block's end.
                Codec::Null => Reader {
                    bytes: &payload[..block.end],
                    pos: block.start,
                },
                Codec::Deflate => {
                    inflated = miniz_oxide::inflate::decompress_to_vec_with_limit(
                        &payload[block.start..block.end],
                        MAX_AVRO_BLOCK_BYTES,
                    )
                    .map_err(|e| outside(fail(block.start, DecodeCause::Inflate(e.to_string()))))?;
                    Reader::new(&inflated)
                }
            };
            let at = |f: Fail| match header.codec {
                Codec::Null => f,
                Codec::Deflate => Fail {
                    offset: block.start,
                    ..f
                },
            };
            for _ in 0..block.count {
                self.datum(plan, &mut data, *record)
                    .map_err(|f| (true, at(f)))?;
                *record += 1;
            }
            if data.left() > 0 {
                return Err(outside(at(fail(
                    data.pos,
                    DecodeCause::Container(format!(
                        "{} bytes after the block's {} records",
                        data.left(),
                        block.count
                    )),
                ))));
            }
        }
        Ok(())
    }

    /// Decodes record `index`, one datum of the wire schema, into one row.
    fn datum(&mut self, plan: &AvroCodecPlan, r: &mut Reader<'_>, index: u32) -> Result<(), Fail> {
        if index as usize >= MAX_RECORDS_PER_PAYLOAD {
            return Err(fail(r.pos, DecodeCause::TooManyRecords));
        }
        for slot in &plan.wire {
            let named = |f: Fail| Fail {
                field: Some(slot.name.clone()),
                ..f
            };
            match slot.column {
                None => r.skip(&slot.ty, slot.optional).map_err(named)?,
                Some(c) => field(r, slot, self.buffered.column(c)).map_err(named)?,
            }
        }
        self.buffered.end_row(|c| plan.columns[c].1.is_some());
        Ok(())
    }
}

/// Decodes the value of wire field `slot` into `column`.
fn field(r: &mut Reader<'_>, slot: &WireSlot, column: &mut Column) -> Result<(), Fail> {
    if slot.optional && !r.present()? {
        column.push_null();
        return Ok(());
    }
    match slot.rule {
        Rule::Skip => r.skip(&slot.ty, false),
        Rule::Rfc3339 => {
            let at = r.pos;
            let text = r.string()?;
            let nanos = parse_rfc3339(text).map_err(|e| fail(at, DecodeCause::Datetime(e)))?;
            let Data::Timestamp(values) = &mut column.data else {
                return unfit(at, "a datetime");
            };
            values.push(nanos);
            column.valid.push(true);
            Ok(())
        }
        Rule::Value => value(r, &slot.ty, column),
    }
}

/// Ends a row of a bytes column after appending `content`.
fn push_bytes(column: &mut Column, content: &[u8], at: usize) -> Result<(), Fail> {
    let Data::Bytes { offsets, bytes, .. } = &mut column.data else {
        return unfit(at, "bytes or text");
    };
    bytes.extend_from_slice(content);
    end_bytes(offsets, bytes.len(), at)?;
    column.valid.push(true);
    Ok(())
}

fn end_bytes(offsets: &mut Vec<i32>, end: usize, at: usize) -> Result<(), Fail> {
    push_end(offsets, end, "string").map_err(|e| fail(at, e.into()))
}

/// A value the column's type cannot hold (the plan never lets this happen): `what` names it.
fn unfit(at: usize, what: &'static str) -> Result<(), Fail> {
    Err(fail(at, DecodeCause::Column(what)))
}

/// Decodes a value of `ty` into one row of `column`, by the decode table.
fn value(r: &mut Reader<'_>, ty: &AvroType, column: &mut Column) -> Result<(), Fail> {
    let at = r.pos;
    match ty {
        AvroType::Null => {
            column.push_null();
            Ok(())
        }
        AvroType::Boolean => {
            let b = r.boolean()?;
            let Data::Bool(v) = &mut column.data else {
                return unfit(at, "a boolean");
            };
            v.push(b);
            column.valid.push(true);
            Ok(())
        }
        AvroType::Int => {
            let n = r.int()?;
            push_integer(column, at, i64::from(n)).unwrap_or_else(|| unfit(at, "an integer"))
        }
        AvroType::Long => {
            let n = r.long()?;
            push_integer(column, at, n).unwrap_or_else(|| unfit(at, "an integer"))
        }
        AvroType::Float => {
            let x = r.float()?;
            push_float(column, at, f64::from(x)).unwrap_or_else(|| unfit(at, "a float"))
        }
        AvroType::Double => {
            let x = r.double()?;
            push_float(column, at, x).unwrap_or_else(|| unfit(at, "a float"))
        }
        AvroType::Bytes => {
            let b = r.bytes()?;
            push_bytes(column, b, at)
        }
        AvroType::Fixed(n) => {
            let b = r.take(usize::try_from(*n).unwrap_or(usize::MAX))?;
            push_bytes(column, b, at)
        }
        AvroType::String => {
            let s = r.string()?;
            push_bytes(column, s, at)
        }
        AvroType::Enum(symbols) => {
            let s = r.symbol(symbols)?;
            push_bytes(column, s.as_bytes(), at)
        }
        AvroType::Record(_) | AvroType::Map(_) => {
            let Data::Bytes { offsets, bytes, .. } = &mut column.data else {
                return unfit(at, "JSON text");
            };
            r.json_into(ty, false, bytes)?;
            end_bytes(offsets, bytes.len(), at)?;
            column.valid.push(true);
            Ok(())
        }
        AvroType::Array(item) => push_list(column, at, |child, max| elements(r, item, child, max))
            .unwrap_or_else(|| unfit(at, "an array")),
    }
}

/// Decodes an array's blocks into `child`, one row per item; past `max` items the rest are
/// only checked. Returns the item count.
fn elements(
    r: &mut Reader<'_>,
    item: &AvroType,
    child: &mut Column,
    max: usize,
) -> Result<usize, Fail> {
    let mut count = 0usize;
    loop {
        let n = r.block(item)?;
        if n == 0 {
            return Ok(count);
        }
        for _ in 0..n {
            if count >= max {
                r.skip(item, false)?;
            } else {
                value(r, item, child)?;
            }
            count += 1;
        }
    }
}
