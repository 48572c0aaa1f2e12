//! Nexmark (the auction benchmark of Tucker et al., as Beam and Flink run it) on Nervix:
//! the `nexmark` crate's event generator with a pinned base time ([`gen`]), the NSPL ports in
//! `bench/nexmark/` ([`query`]), reference answers computed directly in Rust ([`reference`]),
//! and the end-to-end driver behind the tests and `nervix-bench nexmark-q<N>` ([`run`]).
//!
//! q0, q1 and q2 run end to end today; q5, q7 and q8 are written with the WINDOW PROCESSOR
//! and the CORRELATOR and pass validation, but a domain start still refuses those
//! processors. `bench/nexmark/README.md` describes each port and how it differs from the
//! Nexmark original.

pub mod gen;
pub mod query;
pub mod reference;
pub mod run;
