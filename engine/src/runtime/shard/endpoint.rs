//! Endpoint intake on a shard: HTTP bodies and WebSocket messages decoded into ingest groups
//! of HTTP ENDPOINT / WEBSOCKETS ENDPOINT ingestors (spec: "HTTP ENDPOINT And WEBSOCKETS
//! ENDPOINT", "Quiesce Modes"; DESIGN §5.1).
//!
//! A payload is offered to every ingestor serving its route; each answers with an [`Offer`].
//! Accepted means the body is this shard's responsibility: it was decoded into the ingestor's
//! open ingest group (or, for a codec failure, reported — the spec accepts such a body and
//! reports the decode failure), or it was retained by `BUFFER` during a quiesce. Endpoints are
//! `MODE NO ACK`, so an accepted payload carries no acknowledgement root.
//!
//! Groups close at [`INGEST_GROUP_MESSAGES`] rows or after [`INGEST_GROUP_IDLE_NS`] without a
//! new payload; a payload's rows never split across groups (the decoder adds a payload
//! atomically). A relay that cannot take more (backpressure) makes the offer [`Offer::Busy`]:
//! the connection waits and offers again, so a full graph slows senders instead of losing rows.
//! Bodies retained during a quiesce drain in arrival order before any new live payload. A JAQ
//! ON INGESTION codec's retained bodies are unfolded on the node's extension workers, front
//! body first (spec: "HTTP ENDPOINT And WEBSOCKETS ENDPOINT"): the front body stays in the
//! buffer, counted, until its records are added; when the workers are full it waits for them
//! (retrying every [`RETAINED_WORKERS_RETRY_NS`]) instead of being refused, and the bodies
//! behind it follow in order. A finished unfolding wakes the shard's ticker, which drains on.
//!
//! An ingestor whose programs read its source envelope (`IngestorPlan::uses_envelope`) gets its
//! payloads' transport headers captured beside the decoded rows (`runtime::envelope`): a payload
//! whose decode fails leaves none behind, a JAQ unfolding's records share their payload's
//! headers, and a body retained by BUFFER keeps its headers until it is decoded. Other
//! ingestors capture nothing.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;

use crate::runtime::envelope::EnvelopeBuilder;
use crate::runtime::plan::{ConnectionPlan, EndpointPlan, IntakeQuiesce, PollPlan, SourcePlan};

use super::graph::Instant;
use super::ShardState;

/// A source closes its ingest group at this many messages (DESIGN §5.1).
pub const INGEST_GROUP_MESSAGES: usize = 1_024;
/// ... or after this long without a new payload (DESIGN §5.1: 5 ms source-idle).
pub const INGEST_GROUP_IDLE_NS: u64 = 5_000_000;
/// A retained body whose unfolding found the extension workers full tries again after this.
pub const RETAINED_WORKERS_RETRY_NS: u64 = 1_000_000;

/// The source instance an intake serves: its plan identifies it (a replaced or stopped source
/// is a different one, whatever its name).
#[derive(Clone)]
pub enum IntakeSource {
    Endpoint(Arc<EndpointPlan>),
    Poll(Arc<PollPlan>),
    Connection(Arc<ConnectionPlan>),
}

