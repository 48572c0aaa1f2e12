//! The thread-per-core runtime of Nervix.
//!
//! This crate owns what runs on the shard cores: pinned glommio executors, the shard mesh that
//! connects them, branch → shard hashing, relays (owner buffers, capacity, backpressure), route
//! batchers and flush timers, the branch lifecycle (TTL, LRU eviction) and the bounded worker
//! classes. It depends on no other Nervix crate.
//!
//! What exists now is the core logic those executors will run, free of I/O and threads:
//! acknowledgement slabs ([`ack`]), branch keys and branch → shard placement ([`branch_key`]),
//! branch lifecycle tables (TTL sweeps, LRU eviction, eviction counters; [`branch_lifecycle`]),
//! route flush decisions ([`flush`]) and relay owner buffers ([`relay_buffer`]). The pinned
//! executors and the shard mesh arrive with the data-plane issues.

pub mod ack;
pub mod branch_key;
pub mod branch_lifecycle;
pub mod flush;
pub mod relay_buffer;
