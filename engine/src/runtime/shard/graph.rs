//! One started domain's graph on a shard: relay owner buffers, the nodes (ingestors,
//! processors, emitters), their route buffers, and the pump that moves frames. The
//! node-specific work of stateful processors lives in [`work`], their snapshots in
//! [`snapshot`], generators in [`generator`], correlators' pending rows in [`correlate`], the
//! records windows close in [`window_records`], a route's output in [`output`], frames into
//! relays and from other shards in [`publish`], and the frames a stateless processor takes
//! together in [`merged_delivery`].
//!
//! Flow control is pull-based and lossless (DESIGN §5 items 3–4):
//!
//! - A route flush publishes its frame into the target relay's owner buffer
//!   ([`RelayBuffer`], bounded by CAPACITY frames). When the buffer is full the frame waits in
//!   its node's `blocked` queue, and a node with a blocked frame accepts no input.
//! - A relay hands its front frame to its consumers only when every one of them is ready
//!   (a processor not blocked, an emitter with room in its sink queue), so a slow sink fills
//!   the relay, the relay blocks its publishers, and so on up to the ingestor, whose admission
//!   stops; the client producer's credit then runs out and it waits. Nothing is dropped.
//!
//! Acknowledgements: every row held anywhere in the graph holds one pending unit on its
//! payload's root in the shard's [`AckSlab`]. A node that consumes `n` rows of a run and derives
//! `m` rows from them `transfer`s `n` units into `m`; a relay with `k` consumers multiplies a
//! frame's units by `k` (zero consumers resolves them); a sink acks at its success boundary;
//! a row failing under ON MESSAGE ERROR LOG nacks its root. So a payload resolves exactly when
//! every row it produced was acked on every route it reached (spec acknowledgement rules).

mod admit;
mod adopt;
mod correlate;
mod dedup;
mod delivery_budget;
mod flush_order;
mod generator;
mod grouped_window;
mod merged_delivery;
mod output;
mod publish;
mod snapshot;
#[cfg(test)]
mod test_driver;
mod window_records;
mod work;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, UInt32Array};

use nervix_shards::branch_key::{BranchKey, BranchKeyEncoder, BranchMap, KeyBytes};
use nervix_shards::branch_lifecycle::{BranchTable, EvictionReason};
use nervix_shards::flush::{FlushPolicy, Now};
use nervix_shards::relay_buffer::{ProducerId, RelayBuffer};

use super::buffers::{Frames, RouteBuffers};
use super::collect::Collector;
use super::mesh::Ctx;
use crate::runtime::clock::DomainPace;
use crate::runtime::envelope::{metadata_topic, Envelope};
use crate::runtime::exec::error_record;
use crate::runtime::exec::route::{node_filter, run_route};
use crate::runtime::frame::{derive_runs, AckRun, Frame};
use crate::runtime::plan::{
    DomainPlan, ErrorPlan, NodeWork, RelayId, RoutePlan, StatePlan, StatePolicyPlan,
};
pub use delivery_budget::DeliveryBudget;
use flush_order::{FlushScratch, RouteFlush};
pub use snapshot::{PassBudget, SnapshotScope};
use work::{Kept, WorkState};

/// Frames an emitter may hold flushed but not yet written before it stops taking input.
pub const EMITTER_QUEUE_FRAMES: usize = 4;
/// Branch TTL evictions one sweep may perform, so a sweep never stalls the shard.
pub const MAX_EVICTIONS_PER_SWEEP: usize = 1_024;
/// The window rates are measured over.
pub const RATE_WINDOW_NS: u64 = 1_000_000_000;
/// Message errors logged per node per second at most; the rest are only counted.
pub const LOGGED_ERRORS_PER_SECOND: u64 = 10;

/// One branch declaration's figures: name, live instances, evictions by reason.
pub type BranchFigures = (String, usize, [(EvictionReason, u64); 3]);

/// The payload a root belongs to: the producer and its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PayloadToken {
    pub producer: u64,
    pub batch_seq: u64,
}

/// A node of the graph, as relay consumers and blocked publishers name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeRef {
    Ingestor(usize),
    Processor(usize),
    Emitter(usize),
}

impl NodeRef {
    fn producer_id(self) -> ProducerId {
        let (tag, index) = match self {
            NodeRef::Ingestor(i) => (1u64, i),
            NodeRef::Processor(i) => (2, i),
            NodeRef::Emitter(i) => (3, i),
        };
        ProducerId(tag << 32 | index as u64)
    }
}

/// A subscription tap on a relay: rows go to a console session as JSON lines.
pub struct Tap {
    pub id: u64,
    /// Prefixes every line: the subscription's name.
    pub label: String,
    pub filter: Option<crate::vm::Program>,
    pub sample_rate: f64,
    pub sink: tokio::sync::mpsc::Sender<String>,
    pub skipped_rows: u64,
    pub sampler: u64,
}

/// Counters one node exports.
#[derive(Debug, Default, Clone, Copy)]
pub struct NodeCounters {
    pub rows_in: u64,
    /// Rows in per second over the last full second (see [`Graph::tick`]).
    pub rate_in_per_sec: f64,
    rate_window: (u64, u64),
    pub rows_out: u64,
    pub frames_out: u64,
    pub message_errors: u64,
    pub filtered_rows: u64,
}

struct Node {
    routes: Vec<RouteBuffers>,
    /// `COLLECT FOR`: input frames gathered per branch before the node processes them.
    collect: Option<Collector>,
    /// Inputs waiting for materialized state (REQUIRED WAIT), in arrival order.
    waiting: VecDeque<(RelayId, Frame)>,
    /// Frames refused by a full relay, in order; the node takes no input while any wait.
    blocked: VecDeque<(RelayId, Frame)>,
    counters: NodeCounters,
    logged_in_second: (u64, u64),
}

