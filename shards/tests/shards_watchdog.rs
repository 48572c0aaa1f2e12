//! The wake watchdog through the real runtime: real shard threads, real signals.
//!
//! A glommio executor that sleeps past its timers sits in a blocking `io_uring_enter`; the
//! tests stand in for that with a blocking `poll(2)` on the shard thread, which a signal ends
//! the same way (with `EINTR`), and which keeps the shard's heartbeat from running.

// poll(2) is libc FFI; the block states what it relies on.
#![allow(unsafe_code)]

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use futures_lite::future::block_on;
use nervix_shards::runtime::{RuntimeConfig, RuntimeError, ShardContext, ShardSet};

/// How long the shard blocks at most.
const PARK_MS: i32 = 5_000;

/// What the shard saw: how long the wait lasted and whether a signal ended it.
type Parked = (Duration, bool);
/// The command: where to send what the shard saw.
type Reply = async_channel::Sender<Parked>;

fn config(stale_wake_ms: u64) -> RuntimeConfig {
    RuntimeConfig {
        stale_wake_ms,
        ..RuntimeConfig::with_shards(NonZeroUsize::MIN).unpinned()
    }
}

/// A shard whose main task blocks its thread in `poll(2)` for `park_ms` on each command.
fn start(config: RuntimeConfig, park_ms: i32) -> ShardSet<Reply> {
    ShardSet::start::<u64, _, _>(config, move |ctx: ShardContext<u64, Reply>| async move {
        while let Some(reply) = ctx.commands.recv().await {
            let started = Instant::now();
            // SAFETY: poll with no descriptors reads no memory; it only waits.
            let waited = unsafe { libc::poll(std::ptr::null_mut(), 0, park_ms) };
            let interrupted =
                waited < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
            let _ = reply.send((started.elapsed(), interrupted)).await;
        }
    })
    .expect("one shard starts")
}

fn park(set: &ShardSet<Reply>) -> Parked {
    block_on(async {
        let (tx, rx) = async_channel::bounded(1);
        set.send(0, tx).await.expect("shard running");
        rx.recv().await.expect("shard replies")
    })
}

#[test]
fn a_shard_blocked_past_its_heartbeat_is_signalled_awake() {
    let set = start(config(200), PARK_MS);
    let (waited, interrupted) = park(&set);
    assert!(
        interrupted,
        "the wait ended without a signal after {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(2_000),
        "the watchdog took {waited:?} to wake a shard silent for 200 ms"
    );
    assert_eq!(set.watchdog_wakes(), vec![1]);
    // Woken, the shard beats again and serves the next command. The watchdog signals each
    // stale heartbeat once, so the shard must beat between the two blocks: its executor is
    // idle while the test waits, and its heartbeat runs every 20 ms. (Sending at once raced
    // the heartbeat: the main task took the command and blocked again before it ran.)
    std::thread::sleep(Duration::from_millis(500));
    let (again, _) = park(&set);
    assert!(
        again < Duration::from_millis(2_000),
        "the watchdog took {again:?} to wake the shard a second time"
    );
    assert_eq!(set.watchdog_wakes(), vec![2]);
}

#[test]
fn an_idle_shard_keeps_its_heartbeat_and_is_never_signalled() {
    let set = start(config(200), 0);
    std::thread::sleep(Duration::from_millis(1_000));
    let (_, interrupted) = park(&set);
    assert!(!interrupted);
    assert_eq!(set.watchdog_wakes(), vec![0]);
}

#[test]
fn without_the_watchdog_the_wait_runs_its_course() {
    let set = start(config(0), 600);
    let (waited, interrupted) = park(&set);
    assert!(!interrupted);
    assert!(
        waited >= Duration::from_millis(600),
        "waited only {waited:?}"
    );
    assert_eq!(set.watchdog_wakes(), vec![0]);
}

#[test]
fn a_silence_limit_below_the_minimum_is_refused() {
    let refused =
        ShardSet::<()>::start::<u64, _, _>(config(50), |_: ShardContext<u64, ()>| async {});
    match refused {
        Err(RuntimeError::Config(message)) => assert_eq!(
            message,
            "the wake watchdog's silence limit 50 ms is below its minimum of 100 ms (0 turns \
             the watchdog off)"
        ),
        other => panic!("expected a configuration error, got {other:?}"),
    }
}
