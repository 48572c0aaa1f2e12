//! The main task of each shard: control commands, the session listener (on the graph shard),
//! the flush ticker and file-sink completions, all as local tasks around one
//! [`ShardState`].
//!
//! The ticker sleeps until the earliest flush deadline, TTL expiry or ack timeout the state
//! reports (at most [`MAX_TICK_SLEEP_MS`]), and is woken early whenever new work may have armed
//! an earlier deadline (a kick), so FLUSH IMMEDIATE's 100 µs window is kept without polling.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use nervix_net::session::frame::ProducerEndReason;
use nervix_shards::runtime::ShardContext;

use super::change::ModelChange;
use super::plan::DomainPlan;
use super::shard::graph::{NodeRef, Tap};
use super::shard::mesh::MeshMsg;
use super::shard::{DomainRun, ShardState};

/// The longest the ticker sleeps without a deadline (branch TTL sweeps, ack timeouts).
pub const MAX_TICK_SLEEP_MS: u64 = 50;

/// While a backlog keeps the ticker busy (work deferred from step to step), the longest it
/// goes without letting the executor poll its rings (sockets, timers), in ns: the FLUSH
/// IMMEDIATE window, so a backlog delays new input no more than a flush waits anyway.
pub const MAX_BACKLOG_IO_POLL_INTERVAL_NS: u64 = 100_000;

/// Control → shard.
pub enum Command {
    /// Domains the catalog knows and whether each is started.
    Known(Vec<(String, bool)>),
    /// Run `plan`; a domain already running here adopts it as `change` says.
    Deploy {
        plan: Arc<DomainPlan>,
        change: ModelChange,
        done: tokio::sync::oneshot::Sender<()>,
    },
    Undeploy {
        domain: String,
        done: tokio::sync::oneshot::Sender<()>,
    },
    Subscribe {
        id: u64,
        label: String,
        domain: String,
        relay: String,
        filter: Option<crate::vm::Program>,
        sample_rate: f64,
        sink: tokio::sync::mpsc::Sender<String>,
        done: tokio::sync::oneshot::Sender<Result<(), String>>,
    },
    Unsubscribe {
        id: u64,
    },
    Stats {
        reply: tokio::sync::oneshot::Sender<ShardStats>,
    },
    /// An in-process producer (answers arrive on `events` as protocol frames).
    OpenProducer {
        domain: String,
        ingestor: String,
        fields: Vec<nervix_net::session::frame::ExpectedField>,
        credit_batches: u32,
        credit_bytes: u64,
        events: async_channel::Sender<super::shard::InProcessEvent>,
    },
    Submit {
        producer: u64,
        batch_seq: u64,
        batch: arrow_array::RecordBatch,
    },
    /// An in-process consumer (deliveries arrive on `events` as batches).
    OpenConsumer {
        domain: String,
        emitter: String,
        credit_batches: u32,
        events: async_channel::Sender<super::shard::InProcessEvent>,
    },
    Ack {
        consumer: u64,
        delivery_seq: u64,
        accepted: bool,
    },
    CloseProducer {
        producer: u64,
    },
    CloseConsumer {
        consumer: u64,
    },
    /// Flush everything, let sinks finish for at most `deadline_ms`, end attachments.
    Drain {
        deadline_ms: u64,
        done: tokio::sync::oneshot::Sender<()>,
    },
}

/// Figures one shard reports for DESCRIBE and `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct ShardStats {
    pub shard: usize,
    pub counters: super::shard::ShardCounters,
    pub open_roots: u32,
    pub producers: usize,
    pub consumers: usize,
    pub stalls: u64,
    /// Times the wake watchdog signalled this shard (it missed its heartbeat).
    pub watchdog_wakes: u64,
    /// Per domain: nodes (kind, name, rows in, rows out, message errors), relays (name, frames
    /// held, rows published), branches (name, live, evictions ttl/lru/explicit).
    pub domains: Vec<DomainStats>,
}

