//! Helpers shared by the client tests.

pub mod peer;
