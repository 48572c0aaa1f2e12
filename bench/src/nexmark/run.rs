//! Runs a Nexmark port end to end on an [`EmbeddedNode`]: the port's script is deployed into
//! a fresh domain, in-process producers submit the generated event batches to the stream
//! ingestors, and an in-process consumer reads the port's CLIENT CONSUMER emitter.
//!
//! - [`answer`] submits a set of events once and returns every output batch (the tests
//!   compare them with the reference).
//! - [`bench`] (`nervix-bench nexmark-q<N>`) submits pre-generated bid batches for a number
//!   of seconds, cycling through them, and measures events/s on one shard. Only the stateless
//!   ports (q0–q2) are benched this way, so a replayed batch has the same answer every time and
//!   the expected output count is the sum of each completed batch's reference count. The
//!   stateful ports (q5, q7, q8) are benched by [`super::ordered`], which submits once, in
//!   event-time order, with the same [`submit_all`] as [`answer`].
//!
//! Latency without a timestamp column: on one shard with one path from the ingestor to the
//! emitter, the output rows leave in the order of their input batches, so output row `k`
//! belongs to the batch whose cumulative expected count first exceeds `k`. Its latency is
//! the receive time minus that batch's submit time. A batch that does not complete shifts
//! this mapping, but it also fails the run's count check.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use hdrhistogram::Histogram;
use nervix::embedded::{scratch_data_dir, EmbeddedConfig, EmbeddedNode};
use nervix::net::session::frame::Outcome;
use nervix::runtime::in_process::{InProcessConsumer, InProcessProducer};
use nervix::runtime::shard::SnapshotCounters;
use serde_json::{json, Map, Value};

use super::gen::{self, Events};
use super::query::{Inputs, Query, AUCTION_INGESTOR, BID_INGESTOR, PERSON_INGESTOR};
use crate::pacer::Pacer;
use crate::report::{peak_rss_bytes, RunResult};
use crate::scenario::{now_ns, outcome_within_wait, retry_open};

/// The Nexmark scenarios, as `nervix-bench list` prints them.
pub const SCENARIOS: [(&str, &str); 3] = [
    (
        "nexmark-q0",
        "Nexmark q0 pass-through: generated bids → CLIENT PRODUCER → junction → CLIENT CONSUMER (in-process)",
    ),
    (
        "nexmark-q1",
        "Nexmark q1 currency conversion: price * 0.908 as F64 (in-process)",
    ),
    (
        "nexmark-q2",
        "Nexmark q2 selection: auction % 123 = 0, project auction, price (in-process)",
    ),
];

/// The domain every port is deployed into (a fresh node each run).
const DOMAIN: &str = "nexmark";
/// How fast the Nexmark domains' clocks run against real time (`START AT … TIME RATE`): far
/// slower, so windows and correlations end by event time alone (the input watermark, moved
/// on by the streams' [`end_markers`]), never by the clock overtaking a slow run's event time.
pub(super) const TIME_RATE: &str = "0.01";
/// How far after a stream's last event its two end markers lie: past every window end and
/// MAX TIME the ports use, so the markers' watermarks close everything the real events opened.
const END_MARKER_AFTER_NS: [i64; 2] = [30_000_000_000, 60_000_000_000];
/// End-marker rows carry this id (`auction` of a bid, `id` of a person or auction); real
/// Nexmark ids are never negative, so output rows whose first column is negative are theirs.
const END_MARKER_ID: i64 = -1;
/// A marker auction's seller: no person has it, so a marker auction never meets a person.
const END_MARKER_SELLER: i64 = -2;
/// Rows per client batch at most (DESIGN §9).
pub const MAX_BATCH_ROWS: usize = 65_536;
/// Consumer credit, in deliveries.
const CONSUMER_CREDIT: u32 = 64;
/// Producer credit in batches when [`answer`] submits.
const ANSWER_WINDOW: u32 = 16;
/// How long the consumer may take to receive the last rows after the last outcome.
pub(super) const TAIL_WAIT: Duration = Duration::from_secs(30);
/// After the expected rows arrived, how long to wait for rows that should not come.
const EXTRA_WAIT: Duration = Duration::from_millis(200);
/// How long the consumer waits for one delivery before it looks at the stop condition again.
const POLL_WAIT: Duration = Duration::from_millis(50);
/// How long a graceful stop may take.
const DRAIN_MS: u64 = 2_000;
/// Histogram bounds: 1 ns to 60 s, 3 significant digits.
const HIST_MAX_NS: u64 = 60_000_000_000;
/// Latency counts only rows of batches sent after this warm-up (at most a quarter of the run).
const LATENCY_WARMUP: Duration = Duration::from_secs(1);
/// Producer credit in bytes: at least this, at most [`MAX_CREDIT_BYTES`].
const MIN_CREDIT_BYTES: u64 = 1 << 20;
const MAX_CREDIT_BYTES: u64 = 256 << 20;

