//! Nexmark (the auction benchmark of Tucker et al., as Beam and Flink run it) on Nervix:
//! the `nexmark` crate's event generator with a pinned base time ([`gen`]), the NSPL ports in
//! `bench/nexmark/` ([`query`]), reference answers computed directly in Rust ([`reference`]),
//! the end-to-end driver behind the tests and `nervix-bench nexmark-q0|q1|q2` ([`run`]), and
//! the once-through bench of the stateful ports, `nervix-bench nexmark-q5|q7|q8` ([`ordered`]).
//!
//! All six ports run end to end and match their references. `bench/nexmark/README.md`
//! describes each port and how it differs from the Nexmark original.

pub mod gen;
pub mod ordered;
pub mod query;
pub mod reference;
pub mod run;
