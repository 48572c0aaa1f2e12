//! The clocks the data plane reads: UTC wall time for unpaced domains' logical time and the
//! execution snapshot, and a process-monotonic physical clock for FLUSH IMMEDIATE windows,
//! branch TTLs and timeouts (DESIGN §5 "Domains and time").
//!
//! Only the shard driver reads these; the graph and every state machine below it take the
//! instants as arguments, so tests drive them with any time they like.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the Unix epoch, UTC.
pub fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Monotonic nanoseconds since the first call in this process.
pub fn physical_ns() -> u64 {
    let origin = ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
