//! Stall detection: shard work that runs past its budget without yielding.
//!
//! A shard is cooperative: a task that computes for 50 ms without an `.await` holds up every
//! other branch on that core. Every task the runtime starts on a shard (the shard's main task
//! and whatever is spawned through [`ShardContext::spawn_into`]) is wrapped in [`Watched`],
//! which times each poll; a poll that runs longer than
//! [`RuntimeConfig::stall_budget_ms`] is logged with `tracing::warn!` (shard, task queue name,
//! how long it ran, the budget) and counted in the shard's [`StallCounters`] slot, readable
//! through [`ShardSet::stall_counts`].
//!
//! Why not glommio's own detector alone: glommio 0.9's `StallDetectionHandler::stall` takes a
//! `StallDetection` from a private module, so a handler outside glommio cannot be written that
//! sees the report (only `threshold` and `signal` can be overridden); its default handler logs
//! through the `log` crate, not tracing, and cannot count. It remains useful for one thing
//! the poll timer cannot give: a backtrace of the stalled code, sampled with `SIGUSR1` while it
//! runs. [`RuntimeConfig::stall_backtraces`] turns it on with [`BacktraceStallHandler`], whose
//! threshold lines glommio's alarm up with the same budget; its reports arrive as `log`
//! records (target `glommio::executor::stall`), which a tracing subscriber with the `log`
//! bridge shows.
//!
//! A poll that never returns (an endless loop) is never reported by either: both report when
//! the stalled code finally yields.
//!
//! [`ShardContext::spawn_into`]: crate::runtime::ShardContext::spawn_into
//! [`RuntimeConfig::stall_budget_ms`]: crate::runtime::RuntimeConfig::stall_budget_ms
//! [`RuntimeConfig::stall_backtraces`]: crate::runtime::RuntimeConfig::stall_backtraces
//! [`ShardSet::stall_counts`]: crate::runtime::ShardSet::stall_counts

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use glommio::{StallDetectionHandler, TaskQueueHandle};

/// The smallest threshold handed to glommio past a queue's expected run time, so a queue that
/// yields right at its preemption point is not reported.
const MIN_THRESHOLD: Duration = Duration::from_micros(500);

/// Per-shard stall counts, shared between the shards (which count) and the [`ShardSet`]
/// (which reads).
///
/// [`ShardSet`]: crate::runtime::ShardSet
#[derive(Debug, Clone)]
pub struct StallCounters {
    slots: Arc<[StallSlot]>,
}

#[derive(Debug, Default)]
struct StallSlot {
    stalls: AtomicU64,
    stalled_ns: AtomicU64,
}

impl StallCounters {
    /// Counters for `shards` shards, all zero.
    pub fn new(shards: usize) -> Self {
        Self {
            slots: (0..shards).map(|_| StallSlot::default()).collect(),
        }
    }

    /// Stalls reported on each shard so far, indexed by shard.
    pub fn counts(&self) -> Vec<u64> {
        self.slots
            .iter()
            .map(|slot| slot.stalls.load(Ordering::Relaxed))
            .collect()
    }

    /// Stalls reported on `shard` so far (0 for a shard that does not exist).
    pub fn count(&self, shard: usize) -> u64 {
        self.slots
            .get(shard)
            .map_or(0, |slot| slot.stalls.load(Ordering::Relaxed))
    }

    /// Total time the stalled polls on `shard` ran, in nanoseconds (0 for a shard that does
    /// not exist).
    pub fn stalled_ns(&self, shard: usize) -> u64 {
        self.slots
            .get(shard)
            .map_or(0, |slot| slot.stalled_ns.load(Ordering::Relaxed))
    }

    /// Counts one stall of length `ran` on `shard`.
    pub fn record(&self, shard: usize, ran: Duration) {
        if let Some(slot) = self.slots.get(shard) {
            slot.stalls.fetch_add(1, Ordering::Relaxed);
            slot.stalled_ns
                .fetch_add(crate::clock::duration_ns(ran), Ordering::Relaxed);
        }
    }
}

/// What a [`Watched`] future needs to report: its shard, its queue and the budget.
#[derive(Debug, Clone)]
pub struct StallWatch {
    shard: usize,
    queue: Rc<str>,
    budget: Option<Duration>,
    counters: StallCounters,
}

impl StallWatch {
    /// Reports polls longer than `budget` (never, when `budget` is `None`) as stalls of
    /// `queue` on `shard`.
    pub fn new(
        shard: usize,
        queue: Rc<str>,
        budget: Option<Duration>,
        counters: StallCounters,
    ) -> Self {
        Self {
            shard,
            queue,
            budget,
            counters,
        }
    }

