//! The end-to-end scenarios: an [`EmbeddedNode`] in a fresh temporary data directory runs
//! [`GRAPH`] (CLIENT PRODUCER ingestor → junction with a `contains` filter and an `upper` map →
//! CLIENT CONSUMER emitter); a producer submits pre-generated batches for the requested time,
//! a consumer in the same process reads and acknowledges what comes out.
//!
//! - `producer-filter-map`: producer and consumer are the Rust client library over loopback TCP
//!   (the session protocol, Arrow IPC both ways).
//! - `producer-filter-map-inproc`: the same graph with [`InProcessProducer`] and
//!   [`InProcessConsumer`] (batches by reference through the shard's command queue).
//!
//! Latency is per row: the delivery's receive time minus the row's `sent_ns` (set for a whole
//! batch at its submit). Every received row is recorded: rows of one delivery that share a
//! `sent_ns` are recorded with one `record_n`.

use std::cell::Cell;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use arrow_array::{Array, Int64Array, RecordBatch};
use hdrhistogram::Histogram;
use nervix::embedded::{scratch_data_dir, EmbeddedConfig, EmbeddedNode};
use nervix::net::client::{Consumer, ConsumerOptions, Producer, ProducerOptions, Session};
use nervix::net::session::frame::{ConsumerRefusal, OpenRefusal, Outcome};
use nervix::runtime::in_process::{InProcessConsumer, InProcessError, InProcessProducer};

use crate::gen::{self, RingBatch, NEEDLE};
use crate::report::{peak_rss_bytes, LatencyTail, RunResult, SLOT_MS, SLOW_ROW_US};

/// The scenarios, as `nervix-bench list` prints them.
pub const SCENARIOS: [(&str, &str); 2] = [
    (
        "producer-filter-map",
        "Rust client over loopback → CLIENT PRODUCER → junction contains-filter + upper-map → CLIENT CONSUMER",
    ),
    (
        "producer-filter-map-inproc",
        "the same graph with in-process producer and consumer (no socket, no IPC)",
    ),
];

/// How the scenario's clients reach the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Loopback,
    InProcess,
}

impl Transport {
    pub fn scenario(self) -> &'static str {
        match self {
            Transport::Loopback => SCENARIOS[0].0,
            Transport::InProcess => SCENARIOS[1].0,
        }
    }
}

/// A run's settings.
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub seconds: f64,
    pub shards: NonZeroUsize,
    pub rate: Option<u64>,
    pub batch_rows: usize,
    /// Outstanding batches at full speed (also the producer's credit in batches).
    pub window: u32,
    pub pin: bool,
    /// The shards' CPUs when pinned (`None` = the node's default placement).
    pub shard_cpus: Option<Vec<usize>>,
    /// How long a pinned shard spins before it parks, in µs (0 = off).
    pub shard_spin_us: u64,
    pub client_threads: usize,
}

/// The graph the producer scenarios run.
pub fn graph() -> String {
    graph_with(
        "CREATE CLIENT PRODUCER INGESTOR bench_in
  FROM SCHEMA bench_row
    MODE ACK PARALLEL MAX 64 ACK TIMEOUT 30s RETRY POLICY BACKOFF 1ms MAX 100ms
    ON QUIESCE SUSPEND",
    )
}

/// The bench graph with `ingestor_head` (statements before it, then the ingestor's head and
/// source body up to its routes) feeding `rows_in`: junction `contains` filter + `upper` map →
/// `rows_out` → the CLIENT CONSUMER emitter `bench_out`.
pub fn graph_with(ingestor_head: &str) -> String {
    format!(
        "
CREATE DOMAIN bench;
USE bench;
CREATE SCHEMA bench_row (id I64, sent_ns I64, tenant STRING, text STRING);
CREATE RELAY rows_in SCHEMA bench_row UNBRANCHED CAPACITY 64;
CREATE RELAY rows_out SCHEMA bench_row UNBRANCHED CAPACITY 64;
{ingestor_head}
  TO rows_in
    INHERIT ALL
    UNBRANCHED
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE JUNCTION filter_map
  FROM rows_in
  FILTER WHERE contains(input.text, '{NEEDLE}')
  UNBRANCHED
  TO rows_out
    INHERIT ALL
    SET text = upper(input.text)
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
CREATE CLIENT CONSUMER EMITTER bench_out
  FROM rows_out
  TO SCHEMA bench_row
    MODE ACK PARALLEL MAX 64 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 1ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
"
    )
}