#[derive(Debug, Clone, Default)]
pub struct DomainStats {
    pub domain: String,
    pub nodes: Vec<NodeStats>,
    pub relays: Vec<(String, usize, u64)>,
    pub branches: Vec<(String, usize, u64, u64, u64)>,
    pub ingestors: Vec<IngestorStats>,
    /// Per deduplicator: (name, keys kept, keys held for a payload not yet resolved).
    pub dedup_keys: Vec<(String, u64, u64)>,
}

/// One node's figures.
#[derive(Debug, Clone, Default)]
pub struct NodeStats {
    /// `ingestor`, `junction`, `reingestor`, `emitter`.
    pub kind: String,
    pub name: String,
    pub rows_in: u64,
    pub rows_out: u64,
    pub message_errors: u64,
    /// Rows in per second over the last full second.
    pub rate_in_per_sec: f64,
}

#[derive(Debug, Clone, Default)]
pub struct IngestorStats {
    pub name: String,
    pub producers: usize,
    pub outstanding_batches: u32,
    pub outstanding_bytes: u64,
    pub admitted_batches: u32,
    pub admission_open: bool,
    /// Payload-decoding sources (endpoints, polls): what their intake on this shard counted.
    pub intake: Option<super::shard::endpoint::IntakeCounters>,
    /// Payloads and bytes a quiesce BUFFER holds.
    pub retained: (usize, u64),
    /// KAFKA TOPIC: each consumer instance's counters and records awaiting acknowledgement.
    pub kafka: Vec<(u32, super::shard::kafka::KafkaCounters, usize)>,
}

type Listen = (
    SocketAddr,
    std::sync::mpsc::Sender<Result<SocketAddr, String>>,
);

/// How long a task may keep the shard before it goes back to the reactor (so timers, other
/// connections and the flush ticker run): a backlog of ready commands or frames would
/// otherwise be handled in one poll.
pub const MAX_RUN_BEFORE_YIELD_NS: u64 = 500_000;

/// Yields to the reactor once a task has run [`MAX_RUN_BEFORE_YIELD_NS`] since it last did.
pub(crate) struct Fairness {
    since_ns: u64,
}

impl Fairness {
    pub(crate) fn new() -> Fairness {
        Fairness {
            since_ns: super::clock::physical_ns(),
        }
    }

    pub(crate) async fn yield_if_due(&mut self) {
        let now = super::clock::physical_ns();
        if now.saturating_sub(self.since_ns) >= MAX_RUN_BEFORE_YIELD_NS {
            // A timer, not `yield_now`: other task queues run only once this one parks.
            glommio::timer::sleep(Duration::from_micros(1)).await;
            self.since_ns = super::clock::physical_ns();
        }
    }
}

/// How long the driver waits before retrying a full mesh channel, and a mesh reader before
/// looking again whether inbound frames found room.
const MESH_RETRY_US: u64 = 200;

/// One reader task per peer. It pauses while inbound frames wait for room, so the bounded
/// channel backpressures the sending shard; nothing is dropped.
fn start_mesh_readers(state: &Rc<RefCell<ShardState>>, ctx: &mut ShardContext<MeshMsg, Command>) {
    for (_, receiver) in ctx.mesh.take_receivers() {
        let state = state.clone();
        glommio::spawn_local(async move {
            loop {
                while state.borrow().inbound_blocked() {
                    glommio::timer::sleep(Duration::from_micros(MESH_RETRY_US)).await;
                    state.borrow_mut().step();
                }
                match receiver.recv().await {
                    Some(message) => state.borrow_mut().on_mesh(message),
                    None => break,
                }
            }
        })
        .detach();
    }
}

