//! Validation of the batches a client producer submits (spec: Client Ingestors, "Submitted
//! Batches" and "Outcomes"; DESIGN §8).
//!
//! This module owns the one decision the session protocol makes about a submitted batch's bytes:
//! it is exactly one canonical Arrow IPC stream — the schema message, exactly one record batch,
//! and the end-of-stream marker; uncompressed; no dictionary batches, tensors or extension
//! types; the schema exactly the ingestor's input schema with no field or schema metadata; at
//! most [`BatchLimits::max_rows`] rows and [`BatchLimits::max_bytes`] bytes; every column
//! valid — or it is refused whole with one of the spec's eight defects ([`BatchDefect`]).
//! Nothing is coerced or cast. [`encode_batch`] writes that canonical form.
//!
//! Why it is correct:
//!
//! - The size bound is checked first, on the slice length, before anything is parsed or
//!   allocated.
//! - The stream framing is walked here, not by arrow's `StreamReader`, so every message is
//!   seen and classified: each is `0xFFFFFFFF`, a little-endian `i32` metadata length, a
//!   flatbuffer `Message` (checked by the flatbuffers verifier, so no offset in it can point
//!   outside it), and a body of exactly `bodyLength` bytes that must lie within the input. The
//!   stream must end with the 8-byte end-of-stream marker and nothing after it.
//! - The record batch's header is checked before arrow decodes it: its row count against the
//!   limit, every field node non-negative with at most as many nulls as values, every buffer
//!   range inside the body, and every fixed-width buffer a whole number of values long (arrow's
//!   decoder slices those ranges and views those buffers unchecked, and would panic otherwise).
//! - Decoding builds every array with `ArrayDataBuilder::build`, which runs
//!   `ArrayData::validate_data` (layout, buffer sizes, offsets, UTF-8, null counts, nested
//!   non-nullable children) bottom-up, so each column is fully validated exactly once — the
//!   same checks as `validate_full`; `RecordBatch::try_new_with_options` then checks lengths
//!   and nulls in non-nullable columns. Those refusals are [`BatchDefect::InvalidData`].
//! - As a last resort the decode runs under `catch_unwind`: a panic inside arrow on input that
//!   passed every check above is refused as [`BatchDefect::Malformed`] rather than taking the
//!   session's thread down. (The panic hook still prints it; that print is a bug report.)
//!
//! [`decode_stream`] reads a stream of any number of batches under its own schema through the
//! same framing, header checks, validation and `catch_unwind`, for IPC a node wrote itself and
//! reads back from disk (processor snapshots), where damage must be refused, not panic.
//!
//! When a batch has several defects the first one found in stream order is reported: size,
//! then each message in turn (framing, kind, compression, schema), then the batch count and
//! trailing data, then rows, then the column data.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::convert::try_fb_to_schema;
use arrow_ipc::reader::read_record_batch;
use arrow_ipc::writer::StreamWriter;
use arrow_ipc::{root_as_message, Endianness, MessageHeader, MetadataVersion};
use arrow_schema::{ArrowError, DataType, Field, Metadata, Schema, SchemaRef};

/// The most rows one submitted batch may carry (spec: "at most 65,536 rows").
pub const MAX_BATCH_ROWS: usize = 65_536;

/// The IPC continuation marker that opens every message and the end-of-stream marker.
const CONTINUATION_MARKER: [u8; 4] = [0xFF; 4];

/// The length of a message prefix: the continuation marker and the `i32` metadata length.
const PREFIX_LEN_BYTES: usize = 8;

/// The bounds one submission is validated against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// The most rows the batch may carry; the spec's bound is [`MAX_BATCH_ROWS`].
    pub max_rows: usize,
    /// The most bytes the whole submitted stream may take: the smaller of the producer's
    /// granted bytes and what one session frame holds.
    pub max_bytes: usize,
}

impl BatchLimits {
    /// Limits with the spec's row bound and the given byte bound.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_rows: MAX_BATCH_ROWS,
            max_bytes,
        }
    }
}

