//! `nervix-bench nexmark-q5|q7|q8`: the stateful ports, benched by submitting `N` generated
//! events once, in event-time order, and waiting for the whole answer.
//!
//! Why once and in order: q5, q7 and q8 keep windows and correlator state keyed by event time,
//! so replaying a batch (as [`super::run::bench`] does for q0–q2) would move event time
//! backwards and change the answer. Here the events are generated, batched and answered by the
//! reference before timing; the batches then go through [`submit_all`], the submission the
//! tests' [`super::run::answer`] uses (event-time order across streams, as fast as the
//! producers' credit allows), and the consumer counts rows until it has the reference's count
//! or the bounded tail wait ([`TAIL_WAIT`] after the last outcome) passes.
//!
//! What is measured: events submitted (the rows of the streams the port reads) divided by the
//! time from the first submit to the last output row. The domains' clock barely moves
//! (`run::TIME_RATE`), so windows and correlations end by event time alone; each stream ends with
//! two end markers ([`super::run::streams`]) that move the watermarks past the last windows,
//! and their own output is left out. The run passes when rows out equal the reference's rows
//! as a multiset; otherwise the differing rows are printed on stderr (`missing …`, `extra …`). Latency is not measured: output rows of a window or a correlation have no single
//! input batch to measure from.
//!
//! `--real-time` paces the same submission by event time (a batch goes once as much wall time
//! has passed as event time up to its last event) and `--event-rate` sets the generator's
//! events per second of event time: together they show what a port costs when its state lives
//! as long in wall time as in event time — above all its snapshots, which run once a second of
//! wall time over every changed state (`snapshot_*` in the report, from the shards' counters),
//! while a compressed run (the default) crosses minutes of event time in seconds and
//! snapshots each window once or twice.
//!
//! The producers' credit (`--window` batches) must cover what the stateful nodes hold
//! unacknowledged: a window's rows until the snapshot holding them is durable (about a
//! second), a correlator's pending rows until they match or time out (MAX TIME of event time).
//! A credit smaller than that stalls the producer until a snapshot or an ACK timeout.

use std::cell::Cell;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nervix::runtime::shard::SnapshotCounters;
use serde_json::{json, Map, Value};

use super::gen::Events;
use super::query::Query;
use super::reference::{rows_of, Row, RowDiff};
use super::run::{
    collect, real_rows, streams, submit_all, Deployed, Stream, Submitted, Target, MAX_BATCH_ROWS,
    TAIL_WAIT,
};
use crate::cpu::{Part, Threads};
use crate::pacer::Pacer;
use crate::report::{peak_rss_bytes, RunResult};

/// The stateful Nexmark scenarios, as `nervix-bench list` prints them.
pub const SCENARIOS: [(&str, &str); 3] = [
    (
        "nexmark-q5",
        "Nexmark q5 hot items: N generated events submitted once in event-time order (in-process)",
    ),
    (
        "nexmark-q7",
        "Nexmark q7 highest bid: N generated events submitted once in event-time order (in-process)",
    ),
    (
        "nexmark-q8",
        "Nexmark q8 new sellers: N generated events submitted once in event-time order (in-process)",
    ),
];

/// Nanoseconds per second, for event-time spans.
const NS_PER_S: f64 = 1e9;

/// A once-through run's settings.
#[derive(Debug, Clone)]
pub struct OrderedSettings {
    pub query: Query,
    /// Events generated (persons, auctions and bids, in the generator's mix); the port is sent
    /// the ones of the streams it reads.
    pub events: usize,
    pub batch_rows: usize,
    /// Batches without an outcome at most, per stream (each producer's credit).
    pub window: u32,
    pub pin: bool,
    /// Events per second of event time the generator produces.
    pub events_per_s: usize,
    /// Submit in real time (a batch waits until as much wall time has passed since the first
    /// submit as event time from the first event to its own last one) instead of as fast as
    /// credit allows.
    pub real_time: bool,
}

/// The generator rates a run may ask for, events per second of event time.
const EVENTS_PER_S_RANGE: std::ops::RangeInclusive<usize> = 1..=10_000_000;

/// What one timed run saw.
struct Measured {
    submitted: Submitted,
    rows_out: u64,
    /// Every output row (the end markers' left out).
    rows: Vec<Row>,
    deliveries: u64,
    /// First submit → last outcome.
    submit: Duration,
    /// First submit → last output row (or → last outcome when no row came).
    elapsed: Duration,
    /// CPU seconds of the node's shard threads from the first submit until the consumer
    /// stopped (200 ms after the last expected row).
    shard_cpu_s: f64,
    /// What processor snapshots cost the shards from the first submit until the consumer
    /// stopped.
    snapshot: SnapshotCounters,
}