/// Sends what the outbox holds without waiting; returns whether something is left because a
/// peer's channel is full (the caller retries shortly; nothing is dropped).
fn drain_outbox(
    state: &Rc<RefCell<ShardState>>,
    mesh: &nervix_shards::mesh::Mesh<MeshMsg>,
) -> bool {
    let mut shard = state.borrow_mut();
    let mut left = false;
    let mut sent = false;
    for to in 0..shard.shards {
        let Some(sender) = mesh.try_sender(to) else {
            continue;
        };
        while let Some(message) = shard.outbox.queues[to].pop_front() {
            match sender.try_send(message) {
                Ok(()) => sent = true,
                Err(error) if error.is_full() => {
                    shard.outbox.queues[to].push_front(error.into_message());
                    left = true;
                    break;
                }
                Err(_) => {
                    tracing::error!("shard {}: the mesh to shard {to} closed", shard.shard);
                    break;
                }
            }
        }
    }
    if sent {
        // Room in the outbox lets nodes that waited for it go on.
        shard.step();
    }
    left
}

/// What every shard shares with the node: listeners, certificates, the connector runtime, the
/// extension workers and the runtime state.
#[derive(Clone)]
pub struct NodeServices {
    pub data_dir: PathBuf,
    pub listeners: super::http::DataListeners,
    pub certs: Arc<nervix_net::http::CertStore>,
    pub connectors: nervix_connectors::runtime::ConnectorRuntime,
    pub extension: Arc<nervix_shards::workers::WorkerClass>,
    pub runtime_state: Arc<super::state_store::RuntimeState>,
}

