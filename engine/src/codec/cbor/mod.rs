//! The WIRE CBOR codec (DESIGN §7, RFC 8949): payloads decoded straight into Arrow columns,
//! batches encoded back to a CBOR sequence.
//!
//! - `reader` owns RFC 8949 well-formedness: heads, definite and indefinite lengths, skipping
//!   and JSON text, all bounds-checked and depth-bounded.
//! - [`CborCodecPlan`] resolves a codec, its wire schema and its target schema once per
//!   ingestor, by the decode table of `validate::catalog_entities::codec`.
//! - [`CborDecoder`] (one per shard per ingestor) decodes payloads into the WIRE JSON codec's
//!   reusable, truncatable column builders and hands out `RecordBatch`es in the plan's schema.
//! - [`encode_cbor`] writes rows back in wire terms for emitters.
//!
//! Decoding rules, where the spec and DESIGN leave a choice:
//! - A payload is one map, an array of maps, or an RFC 8742 CBOR sequence of maps (items back
//!   to back). A payload whose first item is an array holds nothing after it. An empty payload
//!   is refused. At most [`MAX_RECORDS_PER_PAYLOAD`] records, nesting at most
//!   [`MAX_CBOR_DEPTH`] (counting the payload's array and the record map). Definite and
//!   indefinite lengths are both accepted everywhere.
//! - Record keys are text strings matching wire names exactly. `MODE STRICT` refuses an
//!   undeclared key, `MODE LOOSE` skips its value (which must still be well-formed). A declared
//!   key twice in one record refuses the record.
//! - A required wire field that is missing or `null` refuses the record; an OPTIONAL one
//!   decodes to null. `undefined` is not `null` and is refused.
//! - `integer`: major types 0 and 1 only (a float is refused even when integral), range-checked
//!   into the target type. `number`: an integer or a half, single or double float into F32/F64;
//!   NaN and infinities are kept (CBOR carries them), a finite value beyond F32 is refused.
//!   `string`: into STRING a text string, or a byte string holding valid UTF-8; into BYTES a
//!   byte string or a text string's UTF-8; into DATETIME (only with `ENCODE f AS RFC3339`) an
//!   RFC 3339 text string, that string under tag 0, or tag 1 epoch seconds (integer or float).
//!   `object`: a map, written into STRING as JSON text (text keys only; byte strings, tags,
//!   `undefined` and non-finite floats have no JSON form and are refused). `array`: element-wise
//!   by the element type as in WIRE JSON (`null` elements are null items); ARRAY<T, d…> checks
//!   each dimension's length.
//! - Every other tag, anywhere (also in skipped values), is refused with its number.
//! - A refused payload leaves nothing buffered; its [`DecodeError`] names the record (0-based
//!   within the payload), the field, the byte offset and the cause.

mod decode;
mod encode;
mod error;
mod reader;

pub use super::document_plan::CodecError;
pub use super::json::MAX_RECORDS_PER_PAYLOAD;
pub use decode::CborDecoder;
pub use encode::{encode_cbor, encode_cbor_rows};
pub use error::{DecodeCause, DecodeError};

/// A WIRE CBOR codec's plan (`codec::document_plan`).
pub type CborCodecPlan = super::document_plan::DocumentPlan<super::document_plan::Cbor>;

/// CBOR nesting deeper than this is refused with an error (never a stack overflow).
pub const MAX_CBOR_DEPTH: usize = 128;
