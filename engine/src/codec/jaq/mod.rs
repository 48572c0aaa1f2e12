//! JAQ codecs (DESIGN §7): `CREATE CODEC c FROM <JSON|CBOR|YAML|TOML|XML> TO SCHEMA s WITH
//! JAQ TRANSFORMATIONS [ON INGESTION '<program>'] [ON EMITTING '<program>']`.
//!
//! - [`JaqCodecPlan`] compiles the programs once per codec (jaq-core with the jaq-std and
//!   jaq-json definitions) and resolves the target schema; it is `Arc`-shared by every shard.
//! - [`unfold`] is the CPU-heavy half of decoding, free of shard state so it can run on an
//!   extension worker (`nervix_shards::workers`): parse the payload in the codec's format
//!   (`format.rs` states each format's mapping, XML's included), run ON INGESTION, and convert every output into Arrow columns
//!   ([`Unfolded`], a `Send` record batch).
//! - [`JaqDecoder`] (one per shard per ingestor) has [`crate::codec::JsonDecoder`]'s shape:
//!   `decode_payload` (unfold + append on the calling thread), `append`, `buffered_rows`,
//!   `finish`.
//! - [`emit`] runs ON EMITTING on one row and writes the single output in the codec's format.
//!
//! Decoding rules:
//! - Without ON INGESTION the payload itself must be one object or an array of objects.
//!   With it, each output of the program is one record, and must be an object; zero outputs
//!   is a valid, empty payload. More than [`MAX_RECORDS_PER_PAYLOAD`] outputs refuse the
//!   payload.
//! - Record fields are found by schema field name; other keys are ignored. A required field
//!   that is missing or `null` refuses the payload; an OPTIONAL one becomes null.
//! - Integers are range-checked into the target type (a float with no fraction counts as an
//!   integer, as jq does not tell them apart); F32/F64 take any finite number (an F32 that
//!   would overflow is refused); BOOL takes booleans; STRING takes strings, or an object as
//!   its JSON text; BYTES takes byte strings (CBOR) or strings; DATETIME takes RFC 3339
//!   strings; VEC/LIST/ARRAY take arrays element-wise (ARRAY checks each dimension's
//!   length, `null` elements are null items).
//! - A payload is atomic: any parse error, jaq runtime error or bad output refuses all of it,
//!   with a [`DecodeError`] naming the output index, the field and the cause.
//!
//! Bounds: a program run may take at most [`MAX_JAQ_STEPS`] interpreter steps and
//! [`MAX_JAQ_STACK_BYTES`] of stack beyond where it started ([`program`]), so a runaway
//! program (`repeat(1)`, `last(range(1e12))`, `def f: 1 + f; f`) is refused rather than
//! hanging the worker or overflowing its stack. Documents nest at most [`MAX_DOCUMENT_DEPTH`].
//! What is not bounded: the memory a program allocates within its step budget (e.g.
//! `"x" * 1e9`), which the byte budgets of the worker classes are meant to cover, and the
//! depth of values a program builds (dropping a value nested millions deep recurses).
//! The bounds unwind (see `program.rs`), so they need `panic = "unwind"`, Rust's default.

mod decode;
mod emit;
mod error;
pub(crate) mod format;
mod plan;
pub(crate) mod program;
mod value;

pub use decode::{unfold, JaqDecoder, Unfolded};
pub use emit::{emit, emit_rows};
pub use error::{CodecError, DecodeCause, DecodeError, EmitError};
pub use plan::JaqCodecPlan;

pub use crate::codec::json::MAX_RECORDS_PER_PAYLOAD;

/// Interpreter steps (term evaluations and `range` elements) one program run may take.
pub const MAX_JAQ_STEPS: u64 = 8_000_000;

/// Stack one program run may use beyond its starting point; callers need at least twice
/// this (std threads get 2 MiB, extension workers 8 MiB).
pub const MAX_JAQ_STACK_BYTES: usize = 512 * 1024;

/// Nesting of arrays and objects a parsed payload may hold.
pub const MAX_DOCUMENT_DEPTH: usize = 128;
