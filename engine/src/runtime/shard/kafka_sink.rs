//! KAFKA TOPIC emitters: one record per row, produced on the shard (DESIGN §3; issue: "KEY
//! expression, headers via write_header, MODE NO ACK / ACK SEQUENTIAL / ACK PARALLEL MAX n with
//! ACK TIMEOUT, RETRY POLICY; ATTACHED acknowledges upstream only after the broker
//! acknowledged").
//!
//! A frame's records are prepared over the whole batch — KEY and every `write_header` program
//! evaluated once, bodies encoded by the codec in one pass into one buffer — and enqueued into
//! librdkafka's non-blocking producer, each tagged with its frame and row. A JAQ codec's ON
//! EMITTING runs on the extension workers instead ([`super::sink_body`]): the frame is in
//! flight while its bodies are made, and its records (and every later frame's) are enqueued
//! once they are back, so records keep frame order. A row the encoder refused is not produced:
//! it fails with the encoder's reason. Delivery reports come back on the
//! sink's task ([`KafkaSinkHandle::serve`]); when every row of a frame has its outcome, the
//! frame's acknowledgement runs resolve: delivered rows ack, failed rows follow ON MESSAGE
//! ERROR (IGNORE acks, LOG logs and nacks their payloads). A row whose delivery failed in a way
//! that may pass is produced again after RETRY POLICY's BACKOFF (doubling up to MAX) until its
//! frame's ACK TIMEOUT has passed. At most MAX n (ACK PARALLEL) frames are in flight, and a
//! full local producer queue stops enqueuing until deliveries free it, so a slow broker
//! backpressures the graph instead of growing a queue.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch};
use nervix_connectors::kafka::{KafkaProducer, OutRecord, SendRefused, PRODUCE_BATCH_RECORDS};
use nervix_connectors::ConnectorError;

use nervix_shards::workers::WorkerClass;

use super::http_sink::{eval_rows, hand_over, RowOutcome};
use super::sink_body::{refusal, FrameBodies, WorkerBodies};
use super::ShardState;
use crate::codec::EncodedRows;
use crate::runtime::clock;
use crate::runtime::frame::Frame;
use crate::runtime::plan::{EmitterPlan, ErrorPlan, KafkaSinkPlan, SinkPlan};

/// Bits of a delivery token that hold the row; the frame's job number sits above them.
const ROW_BITS: u32 = 32;

/// A program's values over a frame as text, with the rows whose evaluation failed.
type TextColumn = (Result<ArrayRef, String>, HashMap<u32, String>);

/// A frame's records, prepared once over the whole batch: values encoded back to back, KEY and
/// header columns as text. Rows are read from them in place when produced (no per-row
/// allocation).
struct PreparedFrame {
    /// `None`: WITHOUT BODY (empty values).
    values: Option<EncodedRows>,
    key: Option<TextColumn>,
    headers: Vec<(TextColumn, TextColumn)>,
}

/// The text of `column` at `row`: `Ok(None)` for a null, `Err` for a failed evaluation.
fn text_at<'a>(column: &'a TextColumn, row: usize, what: &str) -> Result<Option<&'a str>, String> {
    if let Some(error) = column.1.get(&(row as u32)) {
        return Err(format!("{what}: {error}"));
    }
    let values = column
        .0
        .as_ref()
        .map_err(|error| format!("{what}: {error}"))?;
    let Some(strings) = values.as_any().downcast_ref::<arrow_array::StringArray>() else {
        return Err(format!("{what}: not text"));
    };
    Ok((!strings.is_null(row)).then(|| strings.value(row)))
}

impl PreparedFrame {
    /// Row `row`'s key, headers (into `headers`) and value, or why it cannot be produced.
    fn row<'a>(
        &'a self,
        row: usize,
        headers: &mut Vec<(&'a str, &'a [u8])>,
    ) -> Result<(Option<&'a [u8]>, &'a [u8]), String> {
        headers.clear();
        let key = match &self.key {
            // A null key writes a record without a key.
            Some(key) => text_at(key, row, "KEY")?.map(str::as_bytes),
            None => None,
        };
        for (name, value) in &self.headers {
            let name = text_at(name, row, "write_header")?;
            let value = text_at(value, row, "write_header")?;
            // A null name or value writes no header.
            if let (Some(name), Some(value)) = (name, value) {
                headers.push((name, value.as_bytes()));
            }
        }
        let value = match &self.values {
            Some(values) => values.row(row).map_err(refusal)?,
            None => &[],
        };
        Ok((key, value))
    }
}

