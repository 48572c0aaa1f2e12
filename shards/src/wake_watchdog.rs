//! The wake watchdog: a shard that sleeps through its own timers is woken from outside.
//!
//! Why it exists: a parked glommio executor waits in `io_uring_enter` on its main ring.
//! Timers, network receives and wakes from other threads complete on the latency ring and
//! reach that wait only through a poll of the latency ring linked into the main ring. On
//! 2026-12-01 a shard on the development VM (kernel 6.18) stayed parked for over ten minutes
//! with its 50 ms ticker timer pending and nothing else in flight: the bench run hung until a
//! debugger attached, and the interrupted wait then went on as if nothing had happened.
//! glommio's tracker has reports of the same shape (timers that never fire on some VMs,
//! issues 326 and 547). The cause is outside this repository; the remedy here makes the
//! failure bounded and visible instead of endless and silent.
//!
//! How: each shard runs a heartbeat task that stores the process clock
//! ([`crate::clock`]) every [`HEARTBEAT_PERIOD_MS`]. One watchdog thread per shard set looks
//! every [`WATCHDOG_PERIOD_MS`]; a shard whose heartbeat is older than the configured
//! `stale_wake_ms` gets [`WAKE_SIGNAL`] through `tgkill`. Its handler does nothing, but the
//! signal ends a blocking `io_uring_enter` with `EINTR`, which glommio treats as a wakeup:
//! it processes its due timers and runs. Each stale heartbeat is signalled once (a shard
//! stuck in a long computation is not signalled again and again), counted per shard and
//! logged.
//!
//! Why it is safe: the handler is empty (async-signal-safe) and installed with `SA_RESTART`,
//! so system calls that restart keep doing so; the waits that return `EINTR` instead (poll,
//! epoll, io_uring) are the ones every event loop already retries. A shard that is busy
//! rather than asleep also misses heartbeats; the signal then interrupts nothing (the stall
//! detector, [`crate::stall`], reports that case). A shard clears its thread id before its
//! thread ends, so a finished shard is never signalled.
//!
//! The decision is [`check`], a pure function of the heartbeat, the clock and what was
//! already signalled, tested without threads.

// sigaction, tgkill and gettid are libc FFI; each block states what it relies on.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a shard stores its heartbeat.
pub const HEARTBEAT_PERIOD_MS: u64 = 20;
/// How often the watchdog thread looks at the heartbeats.
pub const WATCHDOG_PERIOD_MS: u64 = 20;
/// The default age past which a heartbeat counts as missed (ten heartbeat periods).
pub const DEFAULT_STALE_WAKE_MS: u64 = 200;
/// The smallest accepted `stale_wake_ms`: a few heartbeat periods, so a healthy shard whose
/// timer fires a little late is not signalled.
pub const MIN_STALE_WAKE_MS: u64 = 5 * HEARTBEAT_PERIOD_MS;
/// The signal that interrupts a parked shard. Its default action is to be ignored, so a
/// stray delivery before the handler is installed is harmless.
pub const WAKE_SIGNAL: libc::c_int = libc::SIGURG;

/// What the watchdog does about one shard at one look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The heartbeat is recent (or the shard has not beaten yet).
    Healthy,
    /// The heartbeat is stale and not yet signalled: signal the shard.
    Wake,
    /// The heartbeat is stale and was signalled already: wait for it to move.
    Signalled,
}

