//! The shard set: one glommio executor per data core, each on its own pinned OS thread.
//!
//! [`ShardSet::start`] starts `shards` threads named `nervix-shard-<i>`, builds a glommio
//! `LocalExecutor` on each (pinned with `Placement::Fixed(cpu)` unless the configuration says
//! [`CpuPlacement::Unpinned`], with the configured io_uring memory and ring depth), connects the
//! [shard mesh](crate::mesh) inside every executor, and then runs the caller's `main` on every
//! shard with a [`ShardContext`]: the shard's index, its bounded command queue from the control
//! thread and its view of the mesh. `start` returns once every shard is running, or with the
//! first shard's start error (a [`RuntimeError`] whose message names the limit that stopped it
//! and how to raise it) after stopping the shards that did start; it never panics on a start
//! failure.
//!
//! Start happens in two steps so a failure cannot strand half a mesh: every thread first
//! builds its executor and reports; only when all have built does any of them connect the mesh
//! and run `main`. Otherwise the threads are told to stop and are joined.
//!
//! Commands reach a shard from any thread (the tokio control thread included) through a
//! bounded async-channel: [`ShardSet::send`] waits while the shard's queue is full,
//! [`ShardSet::try_send`] hands the command back. [`ShardSet::join`] closes every queue —
//! each shard's [`CommandReceiver::recv`] then returns `None` once drained, and the shard's
//! `main` is expected to return — and joins the threads, reporting a shard that panicked
//! rather than propagating the panic. A shard ends when its `main` returns; tasks it spawned
//! and did not await are dropped with its executor.
//!
//! Locked memory: glommio registers each shard's io memory with io_uring, which the kernel
//! charges to `RLIMIT_MEMLOCK` (`ulimit -l`) unless the process has `CAP_IPC_LOCK`, and glommio
//! refuses to start under 512 KiB of limit. `start` checks both before starting any thread;
//! `shards/README.md` has the numbers measured on the development machine.

use std::any::Any;
use std::future::Future;
use std::num::NonZeroUsize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use glommio::{
    GlommioError, Latency, LocalExecutor, LocalExecutorBuilder, Placement, PoolPlacement,
    ReactorErrorKind, Shares, TaskQueueHandle,
};

use crate::mesh::{self, Mesh, MeshEnds};
use crate::stall::{BacktraceStallHandler, StallCounters, StallWatch};
use crate::wake_watchdog::{Heartbeats, Watchdog, HEARTBEAT_PERIOD_MS, MIN_STALE_WAKE_MS};

/// Default io_uring memory registered per shard: 512 KiB.
pub const DEFAULT_IO_MEMORY_BYTES: usize = 512 * 1024;
/// Default io_uring ring depth per shard.
pub const DEFAULT_RING_DEPTH: usize = 128;
/// Default capacity of each directed mesh channel, in messages.
pub const DEFAULT_MESH_CAPACITY_MESSAGES: usize = 1_024;
/// Default capacity of each shard's control → shard command queue.
pub const DEFAULT_COMMAND_CAPACITY: usize = 1_024;
/// Default time a task may run without yielding before it is reported as a stall.
pub const DEFAULT_STALL_BUDGET_MS: u64 = 10;
/// By default a pinned shard polls 200 µs before it parks (Seastar's default idle poll
/// time): about the gap between batches at moderate load, and at most 1 % of a core for an
/// idle shard woken by its 20 ms heartbeat.
pub const DEFAULT_SPIN_BEFORE_PARK_US: u64 = 200;
/// The longest a shard may spin before it parks: 10 ms (longer is a busy core, not a wait).
pub const MAX_SPIN_BEFORE_PARK_US: u64 = 10_000;
/// The longest an unpinned shard spins before it parks, whatever `spin_before_park_us` says:
/// 20 µs. It shares its CPU with other threads, so it does not poll through idle gaps; but
/// a shard working through a backlog lets its reactor run with a 1 µs timer sleep (the
/// driver's ticker), and without a spin each such sleep parks the thread in the kernel (a
/// timer arm, a memory barrier across the process's CPUs, a context switch: about 7 % of a
/// Nexmark q5 shard, perf/RESULTS.md session 28).
pub const MAX_UNPINNED_SPIN_BEFORE_PARK_US: u64 = 20;

/// How long a shard spins before it parks, given whether it is pinned and the configured
/// `spin_us`: all of it when pinned, at most [`MAX_UNPINNED_SPIN_BEFORE_PARK_US`] when not.
pub fn applied_spin_before_park_us(pinned: bool, spin_us: u64) -> u64 {
    if pinned {
        spin_us
    } else {
        spin_us.min(MAX_UNPINNED_SPIN_BEFORE_PARK_US)
    }
}

/// The most io memory a shard may ask for: 1 GiB.
pub const MAX_IO_MEMORY_BYTES: usize = 1 << 30;
/// The deepest io_uring ring the kernel accepts (`IORING_MAX_ENTRIES`).
pub const MAX_RING_DEPTH: usize = 32_768;
/// The largest mesh channel or command queue capacity accepted.
pub const MAX_QUEUE_CAPACITY: usize = 1 << 20;
/// glommio refuses to start when `ulimit -l` is below this (its `MIN_MEMLOCK_LIMIT`).
pub const GLOMMIO_MIN_MEMLOCK_BYTES: u64 = 512 * 1024;
/// glommio registers a shard's io memory once per ring: main, latency and poll.
const GLOMMIO_RINGS_PER_SHARD: u64 = 3;
/// glommio never registers less than this much io memory per shard.
const GLOMMIO_MIN_IO_MEMORY_BYTES: usize = 64 * 1024;

/// The name of the task queue each shard's `main` runs in.
pub const MAIN_QUEUE_NAME: &str = "shard-main";

