//! Codecs: wire formats decoded into Arrow and encoded from it.
//!
//! Each wire format owns a submodule; this module only re-exports their public faces so users
//! write `nervix::codec::JsonDecoder`.

pub mod jaq;
pub mod json;

pub use jaq::{
    emit as jaq_emit, unfold as jaq_unfold, CodecError as JaqCodecError,
    DecodeCause as JaqDecodeCause, DecodeError as JaqDecodeError, EmitError as JaqEmitError,
    JaqCodecPlan, JaqDecoder, Unfolded,
};
pub use json::{
    encode_ndjson, validate_json_text, CodecError, DecodeCause, DecodeError, JsonCodecPlan,
    JsonDecoder, SyntaxError, MAX_JSON_DEPTH, MAX_RECORDS_PER_PAYLOAD,
};
