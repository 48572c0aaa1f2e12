//! Everything one shard owns for the data plane: the graphs of the started domains placed on
//! it, the acknowledgement slab of the payloads it admitted, the client producers and
//! consumers attached to it, and its file sinks (DESIGN §3 "Shards").
//!
//! [`ShardState`] is plain single-threaded state: session connections, the ticker and the
//! control commands all run as tasks on the shard's one executor and call into it through
//! short `RefCell` borrows that never span an `.await`. Every entry point ends with
//! [`ShardState::step`], which admits queued batches, pumps the graphs, hands frames to sinks
//! and answers resolved batches until nothing moves, so no work waits for a timer it does not
//! need.

pub mod alter;
pub mod buffers;
pub mod collect;
pub mod endpoint;
pub mod graph;
pub mod http_sink;
pub mod ingest;
pub mod kafka;
pub mod kafka_sink;
pub mod mesh;
pub mod sink_body;
pub mod sinks;
pub mod snapshots;
pub mod subscription;
pub mod watch;

use std::collections::HashMap;
use std::sync::Arc;

use nervix_net::session::frame::{Frame as SessionFrame, ProducerEndReason};
use nervix_shards::ack::AckSlab;
use nervix_shards::flush::Now;

use self::graph::{Graph, Instant, PayloadToken};
use self::ingest::{Admission, ProducerState};
use self::sinks::{ConsumerState, FileSinkHandle};
use crate::runtime::clock;
use crate::runtime::plan::{DomainPlan, SinkPlan};

/// The acknowledgement context of one step, from disjoint fields of a [`ShardState`] (so the
/// caller may hold a graph borrowed from `runs` meanwhile).
macro_rules! cx {
    ($state:expr) => {
        &mut $crate::runtime::shard::mesh::Ctx {
            shard: $state.shard,
            shards: $state.shards,
            slab: &mut $state.slab,
            outbox: &mut $state.outbox,
            progressed: &mut $state.progressed,
            watches: &mut $state.watches,
        }
    };
}
pub(crate) use cx;

/// Payload roots one shard tracks at once; a full slab answers further batches `busy`.
pub const ACK_SLAB_ROOTS: u32 = 65_536;

/// Where a producer's or consumer's answers go: a session connection's writer, or an
/// in-process client. Unbounded as a channel but bounded by the protocol: the server sends at
/// most one outcome per outstanding batch (≤ credit), one delivery per consumer credit, and one
/// control frame per request.
#[derive(Clone)]
pub enum Outbound {
    Session(async_channel::Sender<SessionFrame>),
    InProcess(async_channel::Sender<InProcessEvent>),
}

/// What an in-process client receives: protocol frames, and deliveries as batches (no IPC).
pub enum InProcessEvent {
    Frame(SessionFrame),
    Delivery {
        consumer_id: u64,
        delivery_seq: u64,
        batch: arrow_array::RecordBatch,
    },
}

impl Outbound {
    /// Queues a frame; false when the client is gone.
    pub fn try_send(&self, frame: SessionFrame) -> bool {
        match self {
            Outbound::Session(tx) => tx.try_send(frame).is_ok(),
            Outbound::InProcess(tx) => tx.try_send(InProcessEvent::Frame(frame)).is_ok(),
        }
    }

    /// Queues a delivery: canonical Arrow IPC for a session, the batch itself in process.
    pub fn deliver(
        &self,
        consumer_id: u64,
        delivery_seq: u64,
        batch: &arrow_array::RecordBatch,
    ) -> Result<(), String> {
        match self {
            Outbound::Session(tx) => {
                let ipc = nervix_net::batch::encode_batch(batch).map_err(|e| e.to_string())?;
                tx.try_send(SessionFrame::Delivery {
                    consumer_id,
                    delivery_seq,
                    ipc,
                })
                .map_err(|_| "the session closed".to_string())
            }
            Outbound::InProcess(tx) => tx
                .try_send(InProcessEvent::Delivery {
                    consumer_id,
                    delivery_seq,
                    batch: batch.clone(),
                })
                .map_err(|_| "the client closed".to_string()),
        }
    }
}