/// Why a submitted batch is refused: exactly the spec's defects of an invalid batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchDefect {
    /// The bytes are not a well-formed Arrow IPC stream.
    #[error("malformed: {0}")]
    Malformed(String),
    /// A message other than the schema first and record batches after it.
    #[error("unexpected message: {0}")]
    UnexpectedMessage(String),
    /// The record batch's buffers are compressed.
    #[error("compressed: {0}")]
    Compressed(String),
    /// The stream's schema is not exactly the expected one.
    #[error("schema mismatch: {0}")]
    SchemaMismatch(String),
    /// Zero or several record batches, or data after the end-of-stream marker.
    #[error("not one batch: {0}")]
    NotOneBatch(String),
    /// More rows than allowed.
    #[error("too many rows: {rows} rows, at most {max_rows} allowed")]
    TooManyRows {
        /// The rows the batch declares.
        rows: i64,
        /// The bound.
        max_rows: usize,
    },
    /// More bytes than allowed.
    #[error("too large: {bytes} bytes, at most {max_bytes} allowed")]
    TooLarge {
        /// The submitted bytes.
        bytes: usize,
        /// The bound.
        max_bytes: usize,
    },
    /// A column's data is not valid for its type.
    #[error("invalid data: {0}")]
    InvalidData(String),
}

impl BatchDefect {
    /// The spec's words for this defect, as outcomes and metrics name it.
    pub fn spec_name(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::UnexpectedMessage(_) => "unexpected message",
            Self::Compressed(_) => "compressed",
            Self::SchemaMismatch(_) => "schema mismatch",
            Self::NotOneBatch(_) => "not one batch",
            Self::TooManyRows { .. } => "too many rows",
            Self::TooLarge { .. } => "too large",
            Self::InvalidData(_) => "invalid data",
        }
    }
}

/// Writes `batch` as one canonical submitted batch: its schema, the batch, and the
/// end-of-stream marker, uncompressed. The output is canonical when the batch's schema carries
/// no metadata and no dictionary types, as an ingestor's input schema never does.
pub fn encode_batch(batch: &RecordBatch) -> Result<Vec<u8>, ArrowError> {
    // Sized up front: growing from empty reallocates and copies the body about a dozen times
    // for a 40 KB batch.
    let mut out = Vec::with_capacity(encoded_size_hint(batch));
    let mut writer = StreamWriter::try_new(&mut out, batch.schema_ref())?;
    writer.write(batch)?;
    writer.finish()?;
    drop(writer);
    Ok(out)
}

/// Per column, room for the schema message's field entry and the padding of the column's
/// buffers (each padded to 64 bytes by the IPC writer).
const ENCODED_BYTES_PER_COLUMN: usize = 512;
/// Room for the messages' fixed parts: the schema and batch headers, the end-of-stream marker.
const ENCODED_FIXED_BYTES: usize = 1_024;

/// About the bytes [`encode_batch`] writes: the rows' own bytes (a sliced column counts its
/// rows, not the buffer it shares) plus the metadata's room. A low guess costs one more
/// reallocation, never a wrong encoding.
fn encoded_size_hint(batch: &RecordBatch) -> usize {
    let body: usize = batch
        .columns()
        .iter()
        .map(|column| column.to_data().get_slice_memory_size().unwrap_or(0))
        .sum();
    body + ENCODED_FIXED_BYTES + ENCODED_BYTES_PER_COLUMN * batch.num_columns()
}

