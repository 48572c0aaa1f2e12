//! The shards' monotonic physical clock.
//!
//! Flush timers, branch TTLs and acknowledgement deadlines take instants as plain nanosecond
//! counts ([`crate::flush`], [`crate::branch_lifecycle`]) so they stay free of I/O and easy to
//! test. This module is where a running shard gets those counts: nanoseconds on
//! [`std::time::Instant`]'s monotonic clock, measured from one anchor shared by the whole
//! process (fixed the first time any thread asks), so instants taken on different shards are
//! comparable.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

static ANCHOR: OnceLock<Instant> = OnceLock::new();

/// The process-wide anchor: the instant the clock was first read.
pub fn anchor() -> Instant {
    *ANCHOR.get_or_init(Instant::now)
}

/// Nanoseconds since [`anchor`] on the monotonic clock; never goes backwards.
///
/// A `u64` of nanoseconds lasts about 584 years of uptime; past that the value saturates.
pub fn physical_now_ns() -> u64 {
    let anchor = anchor();
    duration_ns(Instant::now().saturating_duration_since(anchor))
}

/// Converts an [`Instant`] into this clock's nanosecond count (0 for instants before the
/// anchor).
pub fn instant_ns(instant: Instant) -> u64 {
    duration_ns(instant.saturating_duration_since(anchor()))
}

/// A duration as whole nanoseconds, saturating at `u64::MAX`.
pub fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_goes_backwards() {
        let mut last = physical_now_ns();
        for _ in 0..1_000 {
            let now = physical_now_ns();
            assert!(now >= last);
            last = now;
        }
    }

    #[test]
    fn instants_map_onto_the_same_scale() {
        let before = physical_now_ns();
        let instant = Instant::now();
        let after = physical_now_ns();
        let ns = instant_ns(instant);
        assert!(before <= ns && ns <= after);
    }

    #[test]
    fn durations_saturate() {
        assert_eq!(duration_ns(Duration::from_micros(3)), 3_000);
        assert_eq!(duration_ns(Duration::MAX), u64::MAX);
    }
}