/// Which CPUs the shards run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuPlacement {
    /// Shard `i` is pinned to `cpus[i % cpus.len()]` with glommio's `Placement::Fixed`.
    Pinned(Vec<usize>),
    /// No pinning: the kernel schedules the shard threads (tests, CI, containers where
    /// `sched_setaffinity` is refused).
    Unpinned,
}

impl CpuPlacement {
    /// The default placement for `shards` shards on this machine; see
    /// [`CpuPlacement::default_for_cores`].
    pub fn default_for(shards: NonZeroUsize) -> Self {
        Self::default_for_cores(shards, available_cores())
    }

    /// The default placement for `shards` shards on a machine with `cores` cores: cpus
    /// `1..=shards` when there are more cores than shards (cpu 0 is left to the control
    /// thread), otherwise cpus `0..shards` wrapping around the cores.
    pub fn default_for_cores(shards: NonZeroUsize, cores: NonZeroUsize) -> Self {
        let (shards, cores) = (shards.get(), cores.get());
        if cores > shards {
            Self::Pinned((1..=shards).collect())
        } else {
            Self::Pinned((0..shards).map(|shard| shard % cores).collect())
        }
    }

    /// The CPU shard `shard` is pinned to, or `None` when unpinned.
    pub fn cpu_for(&self, shard: usize) -> Option<usize> {
        match self {
            Self::Pinned(cpus) if !cpus.is_empty() => Some(cpus[shard % cpus.len()]),
            _ => None,
        }
    }
}

/// How the shard set is sized and bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Number of shards (executor threads).
    pub shards: NonZeroUsize,
    /// Which CPUs they run on.
    pub cpus: CpuPlacement,
    /// io_uring memory registered per shard (glommio's `io_memory`); glommio rounds it up to
    /// 4 KiB pages and at least 64 KiB.
    pub io_memory_bytes: usize,
    /// io_uring ring depth per shard (glommio's `ring_depth`), 1..=32768.
    pub ring_depth: usize,
    /// Capacity of each directed mesh channel, in messages (rounded up to a power of two).
    pub mesh_capacity_messages: usize,
    /// Capacity of each shard's control → shard command queue.
    pub command_capacity: usize,
    /// How long a task may run without yielding before it is logged and counted as a stall;
    /// 0 turns stall detection off.
    pub stall_budget_ms: u64,
    /// Also run glommio's signal-based stall detector, which logs a backtrace of the stalled
    /// code (as a `log` record); off by default. See [`crate::stall`].
    pub stall_backtraces: bool,
    /// How long a shard's heartbeat may stay silent before the wake watchdog signals the
    /// shard ([`crate::wake_watchdog`]); 0 turns the watchdog off.
    pub stale_wake_ms: u64,
    /// How long a pinned shard that ran out of work polls its rings and timers before it
    /// parks in the kernel (glommio's `spin_before_park`; unpinned shards spin at most
    /// [`MAX_UNPINNED_SPIN_BEFORE_PARK_US`], see [`RuntimeConfig::applied_spin_before_park_us`]). A
    /// parked shard is woken by the kernel (an interrupt and a context switch, tens of µs in
    /// a VM) when a socket or a timer fires, and every FLUSH IMMEDIATE window ends on a
    /// timer; spinning trades up to this much CPU per idle period for those wake-ups. 0 = off.
    pub spin_before_park_us: u64,
}

impl Default for RuntimeConfig {
    /// `--shards` = cores − 1 (at least 1), pinned by [`CpuPlacement::default_for`], and the
    /// default bounds.
    fn default() -> Self {
        let cores = available_cores().get();
        let shards = NonZeroUsize::new(cores.saturating_sub(1)).unwrap_or(NonZeroUsize::MIN);
        Self::with_shards(shards)
    }
}

impl RuntimeConfig {
    /// `shards` shards, default placement for this machine, default bounds.
    pub fn with_shards(shards: NonZeroUsize) -> Self {
        Self {
            shards,
            cpus: CpuPlacement::default_for(shards),
            io_memory_bytes: DEFAULT_IO_MEMORY_BYTES,
            ring_depth: DEFAULT_RING_DEPTH,
            mesh_capacity_messages: DEFAULT_MESH_CAPACITY_MESSAGES,
            command_capacity: DEFAULT_COMMAND_CAPACITY,
            stall_budget_ms: DEFAULT_STALL_BUDGET_MS,
            stall_backtraces: false,
            stale_wake_ms: crate::wake_watchdog::DEFAULT_STALE_WAKE_MS,
            spin_before_park_us: DEFAULT_SPIN_BEFORE_PARK_US,
        }
    }

    /// The same configuration without CPU pinning.
    #[must_use]
    pub fn unpinned(mut self) -> Self {
        self.cpus = CpuPlacement::Unpinned;
        self
    }

    /// How long each shard spins before it parks ([`applied_spin_before_park_us`]).
    pub fn applied_spin_before_park_us(&self) -> u64 {
        let pinned = !matches!(self.cpus, CpuPlacement::Unpinned);
        applied_spin_before_park_us(pinned, self.spin_before_park_us)
    }

    /// The io memory glommio will actually register per shard (rounded up to 4 KiB, at
    /// least 64 KiB).
    pub fn effective_io_memory_bytes(&self) -> usize {
        self.io_memory_bytes
            .max(GLOMMIO_MIN_IO_MEMORY_BYTES)
            .div_ceil(4096)
            .saturating_mul(4096)
    }

    /// The locked memory the shards register with io_uring in total: effective io memory ×
    /// 3 × shards. glommio registers each shard's io memory with each of its three rings
    /// (main, latency, poll) and the kernel charges every registration (measured: 512 KiB of
    /// io memory pins 1.5 MiB). Since Linux 5.12 the rings themselves are charged to the memory
    /// cgroup, not to `ulimit -l`.
    pub fn locked_memory_bytes(&self) -> u64 {
        (self.effective_io_memory_bytes() as u64)
            .saturating_mul(GLOMMIO_RINGS_PER_SHARD)
            .saturating_mul(self.shards.get() as u64)
    }

