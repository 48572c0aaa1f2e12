//! Codecs: wire formats decoded into Arrow and encoded from it.
//!
//! Each wire format owns a submodule; this module re-exports their public faces so users write
//! `nervix::codec::JsonDecoder`. The two document formats (WIRE JSON, WIRE CBOR) share their
//! plan ([`document_plan`]), their decoder ([`document_decoder`]) and its row buffer
//! (`document_rows`), as they share their wire types. The streaming decoders (WIRE JSON, CBOR,
//! AVRO) share how they place a refused payload and append values to their columns
//! ([`decoding`]); every WIRE plan checks its codec's ENCODE clauses and TO SCHEMA fields alike
//! (`wire_plan`). [`EncodedRows`] is the one-buffer-per-frame output every per-row emitter
//! encoder writes into.

/// Implements `From<$shared>` for `$own`, a format's own error enum: each listed variant of
/// `$shared`, a refusal the formats share, becomes `$own`'s variant of the same name and fields,
/// which carries the same message.
macro_rules! from_shared_variants {
    ($shared:ty => $own:ident: $($variant:ident $fields:tt),+ $(,)?) => {
        impl From<$shared> for $own {
            fn from(shared: $shared) -> $own {
                type Shared = $shared;
                match shared {
                    $(Shared::$variant $fields => $own::$variant $fields,)+
                }
            }
        }
    };
}
pub(crate) use from_shared_variants;

pub mod avro;
pub mod cbor;
pub mod decoding;
pub mod document_decoder;
pub mod document_plan;
mod document_rows;
pub mod jaq;
pub mod json;
pub mod rows;
mod wire_plan;

pub use avro::{
    encode_avro_datum, encode_avro_rows, AvroCodecPlan, AvroDecoder, CodecError as AvroCodecError,
    DecodeCause as AvroDecodeCause, DecodeError as AvroDecodeError, EncodeError as AvroEncodeError,
    MAX_AVRO_BLOCK_BYTES,
};
pub use cbor::{
    encode_cbor, encode_cbor_rows, CborCodecPlan, CborDecoder, CodecError as CborCodecError,
    DecodeCause as CborDecodeCause, DecodeError as CborDecodeError, MAX_CBOR_DEPTH,
};
pub use jaq::{
    emit as jaq_emit, emit_rows as jaq_emit_rows, unfold as jaq_unfold,
    CodecError as JaqCodecError, DecodeCause as JaqDecodeCause, DecodeError as JaqDecodeError,
    EmitError as JaqEmitError, JaqCodecPlan, JaqDecoder, Unfolded,
};
pub use json::{
    encode_json_rows, encode_ndjson, encode_plain_json_rows, validate_json_text, CodecError,
    DecodeCause, DecodeError, JsonCodecPlan, JsonDecoder, SyntaxError, MAX_JSON_DEPTH,
    MAX_RECORDS_PER_PAYLOAD,
};
pub use rows::EncodedRows;