impl Node {
    fn new(routes: &[RoutePlan], collect: Option<FlushPolicy>, frames: Frames) -> Node {
        Node {
            collect: collect.map(Collector::new),
            waiting: VecDeque::new(),
            routes: routes
                .iter()
                .map(|r| RouteBuffers::new(r.flush, r.schema.clone(), frames))
                .collect(),
            blocked: VecDeque::new(),
            counters: NodeCounters::default(),
            logged_in_second: (0, 0),
        }
    }
}

struct Relay {
    buffer: RelayBuffer<Frame>,
    /// Shared so the pump holds them across a delivery without copying them per frame.
    consumers: Arc<[NodeRef]>,
    taps: Vec<Tap>,
    published_rows: u64,
}

/// Frames an emitter flushed, waiting for its sink.
pub struct EmitterQueue {
    pub ready: VecDeque<Frame>,
    pub in_flight: usize,
    pub delivered_rows: u64,
}

/// The runtime of one domain on one shard.
pub struct Graph {
    pub plan: Arc<DomainPlan>,
    relays: Vec<Relay>,
    ingestors: Vec<Node>,
    processors: Vec<Node>,
    emitters: Vec<Node>,
    pub emitter_queues: Vec<EmitterQueue>,
    encoders: HashMap<usize, BranchKeyEncoder>,
    /// The last branch key decoded (its branch declaration, key, one-row field columns):
    /// consecutive frames of one branch into a node that reads `branch.` fields decode the
    /// key once (arrow-row decoding is the dearer part of building those columns).
    last_decoded: Option<(usize, BranchKey, Vec<ArrayRef>)>,
    pub branch_tables: Vec<BranchTable<KeyBytes, ()>>,
    evicted: Vec<(KeyBytes, ())>,
    /// Frames other shards sent that wait for room in their relay.
    inbound: VecDeque<(RelayId, Frame)>,
    /// Materialized relays' last row per branch (one-row columns), by relay.
    states: Vec<BranchMap<Vec<ArrayRef>>>,
    /// The state the node at work bound for its current batch (one-row columns, every
    /// dependency's after the other), and the same broadcast to the batch's rows.
    bound_state: Vec<ArrayRef>,
    broadcast_state: Vec<ArrayRef>,
    /// Set when a materialized relay took new state, so waiting nodes try again.
    state_arrived: bool,
    /// The earliest deadline armed since the shard last asked, in physical ns.
    armed_ns: Option<u64>,
    /// No route buffer is due before this (logical, physical ns); see `flush_order`.
    route_due: (Option<i64>, Option<u64>),
    /// What the pump may still hand to consumers in this step (unbounded outside a step),
    /// and whether it stopped with frames left because of it.
    pub deliver_budget: DeliveryBudget,
    pub deferred: bool,
    /// Per processor: its branch-local node-work state (deduplication keys, ordering buffers).
    work: Vec<WorkState>,
    /// Set while held rows run through their routes (their node work already ran).
    releasing: bool,
    /// The relay whose frame the processor at work is processing (a correlator's side).
    input_relay: Option<RelayId>,
    /// Branch states that left (emptied or evicted) since the last snapshot: (processor,
    /// branch), so the snapshot deletes their stored entries.
    forgotten: Vec<(usize, BranchKey)>,
    /// Route buffers opened so far: each buffer's opening number orders its flush among
    /// every route's (`RouteBuffers::tick`).
    buffers_opened: u64,
    /// A deduplication keyspace or a window changed since the last snapshot.
    work_changed: bool,
    /// The states the current snapshot round still has to write (processor, branch); see
    /// `snapshot::snapshot_work`.
    snapshot_round: VecDeque<(usize, BranchKey)>,
    /// Set while a leaving branch flushes (see `touch_branches`).
    evicting: bool,
    /// `process`'s per-run counts and refusals, kept between frames: a fresh allocation's
    /// first write misses the cache, and the frame's next reference count waited for it.
    /// Each holds as many entries as the most acknowledgement runs a frame had.
    run_scratch: (Vec<u64>, Vec<bool>),
    /// `flush_routes`'s vectors, kept between flushes.
    flush_scratch: FlushScratch,
    /// The domain is held for a model change (`work::flush_for_pause`): every tick
    /// force-flushes, reorder buffers included, until the new graph replaces this one.
    holding: bool,
}

/// How a node's materialized dependencies resolved for one batch.
pub(super) enum Resolution {
    Bound(Vec<ArrayRef>),
    Skip,
    Wait,
}

/// One-row columns repeated to `rows` rows (state is constant across a batch).
fn broadcast(columns: &[ArrayRef], rows: usize) -> Vec<ArrayRef> {
    if columns.is_empty() {
        return Vec::new();
    }
    let zeros = UInt32Array::from(vec![0u32; rows]);
    columns
        .iter()
        .map(|c| arrow_select::take::take(c.as_ref(), &zeros, None).unwrap_or_else(|_| c.clone()))
        .collect()
}

/// The relay-buffer producer id of frames that arrived from other shards.
const INBOUND_PRODUCER: ProducerId = ProducerId(u64::MAX);

/// Where the caller gets time from for one step: the graph's only time source.
///
/// The shard reads the node clocks once per step: `now.physical_ns` monotonic, and UTC in
/// `now.logical_ns` and `snapshot_ns` (an unpaced domain's time). Every public entry point of
/// a [`Graph`] maps that reading into its own domain's time ([`Instant::in_domain`]), so a
/// paced domain's FLUSH EACH, COLLECT FOR, windows, generators and `now()` run on its clock
/// whichever caller handed the instant over.
#[derive(Debug, Clone, Copy)]
pub struct Instant {
    pub now: Now,
    /// The execution snapshot (`now()`), domain-logical ns.
    pub snapshot_ns: i64,
}