    /// The stall budget, or `None` when stall detection is off.
    pub fn stall_budget(&self) -> Option<Duration> {
        (self.stall_budget_ms > 0).then(|| Duration::from_millis(self.stall_budget_ms))
    }

    /// Checks the bounds without touching the machine.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let invalid = |message: String| Err(RuntimeError::Config(message));
        if self.io_memory_bytes > MAX_IO_MEMORY_BYTES {
            return invalid(format!(
                "shard io memory {} exceeds the maximum of {} per shard (--shard-io-memory)",
                format_bytes(self.io_memory_bytes as u64),
                format_bytes(MAX_IO_MEMORY_BYTES as u64)
            ));
        }
        if self.ring_depth == 0 || self.ring_depth > MAX_RING_DEPTH {
            return invalid(format!(
                "shard ring depth {} is outside 1..={MAX_RING_DEPTH} (--shard-ring-depth)",
                self.ring_depth
            ));
        }
        if self.mesh_capacity_messages == 0 || self.mesh_capacity_messages > MAX_QUEUE_CAPACITY {
            return invalid(format!(
                "mesh channel capacity {} is outside 1..={MAX_QUEUE_CAPACITY} messages",
                self.mesh_capacity_messages
            ));
        }
        if self.command_capacity == 0 || self.command_capacity > MAX_QUEUE_CAPACITY {
            return invalid(format!(
                "shard command queue capacity {} is outside 1..={MAX_QUEUE_CAPACITY}",
                self.command_capacity
            ));
        }
        if self.stale_wake_ms != 0 && self.stale_wake_ms < MIN_STALE_WAKE_MS {
            return invalid(format!(
                "the wake watchdog's silence limit {} ms is below its minimum of \
                 {MIN_STALE_WAKE_MS} ms (0 turns the watchdog off)",
                self.stale_wake_ms
            ));
        }
        if self.spin_before_park_us > MAX_SPIN_BEFORE_PARK_US {
            return invalid(format!(
                "shard spin before park {} µs exceeds the maximum of {MAX_SPIN_BEFORE_PARK_US} µs \
                 (--shard-spin-us; 0 turns spinning off)",
                self.spin_before_park_us
            ));
        }
        if self.cpus == CpuPlacement::Pinned(Vec::new()) {
            return invalid(
                "pinned shard placement lists no cpus (give --shard-cpus or run unpinned)"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// Checks the locked-memory limit of this process against what the shards will register.
    pub fn check_locked_memory(&self) -> Result<(), RuntimeError> {
        check_locked_memory(self, locked_memory_limit(), has_cap_ipc_lock())
    }
}

/// Why the shard set could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The configuration is out of bounds.
    #[error("invalid shard runtime configuration: {0}")]
    Config(String),
    /// `ulimit -l` is too small for the io memory the shards register.
    #[error(
        "shards cannot start: {shards} shard(s) × {io_memory} io memory × 3 io_uring rings \
         need {needed} of locked memory but `ulimit -l` allows {limit}: raise `ulimit -l` to at least {needed_kib} \
         (KiB; `LimitMEMLOCK=` in a systemd unit, or grant CAP_IPC_LOCK), or lower \
         --shard-io-memory or --shards",
        io_memory = format_bytes(*io_memory as u64),
        needed = format_bytes(*needed),
        limit = format_bytes(*limit),
        needed_kib = needed.div_ceil(1024).max(GLOMMIO_MIN_MEMLOCK_BYTES / 1024)
    )]
    LockedMemory {
        /// Number of shards.
        shards: usize,
        /// Effective io memory per shard.
        io_memory: usize,
        /// Locked memory needed in total.
        needed: u64,
        /// The soft `RLIMIT_MEMLOCK` of the process.
        limit: u64,
    },
    /// A shard's executor could not be built (io_uring, pinning, memlock, thread creation).
    #[error("shard {shard} cannot start: {reason}")]
    ShardStart {
        /// The shard that failed.
        shard: usize,
        /// What failed and how to fix it.
        reason: String,
    },
    /// A task could not be spawned into a shard task queue.
    #[error("cannot spawn into task queue '{queue}': {reason}")]
    Spawn {
        /// The queue's name.
        queue: String,
        /// glommio's reason.
        reason: String,
    },
}

/// A command could not be delivered: the shard has stopped (or there is no such shard).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shard {shard} has stopped or does not exist")]
pub struct ShardStopped {
    /// The shard addressed.
    pub shard: usize,
}

/// Why [`ShardSet::try_send`] did not deliver; the command is handed back.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrySendError<C> {
    /// The shard's command queue is full.
    #[error("shard {shard}'s command queue is full")]
    Full {
        /// The shard addressed.
        shard: usize,
        /// The command that was not sent.
        command: C,
    },
    /// The shard has stopped or does not exist.
    #[error("shard {shard} has stopped or does not exist")]
    Stopped {
        /// The shard addressed.
        shard: usize,
        /// The command that was not sent.
        command: C,
    },
}

impl<C> TrySendError<C> {
    /// The command that was not sent.
    pub fn into_command(self) -> C {
        match self {
            Self::Full { command, .. } | Self::Stopped { command, .. } => command,
        }
    }
}

/// A shard thread panicked; reported by [`ShardSet::join`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shard {shard} panicked: {message}")]
pub struct ShardPanicked {
    /// The shard.
    pub shard: usize,
    /// The panic message (when it was a string).
    pub message: String,
}

/// The receiving end of a shard's command queue.
#[derive(Debug)]
pub struct CommandReceiver<C> {
    inner: async_channel::Receiver<C>,
}

impl<C> CommandReceiver<C> {
    /// The next command, waiting while the queue is empty; `None` once the shard set has
    /// closed the queue ([`ShardSet::join`] or drop) and every queued command was received.
    pub async fn recv(&self) -> Option<C> {
        self.inner.recv().await.ok()
    }

