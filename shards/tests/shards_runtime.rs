//! Integration tests of the shard runtime: real threads, real glommio executors.
//!
//! Most tests run unpinned so they pass on machines that refuse `sched_setaffinity`;
//! `pinned_shards_run_on_their_cpus` checks pinning where the machine allows it.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

mod common;

use futures_lite::future::block_on;
use nervix_shards::runtime::{
    CpuPlacement, RuntimeConfig, RuntimeError, ShardSet, ShardStopped, TrySendError,
};

/// A one-shot reply channel: async-channel with room for one message.
type Reply<T> = async_channel::Sender<T>;

fn reply<T>() -> (Reply<T>, async_channel::Receiver<T>) {
    async_channel::bounded(1)
}

enum Command {
    /// Reply with (shard, value + 1).
    Echo(u64, Reply<(usize, u64)>),
    /// Reply with the shard thread's name and the cpus it may run on.
    WhereAmI(Reply<(Option<String>, String)>),
    /// Reply once the shard starts to receive commands again (used to fill the queue).
    Block(async_channel::Receiver<()>, Reply<()>),
    /// Busy-loop this long without yielding, then reply.
    Spin(Duration, Reply<()>),
    /// End the shard's main task.
    Stop,
    /// Panic on the shard.
    Panic,
}

fn shards(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN)
}

fn config(n: usize) -> RuntimeConfig {
    RuntimeConfig::with_shards(shards(n)).unpinned()
}

