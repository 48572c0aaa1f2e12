//! `kafka-filter-map` (DESIGN §10): JSON records of [`RECORD_BYTES`] bytes in a Kafka topic
//! `in` of [`PARTITIONS`] partitions → KAFKA TOPIC INGESTOR (WIRE JSON codec) with `FILTER WHERE
//! contains(input.value, 'x')`, `SET value = upper(input.value)`, `FLUSH EACH 10ms MAX BATCH
//! SIZE 8MiB` → relay → KAFKA TOPIC EMITTER (same JSON codec) → topic `out`, on an
//! [`EmbeddedNode`] (one shard by default). The broker is librdkafka's mock cluster in a process
//! of its own ([`broker`]) so its CPU is measured apart from the node's ([`cpu`]).
//!
//! Phases: the broker starts; the bench produces the input (fixed seed, about half the values
//! contain `x`) and waits for every broker acknowledgement — none of that is timed; the node
//! starts and the graph deploys; an output watcher thread sums the `out` topic's watermarks
//! every [`WATCH_INTERVAL`] until they reach the matching count (then waits [`EXTRA_WAIT`] for
//! records that should not come).
//!
//! Timing: the headline window runs from the first output record the watcher sees to the poll
//! that sees the last matching one; records/s = input records / that window. The time from
//! START to the first output is reported apart: it is dominated by the consumer group's first
//! join, which librdkafka's mock coordinator delays by its `group.initial.rebalance.delay.ms`
//! (3 s, as a real broker's default), a constant that says nothing about throughput. The
//! window's error is one watch interval at each end. CPU is sampled at the same two instants.
//!
//! Latency: none is reported (p50/p99/max are 0). The input is produced before timing, so a
//! produce→output latency would measure how long records waited in the topic, not the
//! pipeline.
//!
//! The check is count parity: the records appended to `out` (sum over partitions of the high
//! watermark; the broker creates the topic empty for each run) equal the matching records
//! produced — duplicates from a retry fail it as loudly as losses. Not high − low: the mock
//! broker deletes a partition's oldest records beyond 5 MiB, and librdkafka's sticky
//! partitioner (keyless records) can put more than that into one `out` partition (seen: 39,960
//! records in one of 16, its first 7,250 deleted), which then looked like lost output.

pub mod broker;

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use nervix::embedded::{scratch_data_dir, EmbeddedConfig, EmbeddedNode};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientConfig, ClientContext};
use serde_json::{json, Map, Value};

use crate::cpu::{self, Part, Threads};
use crate::gen::{XorShift, SEED};
use crate::report::{peak_rss_bytes, RunResult};
use broker::{Broker, BrokerHost};

pub const SCENARIO: (&str, &str) = (
    "kafka-filter-map",
    "Kafka topic of 128 B JSON records (16 partitions) → KAFKA TOPIC INGESTOR contains-filter + upper-map → KAFKA TOPIC EMITTER → topic; broker in its own process",
);

/// Bytes per JSON record (DESIGN §10).
pub const RECORD_BYTES: usize = 128;
/// Partitions of the input and output topics (the issue's bar).
pub const PARTITIONS: i32 = 16;
/// What the filter looks for in `value`.
pub const NEEDLE: char = 'x';
/// The input is sized for `--seconds` at this rate (1.5× the 1 M records/s target, so a run
/// that meets the target is not cut short by its input).
pub const SIZING_RECORDS_PER_SEC: f64 = 1_500_000.0;
/// Most input records: librdkafka's mock cluster keeps about 5 MiB of log per partition (older
/// segments are deleted: 5 MiB and 100,000 records are its per-partition limits), so more
/// input than 16 × ~30,000 records of 128 B is partly gone before the consumer reads it — the
/// run would then wait for output that cannot come. 30,000 records of ~145 B (record plus
/// batch overhead) per partition stay under it.
pub const MAX_RECORDS: u64 = 30_000 * PARTITIONS as u64;
/// Most input records in a debug build (CI runs every scenario for a second in debug; a debug
/// build measures nothing anyway).
pub const DEBUG_MAX_RECORDS: u64 = 100_000;
/// Fewest input records.
pub const MIN_RECORDS: u64 = 10_000;
/// Consecutive input records produced to one partition (so librdkafka's batches stay whole).
const RECORDS_PER_PARTITION_RUN: u64 = 1_024;
/// How often the watcher sums the output topic's watermarks.
const WATCH_INTERVAL: Duration = Duration::from_millis(10);
/// How long a watermark or metadata request may take.
const BROKER_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long from START the first output record may take (the group join is ~3 s).
const FIRST_OUTPUT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the output may stand still before the run gives up.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// After the expected records arrived, how long to wait for records that should not come.
const EXTRA_WAIT: Duration = Duration::from_millis(300);
/// How long producing the input may wait for the broker's last acknowledgements.
const PRODUCE_FLUSH_TIMEOUT: Duration = Duration::from_secs(120);
const DRAIN_MS: u64 = 2_000;
/// The ingestor's ACK PARALLEL window, in records.
pub const ACK_WINDOW_RECORDS: u32 = 65_536;
/// The emitter's ACK PARALLEL window, in frames.
pub const EMITTER_WINDOW_FRAMES: u32 = 64;