    /// The next command if one is queued now.
    pub fn try_recv(&self) -> Option<C> {
        self.inner.try_recv().ok()
    }

    /// Whether the queue has been closed.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// A named glommio task queue on one shard; tasks spawned into it with
/// [`ShardContext::spawn_into`] are stall-watched under its name.
#[derive(Debug, Clone)]
pub struct ShardQueue {
    handle: TaskQueueHandle,
    name: Rc<str>,
}

impl ShardQueue {
    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The glommio handle, for `glommio::spawn_local_into` and queue statistics.
    pub fn handle(&self) -> TaskQueueHandle {
        self.handle
    }
}

/// What a shard's `main` gets: who it is, its commands and its mesh.
#[derive(Debug)]
pub struct ShardContext<M: Send + 'static, C> {
    /// This shard's index, `0..shard_count`.
    pub shard: usize,
    /// How many shards there are.
    pub shard_count: NonZeroUsize,
    /// Commands from the control thread.
    pub commands: CommandReceiver<C>,
    /// Channels to and from every other shard.
    pub mesh: Mesh<M>,
    main_queue: ShardQueue,
    stall_budget: Option<Duration>,
    stall_counters: StallCounters,
    heartbeats: Heartbeats,
}

impl<M: Send + 'static, C> ShardContext<M, C> {
    /// Creates a task queue named `name` with default shares where latency does not matter.
    pub fn task_queue(&self, name: &str) -> ShardQueue {
        self.task_queue_with(name, Shares::default(), Latency::NotImportant)
    }

    /// Creates a task queue named `name` with the given shares and latency requirement.
    pub fn task_queue_with(&self, name: &str, shares: Shares, latency: Latency) -> ShardQueue {
        ShardQueue {
            handle: glommio::executor().create_task_queue(shares, latency, name),
            name: Rc::from(name),
        }
    }

    /// The queue `main` runs in ([`MAIN_QUEUE_NAME`]).
    pub fn main_queue(&self) -> &ShardQueue {
        &self.main_queue
    }

    /// Spawns `future` into `queue`, stall-watched under the queue's name. The returned task
    /// is cancelled when dropped; `.detach()` it to let it run on its own.
    pub fn spawn_into<T: 'static>(
        &self,
        queue: &ShardQueue,
        future: impl Future<Output = T> + 'static,
    ) -> Result<glommio::Task<T>, RuntimeError> {
        let watched = self.watch(queue).watch(future);
        glommio::spawn_local_into(watched, queue.handle).map_err(|error| RuntimeError::Spawn {
            queue: queue.name.to_string(),
            reason: error.to_string(),
        })
    }

    /// Spawns `future` into the main queue, stall-watched.
    pub fn spawn<T: 'static>(
        &self,
        future: impl Future<Output = T> + 'static,
    ) -> Result<glommio::Task<T>, RuntimeError> {
        let queue = self.main_queue.clone();
        self.spawn_into(&queue, future)
    }

    /// Stalls reported on this shard so far.
    pub fn stall_count(&self) -> u64 {
        self.stall_counters.count(self.shard)
    }

    /// Times the wake watchdog signalled this shard so far.
    pub fn watchdog_wake_count(&self) -> u64 {
        self.heartbeats.wakes(self.shard)
    }

    fn watch(&self, queue: &ShardQueue) -> StallWatch {
        StallWatch::new(
            self.shard,
            queue.name.clone(),
            self.stall_budget,
            self.stall_counters.clone(),
        )
    }
}

/// The running shards; see the [module documentation](self).
#[derive(Debug)]
pub struct ShardSet<C> {
    commands: Vec<async_channel::Sender<C>>,
    threads: Vec<Option<JoinHandle<()>>>,
    cpus: Vec<Option<usize>>,
    stall_counters: StallCounters,
    heartbeats: Heartbeats,
    /// Stopped after the shard threads are joined, so it also covers a shutdown.
    watchdog: Option<Watchdog>,
    shard_count: NonZeroUsize,
}

/// What a shard thread reports while starting.
enum StartReport {
    /// The executor was built (or not, with the reason).
    Built(usize, Result<(), String>),
    /// The mesh is connected and `main` is about to run.
    Ready(usize),
    /// The thread ended (panicked) after building and before becoming ready.
    Gone(usize, String),
}

/// Sends [`StartReport::Gone`] if the shard thread unwinds before reporting ready.
struct ReadyGuard {
    shard: usize,
    reports: Option<mpsc::Sender<StartReport>>,
}

impl ReadyGuard {
    fn ready(&mut self) {
        if let Some(reports) = self.reports.take() {
            let _ = reports.send(StartReport::Ready(self.shard));
        }
    }
}

impl Drop for ReadyGuard {
    fn drop(&mut self) {
        if let Some(reports) = self.reports.take() {
            let message = if std::thread::panicking() {
                "the shard thread panicked while connecting the mesh"
            } else {
                "the shard thread ended while connecting the mesh"
            };
            let _ = reports.send(StartReport::Gone(self.shard, message.to_owned()));
        }
    }
}

/// Closes a shard's command queue and drops the commands still in it, when the shard ends.
struct CommandDrain<C>(async_channel::Receiver<C>);

impl<C> Drop for CommandDrain<C> {
    fn drop(&mut self) {
        self.0.close();
        while self.0.try_recv().is_ok() {}
    }
}

/// Everything one shard thread needs, moved onto it.
struct ShardSeed<M: Send + 'static, C, F> {
    shard: usize,
    shard_count: NonZeroUsize,
    cpu: Option<usize>,
    config: RuntimeConfig,
    ends: MeshEnds<M>,
    commands: async_channel::Receiver<C>,
    main: Arc<F>,
    stall_counters: StallCounters,
    heartbeats: Heartbeats,
    reports: mpsc::Sender<StartReport>,
    go: mpsc::Receiver<bool>,
}