/// A node running one port, in a data directory of its own.
pub(super) struct Deployed {
    node: EmbeddedNode,
    data_dir: PathBuf,
}

impl Deployed {
    pub(super) async fn start(query: &Query, pin: bool) -> anyhow::Result<Deployed> {
        let data_dir = scratch_data_dir(&format!("nexmark-{}", query.name));
        let mut node = EmbeddedNode::start(EmbeddedConfig {
            pin,
            ..EmbeddedConfig::loopback(data_dir.clone(), NonZeroUsize::MIN)
        })
        .await
        .with_context(|| format!("cannot start an embedded node in {}", data_dir.display()))?;
        // The domain clock starts at the generator's pinned base time, so windows are due as
        // Nexmark time passes (by watermark), not all at once by today's clock.
        let script = format!(
            "{}START AT '{}' TIME RATE {};\n",
            query.script(DOMAIN),
            super::gen::BASE_TIME_RFC3339,
            TIME_RATE
        );
        if let Err(refusal) = node.run(&script).await {
            node.shutdown(DRAIN_MS).await;
            let _ = std::fs::remove_dir_all(&data_dir);
            bail!("the Nexmark {} graph was refused: {refusal}", query.name);
        }
        Ok(Deployed { node, data_dir })
    }

    /// What processor snapshots cost the node's shards so far, summed.
    pub(super) async fn snapshot_counters(&self) -> SnapshotCounters {
        self.node
            .data_plane
            .stats()
            .await
            .iter()
            .fold(SnapshotCounters::default(), |sum, shard| {
                sum + shard.counters.snapshot
            })
    }

    pub(super) async fn stop(self) {
        self.node.shutdown(DRAIN_MS).await;
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }

    pub(super) async fn consumer(&self, query: &Query) -> anyhow::Result<InProcessConsumer> {
        let data_plane = self.node.data_plane.clone();
        retry_open("in-process consumer", || {
            InProcessConsumer::open(data_plane.clone(), DOMAIN, query.emitter, CONSUMER_CREDIT)
        })
        .await
    }

    /// One producer per stream, each with `window` batches of credit.
    pub(super) async fn producers(
        &self,
        streams: &[Stream],
        window: u32,
    ) -> anyhow::Result<Vec<InProcessProducer>> {
        let mut producers = Vec::with_capacity(streams.len());
        for stream in streams {
            let credit = credit_bytes(&stream.batches, window);
            producers.push(
                self.producer(stream.ingestor, &stream.schema, window, credit)
                    .await?,
            );
        }
        Ok(producers)
    }

    async fn producer(
        &self,
        ingestor: &str,
        schema: &SchemaRef,
        window: u32,
        credit_bytes: u64,
    ) -> anyhow::Result<InProcessProducer> {
        let data_plane = self.node.data_plane.clone();
        retry_open("in-process producer", || {
            InProcessProducer::open(
                data_plane.clone(),
                DOMAIN,
                ingestor,
                gen::expected_fields(schema),
                window,
                credit_bytes,
            )
        })
        .await
    }
}

/// Producer credit in bytes: room for `window` of the largest batch, twice over.
fn credit_bytes(batches: &[RecordBatch], window: u32) -> u64 {
    let largest = batches
        .iter()
        .map(|b| b.get_array_memory_size() as u64)
        .max()
        .unwrap_or(MIN_CREDIT_BYTES);
    (largest * 2 * u64::from(window)).clamp(MIN_CREDIT_BYTES, MAX_CREDIT_BYTES)
}

/// Set by a producer when it is done, read by the consumer: the rows to wait for and until
/// when (`None` while the producer runs).
pub(super) type Target = Cell<Option<(u64, Instant)>>;