/// Validates one submitted batch against the ingestor's input schema and the limits, and
/// returns it decoded, or the first defect found. Never panics.
pub fn validate_batch(
    bytes: &[u8],
    expected: &SchemaRef,
    limits: BatchLimits,
) -> Result<RecordBatch, BatchDefect> {
    if bytes.len() > limits.max_bytes {
        return Err(BatchDefect::TooLarge {
            bytes: bytes.len(),
            max_bytes: limits.max_bytes,
        });
    }

    let mut pos = 0usize;
    let mut batch: Option<(arrow_ipc::RecordBatch<'_>, &[u8], MetadataVersion)> = None;
    let mut batches = 0usize;
    let mut index = 0usize;
    loop {
        let frame = next_frame(bytes, &mut pos)?;
        let Some((message, body)) = frame else {
            if index == 0 {
                return Err(malformed("the stream ends before its schema message"));
            }
            break;
        };
        let version = message.version();
        if version < MetadataVersion::V4 || version > MetadataVersion::V5 {
            return Err(malformed(format!(
                "message {index} has metadata version {version:?}, only V4 and V5 are read"
            )));
        }
        let kind = message.header_type();
        if index == 0 {
            let Some(schema) = message.header_as_schema() else {
                return Err(BatchDefect::UnexpectedMessage(format!(
                    "the stream opens with {} where the schema message is expected",
                    header_name(kind)
                )));
            };
            if !body.is_empty() {
                return Err(malformed("the schema message has a body"));
            }
            if schema.endianness() != Endianness::Little {
                return Err(BatchDefect::SchemaMismatch(
                    "the stream is big-endian; batches are little-endian".into(),
                ));
            }
            let got = try_fb_to_schema(schema)
                .map_err(|e| malformed(format!("the schema message is invalid: {e}")))?;
            compare_schema(&got, expected).map_err(BatchDefect::SchemaMismatch)?;
        } else if let Some(header) = message.header_as_record_batch() {
            if let Some(compression) = header.compression() {
                return Err(BatchDefect::Compressed(format!(
                    "record batch {batches} is compressed with {:?}",
                    compression.codec()
                )));
            }
            batches += 1;
            if batch.is_none() {
                batch = Some((header, body, version));
            }
        } else {
            return Err(BatchDefect::UnexpectedMessage(format!(
                "message {index} is {}; after the schema only record batches may follow",
                header_name(kind)
            )));
        }
        index += 1;
    }
    if pos != bytes.len() {
        return Err(BatchDefect::NotOneBatch(format!(
            "{} bytes follow the end-of-stream marker",
            bytes.len() - pos
        )));
    }
    let (header, body, version) = match (batch, batches) {
        (Some(found), 1) => found,
        (None, _) => return Err(BatchDefect::NotOneBatch("the stream has no batch".into())),
        (Some(_), n) => {
            return Err(BatchDefect::NotOneBatch(format!(
                "the stream has {n} batches"
            )))
        }
    };

    let rows = header.length();
    if rows < 0 {
        return Err(malformed(format!("the batch declares {rows} rows")));
    }
    if usize::try_from(rows).map_or(true, |r| r > limits.max_rows) {
        return Err(BatchDefect::TooManyRows {
            rows,
            max_rows: limits.max_rows,
        });
    }
    decode_record_batch(header, body, expected, version)
}

/// Decodes an Arrow IPC stream of any number of record batches under its own schema, with
/// the checks [`validate_batch`] makes of its one batch: framing, a little-endian schema
/// first, uncompressed record batches only (no dictionaries), every batch header checked
/// before arrow decodes it, every column validated. For streams a node wrote itself and reads
/// back from disk (processor snapshots): one damaged on disk is refused, never a panic.
pub fn decode_stream(bytes: &[u8]) -> Result<Vec<RecordBatch>, BatchDefect> {
    let mut pos = 0usize;
    let mut schema: Option<SchemaRef> = None;
    let mut batches = Vec::new();
    while let Some((message, body)) = next_frame(bytes, &mut pos)? {
        let version = message.version();
        if version < MetadataVersion::V4 || version > MetadataVersion::V5 {
            return Err(malformed(format!(
                "a message has metadata version {version:?}, only V4 and V5 are read"
            )));
        }
        match (
            &schema,
            message.header_as_schema(),
            message.header_as_record_batch(),
        ) {
            (None, Some(header), _) => {
                if !body.is_empty() || header.endianness() != Endianness::Little {
                    return Err(malformed(
                        "the schema message is not a little-endian schema",
                    ));
                }
                let read = try_fb_to_schema(header)
                    .map_err(|e| malformed(format!("the schema message is invalid: {e}")))?;
                schema = Some(SchemaRef::new(read));
            }
            (Some(schema), None, Some(header)) => {
                if header.compression().is_some() {
                    return Err(BatchDefect::Compressed(format!(
                        "record batch {} is compressed",
                        batches.len()
                    )));
                }
                if header.length() < 0 {
                    return Err(malformed(format!(
                        "record batch {} declares {} rows",
                        batches.len(),
                        header.length()
                    )));
                }
                batches.push(decode_record_batch(header, body, schema, version)?);
            }
            _ => {
                return Err(BatchDefect::UnexpectedMessage(format!(
                    "{} where {} is expected",
                    header_name(message.header_type()),
                    if schema.is_none() {
                        "the schema"
                    } else {
                        "a record batch"
                    }
                )))
            }
        }
    }
    if schema.is_none() {
        return Err(malformed("the stream ends before its schema message"));
    }
    if pos != bytes.len() {
        return Err(malformed(format!(
            "{} bytes follow the end-of-stream marker",
            bytes.len() - pos
        )));
    }
    Ok(batches)
}

/// Decodes one record batch whose header and body were framed by [`next_frame`]: the header
/// is checked against `schema` first, arrow validates every column, and a panic inside arrow
/// on input that passed every check is refused as malformed (module docs).
fn decode_record_batch(
    header: arrow_ipc::RecordBatch<'_>,
    body: &[u8],
    schema: &SchemaRef,
    version: MetadataVersion,
) -> Result<RecordBatch, BatchDefect> {
    check_batch_header(&header, body.len(), schema, version)?;
    let body = Buffer::from(body);
    let decoded = catch_unwind(AssertUnwindSafe(|| {
        read_record_batch(
            &body,
            header,
            SchemaRef::clone(schema),
            &HashMap::new(),
            None,
            &version,
        )
    }));
    match decoded {
        Ok(Ok(batch)) => Ok(batch),
        Ok(Err(ArrowError::InvalidArgumentError(e))) => Err(BatchDefect::InvalidData(e)),
        Ok(Err(e)) => Err(malformed(format!("the batch does not decode: {e}"))),
        Err(_) => Err(malformed("the batch's layout made the Arrow decoder panic")),
    }
}

fn malformed(why: impl Into<String>) -> BatchDefect {
    BatchDefect::Malformed(why.into())
}

/// Reads the message at `*pos`: `None` for the end-of-stream marker, or the verified message
/// and its body, advancing `*pos` past it.
fn next_frame<'a>(
    bytes: &'a [u8],
    pos: &mut usize,
) -> Result<Option<(arrow_ipc::Message<'a>, &'a [u8])>, BatchDefect> {
    let at = *pos;
    let rest = bytes.get(at..).unwrap_or_default();
    let Some((prefix, rest)) = rest.split_first_chunk::<PREFIX_LEN_BYTES>() else {
        return Err(malformed(format!(
            "the stream ends at byte {} without the end-of-stream marker",
            bytes.len()
        )));
    };
    let (marker, len) = prefix.split_at(4);
    if marker != CONTINUATION_MARKER {
        return Err(malformed(format!(
            "byte {at} does not open a message with the continuation marker"
        )));
    }
    let len = i32::from_le_bytes([len[0], len[1], len[2], len[3]]);
    if len == 0 {
        *pos = at + PREFIX_LEN_BYTES;
        return Ok(None);
    }
    let meta_len = usize::try_from(len)
        .ok()
        .filter(|l| *l <= rest.len())
        .ok_or_else(|| {
            malformed(format!(
                "the message at byte {at} declares {len} metadata bytes, {} remain",
                rest.len()
            ))
        })?;
    let (meta, rest) = rest.split_at(meta_len);
    let message = root_as_message(meta)
        .map_err(|e| malformed(format!("the message at byte {at} is not valid: {e}")))?;
    let body_len = message.bodyLength();
    let body_len = usize::try_from(body_len)
        .ok()
        .filter(|l| *l <= rest.len())
        .ok_or_else(|| {
            malformed(format!(
                "the message at byte {at} declares a {body_len}-byte body, {} bytes remain",
                rest.len()
            ))
        })?;
    *pos = at + PREFIX_LEN_BYTES + meta_len + body_len;
    Ok(Some((message, rest.get(..body_len).unwrap_or_default())))
}