impl Instant {
    /// This reading in the time of a domain running at `pace`. Idempotent: a paced domain's
    /// time depends only on the physical reading, and an unpaced one's is the UTC reading.
    pub fn in_domain(self, pace: &DomainPace) -> Instant {
        match pace {
            DomainPace::Unpaced => self,
            DomainPace::Paced(clock) => {
                let logical_ns = clock.logical_at(self.now.physical_ns);
                Instant {
                    now: Now::new(logical_ns, self.now.physical_ns),
                    snapshot_ns: logical_ns,
                }
            }
        }
    }
}

impl Graph {
    pub fn new(plan: Arc<DomainPlan>) -> Graph {
        // Each relay's consumers, in node order.
        let mut consumers: Vec<Vec<NodeRef>> = vec![Vec::new(); plan.relays.len()];
        for (index, processor) in plan.processors.iter().enumerate() {
            for input in &processor.inputs {
                consumers[input.relay].push(NodeRef::Processor(index));
            }
        }
        for (index, emitter) in plan.emitters.iter().enumerate() {
            for input in &emitter.inputs {
                consumers[input.relay].push(NodeRef::Emitter(index));
            }
        }
        let relays: Vec<Relay> = plan
            .relays
            .iter()
            .zip(consumers)
            .map(|(r, consumers)| Relay {
                buffer: RelayBuffer::new(r.capacity_frames.max(1))
                    .unwrap_or_else(|_| unreachable!("capacity is at least one frame")),
                consumers: consumers.into(),
                taps: Vec::new(),
                published_rows: 0,
            })
            .collect();
        let branch_tables = plan
            .branches
            .iter()
            .map(|b| {
                BranchTable::new(b.ttl_ns, b.max_instances)
                    .unwrap_or_else(|_| BranchTable::new(b.ttl_ns, None).expect("no bound"))
            })
            .collect();
        Graph {
            ingestors: plan
                .ingestors
                .iter()
                .map(|i| Node::new(&i.routes, None, Frames::JoinSmallParts))
                .collect(),
            processors: plan
                .processors
                .iter()
                .map(|p| {
                    let mut node = Node::new(&p.routes, p.collect, Frames::JoinSmallParts);
                    if let NodeWork::Correlate(correlate) = &p.work {
                        if !correlate.collect.is_empty() {
                            node.collect = Some(Collector::grouped(correlate.collect.clone()));
                        }
                    }
                    node
                })
                .collect(),
            emitters: plan
                .emitters
                .iter()
                .map(|e| {
                    Node::new(
                        std::slice::from_ref(&e.route),
                        e.collect,
                        Frames::OnePerFlush,
                    )
                })
                .collect(),
            emitter_queues: plan
                .emitters
                .iter()
                .map(|_| EmitterQueue {
                    ready: VecDeque::new(),
                    in_flight: 0,
                    delivered_rows: 0,
                })
                .collect(),
            relays,
            encoders: HashMap::new(),
            last_decoded: None,
            branch_tables,
            evicted: Vec::new(),
            inbound: VecDeque::new(),
            states: plan.relays.iter().map(|_| BranchMap::default()).collect(),
            bound_state: Vec::new(),
            broadcast_state: Vec::new(),
            state_arrived: false,
            armed_ns: None,
            route_due: (None, None),
            deliver_budget: DeliveryBudget::UNBOUNDED,
            deferred: false,
            work: plan
                .processors
                .iter()
                .map(|p| WorkState::new(&p.work))
                .collect(),
            releasing: false,
            input_relay: None,
            forgotten: Vec::new(),
            buffers_opened: 0,
            work_changed: false,
            snapshot_round: VecDeque::new(),
            evicting: false,
            run_scratch: (Vec::new(), Vec::new()),
            flush_scratch: FlushScratch::default(),
            holding: false,
            plan,
        }
    }

    /// Every node, ingestors first (`with_ingestors`), then processors, then emitters; the
    /// iterator does not borrow the graph, so callers visit nodes without collecting them.
    fn node_refs(&self, with_ingestors: bool) -> impl Iterator<Item = NodeRef> {
        let ingestors = if with_ingestors {
            self.ingestors.len()
        } else {
            0
        };
        (0..ingestors)
            .map(NodeRef::Ingestor)
            .chain((0..self.processors.len()).map(NodeRef::Processor))
            .chain((0..self.emitters.len()).map(NodeRef::Emitter))
    }

    fn node_mut(&mut self, node: NodeRef) -> &mut Node {
        match node {
            NodeRef::Ingestor(i) => &mut self.ingestors[i],
            NodeRef::Processor(i) => &mut self.processors[i],
            NodeRef::Emitter(i) => &mut self.emitters[i],
        }
    }

    /// Route `route`'s buffers of `node`, with the graph's count of opened buffers beside
    /// them (an append takes both).
    fn route_buffers_mut(&mut self, node: NodeRef, route: usize) -> (&mut RouteBuffers, &mut u64) {
        let node_state = match node {
            NodeRef::Ingestor(i) => &mut self.ingestors[i],
            NodeRef::Processor(i) => &mut self.processors[i],
            NodeRef::Emitter(i) => &mut self.emitters[i],
        };
        (&mut node_state.routes[route], &mut self.buffers_opened)
    }

    fn node(&self, node: NodeRef) -> &Node {
        match node {
            NodeRef::Ingestor(i) => &self.ingestors[i],
            NodeRef::Processor(i) => &self.processors[i],
            NodeRef::Emitter(i) => &self.emitters[i],
        }
    }

    pub fn counters(&self, node: NodeRef) -> NodeCounters {
        self.node(node).counters
    }

    /// Counts `rows` message errors of a sink (rows its external system refused).
    pub fn count_sink_errors(&mut self, emitter: usize, rows: u64) {
        self.node_mut(NodeRef::Emitter(emitter))
            .counters
            .message_errors += rows;
    }

