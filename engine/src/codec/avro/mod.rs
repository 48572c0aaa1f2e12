//! The WIRE AVRO codec (DESIGN §7, Avro 1.11 binary encoding): payloads decoded straight into
//! Arrow columns, batches encoded back to datums.
//!
//! - `reader` owns the binary encoding: varints, lengths, unions, blocks, skipping a value of
//!   a wire type and writing one as JSON text, all bounds-checked.
//! - `container` owns object container files: the header, the writer schema's match with the
//!   wire schema, and the blocks (codecs `null` and `deflate`).
//! - [`AvroCodecPlan`] resolves a codec, its wire schema and its target schema once per
//!   ingestor, by the decode table of `validate::catalog_entities::codec`.
//! - [`AvroDecoder`] (one per shard per ingestor) decodes payloads into the WIRE JSON codec's
//!   reusable, truncatable column builders and hands out `RecordBatch`es in the plan's schema.
//! - [`encode_avro_datum`] writes rows back as bare datums for emitters.
//!
//! How a payload's framing is told apart, by its first bytes:
//! 1. `Obj` — an object container file; the fourth byte must be 0x01 (else "bad magic"). Its
//!    writer schema must match the wire schema's shape (the first difference is named).
//! 2. `C3 01` — a single-object encoding: an 8-byte CRC-64-AVRO fingerprint, then exactly one
//!    datum. The fingerprint is not checked: a wire schema names no Avro records, enums or
//!    fixeds, so its Parsing Canonical Form (and fingerprint) is not defined; the datum is read
//!    with the wire schema.
//! 3. Anything else — bare datums (the binary encoding of one record of the wire schema), one
//!    or more back to back up to the end of the payload (the form [`encode_avro_datum`]
//!    writes).
//!
//! A bare datum whose first bytes happen to be `Obj` or `C3 01` must therefore be sent framed
//! (as a single object or in a container file); an empty payload is refused.
//!
//! Decoding rules, by the decode table: an OPTIONAL wire field is the union `["null", T]`
//! (branch 0 null, branch 1 the value; any other branch is refused); `int` and `long` are
//! range-checked into the target integer; `float` and `double` into F32 / F64 (NaN and
//! infinities kept, a finite double beyond F32 refused); `bytes` and `fixed(n)` into BYTES;
//! `string` into STRING (UTF-8 checked) or, with `ENCODE f AS RFC3339`, DATETIME; `enum` into
//! STRING as its symbol; `record` and `map` into STRING as JSON text (`bytes`/`fixed` inside as
//! strings of code points U+0000–U+00FF, Avro's JSON encoding; NaN and infinities as `null`);
//! `array` into VEC / LIST / ARRAY item by item (ARRAY<E, d…> checks each dimension's
//! length). At most [`MAX_RECORDS_PER_PAYLOAD`] records per payload. A refused payload leaves
//! nothing buffered; its [`DecodeError`] names the record (0-based within the payload), the
//! wire field, the byte offset and the cause.

mod container;
mod decode;
mod encode;
mod error;
mod plan;
mod reader;

pub use super::json::MAX_RECORDS_PER_PAYLOAD;
pub use decode::AvroDecoder;
pub use encode::{encode_avro_datum, encode_avro_rows};
pub use error::{CodecError, DecodeCause, DecodeError, EncodeError};
pub use plan::AvroCodecPlan;

/// A container block (compressed or inflated) longer than this is refused, bounding the memory
/// one payload can make the decoder allocate.
pub const MAX_AVRO_BLOCK_BYTES: usize = 64 << 20;