fn header_name(kind: MessageHeader) -> String {
    match kind {
        MessageHeader::Schema => "a schema message".into(),
        MessageHeader::DictionaryBatch => "a dictionary batch".into(),
        MessageHeader::RecordBatch => "a record batch".into(),
        MessageHeader::Tensor => "a tensor".into(),
        MessageHeader::SparseTensor => "a sparse tensor".into(),
        MessageHeader::NONE => "a message without a header".into(),
        other => format!("a message of unknown kind {}", other.0),
    }
}

/// Checks what arrow's decoder trusts: node counts are sane and every buffer lies in the body.
fn check_batch_header(
    header: &arrow_ipc::RecordBatch<'_>,
    body_len: usize,
    schema: &Schema,
    version: MetadataVersion,
) -> Result<(), BatchDefect> {
    let nodes = header
        .nodes()
        .ok_or_else(|| malformed("the batch has no field nodes"))?;
    for (i, node) in nodes.iter().enumerate() {
        let (len, nulls) = (node.length(), node.null_count());
        if len < 0 || nulls < 0 || nulls > len {
            return Err(malformed(format!(
                "field node {i} declares {len} values with {nulls} nulls"
            )));
        }
    }
    let buffers = header
        .buffers()
        .ok_or_else(|| malformed("the batch has no buffer list"))?;
    // Arrow views a fixed-width buffer as a typed slice and panics when its length is not a
    // whole number of values, so those lengths are checked here.
    let mut widths = Vec::new();
    let v5 = version >= MetadataVersion::V5;
    for field in schema.fields() {
        if !buffer_widths(field.data_type(), v5, &mut widths) {
            break;
        }
    }
    for (i, buffer) in buffers.iter().enumerate() {
        let (offset, len) = (buffer.offset(), buffer.length());
        let width = widths.get(i).copied().unwrap_or(0);
        if width > 1 && len % width as i64 != 0 {
            return Err(malformed(format!(
                "buffer {i} holds {len} bytes, not a whole number of {width}-byte values"
            )));
        }
        let end = offset.checked_add(len);
        let inside = offset >= 0
            && len >= 0
            && end.is_some_and(|end| usize::try_from(end).is_ok_and(|end| end <= body_len));
        if !inside {
            return Err(malformed(format!(
                "buffer {i} spans {len} bytes at offset {offset}, outside the {body_len}-byte body"
            )));
        }
    }
    Ok(())
}

