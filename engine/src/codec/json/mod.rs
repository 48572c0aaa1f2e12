//! The WIRE JSON codec (DESIGN §7): payloads decoded straight into Arrow columns, batches
//! encoded back to NDJSON.
//!
//! - `scanner` owns RFC 8259: a one-pass, allocation-free tokenizer, and
//!   [`validate_json_text`], which accepts exactly one JSON text.
//! - [`JsonCodecPlan`] resolves a codec, its wire schema and its target schema once per
//!   ingestor, by the decode table of `validate::catalog_entities::codec`.
//! - [`JsonDecoder`] (one per shard per ingestor) decodes payloads into reusable, truncatable
//!   column builders and hands out `RecordBatch`es in the plan's schema.
//! - [`encode_ndjson`] writes rows back in wire terms, [`encode_json_rows`] the same bytes as one
//!   body per row for emitters, column-wise (`encode_rows`); `plain` writes an emitter's rows
//!   without a codec ([`encode_plain_json_rows`]).
//!
//! Decoding rules, where the spec and DESIGN leave a choice:
//! - A payload is one object, a JSON array of objects, or NDJSON: objects separated by
//!   whitespace (at least one byte, usually a newline). A payload of only whitespace is
//!   refused. At most [`MAX_RECORDS_PER_PAYLOAD`] records, nesting at most [`MAX_JSON_DEPTH`]
//!   (counting the payload's array and the record object).
//! - Keys match wire names exactly (after unescaping). `MODE STRICT` refuses an undeclared key,
//!   `MODE LOOSE` skips its value (which must still be valid JSON). A declared key twice in
//!   one record refuses the record; an undeclared one repeated is skipped like any other.
//! - A required wire field that is missing or `null` refuses the record; an OPTIONAL one
//!   decodes to null. Declared wire fields no schema field names are type-checked and dropped.
//! - `integer`: a number without fraction or exponent, range-checked into the target type
//!   (`1.0` and `1e2` are refused). `number`: any number into F32/F64, refused when it
//!   overflows to an infinity. `string`: text, escapes decoded, into STRING, or into DATETIME
//!   through RFC 3339 (to UTC nanoseconds). `object`: its exact source text into STRING.
//!   `array`: into VEC / LIST / ARRAY element-wise by the element type (a STRING element takes
//!   a string or an object's text; `null` elements are null items, which the Arrow item field
//!   allows); ARRAY<T, d…> checks each dimension's length. `null`: the value must be `null`.
//! - Lone UTF-16 surrogates in `\u` escapes are refused, as they have no UTF-8 form.
//! - A refused payload leaves nothing buffered; its [`DecodeError`] names the record (0-based
//!   within the payload), the field, the byte offset with line and column, and the cause.

pub(crate) mod columns;
pub(crate) mod datetime;
mod decode;
pub(crate) mod encode;
mod encode_rows;
mod error;
mod plain;
mod scanner;

pub use super::document_plan::CodecError;
pub use decode::JsonDecoder;
pub use encode::encode_ndjson;
pub use encode_rows::encode_json_rows;
pub use error::{DecodeCause, DecodeError, SyntaxError};
pub use plain::encode_plain_json_rows;
pub use scanner::validate_json_text;

/// A WIRE JSON codec's plan (`codec::document_plan`).
pub type JsonCodecPlan = super::document_plan::DocumentPlan<super::document_plan::Json>;

/// JSON nesting deeper than this is refused with an error (never a stack overflow).
pub const MAX_JSON_DEPTH: usize = 128;

/// The most records one payload may hold (DESIGN §7: arrays and lines unfold into ≤ 65,536).
pub const MAX_RECORDS_PER_PAYLOAD: usize = 65_536;