    /// A sink could not deliver `failed` rows of `frame` (emitter `index` under ON MESSAGE
    /// ERROR SEND TO): their error records go to the error relay, built from the finalized
    /// records — `partial_output.*`, and `input.*` too, since an HTTP REQUEST or KAFKA TOPIC
    /// sink writes its input relay's fields — with `error.message` the sink's cause. Delivered
    /// rows are acknowledged, failed ones hand their units to their error records, and a row
    /// whose error record cannot be built negatively acknowledges its payload.
    pub fn sink_failed(
        &mut self,
        index: usize,
        frame: &Frame,
        failed: &[(u32, String)],
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let at = at.in_domain(&self.plan.pace);
        let plan = self.plan.clone();
        let emitter = &plan.emitters[index];
        let ErrorPlan::SendTo(error) = &emitter.route.on_error else {
            return;
        };
        let columns: Vec<ArrayRef> = frame.batch.columns().to_vec();
        // No materialized state is bound outside a node's processing: `relay_state.*` reads
        // in the error SETs see none here.
        let state: Vec<ArrayRef> = Vec::new();
        let records = error_record::build(
            &plan,
            &emitter.route,
            error,
            &error_record::Failed {
                input: &columns,
                partial: &columns,
                rows: failed,
                incoming: &frame.key,
                state: &state,
                envelope: None,
                now_ns: at.snapshot_ns,
                code: error_record::EXPRESSION_ERROR_CODE,
            },
        );
        let mut per_run = vec![0u64; frame.acks.len()];
        let mut nacked = vec![false; frame.acks.len()];
        for (key, batch, rows) in records.groups {
            let acks = derive_runs(&frame.acks, &rows, &mut per_run);
            self.publish(
                NodeRef::Emitter(index),
                error.relay,
                Frame {
                    groups: None,
                    times: crate::runtime::frame::take_times(frame.times.as_ref(), &rows),
                    batch,
                    key,
                    acks,
                },
                at,
                cx,
            );
        }
        mark_nacked(
            &frame.acks,
            records.failed.iter().map(|(row, _)| *row),
            &mut nacked,
        );
        for (i, run) in frame.acks.iter().enumerate() {
            if nacked[i] {
                cx.nack(run.root);
            } else {
                cx.transfer(run.root, u64::from(run.rows), per_run[i]);
            }
        }
        self.node_mut(NodeRef::Emitter(index))
            .counters
            .message_errors += failed.len() as u64;
        if let Some((row, message)) = records.failed.first() {
            let line = format!(
                "{}: error record for row {row}: {message}",
                emitter.route.label
            );
            self.log(NodeRef::Emitter(index), vec![line]);
        }
    }

    /// Whether the ingestor can admit a batch now (none of its frames waits for a relay).
    pub fn ingestor_ready(&self, ingestor: usize) -> bool {
        self.ingestors[ingestor].blocked.is_empty()
    }

    /// Frames held by a relay's owner buffer.
    pub fn relay_len(&self, relay: RelayId) -> usize {
        self.relays[relay].buffer.len()
    }

    pub fn relay_published_rows(&self, relay: RelayId) -> u64 {
        self.relays[relay].published_rows
    }

    pub fn add_tap(&mut self, relay: RelayId, tap: Tap) {
        self.relays[relay].taps.push(tap);
    }

    pub fn remove_tap(&mut self, id: u64) -> bool {
        let mut found = false;
        for relay in &mut self.relays {
            let before = relay.taps.len();
            relay.taps.retain(|t| t.id != id);
            found |= relay.taps.len() != before;
        }
        found
    }

    fn ready(&self, consumer: NodeRef) -> bool {
        match consumer {
            NodeRef::Processor(i) => {
                self.processors[i].blocked.is_empty() && self.processors[i].waiting.is_empty()
            }
            NodeRef::Emitter(i) => {
                self.emitter_queues[i].ready.len() < EMITTER_QUEUE_FRAMES
                    && self.emitters[i].blocked.is_empty()
                    && self.emitters[i].waiting.is_empty()
            }
            NodeRef::Ingestor(_) => true,
        }
    }

    /// Admits one batch into ingestor `index`. `acks` are its payloads' roots in row order,
    /// each holding one pending unit per row of its run (their rows sum to the batch's), or
    /// empty when nothing is acknowledged (MODE NO ACK). `envelope` is the group's source
    /// envelope (one row per batch row) when the ingestor's programs read it.
    pub fn ingest(
        &mut self,
        index: usize,
        batch: &RecordBatch,
        acks: Vec<AckRun>,
        envelope: Option<Envelope>,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let at = at.in_domain(&self.plan.pace);
        debug_assert!(
            envelope
                .as_ref()
                .is_none_or(|e| e.num_rows() == batch.num_rows()),
            "an envelope must have a row per batch row"
        );
        // A misaligned envelope would pair rows with other payloads' headers: none instead
        // (header reads then fail per row, saying there is no header context).
        let envelope = envelope.filter(|e| e.num_rows() == batch.num_rows());
        debug_assert!(
            acks.is_empty()
                || acks.iter().map(|run| run.rows as usize).sum::<usize>() == batch.num_rows(),
            "ack runs must cover the batch's rows"
        );
        let plan = self.plan.clone();
        let times = plan.ingestors[index]
            .event_time
            .and_then(|column| event_times(batch.column(column)));
        let frame = Frame {
            groups: None,
            batch: batch.clone(),
            key: BranchKey::Unbranched,
            acks: acks.into(),
            times,
        };
        // Rows without an event time are not admitted (their routes' error policies apply).
        let missing = admit::missing_times(&frame);
        let (frame, envelope) = if missing.is_empty() {
            (frame, envelope)
        } else {
            match self.refuse_missing_times(index, frame, &missing, envelope, at, cx) {
                Some(admitted) => admitted,
                None => return,
            }
        };
        let ingestor = &plan.ingestors[index];
        self.process(
            &plan,
            NodeRef::Ingestor(index),
            &frame,
            None,
            ingestor.filter.as_ref(),
            &ingestor.routes,
            envelope,
            false,
            at,
            cx,
        );
    }