impl<C: Send + 'static> ShardSet<C> {
    /// Starts every shard and runs `main(ctx)` as the shard's main task (in the task queue
    /// [`MAIN_QUEUE_NAME`], stall-watched); returns once every shard has started and connected
    /// its mesh, or with the first start error after stopping the shards that did start.
    /// `M` is the mesh message type.
    pub fn start<M, F, Fut>(config: RuntimeConfig, main: F) -> Result<ShardSet<C>, RuntimeError>
    where
        M: Send + 'static,
        F: Fn(ShardContext<M, C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        config.validate()?;
        config.check_locked_memory()?;
        let shard_count = config.shards;
        let shards = shard_count.get();
        let main = Arc::new(main);
        let stall_counters = StallCounters::new(shards);
        let heartbeats = Heartbeats::new(shards);
        let mut ends = mesh::build::<M>(shards, config.mesh_capacity_messages).into_iter();
        let (reports_tx, reports) = mpsc::channel();
        let mut set = ShardSet {
            commands: Vec::with_capacity(shards),
            threads: Vec::with_capacity(shards),
            cpus: (0..shards)
                .map(|shard| config.cpus.cpu_for(shard))
                .collect(),
            stall_counters: stall_counters.clone(),
            heartbeats: heartbeats.clone(),
            watchdog: None,
            shard_count,
        };
        let mut go = Vec::with_capacity(shards);
        tracing::info!(
            shards,
            cpus = ?set.cpus,
            io_memory_bytes = config.effective_io_memory_bytes(),
            ring_depth = config.ring_depth,
            mesh_capacity = config.mesh_capacity_messages,
            command_capacity = config.command_capacity,
            stall_budget_ms = config.stall_budget_ms,
            "starting shard executors"
        );
        for shard in 0..shards {
            let (commands_tx, commands) = async_channel::bounded(config.command_capacity);
            let (go_tx, go_rx) = mpsc::channel();
            let Some(shard_ends) = ends.next() else {
                unreachable!("the mesh has one set of ends per shard");
            };
            let seed = ShardSeed {
                shard,
                shard_count,
                cpu: set.cpus[shard],
                config: config.clone(),
                ends: shard_ends,
                commands,
                main: Arc::clone(&main),
                stall_counters: stall_counters.clone(),
                heartbeats: heartbeats.clone(),
                reports: reports_tx.clone(),
                go: go_rx,
            };
            let spawned = std::thread::Builder::new()
                .name(format!("nervix-shard-{shard}"))
                .spawn(move || run_shard(seed));
            match spawned {
                Ok(thread) => {
                    set.commands.push(commands_tx);
                    set.threads.push(Some(thread));
                    go.push(go_tx);
                }
                Err(error) => {
                    set.abort(&go);
                    return Err(RuntimeError::ShardStart {
                        shard,
                        reason: format!("cannot create its thread: {error}"),
                    });
                }
            }
        }
        drop(reports_tx);

        // Step 1: every executor built?
        let mut built = vec![None; shards];
        let mut pending = shards;
        while pending > 0 {
            match reports.recv() {
                Ok(StartReport::Built(shard, result)) => {
                    if built[shard].replace(result).is_none() {
                        pending -= 1;
                    }
                }
                Ok(StartReport::Ready(_) | StartReport::Gone(..)) => {}
                Err(mpsc::RecvError) => break,
            }
        }
        let first_failure = built
            .iter()
            .enumerate()
            .find_map(|(shard, result)| match result {
                Some(Ok(())) => None,
                Some(Err(reason)) => Some((shard, reason.clone())),
                None => Some((
                    shard,
                    "its thread ended before building the executor".to_owned(),
                )),
            });
        if let Some((shard, reason)) = first_failure {
            set.abort(&go);
            return Err(RuntimeError::ShardStart { shard, reason });
        }

        // Step 2: connect the mesh and run main everywhere.
        for go in &go {
            let _ = go.send(true);
        }
        let mut ready = vec![false; shards];
        let mut pending = shards;
        while pending > 0 {
            match reports.recv() {
                Ok(StartReport::Ready(shard)) => {
                    if !std::mem::replace(&mut ready[shard], true) {
                        pending -= 1;
                    }
                }
                Ok(StartReport::Gone(shard, reason)) => {
                    set.abort(&[]);
                    return Err(RuntimeError::ShardStart { shard, reason });
                }
                Ok(StartReport::Built(..)) => {}
                Err(mpsc::RecvError) => {
                    let shard = ready.iter().position(|ready| !ready).unwrap_or(0);
                    set.abort(&[]);
                    return Err(RuntimeError::ShardStart {
                        shard,
                        reason: "its thread ended before connecting the mesh".to_owned(),
                    });
                }
            }
        }
        if config.stale_wake_ms > 0 {
            match Watchdog::start(heartbeats, config.stale_wake_ms) {
                Ok(watchdog) => set.watchdog = Some(watchdog),
                Err(error) => tracing::warn!(
                    "the shard wake watchdog did not start ({error}); a shard that sleeps \
                     through its timers will not be woken"
                ),
            }
        }
        tracing::info!(shards, "shard executors running");
        Ok(set)
    }

    /// Sends a command to `shard` from any thread, waiting while its queue is full. Fails when
    /// the shard has stopped (or does not exist).
    pub async fn send(&self, shard: usize, command: C) -> Result<(), ShardStopped> {
        let stopped = ShardStopped { shard };
        let sender = self.commands.get(shard).ok_or(stopped)?;
        sender.send(command).await.map_err(|_| stopped)
    }

    /// Sends a command to `shard` if its queue has room now; otherwise hands it back.
    pub fn try_send(&self, shard: usize, command: C) -> Result<(), TrySendError<C>> {
        let Some(sender) = self.commands.get(shard) else {
            return Err(TrySendError::Stopped { shard, command });
        };
        sender.try_send(command).map_err(|error| match error {
            async_channel::TrySendError::Full(command) => TrySendError::Full { shard, command },
            async_channel::TrySendError::Closed(command) => {
                TrySendError::Stopped { shard, command }
            }
        })
    }

    /// How many shards there are.
    pub fn shard_count(&self) -> NonZeroUsize {
        self.shard_count
    }

    /// The CPU each shard is pinned to (`None` when unpinned), indexed by shard.
    pub fn cpus(&self) -> &[Option<usize>] {
        &self.cpus
    }

    /// Stalls reported on each shard so far, indexed by shard.
    pub fn stall_counts(&self) -> Vec<u64> {
        self.stall_counters.counts()
    }

    /// Times the wake watchdog signalled each shard so far, indexed by shard.
    pub fn watchdog_wakes(&self) -> Vec<u64> {
        self.heartbeats.all_wakes()
    }

    /// The shared stall counters (for metrics).
    pub fn stall_counters(&self) -> &StallCounters {
        &self.stall_counters
    }

    /// Whether shard `shard`'s thread has ended (its `main` returned or it panicked).
    pub fn is_finished(&self, shard: usize) -> bool {
        self.threads
            .get(shard)
            .and_then(Option::as_ref)
            .is_none_or(JoinHandle::is_finished)
    }

    /// Closes every command queue and joins the shard threads; returns how each shard ended,
    /// indexed by shard. A shard that panicked is reported, not re-panicked.
    pub fn join(mut self) -> Vec<Result<(), ShardPanicked>> {
        self.close_and_join()
    }

    fn close_and_join(&mut self) -> Vec<Result<(), ShardPanicked>> {
        for commands in &self.commands {
            commands.close();
        }
        let ended = self
            .threads
            .iter_mut()
            .enumerate()
            .map(|(shard, thread)| match thread.take() {
                None => Ok(()),
                Some(thread) => thread.join().map_err(|payload| ShardPanicked {
                    shard,
                    message: panic_message(payload.as_ref()),
                }),
            })
            .collect();
        self.watchdog = None;
        ended
    }

    /// Stops a start half-way: tells threads waiting at step 1 not to go on, closes every
    /// command queue and joins.
    fn abort(&mut self, go: &[mpsc::Sender<bool>]) {
        for go in go {
            let _ = go.send(false);
        }
        for result in self.close_and_join() {
            if let Err(panicked) = result {
                tracing::warn!(
                    shard = panicked.shard,
                    "{panicked} while the shard set was starting"
                );
            }
        }
    }
}