/// A frame whose rows are being produced.
struct FrameInFlight {
    frame: Frame,
    prepared: PreparedFrame,
    /// The values being made on the extension workers; nothing is produced until they are back.
    encoding: Option<WorkerBodies>,
    /// One outcome per row once known.
    outcomes: Vec<Option<RowOutcome>>,
    /// Rows not yet enqueued (first send, or a retry due at the instant given), in order.
    to_send: VecDeque<(u32, u64)>,
    unresolved: usize,
    started_ns: u64,
    /// Whether the frame's runs were resolved when it was handed over (NO ACK, DETACHED).
    resolved_at_handoff: bool,
}

/// The shard's side of one KAFKA TOPIC emitter.
pub struct KafkaSinkHandle {
    plan: Arc<KafkaSinkPlan>,
    producer: KafkaProducer,
    frames: HashMap<u64, FrameInFlight>,
    next_job: u64,
    /// RETRY POLICY, and the row deadline (ACK TIMEOUT; `None` under NO ACK).
    backoff_ms: u64,
    backoff_max_ms: u64,
    deadline_ns: Option<u64>,
    /// Set when the local queue refused a record: enqueuing waits for deliveries.
    queue_full: bool,
    deliveries: Vec<(u64, Result<(), ConnectorError>)>,
    /// The extension workers, when the body runs there (JAQ ON EMITTING).
    workers: Option<Arc<WorkerClass>>,
}

impl KafkaSinkHandle {
    pub fn start(
        plan: Arc<KafkaSinkPlan>,
        emitter: &EmitterPlan,
        workers: Option<Arc<WorkerClass>>,
    ) -> Result<KafkaSinkHandle, ConnectorError> {
        let producer = KafkaProducer::new(&plan.config, &plan.topic)?;
        Ok(KafkaSinkHandle {
            plan,
            producer,
            frames: HashMap::new(),
            next_job: 0,
            backoff_ms: emitter.retry_backoff_ms.max(1),
            backoff_max_ms: emitter.retry_max_ms.max(emitter.retry_backoff_ms).max(1),
            deadline_ns: emitter.ack_timeout_ns,
            queue_full: false,
            deliveries: Vec::new(),
            workers,
        })
    }

    /// Frames being produced.
    pub fn in_flight(&self) -> usize {
        self.frames.len()
    }

    /// Enqueues what is due of every frame, in job order, until the local queue is full or a
    /// frame's values are still on the extension workers (later frames wait behind it).
    fn send_due(&mut self, now_ns: u64) {
        let mut jobs: Vec<u64> = self.frames.keys().copied().collect();
        jobs.sort_unstable();
        self.queue_full = false;
        let terms = self.retry_terms();
        // Served every few hundred microseconds while frames are in flight, so a finished or
        // newly admitted encoding is noticed without a wake-up.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        for job in jobs {
            let Some(flight) = self.frames.get_mut(&job) else {
                continue;
            };
            if let Some(encoding) = flight.encoding.as_mut() {
                match encoding.poll(&mut cx) {
                    std::task::Poll::Ready(values) => {
                        flight.prepared.values = Some(values);
                        flight.encoding = None;
                        // ACK TIMEOUT bounds delivery, as for frames encoded on the shard.
                        flight.started_ns = now_ns;
                    }
                    std::task::Poll::Pending => return,
                }
            }
            let sent = if self.plan.headers.is_empty() {
                send_batch(&mut self.producer, flight, job, now_ns, terms)
            } else {
                send_each(&mut self.producer, flight, job, now_ns, terms)
            };
            if !sent {
                self.queue_full = true;
                return;
            }
        }
    }

    fn retry_terms(&self) -> RetryTerms {
        RetryTerms {
            backoff_ms: self.backoff_ms,
            backoff_max_ms: self.backoff_max_ms,
            deadline_ns: self.deadline_ns,
        }
    }

    /// Serves delivery reports; returns the frames that completed.
    fn serve(&mut self, now_ns: u64, done: &mut Vec<(FrameInFlight, u64)>) {
        self.deliveries.clear();
        self.producer.poll_deliveries(&mut self.deliveries);
        let terms = self.retry_terms();
        // Every report fetched is applied: a report dropped here would leave its frame in
        // flight forever.
        // Reports come in runs of one frame's rows: its entry is looked up once per run.
        let mut current: Option<(u64, &mut FrameInFlight)> = None;
        for (token, outcome) in self.deliveries.drain(..) {
            let job = token >> ROW_BITS;
            let row = (token & ((1 << ROW_BITS) - 1)) as u32;
            if current.as_ref().is_none_or(|(held, _)| *held != job) {
                current = self.frames.get_mut(&job).map(|flight| (job, flight));
            }
            if let Some((_, flight)) = current.as_mut() {
                settle(flight, row, outcome, now_ns, terms);
            }
        }
        if let Some(error) = self.producer.take_error() {
            tracing::warn!("kafka producer for topic '{}': {error}", self.plan.topic);
        }
        let complete: Vec<u64> = self
            .frames
            .iter()
            .filter(|(_, flight)| flight.unresolved == 0)
            .map(|(job, _)| *job)
            .collect();
        for job in complete {
            if let Some(flight) = self.frames.remove(&job) {
                done.push((flight, job));
            }
        }
    }
}