/// One started domain on this shard.
pub struct DomainRun {
    pub graph: Graph,
    pub admission: Vec<Admission>,
    pub files: HashMap<usize, FileSinkHandle>,
    /// HTTP REQUEST emitters' connector tasks, by emitter index (on the sink shard).
    pub http_sinks: HashMap<usize, http_sink::HttpSinkHandle>,
    /// KAFKA TOPIC emitters' producers, by emitter index (on the sink shard).
    pub kafka_sinks: HashMap<usize, kafka_sink::KafkaSinkHandle>,
    /// Per ingestor: the endpoint intake of an HTTP / WEBSOCKETS ENDPOINT ingestor.
    pub intakes: Vec<Option<endpoint::PayloadIntake>>,
    /// KAFKA TOPIC consumer instances (on the graph shard), each fed by its consumer task.
    pub kafka: Vec<kafka::KafkaIntake>,
    /// START generation, told to producers.
    pub generation: u64,
}

/// The data-plane state of one shard.
pub struct ShardState {
    pub shard: usize,
    pub shards: usize,
    /// Messages for other shards, sent by the driver's mesh tasks.
    pub outbox: mesh::Outbox,
    /// Roots that made acknowledgement progress since the last step (see `ingest::time_out`).
    pub progressed: Vec<nervix_shards::ack::AckHandle>,
    /// Wakes the driver to send what the outbox holds.
    pub outbox_kick: async_channel::Sender<()>,
    pub runs: HashMap<String, DomainRun>,
    /// A graceful drain runs: sources take nothing new.
    pub draining: bool,
    /// Kafka consumer tasks still running (a drain waits until they closed their consumers).
    pub kafka_consumers_live: usize,
    /// Runtime state that survives restarts (Kafka OFFSET BY DOMAIN offsets).
    pub runtime_state: Option<Arc<crate::runtime::state_store::RuntimeState>>,
    /// Every domain the catalog knows, with whether it is started (for open refusals).
    pub known: HashMap<String, bool>,
    pub slab: AckSlab<PayloadToken>,
    pub producers: HashMap<u64, ProducerState>,
    pub consumers: HashMap<u64, ConsumerState>,
    pub admitted: ingest::AdmittedMap,
    next_id: u64,
    resolved: Vec<(
        nervix_shards::ack::AckHandle,
        PayloadToken,
        nervix_shards::ack::Outcome,
    )>,
    /// Wakes the ticker when a new deadline is earlier than the one it sleeps for.
    pub kick: async_channel::Sender<()>,
    /// The physical instant the ticker sleeps until (0 while it is awake and ticking).
    pub ticker_sleeps_until_ns: u64,
    /// Queued batches wait for a step that admission's per-step budget deferred.
    pub more_work: bool,
    pub counters: ShardCounters,
    /// Where FILE clients' relative roots live.
    pub data_dir: std::path::PathBuf,
    /// Dropping it stops this shard's data listeners (graceful shutdown).
    pub stop_listeners: Option<async_channel::Sender<()>>,
    /// The node's connector runtime (HTTP clients), when the node has one.
    pub connectors: Option<nervix_connectors::runtime::ConnectorRuntime>,
    /// The node's extension workers (JAQ unfolding and emitting), shared by every shard.
    pub extension: Option<std::sync::Arc<nervix_shards::workers::WorkerClass>>,
    /// Processor snapshots in flight.
    pub snapshots: snapshots::Snapshots,
    /// Payload outcomes this shard's deduplicators wait for (`watch.rs`).
    pub watches: watch::Watches,
}

/// Node-wide counters for `/metrics`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ShardCounters {
    pub batches_completed: u64,
    pub batches_rejected: u64,
    pub batches_failed: u64,
    pub batches_invalid: u64,
    pub batches_busy: u64,
    pub rows_admitted: u64,
    pub bytes_admitted: u64,
    pub rows_delivered: u64,
    pub stale_acks: u64,
    /// File appends that failed and wait for their retry.
    pub file_write_failures: u64,
    /// Processor snapshots (`snapshots.rs`): what they cost the shard.
    pub snapshot: SnapshotCounters,
}