impl<C> Drop for ShardSet<C> {
    /// Closes the command queues and joins whatever is still running.
    fn drop(&mut self) {
        for commands in &self.commands {
            commands.close();
        }
        for (shard, thread) in self.threads.iter_mut().enumerate() {
            if let Some(thread) = thread.take() {
                if let Err(payload) = thread.join() {
                    tracing::warn!(
                        shard,
                        "shard {shard} panicked: {}",
                        panic_message(payload.as_ref())
                    );
                }
            }
        }
        self.watchdog = None;
    }
}

/// The body of one shard thread.
fn run_shard<M, C, F, Fut>(seed: ShardSeed<M, C, F>)
where
    M: Send + 'static,
    C: Send + 'static,
    F: Fn(ShardContext<M, C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let ShardSeed {
        shard,
        shard_count,
        cpu,
        config,
        ends,
        commands,
        main,
        stall_counters,
        heartbeats,
        reports,
        go,
    } = seed;

    let built = catch_unwind(AssertUnwindSafe(|| build_executor(shard, cpu, &config)))
        .unwrap_or_else(|payload| {
            Err(format!(
                "glommio panicked while building the executor: {}",
                panic_message(payload.as_ref())
            ))
        });
    let executor = match built {
        Ok(executor) => {
            let _ = reports.send(StartReport::Built(shard, Ok(())));
            executor
        }
        Err(reason) => {
            let _ = reports.send(StartReport::Built(shard, Err(reason)));
            return;
        }
    };
    if !matches!(go.recv(), Ok(true)) {
        return;
    }

    let mut guard = ReadyGuard {
        shard,
        reports: Some(reports),
    };
    // However the shard ends, close its queue and drop what is still queued, so callers
    // waiting on a reply carried by a queued command are released rather than left waiting.
    let _drain = CommandDrain(commands.clone());
    heartbeats.register_current_thread(shard);
    let _unregister = Unregister {
        heartbeats: heartbeats.clone(),
        shard,
    };
    let stall_budget = config.stall_budget();
    let beating = config.stale_wake_ms > 0;
    executor.run(async move {
        let mesh = ends.connect().await;
        let main_queue = ShardQueue {
            handle: glommio::executor().create_task_queue(
                Shares::default(),
                Latency::NotImportant,
                MAIN_QUEUE_NAME,
            ),
            name: Rc::from(MAIN_QUEUE_NAME),
        };
        let ctx = ShardContext {
            shard,
            shard_count,
            commands: CommandReceiver { inner: commands },
            mesh,
            main_queue: main_queue.clone(),
            stall_budget,
            stall_counters: stall_counters.clone(),
            heartbeats: heartbeats.clone(),
        };
        if beating {
            let beat = async move {
                loop {
                    heartbeats.beat(shard);
                    glommio::timer::sleep(Duration::from_millis(HEARTBEAT_PERIOD_MS)).await;
                }
            };
            match glommio::spawn_local_into(beat, main_queue.handle) {
                Ok(task) => {
                    task.detach();
                }
                Err(error) => tracing::error!(shard, "cannot spawn the shard heartbeat: {error}"),
            }
        }
        let watch = StallWatch::new(shard, main_queue.name.clone(), stall_budget, stall_counters);
        let main_task = watch.watch(main(ctx));
        guard.ready();
        tracing::debug!(shard, ?cpu, "shard running");
        match glommio::spawn_local_into(main_task, main_queue.handle) {
            Ok(task) => task.await,
            Err(error) => {
                tracing::error!(shard, "cannot spawn the shard main task: {error}");
            }
        }
        tracing::debug!(shard, "shard main task returned");
    });
}

