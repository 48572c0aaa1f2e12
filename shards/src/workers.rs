//! Bounded worker classes: variable-size CPU work (JAQ, UDFs, large decodes, password hashing)
//! run off the shard executors on a fixed set of std threads, admitted by count.
//!
//! `spec/capacity-planning.md` ("Bounded Execution"): each class has its own admission, so
//! work saturating one class cannot take the slots another is entitled to, and each class
//! holds at most [`DEFAULT_QUEUE_JOBS`] jobs waiting for a worker; a job beyond that is
//! refused, and the work that submitted it reports the refusal as its own failure.
//!
//! A [`WorkerClass`] owns `workers` threads named `nervix-<class>-<i>` and one FIFO wait
//! queue. [`WorkerClass::try_submit`] never blocks: it admits a job while fewer than
//! `workers + queue_jobs` of the class's jobs are running or queued ([`Slots`], the pure
//! admission rule, unit-testable without threads or time), and otherwise returns
//! [`ClassFull`]. The caller gets a [`JobHandle`], a runtime-agnostic future (an
//! `async_channel` oneshot) that a glommio task can await; it resolves to the job's value, to
//! [`JobError::Panicked`] when the job panicked (the panic is caught, the worker lives on), or
//! to [`JobError::Cancelled`] if the class was torn down before the job ran.
//!
//! Why it is correct: the slot count is only changed under the class's one mutex, by
//! admission (+1) and by a worker finishing a job (−1), so running + queued never exceeds
//! `workers + queue_jobs`; a worker takes the queue's front, so jobs start in admission order.
//! [`WorkerClass::shutdown`] refuses new jobs, lets the workers drain what was admitted, and
//! joins them; dropping the class does the same.
//!
//! The node creates one extension class ([`EXTENSION_CLASS`], sized by
//! [`default_extension_workers`]: 1 worker on a 1- or 2-core machine, `cores / 4` otherwise,
//! at least 1) for UDF and JAQ work only.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::thread::JoinHandle;

/// The most jobs a class holds waiting for a worker (capacity-planning.md).
pub const DEFAULT_QUEUE_JOBS: usize = 1_024;

/// The stack each worker thread gets: programs such as JAQ recurse, and their own depth
/// guards assume at least this much room.
pub const DEFAULT_WORKER_STACK_BYTES: usize = 8 * 1024 * 1024;

/// The name of the class the node creates for UDF and JAQ work.
pub const EXTENSION_CLASS: &str = "extension";

/// The number of extension workers for a machine with `cores` cores: 1 on a 1- or 2-core
/// machine, `cores / 4` otherwise, never less than 1.
pub fn default_extension_workers(cores: usize) -> usize {
    if cores <= 2 {
        1
    } else {
        (cores / 4).max(1)
    }
}

/// A job refused at admission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", if *.closed {
    format!("worker class '{}' is shut down", .class)
} else {
    format!("worker class '{}' is full ({} jobs running or waiting)", .class, .limit)
})]
pub struct ClassFull {
    pub class: String,
    /// The class's `workers + queue_jobs`.
    pub limit: usize,
    /// The class was shut down rather than full.
    pub closed: bool,
}

/// An admitted job that produced no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("job in worker class '{class}' panicked: {message}")]
    Panicked { class: String, message: String },
    #[error("job in worker class '{class}' was cancelled before it ran")]
    Cancelled { class: String },
}

/// How a class is sized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerClassConfig {
    /// Names the threads (`nervix-<name>-<i>`) and appears in errors.
    pub name: String,
    /// Worker threads (at least 1 is started).
    pub workers: usize,
    /// Jobs that may wait for a worker.
    pub queue_jobs: usize,
    pub stack_bytes: usize,
}

impl WorkerClassConfig {
    /// `workers` threads, [`DEFAULT_QUEUE_JOBS`], [`DEFAULT_WORKER_STACK_BYTES`].
    pub fn new(name: impl Into<String>, workers: usize) -> WorkerClassConfig {
        WorkerClassConfig {
            name: name.into(),
            workers: workers.max(1),
            queue_jobs: DEFAULT_QUEUE_JOBS,
            stack_bytes: DEFAULT_WORKER_STACK_BYTES,
        }
    }

    /// The extension class for a machine with `cores` cores.
    pub fn extension(cores: usize) -> WorkerClassConfig {
        WorkerClassConfig::new(EXTENSION_CLASS, default_extension_workers(cores))
    }
}

/// The admission rule, without threads: running + queued jobs never exceed
/// `workers + queue_jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    pub limit: usize,
    pub held: usize,
}

impl Slots {
    pub fn new(workers: usize, queue_jobs: usize) -> Slots {
        Slots {
            limit: workers.saturating_add(queue_jobs),
            held: 0,
        }
    }

    /// Takes a slot for a new job; `false` refuses it.
    pub fn try_admit(&mut self) -> bool {
        if self.held < self.limit {
            self.held += 1;
            true
        } else {
            false
        }
    }

    /// Returns the slot of a finished (or discarded) job.
    pub fn release(&mut self) {
        self.held = self.held.saturating_sub(1);
    }
}

/// A point-in-time view of a class's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorkerCounters {
    /// Jobs admitted since the class started.
    pub admitted: u64,
    /// Jobs refused because the class was full or shut down.
    pub refused: u64,
    /// Jobs a worker is running now.
    pub running: u64,
    /// Jobs waiting for a worker now.
    pub queued: u64,
    /// Admitted jobs that panicked.
    pub panicked: u64,
}