/// Submits `events` to the port once and returns every batch its emitter delivered, waiting
/// for `expected_rows` rows (and briefly for more, which would be wrong answers).
pub async fn answer(
    query: &Query,
    events: &Events,
    batch_rows: usize,
    expected_rows: u64,
) -> anyhow::Result<Vec<RecordBatch>> {
    let deployed = Deployed::start(query, false).await?;
    let result = answer_on(&deployed, query, events, batch_rows, expected_rows).await;
    deployed.stop().await;
    result
}

async fn answer_on(
    deployed: &Deployed,
    query: &Query,
    events: &Events,
    batch_rows: usize,
    expected_rows: u64,
) -> anyhow::Result<Vec<RecordBatch>> {
    let streams = streams(query, events, batch_rows);
    let mut consumer = deployed.consumer(query).await?;
    let mut producers = deployed.producers(&streams, ANSWER_WINDOW).await?;
    let target: Target = Cell::new(None);
    let submit = async {
        let outcome = submit_all(&mut producers, &streams, ANSWER_WINDOW, None).await;
        target.set(Some(match &outcome {
            Ok(submitted) if submitted.not_completed == 0 => {
                (expected_rows, Instant::now() + TAIL_WAIT)
            }
            _ => (0, Instant::now()),
        }));
        outcome
    };
    let mut batches = Vec::new();
    let collected = collect(&mut consumer, &target, |batch| batches.push(batch));
    let (submitted, received) = tokio::join!(submit, collected);
    for producer in producers {
        producer.close().await;
    }
    consumer.close().await;
    if let Some(failure) = submitted?.first_failure {
        bail!("{failure}");
    }
    received?;
    Ok(batches)
}

/// One input stream of a port: its ingestor, schema and the batches to submit to it.
pub(super) struct Stream {
    pub ingestor: &'static str,
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// How many of the last batches are end markers: their outcomes are not waited for (the
    /// nodes hold a marker until a later one, which never comes, moves time past it).
    pub markers: usize,
}

/// The streams `query` reads, holding `events` in batches of at most `batch_rows` rows; a
/// stateful port's streams end with [`end_markers`].
pub(super) fn streams(query: &Query, events: &Events, batch_rows: usize) -> Vec<Stream> {
    let mut streams = real_streams(query, events, batch_rows);
    if query.stateless_rows(&[]).is_none() {
        for stream in &mut streams {
            let markers = end_markers(&stream.batches);
            stream.markers = markers.len();
            stream.batches.extend(markers);
        }
    }
    streams
}

/// Two one-row batches after a stream's last event (bounded input's end, as a watermark): each
/// a copy of the last row with the marker ids and a time [`END_MARKER_AFTER_NS`] later. The
/// first moves every node's input watermark past what the real events opened; the second
/// closes the windows the first opened, whose records carry the first's time onward to the
/// nodes after them. Their own output is recognised by [`real_rows`] and left out.
fn end_markers(batches: &[RecordBatch]) -> Vec<RecordBatch> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::TimestampNanosecondType;
    use arrow_array::{ArrayRef, Int64Array, TimestampNanosecondArray};
    let Some(last) = batches.iter().rev().find(|b| b.num_rows() > 0) else {
        return Vec::new();
    };
    let row = last.slice(last.num_rows() - 1, 1);
    let schema = row.schema();
    END_MARKER_AFTER_NS
        .iter()
        .filter_map(|after_ns| {
            let columns: Vec<ArrayRef> = schema
                .fields()
                .iter()
                .zip(row.columns())
                .map(|(field, column)| -> ArrayRef {
                    match field.name().as_str() {
                        "auction" | "id" => Arc::new(Int64Array::from(vec![END_MARKER_ID])),
                        "seller" => Arc::new(Int64Array::from(vec![END_MARKER_SELLER])),
                        "date_time" => {
                            let last_ns = column
                                .as_primitive_opt::<TimestampNanosecondType>()
                                .map_or(0, |t| t.value(0));
                            Arc::new(
                                TimestampNanosecondArray::from(vec![last_ns + after_ns])
                                    .with_timezone("UTC"),
                            )
                        }
                        _ => column.clone(),
                    }
                })
                .collect();
            RecordBatch::try_new(schema.clone(), columns).ok()
        })
        .collect()
}

/// `batch` without the rows the end markers produced (first column negative).
pub(super) fn real_rows(batch: RecordBatch) -> RecordBatch {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    let Some(ids) = batch
        .columns()
        .first()
        .and_then(|c| c.as_primitive_opt::<Int64Type>())
    else {
        return batch;
    };
    if ids.values().iter().all(|id| *id >= 0) {
        return batch;
    }
    let keep = arrow_array::BooleanArray::from_iter(ids.iter().map(|id| id.map(|id| id >= 0)));
    arrow_select::filter::filter_record_batch(&batch, &keep).unwrap_or(batch)
}