/// Takes the shard off the wake watchdog's list when its thread stops running, however it
/// stops.
struct Unregister {
    heartbeats: Heartbeats,
    shard: usize,
}

impl Drop for Unregister {
    fn drop(&mut self) {
        self.heartbeats.unregister(self.shard);
    }
}

/// Builds the shard's executor on the current thread.
fn build_executor(
    shard: usize,
    cpu: Option<usize>,
    config: &RuntimeConfig,
) -> Result<LocalExecutor, String> {
    let placement = match cpu {
        Some(cpu) => {
            // glommio unwraps the topology probe for a fixed placement; probe first so a
            // machine without readable topology gets an error instead of a panic.
            let online = glommio::CpuSet::online().map_err(|error| {
                format!("cannot read the cpu topology to pin to cpu {cpu} ({error}): run unpinned")
            })?;
            if !online.iter().any(|location| location.cpu == cpu) {
                let mut cpus: Vec<usize> = online.iter().map(|location| location.cpu).collect();
                cpus.sort_unstable();
                return Err(format!(
                    "cpu {cpu} is not online (online cpus: {cpus:?}): choose shard cpus among \
                     them (--shard-cpus) or run unpinned"
                ));
            }
            Placement::Fixed(cpu)
        }
        None => Placement::Unbound,
    };
    let mut builder = LocalExecutorBuilder::new(placement)
        .name(&format!("nervix-shard-{shard}"))
        .io_memory(config.io_memory_bytes)
        .ring_depth(config.ring_depth)
        .blocking_thread_pool_placement(PoolPlacement::Unbound(1));
    let spin_us = config.applied_spin_before_park_us();
    if spin_us > 0 {
        builder = builder.spin_before_park(Duration::from_micros(spin_us));
    }
    if let (true, Some(budget)) = (config.stall_backtraces, config.stall_budget()) {
        builder = builder
            .preempt_timer(BacktraceStallHandler::preempt_timer_for(budget))
            .detect_stalls(Some(Box::new(BacktraceStallHandler::new(budget))));
    }
    builder
        .make()
        .map_err(|error| explain_start_error(&error, cpu, config))
}

/// Turns a glommio start error into a message that names the limit and the fix.
fn explain_start_error(
    error: &GlommioError<()>,
    cpu: Option<usize>,
    config: &RuntimeConfig,
) -> String {
    let needed_kib = config
        .locked_memory_bytes()
        .max(GLOMMIO_MIN_MEMLOCK_BYTES)
        .div_ceil(1024);
    match error {
        GlommioError::ReactorError(ReactorErrorKind::MemLockLimit(have, need)) => format!(
            "the locked-memory limit (`ulimit -l`) is {}, below glommio's minimum of {}: raise \
             `ulimit -l` to at least {needed_kib} (KiB; `LimitMEMLOCK=` in a systemd unit)",
            format_bytes(*have),
            format_bytes(*need)
        ),
        GlommioError::IoError(io) | GlommioError::EnhancedIoError { source: io, .. } => {
            match io.raw_os_error() {
                Some(12) => format!(
                    "io_uring setup failed ({io}): the kernel could not lock or allocate ring \
                     memory; raise `ulimit -l` to at least {needed_kib} (KiB) or lower \
                     --shard-io-memory ({}) or --shard-ring-depth ({})",
                    format_bytes(config.effective_io_memory_bytes() as u64),
                    config.ring_depth
                ),
                Some(38) => format!(
                    "io_uring setup failed ({io}): this kernel has no io_uring (Linux 5.8 or \
                     newer is needed)"
                ),
                Some(1) => format!(
                    "io_uring setup failed ({io}): io_uring is disabled for this process \
                     (check /proc/sys/kernel/io_uring_disabled, the seccomp profile or the \
                     container runtime's policy)"
                ),
                Some(22) if cpu.is_some() => format!(
                    "cannot start pinned to cpu {} ({io}): the cpu is outside this process's \
                     allowed set (see `taskset -p $$`); choose other --shard-cpus or run \
                     unpinned",
                    cpu.unwrap_or_default()
                ),
                Some(22) => format!(
                    "io_uring setup failed ({io}): ring depth {} was refused; lower \
                     --shard-ring-depth",
                    config.ring_depth
                ),
                _ => format!("executor setup failed: {io}"),
            }
        }
        GlommioError::BuilderError(kind) => format!(
            "cannot place the executor on cpu {cpu:?} ({kind}): choose other --shard-cpus or \
             run unpinned"
        ),
        other => format!("executor setup failed: {other}"),
    }
}

fn check_locked_memory(
    config: &RuntimeConfig,
    limit: Option<u64>,
    cap_ipc_lock: bool,
) -> Result<(), RuntimeError> {
    let Some(limit) = limit else {
        return Ok(());
    };
    let needed = config.locked_memory_bytes();
    let shards = config.shards.get();
    let io_memory = config.effective_io_memory_bytes();
    // glommio checks its own minimum whatever the capabilities.
    if limit < GLOMMIO_MIN_MEMLOCK_BYTES || (!cap_ipc_lock && limit < needed) {
        return Err(RuntimeError::LockedMemory {
            shards,
            io_memory,
            needed: needed.max(GLOMMIO_MIN_MEMLOCK_BYTES),
            limit,
        });
    }
    Ok(())
}

/// The soft `RLIMIT_MEMLOCK` of this process from `/proc/self/limits`; `None` when unlimited
/// or unreadable.
pub fn locked_memory_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_memlock_limit(&limits)
}

fn parse_memlock_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max locked memory"))?;
    let soft = line
        .trim_start_matches("Max locked memory")
        .split_whitespace()
        .next()?;
    soft.parse().ok()
}