const DOMAIN: &str = "bench";
const INGESTOR: &str = "bench_in";
const EMITTER: &str = "bench_out";
/// Rows per client batch at most (DESIGN §9).
const MAX_BATCH_ROWS: usize = 65_536;
/// Batches pre-generated before timing; submissions cycle through them.
const RING_BATCHES: usize = 32;
/// Consumer credit, in deliveries.
const CONSUMER_CREDIT: u32 = 64;
/// How long opens are retried while the data plane deploys the graph.
const OPEN_WAIT: Duration = Duration::from_secs(10);
/// How long the consumer may take to receive the last matching rows after the last outcome.
const TAIL_WAIT: Duration = Duration::from_secs(30);
/// After the expected rows arrived, how long to wait for rows that should not come.
const EXTRA_WAIT: Duration = Duration::from_millis(200);
/// How long a graceful stop may take.
const DRAIN_MS: u64 = 2_000;
/// How long the bench waits for one batch's outcome: twice the graphs' ACK TIMEOUT (30 s),
/// so only a node that stopped answering reaches it — and the run then fails with a reason
/// instead of waiting forever.
pub(crate) const OUTCOME_WAIT: Duration = Duration::from_secs(60);
/// Histogram bounds: 1 ns to 60 s, 3 significant digits.
const HIST_MAX_NS: u64 = 60_000_000_000;

/// Latency is recorded only for rows sent after this warm-up (the first allocations and page
/// faults of a fresh process are not the steady state a p99 describes); at most a quarter of
/// the run. Throughput counts the whole run.
const LATENCY_WARMUP: Duration = Duration::from_secs(1);

/// `now_ns()` from which sent rows count towards the latency histogram.
static MEASURE_FROM_NS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Nanoseconds since the first call in this process (a monotonic clock both ends share).
pub(crate) fn now_ns() -> i64 {
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    ANCHOR.get_or_init(Instant::now).elapsed().as_nanos() as i64
}

/// The producer side of a transport.
trait Submit {
    async fn submit(&mut self, batch: RecordBatch) -> anyhow::Result<u64>;
    /// The next terminal outcome; called only with batches outstanding.
    async fn next_outcome(&mut self) -> anyhow::Result<(u64, Outcome)>;
}

/// The consumer side of a transport.
trait Receive {
    async fn next(&mut self) -> anyhow::Result<Option<(u64, RecordBatch)>>;
    async fn ack(&mut self, seq: u64) -> anyhow::Result<()>;
}

impl Submit for Producer {
    async fn submit(&mut self, batch: RecordBatch) -> anyhow::Result<u64> {
        Producer::submit(self, &batch)
            .await
            .context("client producer submit")
    }
    async fn next_outcome(&mut self) -> anyhow::Result<(u64, Outcome)> {
        Producer::next_outcome(self)
            .await
            .context("client producer outcome")?
            .ok_or_else(|| anyhow!("client producer: no outcome although batches are outstanding"))
    }
}

impl Receive for Consumer {
    async fn next(&mut self) -> anyhow::Result<Option<(u64, RecordBatch)>> {
        Ok(Consumer::next(self)
            .await
            .context("client consumer")?
            .map(|d| (d.seq, d.batch)))
    }
    async fn ack(&mut self, seq: u64) -> anyhow::Result<()> {
        Consumer::ack(self, seq)
            .await
            .context("client consumer ack")
    }
}

impl Submit for InProcessProducer {
    async fn submit(&mut self, batch: RecordBatch) -> anyhow::Result<u64> {
        InProcessProducer::submit(self, batch)
            .await
            .context("in-process producer submit")
    }
    async fn next_outcome(&mut self) -> anyhow::Result<(u64, Outcome)> {
        InProcessProducer::next_outcome(self)
            .await
            .context("in-process producer outcome")
    }
}

impl Receive for InProcessConsumer {
    async fn next(&mut self) -> anyhow::Result<Option<(u64, RecordBatch)>> {
        Ok(InProcessConsumer::next(self).await)
    }
    async fn ack(&mut self, seq: u64) -> anyhow::Result<()> {
        InProcessConsumer::ack(self, seq)
            .await
            .context("in-process consumer ack")
    }
}