/// Decides about a shard whose last heartbeat was at `beat_ns` (0: none yet) when the clock
/// reads `now_ns`; `signalled_beat_ns` is the heartbeat the last signal was sent for.
pub fn check(beat_ns: u64, now_ns: u64, signalled_beat_ns: Option<u64>, stale_ns: u64) -> Verdict {
    if beat_ns == 0 || now_ns.saturating_sub(beat_ns) <= stale_ns {
        Verdict::Healthy
    } else if signalled_beat_ns == Some(beat_ns) {
        Verdict::Signalled
    } else {
        Verdict::Wake
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// The process clock at the shard's last heartbeat; 0 before the first.
    beat_ns: AtomicU64,
    /// The shard thread's id while it runs; 0 otherwise.
    tid: AtomicI32,
    /// Signals sent to this shard.
    wakes: AtomicU64,
}

/// Per-shard heartbeats and wake counts, shared by the shards (which beat), the watchdog
/// (which reads and signals) and the shard set (which reports).
#[derive(Debug, Clone)]
pub struct Heartbeats {
    slots: Arc<[Slot]>,
}

impl Heartbeats {
    /// Slots for `shards` shards, none beating yet.
    pub fn new(shards: usize) -> Self {
        Self {
            slots: (0..shards).map(|_| Slot::default()).collect(),
        }
    }

    /// Called on the shard's own thread before it runs: records the thread to signal.
    pub fn register_current_thread(&self, shard: usize) {
        if let Some(slot) = self.slots.get(shard) {
            // SAFETY: gettid takes no arguments and cannot fail.
            let tid = unsafe { libc::gettid() };
            slot.tid.store(tid, Ordering::Release);
        }
    }

    /// Called on the shard's thread when it stops running: it is never signalled again.
    pub fn unregister(&self, shard: usize) {
        if let Some(slot) = self.slots.get(shard) {
            slot.tid.store(0, Ordering::Release);
            slot.beat_ns.store(0, Ordering::Release);
        }
    }

    /// Stores a heartbeat for `shard` at the current process clock.
    pub fn beat(&self, shard: usize) {
        if let Some(slot) = self.slots.get(shard) {
            slot.beat_ns
                .store(crate::clock::physical_now_ns().max(1), Ordering::Release);
        }
    }

    /// Signals sent to `shard` so far (0 for a shard that does not exist).
    pub fn wakes(&self, shard: usize) -> u64 {
        self.slots
            .get(shard)
            .map_or(0, |slot| slot.wakes.load(Ordering::Relaxed))
    }

    /// Signals sent to each shard so far, indexed by shard.
    pub fn all_wakes(&self) -> Vec<u64> {
        (0..self.slots.len())
            .map(|shard| self.wakes(shard))
            .collect()
    }
}

/// The running watchdog thread; dropping it stops and joins the thread.
#[derive(Debug)]
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Installs the wake handler and starts the watchdog thread over `heartbeats`.
    pub fn start(heartbeats: Heartbeats, stale_wake_ms: u64) -> std::io::Result<Watchdog> {
        install_wake_handler()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let stale_ns = stale_wake_ms.saturating_mul(1_000_000);
        let thread = std::thread::Builder::new()
            .name("nervix-watchdog".to_owned())
            .spawn(move || watch(&heartbeats, &stopping, stale_ns))?;
        Ok(Watchdog {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn watch(heartbeats: &Heartbeats, stop: &AtomicBool, stale_ns: u64) {
    let mut signalled: Vec<Option<u64>> = vec![None; heartbeats.slots.len()];
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(WATCHDOG_PERIOD_MS));
        let now_ns = crate::clock::physical_now_ns();
        for (shard, slot) in heartbeats.slots.iter().enumerate() {
            let beat_ns = slot.beat_ns.load(Ordering::Acquire);
            if check(beat_ns, now_ns, signalled[shard], stale_ns) != Verdict::Wake {
                continue;
            }
            let tid = slot.tid.load(Ordering::Acquire);
            if tid == 0 {
                continue;
            }
            signalled[shard] = Some(beat_ns);
            slot.wakes.fetch_add(1, Ordering::Relaxed);
            let silent_ms = now_ns.saturating_sub(beat_ns) / 1_000_000;
            match signal_thread(tid) {
                Ok(()) => tracing::warn!(
                    shard,
                    silent_ms,
                    "shard {shard} missed its heartbeat for {silent_ms} ms (parked past its \
                     timers, or busy without yielding); signalled it to wake"
                ),
                Err(error) => tracing::warn!(
                    shard,
                    silent_ms,
                    "shard {shard} missed its heartbeat for {silent_ms} ms and could not be \
                     signalled: {error}"
                ),
            }
        }
    }
}

extern "C" fn on_wake_signal(_: libc::c_int) {}

/// Installs the empty [`WAKE_SIGNAL`] handler once per process.
fn install_wake_handler() -> std::io::Result<()> {
    static INSTALL: Once = Once::new();
    static FAILED: AtomicI32 = AtomicI32::new(0);
    INSTALL.call_once(|| {
        // SAFETY: `action` is fully initialised (zeroed, then handler, flags and an emptied
        // mask); sigaction copies it and we ask for no old action. The handler is an
        // `extern "C"` function that does nothing, so it is async-signal-safe.
        let installed = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_wake_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(WAKE_SIGNAL, &action, std::ptr::null_mut())
        };
        if installed != 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(-1);
            FAILED.store(errno, Ordering::Release);
        }
    });
    match FAILED.load(Ordering::Acquire) {
        0 => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

/// Sends [`WAKE_SIGNAL`] to thread `tid` of this process.
fn signal_thread(tid: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: tgkill takes plain integers; a thread that no longer exists yields ESRCH.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            tid,
            WAKE_SIGNAL as libc::c_long,
        )
    };
    if sent == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::{check, Verdict};

    const STALE_NS: u64 = 200_000_000;

    #[test]
    fn a_recent_or_absent_heartbeat_is_healthy() {
        assert_eq!(check(0, 10_000_000_000, None, STALE_NS), Verdict::Healthy);
        assert_eq!(
            check(1_000, 1_000 + STALE_NS, None, STALE_NS),
            Verdict::Healthy
        );
    }

    #[test]
    fn a_stale_heartbeat_is_signalled_once_until_it_moves() {
        let beat = 5_000_000_000;
        let late = beat + STALE_NS + 1;
        assert_eq!(check(beat, late, None, STALE_NS), Verdict::Wake);
        assert_eq!(check(beat, late, Some(beat), STALE_NS), Verdict::Signalled);
        assert_eq!(
            check(beat, late + 5_000_000_000, Some(beat), STALE_NS),
            Verdict::Signalled
        );
        // The shard beat again, then went quiet again: a new episode.
        let next = late + 10;
        assert_eq!(
            check(next, next + STALE_NS + 1, Some(beat), STALE_NS),
            Verdict::Wake
        );
    }
}