/// One shard's main task.
pub async fn shard_main(
    mut ctx: ShardContext<MeshMsg, Command>,
    listen: Option<Listen>,
    services: NodeServices,
) {
    let (kick, kicked) = async_channel::bounded::<()>(1);
    let shards = ctx.shard_count.get();
    let NodeServices {
        data_dir,
        listeners,
        certs,
        connectors,
        extension,
        runtime_state,
    } = services;
    let state = Rc::new(RefCell::new(ShardState::new(
        ctx.shard, shards, kick, data_dir,
    )));
    state.borrow_mut().connectors = Some(connectors);
    state.borrow_mut().extension = Some(extension);
    state.borrow_mut().runtime_state = Some(runtime_state);
    start_mesh_readers(&state, &mut ctx);
    // Shared so session and ticker tasks are spawned stall-watched in named task queues.
    let ctx = Rc::new(ctx);
    if let Some((addr, bound)) = listen {
        match glommio::net::TcpListener::bind(addr) {
            Ok(listener) => {
                let local = listener.local_addr().unwrap_or(addr);
                let _ = bound.send(Ok(local));
                let accept_state = state.clone();
                let sessions = ctx.task_queue("sessions");
                let spawner = ctx.clone();
                glommio::spawn_local(async move {
                    loop {
                        match listener.accept().await {
                            Ok(stream) => {
                                let state = accept_state.clone();
                                let task = super::session::serve_connection(state, stream);
                                match spawner.spawn_into(&sessions, task) {
                                    Ok(task) => {
                                        task.detach();
                                    }
                                    Err(error) => tracing::error!("session: {error}"),
                                }
                            }
                            Err(error) => {
                                tracing::warn!("session listener: {error}");
                                glommio::timer::sleep(Duration::from_millis(10)).await;
                            }
                        }
                    }
                })
                .detach();
            }
            Err(error) => {
                let _ = bound.send(Err(error.to_string()));
                return;
            }
        }
    }
    super::http::start_listeners(&ctx, &state, &listeners, &certs);
    let ticker_state = state.clone();
    let ticks = ctx.task_queue("ticker");
    let ticker = ctx.spawn_into(&ticks, async move {
        // When the executor last polled its rings on the ticker's account (a sleep).
        let mut rings_polled_ns = super::clock::physical_ns();
        loop {
            let (sleep_ns, more_work) = {
                let shard = ticker_state.borrow();
                let now = super::clock::physical_ns();
                let sleep_ns = match shard.next_wake_ns() {
                    Some(at) => at.saturating_sub(now),
                    None => MAX_TICK_SLEEP_MS * 1_000_000,
                }
                .min(MAX_TICK_SLEEP_MS * 1_000_000);
                (sleep_ns, shard.more_work)
            };
            if more_work {
                // Deferred work: let every other task run once, then continue it. Yielding
                // the task queue lets runnable tasks go first without the executor's I/O
                // poll; a sleep reaches that poll but parks the thread in the kernel on a
                // timer (several µs in a VM, most of a small step), so it is taken only
                // once per MAX_BACKLOG_IO_POLL_INTERVAL_NS.
                let now = super::clock::physical_ns();
                if now.saturating_sub(rings_polled_ns) >= MAX_BACKLOG_IO_POLL_INTERVAL_NS {
                    glommio::timer::sleep(Duration::from_micros(1)).await;
                    rings_polled_ns = super::clock::physical_ns();
                } else {
                    glommio::executor().yield_task_queue_now().await;
                }
                ticker_state.borrow_mut().tick();
                continue;
            }
            if sleep_ns > 0 {
                ticker_state.borrow_mut().ticker_sleeps_until_ns =
                    super::clock::physical_ns().saturating_add(sleep_ns);
                let sleep = glommio::timer::sleep(Duration::from_nanos(sleep_ns));
                let woken = async {
                    let _ = kicked.recv().await;
                };
                futures_lite::future::or(sleep, woken).await;
                rings_polled_ns = super::clock::physical_ns();
            } else {
                // Due already (a snapshot round continuing, a deadline passed during the last
                // tick): other tasks go first, as between the steps of deferred work.
                glommio::executor().yield_task_queue_now().await;
            }
            let mut shard = ticker_state.borrow_mut();
            shard.ticker_sleeps_until_ns = 0;
            shard.tick();
        }
    });
    if let Err(error) = &ticker {
        tracing::error!("shard {}: cannot start the ticker: {error}", ctx.shard);
    }
    let (outbox_kick, outbox_kicked) = async_channel::bounded::<()>(1);
    state.borrow_mut().outbox_kick = outbox_kick;
    let mut fairness = Fairness::new();
    loop {
        fairness.yield_if_due().await;
        let pending = drain_outbox(&state, &ctx.mesh);
        let wake = async {
            if pending {
                glommio::timer::sleep(Duration::from_micros(MESH_RETRY_US)).await;
            } else {
                let _ = outbox_kicked.recv().await;
            }
            None
        };
        let received = async { Some(ctx.commands.recv().await) };
        let command = match futures_lite::future::or(received, wake).await {
            None => continue,
            Some(None) => break,
            Some(Some(command)) => command,
        };
        match command {
            Command::Known(domains) => {
                let mut shard = state.borrow_mut();
                shard.known = domains.into_iter().collect::<HashMap<_, _>>();
                for (name, run) in shard.runs.keys().cloned().zip(0..).collect::<Vec<_>>() {
                    let _ = run;
                    if !shard.known.get(&name).copied().unwrap_or(false) {
                        shard.known.insert(name, true);
                    }
                }
            }
            Command::Deploy { plan, change, done } => {
                let name = plan.name.clone();
                let replacing = state.borrow().runs.contains_key(&name);
                let plan = if replacing && change == ModelChange::Dynamic {
                    match state.borrow_mut().adopt(plan) {
                        Ok(()) => {
                            let _ = done.send(());
                            continue;
                        }
                        Err(plan) => plan,
                    }
                } else {
                    plan
                };
                if replacing {
                    // Hold and drain on a task of its own, so the commands that let it drain
                    // (in-process acks) keep flowing meanwhile.
                    let state = state.clone();
                    glommio::spawn_local(async move {
                        state.borrow_mut().begin_hold(&name);
                        let deadline = super::clock::physical_ns()
                            + super::shard::alter::MAX_HOLD_MS * 1_000_000;
                        while !state.borrow().hold_drained(&name)
                            && super::clock::physical_ns() < deadline
                        {
                            glommio::timer::sleep(Duration::from_millis(2)).await;
                            state.borrow_mut().tick();
                        }
                        state.borrow_mut().swap(plan);
                        start_domain_tasks(&state, &name);
                        let _ = done.send(());
                    })
                    .detach();
                    continue;
                }
                state.borrow_mut().deploy(plan);
                start_domain_tasks(&state, &name);
                let _ = done.send(());
            }
            Command::Undeploy { domain, done } => {
                state
                    .borrow_mut()
                    .undeploy(&domain, ProducerEndReason::DomainStopped);
                let _ = done.send(());
            }
            Command::Subscribe {
                id,
                label,
                domain,
                relay,
                filter,
                sample_rate,
                sink,
                done,
            } => {
                let mut shard = state.borrow_mut();
                let result = match shard.runs.get_mut(&domain) {
                    None => Err(format!("domain '{domain}' is not running")),
                    Some(run) => match run.graph.plan.relay_id(&relay) {
                        None => Err(format!("relay '{relay}' does not exist")),
                        Some(relay) => {
                            run.graph.add_tap(
                                relay,
                                Tap {
                                    id,
                                    label,
                                    filter,
                                    sample_rate,
                                    sink,
                                    skipped_rows: 0,
                                    sampler: 0,
                                },
                            );
                            Ok(())
                        }
                    },
                };
                let _ = done.send(result);
            }
            Command::Unsubscribe { id } => {
                for run in state.borrow_mut().runs.values_mut() {
                    run.graph.remove_tap(id);
                }
            }
            Command::OpenProducer {
                domain,
                ingestor,
                fields,
                credit_batches,
                credit_bytes,
                events,
            } => {
                let mut shard = state.borrow_mut();
                let connection = shard.next_id();
                shard.open_producer(
                    connection,
                    &super::shard::Outbound::InProcess(events),
                    0,
                    &domain,
                    &ingestor,
                    &fields,
                    credit_batches,
                    credit_bytes,
                );
            }
            Command::Submit {
                producer,
                batch_seq,
                batch,
            } => state
                .borrow_mut()
                .submit_in_process(producer, batch_seq, batch),
            Command::OpenConsumer {
                domain,
                emitter,
                credit_batches,
                events,
            } => {
                let mut shard = state.borrow_mut();
                let connection = shard.next_id();
                shard.open_consumer(
                    connection,
                    &super::shard::Outbound::InProcess(events),
                    0,
                    &domain,
                    &emitter,
                    credit_batches,
                );
            }
            Command::Ack {
                consumer,
                delivery_seq,
                accepted,
            } => state
                .borrow_mut()
                .consumer_ack(consumer, delivery_seq, accepted),
            Command::CloseProducer { producer } => state
                .borrow_mut()
                .close_producer(producer, Some(ProducerEndReason::Closed)),
            Command::CloseConsumer { consumer } => state.borrow_mut().close_consumer(
                consumer,
                Some(nervix_net::session::frame::ConsumerEndReason::Closed),
            ),
            Command::Stats { reply } => {
                let mut stats = collect_stats(&state.borrow());
                stats.stalls = ctx.stall_count();
                stats.watchdog_wakes = ctx.watchdog_wake_count();
                let _ = reply.send(stats);
            }
            Command::Drain { deadline_ms, done } => {
                let domains: Vec<String> = state.borrow().runs.keys().cloned().collect();
                // Intake stops first: the data listeners close, open groups enter the graph.
                state.borrow_mut().stop_listeners = None;
                state.borrow_mut().draining = true;
                for domain in &domains {
                    state.borrow_mut().close_all_groups(domain);
                    state.borrow_mut().close_kafka_groups(domain);
                }
                // Force-flush until nothing is held: a flush can move rows into the next
                // node's route buffer (an emitter's FLUSH EACH), which needs a flush of its
                // own, and a sink's in-flight write counts until it completes.
                let deadline = super::clock::physical_ns() + deadline_ms * 1_000_000;
                loop {
                    state.borrow_mut().flush_everything();
                    let held: usize = state
                        .borrow()
                        .runs
                        .values()
                        .map(|r| r.graph.held_frames() + r.graph.buffered_route_branches())
                        .sum();
                    // Kafka consumers commit what was acknowledged before they stop.
                    let settled = state.borrow().kafka_settled();
                    if (held == 0 && settled) || super::clock::physical_ns() >= deadline {
                        break;
                    }
                    glommio::timer::sleep(Duration::from_millis(5)).await;
                    state.borrow_mut().tick();
                }
                for domain in domains {
                    state
                        .borrow_mut()
                        .undeploy(&domain, ProducerEndReason::IngestorStopped);
                }
                // Kafka consumers leave their groups (so the next start need not wait out a
                // session timeout) and send their last commits.
                while state.borrow().kafka_consumers_live > 0
                    && super::clock::physical_ns() < deadline
                {
                    glommio::timer::sleep(Duration::from_millis(5)).await;
                }
                let _ = done.send(());
                break;
            }
        }
    }
    drop(ticker);
}