/// What the producer side counted.
#[derive(Debug, Default)]
struct Produced {
    rows_in: u64,
    matching: u64,
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
    slow: SlowRows,
}

/// The most [`SLOT_MS`] slots a run places slow rows in (an hour); later rows count in the
/// last slot.
const MAX_SLOTS: usize = 72_000;

/// Where in the measured span the rows over [`SLOW_ROW_US`] were received, by [`SLOT_MS`] slot.
#[derive(Default)]
struct SlowRows {
    rows: u64,
    /// Per slot, whether a slow row was received in it; as long as the latest slot any
    /// measured row was received in.
    slots: Vec<bool>,
}

impl SlowRows {
    fn record(&mut self, received_after_ns: i64, latency_ns: u64, rows: u64) {
        let slot = usize::try_from(received_after_ns / (SLOT_MS as i64 * 1_000_000))
            .unwrap_or(0)
            .min(MAX_SLOTS - 1);
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, false);
        }
        if latency_ns > SLOW_ROW_US * 1_000 {
            self.rows += rows;
            self.slots[slot] = true;
        }
    }

    fn tail(&self, histogram: &Histogram<u64>) -> LatencyTail {
        LatencyTail {
            p90_us: histogram.value_at_quantile(0.90) as f64 / 1000.0,
            p999_us: histogram.value_at_quantile(0.999) as f64 / 1000.0,
            rows_over_1ms: self.rows,
            slots_over_1ms: self.slots.iter().filter(|slow| **slow).count() as u64,
            slots: self.slots.len() as u64,
        }
    }
}

/// Shared between the producer and consumer futures of one task.
struct Stop {
    /// Set when the producer is done: the matching rows to wait for, and until when.
    target: Cell<Option<(u64, Instant)>>,
}

/// Runs one scenario on the current tokio runtime.
pub async fn run(transport: Transport, settings: &RunSettings) -> anyhow::Result<RunResult> {
    if settings.batch_rows == 0 || settings.batch_rows > MAX_BATCH_ROWS {
        bail!("--batch-rows must be 1 to {MAX_BATCH_ROWS} (rows per client batch, DESIGN §9)");
    }
    if !(settings.seconds > 0.0 && settings.seconds.is_finite()) {
        bail!("--seconds must be a positive number");
    }
    if settings.rate == Some(0) {
        bail!("--rate must be at least 1 row/s");
    }
    if settings.window == 0 {
        bail!("--window must be at least 1");
    }
    let ring = gen::ring(RING_BATCHES, settings.batch_rows);
    let data_dir = scratch_data_dir(&format!("bench-{}", transport.scenario()));
    let outcome = run_in(transport, settings, &ring, &data_dir).await;
    let _ = std::fs::remove_dir_all(&data_dir);
    outcome
}

async fn run_in(
    transport: Transport,
    settings: &RunSettings,
    ring: &[RingBatch],
    data_dir: &Path,
) -> anyhow::Result<RunResult> {
    let mut node = EmbeddedNode::start(EmbeddedConfig {
        pin: settings.pin,
        shard_tuning: nervix::runtime::ShardTuning {
            cpus: settings.shard_cpus.clone(),
            spin_before_park_us: settings.shard_spin_us,
            ..Default::default()
        },
        ..EmbeddedConfig::loopback(data_dir.to_path_buf(), settings.shards)
    })
    .await
    .with_context(|| format!("cannot start an embedded node in {}", data_dir.display()))?;
    let measured = match node.run(&graph()).await {
        Ok(_) => drive(transport, settings, ring, &node).await,
        Err(refusal) => Err(anyhow!("the bench graph was refused: {refusal}")),
    };
    node.shutdown(DRAIN_MS).await;
    let (produced, consumed) = measured?;
    let histogram = &consumed.histogram;
    let elapsed = produced.elapsed.as_secs_f64();
    let result = RunResult {
        scenario: transport.scenario().to_string(),
        shards: settings.shards.get(),
        seconds: settings.seconds,
        elapsed_s: elapsed,
        batch_rows: settings.batch_rows,
        rate: settings.rate,
        window: settings.window,
        client_threads: settings.client_threads,
        shard_spin_us: nervix::runtime::applied_spin_before_park_us(settings.pin, settings.shard_spin_us),
        rows_in: produced.rows_in,
        rows_out: consumed.rows_out,
        matching: produced.matching,
        batches_completed: produced.completed,
        batches_not_completed: produced.not_completed,
        deliveries: consumed.deliveries,
        rows_per_sec: if elapsed > 0.0 {
            produced.rows_in as f64 / elapsed
        } else {
            0.0
        },
        p50_us: histogram.value_at_quantile(0.50) as f64 / 1000.0,
        p99_us: histogram.value_at_quantile(0.99) as f64 / 1000.0,
        max_us: histogram.max() as f64 / 1000.0,
        latency_method: "every row sent after a warm-up of min(1 s, a quarter of the run): receive time − sent_ns, record_n per run of equal sent_ns",
        tail: Some(consumed.slow.tail(histogram)),
        rss_bytes: peak_rss_bytes(),
    };
    if let Some(failure) = produced.first_failure {
        eprintln!(
            "{} batches ended other than Completed; first: {failure}",
            produced.not_completed
        );
    }
    Ok(result)
}