fn cpus_allowed() -> String {
    std::fs::read_to_string("/proc/thread-self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The shard main every test uses: serve commands until the queue closes or `Stop`.
fn start(config: RuntimeConfig) -> Result<ShardSet<Command>, RuntimeError> {
    ShardSet::start::<u64, _, _>(config, |ctx| async move {
        while let Some(command) = ctx.commands.recv().await {
            match command {
                Command::Echo(value, reply) => {
                    let _ = reply.send((ctx.shard, value + 1)).await;
                }
                Command::WhereAmI(reply) => {
                    let name = std::thread::current().name().map(str::to_owned);
                    let _ = reply.send((name, cpus_allowed())).await;
                }
                Command::Block(until, reply) => {
                    let _ = reply.send(()).await;
                    let _ = until.recv().await;
                }
                Command::Spin(duration, reply) => {
                    let start = Instant::now();
                    while start.elapsed() < duration {
                        std::hint::spin_loop();
                    }
                    let _ = reply.send(()).await;
                }
                Command::Stop => return,
                Command::Panic => panic!("shard asked to panic"),
            }
        }
    })
}

fn echo(set: &ShardSet<Command>, shard: usize, value: u64) -> (usize, u64) {
    block_on(async {
        let (tx, rx) = reply();
        set.send(shard, Command::Echo(value, tx))
            .await
            .expect("shard running");
        rx.recv().await.expect("shard replies")
    })
}

#[test]
fn one_shard_serves_commands_and_joins() {
    let set = start(config(1)).expect("one shard starts");
    assert_eq!(set.shard_count().get(), 1);
    assert_eq!(set.cpus(), &[None]);
    for value in 0..100 {
        assert_eq!(echo(&set, 0, value), (0, value + 1));
    }
    let (tx, rx) = reply();
    block_on(set.send(0, Command::WhereAmI(tx))).expect("shard running");
    let (name, _) = block_on(rx.recv()).expect("reply");
    assert_eq!(name.as_deref(), Some("nervix-shard-0"));
    assert_eq!(set.join(), vec![Ok(())]);
}

#[test]
fn two_shards_serve_commands_from_other_threads() {
    let set = start(config(2)).expect("two shards start");
    std::thread::scope(|scope| {
        for caller in 0..4u64 {
            let set = &set;
            scope.spawn(move || {
                for value in 0..50 {
                    let shard = ((caller + value) % 2) as usize;
                    assert_eq!(echo(set, shard, value), (shard, value + 1));
                }
            });
        }
    });
    for shard in 0..2 {
        let (tx, rx) = reply();
        block_on(set.send(shard, Command::WhereAmI(tx))).expect("shard running");
        let (name, _) = block_on(rx.recv()).expect("reply");
        assert_eq!(name, Some(format!("nervix-shard-{shard}")));
    }
    assert_eq!(set.join(), vec![Ok(()), Ok(())]);
}

#[test]
fn commands_to_a_missing_or_stopped_shard_fail() {
    let set = start(config(2)).expect("two shards start");
    assert_eq!(
        block_on(set.send(5, Command::Stop)),
        Err(ShardStopped { shard: 5 })
    );
    block_on(set.send(1, Command::Stop)).expect("shard 1 running");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !set.is_finished(1) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(set.is_finished(1));
    // The receiver is gone with the shard: sends fail instead of queueing forever.
    assert_eq!(
        block_on(set.send(1, Command::Stop)),
        Err(ShardStopped { shard: 1 })
    );
    assert!(matches!(
        set.try_send(1, Command::Stop),
        Err(TrySendError::Stopped { shard: 1, .. })
    ));
    assert_eq!(echo(&set, 0, 1), (0, 2));
    assert_eq!(set.join(), vec![Ok(()), Ok(())]);
}

#[test]
fn full_command_queue_pushes_back() {
    let mut config = config(1);
    config.command_capacity = 2;
    let set = start(config).expect("one shard starts");
    let (release, until) = async_channel::bounded(1);
    let (tx, blocked) = reply();
    block_on(set.send(0, Command::Block(until, tx))).expect("shard running");
    block_on(blocked.recv()).expect("shard blocked");
    // The shard is not receiving: two commands fit, the third is handed back.
    let mut queued = 0;
    let refused = loop {
        let (tx, _rx) = reply();
        match set.try_send(0, Command::Echo(queued, tx)) {
            Ok(()) => queued += 1,
            Err(error) => break error,
        }
        assert!(queued <= 2, "the queue holds at most its capacity");
    };
    assert!(matches!(refused, TrySendError::Full { shard: 0, .. }));
    assert!(matches!(refused.into_command(), Command::Echo(_, _)));
    release.send_blocking(()).expect("shard waiting");
    assert_eq!(echo(&set, 0, 41), (0, 42));
    assert_eq!(set.join(), vec![Ok(())]);
}

#[test]
fn commands_queued_to_a_shard_that_stops_are_dropped() {
    let set = start(config(1)).expect("one shard starts");
    let (release, until) = async_channel::bounded(1);
    let (tx, blocked) = reply();
    block_on(set.send(0, Command::Block(until, tx))).expect("shard running");
    block_on(blocked.recv()).expect("shard blocked");
    block_on(set.send(0, Command::Stop)).expect("queued");
    let (tx, never) = reply();
    block_on(set.send(0, Command::Echo(1, tx))).expect("queued behind Stop");
    release.send_blocking(()).expect("shard waiting");
    // The shard stops before the echo; the echo's reply channel closes instead of hanging.
    assert!(block_on(never.recv()).is_err());
    assert_eq!(set.join(), vec![Ok(())]);
}

#[test]
fn a_panicking_shard_is_reported_not_propagated() {
    let set = start(config(2)).expect("two shards start");
    block_on(set.send(1, Command::Panic)).expect("shard 1 running");
    assert_eq!(echo(&set, 0, 7), (0, 8));
    let results = set.join();
    assert_eq!(results[0], Ok(()));
    let panicked = results[1].clone().expect_err("shard 1 panicked");
    assert_eq!(panicked.shard, 1);
    assert!(
        panicked.message.contains("shard asked to panic"),
        "{panicked}"
    );
}

#[test]
fn a_task_that_does_not_yield_is_counted_as_a_stall() {
    let mut config = config(1);
    config.stall_budget_ms = 10;
    let set = start(config).expect("one shard starts");
    assert_eq!(set.stall_counts(), vec![0]);
    let (tx, rx) = reply();
    block_on(set.send(0, Command::Spin(Duration::from_millis(50), tx))).expect("running");
    block_on(rx.recv()).expect("reply");
    // The stall is counted when the poll that spun returns, right after the reply is sent.
    let deadline = Instant::now() + Duration::from_secs(5);
    while set.stall_counts()[0] == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(set.stall_counts()[0] > 0);
    assert!(set.stall_counters().stalled_ns(0) >= 50_000_000);
    assert_eq!(set.join(), vec![Ok(())]);
}

#[test]
fn stall_detection_can_be_turned_off() {
    let mut config = config(1);
    config.stall_budget_ms = 0;
    let set = start(config).expect("one shard starts");
    let (tx, rx) = reply();
    block_on(set.send(0, Command::Spin(Duration::from_millis(20), tx))).expect("running");
    block_on(rx.recv()).expect("reply");
    assert_eq!(echo(&set, 0, 1), (0, 2));
    assert_eq!(set.stall_counts(), vec![0]);
    assert_eq!(set.join(), vec![Ok(())]);
}

#[test]
fn glommio_backtrace_stall_detector_starts() {
    let mut config = config(1);
    config.stall_backtraces = true;
    let set = start(config).expect("one shard starts with glommio's stall detector");
    let (tx, rx) = reply();
    block_on(set.send(0, Command::Spin(Duration::from_millis(30), tx))).expect("running");
    block_on(rx.recv()).expect("reply");
    assert_eq!(echo(&set, 0, 1), (0, 2));
    assert_eq!(set.join(), vec![Ok(())]);
}

/// Starts a pinned configuration; `None` on a machine that refuses `sched_setaffinity`,
/// after checking that the error says what to do.
fn start_pinned(config: RuntimeConfig) -> Option<ShardSet<Command>> {
    match start(config) {
        Ok(set) => Some(set),
        Err(error) => {
            let message = error.to_string();
            assert!(message.contains("unpinned"), "{message}");
            eprintln!("pinning refused here: {message}");
            None
        }
    }
}

#[test]
fn pinned_shards_run_on_their_cpus() {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let shard_count = cores.min(2);
    let mut config = RuntimeConfig::with_shards(shards(shard_count));
    config.cpus = CpuPlacement::Pinned((0..shard_count).collect());
    let Some(set) = start_pinned(config) else {
        return;
    };
    assert_eq!(set.cpus(), (0..shard_count).map(Some).collect::<Vec<_>>());
    for shard in 0..shard_count {
        let (tx, rx) = reply();
        block_on(set.send(shard, Command::WhereAmI(tx))).expect("shard running");
        let (_, cpus) = block_on(rx.recv()).expect("reply");
        assert_eq!(
            cpus,
            shard.to_string(),
            "shard {shard} pinned to cpu {shard}"
        );
    }
    assert!(set.join().iter().all(Result::is_ok));
}

#[test]
fn a_cpu_that_does_not_exist_is_a_clear_start_error() {
    let mut config = RuntimeConfig::with_shards(shards(2));
    config.cpus = CpuPlacement::Pinned(vec![0, 4_000]);
    let error = start(config).err().expect("cpu 4000 does not exist");
    let message = error.to_string();
    assert!(
        matches!(error, RuntimeError::ShardStart { shard: 1, .. }),
        "{message}"
    );
    assert!(message.contains("cpu 4000 is not online"), "{message}");
    assert!(message.contains("run unpinned"), "{message}");
}

#[test]
fn absurd_io_memory_or_ring_depth_is_a_clear_error() {
    let mut config = config(1);
    config.io_memory_bytes = usize::MAX / 2;
    let message = start(config).err().expect("refused").to_string();
    assert!(message.contains("--shard-io-memory"), "{message}");

    let mut config = self::config(1);
    config.ring_depth = 1 << 20;
    let message = start(config).err().expect("refused").to_string();
    assert!(message.contains("ring depth"), "{message}");
}

/// Set in the child process of `a_small_memlock_limit_is_a_clear_start_error`.
const CHILD_ENV: &str = "NERVIX_SHARDS_MEMLOCK_CHILD";

#[test]
fn a_small_memlock_limit_is_a_clear_start_error() {
    if std::env::var_os(CHILD_ENV).is_some() {
        // In the child, under `ulimit -l 256`: starting must fail with a message, no panic.
        let error = start(config(1))
            .err()
            .expect("256 KiB of memlock is too little");
        println!("START ERROR: {error}");
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -l 256 && exec \"$0\" --exact a_small_memlock_limit_is_a_clear_start_error --nocapture")
        .arg(exe)
        .env(CHILD_ENV, "1")
        .output()
        .expect("sh runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("START ERROR: shards cannot start")
            && stdout.contains("`ulimit -l` allows 256 KiB")
            && stdout.contains("raise `ulimit -l` to at least 1536"),
        "{stdout}"
    );
}

#[test]
fn dropping_the_set_stops_the_shards() {
    let set = start(config(2)).expect("two shards start");
    assert_eq!(echo(&set, 1, 1), (1, 2));
    drop(set);
}

/// User + system CPU time of this process's thread named `name`, from /proc.
fn thread_cpu(name: &str) -> Option<Duration> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).ok()?;
        return common::cpu_time_from_stat(&stat);
    }
    None
}

