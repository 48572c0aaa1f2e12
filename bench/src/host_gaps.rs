//! `nervix-bench host-gaps`: how long, and how regularly, this machine takes a CPU away from a
//! thread that never sleeps.
//!
//! One thread per requested CPU, pinned, reads the monotonic clock in a tight loop; two reads
//! further apart than the threshold mean the thread did not run in between — preempted inside
//! the machine (visible to `perf sched`) or, in a virtual machine, the vCPU taken by the host
//! (visible to nothing inside it but `steal`). The half-load latency tail of
//! `producer-filter-map` is made of such gaps when they reach a few hundred microseconds, so
//! the probe reports them the way the tail needs: how many, how long, and whether they recur
//! at a fixed phase of a period (a host's 100 ms scheduling period shows up as most gaps in
//! one or two 1 ms bins of the phase modulo 100 ms).
//!
//! The summary ([`summarize`]) is pure; only [`probe`] touches threads and clocks.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

/// Gaps recorded per CPU at most; later ones are counted but not kept for the phase figure.
pub const MAX_GAPS_PER_CPU: usize = 100_000;
/// The period whose phase the summary bins gaps by, in ms (a common host scheduling period).
pub const PHASE_PERIOD_MS: u64 = 100;
/// Upper bounds of the gap-length buckets, in µs (the last bucket has none).
pub const BUCKET_BOUNDS_US: [u64; 4] = [400, 800, 1_600, 3_200];
/// The longest probe the command accepts, in seconds.
pub const MAX_SECONDS: f64 = 600.0;

/// One gap: when it began (ns since the probe started) and how long it was (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub start_ns: u64,
    pub length_ns: u64,
}

/// What one CPU's thread saw.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuGaps {
    pub cpu: usize,
    pub gaps: u64,
    pub total_ms: f64,
    pub max_us: f64,
    /// Gaps per length bucket: below 400 µs, 400–800, 800–1,600, 1,600–3,200, and longer.
    pub buckets: [u64; 5],
    /// The 1 ms bin of `start mod 100 ms` that holds the most kept gaps, and how many it holds.
    pub top_phase_ms: u64,
    pub top_phase_gaps: u64,
}

impl CpuGaps {
    /// One line for people: count, total, longest, buckets, the recurring phase.
    pub fn line(&self) -> String {
        format!(
            "cpu {}: {} gaps, {:.2} ms in all, longest {:.0} µs; by length <400 / 400-800 / \
             800-1600 / 1600-3200 / longer µs: {} / {} / {} / {} / {}; {} of them start in the \
             same 1 ms of every {PHASE_PERIOD_MS} ms (at {} ms)",
            self.cpu,
            self.gaps,
            self.total_ms,
            self.max_us,
            self.buckets[0],
            self.buckets[1],
            self.buckets[2],
            self.buckets[3],
            self.buckets[4],
            self.top_phase_gaps,
            self.top_phase_ms,
        )
    }

    /// The JSON object of one CPU.
    pub fn to_json(&self) -> Value {
        json!({
            "cpu": self.cpu,
            "gaps": self.gaps,
            "total_ms": self.total_ms,
            "max_us": self.max_us,
            "buckets": self.buckets,
            "top_phase_ms": self.top_phase_ms,
            "top_phase_gaps": self.top_phase_gaps,
        })
    }
}

/// Summarizes one CPU's gaps (`kept` are the first [`MAX_GAPS_PER_CPU`]; `count` and the
/// totals cover all of them).
pub fn summarize(cpu: usize, kept: &[Gap], count: u64, total_ns: u64, max_ns: u64) -> CpuGaps {
    let mut buckets = [0u64; 5];
    let mut phase_bins = [0u64; PHASE_PERIOD_MS as usize];
    for gap in kept {
        let length_us = gap.length_ns / 1_000;
        let bucket = BUCKET_BOUNDS_US
            .iter()
            .position(|bound| length_us < *bound)
            .unwrap_or(BUCKET_BOUNDS_US.len());
        buckets[bucket] += 1;
        let phase_ms = (gap.start_ns / 1_000_000) % PHASE_PERIOD_MS;
        phase_bins[phase_ms as usize] += 1;
    }
    let (top_phase_ms, top_phase_gaps) = phase_bins
        .iter()
        .enumerate()
        .max_by_key(|(bin, gaps)| (**gaps, std::cmp::Reverse(*bin)))
        .map(|(bin, gaps)| (bin as u64, *gaps))
        .unwrap_or((0, 0));
    CpuGaps {
        cpu,
        gaps: count,
        total_ms: total_ns as f64 / 1e6,
        max_us: max_ns as f64 / 1e3,
        buckets,
        top_phase_ms,
        top_phase_gaps,
    }
}