async fn drive(
    transport: Transport,
    settings: &RunSettings,
    ring: &[RingBatch],
    node: &EmbeddedNode,
) -> anyhow::Result<(Produced, Consumed)> {
    let data_plane = node.data_plane.clone();
    let credit_bytes = credit_bytes(ring, settings.window);
    match transport {
        Transport::Loopback => {
            let addr = data_plane.session_addr();
            drop(data_plane);
            let session = Session::connect(addr)
                .await
                .with_context(|| format!("cannot connect to the session port {addr}"))?;
            let mut consumer = retry_open("consumer", || {
                session.open_consumer(ConsumerOptions {
                    domain: DOMAIN.into(),
                    emitter: EMITTER.into(),
                    credit_batches: CONSUMER_CREDIT,
                })
            })
            .await?;
            let mut producer = retry_open("producer", || {
                session.open_producer(ProducerOptions {
                    domain: DOMAIN.into(),
                    ingestor: INGESTOR.into(),
                    expected_fields: gen::expected_fields(),
                    credit_batches: settings.window,
                    credit_bytes,
                })
            })
            .await?;
            let measured = measure(settings, ring, &mut producer, &mut consumer).await;
            let _ = tokio::time::timeout(Duration::from_secs(2), producer.close()).await;
            let _ = tokio::time::timeout(Duration::from_secs(2), consumer.close()).await;
            drop(session);
            measured
        }
        Transport::InProcess => {
            let mut consumer = retry_open("in-process consumer", || {
                InProcessConsumer::open(data_plane.clone(), DOMAIN, EMITTER, CONSUMER_CREDIT)
            })
            .await?;
            let mut producer = retry_open("in-process producer", || {
                InProcessProducer::open(
                    data_plane.clone(),
                    DOMAIN,
                    INGESTOR,
                    gen::expected_fields(),
                    settings.window,
                    credit_bytes,
                )
            })
            .await?;
            drop(data_plane);
            let measured = measure(settings, ring, &mut producer, &mut consumer).await;
            producer.close().await;
            consumer.close().await;
            measured
        }
    }
}

/// Producer credit in bytes: room for the window of the largest ring batch, twice over,
/// within the engine's limit.
fn credit_bytes(ring: &[RingBatch], window: u32) -> u64 {
    let largest = ring
        .iter()
        .map(|b| {
            (b.id.get_array_memory_size()
                + b.tenant.get_array_memory_size()
                + b.text.get_array_memory_size()
                + b.rows * 8) as u64
        })
        .max()
        .unwrap_or(1 << 20);
    (largest * 2 * window as u64).clamp(1 << 20, 256 << 20)
}

/// Whether an open failure may go away once the graph is deployed.
pub(crate) trait Transient {
    fn transient(&self) -> bool;
}

impl Transient for nervix::net::client::ClientError {
    fn transient(&self) -> bool {
        use nervix::net::client::ClientError;
        matches!(
            self,
            ClientError::Refused(
                OpenRefusal::DomainStopped
                    | OpenRefusal::DomainNotFound
                    | OpenRefusal::IngestorNotFound
                    | OpenRefusal::IngestorNotRunning
            ) | ClientError::ConsumerRefused(
                ConsumerRefusal::DomainStopped
                    | ConsumerRefusal::DomainNotFound
                    | ConsumerRefusal::EmitterNotFound
            )
        )
    }
}

