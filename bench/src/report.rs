//! A run's result: the human table, the one-line JSON object `--json` prints last, and the
//! machine it ran on.

use serde_json::{json, Value};

/// What one scenario run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub scenario: String,
    pub shards: usize,
    /// The requested submit phase, in seconds.
    pub seconds: f64,
    /// From the first submit to the last outcome, in seconds (`rows_per_sec` divides by it).
    pub elapsed_s: f64,
    pub batch_rows: usize,
    /// The `--rate` pacing in rows/s, if any.
    pub rate: Option<u64>,
    pub window: u32,
    pub client_threads: usize,
    /// How long the shards polled before parking: the setting when pinned, at most
    /// `MAX_UNPINNED_SPIN_BEFORE_PARK_US` when unpinned
    /// (`nervix::runtime::applied_spin_before_park_us`).
    pub shard_spin_us: u64,
    /// Rows of batches whose outcome was `Completed`.
    pub rows_in: u64,
    /// Rows the consumer received.
    pub rows_out: u64,
    /// Rows of completed batches whose text matches the filter (known from the generator).
    pub matching: u64,
    pub batches_completed: u64,
    /// Batches with any other terminal outcome.
    pub batches_not_completed: u64,
    pub deliveries: u64,
    pub rows_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// How latency was sampled.
    pub latency_method: &'static str,
    /// Beyond p99, for the scenarios that time every row (None for the others).
    pub tail: Option<LatencyTail>,
    pub rss_bytes: u64,
}

/// The latency tail past the median, and where in time the rows over [`SLOW_ROW_US`] fell:
/// a few dense slots are stalls (the host took a CPU, the shard caught up), many thin ones a
/// wide distribution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyTail {
    pub p90_us: f64,
    pub p999_us: f64,
    /// Rows whose latency exceeded [`SLOW_ROW_US`].
    pub rows_over_1ms: u64,
    /// Of the [`SLOT_MS`] slots of the measured span (by receive time), those holding such a
    /// row, and all of them.
    pub slots_over_1ms: u64,
    pub slots: u64,
}

/// The latency a row is counted slow above: DESIGN §10's p99 target.
pub const SLOW_ROW_US: u64 = 1_000;
/// The width of the time slots slow rows are placed in.
pub const SLOT_MS: u64 = 50;

impl LatencyTail {
    /// The human line under the table.
    pub fn line(&self) -> String {
        format!(
            "tail: p90 {:.1} µs, p99.9 {:.1} µs; {} rows over {SLOW_ROW_US} µs, in {} of {} {SLOT_MS} ms slots",
            floor1(self.p90_us),
            floor1(self.p999_us),
            self.rows_over_1ms,
            self.slots_over_1ms,
            self.slots
        )
    }
}

impl RunResult {
    pub fn passed(&self) -> bool {
        self.rows_out == self.matching && self.rows_in > 0
    }

    pub fn to_json(&self) -> Value {
        let mut object = json!({
            "scenario": self.scenario,
            "shards": self.shards,
            "seconds": self.seconds,
            "elapsed_s": round3(self.elapsed_s),
            "batch_rows": self.batch_rows,
            "rate": self.rate,
            "window": self.window,
            "client_threads": self.client_threads,
            "shard_spin_us": self.shard_spin_us,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "matching": self.matching,
            "batches_completed": self.batches_completed,
            "batches_not_completed": self.batches_not_completed,
            "deliveries": self.deliveries,
            "rows_per_sec": self.rows_per_sec.floor(),
            "p50_us": round3(self.p50_us),
            "p99_us": round3(self.p99_us),
            "max_us": round3(self.max_us),
            "latency": self.latency_method,
            "rss_bytes": self.rss_bytes,
            "machine": machine(),
            "unix_time": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        });
        if let (Some(tail), Some(fields)) = (&self.tail, object.as_object_mut()) {
            fields.insert("p90_us".into(), round3(tail.p90_us).into());
            fields.insert("p999_us".into(), round3(tail.p999_us).into());
            fields.insert("rows_over_1ms".into(), tail.rows_over_1ms.into());
            fields.insert("slots_over_1ms".into(), tail.slots_over_1ms.into());
            fields.insert("slots_50ms".into(), tail.slots.into());
        }
        object
    }

    /// The human table: a header and one row.
    pub fn table(&self) -> String {
        let header = format!(
            "{:<28} {:>6} {:>8} {:>12} {:>12} {:>14} {:>10} {:>10} {:>8}",
            "scenario",
            "shards",
            "seconds",
            "rows in",
            "rows out",
            "rows/s",
            "p50 µs",
            "p99 µs",
            "RSS MiB"
        );
        let row = format!(
            "{:<28} {:>6} {:>8.3} {:>12} {:>12} {:>14.0} {:>10.1} {:>10.1} {:>8.1}",
            self.scenario,
            self.shards,
            round3(self.elapsed_s),
            self.rows_in,
            self.rows_out,
            self.rows_per_sec.floor(),
            floor1(self.p50_us),
            floor1(self.p99_us),
            floor1(self.rss_bytes as f64 / (1024.0 * 1024.0))
        );
        format!("{header}\n{row}")
    }
}

/// Rounds down to one decimal, for the table.
fn floor1(x: f64) -> f64 {
    (x * 10.0).floor() / 10.0
}

/// Rounds down to three decimals (numbers are never rounded up).
fn round3(x: f64) -> f64 {
    (x * 1000.0).floor() / 1000.0
}

/// Peak resident set size of this process (`VmHWM`), in bytes; 0 where unknown.
pub fn peak_rss_bytes() -> u64 {
    crate::cpu::process_peak_rss_bytes(std::process::id())
}

/// CPU model, cores, kernel, and the git commit of the working directory when there is one.
pub fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string());
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    let dirty = commit.as_ref().and_then(|_| {
        git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty())
    });
    json!({
        "cpu": cpu,
        "cores": cores,
        "kernel": kernel,
        "git_commit": commit,
        "git_dirty": dirty,
    })
}
