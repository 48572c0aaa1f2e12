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

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;

/// The global allocator of every Nervix binary: mimalloc, entered the way its plain `malloc`
/// would be for word-aligned requests, and with small over-aligned requests rounded up to a
/// power-of-two size.
///
/// mimalloc's Rust binding sends every request through `mi_malloc_aligned`. For a
/// word-aligned one that is the same free-list pop as `mi_malloc` while the page has free
/// blocks, but when the page has none its fallback over-allocates (size + align − 1 bytes),
/// so a type's allocations spill into the next size class's pages; on Nexmark q5's shard
/// thread 8 % of the samples were on that path (perf/RESULTS.md, session 36). Word-aligned
/// requests therefore go to `mi_malloc` (Rust's `System` allocator draws the same line for
/// `malloc`).
///
/// Arrow allocates every buffer 128-byte aligned on x86_64 (`arrow_buffer::alloc::ALIGNMENT`),
/// in multiples of 64 bytes. mimalloc aligns a power-of-two block of up to 4 KiB naturally, so
/// such a request is a plain free-list pop; a smaller size than the alignment (a 64-byte
/// buffer) always takes the over-allocating path — a 192-byte block, an interior pointer, and
/// a page marked as holding interior pointers, whose frees must then find each block's start
/// — and any other size takes it whenever the next free block is not aligned. So every
/// request aligned to more than a word and of at most 4 KiB is rounded up to the next power of
/// two (at least the alignment), which mimalloc serves aligned from its free lists. Larger
/// requests pass unchanged.
pub struct DataPlaneAllocator;

/// The largest size [`DataPlaneAllocator`] rounds: mimalloc aligns power-of-two blocks
/// naturally up to 4 KiB (`MI_PAGE_MAX_START_BLOCK_ALIGN2`).
const NATURALLY_ALIGNED_MAX_BYTES: usize = 4096;

/// The size to request for `size` bytes aligned to `align`: unchanged unless the request is
/// more than word-aligned and small, then the next power of two at least `align` (a multiple of it, so
/// mimalloc's naturally aligned block satisfies the alignment).
fn request_size(size: usize, align: usize) -> usize {
    if align <= WORD_ALIGN_BYTES || size > NATURALLY_ALIGNED_MAX_BYTES {
        return size;
    }
    size.max(align).next_power_of_two()
}

/// Every mimalloc block is aligned to a word (its smallest size class is one word).
const WORD_ALIGN_BYTES: usize = 8;

/// Whether `layout` is served by plain `mi_malloc`: at most word-aligned and no smaller than
/// its alignment.
fn plainly_aligned(layout: Layout) -> bool {
    layout.align() <= WORD_ALIGN_BYTES && layout.align() <= layout.size()
}

/// `layout` with its size as [`request_size`] rounds it.
fn requested(layout: Layout) -> Layout {
    Layout::from_size_align(request_size(layout.size(), layout.align()), layout.align())
        .expect("a rounded size is at most 4 KiB, or the caller's own valid size")
}

// SAFETY: every method forwards to mimalloc's `GlobalAlloc`, which honours any layout; a
// rounded request asks for at least the caller's size at the caller's alignment, so the
// caller's layout fits the block, and mimalloc frees and reallocates a block by its pointer
// whatever size it was requested with.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for DataPlaneAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plainly_aligned(layout) {
            // SAFETY: mimalloc's `mi_malloc` takes any size.
            return unsafe { libmimalloc_sys::mi_malloc(layout.size()).cast() };
        }
        // SAFETY: the rounded layout has a non-zero size when the caller's has.
        unsafe { MiMalloc.alloc(requested(layout)) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plainly_aligned(layout) {
            // SAFETY: as `alloc`.
            return unsafe { libmimalloc_sys::mi_zalloc(layout.size()).cast() };
        }
        // SAFETY: as `alloc`.
        unsafe { MiMalloc.alloc_zeroed(requested(layout)) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with the rounded layout (mimalloc reads neither).
        unsafe { MiMalloc.dealloc(ptr, requested(layout)) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= WORD_ALIGN_BYTES && layout.align() <= new_size {
            // SAFETY: `ptr` came from this allocator; mimalloc keeps the first
            // `min(old, new)` bytes, and every block it returns is word aligned.
            return unsafe { libmimalloc_sys::mi_realloc(ptr.cast(), new_size).cast() };
        }
        let size = request_size(new_size, layout.align());
        // SAFETY: `ptr` came from this allocator with `layout`'s alignment; mimalloc keeps the
        // alignment and the first `min(old, new)` bytes.
        unsafe { MiMalloc.realloc(ptr, requested(layout), size) }
    }
}

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

#[cfg(test)]
mod tests {
    use super::request_size;

    #[test]
    fn small_over_aligned_requests_round_to_a_power_of_two_at_least_the_alignment() {
        // Arrow's 128-byte-aligned buffers, sized in multiples of 64.
        assert_eq!(request_size(64, 128), 128);
        assert_eq!(request_size(128, 128), 128);
        assert_eq!(request_size(192, 128), 256);
        assert_eq!(request_size(4096, 128), 4096);
        assert_eq!(request_size(1, 64), 64);
        // Past mimalloc's naturally aligned sizes, and ordinarily aligned requests: unchanged.
        assert_eq!(request_size(4160, 128), 4160);
        assert_eq!(request_size(24, 8), 24);
        assert_eq!(request_size(24, 16), 32);
    }
}
