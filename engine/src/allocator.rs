//! Tuning of the global allocator (mimalloc, DESIGN §13) for a data plane that allocates and
//! frees Arrow buffers of a few hundred KiB to a few MiB per batch.
//!
//! mimalloc's default returns freed memory to the OS by decommitting it; the next batch then
//! faults it back in, and the kernel zeroes every (transparent huge) page again — measured at
//! 13 % of all samples and 7,532 page faults in 3 s of `producer-filter-map-inproc`, against 711
//! with decommits off (perf/RESULTS.md). Keeping freed pages committed costs nothing in
//! steady state: memory follows the configured bounds, and the pages are reused.

/// mimalloc's `mi_option_purge_decommits` (its position in `mi_option_t`, mimalloc 2/3 as
/// libmimalloc-sys 0.1.49 builds it; the binding lists no constant for it).
const MI_OPTION_PURGE_DECOMMITS: libmimalloc_sys::mi_option_t = 5;

/// Applies the data plane's allocator settings; call first thing in `main`.
pub fn tune() {
    // SAFETY: `mi_option_set` only stores an integer in mimalloc's option table; any option
    // index and value is accepted, and it is safe to call at any time from any thread.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DECOMMITS, 0);
    }
}