fn real_streams(query: &Query, events: &Events, batch_rows: usize) -> Vec<Stream> {
    match query.inputs {
        Inputs::Bids => vec![Stream {
            ingestor: BID_INGESTOR,
            schema: gen::bid_schema(),
            batches: gen::bid_batches(&events.bids, batch_rows),
            markers: 0,
        }],
        Inputs::PersonsAndAuctions => vec![
            Stream {
                ingestor: PERSON_INGESTOR,
                schema: gen::person_schema(),
                batches: gen::person_batches(&events.persons, batch_rows),
                markers: 0,
            },
            Stream {
                ingestor: AUCTION_INGESTOR,
                schema: gen::auction_schema(),
                batches: gen::auction_batches(&events.auctions, batch_rows),
                markers: 0,
            },
        ],
    }
}

/// How the batches [`submit_all`] sent ended.
#[derive(Debug, Default)]
pub(super) struct Submitted {
    pub completed: u64,
    pub not_completed: u64,
    /// The first batch that ended other than `Completed`, described.
    pub first_failure: Option<String>,
}

impl Submitted {
    fn account(&mut self, (seq, outcome): (u64, Outcome), stream: &str) {
        if outcome == Outcome::Completed {
            self.completed += 1;
        } else {
            self.not_completed += 1;
            if self.first_failure.is_none() {
                self.first_failure = Some(format!("{stream} batch {seq} ended {outcome:?}"));
            }
        }
    }
}

/// Submits every stream's batches once, in event-time order across the streams (a batch goes
/// when its first event is the earliest not yet submitted), each through its stream's producer
/// with at most `window` batches outstanding, and waits for every outcome. With a `real_time`
/// pacer, a batch also waits until as much wall time has passed since the first submit as
/// event time from the first event to its own last one (the end markers go at once after the
/// last batch).
pub(super) async fn submit_all(
    producers: &mut [InProcessProducer],
    streams: &[Stream],
    window: u32,
    mut real_time: Option<&mut Pacer>,
) -> anyhow::Result<Submitted> {
    let mut order: Vec<(i64, usize, usize)> = Vec::new();
    for (stream, Stream { batches, .. }) in streams.iter().enumerate() {
        for (index, batch) in batches.iter().enumerate() {
            order.push((event_time_ns(batch, Edge::First)?, stream, index));
        }
    }
    order.sort_unstable();
    let mut submitted = Submitted::default();
    // Per stream: the sequence numbers of its end markers, and its real batches in flight.
    let mut marker_seqs: Vec<Vec<u64>> = vec![Vec::new(); streams.len()];
    let mut real_in_flight = vec![0u64; streams.len()];
    let started = Instant::now();
    let first_ns = order.first().map_or(0, |(time_ns, _, _)| *time_ns);
    for (_, stream, index) in order {
        let marker = index >= streams[stream].batches.len() - streams[stream].markers;
        if let (Some(pacer), false) = (real_time.as_deref_mut(), marker) {
            // A source has a batch once its last event happened.
            let last_ns = event_time_ns(&streams[stream].batches[index], Edge::Last)?;
            let since_first = u64::try_from(last_ns.saturating_sub(first_ns)).unwrap_or(0);
            pacer
                .wait_until(started + Duration::from_nanos(since_first))
                .await
                .context("real-time pacer")?;
        }
        let producer = &mut producers[stream];
        while producer.outstanding() >= window {
            let (seq, outcome) = outcome_within_wait(producer.next_outcome()).await?;
            if !marker_seqs[stream].contains(&seq) {
                real_in_flight[stream] -= 1;
                submitted.account((seq, outcome), streams[stream].ingestor);
            }
        }
        let seq = producer
            .submit(streams[stream].batches[index].clone())
            .await
            .context("in-process producer submit")?;
        if marker {
            marker_seqs[stream].push(seq);
        } else {
            real_in_flight[stream] += 1;
        }
    }
    for (stream, producer) in producers.iter_mut().enumerate() {
        while real_in_flight[stream] > 0 {
            let (seq, outcome) = outcome_within_wait(producer.next_outcome()).await?;
            if !marker_seqs[stream].contains(&seq) {
                real_in_flight[stream] -= 1;
                submitted.account((seq, outcome), streams[stream].ingestor);
            }
        }
    }
    Ok(submitted)
}