/// Most rows [`send_batch`] hands the producer at once (its records borrow the frame): one
/// librdkafka batch call's worth, so the chunk's arrays stay small and are reused by the
/// allocator chunk after chunk instead of touching fresh pages.
const SEND_CHUNK_ROWS: usize = PRODUCE_BATCH_RECORDS;

/// A row's delivery token: its frame's job number above its row.
fn token(job: u64, row: u32) -> u64 {
    job << ROW_BITS | u64::from(row)
}

/// Enqueues `flight`'s due rows one record per call (emitters that write headers, which only
/// the per-record call carries). Returns false when the local queue is full.
fn send_each(
    producer: &mut KafkaProducer,
    flight: &mut FrameInFlight,
    job: u64,
    now_ns: u64,
    terms: RetryTerms,
) -> bool {
    while let Some(&(row, due_ns)) = flight.to_send.front() {
        if due_ns > now_ns {
            break;
        }
        // Allocates only when the row has headers (librdkafka copies them anyway).
        let mut headers = Vec::new();
        let (key, value) = match flight.prepared.row(row as usize, &mut headers) {
            Ok(record) => record,
            Err(error) => {
                flight.outcomes[row as usize] = Some(Err(error));
                flight.unresolved -= 1;
                flight.to_send.pop_front();
                continue;
            }
        };
        match producer.send(key, value, &headers, token(job, row)) {
            Ok(()) => {
                flight.to_send.pop_front();
            }
            Err(SendRefused::QueueFull) => return false,
            Err(SendRefused::Failed(error)) => {
                flight.to_send.pop_front();
                settle(flight, row, Err(error), now_ns, terms);
            }
        }
    }
    true
}

/// Enqueues `flight`'s due rows in chunks of at most [`SEND_CHUNK_ROWS`], each chunk in as
/// few producer calls as the producer allows. Rows keep their order: rows the local queue did
/// not take go back to the front of `to_send`. Returns false when the local queue is full.
fn send_batch(
    producer: &mut KafkaProducer,
    flight: &mut FrameInFlight,
    job: u64,
    now_ns: u64,
    terms: RetryTerms,
) -> bool {
    let mut rows: Vec<u32> = Vec::new();
    let mut unmade: Vec<(u32, String)> = Vec::new();
    let mut refused: Vec<(u32, ConnectorError)> = Vec::new();
    loop {
        rows.clear();
        while rows.len() < SEND_CHUNK_ROWS {
            match flight.to_send.front() {
                Some(&(row, due_ns)) if due_ns <= now_ns => {
                    flight.to_send.pop_front();
                    rows.push(row);
                }
                _ => break,
            }
        }
        if rows.is_empty() {
            return true;
        }
        let taken = {
            let mut no_headers = Vec::new();
            let mut records = Vec::with_capacity(rows.len());
            let mut sent_rows = Vec::with_capacity(rows.len());
            for &row in &rows {
                match flight.prepared.row(row as usize, &mut no_headers) {
                    Ok((key, payload)) => {
                        records.push(OutRecord {
                            key,
                            payload,
                            // Tokens fit: ROW_BITS + the job's bits are within 64 and the
                            // engine targets 64-bit platforms only.
                            token: token(job, row) as usize,
                        });
                        sent_rows.push(row);
                    }
                    Err(error) => unmade.push((row, error)),
                }
            }
            let taken = producer.send_batch(&records, |index, error| {
                refused.push((sent_rows[index], error));
            });
            // Rows the full queue did not take go back, in order, ahead of later rows.
            for &row in sent_rows[taken..].iter().rev() {
                flight.to_send.push_front((row, 0));
            }
            taken == records.len()
        };
        for (row, error) in unmade.drain(..) {
            flight.outcomes[row as usize] = Some(Err(error));
            flight.unresolved -= 1;
        }
        for (row, error) in refused.drain(..) {
            settle(flight, row, Err(error), now_ns, terms);
        }
        if !taken {
            return false;
        }
    }
}