/// What processor snapshots cost a shard, for `/metrics`: the shard encodes every changed
/// branch state once per round, so these show whether state persistence is eating the shard.
#[derive(Debug, Default, Clone, Copy)]
pub struct SnapshotCounters {
    /// Branch states encoded (periodic passes and stops; a pass the writer refused is
    /// encoded again by the next one, and counted again).
    pub states: u64,
    /// Stored states deleted because their branch state left (emptied, expired, evicted).
    pub deletions: u64,
    /// Bytes of those encodings.
    pub bytes: u64,
    /// Passes that encoded something (a round of more than `MAX_ENTRIES_PER_PASS` states
    /// takes several).
    pub passes: u64,
    /// Shard time spent encoding passes, µs.
    pub encode_us: u64,
    /// Intervals or passes put off because the writer was behind (tickets in flight at their
    /// bound, or its queue refused the snapshot): their states stay dirty for the next one.
    pub deferred: u64,
    /// Snapshots the writer could not commit: their states are written again by the next
    /// pass, and their rows wait for it.
    pub failed: u64,
}

impl SnapshotCounters {
    /// Applies `op` field by field (sums across shards, growth between two readings).
    fn zip(self, other: SnapshotCounters, op: fn(u64, u64) -> u64) -> SnapshotCounters {
        SnapshotCounters {
            states: op(self.states, other.states),
            deletions: op(self.deletions, other.deletions),
            bytes: op(self.bytes, other.bytes),
            passes: op(self.passes, other.passes),
            encode_us: op(self.encode_us, other.encode_us),
            deferred: op(self.deferred, other.deferred),
            failed: op(self.failed, other.failed),
        }
    }
}

impl std::ops::Add for SnapshotCounters {
    type Output = SnapshotCounters;

    fn add(self, other: SnapshotCounters) -> SnapshotCounters {
        self.zip(other, u64::saturating_add)
    }
}

/// Growth since an earlier reading (counters only grow; a reading from a restarted shard
/// saturates at zero).
impl std::ops::Sub for SnapshotCounters {
    type Output = SnapshotCounters;

    fn sub(self, earlier: SnapshotCounters) -> SnapshotCounters {
        self.zip(earlier, u64::saturating_sub)
    }
}

impl ShardState {
    pub fn new(
        shard: usize,
        shards: usize,
        kick: async_channel::Sender<()>,
        data_dir: std::path::PathBuf,
    ) -> ShardState {
        ShardState {
            shard,
            shards,
            outbox: mesh::Outbox::new(shards),
            progressed: Vec::new(),
            outbox_kick: async_channel::bounded(1).0,
            runs: HashMap::new(),
            known: HashMap::new(),
            slab: AckSlab::new(ACK_SLAB_ROOTS)
                .unwrap_or_else(|_| unreachable!("a valid constant capacity")),
            producers: HashMap::new(),
            consumers: HashMap::new(),
            admitted: HashMap::new(),
            next_id: 1,
            resolved: Vec::new(),
            kick,
            ticker_sleeps_until_ns: 0,
            more_work: false,
            counters: ShardCounters::default(),
            data_dir,
            stop_listeners: None,
            draining: false,
            kafka_consumers_live: 0,
            runtime_state: None,
            connectors: None,
            extension: None,
            snapshots: snapshots::Snapshots::default(),
            watches: watch::Watches::default(),
        }
    }

    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// The node clocks' reading for one step (UTC as logical time; each graph maps it into
    /// its domain's time, see [`Instant`]).
    pub fn instant(&self) -> Instant {
        let wall = clock::wall_ns();
        Instant {
            now: Now::new(wall, clock::physical_ns()),
            snapshot_ns: wall,
        }
    }