/// Which row's time [`event_time_ns`] reads.
#[derive(Clone, Copy)]
enum Edge {
    First,
    Last,
}

/// The first or last row's `date_time` (every stream has one, as DATETIME; a stream's
/// batches are in event-time order).
fn event_time_ns(batch: &RecordBatch, edge: Edge) -> anyhow::Result<i64> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::TimestampNanosecondType;
    let column = batch
        .column_by_name("date_time")
        .ok_or_else(|| anyhow!("a stream batch has no `date_time`"))?;
    let times = column.as_primitive_opt::<TimestampNanosecondType>();
    let time = match edge {
        Edge::First => times.and_then(|t| t.values().first().copied()),
        Edge::Last => times.and_then(|t| t.values().last().copied()),
    };
    Ok(time.unwrap_or(i64::MAX))
}

/// Reads and acknowledges deliveries, handing each batch to `received`, until the target is
/// reached (then [`EXTRA_WAIT`] more) or its deadline passes.
pub(super) async fn collect(
    consumer: &mut InProcessConsumer,
    target: &Target,
    mut received: impl FnMut(RecordBatch),
) -> anyhow::Result<()> {
    let mut rows: u64 = 0;
    let mut reached_at: Option<Instant> = None;
    loop {
        if stop_now(target, rows, &mut reached_at) {
            return Ok(());
        }
        let Ok(delivery) = tokio::time::timeout(POLL_WAIT, consumer.next()).await else {
            continue;
        };
        let Some((seq, batch)) = delivery else {
            return Ok(());
        };
        let batch = real_rows(batch);
        rows += batch.num_rows() as u64;
        received(batch);
        consumer.ack(seq).await.context("in-process consumer ack")?;
    }
}

/// Whether a consumer that received `rows` should stop.
fn stop_now(target: &Target, rows: u64, reached_at: &mut Option<Instant>) -> bool {
    let Some((expected, deadline)) = target.get() else {
        return false;
    };
    let now = Instant::now();
    if rows >= expected {
        now >= *reached_at.get_or_insert(now) + EXTRA_WAIT
    } else {
        now >= deadline
    }
}

/// A benchmark run's settings.
#[derive(Debug, Clone)]
pub struct BenchSettings {
    pub query: Query,
    /// Bid events generated before timing (the submitted batches cycle through them).
    pub events: usize,
    pub seconds: f64,
    pub batch_rows: usize,
    /// Batches without an outcome at most (the producer's credit).
    pub window: u32,
    pub pin: bool,
}

/// One pre-generated batch and how many output rows the reference gives for it.
struct Prepared {
    batch: RecordBatch,
    expected_rows: u64,
}

/// What the producer side counted.
#[derive(Debug, Default)]
struct Produced {
    events_in: u64,
    expected_out: u64,
    completed: u64,
    not_completed: u64,
    first_failure: Option<String>,
    elapsed: Duration,
}

/// What the consumer side counted.
struct Consumed {
    rows_out: u64,
    deliveries: u64,
    histogram: Histogram<u64>,
}

/// Shared by the producer and consumer futures of the one client task.
struct Shared {
    target: Target,
    /// Per submitted batch: the cumulative expected output count at its end, and its submit
    /// time. The consumer pops the batches whose rows it has received.
    sent: RefCell<VecDeque<(u64, i64)>>,
    /// Batches submitted before this `now_ns()` are warm-up: their rows' latency is not kept.
    measure_from_ns: AtomicI64,
}

