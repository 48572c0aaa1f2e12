//! The thread-per-core runtime of Nervix.
//!
//! This crate owns what runs on the shard cores: pinned glommio executors, the shard mesh that
//! connects them, branch → shard hashing, relays (owner buffers, capacity, backpressure), route
//! batchers and flush timers, the branch lifecycle (TTL, LRU eviction) and the bounded worker
//! classes. It depends on no other Nervix crate.
//!
//! Nothing of that exists yet: the crate holds its place in the workspace so the dependency
//! graph of DESIGN §2 is fixed from the start, and its runtime arrives with the data-plane
//! issues.