/// Feeds the completions of `domain`'s sinks back into the state: for every sink whose
/// receiver `receivers` takes (once, when the run starts), a task that hands each completion
/// to `done` with the sink's emitter index until the sink's channel closes.
fn spawn_completions<T: 'static>(
    state: &Rc<RefCell<ShardState>>,
    domain: &str,
    receivers: impl FnOnce(&mut DomainRun) -> Vec<(usize, async_channel::Receiver<T>)>,
    done: fn(&mut ShardState, &str, usize, T),
) {
    let receivers = state
        .borrow_mut()
        .runs
        .get_mut(domain)
        .map(receivers)
        .unwrap_or_default();
    for (emitter, completions) in receivers {
        let state = state.clone();
        let domain = domain.to_string();
        glommio::spawn_local(async move {
            while let Ok(completion) = completions.recv().await {
                done(&mut state.borrow_mut(), &domain, emitter, completion);
            }
        })
        .detach();
    }
}

/// Starts the tasks `domain`'s freshly deployed (or swapped) run needs besides the ticker:
/// its sinks' completion feeds, its pollers, connections and Kafka consumers, and its Kafka
/// producers' service.
fn start_domain_tasks(state: &Rc<RefCell<ShardState>>, domain: &str) {
    spawn_completions(
        state,
        domain,
        |run| {
            run.files
                .iter_mut()
                .filter_map(|(index, file)| file.completions.take().map(|c| (*index, c)))
                .collect()
        },
        ShardState::file_done,
    );
    spawn_completions(
        state,
        domain,
        |run| {
            run.http_sinks
                .iter_mut()
                .filter_map(|(index, sink)| sink.completions.take().map(|c| (*index, c)))
                .collect()
        },
        ShardState::http_done,
    );
    super::poll::start_pollers(state, domain);
    super::connection::start_connections(state, domain);
    super::kafka::start_consumers(state, domain);
    spawn_kafka_sinks(state, domain);
}