impl Transient for InProcessError {
    fn transient(&self) -> bool {
        matches!(
            self,
            InProcessError::Refused(
                OpenRefusal::DomainStopped
                    | OpenRefusal::DomainNotFound
                    | OpenRefusal::IngestorNotFound
                    | OpenRefusal::IngestorNotRunning
            ) | InProcessError::ConsumerRefused(
                ConsumerRefusal::DomainStopped
                    | ConsumerRefusal::DomainNotFound
                    | ConsumerRefusal::EmitterNotFound
            )
        )
    }
}

/// The next outcome a producer reports, or an error once [`OUTCOME_WAIT`] passed without one.
pub(crate) async fn outcome_within_wait<T, E: Into<anyhow::Error>>(
    outcome: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(OUTCOME_WAIT, outcome).await {
        Ok(answered) => answered.map_err(Into::into),
        Err(_) => Err(anyhow!(
            "no batch outcome within {} s although batches are outstanding: the node stopped \
             answering",
            OUTCOME_WAIT.as_secs()
        )),
    }
}

pub(crate) async fn retry_open<T, E, F, Fut>(what: &str, mut open: F) -> anyhow::Result<T>
where
    E: Transient + std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + OPEN_WAIT;
    loop {
        match open().await {
            Ok(opened) => return Ok(opened),
            Err(error) if error.transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => bail!("cannot open the {what}: {error:?}"),
        }
    }
}

async fn measure(
    settings: &RunSettings,
    ring: &[RingBatch],
    producer: &mut impl Submit,
    consumer: &mut impl Receive,
) -> anyhow::Result<(Produced, Consumed)> {
    let stop = Stop {
        target: Cell::new(None),
    };
    let (produced, consumed) = tokio::join!(
        produce(settings, ring, producer, &stop),
        consume(consumer, &stop)
    );
    let produced = produced?;
    let consumed = consumed?;
    Ok((produced, consumed))
}

async fn produce(
    settings: &RunSettings,
    ring: &[RingBatch],
    producer: &mut impl Submit,
    stop: &Stop,
) -> anyhow::Result<Produced> {
    let outcome = produce_inner(settings, ring, producer).await;
    // Whatever happened, let the consumer finish: on an error it only waits briefly.
    match &outcome {
        Ok(p) => stop
            .target
            .set(Some((p.matching, Instant::now() + TAIL_WAIT))),
        Err(_) => stop.target.set(Some((0, Instant::now()))),
    }
    outcome
}

async fn produce_inner(
    settings: &RunSettings,
    ring: &[RingBatch],
    producer: &mut impl Submit,
) -> anyhow::Result<Produced> {
    let mut produced = Produced::default();
    let mut pending: HashMap<u64, usize> = HashMap::with_capacity(settings.window as usize * 2);
    let interval = settings
        .rate
        .map(|rate| Duration::from_secs_f64(settings.batch_rows as f64 / rate as f64));
    let duration = Duration::from_secs_f64(settings.seconds);
    let mut pacer = crate::pacer::Pacer::new().context("cannot create the pacer's timer")?;
    let start = Instant::now();
    let warmup = LATENCY_WARMUP.min(duration / 4);
    MEASURE_FROM_NS.store(
        now_ns() + warmup.as_nanos() as i64,
        std::sync::atomic::Ordering::Relaxed,
    );
    let mut submitted: u64 = 0;
    while start.elapsed() < duration {
        if let Some(interval) = interval {
            let due = start + interval.mul_f64(submitted as f64);
            pacer
                .wait_until(due)
                .await
                .context("the pacer's timer failed")?;
        }
        // Read outcomes so at most a window of batches is without one.
        while pending.len() >= settings.window as usize {
            let (seq, outcome) = outcome_within_wait(producer.next_outcome()).await?;
            account(&mut produced, &mut pending, ring, seq, outcome);
        }
        let index = (submitted % ring.len() as u64) as usize;
        let batch = ring[index].with_sent_ns(now_ns())?;
        let seq = producer.submit(batch).await?;
        pending.insert(seq, index);
        submitted += 1;
    }
    while !pending.is_empty() {
        let (seq, outcome) = outcome_within_wait(producer.next_outcome()).await?;
        account(&mut produced, &mut pending, ring, seq, outcome);
    }
    produced.elapsed = start.elapsed();
    Ok(produced)
}