/// Runs `nervix-bench nexmark-q<N>`; returns the result and the extra JSON fields.
pub async fn bench(settings: &BenchSettings) -> anyhow::Result<(RunResult, Map<String, Value>)> {
    let query = &settings.query;
    if !query.runs || query.inputs != Inputs::Bids || query.stateless_rows(&[]).is_none() {
        bail!(
            "Nexmark {} is not stateless: it is benched by submitting once in event-time order",
            query.name
        );
    }
    if settings.batch_rows == 0 || settings.batch_rows > MAX_BATCH_ROWS {
        bail!("--batch-rows must be 1 to {MAX_BATCH_ROWS} (rows per client batch, DESIGN §9)");
    }
    if !(settings.seconds > 0.0 && settings.seconds.is_finite()) {
        bail!("--seconds must be a positive number");
    }
    if settings.events == 0 {
        bail!("--events must be at least 1");
    }
    if settings.window == 0 {
        bail!("--window must be at least 1");
    }
    let generated_at = Instant::now();
    let bids = gen::bids(settings.events);
    let prepared: Vec<Prepared> = bids
        .chunks(settings.batch_rows)
        .zip(gen::bid_batches(&bids, settings.batch_rows))
        .map(|(chunk, batch)| Prepared {
            batch,
            expected_rows: query.stateless_rows(chunk).unwrap_or(0) as u64,
        })
        .collect();
    drop(bids);
    let generate_s = generated_at.elapsed().as_secs_f64();
    let deployed = Deployed::start(query, settings.pin).await?;
    let measured = measure(&deployed, settings, &prepared).await;
    deployed.stop().await;
    let (produced, consumed) = measured?;
    if let Some(failure) = &produced.first_failure {
        eprintln!(
            "{} batches ended other than Completed; first: {failure}",
            produced.not_completed
        );
    }
    let elapsed = produced.elapsed.as_secs_f64();
    let histogram = &consumed.histogram;
    let result = RunResult {
        scenario: format!("nexmark-{}", query.name),
        shards: 1,
        seconds: settings.seconds,
        elapsed_s: elapsed,
        batch_rows: settings.batch_rows,
        rate: None,
        window: settings.window,
        client_threads: 1,
        shard_spin_us: nervix::runtime::applied_spin_before_park_us(settings.pin, nervix::runtime::DEFAULT_SPIN_BEFORE_PARK_US),
        rows_in: produced.events_in,
        rows_out: consumed.rows_out,
        matching: produced.expected_out,
        batches_completed: produced.completed,
        batches_not_completed: produced.not_completed,
        deliveries: consumed.deliveries,
        rows_per_sec: if elapsed > 0.0 {
            produced.events_in as f64 / elapsed
        } else {
            0.0
        },
        p50_us: histogram.value_at_quantile(0.50) as f64 / 1000.0,
        p99_us: histogram.value_at_quantile(0.99) as f64 / 1000.0,
        max_us: histogram.max() as f64 / 1000.0,
        latency_method: "every output row of a batch sent after a warm-up of min(1 s, a quarter of the run): receive time − its input batch's submit time (rows matched to batches by order on one shard)",
        tail: None,
        rss_bytes: peak_rss_bytes(),
    };
    let mut extra = Map::new();
    extra.insert("query".into(), json!(query.name));
    extra.insert("events_generated".into(), json!(settings.events));
    extra.insert(
        "generate_s".into(),
        json!((generate_s * 1000.0).floor() / 1000.0),
    );
    extra.insert(
        "events_per_sec_per_shard".into(),
        json!(result.rows_per_sec.floor()),
    );
    extra.insert(
        "events".into(),
        json!("bid events of the nexmark crate's generator (base time pinned), replayed in a cycle; rows_in counts the bids of completed batches, matching the reference's output rows for them"),
    );
    Ok((result, extra))
}

async fn measure(
    deployed: &Deployed,
    settings: &BenchSettings,
    prepared: &[Prepared],
) -> anyhow::Result<(Produced, Consumed)> {
    let batches: Vec<RecordBatch> = prepared.iter().map(|p| p.batch.clone()).collect();
    let mut consumer = deployed.consumer(&settings.query).await?;
    let mut producer = deployed
        .producer(
            BID_INGESTOR,
            &gen::bid_schema(),
            settings.window,
            credit_bytes(&batches, settings.window),
        )
        .await?;
    let shared = Shared {
        target: Cell::new(None),
        sent: RefCell::new(VecDeque::new()),
        measure_from_ns: AtomicI64::new(0),
    };
    let produce = async {
        let outcome = produce(settings, prepared, &mut producer, &shared).await;
        shared.target.set(Some(match &outcome {
            Ok(p) => (p.expected_out, Instant::now() + TAIL_WAIT),
            Err(_) => (0, Instant::now()),
        }));
        outcome
    };
    let (produced, consumed) = tokio::join!(produce, consume(&mut consumer, &shared));
    producer.close().await;
    consumer.close().await;
    Ok((produced?, consumed?))
}