/// How a failed delivery is retried.
#[derive(Debug, Clone, Copy)]
struct RetryTerms {
    backoff_ms: u64,
    backoff_max_ms: u64,
    deadline_ns: Option<u64>,
}

/// Records one row's delivery outcome: delivered, failed for good, or produced again later.
fn settle(
    flight: &mut FrameInFlight,
    row: u32,
    outcome: Result<(), ConnectorError>,
    now_ns: u64,
    terms: RetryTerms,
) {
    let Some(slot) = flight.outcomes.get_mut(row as usize) else {
        return;
    };
    if slot.is_some() {
        return;
    }
    let result = match outcome {
        Ok(()) => Ok(()),
        Err(ConnectorError::Transient(cause)) => {
            // Produce again after the backoff, doubled for every attempt so far, while the
            // frame's ACK TIMEOUT allows.
            let elapsed_ns = now_ns.saturating_sub(flight.started_ns);
            let attempts = (elapsed_ns / (terms.backoff_ms * 1_000_000)).min(32) as u32;
            let wait_ms = terms
                .backoff_ms
                .saturating_mul(1 << attempts.min(20))
                .min(terms.backoff_max_ms);
            let retry_at_ns = now_ns + wait_ms * 1_000_000;
            let in_time = terms
                .deadline_ns
                .is_none_or(|deadline| retry_at_ns - flight.started_ns <= deadline);
            if in_time {
                flight.to_send.push_back((row, retry_at_ns));
                return;
            }
            Err(format!(
                "not delivered within the ACK TIMEOUT; last attempt: {cause}"
            ))
        }
        Err(error) => Err(error.to_string()),
    };
    *slot = Some(result);
    flight.unresolved -= 1;
}

/// The records of `batch`'s rows, and their values' encoding when it runs on `workers`.
fn prepare(
    plan: &KafkaSinkPlan,
    batch: &RecordBatch,
    workers: Option<&Arc<WorkerClass>>,
) -> (PreparedFrame, Option<WorkerBodies>) {
    let rows = batch.num_rows();
    let columns: Vec<ArrayRef> = batch.columns().to_vec();
    let now_ns = clock::wall_ns();
    let text = |program| -> TextColumn {
        let (values, errors) = eval_rows(program, &columns, rows, now_ns);
        let values = arrow_cast::cast(&values, &arrow_schema::DataType::Utf8)
            .map_err(|error| error.to_string());
        (values, errors)
    };
    let (values, encoding) = match FrameBodies::of(&plan.body, batch, workers) {
        FrameBodies::Ready(values) => (values, None),
        FrameBodies::OnWorkers(encoding) => (None, Some(encoding)),
    };
    let prepared = PreparedFrame {
        values,
        key: plan.key.as_ref().map(text),
        headers: plan
            .headers
            .iter()
            .map(|(name, value)| (text(name), text(value)))
            .collect(),
    };
    (prepared, encoding)
}

