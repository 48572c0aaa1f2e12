//! The wire protocols of Nervix.
//!
//! This crate owns everything spoken over a socket: the text console protocol, the session
//! protocol (Arrow IPC producers, consumers and subscriptions), the cluster interconnect (Arrow
//! IPC frames), the HTTP/WebSocket server on the shard executors, TLS (rustls), DNS (hickory),
//! the metrics and health endpoints, and the Rust client library. It may depend on
//! `nervix-shards` only.
//!
//! So far it holds [`batch`], the validation of the Arrow IPC batches a client producer submits
//! (and their canonical encoding), [`session`], the session protocol's producer and consumer
//! frames, their encoding, and the server's producer credit ledger, and [`client`], the Rust
//! client library (tokio) that opens producers and consumers over one session connection; the
//! session listener, interconnect and data listeners arrive with the data-plane issues. The console protocol lives in the engine
//! (`nervix::console`): it parses NSPL, and this crate may not depend on `nervix-nspl`
//! (docs/decisions.md).

pub mod batch;
pub mod client;
pub mod http;
pub mod session;