/// Counts one terminal outcome against its batch.
fn account(
    produced: &mut Produced,
    pending: &mut HashMap<u64, usize>,
    ring: &[RingBatch],
    seq: u64,
    outcome: Outcome,
) {
    let Some(index) = pending.remove(&seq) else {
        return;
    };
    let batch = &ring[index];
    if outcome == Outcome::Completed {
        produced.completed += 1;
        produced.rows_in += batch.rows as u64;
        produced.matching += batch.matching as u64;
    } else {
        produced.not_completed += 1;
        if produced.first_failure.is_none() {
            produced.first_failure = Some(format!("batch {seq}: {outcome:?}"));
        }
    }
}

async fn consume(consumer: &mut impl Receive, stop: &Stop) -> anyhow::Result<Consumed> {
    let mut histogram = Histogram::<u64>::new_with_bounds(1, HIST_MAX_NS, 3)
        .map_err(|e| anyhow!("cannot create the latency histogram: {e}"))?;
    let mut slow = SlowRows::default();
    let mut rows_out: u64 = 0;
    let mut deliveries: u64 = 0;
    let mut reached_at: Option<Instant> = None;
    loop {
        if let Some((target, deadline)) = stop.target.get() {
            let now = Instant::now();
            if rows_out >= target {
                let reached = *reached_at.get_or_insert(now);
                if now >= reached + EXTRA_WAIT {
                    break;
                }
            } else if now >= deadline {
                break;
            }
        }
        let delivery = match tokio::time::timeout(Duration::from_millis(50), consumer.next()).await
        {
            Err(_) => continue,
            Ok(result) => result?,
        };
        let Some((seq, batch)) = delivery else {
            break;
        };
        let received = now_ns();
        deliveries += 1;
        rows_out += batch.num_rows() as u64;
        record_latency(&mut histogram, &mut slow, &batch, received)?;
        consumer.ack(seq).await?;
    }
    Ok(Consumed {
        rows_out,
        deliveries,
        histogram,
        slow,
    })
}

/// Records every row's latency: runs of equal `sent_ns` with one `record_n`.
fn record_latency(
    histogram: &mut Histogram<u64>,
    slow: &mut SlowRows,
    batch: &RecordBatch,
    received_ns: i64,
) -> anyhow::Result<()> {
    let column = batch
        .column_by_name("sent_ns")
        .ok_or_else(|| anyhow!("a delivery has no `sent_ns` column"))?;
    let sent = column
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| anyhow!("a delivery's `sent_ns` is not I64"))?;
    let values = sent.values();
    let measure_from = MEASURE_FROM_NS.load(std::sync::atomic::Ordering::Relaxed);
    let mut i = 0;
    while i < values.len() {
        let value = values[i];
        let mut j = i + 1;
        while j < values.len() && values[j] == value {
            j += 1;
        }
        if value < measure_from {
            i = j;
            continue;
        }
        let latency = (received_ns - value).clamp(1, HIST_MAX_NS as i64) as u64;
        slow.record(received_ns - measure_from, latency, (j - i) as u64);
        histogram
            .record_n(latency, (j - i) as u64)
            .map_err(|e| anyhow!("cannot record a latency: {e}"))?;
        i = j;
    }
    Ok(())
}

#[cfg(test)]
mod slow_rows_tests {
    use super::{SlowRows, MAX_SLOTS};

    const MS: i64 = 1_000_000;

    #[test]
    fn slow_rows_land_in_the_slot_of_their_receive_time() {
        let histogram = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
            .expect("histogram");
        let mut slow = SlowRows::default();
        slow.record(0, 500_000, 10); // fast, slot 0
        slow.record(49 * MS, 1_000_001, 3); // slow, slot 0
        slow.record(120 * MS, 1_000_000, 4); // exactly 1 ms is not over it, slot 2
        slow.record(260 * MS, 7_000_000, 5); // slow, slot 5
        let tail = slow.tail(&histogram);
        assert_eq!(tail.rows_over_1ms, 8);
        assert_eq!(tail.slots_over_1ms, 2);
        assert_eq!(tail.slots, 6, "slots 0..=5 of the span");
        // A row past the bound counts in the last slot instead of growing the list.
        slow.record(i64::MAX, 2_000_000, 1);
        let tail = slow.tail(&histogram);
        assert_eq!(tail.slots, MAX_SLOTS as u64);
        assert_eq!(tail.slots_over_1ms, 3);
    }
}