/// How the ingestor acknowledges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngestMode {
    /// `MODE ACK PARALLEL MAX 65536 BATCH TIMEOUT 10ms`: offsets committed after the emitter's
    /// broker acknowledged (the headline).
    AckParallel,
    /// `MODE NO ACK`: the consumer's auto-commit.
    NoAck,
}

impl IngestMode {
    fn nspl(self) -> String {
        match self {
            IngestMode::AckParallel => format!(
                "MODE ACK PARALLEL MAX {ACK_WINDOW_RECORDS} BATCH TIMEOUT 10ms ACK TIMEOUT 60s\n    \
                 RETRY POLICY BACKOFF 10ms MAX 100ms"
            ),
            IngestMode::NoAck => "MODE NO ACK".to_string(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            IngestMode::AckParallel => "ack-parallel",
            IngestMode::NoAck => "no-ack",
        }
    }
}

/// A run's settings.
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    /// Sizes the input: `seconds` × [`SIZING_RECORDS_PER_SEC`] records (bounded).
    pub seconds: f64,
    pub shards: NonZeroUsize,
    /// Input records, instead of sizing by `seconds`.
    pub records: Option<u64>,
    pub mode: IngestMode,
    pub broker: BrokerHost,
    pub pin: bool,
    /// Pass [`CONSUMER_CONFIG`] / [`PRODUCER_CONFIG`] (true) or librdkafka's defaults plus
    /// `auto.offset.reset` only (false).
    pub tuned: bool,
}

impl KafkaSettings {
    /// The number of input records this run produces.
    pub fn input_records(&self) -> u64 {
        let sized = self
            .records
            .unwrap_or((self.seconds * SIZING_RECORDS_PER_SEC) as u64);
        let cap = if cfg!(debug_assertions) {
            DEBUG_MAX_RECORDS
        } else {
            MAX_RECORDS
        };
        sized.clamp(MIN_RECORDS, cap)
    }
}

/// What a run measured: the common result plus the Kafka-specific figures.
pub struct KafkaRun {
    pub result: RunResult,
    /// Extra JSON fields (CPU shares, phases, settings).
    pub extra: Map<String, Value>,
    /// Extra human lines under the table.
    pub lines: Vec<String>,
}

/// librdkafka settings of the ingestor's consumer client (`kafka_in`), and why:
/// - `fetch.wait.max.ms` 10 (default 500): an emptied partition is asked again soon, so the
///   last records are not held back half a second (matters for the end of the window);
/// - `max.partition.fetch.bytes` 4 MiB (default 1 MiB): fewer fetch round trips per partition;
/// - `queued.max.messages.kbytes` 256 MiB (default 64 MiB): room for the prefetch of 16
///   partitions at 4 MiB each, so the shard's polls rarely find the local queue empty.
pub const CONSUMER_CONFIG: &[(&str, &str)] = &[
    ("auto.offset.reset", "earliest"),
    ("fetch.wait.max.ms", "10"),
    ("max.partition.fetch.bytes", "4194304"),
    ("queued.max.messages.kbytes", "262144"),
];