/// Spins one pinned thread per CPU in `cpus` for `seconds` and summarizes every gap of at
/// least `threshold_us`. All threads share one start instant, so phases compare across CPUs.
pub fn probe(cpus: &[usize], seconds: f64, threshold_us: u64) -> anyhow::Result<Vec<CpuGaps>> {
    if cpus.is_empty() {
        bail!("--cpus needs at least one CPU");
    }
    if !(seconds > 0.0 && seconds <= MAX_SECONDS) {
        bail!("--seconds must be above 0 and at most {MAX_SECONDS}");
    }
    if threshold_us == 0 {
        bail!("--threshold-us must be at least 1");
    }
    let duration = Duration::from_secs_f64(seconds);
    let threshold = Duration::from_micros(threshold_us);
    let start = Instant::now() + Duration::from_millis(20);
    let threads: Vec<_> = cpus
        .iter()
        .map(|&cpu| {
            std::thread::Builder::new()
                .name(format!("gap-probe-{cpu}"))
                .spawn(move || spin(cpu, start, duration, threshold))
                .context("cannot start a probe thread")
        })
        .collect::<anyhow::Result<_>>()?;
    threads
        .into_iter()
        .map(|thread| {
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("a probe thread panicked"))?
        })
        .collect()
}

fn spin(
    cpu: usize,
    start: Instant,
    duration: Duration,
    threshold: Duration,
) -> anyhow::Result<CpuGaps> {
    crate::affinity::pin_current_thread(&[cpu])?;
    let mut kept = Vec::with_capacity(MAX_GAPS_PER_CPU);
    let (mut count, mut total_ns, mut max_ns) = (0u64, 0u64, 0u64);
    while Instant::now() < start {}
    let end = start + duration;
    let mut previous = Instant::now();
    while previous < end {
        let now = Instant::now();
        let gap = now - previous;
        if gap >= threshold {
            let length_ns = gap.as_nanos() as u64;
            count += 1;
            total_ns += length_ns;
            max_ns = max_ns.max(length_ns);
            if kept.len() < MAX_GAPS_PER_CPU {
                kept.push(Gap {
                    start_ns: (previous - start).as_nanos() as u64,
                    length_ns,
                });
            }
        }
        previous = now;
    }
    Ok(summarize(cpu, &kept, count, total_ns, max_ns))
}

#[cfg(test)]
mod tests {
    use super::{summarize, Gap};

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    #[test]
    fn gaps_fall_into_length_buckets_and_the_recurring_phase_wins() {
        let kept = [
            // Three gaps 100 ms apart at phase 70 ms: the recurring one.
            Gap {
                start_ns: 70 * MS + 300 * US,
                length_ns: 620 * US,
            },
            Gap {
                start_ns: 170 * MS + 400 * US,
                length_ns: 610 * US,
            },
            Gap {
                start_ns: 270 * MS + 100 * US,
                length_ns: 1_700 * US,
            },
            // Two scattered ones.
            Gap {
                start_ns: 12 * MS,
                length_ns: 300 * US,
            },
            Gap {
                start_ns: 145 * MS,
                length_ns: 5_000 * US,
            },
        ];
        let total: u64 = kept.iter().map(|g| g.length_ns).sum();
        let summary = summarize(1, &kept, 7, total, 5_000 * US);
        assert_eq!(
            summary.gaps, 7,
            "the count covers gaps beyond the kept ones"
        );
        assert_eq!(summary.buckets, [1, 2, 0, 1, 1]);
        assert_eq!((summary.top_phase_ms, summary.top_phase_gaps), (70, 3));
        assert_eq!(summary.max_us, 5_000.0);
        assert!((summary.total_ms - 8.23).abs() < 1e-9);
    }

    #[test]
    fn no_gaps_summarize_to_zeroes() {
        let summary = summarize(0, &[], 0, 0, 0);
        assert_eq!(summary.buckets, [0; 5]);
        assert_eq!((summary.gaps, summary.top_phase_gaps), (0, 0));
    }
}
