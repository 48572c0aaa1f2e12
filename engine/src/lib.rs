//! The Nervix engine.
//!
//! This crate owns what turns NSPL into a running graph: models (validated, typed catalog
//! entities), validation against the catalog, the planner, the expression VM over Arrow, codecs
//! (JSON, Avro, CBOR, JAQ), processors, the ingestor and emitter runtime, acknowledgements,
//! domains and time, the control-plane state machine, metrics, and the `nervix` command-line
//! binary. It may depend on every other Nervix crate except `nervix-bench`.
//!
//! What exists today is the binary's offline front end — `nervix fmt`, `nervix check` and
//! `nervix version`, built on `nervix-nspl` (re-exported as [`nspl`]) and living in the
//! binary's `cli` modules. The
//! runtime described above arrives with later issues; until then this library is empty.

/// The NSPL front end, re-exported so crates above the engine (benchmarks) reach the language
/// through the engine, as DESIGN §2's dependency table has it.
pub use nervix_nspl as nspl;
