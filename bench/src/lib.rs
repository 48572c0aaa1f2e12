//! Benchmarks for Nervix.
//!
//! This crate owns the Nexmark generator and queries, the load drivers, the end-to-end
//! scenarios run by `nervix bench …`, and the criterion micro-benchmarks whose results `perf/`
//! records. It may depend on the `nervix` engine crate.
//!
//! Nothing of that exists yet: the crate holds its place in the workspace so the dependency
//! graph of DESIGN §2 is fixed from the start, and the scenarios arrive once the engine can run
//! a graph.