/// librdkafka settings of the emitter's producer client (`kafka_out`), and why:
/// - `linger.ms` 5 (librdkafka's default, stated): batches fill for 5 ms at most;
/// - `batch.size` 1,000,000 bytes and `batch.num.messages` 100,000 (default 10,000): a batch is
///   bounded by bytes (~7,000 records of ~140 B), not by the message count;
/// - `queue.buffering.max.messages` 1,000,000 (default 100,000) and
///   `queue.buffering.max.kbytes` 1 GiB: 64 frames in flight of up to 8 MiB each can be
///   enqueued without `QueueFull` stalling the emitter;
/// - `compression.type` none: the mock broker's CPU should go to the protocol, not to codecs.
pub const PRODUCER_CONFIG: &[(&str, &str)] = &[
    ("linger.ms", "5"),
    ("batch.size", "1000000"),
    ("batch.num.messages", "100000"),
    ("queue.buffering.max.messages", "1000000"),
    ("queue.buffering.max.kbytes", "1048576"),
    ("compression.type", "none"),
];

fn config_nspl(bootstrap: &str, pairs: &[(&str, &str)]) -> String {
    let mut entries = vec![format!("'bootstrap.servers' = '{bootstrap}'")];
    entries.extend(pairs.iter().map(|(k, v)| format!("'{k}' = '{v}'")));
    format!("{{{}}}", entries.join(", "))
}

/// The bench graph against the broker at `bootstrap`, consuming in `group`.
pub fn graph(bootstrap: &str, group: &str, mode: IngestMode, tuned: bool) -> String {
    let untuned: &[(&str, &str)] = &[("auto.offset.reset", "earliest")];
    let (consumer, producer) = if tuned {
        (CONSUMER_CONFIG, PRODUCER_CONFIG)
    } else {
        (untuned, &[][..])
    };
    format!(
        "
CREATE DOMAIN bench;
USE bench;
CREATE SCHEMA rec (id I64, value STRING);
CREATE WIRE JSON SCHEMA rec_wire MODE STRICT (id integer, value string);
CREATE CODEC rec_codec FROM WIRE JSON SCHEMA rec_wire TO SCHEMA rec;
CREATE RELAY recs SCHEMA rec UNBRANCHED CAPACITY 64;
CREATE CLIENT kafka_in TYPE KAFKA
  CONFIG {consumer};
CREATE CLIENT kafka_out TYPE KAFKA
  CONFIG {producer};
CREATE KAFKA TOPIC INGESTOR bench_in
  FROM kafka_in
  TOPIC 'in'
  OFFSET BY CONSUMER GROUP '{group}'
  {mode}
  ON QUIESCE SUSPEND
  DECODE USING rec_codec
  FILTER WHERE contains(input.value, '{NEEDLE}')
  TO recs
    INHERIT ALL
    SET value = upper(input.value)
    UNBRANCHED
    FLUSH EACH 10ms MAX BATCH SIZE 8MiB
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE KAFKA TOPIC EMITTER bench_out
  FROM recs
  TO kafka_out TOPIC 'out'
    MODE ACK PARALLEL MAX {EMITTER_WINDOW_FRAMES} ACK TIMEOUT 60s
    RETRY POLICY BACKOFF 10ms MAX 100ms
    ENCODE USING rec_codec
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
",
        consumer = config_nspl(bootstrap, consumer),
        producer = config_nspl(bootstrap, producer),
        mode = mode.nspl(),
    )
}

const WORDS: [&str; 16] = [
    "alpha", "stream", "order", "queue", "delta", "packet", "signal", "ledger", "vector", "shard",
    "relay", "branch", "window", "join", "metric", "sink",
];

/// Writes record `id` into `out`: `{"id":<id>,"value":"<text>"}` of exactly [`RECORD_BYTES`]
/// bytes — words (none holds the needle) cut to 24–40 characters, the needle spliced in for
/// about half, then `.` padding. Returns whether the value contains the needle.
pub fn record(rng: &mut XorShift, id: u64, out: &mut String) -> bool {
    use std::fmt::Write;
    out.clear();
    let _ = write!(out, r#"{{"id":{id},"value":""#);
    let text_len = RECORD_BYTES - out.len() - 2;
    let start = out.len();
    let words_len = (24 + rng.below(17) as usize).min(text_len);
    while out.len() - start < words_len {
        out.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        out.push(' ');
    }
    out.truncate(start + words_len);
    let matches = rng.next_u64() & 1 == 0;
    if matches {
        let at = start + rng.below(words_len as u64) as usize;
        out.replace_range(at..at + 1, "x");
    }
    while out.len() - start < text_len {
        out.push('.');
    }
    out.push_str("\"}");
    matches
}

/// Counts the input producer's failed deliveries.
struct Deliveries {
    failed: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut first) = self.first_error.lock() {
                first.get_or_insert_with(|| error.to_string());
            }
        }
    }
}

