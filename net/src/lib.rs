//! The wire protocols of Nervix.
//!
//! This crate owns everything spoken over a socket: the text console protocol, the session
//! protocol (Arrow IPC producers, consumers and subscriptions), the cluster interconnect (Arrow
//! IPC frames), the HTTP/WebSocket server on the shard executors, TLS (rustls), DNS (hickory),
//! the metrics and health endpoints, and the Rust client library. It may depend on
//! `nervix-shards` only.
//!
//! Nothing of that exists yet: the crate holds its place in the workspace so the dependency
//! graph of DESIGN §2 is fixed from the start, and its protocols arrive with the console,
//! session and data-listener issues.