    /// One node's work on one frame: input and node filters, every route, error policies,
    /// acknowledgement transfer, and the route buffers' flushes. `plan` is the graph's (the
    /// caller's handle on it: counting one more reference per frame at every level was a
    /// locked instruction each, and each waited for the frame's stores before it).
    #[allow(clippy::too_many_arguments)]
    fn process(
        &mut self,
        plan: &DomainPlan,
        node: NodeRef,
        frame: &Frame,
        input_filter: Option<&crate::vm::Program>,
        node_filter_program: Option<&crate::vm::Program>,
        routes: &[RoutePlan],
        envelope: Option<Envelope>,
        detached: bool,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        // Older rows in buffers past their deadline leave first (`flush_order`).
        self.flush_overdue_routes(at, cx);
        let (mut per_run, mut nacked) = std::mem::take(&mut self.run_scratch);
        per_run.clear();
        nacked.clear();
        per_run.resize(frame.acks.len(), 0);
        nacked.resize(frame.acks.len(), false);
        let mut logs: Vec<String> = Vec::new();
        if !self.releasing {
            self.node_mut(node).counters.rows_in += frame.num_rows() as u64;
        }
        // Node-level filters: FROM … WHERE and FILTER WHERE, on the input row.
        let mut kept = Kept::all(frame, envelope);
        if let NodeRef::Processor(index) = node {
            if let Some(scope) = &plan.processors[index].branch_scope {
                match self.branch_scope_columns(scope, &frame.key, kept.rows) {
                    Ok(columns) => kept.columns.to_mut().extend(columns),
                    Err(message) => {
                        // A key that does not decode is a broken invariant of the mesh;
                        // the payloads are refused rather than routed with wrong values.
                        tracing::error!(node = %self.node_name(node), %message, "branch key unreadable");
                        for run in &frame.acks {
                            cx.nack(run.root);
                        }
                        return;
                    }
                }
            }
        }
        let topic = match node {
            NodeRef::Ingestor(index) => metadata_topic(&plan.ingestors[index].source),
            _ => None,
        };
        for program in [input_filter, node_filter_program].into_iter().flatten() {
            let view = kept.envelope.as_ref().map(|e| e.view(topic));
            let (mask, errors) = node_filter(
                program,
                &kept.columns,
                view.as_ref(),
                kept.rows,
                at.snapshot_ns,
            );
            if !errors.is_empty() {
                let failed: Vec<u32> = errors.iter().map(|(row, _)| kept.frame_row(row)).collect();
                for (row, message) in errors.iter().take(1) {
                    logs.push(format!(
                        "filter failed on row {}: {message}",
                        kept.frame_row(row)
                    ));
                }
                mark_nacked(&frame.acks, failed.into_iter(), &mut nacked);
                self.node_mut(node).counters.message_errors += errors.len() as u64;
            }
            let filtered = kept.keep(&mask, frame.acks.len() > 1);
            self.node_mut(node).counters.filtered_rows += filtered as u64;
        }
        // Node-specific work (spec "Processing order", step 3).
        if let (NodeRef::Processor(index), false) = (node, self.releasing) {
            let held = self.node_work(
                plan,
                index,
                frame,
                &mut kept,
                detached,
                at,
                cx,
                &mut nacked,
                &mut logs,
            );
            if held {
                for (run, failed) in frame.acks.iter().zip(&nacked) {
                    if *failed {
                        cx.nack(run.root);
                    }
                }
                self.log(node, logs);
                self.run_scratch = (per_run, nacked);
                return;
            }
        }
        let Kept {
            columns,
            rows,
            kept_rows,
            envelope,
            times,
        } = kept;
        let mut out_frames: Vec<(RelayId, Frame)> = Vec::new();
        // Materialized state bound for this batch, as columns of the batch's length.
        self.broadcast_state = broadcast(&self.bound_state, rows);
        let state = self.broadcast_state.clone();
        let view = envelope.as_ref().map(|e| e.view(topic));
        if rows > 0 {
            for (route_index, route) in routes.iter().enumerate() {
                let output = run_route(
                    plan,
                    route,
                    &columns,
                    &state,
                    view.as_ref(),
                    rows,
                    &frame.key,
                    at.snapshot_ns,
                    &mut self.encoders,
                    frame.acks.len() > 1 || times.is_some(),
                );
                self.route_output(
                    node,
                    route_index,
                    route,
                    frame,
                    &columns,
                    view.as_ref(),
                    (kept_rows.as_ref(), times.as_ref()),
                    output,
                    detached,
                    at,
                    &mut per_run,
                    &mut nacked,
                    &mut logs,
                    &mut out_frames,
                );
            }
        }
        // Nacks first: a transfer that leaves a root nothing resolves it acked, and a later
        // nack would then be ignored.
        for (run, failed) in frame.acks.iter().zip(&nacked) {
            if *failed {
                cx.nack(run.root);
            }
        }
        // Hand each run's units on to what was derived from it.
        if !detached {
            for (run, derived) in frame.acks.iter().zip(&per_run) {
                cx.transfer(run.root, run.rows as u64, *derived);
            }
        } else {
            for run in &frame.acks {
                cx.ack(run.root, run.rows as u64);
            }
        }
        self.log(node, logs);
        self.run_scratch = (per_run, nacked);
        self.publish_all(node, out_frames, at, cx);
    }