    /// Starts (or replaces) a domain's graph. A replaced graph is flushed first and its
    /// attachments end: the contract changed.
    pub fn deploy(&mut self, plan: Arc<DomainPlan>) {
        let name = plan.name.clone();
        self.undeploy(&name, ProducerEndReason::ContractChanged);
        let graph = Graph::new(plan.clone());
        let admission = plan
            .ingestors
            .iter()
            .map(|i| Admission::new(i.window))
            .collect();
        // Sinks and pollers run on the root shard only (see `mesh`): one writer per file.
        let sink_shard = self.shard == mesh::ROOT_SHARD;
        let intakes = plan
            .ingestors
            .iter()
            .map(|i| match &i.source {
                crate::runtime::plan::SourcePlan::Endpoint(endpoint) => {
                    Some(endpoint::PayloadIntake::new(
                        endpoint::IntakeSource::Endpoint(endpoint.clone()),
                    ))
                }
                // A poller runs once per node, on the sink shard.
                crate::runtime::plan::SourcePlan::HttpPoll(poll) if sink_shard => Some(
                    endpoint::PayloadIntake::new(endpoint::IntakeSource::Poll(poll.clone())),
                ),
                // A WEBSOCKETS CONNECTION session runs once per node, on the sink shard.
                crate::runtime::plan::SourcePlan::WebsocketsConnection(connection)
                    if sink_shard =>
                {
                    Some(endpoint::PayloadIntake::new(
                        endpoint::IntakeSource::Connection(connection.clone()),
                    ))
                }
                _ => None,
            })
            .collect();
        let mut kafka = Vec::new();
        for (index, ingestor) in plan.ingestors.iter().enumerate() {
            if let (crate::runtime::plan::SourcePlan::Kafka(source), true) =
                (&ingestor.source, sink_shard)
            {
                for instance in 0..source.instances {
                    let id = self.next_id();
                    kafka.push(kafka::KafkaIntake::new(
                        source.clone(),
                        index,
                        instance,
                        id,
                        ingestor.uses_envelope,
                    ));
                }
            }
        }
        let mut files = HashMap::new();
        // Sinks deliver on the root shard only (see `mesh`): one writer per file.
        for (index, emitter) in plan.emitters.iter().enumerate() {
            if !sink_shard {
                break;
            }
            if let SinkPlan::FileAppend { path, format } = &emitter.sink {
                match FileSinkHandle::start(path.clone(), *format, emitter.name.clone()) {
                    Ok(handle) => {
                        files.insert(index, handle);
                    }
                    Err(error) => tracing::error!(
                        "domain '{name}': emitter '{}' cannot open {}: {error}",
                        emitter.name,
                        path.display()
                    ),
                }
            }
        }
        let http_sinks = match (&self.connectors, sink_shard) {
            (Some(runtime), true) => {
                http_sink::start_http_sinks(runtime, &plan, self.extension.as_ref())
            }
            _ => HashMap::new(),
        };
        let kafka_sinks = if sink_shard {
            kafka_sink::start_kafka_sinks(&plan, self.extension.as_ref())
        } else {
            HashMap::new()
        };
        tracing::info!(
            "shard {}: domain '{name}' running: {} relays, {} ingestors, {} processors, {} emitters",
            self.shard,
            plan.relays.len(),
            plan.ingestors.len(),
            plan.processors.len(),
            plan.emitters.len()
        );
        self.known.insert(name.clone(), true);
        self.runs.insert(
            name,
            DomainRun {
                graph,
                admission,
                files,
                http_sinks,
                kafka_sinks,
                intakes,
                kafka,
                generation: plan.generation,
            },
        );
        self.restore_domain(&plan.name);
        self.step();
    }

