//! Bounded worker classes: admission up to workers + queue, refusal beyond, results, panic
//! isolation, counters and shutdown. No test sleeps: jobs are held on channels the test
//! releases, and waits are on those channels.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use futures_lite::future::block_on;
use nervix_shards::workers::{
    default_extension_workers, ClassFull, JobError, Slots, WorkerClass, WorkerClassConfig,
    WorkerCounters, DEFAULT_QUEUE_JOBS, EXTENSION_CLASS,
};

fn class(workers: usize, queue_jobs: usize) -> WorkerClass {
    let config = WorkerClassConfig {
        queue_jobs,
        ..WorkerClassConfig::new("test", workers)
    };
    WorkerClass::start(config).expect("threads start")
}

/// A gate jobs block on until the test opens it; `started` reports each job that began.
struct Gate {
    open: Arc<Mutex<mpsc::Receiver<()>>>,
    release: mpsc::Sender<()>,
    started_tx: mpsc::Sender<()>,
    started: mpsc::Receiver<()>,
}

impl Gate {
    fn new() -> Gate {
        let (release, open) = mpsc::channel();
        let (started_tx, started) = mpsc::channel();
        Gate {
            open: Arc::new(Mutex::new(open)),
            release,
            started_tx,
            started,
        }
    }

    /// A job that reports its start, waits for one release, and returns `value`.
    fn job(&self, value: u32) -> impl FnOnce() -> u32 + Send + 'static {
        let open = Arc::clone(&self.open);
        let started = self.started_tx.clone();
        move || {
            started.send(()).expect("test alive");
            open.lock().expect("gate").recv().expect("released");
            value
        }
    }
}

#[test]
fn the_admission_rule_counts_running_and_queued_jobs() {
    let mut slots = Slots::new(2, 3);
    for _ in 0..5 {
        assert!(slots.try_admit());
    }
    assert!(!slots.try_admit());
    slots.release();
    assert!(slots.try_admit());
    assert!(!slots.try_admit());
}

#[test]
fn admits_workers_plus_queue_then_refuses_and_delivers_every_result() {
    let pool = class(2, 3);
    let gate = Gate::new();
    let mut handles = Vec::new();
    for i in 0..5 {
        handles.push(pool.try_submit(gate.job(i)).expect("admitted"));
    }
    // Both workers are inside a job; three jobs wait.
    gate.started.recv().expect("first start");
    gate.started.recv().expect("second start");
    let full = pool.try_submit(|| 99u32).expect_err("refused");
    assert_eq!(
        full,
        ClassFull {
            class: "test".into(),
            limit: 5,
            closed: false
        }
    );
    assert_eq!(
        full.to_string(),
        "worker class 'test' is full (5 jobs running or waiting)"
    );
    assert_eq!(
        pool.counters(),
        WorkerCounters {
            admitted: 5,
            refused: 1,
            running: 2,
            queued: 3,
            panicked: 0
        }
    );
    for _ in 0..5 {
        gate.release.send(()).expect("workers alive");
    }
    let results: Vec<u32> = handles
        .into_iter()
        .map(|h| block_on(h).expect("ran"))
        .collect();
    assert_eq!(results, vec![0, 1, 2, 3, 4]);
    // Slots are released after each job returns; shutdown joins the workers, after which
    // every slot is back.
    pool.shutdown();
    let counters = pool.counters();
    assert_eq!((counters.running, counters.queued), (0, 0));
    assert_eq!(counters.admitted, 5);
}

#[test]
fn a_freed_slot_admits_again() {
    let pool = class(1, 0);
    let first = pool.try_submit(|| 1u8).expect("admitted");
    assert_eq!(block_on(first), Ok(1));
    // The slot is released right after the result is sent; wait for it by retrying on a
    // job that blocks nothing (bounded: the worker releases it without waiting on us).
    let second = loop {
        match pool.try_submit(|| 2u8) {
            Ok(handle) => break handle,
            Err(full) => assert!(!full.closed),
        }
        std::thread::yield_now();
    };
    assert_eq!(block_on(second), Ok(2));
}

#[test]
fn a_panicking_job_reports_to_its_handle_and_the_worker_lives_on() {
    let pool = class(1, 4);
    let bad = pool
        .try_submit(|| -> u32 { panic!("boom in job") })
        .expect("admitted");
    let good = pool.try_submit(|| 7u32).expect("admitted");
    assert_eq!(
        block_on(bad),
        Err(JobError::Panicked {
            class: "test".into(),
            message: "boom in job".into()
        })
    );
    assert_eq!(block_on(good), Ok(7));
    let formatted = pool.try_submit(|| -> u32 { panic!("code {}", 42) });
    assert_eq!(
        block_on(formatted.expect("admitted")),
        Err(JobError::Panicked {
            class: "test".into(),
            message: "code 42".into()
        })
    );
    pool.shutdown();
    assert_eq!(pool.counters().panicked, 2);
}

#[test]
fn shutdown_drains_admitted_jobs_joins_threads_and_refuses_new_ones() {
    let pool = class(1, 8);
    let gate = Gate::new();
    let held = pool.try_submit(gate.job(1)).expect("admitted");
    let queued: Vec<_> = (10..13)
        .map(|v| pool.try_submit(move || v).expect("admitted"))
        .collect();
    gate.started.recv().expect("started");
    gate.release.send(()).expect("worker alive");
    pool.shutdown();
    assert_eq!(block_on(held), Ok(1));
    let values: Vec<u32> = queued
        .into_iter()
        .map(|h| block_on(h).expect("drained"))
        .collect();
    assert_eq!(values, vec![10, 11, 12]);
    let refused = pool.try_submit(|| 0u32).expect_err("closed");
    assert!(refused.closed);
    assert_eq!(refused.to_string(), "worker class 'test' is shut down");
    assert_eq!(pool.counters().refused, 1);
    // Idempotent.
    pool.shutdown();
}

#[test]
fn threads_are_named_after_the_class() {
    let pool = class(2, 1);
    let name = pool
        .try_submit(|| std::thread::current().name().map(str::to_string))
        .expect("admitted");
    let name = block_on(name).expect("ran").expect("named");
    assert!(name == "nervix-test-0" || name == "nervix-test-1", "{name}");
}

#[test]
fn handles_resolve_inside_a_glommio_executor() {
    let pool = Arc::new(class(1, 2));
    let submit = Arc::clone(&pool);
    let value = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(1 << 20)
        .ring_depth(64)
        .spawn(move || async move {
            submit
                .try_submit(|| (1..=10u64).sum::<u64>())
                .expect("admitted")
                .await
        })
        .expect("executor starts")
        .join()
        .expect("executor ran");
    assert_eq!(value, Ok(55));
}

#[test]
fn extension_class_defaults() {
    assert_eq!(default_extension_workers(1), 1);
    assert_eq!(default_extension_workers(2), 1);
    assert_eq!(default_extension_workers(3), 1);
    assert_eq!(default_extension_workers(8), 2);
    assert_eq!(default_extension_workers(64), 16);
    let config = WorkerClassConfig::extension(16);
    assert_eq!(config.name, EXTENSION_CLASS);
    assert_eq!(config.workers, 4);
    assert_eq!(config.queue_jobs, DEFAULT_QUEUE_JOBS);
    assert_eq!(DEFAULT_QUEUE_JOBS, 1_024);
    let pool = WorkerClass::extension(2).expect("starts");
    assert_eq!(pool.name(), "extension");
    assert_eq!(
        block_on(pool.try_submit(|| "ok").expect("admitted")),
        Ok("ok")
    );
}
