//! Paced submission without spinning: a Linux `timerfd` armed for each due instant and awaited
//! through tokio's reactor.
//!
//! tokio's timer wheel ticks in whole milliseconds, so sleeping on it releases paced batches
//! in bursts, and yielding in a loop until the instant (what the bench did) keeps the client
//! thread at 100 % of a core — on a small machine, CPU the shard under test then loses. A
//! timerfd fires on the kernel's high-resolution timers (tens of microseconds late at most)
//! and the thread sleeps in `epoll_wait` meanwhile, so the runtime stays free for the
//! consumer task and the core for the shard.

// The timerfd calls are libc FFI; each block states what it relies on.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// One timer; `wait_until` may be called any number of times, one wait at a time.
pub struct Pacer {
    timer: AsyncFd<OwnedFd>,
}

impl Pacer {
    /// A monotonic, non-blocking timerfd registered with the current tokio runtime.
    pub fn new() -> io::Result<Pacer> {
        // SAFETY: timerfd_create takes no pointers; a non-negative result is a new descriptor
        // that only this `OwnedFd` owns (and closes).
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the `OwnedFd` is moved into the `AsyncFd`, which owns it until dropped, so
        // the descriptor stays open and the same for the registration's lifetime.
        let timer = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(Pacer { timer })
    }

    /// Returns at `due` (at once when it has passed).
    pub async fn wait_until(&mut self, due: Instant) -> io::Result<()> {
        let Some(remaining) = due
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        else {
            return Ok(());
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: remaining.as_secs() as libc::time_t,
                tv_nsec: remaining.subsec_nanos() as libc::c_long,
            },
        };
        let fd = self.timer.get_ref().as_raw_fd();
        // SAFETY: `fd` is our open timerfd; `spec` is a valid itimerspec for the call's
        // duration and the old value is not requested (null).
        if unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut ready = self.timer.readable().await?;
            let mut expirations = 0u64;
            // SAFETY: reads 8 bytes (the expiration count) into a u64 we own.
            let read = unsafe {
                libc::read(
                    fd,
                    (&mut expirations as *mut u64).cast::<libc::c_void>(),
                    std::mem::size_of::<u64>(),
                )
            };
            if read == std::mem::size_of::<u64>() as isize {
                return Ok(());
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::WouldBlock {
                return Err(error);
            }
            ready.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::Pacer;

    #[tokio::test(flavor = "current_thread")]
    async fn waits_until_the_instant_and_not_for_a_past_one() {
        let mut pacer = Pacer::new().unwrap();
        for wait in [Duration::from_micros(300), Duration::from_millis(3)] {
            let due = Instant::now() + wait;
            pacer.wait_until(due).await.unwrap();
            assert!(Instant::now() >= due);
        }
        let started = Instant::now();
        pacer
            .wait_until(started - Duration::from_millis(1))
            .await
            .unwrap();
        assert!(started.elapsed() < Duration::from_millis(100));
    }
}