/// What [`bench`] reports: the result, the extra JSON fields, and how the rows out differ from
/// the reference's (empty when the run is right).
pub struct Ordered {
    pub result: RunResult,
    pub extra: Map<String, Value>,
    pub diff: RowDiff,
}

/// Runs `nervix-bench nexmark-q5|q7|q8`.
pub async fn bench(settings: &OrderedSettings) -> anyhow::Result<Ordered> {
    let query = &settings.query;
    if query.stateless_rows(&[]).is_some() {
        bail!(
            "Nexmark {} is stateless: `nervix-bench nexmark-{}` benches it by replay",
            query.name,
            query.name
        );
    }
    if settings.batch_rows == 0 || settings.batch_rows > MAX_BATCH_ROWS {
        bail!("--batch-rows must be 1 to {MAX_BATCH_ROWS} (rows per client batch, DESIGN §9)");
    }
    if settings.events == 0 {
        bail!("--events must be at least 1");
    }
    if settings.window == 0 {
        bail!("--window must be at least 1");
    }
    if !EVENTS_PER_S_RANGE.contains(&settings.events_per_s) {
        bail!(
            "--event-rate must be {} to {} events per second",
            EVENTS_PER_S_RANGE.start(),
            EVENTS_PER_S_RANGE.end()
        );
    }
    let prepared_at = Instant::now();
    let events = Events::generate_at(settings.events, settings.events_per_s);
    let expected = query.reference(&events.persons, &events.auctions, &events.bids);
    let expected_rows = expected.len() as u64;
    let streams = streams(query, &events, settings.batch_rows);
    drop(events);
    let span_s = event_span_s(&streams);
    let prepare_s = prepared_at.elapsed().as_secs_f64();
    let events_in: u64 = streams
        .iter()
        .flat_map(|s| &s.batches)
        .map(|b| real_rows(b.clone()).num_rows() as u64)
        .sum();

    let deployed = Deployed::start(query, settings.pin).await?;
    let measured = measure(&deployed, settings, &streams, expected_rows).await;
    deployed.stop().await;
    let measured = measured?;
    let diff = RowDiff::between(&expected, &measured.rows);
    if let Some(failure) = &measured.submitted.first_failure {
        eprintln!(
            "{} batches ended other than Completed; first: {failure}",
            measured.submitted.not_completed
        );
    }

    let elapsed_s = measured.elapsed.as_secs_f64();
    let per_s = |count: u64| {
        if elapsed_s > 0.0 {
            count as f64 / elapsed_s
        } else {
            0.0
        }
    };
    let result = RunResult {
        scenario: format!("nexmark-{}", query.name),
        shards: 1,
        seconds: elapsed_s,
        elapsed_s,
        batch_rows: settings.batch_rows,
        rate: None,
        window: settings.window,
        client_threads: 1,
        shard_spin_us: nervix::runtime::applied_spin_before_park_us(settings.pin, nervix::runtime::DEFAULT_SPIN_BEFORE_PARK_US),
        rows_in: events_in,
        rows_out: measured.rows_out,
        matching: expected_rows,
        batches_completed: measured.submitted.completed,
        batches_not_completed: measured.submitted.not_completed,
        deliveries: measured.deliveries,
        rows_per_sec: per_s(events_in),
        p50_us: 0.0,
        p99_us: 0.0,
        max_us: 0.0,
        latency_method: "not measured (a window's or correlation's output row has no single input batch to time from)",
        tail: None,
        rss_bytes: peak_rss_bytes(),
    };
    let floor3 = |x: f64| (x * 1000.0).floor() / 1000.0;
    let mut extra = Map::new();
    extra.insert("query".into(), json!(query.name));
    extra.insert("events_generated".into(), json!(settings.events));
    extra.insert("events_submitted".into(), json!(events_in));
    extra.insert("reference_rows".into(), json!(expected_rows));
    extra.insert("rows_missing".into(), json!(diff.missing.len()));
    extra.insert("rows_extra".into(), json!(diff.extra.len()));
    extra.insert("prepare_s".into(), json!(floor3(prepare_s)));
    extra.insert(
        "submit_s".into(),
        json!(floor3(measured.submit.as_secs_f64())),
    );
    extra.insert("event_span_s".into(), json!(floor3(span_s)));
    extra.insert(
        "events_per_sec_per_shard".into(),
        json!(result.rows_per_sec.floor()),
    );
    extra.insert("shard_cpu_s".into(), json!(floor3(measured.shard_cpu_s)));
    if elapsed_s > 0.0 {
        extra.insert(
            "shard_cpu_share".into(),
            json!(floor3(measured.shard_cpu_s / elapsed_s)),
        );
    }
    extra.insert("event_rate".into(), json!(settings.events_per_s));
    extra.insert("real_time".into(), json!(settings.real_time));
    let snapshot = &measured.snapshot;
    extra.insert("snapshot_states".into(), json!(snapshot.states));
    extra.insert("snapshot_deletions".into(), json!(snapshot.deletions));
    extra.insert("snapshot_bytes".into(), json!(snapshot.bytes));
    extra.insert("snapshot_passes".into(), json!(snapshot.passes));
    extra.insert(
        "snapshot_encode_s".into(),
        json!(floor3(snapshot.encode_us as f64 / 1e6)),
    );
    extra.insert("snapshot_deferred".into(), json!(snapshot.deferred));
    extra.insert("snapshot_failed".into(), json!(snapshot.failed));
    if measured.shard_cpu_s > 0.0 {
        extra.insert(
            "events_per_shard_cpu_s".into(),
            json!((events_in as f64 / measured.shard_cpu_s).floor()),
        );
    }
    extra.insert(
        "generated_events_per_sec".into(),
        json!(per_s(settings.events as u64).floor()),
    );
    if let Some(failure) = &measured.submitted.first_failure {
        extra.insert("first_failure".into(), json!(failure));
    }
    extra.insert(
        "events".into(),
        json!("the first N events of the nexmark crate's generator (base time pinned), generated, batched and answered by the reference before timing; the streams the port reads submitted once in event-time order; events/s = events submitted / (first submit → last output row)"),
    );
    Ok(Ordered {
        result,
        extra,
        diff,
    })
}