    /// Stops a domain: buffered rows are flushed towards their sinks, producers and consumers
    /// attached to it end with `reason`, its graph is dropped.
    pub fn undeploy(&mut self, domain: &str, reason: ProducerEndReason) {
        if !self.runs.contains_key(domain) {
            return;
        }
        self.close_all_groups(domain);
        self.close_kafka_groups(domain);
        let at = self.instant();
        if let Some(run) = self.runs.get_mut(domain) {
            run.graph.flush_all(None, at, cx!(self));
            run.graph.pump(at, cx!(self));
        }
        // After the flush: rows it released (due reorder rows, collected correlator rows)
        // are then in no state the snapshot holds, so a restart does not send them again.
        self.snapshot_domain_now(domain);
        self.dispatch_sinks();
        self.end_attachments(domain, reason);
        self.persist_kafka_offsets(domain, None);
        self.runs.remove(domain);
        self.snapshots.forget_domain(domain);
        self.known.insert(domain.to_string(), false);
    }

    /// One round of work until nothing moves, with a fresh delivery budget.
    pub fn step(&mut self) {
        let budget = graph::DeliveryBudget::for_step(clock::physical_ns());
        for run in self.runs.values_mut() {
            run.graph.deliver_budget = budget;
        }
        self.step_within_budget();
    }

    /// [`ShardState::step`] with what is left of the delivery budget the graphs hold, so a
    /// tick and the step after it share one budget (one poll of the ticker).
    fn step_within_budget(&mut self) {
        for run in self.runs.values_mut() {
            run.graph.deferred = false;
        }
        let mut budget = ingest::MAX_ADMITS_PER_STEP;
        for _ in 0..ingest::MAX_STEP_ROUNDS {
            let at = self.instant();
            let (mut moved, admitted) = self.admit(at, budget);
            budget -= admitted;
            for run in self.runs.values_mut() {
                moved |= run.graph.pump(at, cx!(self));
            }
            moved |= self.dispatch_sinks();
            self.note_progress(at.now.physical_ns);
            moved |= self.answer_resolved();
            moved |= self.hand_watch_outcomes();
            if !moved {
                break;
            }
        }
        if !self.outbox.is_empty() {
            let _ = self.outbox_kick.try_send(());
        }
        // Work left for the next step (admissions, relay frames past the step's budget): the
        // ticker continues it after letting other tasks run.
        let mut deferred = false;
        for run in self.runs.values_mut() {
            deferred |= run.graph.deferred;
            run.graph.deliver_budget = graph::DeliveryBudget::UNBOUNDED;
        }
        self.more_work = deferred || self.admissible_waiting();
        if self.more_work {
            let _ = self.kick.try_send(());
        }
        // A buffer armed a deadline earlier than the ticker's: wake it (FLUSH IMMEDIATE's
        // 100 µs window must not wait for a sleep computed before the rows arrived).
        let armed = self
            .runs
            .values_mut()
            .filter_map(|run| run.graph.take_armed_ns())
            .min();
        if let Some(armed) = armed {
            if self.ticker_sleeps_until_ns != 0 && armed < self.ticker_sleeps_until_ns {
                let _ = self.kick.try_send(());
            }
        }
    }

    /// Whether frames from other shards must wait before more are read from the mesh.
    pub fn inbound_blocked(&self) -> bool {
        self.runs.values().any(|run| run.graph.inbound_blocked())
            || self
                .outbox
                .queues
                .iter()
                .any(|q| q.len() > 4 * mesh::MESH_OUTBOX_FRAMES)
    }

    /// A message from another shard.
    pub fn on_mesh(&mut self, message: mesh::MeshMsg) {
        let at = self.instant();
        match message {
            mesh::MeshMsg::RelayFrame {
                domain,
                relay,
                frame,
                forward_to,
            } => {
                if let Some(to) = forward_to.filter(|to| *to != self.shard) {
                    self.outbox.queues[to].push_back(mesh::MeshMsg::RelayFrame {
                        domain,
                        relay,
                        frame,
                        forward_to: None,
                    });
                } else if let Some(run) = self.runs.get_mut(&domain) {
                    run.graph.receive_relay_frame(&relay, frame, at, cx!(self));
                } else {
                    for run in &frame.acks {
                        cx!(self).nack(run.root);
                    }
                }
            }
            mesh::MeshMsg::EmitterFrame {
                domain,
                emitter,
                frame,
            } => match self.runs.get_mut(&domain) {
                Some(run) => run.graph.receive_emitter_frame(&emitter, frame, cx!(self)),
                None => {
                    for run in &frame.acks {
                        cx!(self).nack(run.root);
                    }
                }
            },
            mesh::MeshMsg::AckOps(ops) => {
                let refused = mesh::apply_ops(
                    &mut self.slab,
                    &ops,
                    &mut self.progressed,
                    &mut self.watches,
                    &mut self.outbox,
                );
                self.counters.stale_acks += refused as u64;
            }
            mesh::MeshMsg::WatchOutcomes(outcomes) => self.watches.ready.extend(outcomes),
        }
        self.step();
    }

