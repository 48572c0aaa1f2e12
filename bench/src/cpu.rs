//! CPU time of this process's threads by part (the node's shards, its librdkafka clients, the
//! bench's watcher, the rest) and of other processes (the Kafka broker), read from `/proc`
//! before and after a timed window: `kafka-filter-map` reports the shares, the Nexmark
//! scenarios the shard's CPU seconds (steadier than wall time on a machine whose other
//! tenants take turns on the cores).
//!
//! Why it is correct: `/proc/<pid>/stat` fields 14 and 15 (`utime`, `stime`) count the whole
//! process including threads that already exited; `/proc/self/task/<tid>/stat` counts one
//! thread. Both are in clock ticks of `USER_HZ`, which the kernel fixes at 100 in its
//! user-space ABI on every architecture this project builds for. A thread born inside the
//! window starts at zero, so its whole time is in the window; a thread that ends inside the
//! window loses its share (the node's threads live for the whole run). Resolution is one tick
//! (10 ms) per thread, so the percentages are only meaningful over windows of seconds.

use std::collections::{BTreeMap, BTreeSet};

/// Clock ticks per second of `/proc` CPU times (Linux `USER_HZ`).
const TICKS_PER_SECOND: f64 = 100.0;

/// Which part of this process a thread belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// `nervix-shard-*`: the node's data shards (which also run the Kafka clients' polls).
    Shard,
    /// `rdk:*` threads of the node's librdkafka clients (the ingestor's consumer, the
    /// emitter's producer).
    NodeRdkafka,
    /// The bench's own output watcher: its polling thread (`bench-watcher`) and its
    /// librdkafka client's threads (known by tid).
    Watcher,
    /// Everything else: the tokio control plane, the node's helpers.
    Other,
}

/// One sample of this process's threads: tid → (name, ticks).
#[derive(Debug, Default, Clone)]
pub struct Threads(BTreeMap<u32, (String, u64)>);

impl Threads {
    /// Reads `/proc/self/task/*/stat` (an empty sample where `/proc` is unreadable).
    pub fn sample() -> Threads {
        let mut threads = BTreeMap::new();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return Threads(threads);
        };
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some((name, ticks)) = stat(&task.path().join("stat")) {
                threads.insert(tid, (name, ticks));
            }
        }
        Threads(threads)
    }

    /// The thread ids of this sample.
    pub fn tids(&self) -> BTreeSet<u32> {
        self.0.keys().copied().collect()
    }

    /// CPU seconds per part between `self` (before) and `after`; `watcher` holds the tids of
    /// the bench's own output watcher.
    pub fn delta(&self, after: &Threads, watcher: &BTreeSet<u32>) -> BTreeMap<Part, f64> {
        let mut parts = BTreeMap::new();
        for (tid, (name, ticks)) in &after.0 {
            let before = self.0.get(tid).map(|(_, t)| *t).unwrap_or(0);
            let part = if watcher.contains(tid) || name.starts_with("bench-watcher") {
                Part::Watcher
            } else if name.starts_with("nervix-shard") {
                Part::Shard
            } else if name.starts_with("rdk:") {
                Part::NodeRdkafka
            } else {
                Part::Other
            };
            *parts.entry(part).or_insert(0.0) +=
                ticks.saturating_sub(before) as f64 / TICKS_PER_SECOND;
        }
        parts
    }
}

/// Per CPU, the clock ticks the hypervisor ran something else while this machine's CPU
/// wanted to run (`steal`, the eighth value of each `cpuN` line of `/proc/stat`; 0 on bare
/// metal). A virtual machine's latency tail follows it: a vCPU the host preempts for 20 ms
/// stalls whatever it was running for 20 ms, which no code inside the machine can prevent, so
/// every run reports how much was taken from it.
#[derive(Debug)]
pub struct Steal(Vec<u64>);

impl Steal {
    /// Reads `/proc/stat` (empty where it is unreadable).
    pub fn sample() -> Steal {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        Steal(parse_steal(&text))
    }

    /// Milliseconds stolen per CPU between `self` (before) and `after`.
    pub fn ms_until(&self, after: &Steal) -> Vec<u64> {
        after
            .0
            .iter()
            .zip(&self.0)
            .map(|(a, b)| a.saturating_sub(*b) * 1000 / TICKS_PER_SECOND as u64)
            .collect()
    }
}

/// The steal ticks of each `cpuN` line (not the `cpu` total), in CPU order.
fn parse_steal(stat: &str) -> Vec<u64> {
    stat.lines()
        .filter(|line| {
            line.strip_prefix("cpu")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .map(|line| {
            line.split_whitespace()
                .nth(8)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        })
        .collect()
}

/// A process's CPU seconds so far (`None` when it is gone or `/proc` is unreadable).
pub fn process_seconds(pid: u32) -> Option<f64> {
    stat(std::path::Path::new(&format!("/proc/{pid}/stat")))
        .map(|(_, ticks)| ticks as f64 / TICKS_PER_SECOND)
}

/// A process's peak resident set size (`VmHWM`), in bytes; 0 where unknown.
pub fn process_peak_rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

/// `(comm, utime + stime)` from a `stat` file. The name sits in parentheses and may hold
/// spaces or parentheses itself, so the fields are counted after the last `)`.
fn stat(path: &std::path::Path) -> Option<(String, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let mut fields = text.get(close + 1..)?.split_whitespace();
    // After the name: state (field 3) … utime (14), stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((name, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_threads_and_cpu_time() {
        let mut spin = 0u64;
        for i in 0..20_000_000u64 {
            spin = spin.wrapping_mul(31).wrapping_add(i);
        }
        assert!(spin != 1);
        let threads = Threads::sample();
        assert!(!threads.tids().is_empty());
        assert!(process_seconds(std::process::id()).is_some());
        assert!(process_peak_rss_bytes(std::process::id()) > 0);
    }

    #[test]
    fn steal_is_read_per_cpu_and_differenced_in_milliseconds() {
        let before = "cpu  10 0 5 900 1 0 2 30 0 0\ncpu0 5 0 2 450 1 0 1 10 0 0\ncpu1 5 0 3 450 0 0 1 20 0 0\nintr 1\n";
        let after = "cpu  10 0 5 900 1 0 2 45 0 0\ncpu0 5 0 2 450 1 0 1 12 0 0\ncpu1 5 0 3 450 0 0 1 33 0 0\nintr 1\n";
        let (before, after) = (Steal(parse_steal(before)), Steal(parse_steal(after)));
        assert_eq!(before.ms_until(&after), vec![20, 130]);
        assert!(!Steal::sample().0.is_empty());
    }

    #[test]
    fn names_with_spaces_and_parentheses_parse() {
        let dir = std::env::temp_dir().join(format!("nervix-bench-stat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stat");
        std::fs::write(
            &path,
            "42 (rdk:b (x) 1) S 1 2 3 4 5 6 7 8 9 10 250 70 0 0 20 0 1 0\n",
        )
        .unwrap();
        assert_eq!(stat(&path), Some(("rdk:b (x) 1".to_string(), 320)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