/// A boxed job; returns whether it panicked.
type Job = Box<dyn FnOnce() -> bool + Send + 'static>;

struct State {
    slots: Slots,
    queue: VecDeque<Job>,
    closed: bool,
}

struct Shared {
    name: String,
    state: Mutex<State>,
    work: Condvar,
    admitted: AtomicU64,
    refused: AtomicU64,
    running: AtomicU64,
    panicked: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and their panics are caught, so a poisoned lock can only
        // come from a bug in this module; the state is still consistent (each critical
        // section is a few field updates), so carry on.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A bounded class of worker threads.
pub struct WorkerClass {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for WorkerClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerClass")
            .field("name", &self.shared.name)
            .field("counters", &self.counters())
            .finish()
    }
}

impl WorkerClass {
    /// Starts the class's threads.
    pub fn start(config: WorkerClassConfig) -> std::io::Result<WorkerClass> {
        let workers = config.workers.max(1);
        let shared = Arc::new(Shared {
            name: config.name.clone(),
            state: Mutex::new(State {
                slots: Slots::new(workers, config.queue_jobs),
                queue: VecDeque::new(),
                closed: false,
            }),
            work: Condvar::new(),
            admitted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            running: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
        });
        let class = WorkerClass {
            shared: Arc::clone(&shared),
            threads: Mutex::new(Vec::with_capacity(workers)),
        };
        for i in 0..workers {
            let shared = Arc::clone(&shared);
            let thread = std::thread::Builder::new()
                .name(format!("nervix-{}-{i}", config.name))
                .stack_size(config.stack_bytes)
                .spawn(move || work(&shared))?;
            class
                .threads
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(thread);
        }
        Ok(class)
    }

    /// The extension class for a machine with `cores` cores.
    pub fn extension(cores: usize) -> std::io::Result<WorkerClass> {
        WorkerClass::start(WorkerClassConfig::extension(cores))
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Admits `job` or refuses it at once; never blocks on the class being busy.
    pub fn try_submit<T, F>(&self, job: F) -> Result<JobHandle<T>, ClassFull>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = async_channel::bounded(1);
        let class = self.shared.name.clone();
        let task: Job = Box::new(move || {
            let result = catch_unwind(AssertUnwindSafe(job)).map_err(|payload| {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".to_string());
                JobError::Panicked { class, message }
            });
            let panicked = result.is_err();
            // The handle may be gone (the caller gave up); the result is then dropped.
            let _ = tx.try_send(result);
            panicked
        });
        let mut state = self.shared.lock();
        if state.closed || !state.slots.try_admit() {
            self.shared.refused.fetch_add(1, Ordering::Relaxed);
            return Err(ClassFull {
                class: self.shared.name.clone(),
                limit: state.slots.limit,
                closed: state.closed,
            });
        }
        state.queue.push_back(task);
        drop(state);
        self.shared.admitted.fetch_add(1, Ordering::Relaxed);
        self.shared.work.notify_one();
        Ok(JobHandle {
            class: self.shared.name.clone(),
            recv: Box::pin(async move { rx.recv().await.ok() }),
        })
    }

    pub fn counters(&self) -> WorkerCounters {
        let queued = self.shared.lock().queue.len() as u64;
        WorkerCounters {
            admitted: self.shared.admitted.load(Ordering::Relaxed),
            refused: self.shared.refused.load(Ordering::Relaxed),
            running: self.shared.running.load(Ordering::Relaxed),
            queued,
            panicked: self.shared.panicked.load(Ordering::Relaxed),
        }
    }

    /// Refuses new jobs, lets the workers finish every admitted one, and joins them.
    /// Idempotent.
    pub fn shutdown(&self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
        let threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        for thread in threads {
            // Workers catch job panics, so a join error cannot carry one; nothing to report.
            let _ = thread.join();
        }
    }
}

impl Drop for WorkerClass {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A worker's loop: take the queue's front, run it, release its slot; exit once the class is
/// closed and the queue is empty.
fn work(shared: &Shared) {
    loop {
        let job = {
            let mut state = shared.lock();
            loop {
                if let Some(job) = state.queue.pop_front() {
                    shared.running.fetch_add(1, Ordering::Relaxed);
                    break job;
                }
                if state.closed {
                    return;
                }
                state = shared
                    .work
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        if job() {
            shared.panicked.fetch_add(1, Ordering::Relaxed);
        }
        shared.running.fetch_sub(1, Ordering::Relaxed);
        shared.lock().slots.release();
    }
}

/// The receiving end of a job's oneshot: `None` when the job was dropped unrun.
type Pending<T> = Pin<Box<dyn Future<Output = Option<Result<T, JobError>>> + Send>>;

/// The result of an admitted job: a future usable from any executor (glommio included).
pub struct JobHandle<T> {
    class: String,
    recv: Pending<T>,
}

impl<T> std::fmt::Debug for JobHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHandle")
            .field("class", &self.class)
            .finish()
    }
}

impl<T> Future for JobHandle<T> {
    type Output = Result<T, JobError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.recv.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(result)) => Poll::Ready(result),
            // The job was dropped unrun.
            Poll::Ready(None) => Poll::Ready(Err(JobError::Cancelled {
                class: self.class.clone(),
            })),
        }
    }
}