    /// Force-flushes every route buffer of every domain (graceful shutdown), then steps.
    pub fn flush_everything(&mut self) {
        let at = self.instant();
        for run in self.runs.values_mut() {
            run.graph.flush_all(None, at, cx!(self));
        }
        self.step();
        // After the flush, as in `undeploy`: what it released is in no snapshotted state.
        let domains: Vec<String> = self.runs.keys().cloned().collect();
        for domain in domains {
            self.snapshot_domain_now(&domain);
        }
    }

    /// Flushes due route buffers, sweeps branches and times out batches, then steps; the tick's
    /// deliveries and the step's share one delivery budget.
    pub fn tick(&mut self) {
        let at = self.instant();
        let budget = graph::DeliveryBudget::for_step(clock::physical_ns());
        for run in self.runs.values_mut() {
            run.graph.deliver_budget = budget;
            run.graph.tick(at, cx!(self));
        }
        self.time_out(at);
        self.endpoint_tick(at);
        self.snapshot_tick(at.now.physical_ns);
        self.step_within_budget();
    }

    /// The earliest instant, in physical ns, the ticker must wake at.
    pub fn next_wake_ns(&self) -> Option<u64> {
        let at = self.instant();
        let mut wake: Option<u64> = self.endpoint_deadline_ns();
        // A snapshot not written is written again whatever changes (snapshots.rs).
        if self.snapshots.owes_pass() || self.runs.values().any(|run| run.graph.work_changed()) {
            let p = self.snapshots.next_due_ns(at.now.physical_ns);
            wake = Some(wake.map_or(p, |w| w.min(p)));
        }
        for run in self.runs.values() {
            let (logical, physical) = run.graph.next_deadline();
            if let Some(p) = physical {
                wake = Some(wake.map_or(p, |w| w.min(p)));
            }
            if let Some(l) = logical {
                let pace = &run.graph.plan.pace;
                let p = pace.physical_deadline_ns(l, at.in_domain(pace).now);
                wake = Some(wake.map_or(p, |w| w.min(p)));
            }
        }
        wake
    }

    /// Hands the answers to this shard's watches to the graphs (an entry is one graph's).
    fn hand_watch_outcomes(&mut self) -> bool {
        if self.watches.ready.is_empty() {
            return false;
        }
        let outcomes = std::mem::take(&mut self.watches.ready);
        for run in self.runs.values_mut() {
            run.graph.watch_outcomes(&outcomes);
        }
        true
    }

    fn answer_resolved(&mut self) -> bool {
        self.slab.drain_resolved_handles(&mut self.resolved);
        if self.resolved.is_empty() {
            return false;
        }
        let resolved = std::mem::take(&mut self.resolved);
        for (root, token, outcome) in &resolved {
            let acknowledged = *outcome == nervix_shards::ack::Outcome::Acked;
            self.watches
                .resolved(&mut self.outbox, *root, *token, acknowledged);
            if token.producer & kafka::KAFKA_TOKEN_TAG != 0 {
                let acked = *outcome == nervix_shards::ack::Outcome::Acked;
                self.kafka_resolved(*token, acked);
            } else {
                self.resolve_payload(*token, *outcome);
            }
        }
        self.resolved = resolved;
        self.resolved.clear();
        true
    }
}