/// Event time from the earliest to the latest event in the streams, in seconds.
fn event_span_s(streams: &[Stream]) -> f64 {
    use arrow_array::cast::AsArray;
    use arrow_array::types::TimestampNanosecondType;
    let mut earliest = i64::MAX;
    let mut latest = i64::MIN;
    for batch in streams.iter().flat_map(|s| &s.batches) {
        let batch = real_rows(batch.clone());
        let times = batch
            .column_by_name("date_time")
            .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>());
        for t in times.iter().flat_map(|t| t.values().iter()) {
            earliest = earliest.min(*t);
            latest = latest.max(*t);
        }
    }
    if latest >= earliest {
        (latest - earliest) as f64 / NS_PER_S
    } else {
        0.0
    }
}

async fn measure(
    deployed: &Deployed,
    settings: &OrderedSettings,
    streams: &[Stream],
    expected_rows: u64,
) -> anyhow::Result<Measured> {
    let mut consumer = deployed.consumer(&settings.query).await?;
    let mut producers = deployed.producers(streams, settings.window).await?;
    let target: Target = Cell::new(None);
    let mut pacer = if settings.real_time {
        Some(Pacer::new().context("real-time pacer")?)
    } else {
        None
    };
    let snapshot_before = deployed.snapshot_counters().await;
    let threads_before = Threads::sample();
    let start = Instant::now();
    let submit = async {
        let outcome = submit_all(&mut producers, streams, settings.window, pacer.as_mut()).await;
        target.set(Some(match &outcome {
            Ok(_) => (expected_rows, Instant::now() + TAIL_WAIT),
            Err(_) => (0, Instant::now()),
        }));
        (outcome, start.elapsed())
    };
    let mut rows_out: u64 = 0;
    let mut deliveries: u64 = 0;
    let mut last_row: Option<Duration> = None;
    let mut rows: Vec<Row> = Vec::new();
    let mut unreadable: Option<anyhow::Error> = None;
    let collected = collect(&mut consumer, &target, |batch| {
        rows_out += batch.num_rows() as u64;
        deliveries += 1;
        last_row = Some(start.elapsed());
        match rows_of(&batch) {
            Ok(batch_rows) => rows.extend(batch_rows),
            Err(error) => {
                unreadable.get_or_insert(error);
            }
        }
    });
    let ((submitted, submit), received) = tokio::join!(submit, collected);
    let shard_cpu_s = threads_before
        .delta(&Threads::sample(), &Default::default())
        .get(&Part::Shard)
        .copied()
        .unwrap_or(0.0);
    let snapshot = deployed.snapshot_counters().await - snapshot_before;
    for producer in producers {
        producer.close().await;
    }
    consumer.close().await;
    let submitted = submitted?;
    received?;
    if let Some(error) = unreadable {
        return Err(error.context("an output batch cannot be compared with the reference"));
    }
    Ok(Measured {
        submitted,
        rows_out,
        rows,
        deliveries,
        submit,
        elapsed: last_row.unwrap_or(submit),
        shard_cpu_s,
        snapshot,
    })
}