/// Whether this process holds `CAP_IPC_LOCK` (then io_uring does not charge registered
/// buffers to `ulimit -l`), from `/proc/self/status`.
pub fn has_cap_ipc_lock() -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| parse_cap_eff(&status))
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

fn available_cores() -> NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// `1536` → `1.5 KiB`, `8388608` → `8 MiB`.
fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(value: usize) -> NonZeroUsize {
        NonZeroUsize::new(value).unwrap_or(NonZeroUsize::MIN)
    }

    #[test]
    fn default_placement_leaves_cpu_zero_when_cores_allow() {
        assert_eq!(
            CpuPlacement::default_for_cores(n(1), n(2)),
            CpuPlacement::Pinned(vec![1])
        );
        assert_eq!(
            CpuPlacement::default_for_cores(n(3), n(8)),
            CpuPlacement::Pinned(vec![1, 2, 3])
        );
        assert_eq!(
            CpuPlacement::default_for_cores(n(2), n(2)),
            CpuPlacement::Pinned(vec![0, 1])
        );
        assert_eq!(
            CpuPlacement::default_for_cores(n(4), n(2)),
            CpuPlacement::Pinned(vec![0, 1, 0, 1])
        );
        assert_eq!(CpuPlacement::Pinned(vec![5, 7]).cpu_for(3), Some(7));
        assert_eq!(CpuPlacement::Unpinned.cpu_for(0), None);
    }

    #[test]
    fn an_unpinned_shard_spins_no_longer_than_its_cap() {
        let mut pinned = RuntimeConfig::with_shards(n(1));
        pinned.cpus = CpuPlacement::Pinned(vec![0]);
        pinned.spin_before_park_us = 200;
        assert_eq!(pinned.applied_spin_before_park_us(), 200);
        let unpinned = pinned.clone().unpinned();
        assert_eq!(
            unpinned.applied_spin_before_park_us(),
            MAX_UNPINNED_SPIN_BEFORE_PARK_US
        );
        let mut off = unpinned;
        off.spin_before_park_us = 0;
        assert_eq!(off.applied_spin_before_park_us(), 0);
    }

    #[test]
    fn validation_names_the_setting() {
        let mut config = RuntimeConfig::with_shards(n(1));
        assert!(config.validate().is_ok());
        config.ring_depth = 0;
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("ring depth"));
        config.ring_depth = 128;
        config.io_memory_bytes = usize::MAX;
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--shard-io-memory"));
        config.io_memory_bytes = DEFAULT_IO_MEMORY_BYTES;
        config.cpus = CpuPlacement::Pinned(vec![]);
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("no cpus"));
        config.cpus = CpuPlacement::Unpinned;
        config.mesh_capacity_messages = 0;
        assert!(config.validate().is_err());
        config.mesh_capacity_messages = 16;
        config.command_capacity = 0;
        assert!(config.validate().is_err());
    }

    #[test]
    fn effective_io_memory_matches_glommio_rounding() {
        let mut config = RuntimeConfig::with_shards(n(3));
        assert_eq!(config.effective_io_memory_bytes(), 512 * 1024);
        assert_eq!(config.locked_memory_bytes(), 3 * 3 * 512 * 1024);
        config.io_memory_bytes = 1;
        assert_eq!(config.effective_io_memory_bytes(), 64 * 1024);
        config.io_memory_bytes = 100_000;
        assert_eq!(config.effective_io_memory_bytes(), 102_400);
    }

    #[test]
    fn locked_memory_check() {
        let mut config = RuntimeConfig::with_shards(n(4));
        let limit = Some(8 << 20);
        // 4 × 512 KiB × 3 = 6 MiB fits; 4 × 1 MiB × 3 = 12 MiB does not.
        assert!(check_locked_memory(&config, limit, false).is_ok());
        config.io_memory_bytes = 1 << 20;
        let error = check_locked_memory(&config, limit, false)
            .unwrap_err()
            .to_string();
        assert!(error.contains("`ulimit -l` allows 8 MiB"), "{error}");
        assert!(error.contains("need 12 MiB"), "{error}");
        assert!(error.contains("at least 12288"), "{error}");
        assert!(check_locked_memory(&config, limit, true).is_ok());
        assert!(check_locked_memory(&config, None, false).is_ok());
        // glommio's own floor applies even with CAP_IPC_LOCK.
        let error = check_locked_memory(&config, Some(64 * 1024), true).unwrap_err();
        assert!(error.to_string().contains("allows 64 KiB"), "{error}");
    }

    #[test]
    fn parses_proc_files() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max locked memory         8388608              8388608              bytes\n";
        assert_eq!(parse_memlock_limit(limits), Some(8_388_608));
        let unlimited =
            "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(parse_memlock_limit(unlimited), None);
        assert_eq!(
            parse_cap_eff("Name:\tx\nCapEff:\t000001fffeffffff\n"),
            Some(0x1fffeffffff)
        );
    }

    #[test]
    fn formats_bytes() {
        assert_eq!(format_bytes(100), "100 B");
        assert_eq!(format_bytes(512 * 1024), "512 KiB");
        assert_eq!(format_bytes(8 << 20), "8 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
    }

    #[test]
    fn memlock_error_names_the_fix() {
        let config = RuntimeConfig::with_shards(n(1));
        let error = GlommioError::<()>::ReactorError(ReactorErrorKind::MemLockLimit(
            256 * 1024,
            512 * 1024,
        ));
        let message = explain_start_error(&error, None, &config);
        assert!(
            message.contains("is 256 KiB, below glommio's minimum of 512 KiB"),
            "{message}"
        );
        assert!(
            message.contains("raise `ulimit -l` to at least 1536"),
            "{message}"
        );
        let enomem = GlommioError::<()>::IoError(std::io::Error::from_raw_os_error(12));
        assert!(explain_start_error(&enomem, None, &config).contains("io_uring setup failed"));
    }
}
