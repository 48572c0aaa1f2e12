//! Tuning of the allocators for a data plane that allocates and frees Arrow buffers of a few
//! hundred KiB to a few MiB per batch (mimalloc, the global allocator, DESIGN §13) and
//! librdkafka's per-message allocations (glibc's `malloc`, which the C library uses).
//!
//! mimalloc's default returns freed memory to the OS by decommitting it; the next batch then
//! faults it back in, and the kernel zeroes every (transparent huge) page again — measured at
//! 13 % of all samples and 7,532 page faults in 3 s of `producer-filter-map-inproc`, against 711
//! with decommits off (perf/RESULTS.md). Keeping freed pages committed costs nothing in
//! steady state: memory follows the configured bounds, and the pages are reused.
//!
//! glibc does the same to librdkafka's memory: a thread arena whose free top passes the trim
//! threshold (128 KiB by default) is shrunk with `MADV_DONTNEED`, and blocks above the mmap
//! threshold get a mapping of their own that `free` unmaps. The emitter's shard produces every
//! record through `rd_kafka_produce_batch`, which allocates each message there, so its arena
//! grew and shrank with every delivery-report round: 15,640 page faults on the shard thread in
//! one `kafka-filter-map` run (0.6 s of records), mostly in `sysmalloc` (perf/RESULTS.md,
//! session 9). With both thresholds raised the arenas keep their pages; librdkafka's memory is
//! still bounded by its own queue limits (`queued.max.messages.kbytes`,
//! `queue.buffering.max.kbytes`), it is only not handed back between rounds.
//!
//! Transparent huge pages are turned off for the process. mimalloc asks for them on its arenas
//! (`MADV_HUGEPAGE`), so the first touch of any byte of a 2 MiB region zeroes all of it; a
//! shard whose buffers grow to their working size then spends its time in the kernel's
//! `clear_page_erms` (26.8 % of the shard thread while records flowed in `kafka-filter-map`, on
//! a VM whose fresh pages cost about 1 ms per MiB). With 4 KiB pages only the pages written
//! are zeroed: over 16 alternating runs the shard thread used 680–950 ms of CPU per run
//! without huge pages against 980–1,330 ms with them (perf/RESULTS.md, session 9).

/// mimalloc's `mi_option_purge_decommits` (its position in `mi_option_t`, mimalloc 2/3 as
/// libmimalloc-sys 0.1.49 builds it; the binding lists no constant for it).
const MI_OPTION_PURGE_DECOMMITS: libmimalloc_sys::mi_option_t = 5;

/// glibc `mallopt` parameters (`<malloc.h>`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use std::os::raw::c_int;

    pub const M_TRIM_THRESHOLD: c_int = -1;
    pub const M_MMAP_THRESHOLD: c_int = -3;
    /// Free bytes an arena's top may hold before glibc shrinks it (its default: 128 KiB).
    pub const TRIM_THRESHOLD_BYTES: c_int = 256 << 20;
    /// Blocks from this size up get a mapping of their own: glibc's largest allowed value.
    /// Setting the trim threshold stops glibc's dynamic raising of this one, which would
    /// otherwise stay at 128 KiB and map and unmap every larger librdkafka buffer.
    pub const MMAP_THRESHOLD_BYTES: c_int = 32 << 20;

    extern "C" {
        pub fn mallopt(param: c_int, value: c_int) -> c_int;
    }
}

/// Linux `prctl` and its `PR_SET_THP_DISABLE` (`<linux/prctl.h>`).
#[cfg(target_os = "linux")]
mod linux {
    use std::os::raw::{c_int, c_ulong};

    pub const PR_SET_THP_DISABLE: c_int = 41;

    extern "C" {
        pub fn prctl(
            option: c_int,
            arg2: c_ulong,
            arg3: c_ulong,
            arg4: c_ulong,
            arg5: c_ulong,
        ) -> c_int;
    }
}

/// Applies the data plane's allocator settings; call first thing in `main`, before any thread
/// starts.
pub fn tune() {
    // SAFETY: `mi_option_set` only stores an integer in mimalloc's option table; any option
    // index and value is accepted, and it is safe to call at any time from any thread.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DECOMMITS, 0);
    }
    // SAFETY: `mallopt` only sets glibc's malloc parameters under its own lock; both values
    // are in range (it returns 0 and changes nothing otherwise). Called before the node
    // creates any librdkafka client, so every arena they use follows them.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    unsafe {
        glibc::mallopt(glibc::M_MMAP_THRESHOLD, glibc::MMAP_THRESHOLD_BYTES);
        glibc::mallopt(glibc::M_TRIM_THRESHOLD, glibc::TRIM_THRESHOLD_BYTES);
    }
    // SAFETY: `PR_SET_THP_DISABLE` only sets a flag of this process's memory map, read by
    // later page faults (mappings made before it, mimalloc's first arena among them, are
    // covered too); a kernel without it returns an error and nothing changes.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    unsafe {
        linux::prctl(linux::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