/// What producing the input left.
struct Input {
    records: u64,
    matching: u64,
    partitions: i32,
    seconds: f64,
}

/// Produces `records` records to `in`, round-robin over its partitions in runs of
/// [`RECORDS_PER_PARTITION_RUN`], and waits until the broker acknowledged every one.
fn produce_input(bootstrap: &str, records: u64) -> anyhow::Result<Input> {
    let started = Instant::now();
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("batch.num.messages", "100000")
        .set("queue.buffering.max.messages", "2000000")
        .set("queue.buffering.max.kbytes", "2097151")
        .set("compression.type", "none")
        .set("acks", "all")
        .create_with_context(Deliveries {
            failed: AtomicU64::new(0),
            first_error: std::sync::Mutex::new(None),
        })
        .map_err(|e| anyhow!("cannot create the input producer: {e}"))?;
    let metadata = producer
        .client()
        .fetch_metadata(Some("in"), BROKER_REQUEST_TIMEOUT)
        .map_err(|e| anyhow!("cannot read the metadata of topic 'in': {e}"))?;
    let partitions = metadata
        .topics()
        .iter()
        .find(|t| t.name() == "in")
        .map(|t| t.partitions().len() as i32)
        .filter(|&n| n > 0)
        .ok_or_else(|| anyhow!("the broker has no topic 'in'"))?;
    let mut rng = XorShift::new(SEED);
    let mut line = String::with_capacity(RECORD_BYTES);
    let mut matching = 0u64;
    for id in 0..records {
        if record(&mut rng, id, &mut line) {
            matching += 1;
        }
        let partition = ((id / RECORDS_PER_PARTITION_RUN) % partitions as u64) as i32;
        loop {
            let sent = producer.send::<[u8], [u8]>(
                BaseRecord::to("in")
                    .partition(partition)
                    .payload(line.as_bytes()),
            );
            match sent {
                Ok(()) => break,
                Err((error, _))
                    if error.rdkafka_error_code()
                        == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) =>
                {
                    producer.poll(Duration::from_millis(1));
                }
                Err((error, _)) => bail!("cannot produce input record {id}: {error}"),
            }
        }
        if id % 65_536 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer
        .flush(PRODUCE_FLUSH_TIMEOUT)
        .map_err(|e| anyhow!("the broker did not acknowledge the input: {e}"))?;
    let failed = producer.context().failed.load(Ordering::Relaxed);
    if failed > 0 {
        let first = producer
            .context()
            .first_error
            .lock()
            .ok()
            .and_then(|f| f.clone());
        bail!("{failed} input records were not delivered; first error: {first:?}");
    }
    Ok(Input {
        records,
        matching,
        partitions,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// A CPU sample of everything the report splits.
struct Sample {
    at: Instant,
    threads: Threads,
    broker_s: f64,
}

impl Sample {
    fn take(broker_pid: u32) -> Sample {
        Sample {
            at: Instant::now(),
            threads: Threads::sample(),
            broker_s: cpu::process_seconds(broker_pid).unwrap_or(0.0),
        }
    }
}

/// What the output watcher saw.
struct Watched {
    rows_out: u64,
    partitions_out: i32,
    /// At the first output record and at the last matching one.
    first: Option<Sample>,
    last: Option<Sample>,
    /// When the watch gave up (CPU and time up to the failure).
    stopped: Option<Sample>,
    /// Why the watch ended early, if it did.
    failure: Option<String>,
}

/// The watcher's librdkafka client (created before timing, so its threads are known).
struct Watcher {
    consumer: BaseConsumer,
}

impl Watcher {
    fn new(bootstrap: &str) -> anyhow::Result<Watcher> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "nervix-bench-watermarks")
            .set("allow.auto.create.topics", "false")
            .create()
            .map_err(|e| anyhow!("cannot create the output watcher: {e}"))?;
        Ok(Watcher { consumer })
    }

    fn partitions(&self, topic: &str) -> Option<i32> {
        let metadata = self
            .consumer
            .fetch_metadata(Some(topic), BROKER_REQUEST_TIMEOUT)
            .ok()?;
        let topic = metadata.topics().iter().find(|t| t.name() == topic)?;
        if topic.error().is_some() || topic.partitions().is_empty() {
            return None;
        }
        Some(topic.partitions().len() as i32)
    }

    /// Records appended to `topic` since it was created (see the module docs: not high − low).
    fn count(&self, topic: &str, partitions: i32) -> anyhow::Result<u64> {
        let mut total = 0u64;
        for partition in 0..partitions {
            let (_, high) = self
                .consumer
                .fetch_watermarks(topic, partition, BROKER_REQUEST_TIMEOUT)
                .map_err(|e| anyhow!("watermarks of {topic}/{partition}: {e}"))?;
            total += high.max(0) as u64;
        }
        Ok(total)
    }

    /// Watches `out` until it holds `goal` records (then [`EXTRA_WAIT`] more) or a deadline.
    fn watch(self, goal: u64, start: Instant, broker_pid: u32, complete_by: Duration) -> Watched {
        let mut watched = Watched {
            rows_out: 0,
            partitions_out: 0,
            first: None,
            last: None,
            stopped: None,
            failure: None,
        };
        let mut progress_at = Instant::now();
        loop {
            std::thread::sleep(WATCH_INTERVAL);
            if watched.partitions_out == 0 {
                match self.partitions("out") {
                    Some(n) => watched.partitions_out = n,
                    None if start.elapsed() > FIRST_OUTPUT_TIMEOUT => {
                        watched.failure = Some(format!(
                            "topic 'out' did not appear within {FIRST_OUTPUT_TIMEOUT:?} of START"
                        ));
                        return watched;
                    }
                    None => continue,
                }
            }
            let count = match self.count("out", watched.partitions_out) {
                Ok(count) => count,
                Err(error) => {
                    watched.failure = Some(error.to_string());
                    return watched;
                }
            };
            if count > watched.rows_out {
                progress_at = Instant::now();
            }
            watched.rows_out = count;
            if count > 0 && watched.first.is_none() {
                watched.first = Some(Sample::take(broker_pid));
            }
            if let Some(last) = &watched.last {
                if last.at.elapsed() >= EXTRA_WAIT {
                    return watched;
                }
                continue;
            }
            if count >= goal {
                watched.last = Some(Sample::take(broker_pid));
                continue;
            }
            let failure = if watched.first.is_none() && start.elapsed() > FIRST_OUTPUT_TIMEOUT {
                Some(format!(
                    "no output record within {FIRST_OUTPUT_TIMEOUT:?} of START"
                ))
            } else if watched.first.is_some() && progress_at.elapsed() > STALL_TIMEOUT {
                Some(format!(
                    "the output stood still for {STALL_TIMEOUT:?} at {count} of {goal} records"
                ))
            } else if start.elapsed() > complete_by {
                Some(format!(
                    "the output did not complete within {complete_by:?}: {count} of {goal} records"
                ))
            } else {
                None
            };
            if failure.is_some() {
                watched.failure = failure;
                watched.stopped = Some(Sample::take(broker_pid));
                return watched;
            }
        }
    }
}

/// Runs the scenario on the current tokio runtime.
pub async fn run(settings: &KafkaSettings) -> anyhow::Result<KafkaRun> {
    if !(settings.seconds > 0.0 && settings.seconds.is_finite()) {
        bail!("--seconds must be a positive number");
    }
    if settings.records == Some(0) {
        bail!("--records must be at least 1");
    }
    let data_dir = scratch_data_dir("bench-kafka");
    let broker = Broker::start(settings.broker, PARTITIONS, &["in", "out"])?;
    let outcome = run_in(settings, &data_dir, &broker).await;
    let broker_rss = cpu::process_peak_rss_bytes(broker.pid());
    drop(broker);
    let _ = std::fs::remove_dir_all(&data_dir);
    let mut run = outcome?;
    run.extra
        .insert("broker_rss_bytes".into(), json!(broker_rss));
    run.lines.push(format!(
        "broker peak RSS {:.1} MiB",
        broker_rss as f64 / (1024.0 * 1024.0)
    ));
    Ok(run)
}

async fn run_in(
    settings: &KafkaSettings,
    data_dir: &std::path::Path,
    broker: &Broker,
) -> anyhow::Result<KafkaRun> {
    let records = settings.input_records();
    let bootstrap = broker.bootstrap.clone();
    let input = tokio::task::spawn_blocking(move || produce_input(&bootstrap, records))
        .await
        .context("the input producer panicked")??;
    if input.partitions != PARTITIONS {
        eprintln!(
            "warning: topic 'in' has {} partitions, not {PARTITIONS} (this broker cannot create \
             topics with a chosen count)",
            input.partitions
        );
    }
    let mut node = EmbeddedNode::start(EmbeddedConfig {
        pin: settings.pin,
        ..EmbeddedConfig::loopback(data_dir.to_path_buf(), settings.shards)
    })
    .await
    .with_context(|| format!("cannot start an embedded node in {}", data_dir.display()))?;
    let measured = measure(settings, &mut node, broker, &input).await;
    node.shutdown(DRAIN_MS).await;
    let (watched, watcher_tids, start) = measured?;
    result(settings, broker, &input, watched, &watcher_tids, start)
}

type Measured = (Watched, BTreeSet<u32>, Instant);

async fn measure(
    settings: &KafkaSettings,
    node: &mut EmbeddedNode,
    broker: &Broker,
    input: &Input,
) -> anyhow::Result<Measured> {
    let before = Threads::sample().tids();
    let watcher = Watcher::new(&broker.bootstrap)?;
    // Let librdkafka start its broker threads before telling them apart.
    let _ = watcher.partitions("in");
    let watcher_tids: BTreeSet<u32> = Threads::sample()
        .tids()
        .difference(&before)
        .copied()
        .collect();
    let group = format!(
        "nervix-bench-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let goal = input.matching;
    let broker_pid = broker.pid();
    let complete_by = FIRST_OUTPUT_TIMEOUT + Duration::from_secs_f64(settings.seconds * 30.0);
    let (done, watched) = tokio::sync::oneshot::channel();
    let start = Instant::now();
    std::thread::Builder::new()
        .name("bench-watcher".to_string())
        .spawn(move || {
            let _ = done.send(watcher.watch(goal, start, broker_pid, complete_by));
        })
        .context("cannot start the output watcher")?;
    if let Err(refusal) = node
        .run(&graph(
            &broker.bootstrap,
            &group,
            settings.mode,
            settings.tuned,
        ))
        .await
    {
        bail!("the bench graph was refused: {refusal}");
    }
    let watched = watched.await.context("the output watcher panicked")?;
    Ok((watched, watcher_tids, start))
}

fn result(
    settings: &KafkaSettings,
    broker: &Broker,
    input: &Input,
    watched: Watched,
    watcher_tids: &BTreeSet<u32>,
    start: Instant,
) -> anyhow::Result<KafkaRun> {
    if let Some(failure) = &watched.failure {
        eprintln!("kafka-filter-map: {failure}");
    }
    let (elapsed_s, from_start_s, first_s, parts, broker_cpu_s) = match (
        &watched.first,
        watched.last.as_ref().or(watched.stopped.as_ref()),
    ) {
        (Some(first), Some(last)) => {
            let window = last.at.duration_since(first.at).as_secs_f64();
            let parts = first.threads.delta(&last.threads, watcher_tids);
            (
                window,
                last.at.duration_since(start).as_secs_f64(),
                first.at.duration_since(start).as_secs_f64(),
                parts,
                last.broker_s - first.broker_s,
            )
        }
        _ => (
            0.0,
            start.elapsed().as_secs_f64(),
            0.0,
            BTreeMap::new(),
            0.0,
        ),
    };
    let pct = |seconds: f64| {
        if elapsed_s > 0.0 {
            (seconds / elapsed_s * 1000.0).floor() / 10.0
        } else {
            0.0
        }
    };
    let part = |p: Part| parts.get(&p).copied().unwrap_or(0.0);
    let broker_pct = pct(broker_cpu_s);
    let shard_pct = pct(part(Part::Shard));
    let rdk_pct = pct(part(Part::NodeRdkafka));
    let other_pct = pct(part(Part::Other));
    let watcher_pct = pct(part(Part::Watcher));
    let rows_per_sec = if elapsed_s > 0.0 && watched.last.is_some() {
        input.records as f64 / elapsed_s
    } else {
        0.0
    };
    let result = RunResult {
        scenario: SCENARIO.0.to_string(),
        shards: settings.shards.get(),
        seconds: settings.seconds,
        elapsed_s,
        batch_rows: 1,
        rate: None,
        window: match settings.mode {
            IngestMode::AckParallel => ACK_WINDOW_RECORDS,
            IngestMode::NoAck => 0,
        },
        client_threads: 1,
        shard_spin_us: nervix::runtime::applied_spin_before_park_us(settings.pin, nervix::runtime::DEFAULT_SPIN_BEFORE_PARK_US),
        rows_in: input.records,
        rows_out: watched.rows_out,
        matching: input.matching,
        batches_completed: input.records,
        batches_not_completed: 0,
        deliveries: watched.rows_out,
        rows_per_sec,
        p50_us: 0.0,
        p99_us: 0.0,
        max_us: 0.0,
        latency_method: "none measured (p50/p99/max are 0): the input is produced before timing, so produce→output time would be time spent waiting in the topic",
        tail: None,
        rss_bytes: peak_rss_bytes(),
    };
    let mut extra = Map::new();
    extra.insert("ingest_mode".into(), json!(settings.mode.name()));
    extra.insert(
        "client_config".into(),
        json!(if settings.tuned {
            "tuned"
        } else {
            "librdkafka defaults"
        }),
    );
    extra.insert("record_bytes".into(), json!(RECORD_BYTES));
    extra.insert("partitions_in".into(), json!(input.partitions));
    extra.insert("partitions_out".into(), json!(watched.partitions_out));
    extra.insert("broker".into(), json!(broker.command));
    extra.insert("broker_cpu_pct".into(), json!(broker_pct));
    extra.insert("shard_cpu_pct".into(), json!(shard_pct));
    extra.insert("node_rdkafka_cpu_pct".into(), json!(rdk_pct));
    extra.insert("node_other_cpu_pct".into(), json!(other_pct));
    extra.insert("watcher_cpu_pct".into(), json!(watcher_pct));
    extra.insert(
        "time_to_first_output_s".into(),
        json!((first_s * 1000.0).floor() / 1000.0),
    );
    extra.insert(
        "elapsed_from_start_s".into(),
        json!((from_start_s * 1000.0).floor() / 1000.0),
    );
    extra.insert(
        "input_produce_s".into(),
        json!((input.seconds * 1000.0).floor() / 1000.0),
    );
    extra.insert(
        "timing".into(),
        json!("first output record seen → last matching record seen (watermarks every 10 ms); START → first output (group join) reported apart"),
    );
    if let Some(failure) = &watched.failure {
        extra.insert("failure".into(), json!(failure));
    }
    let lines = vec![
        format!(
            "ingest {} | partitions in {} out {} | START → first output {:.3} s (group join), START → last {:.3} s | input produced in {:.3} s (untimed)",
            settings.mode.name(),
            input.partitions,
            watched.partitions_out,
            first_s,
            from_start_s,
            input.seconds
        ),
        format!(
            "CPU % of one core over the window: broker {broker_pct:.1} | node shard {shard_pct:.1} | node rdkafka threads {rdk_pct:.1} | node other {other_pct:.1} | bench watcher {watcher_pct:.1}"
        ),
        "p50/p99 µs: not measured (0) — see `latency`".to_string(),
    ];
    Ok(KafkaRun {
        result,
        extra,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_128_bytes_of_json_and_about_half_match() {
        let mut rng = XorShift::new(SEED);
        let mut line = String::new();
        let mut matching = 0;
        for id in [0u64, 7, 123_456, 9_999_999_999]
            .into_iter()
            .chain(0..10_000)
        {
            let matches = record(&mut rng, id, &mut line);
            assert_eq!(line.len(), RECORD_BYTES, "{line}");
            let value: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(value["id"].as_u64(), Some(id));
            let text = value["value"].as_str().unwrap();
            assert_eq!(text.contains(NEEDLE), matches, "{line}");
            matching += usize::from(matches);
        }
        assert!((4_000..6_000).contains(&matching), "{matching}");
    }

    #[test]
    fn the_input_is_bounded() {
        let settings = KafkaSettings {
            seconds: 1e9,
            shards: NonZeroUsize::MIN,
            records: None,
            mode: IngestMode::AckParallel,
            broker: BrokerHost::Nervix,
            pin: false,
            tuned: true,
        };
        assert!(settings.input_records() <= MAX_RECORDS);
        let small = KafkaSettings {
            records: Some(1),
            ..settings
        };
        assert_eq!(small.input_records(), MIN_RECORDS);
    }

    #[test]
    fn the_graph_names_both_clients_and_the_window() {
        let text = graph("127.0.0.1:9", "g", IngestMode::AckParallel, true);
        assert!(text.contains("MAX 65536 BATCH TIMEOUT 10ms"));
        assert!(text.contains("'linger.ms' = '5'"));
        assert!(graph("h:1", "g", IngestMode::NoAck, false).contains("MODE NO ACK"));
    }
}