#[test]
fn a_spinning_shard_serves_and_still_parks_when_idle() {
    let mut config = RuntimeConfig::with_shards(shards(1));
    config.cpus = CpuPlacement::Pinned(vec![0]);
    config.spin_before_park_us = 1_000;
    // Spinning needs a pinned shard.
    let Some(set) = start_pinned(config) else {
        return;
    };
    assert_eq!(echo(&set, 0, 41), (0, 42));
    let idle = Duration::from_millis(600);
    let before = thread_cpu("nervix-shard-0").expect("the shard thread is listed");
    std::thread::sleep(idle);
    let used = thread_cpu("nervix-shard-0").expect("the shard thread is listed") - before;
    // Each wake (a heartbeat every few ms) spins at most 1 ms, then the shard parks; a shard
    // that never parked would use the whole idle period.
    assert!(
        used < idle / 2,
        "an idle shard spinning 1 ms per wake used {used:?} of CPU in {idle:?}"
    );
    assert_eq!(echo(&set, 0, 1), (0, 2));
    block_on(set.send(0, Command::Stop)).expect("shard running");
    assert_eq!(set.join(), vec![Ok(())]);
}

#[test]
fn a_spin_past_its_bound_is_a_clear_error() {
    let mut config = config(1);
    config.spin_before_park_us = nervix_shards::runtime::MAX_SPIN_BEFORE_PARK_US + 1;
    let message = start(config).err().expect("refused").to_string();
    assert!(message.contains("--shard-spin-us"), "{message}");
    assert!(message.contains("10000 µs"), "{message}");
}
