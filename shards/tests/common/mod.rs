//! Helpers shared by the shard integration tests.

use std::time::Duration;

/// User + system CPU time from the text of a `/proc/.../stat` file: fields 14 (`utime`) and 15
/// (`stime`), counted after the parenthesised command name (which may hold spaces), in
/// USER_HZ ticks — 100 per second on every architecture Linux supports.
pub fn cpu_time_from_stat(stat: &str) -> Option<Duration> {
    const TICKS_PER_SECOND: u64 = 100;
    // After the name the state is field 3, so utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND))
}