/// Appends, in body order, the value width in bytes of each buffer the IPC layout of
/// `data_type` puts in a batch body, 0 where any length is valid (validity bitmaps, value
/// bytes). Returns `false` where the layout depends on more than the type (the variadic buffers
/// of view types), after which the following buffers are not known and not checked.
fn buffer_widths(data_type: &DataType, v5: bool, out: &mut Vec<usize>) -> bool {
    use DataType as T;
    match data_type {
        T::Null => true,
        T::Boolean | T::FixedSizeBinary(_) => {
            out.extend([0, 0]);
            true
        }
        T::Utf8 | T::Binary => {
            out.extend([0, 4, 0]);
            true
        }
        T::LargeUtf8 | T::LargeBinary => {
            out.extend([0, 8, 0]);
            true
        }
        T::List(child) | T::Map(child, _) => {
            out.extend([0, 4]);
            buffer_widths(child.data_type(), v5, out)
        }
        T::LargeList(child) => {
            out.extend([0, 8]);
            buffer_widths(child.data_type(), v5, out)
        }
        T::ListView(child) => {
            out.extend([0, 4, 4]);
            buffer_widths(child.data_type(), v5, out)
        }
        T::LargeListView(child) => {
            out.extend([0, 8, 8]);
            buffer_widths(child.data_type(), v5, out)
        }
        T::FixedSizeList(child, _) => {
            out.push(0);
            buffer_widths(child.data_type(), v5, out)
        }
        T::Struct(children) => {
            out.push(0);
            children
                .iter()
                .all(|c| buffer_widths(c.data_type(), v5, out))
        }
        T::Union(children, mode) => {
            if !v5 {
                out.push(0);
            }
            out.push(1);
            if *mode == arrow_schema::UnionMode::Dense {
                out.push(4);
            }
            children
                .iter()
                .all(|(_, c)| buffer_widths(c.data_type(), v5, out))
        }
        T::Dictionary(key, _) => {
            out.extend([0, key.primitive_width().unwrap_or(0)]);
            true
        }
        T::RunEndEncoded(run_ends, values) => {
            buffer_widths(run_ends.data_type(), v5, out)
                && buffer_widths(values.data_type(), v5, out)
        }
        other => match other.primitive_width() {
            Some(width) => {
                out.extend([0, width]);
                true
            }
            None => false,
        },
    }
}

/// Compares the stream's schema with the expected one exactly, naming the first difference.
fn compare_schema(got: &Schema, expected: &Schema) -> Result<(), String> {
    if !got.metadata().is_empty() {
        return Err(format!(
            "the schema carries metadata (keys {:?}); none is allowed",
            sorted_keys(got.metadata())
        ));
    }
    let (g, e) = (got.fields(), expected.fields());
    for (i, (gf, ef)) in g.iter().zip(e.iter()).enumerate() {
        compare_field(&FieldPath::Top(i), gf, ef)?;
    }
    if g.len() > e.len() {
        return Err(format!(
            "field {} `{}` is extra: {} fields where {} are expected",
            e.len(),
            g[e.len()].name(),
            g.len(),
            e.len()
        ));
    }
    if g.len() < e.len() {
        return Err(format!(
            "field {} `{}` is missing: {} fields where {} are expected",
            g.len(),
            e[g.len()].name(),
            g.len(),
            e.len()
        ));
    }
    Ok(())
}