async fn produce(
    settings: &BenchSettings,
    prepared: &[Prepared],
    producer: &mut InProcessProducer,
    shared: &Shared,
) -> anyhow::Result<Produced> {
    let mut produced = Produced::default();
    let mut pending: HashMap<u64, usize> = HashMap::with_capacity(settings.window as usize * 2);
    let duration = Duration::from_secs_f64(settings.seconds);
    let warmup = LATENCY_WARMUP.min(duration / 4);
    let start = Instant::now();
    shared
        .measure_from_ns
        .store(now_ns() + warmup.as_nanos() as i64, Ordering::Relaxed);
    let mut submitted: u64 = 0;
    let mut expected_end: u64 = 0;
    while start.elapsed() < duration {
        while pending.len() >= settings.window as usize {
            let (seq, outcome) = outcome_within_wait(producer.next_outcome()).await?;
            account(&mut produced, &mut pending, prepared, seq, outcome);
        }
        let index = (submitted % prepared.len() as u64) as usize;
        let sent_ns = now_ns();
        let seq = producer
            .submit(prepared[index].batch.clone())
            .await
            .context("in-process producer submit")?;
        expected_end += prepared[index].expected_rows;
        shared.sent.borrow_mut().push_back((expected_end, sent_ns));
        pending.insert(seq, index);
        submitted += 1;
    }
    while !pending.is_empty() {
        let (seq, outcome) = outcome_within_wait(producer.next_outcome()).await?;
        account(&mut produced, &mut pending, prepared, seq, outcome);
    }
    produced.elapsed = start.elapsed();
    Ok(produced)
}

fn account(
    produced: &mut Produced,
    pending: &mut HashMap<u64, usize>,
    prepared: &[Prepared],
    seq: u64,
    outcome: Outcome,
) {
    let Some(index) = pending.remove(&seq) else {
        return;
    };
    if outcome == Outcome::Completed {
        produced.completed += 1;
        produced.events_in += prepared[index].batch.num_rows() as u64;
        produced.expected_out += prepared[index].expected_rows;
    } else {
        produced.not_completed += 1;
        if produced.first_failure.is_none() {
            produced.first_failure = Some(format!("batch {seq}: {outcome:?}"));
        }
    }
}

async fn consume(consumer: &mut InProcessConsumer, shared: &Shared) -> anyhow::Result<Consumed> {
    let mut histogram = Histogram::<u64>::new_with_bounds(1, HIST_MAX_NS, 3)
        .map_err(|e| anyhow!("cannot create the latency histogram: {e}"))?;
    let mut rows_out: u64 = 0;
    let mut deliveries: u64 = 0;
    let mut reached_at: Option<Instant> = None;
    loop {
        if stop_now(&shared.target, rows_out, &mut reached_at) {
            break;
        }
        let Ok(delivery) = tokio::time::timeout(POLL_WAIT, consumer.next()).await else {
            continue;
        };
        let Some((seq, batch)) = delivery else {
            break;
        };
        let received_ns = now_ns();
        deliveries += 1;
        let rows = batch.num_rows() as u64;
        record_latency(&mut histogram, shared, rows_out, rows, received_ns)?;
        rows_out += rows;
        consumer.ack(seq).await.context("in-process consumer ack")?;
    }
    Ok(Consumed {
        rows_out,
        deliveries,
        histogram,
    })
}

/// Records the latency of output rows `first .. first + rows`: each run of them that came
/// from one input batch with one `record_n`.
fn record_latency(
    histogram: &mut Histogram<u64>,
    shared: &Shared,
    first: u64,
    rows: u64,
    received_ns: i64,
) -> anyhow::Result<()> {
    let measure_from = shared.measure_from_ns.load(Ordering::Relaxed);
    let mut sent = shared.sent.borrow_mut();
    let mut at = first;
    let end = first + rows;
    while at < end {
        // Batches whose rows all arrived before `at` (or that had none) are done.
        while sent.front().is_some_and(|(batch_end, _)| *batch_end <= at) {
            sent.pop_front();
        }
        let Some(&(batch_end, sent_ns)) = sent.front() else {
            // More rows than the submitted batches explain: the count check reports it.
            return Ok(());
        };
        let run = batch_end.min(end) - at;
        if sent_ns >= measure_from {
            let latency = (received_ns - sent_ns).clamp(1, HIST_MAX_NS as i64) as u64;
            histogram
                .record_n(latency, run)
                .map_err(|e| anyhow!("cannot record a latency: {e}"))?;
        }
        at += run;
    }
    Ok(())
}