    fn log(&mut self, node: NodeRef, logs: Vec<String>) {
        if logs.is_empty() {
            return;
        }
        let second = (crate::runtime::clock::wall_ns() / 1_000_000_000) as u64;
        let name = self.node_name(node);
        let state = &mut self.node_mut(node).logged_in_second;
        if state.0 != second {
            *state = (second, 0);
        }
        for line in logs {
            if state.1 < LOGGED_ERRORS_PER_SECOND {
                state.1 += 1;
                tracing::warn!(target: "nervix::message_error", "{name}: {line}");
            }
        }
    }

    pub fn node_name(&self, node: NodeRef) -> String {
        match node {
            NodeRef::Ingestor(i) => format!("ingestor '{}'", self.plan.ingestors[i].name),
            NodeRef::Processor(i) => format!("processor '{}'", self.plan.processors[i].name),
            NodeRef::Emitter(i) => format!("emitter '{}'", self.plan.emitters[i].name),
        }
    }

    /// Records an accepted input for each of `keys` in branch table `branch`, in turn, every
    /// lookup first ([`BranchTable::touch_all`]); the branches evicted to make room leave at the
    /// next tick.
    fn touch_branches<'k>(
        &mut self,
        branch: usize,
        keys: impl Iterator<Item = &'k [u8]> + Clone,
        physical_ns: u64,
    ) {
        // The last output of a leaving branch (a window closing early) must not bring it back
        // and push out another in its place.
        if self.evicting {
            return;
        }
        self.branch_tables[branch].touch_all(keys, physical_ns, || (), &mut self.evicted);
    }

    /// Moves frames until nothing more can move: blocked publishes first (they hold reserved
    /// slots), then relay fronts to ready consumers. Returns whether anything moved.
    pub fn pump(&mut self, at: Instant, cx: &mut Ctx<'_>) -> bool {
        let at = at.in_domain(&self.plan.pace);
        let plan = self.plan.clone();
        let mut moved_any = false;
        loop {
            let mut moved = false;
            moved |= self.retry_inbound(at, cx);
            moved |= self.retry_waiting(at, cx);
            moved |= self.retry_blocked(at, cx);
            moved |= self.generate(at, cx);
            moved |= self.ship_emitter_frames(cx);
            for relay in 0..self.relays.len() {
                if self.relays[relay].buffer.is_empty() {
                    continue;
                }
                let mut warmed = false;
                // Once per relay, not per frame: a count of one more reference is a locked
                // instruction, which waits for the previous frame's stores.
                let consumers = Arc::clone(&self.relays[relay].consumers);
                while !self.relays[relay].buffer.is_empty() {
                    if !consumers.iter().all(|c| self.ready(*c)) {
                        break;
                    }
                    if self.deliver_budget.spent() {
                        self.deferred = true;
                        break;
                    }
                    if !warmed {
                        // Frames about to be delivered: their arrays are read back to back
                        // first (`Frame::warm`).
                        let read = self.relays[relay].buffer.iter().map(Frame::warm);
                        std::hint::black_box(read.fold(0usize, usize::wrapping_add));
                        warmed = true;
                    }
                    let Some(popped) = self.relays[relay].buffer.pop() else {
                        break;
                    };
                    self.deliver_budget.take_frame();
                    moved = true;
                    match consumers[..] {
                        [only] if self.takes_merged(only) => {
                            for frame in self.take_following(relay, popped.frame) {
                                self.deliver(&plan, only, relay, &frame, at, cx);
                            }
                        }
                        _ => {
                            for &consumer in consumers.iter() {
                                self.deliver(&plan, consumer, relay, &popped.frame, at, cx);
                            }
                        }
                    }
                }
            }
            if !moved {
                break;
            }
            moved_any = true;
        }
        moved_any
    }

    fn retry_blocked(&mut self, at: Instant, cx: &mut Ctx<'_>) -> bool {
        let mut moved = false;
        let nodes = self.node_refs(true);
        for node in nodes {
            while let Some((relay, frame)) = self.node_mut(node).blocked.pop_front() {
                match self.try_publish(node, relay, frame, at, cx) {
                    Ok(()) => moved = true,
                    Err(frame) => {
                        self.node_mut(node).blocked.push_front((relay, frame));
                        break;
                    }
                }
            }
        }
        moved
    }

    fn deliver(
        &mut self,
        plan: &DomainPlan,
        consumer: NodeRef,
        relay: RelayId,
        frame: &Frame,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        // A grouped frame reaches a node that does not take it as one frame per branch.
        if frame.groups.is_some() && !self.takes_grouped(consumer, relay) {
            for part in frame.ungroup() {
                self.deliver(plan, consumer, relay, &part, at, cx);
            }
            return;
        }
        if let Some(collector) = self.node_mut(consumer).collect.as_mut() {
            let mut released = Vec::new();
            let deadline = collector.append(relay, frame.clone(), at.now, &mut released);
            self.note_deadline(deadline, at);
            for (relay, frame) in released {
                self.work(plan, consumer, relay, &frame, at, cx);
            }
            return;
        }
        self.work(plan, consumer, relay, frame, at, cx);
    }

    /// Hands collected frames over: those whose interval ended, or all of them (`force`).
    fn release_collected(
        &mut self,
        force: Option<Option<&BranchKey>>,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let plan = self.plan.clone();
        let nodes = self.node_refs(false);
        for node in nodes {
            let mut released = Vec::new();
            if let Some(collector) = self.node_mut(node).collect.as_mut() {
                match force {
                    Some(only) => collector.force(only, &mut released),
                    None => collector.tick(at.now, &mut released),
                }
            }
            for (relay, frame) in released {
                self.work(&plan, node, relay, &frame, at, cx);
            }
        }
    }

    /// One node's work on one delivered frame (`plan`: the graph's, see `process`).
    fn work(
        &mut self,
        plan: &DomainPlan,
        consumer: NodeRef,
        relay: RelayId,
        frame: &Frame,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let dependencies = match consumer {
            NodeRef::Processor(index) => &plan.processors[index].state[..],
            NodeRef::Emitter(index) => &plan.emitters[index].state[..],
            NodeRef::Ingestor(_) => &[][..],
        };
        match self.resolve_state(dependencies, &frame.key) {
            Resolution::Bound(columns) => self.bound_state = columns,
            Resolution::Skip => {
                // REQUIRED SKIP: the input is suppressed successfully.
                self.node_mut(consumer).counters.filtered_rows += frame.num_rows() as u64;
                for run in &frame.acks {
                    cx.transfer(run.root, run.rows as u64, 0);
                }
                return;
            }
            Resolution::Wait => {
                // REQUIRED WAIT: held, acknowledgement open, the node takes nothing else.
                self.node_mut(consumer)
                    .waiting
                    .push_back((relay, frame.clone()));
                return;
            }
        }
        match consumer {
            NodeRef::Processor(index) => {
                let processor = &plan.processors[index];
                let input = processor.inputs.iter().find(|i| i.relay == relay);
                self.input_relay = Some(relay);
                self.process(
                    plan,
                    consumer,
                    frame,
                    input.and_then(|i| i.filter.as_ref()),
                    processor.filter.as_ref(),
                    &processor.routes,
                    None,
                    processor.detached,
                    at,
                    cx,
                );
                self.input_relay = None;
            }
            NodeRef::Emitter(index) => {
                let emitter = &plan.emitters[index];
                let input = emitter.inputs.iter().find(|i| i.relay == relay);
                self.process(
                    plan,
                    consumer,
                    frame,
                    input.and_then(|i| i.filter.as_ref()),
                    None,
                    std::slice::from_ref(&emitter.route),
                    None,
                    emitter.detached,
                    at,
                    cx,
                );
            }
            NodeRef::Ingestor(_) => {}
        }
        self.bound_state.clear();
    }

    /// Remembers a deadline a buffer armed (logical ones mapped to the physical clock).
    fn note_deadline(&mut self, deadline: Option<nervix_shards::flush::Deadline>, at: Instant) {
        let physical = match deadline {
            Some(nervix_shards::flush::Deadline::Physical(ns)) => ns,
            Some(nervix_shards::flush::Deadline::Logical(ns)) => {
                self.plan.pace.physical_deadline_ns(ns, at.now)
            }
            None => return,
        };
        self.armed_ns = Some(self.armed_ns.map_or(physical, |a| a.min(physical)));
    }

    /// The earliest deadline armed since the last call (the ticker may sleep past it).
    pub fn take_armed_ns(&mut self) -> Option<u64> {
        self.armed_ns.take()
    }

    /// Resolves a node's materialized dependencies for one branch, in written order.
    fn resolve_state(&self, dependencies: &[StatePlan], key: &BranchKey) -> Resolution {
        let mut columns = Vec::new();
        for dependency in dependencies {
            match (self.states[dependency.relay].get(key), &dependency.policy) {
                (Some(state), _) => columns.extend(state.iter().cloned()),
                (None, StatePolicyPlan::Default(record)) => columns.extend(record.iter().cloned()),
                (None, StatePolicyPlan::Skip) => return Resolution::Skip,
                (None, StatePolicyPlan::Wait) => return Resolution::Wait,
            }
        }
        Resolution::Bound(columns)
    }

    /// Keeps a materialized relay's last row for the frame's branch.
    fn materialize(&mut self, relay: RelayId, frame: &Frame) {
        let rows = frame.num_rows();
        if !self.plan.relays[relay].materialized || rows == 0 {
            return;
        }
        if frame.groups.is_some() {
            for part in frame.ungroup() {
                self.materialize(relay, &part);
            }
            return;
        }
        let last: Vec<ArrayRef> = frame
            .batch
            .columns()
            .iter()
            .map(|c| c.slice(rows - 1, 1))
            .collect();
        if self.states[relay].insert(frame.key.clone(), last).is_none() {
            self.note_state_birth(relay, &frame.key);
        }
        self.state_arrived = true;
    }

    /// After new state arrived: every waiting input tries again, in order.
    fn retry_waiting(&mut self, at: Instant, cx: &mut Ctx<'_>) -> bool {
        if !std::mem::take(&mut self.state_arrived) {
            return false;
        }
        let plan = self.plan.clone();
        let nodes = self.node_refs(false);
        let mut moved = false;
        for node in nodes {
            let waiting = std::mem::take(&mut self.node_mut(node).waiting);
            let before = waiting.len();
            for (relay, frame) in waiting {
                self.work(&plan, node, relay, &frame, at, cx);
            }
            moved |= self.node(node).waiting.len() < before;
        }
        moved
    }

    /// A branch left: its materialized state and the work waiting for it go with it; waiting
    /// rows are negatively acknowledged (they will never be processed).
    fn drop_branch_state(&mut self, key: &BranchKey, cx: &mut Ctx<'_>) {
        for states in &mut self.states {
            states.remove(key);
        }
        self.drop_work_state(key);
        let nodes = self.node_refs(false);
        for node in nodes {
            let waiting = std::mem::take(&mut self.node_mut(node).waiting);
            for (relay, frame) in waiting {
                if &frame.key == key {
                    for run in &frame.acks {
                        cx.nack(run.root);
                    }
                } else {
                    self.node_mut(node).waiting.push_back((relay, frame));
                }
            }
        }
    }

    /// Flushes buffers whose deadline came, sweeps branch TTLs, updates rates; then pumps.
    pub fn tick(&mut self, at: Instant, cx: &mut Ctx<'_>) {
        let at = at.in_domain(&self.plan.pace);
        for node in self
            .ingestors
            .iter_mut()
            .chain(&mut self.processors)
            .chain(&mut self.emitters)
        {
            let counters = &mut node.counters;
            let (since_ns, rows_then) = counters.rate_window;
            let elapsed_ns = at.now.physical_ns.saturating_sub(since_ns);
            if elapsed_ns >= RATE_WINDOW_NS {
                counters.rate_in_per_sec =
                    (counters.rows_in - rows_then) as f64 * 1e9 / elapsed_ns as f64;
                counters.rate_window = (at.now.physical_ns, counters.rows_in);
            }
        }
        let mut expired = Vec::new();
        for (branch, table) in self.branch_tables.iter_mut().enumerate() {
            let mut out = Vec::new();
            table.sweep(at.now.physical_ns, MAX_EVICTIONS_PER_SWEEP, &mut out);
            expired.extend(out.into_iter().map(|(key, _)| (branch, key)));
        }
        let lru = std::mem::take(&mut self.evicted);
        let mut keys: Vec<BranchKey> = expired
            .into_iter()
            .map(|(_, key)| BranchKey::Key(key))
            .collect();
        keys.extend(lru.into_iter().map(|(key, _)| BranchKey::Key(key)));
        for key in keys {
            // An evicted branch leaves with its buffered work flushed, never lost; its
            // materialized state and the work waiting for it leave with it (spec).
            self.evicting = true;
            self.flush_all(Some(&key), at, cx);
            self.evicting = false;
            self.drop_branch_state(&key, cx);
        }
        if self.holding {
            // Rows that reached a reorderer after the hold began (from upstream buffers the
            // hold flushed) leave too: the old ordering must not outlive the hold.
            self.flush_for_pause(at, cx);
        } else {
            self.flush_due(at, cx);
        }
        self.pump(at, cx);
    }

    fn flush_due(&mut self, at: Instant, cx: &mut Ctx<'_>) {
        self.release_collected(None, at, cx);
        self.release_work(None, at, cx);
        self.flush_routes(RouteFlush::Due, at, cx);
    }

    /// Flushes every route buffer (or only `key`'s), as stop, shutdown and eviction need.
    pub fn flush_all(&mut self, key: Option<&BranchKey>, at: Instant, cx: &mut Ctx<'_>) {
        let at = at.in_domain(&self.plan.pace);
        self.release_collected(Some(key), at, cx);
        self.release_work(Some(key), at, cx);
        self.flush_routes(RouteFlush::Forced(key), at, cx);
    }

    /// The earliest flush deadline of any buffer: (logical, physical) ns.
    pub fn next_deadline(&self) -> (Option<i64>, Option<u64>) {
        let (mut logical, mut physical) = self.route_deadline();
        for node in self
            .ingestors
            .iter()
            .chain(&self.processors)
            .chain(&self.emitters)
        {
            if let Some(collector) = &node.collect {
                logical = min_opt(logical, collector.next_deadline());
            }
        }
        for table in &self.branch_tables {
            physical = min_opt(physical, table.next_expiry_ns());
        }
        logical = min_opt(logical, self.work_deadline());
        (logical, physical)
    }

    /// Rows held anywhere in the graph (relay buffers, blocked frames, emitter queues).
    /// Rows the graph's reorder buffers hold.
    pub fn held_reorder_rows(&self) -> usize {
        self.work
            .iter()
            .map(work::WorkState::held_reorder_rows)
            .sum()
    }

    pub fn held_frames(&self) -> usize {
        self.relays.iter().map(|r| r.buffer.len()).sum::<usize>()
            + self
                .ingestors
                .iter()
                .chain(&self.processors)
                .chain(&self.emitters)
                .map(|n| {
                    n.blocked.len()
                        + n.waiting.len()
                        + n.collect.as_ref().map_or(0, Collector::held_frames)
                })
                .sum::<usize>()
            + self
                .emitter_queues
                .iter()
                .map(|q| q.ready.len() + q.in_flight)
                .sum::<usize>()
    }

    /// Buffered route branches across nodes.
    pub fn buffered_route_branches(&self) -> usize {
        self.ingestors
            .iter()
            .chain(&self.processors)
            .chain(&self.emitters)
            .flat_map(|n| &n.routes)
            .map(|b| b.buffered_branches())
            .sum()
    }

    /// Live branch instances and evictions by reason, per branch declaration.
    pub fn branch_figures(&self) -> Vec<BranchFigures> {
        self.plan
            .branches
            .iter()
            .zip(&self.branch_tables)
            .map(|(plan, table)| {
                let counters = table.counters();
                (
                    plan.name.clone(),
                    table.len(),
                    [
                        (EvictionReason::Ttl, counters.get(EvictionReason::Ttl)),
                        (EvictionReason::Lru, counters.get(EvictionReason::Lru)),
                        (
                            EvictionReason::Explicit,
                            counters.get(EvictionReason::Explicit),
                        ),
                    ],
                )
            })
            .collect()
    }
}

/// A DATETIME column as event times (I64 ns, the same buffer).
fn event_times(column: &ArrayRef) -> Option<ArrayRef> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampNanosecondType};
    let values = column.as_primitive_opt::<TimestampNanosecondType>()?;
    Some(Arc::new(values.reinterpret_cast::<Int64Type>()))
}

fn min_opt<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Marks the runs that `rows` (ascending frame rows) fall in.
fn mark_nacked(runs: &[AckRun], rows: impl Iterator<Item = u32>, nacked: &mut [bool]) {
    let mut counts = vec![0u64; runs.len()];
    crate::runtime::frame::count_rows_per_run(runs, rows, &mut counts);
    for (flag, count) in nacked.iter_mut().zip(counts) {
        if count > 0 {
            *flag = true;
        }
    }
}
