//! The thread-per-core runtime of Nervix.
//!
//! This crate owns what runs on the shard cores: pinned glommio executors, the shard mesh that
//! connects them, branch → shard hashing, relays (owner buffers, capacity, backpressure), route
//! batchers and flush timers, the branch lifecycle (TTL, LRU eviction) and the bounded worker
//! classes. It depends on no other Nervix crate.
//!
//! The runtime ([`runtime`]): [`runtime::ShardSet`] starts one glommio `LocalExecutor` per
//! shard on its own thread (`nervix-shard-<i>`, pinned with `Placement::Fixed` unless told
//! not to, with explicit io_uring memory and ring depth so it starts under an 8 MiB
//! `ulimit -l`), connects the shard mesh ([`mesh`]: bounded SPSC glommio channels between
//! every pair of shards, backpressure and no drops) and runs the engine's main task on each
//! shard with a [`runtime::ShardContext`] (shard index, bounded control → shard command queue,
//! mesh). Tasks that run too long without yielding are logged and counted ([`stall`]); a
//! shard whose heartbeat falls silent is signalled awake ([`wake_watchdog`]); shards read
//! time from one monotonic process clock ([`clock`]). `shards/README.md` covers the kernel
//! limits the runtime needs.
//!
//! The I/O-free core those executors run: acknowledgement slabs ([`ack`]), branch keys and
//! branch → shard placement ([`branch_key`]; kept keys are inline when short, [`key_bytes`]),
//! branch lifecycle tables (TTL sweeps, LRU eviction, eviction counters;
//! [`branch_lifecycle`]), per-branch state maps kept in slabs ([`slab_map`]), route flush
//! decisions ([`flush`]) and relay owner buffers ([`relay_buffer`]).

pub mod ack;
pub mod branch_key;
pub mod branch_lifecycle;
pub mod clock;
pub mod flush;
pub mod key_bytes;
pub mod mesh;
pub mod relay_buffer;
pub mod runtime;
pub mod slab_map;
pub mod stall;
pub mod wake_watchdog;
pub mod workers;
