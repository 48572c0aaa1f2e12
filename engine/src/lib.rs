//! The Nervix engine.
//!
//! This crate owns what turns NSPL into a running graph: models (validated, typed catalog
//! entities), validation against the catalog, the planner, the expression VM over Arrow, codecs
//! (JSON, Avro, CBOR, JAQ), processors, the ingestor and emitter runtime, acknowledgements,
//! domains and time, the control-plane state machine, metrics, and the `nervix` command-line
//! binary. It may depend on every other Nervix crate except `nervix-bench`.
//!
//! What exists today is the control plane: the catalog ([`catalog`]: models, the planner),
//! validation ([`validate`], [`alter`], [`types`]), the replicated control state machine and
//! statement execution ([`control`]), and the console ([`console`]); the binary adds `serve`,
//! `console`, `fmt`, `check` and `version`. The data plane — shards, the expression VM,
//! codecs, processors, ingestor and emitter runtime — arrives with later issues.

/// The wire protocols and the Rust client library, for crates that may depend on the engine only.
pub use nervix_net as net;
/// The NSPL front end, re-exported so crates above the engine (benchmarks) reach the language
/// through the engine, as DESIGN §2's dependency table has it.
pub use nervix_nspl as nspl;
pub mod allocator;
pub mod alter;
pub mod catalog;
pub mod codec;
pub mod console;
pub mod control;
pub mod embedded;
pub mod runtime;
pub mod types;
pub mod validate;
pub mod vm;