impl ShardState {
    /// Moves ready frames of KAFKA TOPIC emitter `index` into its producer.
    pub(super) fn dispatch_kafka(&mut self, domain: &str, index: usize) -> bool {
        let mut moved = false;
        let mut handed_over: Vec<Frame> = Vec::new();
        {
            let Some(run) = self.runs.get_mut(domain) else {
                return false;
            };
            let emitter = &run.graph.plan.emitters[index];
            let (resolves_at_handoff, slots) =
                (emitter.resolves_at_handoff(), emitter.in_flight_slots());
            let Some(sink) = run.kafka_sinks.get_mut(&index) else {
                return false;
            };
            let queue = &mut run.graph.emitter_queues[index];
            let now_ns = clock::physical_ns();
            while sink.frames.len() < slots && !sink.queue_full {
                let Some(mut frame) = queue.ready.pop_front() else {
                    break;
                };
                let job = sink.next_job;
                sink.next_job = (sink.next_job + 1) & ((1 << ROW_BITS) - 1);
                let (prepared, encoding) = prepare(&sink.plan, &frame.batch, sink.workers.as_ref());
                let count = frame.num_rows();
                if resolves_at_handoff {
                    hand_over(&mut frame, &mut handed_over);
                }
                sink.frames.insert(
                    job,
                    FrameInFlight {
                        frame,
                        outcomes: vec![None; count],
                        to_send: (0..count as u32).map(|row| (row, 0)).collect(),
                        unresolved: count,
                        prepared,
                        encoding,
                        started_ns: now_ns,
                        resolved_at_handoff: resolves_at_handoff,
                    },
                );
                queue.in_flight += 1;
                moved = true;
                sink.send_due(now_ns);
            }
        }
        self.resolve_handed_over(handed_over);
        moved
    }

    /// Serves `domain`'s Kafka producers: delivery reports, retries due, completed frames.
    /// Returns whether any frame is still in flight.
    pub fn serve_kafka_sinks(&mut self, domain: &str) -> bool {
        let now_ns = clock::physical_ns();
        let mut done = Vec::new();
        let mut busy = false;
        {
            let Some(run) = self.runs.get_mut(domain) else {
                return false;
            };
            for (index, sink) in run.kafka_sinks.iter_mut() {
                sink.send_due(now_ns);
                let mut completed = Vec::new();
                sink.serve(now_ns, &mut completed);
                busy |= sink.in_flight() > 0;
                done.extend(completed.into_iter().map(|(flight, _)| (*index, flight)));
            }
        }
        for (index, flight) in done {
            self.kafka_frame_done(domain, index, flight);
        }
        if busy
            || !self
                .runs
                .get(domain)
                .is_none_or(|run| run.kafka_sinks.is_empty())
        {
            self.step();
        }
        busy
    }

    /// Every row of a frame has its outcome: delivered rows ack, the rest follow ON MESSAGE
    /// ERROR.
    fn kafka_frame_done(&mut self, domain: &str, index: usize, flight: FrameInFlight) {
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let emitter = &run.graph.plan.emitters[index];
        let ignore = matches!(emitter.route.on_error, ErrorPlan::Ignore);
        let outcomes: Vec<RowOutcome> = flight
            .outcomes
            .into_iter()
            .map(|outcome| outcome.unwrap_or_else(|| Err("no delivery report".to_string())))
            .collect();
        let failed: Vec<(usize, &String)> = outcomes
            .iter()
            .enumerate()
            .filter_map(|(row, outcome)| outcome.as_ref().err().map(|e| (row, e)))
            .collect();
        if let (Some((row, cause)), false) = (failed.first(), ignore) {
            tracing::warn!(
                "emitter '{}': {} of {} records not delivered; row {row}: {cause}",
                emitter.name,
                failed.len(),
                outcomes.len()
            );
        }
        let delivered = (outcomes.len() - failed.len()) as u64;
        let queue = &mut run.graph.emitter_queues[index];
        queue.in_flight = queue.in_flight.saturating_sub(1);
        queue.delivered_rows += delivered;
        self.counters.rows_delivered += delivered;
        self.settle_sink_frame(
            domain,
            index,
            &flight.frame,
            &outcomes,
            flight.resolved_at_handoff,
        );
    }
}

/// Starts the Kafka producers of a deployed plan's emitters (on the shard that runs sinks).
pub(super) fn start_kafka_sinks(
    plan: &crate::runtime::plan::DomainPlan,
    extension: Option<&Arc<WorkerClass>>,
) -> HashMap<usize, KafkaSinkHandle> {
    let mut sinks = HashMap::new();
    for (index, emitter) in plan.emitters.iter().enumerate() {
        if let SinkPlan::Kafka(kafka) = &emitter.sink {
            let workers = kafka
                .body
                .encodes_on_workers()
                .then(|| extension.cloned())
                .flatten();
            match KafkaSinkHandle::start(kafka.clone(), emitter, workers) {
                Ok(handle) => {
                    sinks.insert(index, handle);
                }
                Err(error) => tracing::error!(
                    "domain '{}': emitter '{}' cannot start its Kafka producer: {error}",
                    plan.name,
                    emitter.name
                ),
            }
        }
    }
    sinks
}