/// Serves `domain`'s KAFKA TOPIC producers (delivery reports, retries) while its graph runs.
fn spawn_kafka_sinks(state: &Rc<RefCell<ShardState>>, domain: &str) {
    let plan = match state.borrow().runs.get(domain) {
        Some(run) if !run.kafka_sinks.is_empty() => run.graph.plan.clone(),
        _ => return,
    };
    let state = state.clone();
    let domain = domain.to_string();
    glommio::spawn_local(async move {
        loop {
            let current = state
                .borrow()
                .runs
                .get(&domain)
                .is_some_and(|run| Arc::ptr_eq(&run.graph.plan, &plan));
            if !current {
                break;
            }
            let busy = state.borrow_mut().serve_kafka_sinks(&domain);
            let idle_us = if busy {
                KAFKA_SERVE_BUSY_US
            } else {
                KAFKA_SERVE_IDLE_US
            };
            glommio::timer::sleep(Duration::from_micros(idle_us)).await;
        }
    })
    .detach();
}

/// How often a Kafka producer with records in flight is served.
const KAFKA_SERVE_BUSY_US: u64 = 200;
/// How often an idle Kafka producer is served (its client still reports errors).
const KAFKA_SERVE_IDLE_US: u64 = 5_000;

fn collect_stats(shard: &ShardState) -> ShardStats {
    let mut domains = Vec::new();
    for (name, run) in &shard.runs {
        let graph = &run.graph;
        let plan = &graph.plan;
        let mut nodes = Vec::new();
        for (i, ingestor) in plan.ingestors.iter().enumerate() {
            let c = graph.counters(NodeRef::Ingestor(i));
            nodes.push(NodeStats {
                kind: "ingestor".to_string(),
                name: ingestor.name.clone(),
                rows_in: c.rows_in,
                rows_out: c.rows_out,
                message_errors: c.message_errors,
                rate_in_per_sec: c.rate_in_per_sec,
            });
        }
        for (i, processor) in plan.processors.iter().enumerate() {
            let c = graph.counters(NodeRef::Processor(i));
            nodes.push(NodeStats {
                kind: crate::catalog::kind_name(processor.kind),
                name: processor.name.clone(),
                rows_in: c.rows_in,
                rows_out: c.rows_out,
                message_errors: c.message_errors,
                rate_in_per_sec: c.rate_in_per_sec,
            });
        }
        for (i, emitter) in plan.emitters.iter().enumerate() {
            let c = graph.counters(NodeRef::Emitter(i));
            nodes.push(NodeStats {
                kind: "emitter".to_string(),
                name: emitter.name.clone(),
                rows_in: c.rows_in,
                rows_out: graph.emitter_queues[i].delivered_rows,
                message_errors: c.message_errors,
                rate_in_per_sec: c.rate_in_per_sec,
            });
        }
        let relays = plan
            .relays
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    r.name.clone(),
                    graph.relay_len(i),
                    graph.relay_published_rows(i),
                )
            })
            .collect();
        let branches = graph
            .branch_figures()
            .into_iter()
            .map(|(name, live, evictions)| {
                (name, live, evictions[0].1, evictions[1].1, evictions[2].1)
            })
            .collect();
        let ingestors = plan
            .ingestors
            .iter()
            .enumerate()
            .map(|(i, ingestor)| {
                let (producers, outstanding_batches, outstanding_bytes) =
                    shard.producer_counts(name, i);
                IngestorStats {
                    name: ingestor.name.clone(),
                    producers,
                    outstanding_batches,
                    outstanding_bytes,
                    admitted_batches: run.admission[i].admitted,
                    admission_open: run.admission[i].open,
                    intake: run.intakes[i].as_ref().map(|intake| intake.counters),
                    retained: run.intakes[i]
                        .as_ref()
                        .map_or((0, 0), |intake| intake.retained()),
                    kafka: run
                        .kafka
                        .iter()
                        .filter(|intake| intake.ingestor == i)
                        .map(|intake| (intake.instance, intake.counters, intake.tracker.pending()))
                        .collect(),
                }
            })
            .collect();
        let dedup_keys = graph
            .dedup_keys()
            .into_iter()
            .map(|(index, kept, held)| {
                (
                    plan.processors[index].name.clone(),
                    kept as u64,
                    held as u64,
                )
            })
            .collect();
        domains.push(DomainStats {
            domain: name.clone(),
            nodes,
            relays,
            branches,
            ingestors,
            dedup_keys,
        });
    }
    domains.sort_by(|a, b| a.domain.cmp(&b.domain));
    ShardStats {
        shard: shard.shard,
        counters: shard.counters,
        open_roots: shard.slab.open_roots(),
        producers: shard.producers.len(),
        consumers: shard.consumers.len(),
        stalls: 0,
        watchdog_wakes: 0,
        domains,
    }
}