    /// The task queue name reports carry.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Wraps `future` so each of its polls is timed against the budget.
    pub fn watch<F: Future>(&self, future: F) -> Watched<F> {
        Watched {
            inner: Box::pin(future),
            watch: self.clone(),
        }
    }

    fn check(&self, ran: Duration) {
        let Some(budget) = self.budget else {
            return;
        };
        if ran <= budget {
            return;
        }
        self.counters.record(self.shard, ran);
        tracing::warn!(
            shard = self.shard,
            queue = %self.queue,
            ran_ms = ran.as_secs_f64() * 1e3,
            budget_ms = budget.as_secs_f64() * 1e3,
            "shard {} stalled: task queue '{}' ran {:.1} ms without yielding (stall budget {} ms)",
            self.shard,
            self.queue,
            ran.as_secs_f64() * 1e3,
            budget.as_millis(),
        );
    }
}

/// A future whose polls are timed; see the [module documentation](self).
pub struct Watched<F> {
    inner: Pin<Box<F>>,
    watch: StallWatch,
}

impl<F> std::fmt::Debug for Watched<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("watch", &self.watch)
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if self.watch.budget.is_none() {
            return self.inner.as_mut().poll(cx);
        }
        let started = Instant::now();
        let result = self.inner.as_mut().poll(cx);
        self.watch.check(started.elapsed());
        result
    }
}

/// glommio's stall detector, tuned to a shard's budget, for stall backtraces.
///
/// glommio arms its alarm at the queue's preemption timer plus [`Self::threshold`]; the
/// threshold tops that up to the budget (at least 500 µs past the preemption timer, so a queue
/// that yields on time is not reported). Reports go through glommio's default handler: a `log`
/// warning with the sampled backtrace.
#[derive(Debug)]
pub struct BacktraceStallHandler {
    budget: Duration,
}

impl BacktraceStallHandler {
    /// A handler that reports a task queue once it has run `budget` without yielding.
    pub fn new(budget: Duration) -> Self {
        Self { budget }
    }

    /// The preemption timer a shard with this stall budget should use when backtraces are on:
    /// half the budget (at least 100 µs, at most glommio's default 100 ms), so glommio's
    /// alarm can sound at the budget rather than past the 100 ms default timer.
    pub fn preempt_timer_for(budget: Duration) -> Duration {
        (budget / 2).clamp(Duration::from_micros(100), Duration::from_millis(100))
    }
}

impl StallDetectionHandler for BacktraceStallHandler {
    fn threshold(
        &self,
        _queue_handle: TaskQueueHandle,
        max_expected_runtime: Duration,
    ) -> Option<Duration> {
        Some(
            self.budget
                .saturating_sub(max_expected_runtime)
                .max(MIN_THRESHOLD),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_tops_up_to_the_budget() {
        let budget = Duration::from_millis(10);
        let handler = BacktraceStallHandler::new(budget);
        let preempt = BacktraceStallHandler::preempt_timer_for(budget);
        assert_eq!(preempt, Duration::from_millis(5));
        let threshold = handler
            .threshold(TaskQueueHandle::default(), preempt)
            .unwrap_or_default();
        assert_eq!(threshold + preempt, budget);
        let late = handler
            .threshold(TaskQueueHandle::default(), Duration::from_millis(100))
            .unwrap_or_default();
        assert_eq!(late, MIN_THRESHOLD);
    }

    #[test]
    fn counters_count_per_shard() {
        let counters = StallCounters::new(2);
        counters.record(1, Duration::from_millis(50));
        counters.record(7, Duration::from_millis(50));
        assert_eq!(counters.counts(), vec![0, 1]);
        assert_eq!(counters.stalled_ns(1), 50_000_000);
        assert_eq!(counters.count(9), 0);
    }

    #[test]
    fn watched_polls_are_timed() {
        let counters = StallCounters::new(1);
        let watch = StallWatch::new(
            0,
            Rc::from("test"),
            Some(Duration::from_millis(5)),
            counters.clone(),
        );
        let fast = watch.watch(async { 1 });
        assert_eq!(futures_lite::future::block_on(fast), 1);
        assert_eq!(counters.count(0), 0);
        let slow = watch.watch(async {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
        });
        futures_lite::future::block_on(slow);
        assert_eq!(counters.count(0), 1);
        assert!(counters.stalled_ns(0) >= 20_000_000);
    }

    #[test]
    fn unwatched_without_budget() {
        let counters = StallCounters::new(1);
        let watch = StallWatch::new(0, Rc::from("test"), None, counters.clone());
        futures_lite::future::block_on(watch.watch(async {
            std::thread::sleep(Duration::from_millis(2));
        }));
        assert_eq!(counters.count(0), 0);
        assert_eq!(watch.queue(), "test");
    }
}