/// Where a compared field sits, for messages: `field 2`, `field 2 `tags` child`. A value, not
/// a string, so that a batch whose schema matches formats nothing.
#[derive(Clone, Copy)]
enum FieldPath<'a> {
    Top(usize),
    ChildOf(&'a FieldPath<'a>, &'a str),
}

impl std::fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldPath::Top(index) => write!(f, "field {index}"),
            FieldPath::ChildOf(parent, name) => write!(f, "{parent} `{name}` child"),
        }
    }
}

fn compare_field(path: &FieldPath<'_>, got: &Field, expected: &Field) -> Result<(), String> {
    let name = got.name();
    if name != expected.name() {
        return Err(format!(
            "{path} is named `{name}` where `{}` is expected",
            expected.name()
        ));
    }
    if !got.metadata().is_empty() {
        return Err(format!(
            "{path} `{name}` carries metadata (keys {:?}); none is allowed",
            sorted_keys(got.metadata())
        ));
    }
    if got.is_nullable() != expected.is_nullable() {
        let word = |n: bool| if n { "nullable" } else { "non-nullable" };
        return Err(format!(
            "{path} `{name}` is {} where {} is expected",
            word(got.is_nullable()),
            word(expected.is_nullable())
        ));
    }
    let child_path = FieldPath::ChildOf(path, name);
    match (got.data_type(), expected.data_type()) {
        (DataType::List(g), DataType::List(e))
        | (DataType::LargeList(g), DataType::LargeList(e)) => compare_field(&child_path, g, e),
        (DataType::FixedSizeList(g, gn), DataType::FixedSizeList(e, en)) if gn == en => {
            compare_field(&child_path, g, e)
        }
        (DataType::Struct(g), DataType::Struct(e)) if g.len() == e.len() => g
            .iter()
            .zip(e.iter())
            .try_for_each(|(g, e)| compare_field(&child_path, g, e)),
        (g, e) if g == e => Ok(()),
        (g, e) => Err(format!(
            "{path} `{name}` has type {g} where {e} is expected"
        )),
    }
}

fn sorted_keys(metadata: &Metadata) -> Vec<&str> {
    let mut keys: Vec<&str> = metadata.keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};

    use arrow_schema::{DataType, Field, Schema};

    use super::{compare_schema, encode_batch, encoded_size_hint};

    fn batch(rows: usize) -> RecordBatch {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows as i64));
        let texts: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..rows).map(|i| format!("row {i} of a batch")),
        ));
        RecordBatch::try_from_iter([("id", ids), ("text", texts)]).unwrap()
    }

    /// The hint covers the encoding without a reallocation and stays near it; a small slice
    /// of a large batch is hinted by its own rows, not by the buffers it shares.
    #[test]
    fn the_size_hint_covers_the_encoding_and_follows_a_slice() {
        for rows in [0, 1, 100, 10_000] {
            let batch = batch(rows);
            let (hint, encoded) = (
                encoded_size_hint(&batch),
                encode_batch(&batch).unwrap().len(),
            );
            assert!(
                hint >= encoded,
                "{rows} rows: hint {hint} < {encoded} encoded"
            );
            assert!(
                hint <= encoded + 4_096,
                "{rows} rows: hint {hint}, {encoded} encoded"
            );
        }
        let slice = batch(100_000).slice(10, 2);
        let (hint, encoded) = (
            encoded_size_hint(&slice),
            encode_batch(&slice).unwrap().len(),
        );
        assert!(
            hint >= encoded && hint <= encoded + 4_096,
            "hint {hint}, {encoded} encoded"
        );
    }

    /// A mismatch names where it is, down through nested fields; a match formats nothing.
    #[test]
    fn a_schema_mismatch_names_the_nested_field_it_is_in() {
        let schema = |item: DataType| {
            Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new(
                    "tags",
                    DataType::List(Arc::new(Field::new("item", item, true))),
                    false,
                ),
            ])
        };
        let expected = schema(DataType::Utf8);
        assert_eq!(compare_schema(&schema(DataType::Utf8), &expected), Ok(()));
        assert_eq!(
            compare_schema(&schema(DataType::Int64), &expected),
            Err("field 1 `tags` child `item` has type Int64 where Utf8 is expected".to_string())
        );
        let renamed = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
                false,
            ),
        ]);
        assert_eq!(
            compare_schema(&renamed, &expected),
            Err("field 1 `tags` child is named `element` where `item` is expected".to_string())
        );
    }
}