impl IntakeSource {
    fn same(&self, other: &IntakeSource) -> bool {
        match (self, other) {
            (IntakeSource::Endpoint(a), IntakeSource::Endpoint(b)) => Arc::ptr_eq(a, b),
            (IntakeSource::Poll(a), IntakeSource::Poll(b)) => Arc::ptr_eq(a, b),
            (IntakeSource::Connection(a), IntakeSource::Connection(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    pub fn codec(&self) -> &crate::runtime::plan::IntakeCodec {
        match self {
            IntakeSource::Endpoint(plan) => &plan.codec,
            IntakeSource::Poll(plan) => &plan.codec,
            IntakeSource::Connection(plan) => &plan.codec,
        }
    }

    pub fn quiesce(&self) -> IntakeQuiesce {
        match self {
            IntakeSource::Endpoint(plan) => plan.quiesce,
            IntakeSource::Poll(plan) => plan.quiesce,
            IntakeSource::Connection(plan) => plan.quiesce,
        }
    }
}

/// One payload-decoding ingestor's intake on this shard (endpoints, polls).
pub struct PayloadIntake {
    pub source: IntakeSource,
    decoder: crate::runtime::plan::IntakeDecoder,
    /// Polls: set while the ingestor is quiesced under SUSPEND, so its poller skips polls.
    pub suspended: Arc<std::sync::atomic::AtomicBool>,
    /// Polls: set when this intake goes (its source stopped or was replaced): the poller ends.
    pub stopped: Arc<std::sync::atomic::AtomicBool>,
    /// Physical instant of the last payload added to the open group (0: no open group).
    last_payload_ns: u64,
    /// Bodies retained by `BUFFER` during a quiesce, in arrival order, and their bytes.
    retained: VecDeque<Retained>,
    retained_bytes: u64,
    /// JAQ ON INGESTION codecs: the front retained body's unfolding on the extension workers
    /// (the body stays at the front of `retained`, counted, until its records are added).
    front_unfolding: Option<FrontUnfolding>,
    /// Physical ns when a drain that found the extension workers full tries again (0: none).
    workers_retry_ns: u64,
    /// Retained bodies unfolded on the extension workers since the buffer last emptied
    /// (logged once it has).
    drained_on_workers: u64,
    /// The open group's source envelope, made on the first payload of an ingestor that reads
    /// one.
    envelope: Option<EnvelopeBuilder>,
    pub counters: IntakeCounters,
}

/// A body retained by `BUFFER`, with its transport headers (empty unless the ingestor reads
/// them).
pub struct Retained {
    pub body: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
}

/// What one endpoint ingestor counted on this shard.
#[derive(Debug, Default, Clone, Copy)]
pub struct IntakeCounters {
    pub payloads_accepted: u64,
    pub payloads_rejected: u64,
    pub records_decoded: u64,
    pub decode_failures: u64,
    pub payloads_retained: u64,
    /// Retained payloads a BUFFER … ON OVERFLOW policy dropped.
    pub payloads_dropped: u64,
}

impl PayloadIntake {
    pub fn new(source: IntakeSource) -> PayloadIntake {
        let decoder = source.codec().decoder();
        PayloadIntake {
            decoder,
            source,
            suspended: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            stopped: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            last_payload_ns: 0,
            retained: VecDeque::new(),
            retained_bytes: 0,
            front_unfolding: None,
            workers_retry_ns: 0,
            drained_on_workers: 0,
            envelope: None,
            counters: IntakeCounters::default(),
        }
    }

    /// Bodies and bytes retained by a quiesce.
    pub fn retained(&self) -> (usize, u64) {
        (self.retained.len(), self.retained_bytes)
    }

    /// Takes the retained bodies (they move to the replacement graph's intake, whose codec
    /// unfolds them again: an unfolding in flight here is dropped).
    pub fn take_retained(&mut self) -> (VecDeque<Retained>, u64) {
        self.front_unfolding = None;
        self.workers_retry_ns = 0;
        let bytes = std::mem::take(&mut self.retained_bytes);
        (std::mem::take(&mut self.retained), bytes)
    }

    pub fn restore_retained(&mut self, retained: VecDeque<Retained>, bytes: u64) {
        self.retained = retained;
        self.retained_bytes = bytes;
    }

    /// Retains `payload` under `BUFFER MAX SIZE max_bytes [ON OVERFLOW …]`: endpoints refuse
    /// what does not fit; polling sources drop the oldest retained payloads or the new one.
    fn retain(
        &mut self,
        payload: &[u8],
        headers: Vec<(String, Vec<u8>)>,
        max_bytes: u64,
        overflow: Option<nervix_nspl::ast::OverflowPolicy>,
    ) -> Offer {
        use nervix_nspl::ast::OverflowPolicy;
        let size = payload.len() as u64;
        let fits = |intake: &PayloadIntake| intake.retained_bytes + size <= max_bytes;
        match overflow {
            _ if fits(self) => {}
            None => {
                return Offer::Refused {
                    retry_after_s: None,
                }
            }
            Some(OverflowPolicy::DropNewest) => {
                self.counters.payloads_dropped += 1;
                return Offer::Accepted;
            }
            Some(OverflowPolicy::DropOldest) => {
                while !fits(self) {
                    let Some(oldest) = self.retained.pop_front() else {
                        // Larger than the whole buffer: it is the one dropped.
                        self.counters.payloads_dropped += 1;
                        return Offer::Accepted;
                    };
                    self.retained_bytes -= oldest.body.len() as u64;
                    self.counters.payloads_dropped += 1;
                }
            }
        }
        self.retained.push_back(Retained {
            body: payload.to_vec(),
            headers,
        });
        self.retained_bytes += size;
        self.counters.payloads_retained += 1;
        Offer::Accepted
    }

    /// When the open group must close, or a drain that found the extension workers full
    /// tries again, in physical ns.
    pub fn group_deadline_ns(&self) -> Option<u64> {
        let group =
            (self.last_payload_ns != 0).then(|| self.last_payload_ns + INGEST_GROUP_IDLE_NS);
        let retry = (self.workers_retry_ns != 0).then_some(self.workers_retry_ns);
        group.into_iter().chain(retry).min()
    }
}

/// The front retained body's unfolding on the extension workers. Its result is collected only
/// when the ingestor can take rows (the drain checks that first), so it is added at once.
type FrontUnfolding = nervix_shards::workers::JobHandle<Result<crate::codec::Unfolded, String>>;

/// Wakes the shard's ticker when an unfolding finishes, so the drain goes on at once (the
/// worker thread completes the job's channel; this waker kicks the ticker, which drains).
struct KickTicker(async_channel::Sender<()>);

impl std::task::Wake for KickTicker {
    fn wake(self: Arc<Self>) {
        let _ = self.0.try_send(());
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let _ = self.0.try_send(());
    }
}

/// What the drain does next with an intake's front retained body.
enum FrontStep {
    /// Decode it on the shard (codecs without ON INGESTION, or no extension workers).
    DecodeHere(Retained),
    /// Its records came back from the workers.
    Unfolded(Retained, Result<crate::codec::Unfolded, String>),
    /// Wait: the workers run it or are full (the body stays at the front, counted).
    Wait,
}

impl PayloadIntake {
    /// The drain's next step for the front retained body (see `ShardState::drain_retained`):
    /// submits its unfolding when it has none, collects it when it finished, and pops the body
    /// only once it can enter the group.
    fn front_step(
        &mut self,
        extension: Option<&nervix_shards::workers::WorkerClass>,
        waker: &std::task::Waker,
        at: Instant,
    ) -> FrontStep {
        let plan = match (self.source.codec(), extension) {
            (codec @ crate::runtime::plan::IntakeCodec::Jaq(plan), Some(_))
                if codec.unfolds_on_workers() =>
            {
                plan.clone()
            }
            _ => {
                return self
                    .pop_front()
                    .map_or(FrontStep::Wait, FrontStep::DecodeHere)
            }
        };
        let Some(front) = self.retained.front() else {
            return FrontStep::Wait;
        };
        let mut handle = match self.front_unfolding.take() {
            Some(unfolding) => unfolding,
            None => {
                if self.workers_retry_ns > at.now.physical_ns {
                    return FrontStep::Wait;
                }
                let body = front.body.clone();
                let job = move || crate::codec::jaq_unfold(&plan, &body).map_err(|e| e.to_string());
                match extension.map(|workers| workers.try_submit(job)) {
                    Some(Ok(handle)) => {
                        self.workers_retry_ns = 0;
                        handle
                    }
                    // Full: the body waits at the front; the ticker tries again shortly.
                    _ => {
                        self.workers_retry_ns = at.now.physical_ns + RETAINED_WORKERS_RETRY_NS;
                        return FrontStep::Wait;
                    }
                }
            }
        };
        let mut cx = std::task::Context::from_waker(waker);
        let result = match std::pin::Pin::new(&mut handle).poll(&mut cx) {
            std::task::Poll::Ready(result) => result.unwrap_or_else(|error| Err(error.to_string())),
            std::task::Poll::Pending => {
                self.front_unfolding = Some(handle);
                return FrontStep::Wait;
            }
        };
        match self.pop_front() {
            Some(retained) => {
                self.drained_on_workers += 1;
                FrontStep::Unfolded(retained, result)
            }
            None => FrontStep::Wait,
        }
    }

    /// Takes the front retained body out of the buffer (and out of its bytes).
    fn pop_front(&mut self) -> Option<Retained> {
        let retained = self.retained.pop_front()?;
        self.retained_bytes -= retained.body.len() as u64;
        Some(retained)
    }
}

impl Drop for PayloadIntake {
    fn drop(&mut self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

/// An ingestor a payload is for: the source identifies the instance.
#[derive(Clone)]
pub struct EndpointTarget {
    pub domain: String,
    pub index: usize,
    pub source: IntakeSource,
}

impl EndpointTarget {
    /// The endpoint plan of an endpoint target.
    pub fn endpoint(&self) -> Option<&EndpointPlan> {
        match &self.source {
            IntakeSource::Endpoint(plan) => Some(plan),
            IntakeSource::Poll(_) | IntakeSource::Connection(_) => None,
        }
    }
}

/// An ingestor's answer to one offered payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    Accepted,
    /// The ingestor cannot take rows now (a full relay): offer again shortly.
    Busy,
    /// Quiesced under REJECT (`Some(retry_after_s)`), or a BUFFER that is full (`None`).
    Refused {
        retry_after_s: Option<u64>,
    },
    /// The ingestor is not running here any more (its domain stopped or it was replaced).
    Gone,
}

impl ShardState {
    /// Ingestors of started domains that serve `host` + `path` on the plain or TLS listener,
    /// as `(domain, ingestor index, kind)`. A scan: a node runs few endpoint ingestors, and
    /// a request is a whole payload of rows.
    pub fn endpoint_route(&self, host: Option<&str>, path: &str, tls: bool) -> Vec<EndpointTarget> {
        let mut found = Vec::new();
        for (domain, run) in &self.runs {
            for (index, ingestor) in run.graph.plan.ingestors.iter().enumerate() {
                if let SourcePlan::Endpoint(endpoint) = &ingestor.source {
                    if endpoint.serves(host, path, tls) {
                        found.push(EndpointTarget {
                            domain: domain.clone(),
                            index,
                            source: IntakeSource::Endpoint(endpoint.clone()),
                        });
                    }
                }
            }
        }
        found
    }

    /// The intake of `target` if it still runs the source the target was routed to (a
    /// replaced or stopped source is gone: its connections must not feed the replacement).
    fn intake_of(&mut self, target: &EndpointTarget) -> Option<&mut PayloadIntake> {
        let run = self.runs.get_mut(&target.domain)?;
        let intake = run.intakes.get_mut(target.index)?.as_mut()?;
        intake.source.same(&target.source).then_some(intake)
    }

    /// Whether `target` takes payloads now or retains them (an established WebSocket stays
    /// open); false when its source is gone or quiesced under REJECT.
    pub fn endpoint_accepts(&self, target: &EndpointTarget) -> bool {
        let Some(run) = self.runs.get(&target.domain) else {
            return false;
        };
        let open = run.admission.get(target.index).is_some_and(|a| a.open);
        match run.intakes.get(target.index).and_then(Option::as_ref) {
            Some(intake) if intake.source.same(&target.source) => {
                open || matches!(intake.source.quiesce(), IntakeQuiesce::Buffer { .. })
            }
            _ => false,
        }
    }

    /// The `Retry-After` of `target` while it refuses under REJECT.
    pub fn endpoint_retry_after_s(&self, target: &EndpointTarget) -> Option<u64> {
        match target.source.quiesce() {
            IntakeQuiesce::Reject { retry_after_s } if !self.endpoint_accepts(target) => {
                Some(retry_after_s)
            }
            _ => None,
        }
    }

    /// The current target of ingestor `name` of `domain` when it is a polling source here.
    pub fn poll_target(&self, domain: &str, name: &str) -> Option<EndpointTarget> {
        let run = self.runs.get(domain)?;
        let index = run.graph.plan.ingestor(name)?;
        let intake = run.intakes.get(index)?.as_ref()?;
        matches!(intake.source, IntakeSource::Poll(_)).then(|| EndpointTarget {
            domain: domain.to_string(),
            index,
            source: intake.source.clone(),
        })
    }

    /// The current target of ingestor `name` of `domain` when it is a WEBSOCKETS CONNECTION
    /// here.
    pub fn connection_target(&self, domain: &str, name: &str) -> Option<EndpointTarget> {
        let run = self.runs.get(domain)?;
        let index = run.graph.plan.ingestor(name)?;
        let intake = run.intakes.get(index)?.as_ref()?;
        matches!(intake.source, IntakeSource::Connection(_)).then(|| EndpointTarget {
            domain: domain.to_string(),
            index,
            source: intake.source.clone(),
        })
    }

    /// Marks the polling sources of `domain` suspended (or not) per their quiesce mode.
    pub(super) fn suspend_polls(&mut self, domain: &str, suspend: bool) {
        if let Some(run) = self.runs.get(domain) {
            for intake in run.intakes.iter().flatten() {
                if intake.source.quiesce() == IntakeQuiesce::Suspend {
                    intake
                        .suspended
                        .store(suspend, std::sync::atomic::Ordering::Release);
                }
            }
        }
    }

    /// Offers one payload to `target`, with its transport headers (lower-case names for HTTP;
    /// empty for a source without headers).
    pub fn offer_payload(
        &mut self,
        target: &EndpointTarget,
        payload: &[u8],
        headers: &[(String, Vec<u8>)],
    ) -> Offer {
        let at = self.instant();
        let (domain, index) = (target.domain.as_str(), target.index);
        let Some(run) = self.runs.get(domain) else {
            return Offer::Gone;
        };
        let open = run.admission.get(index).is_some_and(|a| a.open);
        let ready = run.graph.ingestor_ready(index);
        let uses_envelope = run
            .graph
            .plan
            .ingestors
            .get(index)
            .is_some_and(|i| i.uses_envelope);
        let Some(intake) = self.intake_of(target) else {
            return Offer::Gone;
        };
        if !open {
            let offer = match intake.source.quiesce() {
                IntakeQuiesce::Reject { retry_after_s } => Offer::Refused {
                    retry_after_s: Some(retry_after_s),
                },
                IntakeQuiesce::Buffer {
                    max_bytes,
                    overflow,
                } => {
                    let kept = if uses_envelope {
                        headers.to_vec()
                    } else {
                        Vec::new()
                    };
                    intake.retain(payload, kept, max_bytes, overflow)
                }
                // A poll already taken waits for the hold to end (later polls are skipped).
                IntakeQuiesce::Suspend => return Offer::Busy,
            };
            match offer {
                Offer::Accepted => intake.counters.payloads_accepted += 1,
                _ => intake.counters.payloads_rejected += 1,
            }
            return offer;
        }
        if !ready || !intake.retained.is_empty() {
            // Retained bodies go first; live ones wait behind them.
            self.drain_retained(at);
            return Offer::Busy;
        }
        intake.counters.payloads_accepted += 1;
        self.decode_into_group(domain, index, payload, headers, at);
        self.step();
        Offer::Accepted
    }

    /// Offers records an extension worker unfolded from `payload` (JAQ ON INGESTION). Taken
    /// from `unfolded` only when accepted; if the ingestor quiesced meanwhile, the raw payload
    /// follows its quiesce mode instead.
    pub fn offer_unfolded(
        &mut self,
        target: &EndpointTarget,
        unfolded: &mut Option<Result<crate::codec::Unfolded, String>>,
        payload: &[u8],
        headers: &[(String, Vec<u8>)],
    ) -> Offer {
        let at = self.instant();
        let Some(run) = self.runs.get(&target.domain) else {
            return Offer::Gone;
        };
        let open = run.admission.get(target.index).is_some_and(|a| a.open);
        let ready = run.graph.ingestor_ready(target.index);
        if !open {
            return self.offer_payload(target, payload, headers);
        }
        let Some(intake) = self.intake_of(target) else {
            return Offer::Gone;
        };
        if !ready || !intake.retained.is_empty() {
            self.drain_retained(at);
            return Offer::Busy;
        }
        intake.counters.payloads_accepted += 1;
        let result = unfolded
            .take()
            .unwrap_or_else(|| Err("the payload was unfolded once already".to_string()));
        self.add_to_group(
            &target.domain,
            target.index,
            payload.len(),
            headers,
            at,
            |decoder| decoder.append(result?),
        );
        self.step();
        Offer::Accepted
    }

    /// Whether `target` admits live payloads right now (open, not quiesced).
    pub fn endpoint_open(&self, target: &EndpointTarget) -> bool {
        self.runs
            .get(&target.domain)
            .and_then(|run| run.admission.get(target.index))
            .is_some_and(|a| a.open)
    }

    /// Decodes one payload into the open group and closes the group when it is full.
    fn decode_into_group(
        &mut self,
        domain: &str,
        index: usize,
        payload: &[u8],
        headers: &[(String, Vec<u8>)],
        at: Instant,
    ) {
        self.add_to_group(domain, index, payload.len(), headers, at, |decoder| {
            decoder.decode_payload(payload)
        });
    }

    /// Adds what `decode` makes of one payload of `bytes` to the open group, with its headers
    /// when the ingestor reads them; a refused payload is counted and reported under ON
    /// GENERAL ERROR LOG, and leaves no headers behind.
    fn add_to_group(
        &mut self,
        domain: &str,
        index: usize,
        bytes: usize,
        headers: &[(String, Vec<u8>)],
        at: Instant,
        decode: impl FnOnce(&mut crate::runtime::plan::IntakeDecoder) -> Result<u32, String>,
    ) {
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let Some(Some(intake)) = run.intakes.get_mut(index) else {
            return;
        };
        let uses_envelope = run
            .graph
            .plan
            .ingestors
            .get(index)
            .is_some_and(|i| i.uses_envelope);
        let mut envelope = if uses_envelope {
            let builder = intake.envelope.get_or_insert_with(EnvelopeBuilder::http);
            builder.begin_payload();
            for (name, value) in headers {
                builder.push_header(name.as_bytes(), value);
            }
            Some(builder)
        } else {
            None
        };
        // The rows this payload added, counted on the decoder itself so the envelope's rows
        // match the batch's exactly.
        let before = intake.decoder.buffered_rows();
        match decode(&mut intake.decoder) {
            Ok(records) => {
                intake.counters.records_decoded += u64::from(records);
                intake.last_payload_ns = at.now.physical_ns.max(1);
                if let Some(builder) = envelope.as_mut() {
                    let rows = intake.decoder.buffered_rows().saturating_sub(before);
                    builder.end_payload(u32::try_from(rows).unwrap_or(u32::MAX), None);
                }
            }
            Err(error) => {
                if let Some(builder) = envelope.as_mut() {
                    builder.abandon_payload();
                }
                intake.counters.decode_failures += 1;
                let ingestor = &run.graph.plan.ingestors[index];
                if ingestor.general_error == nervix_nspl::ast::GeneralErrorPolicy::Log {
                    tracing::warn!(
                        "domain '{domain}': ingestor '{}' could not decode a payload of {} \
                         bytes: {error}",
                        ingestor.name,
                        bytes
                    );
                }
            }
        }
        if intake.decoder.buffered_rows() >= INGEST_GROUP_MESSAGES {
            self.close_group(domain, index, at);
        }
    }

    /// Hands the open group of ingestor `index` to its graph.
    fn close_group(&mut self, domain: &str, index: usize, at: Instant) {
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let Some(Some(intake)) = run.intakes.get_mut(index) else {
            return;
        };
        intake.last_payload_ns = 0;
        if intake.decoder.buffered_rows() == 0 {
            return;
        }
        let batch = intake.decoder.finish();
        let envelope = intake.envelope.as_mut().map(EnvelopeBuilder::finish);
        let rows = batch.num_rows() as u64;
        self.counters.rows_admitted += rows;
        self.counters.bytes_admitted += crate::runtime::logical_bytes::logical_bytes(&batch);
        run.graph
            .ingest(index, &batch, Vec::new(), envelope, at, super::cx!(self));
    }

    /// Closes every endpoint group of `domain` (a hold drains what was accepted).
    pub fn close_all_groups(&mut self, domain: &str) {
        let at = self.instant();
        let count = self.runs.get(domain).map_or(0, |run| run.intakes.len());
        for index in 0..count {
            self.close_group(domain, index, at);
        }
    }

    /// Closes groups idle for [`INGEST_GROUP_IDLE_NS`] and drains retained bodies.
    pub(super) fn endpoint_tick(&mut self, at: Instant) {
        let mut due = Vec::new();
        for (domain, run) in &self.runs {
            for (index, intake) in run.intakes.iter().enumerate() {
                if let Some(intake) = intake {
                    if intake
                        .group_deadline_ns()
                        .is_some_and(|deadline| deadline <= at.now.physical_ns)
                    {
                        due.push((domain.clone(), index));
                    }
                }
            }
        }
        for (domain, index) in due {
            self.close_group(&domain, index, at);
        }
        self.drain_retained(at);
    }

    /// Retained bodies of open, ready ingestors enter their groups in arrival order. A JAQ ON
    /// INGESTION codec's bodies are unfolded on the extension workers one at a time, front
    /// first: the front body stays in the buffer (counted in its records and bytes) until its
    /// records are added, and when the workers are full it waits for them — it was answered
    /// 202 already, so it is never refused or dropped — and the bodies behind it wait too.
    fn drain_retained(&mut self, at: Instant) {
        let mut work = Vec::new();
        for (domain, run) in &self.runs {
            for (index, intake) in run.intakes.iter().enumerate() {
                if intake.as_ref().is_some_and(|i| !i.retained.is_empty()) {
                    work.push((domain.clone(), index));
                }
            }
        }
        if work.is_empty() {
            return;
        }
        let extension = self.extension.clone();
        let waker = std::task::Waker::from(Arc::new(KickTicker(self.kick.clone())));
        for (domain, index) in work {
            while let Some(run) = self.runs.get_mut(&domain) {
                let open = run.admission.get(index).is_some_and(|a| a.open);
                if !open || !run.graph.ingestor_ready(index) {
                    break;
                }
                let Some(Some(intake)) = run.intakes.get_mut(index) else {
                    break;
                };
                let step = intake.front_step(extension.as_deref(), &waker, at);
                match step {
                    FrontStep::Wait => break,
                    FrontStep::DecodeHere(retained) => self.decode_into_group(
                        &domain,
                        index,
                        &retained.body,
                        &retained.headers,
                        at,
                    ),
                    FrontStep::Unfolded(retained, result) => self.add_to_group(
                        &domain,
                        index,
                        retained.body.len(),
                        &retained.headers,
                        at,
                        |decoder| decoder.append(result?),
                    ),
                }
            }
            self.log_drained_on_workers(&domain, index);
        }
    }

    /// Logs, once the buffer emptied, how many retained bodies the workers unfolded.
    fn log_drained_on_workers(&mut self, domain: &str, index: usize) {
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let Some(Some(intake)) = run.intakes.get_mut(index) else {
            return;
        };
        if intake.retained.is_empty() && intake.drained_on_workers > 0 {
            tracing::info!(
                "domain '{domain}': ingestor '{}': {} retained bodies drained, unfolded on the \
                 extension workers",
                run.graph.plan.ingestors[index].name,
                intake.drained_on_workers
            );
            intake.drained_on_workers = 0;
        }
    }

    /// The earliest idle deadline of an open endpoint group.
    pub(super) fn endpoint_deadline_ns(&self) -> Option<u64> {
        self.runs
            .values()
            .flat_map(|run| run.intakes.iter().flatten())
            .filter_map(PayloadIntake::group_deadline_ns)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nervix_nspl::ast::catalog::{CatalogStmt, EndpointType};
    use nervix_nspl::Statement;
    use nervix_shards::flush::Now;
    use nervix_shards::workers::{WorkerClass, WorkerClassConfig, DEFAULT_WORKER_STACK_BYTES};

    use super::*;
    use crate::runtime::plan::IntakeCodec;
    use crate::types::{DataType, FieldType};
    use crate::validate::route::Field;

    /// An endpoint intake whose JAQ codec unfolds `.items[]` ON INGESTION, under BUFFER.
    fn jaq_intake() -> PayloadIntake {
        let script = nervix_nspl::parse_script(
            "CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON INGESTION \
             '.items[]';",
        );
        let Some(Statement::Catalog(CatalogStmt::CreateCodec(codec))) =
            script.statements.into_iter().next().map(|s| s.statement)
        else {
            panic!("a codec")
        };
        let fields = [Field {
            name: "id".to_string(),
            ty: FieldType {
                data_type: DataType::I64,
                nullable: false,
                sensitive: false,
            },
        }];
        let plan = crate::codec::JaqCodecPlan::build(&codec, &fields).expect("plan builds");
        PayloadIntake::new(IntakeSource::Endpoint(Arc::new(EndpointPlan {
            kind: EndpointType::Http,
            endpoint: "e".to_string(),
            vhost: "v".to_string(),
            hosts: vec!["localhost".to_string()],
            path: "/".to_string(),
            tls: false,
            codec: IntakeCodec::Jaq(Arc::new(plan)),
            quiesce: IntakeQuiesce::Buffer {
                max_bytes: 1 << 20,
                overflow: None,
            },
            signaling: None,
        })))
    }

    fn at(physical_ns: u64) -> Instant {
        Instant {
            now: Now {
                logical_ns: 0,
                physical_ns,
            },
            snapshot_ns: 0,
        }
    }

    fn noop_waker() -> std::task::Waker {
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: Arc<Self>) {}
        }
        std::task::Waker::from(Arc::new(Noop))
    }

    /// Steps until the front body comes back unfolded (the worker runs on its own thread).
    /// Time moves one retry interval per step: a worker that is not free yet makes the intake
    /// retry later, and a clock that stood still would never reach that retry.
    fn unfolded(intake: &mut PayloadIntake, workers: &WorkerClass, now: u64) -> Retained {
        let waker = noop_waker();
        for step in 0..1_000u64 {
            let instant = at(now + step * RETAINED_WORKERS_RETRY_NS);
            match intake.front_step(Some(workers), &waker, instant) {
                FrontStep::Unfolded(retained, result) => {
                    assert!(result.is_ok(), "{:?}", result.err());
                    return retained;
                }
                FrontStep::Wait => std::thread::sleep(Duration::from_millis(2)),
                FrontStep::DecodeHere(_) => panic!("a JAQ ON INGESTION body is not decoded here"),
            }
        }
        panic!("the unfolding never finished")
    }

    #[test]
    fn retained_bodies_wait_for_full_workers_then_unfold_front_first() {
        let workers = WorkerClass::start(WorkerClassConfig {
            name: "test-extension".to_string(),
            workers: 1,
            queue_jobs: 0,
            stack_bytes: DEFAULT_WORKER_STACK_BYTES,
        })
        .expect("workers start");
        let mut intake = jaq_intake();
        let first = br#"{"items": [{"id": 1}, {"id": 2}]}"#;
        let second = br#"{"items": [{"id": 3}]}"#;
        for body in [&first[..], &second[..]] {
            assert_eq!(
                intake.retain(body, Vec::new(), 1 << 20, None),
                Offer::Accepted
            );
        }
        let bytes = (first.len() + second.len()) as u64;

        // The one worker is busy: the front body waits, still counted, and retries later.
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        let busy = workers
            .try_submit(move || {
                let _ = blocked.recv();
            })
            .expect("the blocker is admitted");
        let waker = noop_waker();
        assert!(matches!(
            intake.front_step(Some(&workers), &waker, at(10)),
            FrontStep::Wait
        ));
        assert_eq!(intake.retained(), (2, bytes));
        assert_eq!(intake.workers_retry_ns, 10 + RETAINED_WORKERS_RETRY_NS);
        assert_eq!(
            intake.group_deadline_ns(),
            Some(10 + RETAINED_WORKERS_RETRY_NS)
        );
        // Before the retry instant nothing is submitted.
        assert!(matches!(
            intake.front_step(Some(&workers), &waker, at(11)),
            FrontStep::Wait
        ));
        assert_eq!(workers.counters().refused, 1);

        release.send(()).expect("the blocker waits");
        futures_lite::future::block_on(busy).expect("the blocker finishes");
        let later = 10 + RETAINED_WORKERS_RETRY_NS;
        let front = unfolded(&mut intake, &workers, later);
        assert_eq!(front.body, first);
        assert_eq!(intake.retained(), (1, second.len() as u64));
        let next = unfolded(&mut intake, &workers, later);
        assert_eq!(next.body, second);
        assert_eq!(intake.retained(), (0, 0));
        assert_eq!(intake.drained_on_workers, 2);
        workers.shutdown();
    }
}
