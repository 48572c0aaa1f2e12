//! Processor state across a node restart, through the real interfaces: a window that was open
//! when the node stopped gives, after the restart, exactly the record an uninterrupted run
//! gives; a deduplicator still knows the keys it saw before the restart, and after its state
//! was lost and restored from a `nervix state backup` file; a correlator's pending row pairs
//! exactly once with a partner that arrives after a stop, a crash or a backup restore; a
//! reorderer's held rows leave in BY order after a restart, merged with rows sent since.
//!
//! Window rows, pending correlator rows and held reorder rows are acknowledged once a
//! snapshot holding them is durable, so the producer's batch completes before the node stops,
//! and the restored state is the only place those rows live.

#[path = "support/codec_cases.rs"]
mod codec_cases;
mod support;

use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use codec_cases::{rows, BytesAs};
use nervix_net::client::{Consumer, Producer, Session};
use nervix_net::session::frame::Outcome;
use serde_json::Value;
use support::dataplane::{
    consumer, define, fields, http_get, next_delivery, producer, quiet_for, runtime,
};
use support::Node;

const WINDOW_GRAPH: &str = "
CREATE DOMAIN cases;
USE cases;
CREATE SCHEMA reading (tenant STRING, value I64);
CREATE SCHEMA summary (tenant STRING, n I64, total I64 OPTIONAL, low I64 OPTIONAL);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY readings SCHEMA reading BRANCHED BY by_tenant;
CREATE RELAY summaries SCHEMA summary BRANCHED BY by_tenant;
CREATE CLIENT PRODUCER INGESTOR rows_in
  FROM SCHEMA reading
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO readings
    INHERIT ALL
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE WINDOW PROCESSOR sums
  FROM readings
  WIDTH 8s DURATION
  STEP 8s DURATION
  BRANCHED BY by_tenant
  TO summaries
    SET tenant = branch.tenant,
        n = COUNT(input.value),
        total = SUM(input.value),
        low = MIN(input.value)
    ON MESSAGE ERROR LOG;
CREATE CLIENT CONSUMER EMITTER rows_out
  FROM summaries
  TO SCHEMA summary
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

/// A graph where readings branched by tenant pass one processor (`processor`: FROM readings,
/// TO processed) on their way to the `rows_out` consumer.
fn readings_graph(processor: &str) -> String {
    "
CREATE DOMAIN cases;
USE cases;
CREATE SCHEMA reading (tenant STRING, value I64);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY readings SCHEMA reading BRANCHED BY by_tenant;
CREATE RELAY processed SCHEMA reading BRANCHED BY by_tenant;
CREATE CLIENT PRODUCER INGESTOR rows_in
  FROM SCHEMA reading
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO readings
    INHERIT ALL
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
{PROCESSOR}
CREATE CLIENT CONSUMER EMITTER rows_out
  FROM processed
  TO SCHEMA reading
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
"
    .replace("{PROCESSOR}", processor)
}

const DEDUP_PROCESSOR: &str = "
CREATE DEDUPLICATOR once
  FROM readings
  DEDUPLICATE ON input.value
  MAX TIME 10m
  BRANCHED BY by_tenant
  TO processed
    INHERIT ALL
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
";

fn readings(rows: &[(&str, i64)]) -> RecordBatch {
    let schema = std::sync::Arc::new(Schema::new(vec![
        Field::new("tenant", DataType::Utf8, false),
        Field::new("value", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            std::sync::Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            std::sync::Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
        ],
    )
    .expect("batch")
}

async fn attach(node: &Node) -> (Session, Producer, Consumer) {
    let session = Session::connect(node.session).await.expect("session");
    let out = consumer(&session, "cases", "rows_out", 16).await;
    let spec = fields(&[("tenant", "STRING"), ("value", "I64")]);
    let input = producer(&session, "cases", "rows_in", spec, 16, 1 << 20).await;
    (session, input, out)
}

/// The producer's next batch outcome (within 10 s).
async fn next_outcome(producer: &mut Producer) -> (u64, Outcome) {
    tokio::time::timeout(Duration::from_secs(10), producer.next_outcome())
        .await
        .expect("an outcome in time")
        .expect("producer healthy")
        .expect("producer open")
}

/// Waits until batch `seq` completed (every row acknowledged).
async fn completed(producer: &mut Producer, seq: u64) {
    assert_eq!(next_outcome(producer).await, (seq, Outcome::Completed));
}

/// Submits `batch` and waits until it completed.
async fn submit_completed(producer: &mut Producer, batch: &RecordBatch) {
    let seq = producer.submit(batch).await.expect("submit");
    completed(producer, seq).await;
}

fn sorted(mut rows: Vec<Value>) -> Vec<Value> {
    rows.sort_by_key(|row| row.to_string());
    rows
}

/// Rows received until `count` arrived.
async fn receive(consumer: &mut Consumer, count: usize, seconds: u64) -> Vec<Value> {
    let mut got = Vec::new();
    while got.len() < count {
        let delivery = next_delivery(consumer, seconds).await;
        got.extend(rows(&delivery.batch, BytesAs::Hex));
        consumer.ack(delivery.seq).await.expect("ack");
    }
    sorted(got)
}

/// Feeds three batches into the window, restarting the node before the last when asked; the
/// records the window emits.
/// [`WINDOW_GRAPH`] with one more aggregate over a STRING argument: a window retaining a
/// variable-width column is snapshotted as an Arrow IPC stream, one of fixed-width columns
/// only as plain values (`exec/window.rs`); both must come back.
fn window_graph_with_text() -> String {
    WINDOW_GRAPH
        .replace(
            "low I64 OPTIONAL)",
            "low I64 OPTIONAL, last STRING OPTIONAL)",
        )
        .replace(
            "low = MIN(input.value)",
            "low = MIN(input.value),\n        last = LAST(input.tenant)",
        )
}

fn window_records(restart: bool, with_text: bool) -> Vec<Value> {
    let name = match (restart, with_text) {
        (true, false) => "window-restart",
        (false, false) => "window-uninterrupted",
        (true, true) => "window-text-restart",
        (false, true) => "window-text-uninterrupted",
    };
    let dir = support::scratch_dir(name);
    let mut node = Node::start(&dir);
    let graph = if with_text {
        window_graph_with_text()
    } else {
        WINDOW_GRAPH.to_string()
    };
    define(&mut node.admin(), &graph);
    let rt = runtime();
    rt.block_on(async {
        let (_session, mut input, _out) = attach(&node).await;
        // Two batches: `acme`'s window holds two runs, so its snapshot carries both.
        submit_completed(&mut input, &readings(&[("acme", 5), ("zen", 40)])).await;
        submit_completed(&mut input, &readings(&[("acme", 7)])).await;
    });
    if restart {
        node.terminate();
        node.restart();
    }
    let records = rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        submit_completed(&mut input, &readings(&[("acme", 3), ("zen", 2)])).await;
        let records = receive(&mut out, 2, 20).await;
        assert!(quiet_for(&mut out, 300).await, "only one record per branch");
        records
    });
    // Both windows were stored (their batches completed on a durable snapshot), so their
    // leaving deletes both entries at the next snapshot.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = http_get(node.metrics, "/metrics");
        let deletions = shard_sum(&metrics, "nervix_snapshot_deletions_total");
        if deletions == 2 {
            break;
        }
        assert!(
            deletions < 2 && std::time::Instant::now() < deadline,
            "{metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    records
}

#[test]
fn a_restart_mid_window_gives_the_uninterrupted_record() {
    let uninterrupted = window_records(false, false);
    let expected = sorted(vec![
        serde_json::json!({"tenant": "acme", "n": 3, "total": 15, "low": 3}),
        serde_json::json!({"tenant": "zen", "n": 2, "total": 42, "low": 2}),
    ]);
    assert_eq!(uninterrupted, expected);
    assert_eq!(window_records(true, false), uninterrupted);
}

#[test]
fn a_restart_mid_window_with_a_text_argument_gives_the_uninterrupted_record() {
    let uninterrupted = window_records(false, true);
    let expected = sorted(vec![
        serde_json::json!({"tenant": "acme", "n": 3, "total": 15, "low": 3, "last": "acme"}),
        serde_json::json!({"tenant": "zen", "n": 2, "total": 42, "low": 2, "last": "zen"}),
    ]);
    assert_eq!(uninterrupted, expected);
    assert_eq!(window_records(true, true), uninterrupted);
}

/// More changed windows than one snapshot pass encodes (`MAX_ENTRIES_PER_PASS`, 1,024): the
/// pass continues over the following ticks, the batch completes once every window is durable,
/// and after a kill -9 each window gives its record.
#[test]
fn windows_of_more_branches_than_one_snapshot_pass_survive_a_crash() {
    const TENANTS: i64 = 2_500;
    let dir = support::scratch_dir("window-many-branches-crash");
    let mut node = Node::start(&dir);
    define(&mut node.admin(), WINDOW_GRAPH);
    let names: Vec<String> = (0..TENANTS).map(|i| format!("t{i:04}")).collect();
    let input_rows: Vec<(&str, i64)> = names
        .iter()
        .zip(0..TENANTS)
        .map(|(name, value)| (name.as_str(), value))
        .collect();
    let rt = runtime();
    rt.block_on(async {
        let (_session, mut input, _out) = attach(&node).await;
        submit_completed(&mut input, &readings(&input_rows)).await;
    });
    // The batch completed once every window was durable: the snapshot counters saw each
    // window encoded, in passes of at most 1,024 states.
    let metrics = http_get(node.metrics, "/metrics");
    let states = shard_sum(&metrics, "nervix_snapshot_states_total");
    if shard_sum(&metrics, "nervix_snapshot_deferred_total") == 0 {
        assert_eq!(states, TENANTS as u64, "{metrics}");
    } else {
        assert!(states >= TENANTS as u64, "{metrics}");
    }
    assert!(
        shard_sum(&metrics, "nervix_snapshot_passes_total") >= 3,
        "{metrics}"
    );
    assert!(
        shard_sum(&metrics, "nervix_snapshot_bytes_total") >= 8 * TENANTS as u64,
        "{metrics}"
    );
    each_window_emits_after_a_crash(&mut node, &rt, &input_rows);
}

/// Kills `node` (-9), restarts it, and checks that every window `input_rows` (one row per
/// tenant) opened gives its one record.
fn each_window_emits_after_a_crash(
    node: &mut Node,
    rt: &tokio::runtime::Runtime,
    input_rows: &[(&str, i64)],
) {
    node.kill();
    node.restart();
    let records = rt.block_on(async {
        let (_session, _input, mut out) = attach(node).await;
        let records = receive(&mut out, input_rows.len(), 30).await;
        assert!(quiet_for(&mut out, 300).await, "only one record per branch");
        records
    });
    let expected = sorted(
        input_rows
            .iter()
            .map(|(tenant, value)| {
                serde_json::json!({"tenant": tenant, "n": 1, "total": value, "low": value})
            })
            .collect(),
    );
    assert_eq!(records, expected);
}

/// Branch keys longer than the store keeps as keys (LMDB's 511 bytes) are stored under their
/// digest: their windows' snapshots commit — and so do those of the short keys snapshotted
/// beside them — the batch completes, and after a kill -9 every window gives its record.
#[test]
fn windows_of_branch_keys_longer_than_a_store_key_survive_a_crash() {
    let dir = support::scratch_dir("window-long-keys-crash");
    let mut node = Node::start(&dir);
    define(&mut node.admin(), WINDOW_GRAPH);
    let long_a = "a".repeat(600);
    let long_b = format!("{}b", "a".repeat(2_000));
    let input_rows = [(long_a.as_str(), 5), (long_b.as_str(), 6), ("short", 7)];
    let rt = runtime();
    rt.block_on(async {
        let (_session, mut input, _out) = attach(&node).await;
        submit_completed(&mut input, &readings(&input_rows)).await;
    });
    let metrics = http_get(node.metrics, "/metrics");
    assert_eq!(
        shard_sum(&metrics, "nervix_snapshot_failed_total"),
        0,
        "{metrics}"
    );
    each_window_emits_after_a_crash(&mut node, &rt, &input_rows);
}

/// A store too small for a window's snapshot (`--state-map-bytes`): the deploy warns, the
/// commit fails and is counted, and the rows it held stay unacknowledged — their batches do
/// not complete — until a rewrite fits: once the window emitted and its state left, the next
/// snapshot (its deletion) is written and every batch completes.
#[test]
fn rows_whose_snapshot_did_not_fit_the_store_are_acknowledged_once_a_rewrite_fits() {
    const BATCHES: i64 = 4;
    const ROWS_PER_BATCH: i64 = 40_000;
    let dir = support::scratch_dir("window-store-full");
    let node = Node::start_on(
        &dir,
        support::free_addr(),
        support::free_addr(),
        &["--state-map-bytes", "1048576"],
    );
    define(&mut node.admin(), WINDOW_GRAPH);
    let rt = runtime();
    // Credit for every batch at once: none waits for another's acknowledgement.
    let (_session, mut input, mut out) = rt.block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let out = consumer(&session, "cases", "rows_out", 16).await;
        let spec = fields(&[("tenant", "STRING"), ("value", "I64")]);
        let input = producer(&session, "cases", "rows_in", spec, 16, 64 << 20).await;
        (session, input, out)
    });
    // 160,000 retained rows: a window snapshot of several MiB.
    let mut submitted = Vec::new();
    for batch in 0..BATCHES {
        let rows: Vec<(&str, i64)> = (0..ROWS_PER_BATCH)
            .map(|row| ("acme", batch * ROWS_PER_BATCH + row))
            .collect();
        submitted.push(rt.block_on(input.submit(&readings(&rows))).expect("submit"));
    }
    rt.block_on(async {
        // The session's I/O runs on this runtime: wait here, not beside it.
        let deadline = std::time::Instant::now() + Duration::from_secs(8);
        loop {
            let metrics = http_get(node.metrics, "/metrics");
            if shard_sum(&metrics, "nervix_snapshot_failed_total") > 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{metrics}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let records = receive(&mut out, 1, 30).await;
        let rows = BATCHES * ROWS_PER_BATCH;
        let total = rows * (rows - 1) / 2;
        assert_eq!(
            records,
            vec![serde_json::json!({"tenant": "acme", "n": rows, "total": total, "low": 0})]
        );
        let mut completed_batches = Vec::new();
        while completed_batches.len() < submitted.len() {
            let (seq, outcome) =
                tokio::time::timeout(Duration::from_secs(15), input.next_outcome())
                    .await
                    .expect("every batch completes once a rewrite fits")
                    .expect("producer healthy")
                    .expect("producer open");
            assert_eq!(outcome, Outcome::Completed);
            completed_batches.push(seq);
        }
        completed_batches.sort_unstable();
        assert_eq!(completed_batches, submitted);
    });
    // The deploy said so: the window's branch cap (undeclared: 256 MiB) is over the store.
    let log = node.log();
    assert!(
        log.contains("a window branch may hold more state than one snapshot can store"),
        "{log}"
    );
}

/// The sum of a per-shard counter's samples (`name{shard="…"} value` lines).
fn shard_sum(metrics: &str, name: &str) -> u64 {
    let prefix = format!("{name}{{");
    metrics
        .lines()
        .filter(|line| line.starts_with(&prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_deduplicator_remembers_its_keys_across_a_restart() {
    let dir = support::scratch_dir("dedup-restart");
    let mut node = Node::start(&dir);
    define(&mut node.admin(), &readings_graph(DEDUP_PROCESSOR));
    let rt = runtime();
    rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        let seq = input
            .submit(&readings(&[("acme", 1), ("acme", 2), ("zen", 1)]))
            .await
            .expect("submit");
        assert_eq!(receive(&mut out, 3, 10).await.len(), 3);
        completed(&mut input, seq).await;
        // The keyspace snapshot runs every second; a graceful stop also writes it.
    });
    node.terminate();
    node.restart();
    rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        let seq = input
            .submit(&readings(&[
                ("acme", 1),
                ("acme", 3),
                ("zen", 1),
                ("zen", 2),
            ]))
            .await
            .expect("submit");
        let fresh = receive(&mut out, 2, 10).await;
        completed(&mut input, seq).await;
        assert_eq!(
            fresh,
            sorted(vec![
                serde_json::json!({"tenant": "acme", "value": 3}),
                serde_json::json!({"tenant": "zen", "value": 2}),
            ])
        );
        assert!(
            quiet_for(&mut out, 500).await,
            "a key seen before the restart passed again"
        );
    });
}

/// A consumer refuses the first rows of keys: their batch is rejected, and the producer's
/// resend passes the deduplicator (each key was held for that batch, not kept), after which the
/// keys catch duplicates again. Eight tenants on two shards: the watches of the three branches
/// on shard 1 (the branch hash is seeded, so the spread is fixed) go over the mesh.
#[test]
fn a_deduplicated_key_whose_first_row_was_refused_passes_when_resent() {
    let dir = support::scratch_dir("dedup-refused");
    let node = Node::start_on(
        &dir,
        support::free_addr(),
        support::free_addr(),
        &["--shards", "2"],
    );
    define(&mut node.admin(), &readings_graph(DEDUP_PROCESSOR));
    let tenants = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let batch = readings(&tenants.map(|tenant| (tenant, 1)));
    let expected = sorted(
        tenants
            .iter()
            .map(|tenant| serde_json::json!({"tenant": tenant, "value": 1}))
            .collect(),
    );
    runtime().block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        let seq = input.submit(&batch).await.expect("submit");
        let mut deliveries = Vec::new();
        let mut refused = Vec::new();
        while refused.len() < tenants.len() {
            let delivery = next_delivery(&mut out, 10).await;
            refused.extend(rows(&delivery.batch, BytesAs::Hex));
            deliveries.push(delivery.seq);
        }
        assert_eq!(sorted(refused), expected);
        assert_eq!(dedup_keys(&node), (0, 8), "held while unacknowledged");
        for delivery in deliveries {
            out.nack(delivery).await.expect("nack");
        }
        assert_eq!(next_outcome(&mut input).await, (seq, Outcome::Rejected));
        let resent = input.submit(&batch).await.expect("submit");
        assert_eq!(
            receive(&mut out, tenants.len(), 10).await,
            expected,
            "the resent rows pass"
        );
        completed(&mut input, resent).await;
        submit_completed(&mut input, &batch).await;
        assert!(
            quiet_for(&mut out, 300).await,
            "a duplicate of a delivered row passed"
        );
        assert_eq!(dedup_keys(&node), (8, 0), "kept once acknowledged");
    });
}

/// The deduplication keys `/metrics` reports, summed over shards: (kept, held).
fn dedup_keys(node: &Node) -> (u64, u64) {
    let metrics = http_get(node.metrics, "/metrics");
    let sum = |state: &str| {
        metrics
            .lines()
            .filter(|line| line.starts_with("nervix_dedup_keys{"))
            .filter(|line| line.contains(&format!("state=\"{state}\"")))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    (sum("kept"), sum("held"))
}

/// A kill -9 after a periodic snapshot but before the consumer acknowledged the first row of a
/// key: the producer resends after the restart and the row passes (the snapshot did not carry
/// the key of a row still unacknowledged), while a key whose row was acknowledged before the
/// crash still catches its duplicate.
#[test]
fn a_crash_before_a_first_row_was_acknowledged_lets_its_resend_pass() {
    let dir = support::scratch_dir("dedup-crash-unacked");
    let mut node = Node::start(&dir);
    define(&mut node.admin(), &readings_graph(DEDUP_PROCESSOR));
    let rt = runtime();
    rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        let seq = input
            .submit(&readings(&[("acme", 1)]))
            .await
            .expect("submit");
        assert_eq!(receive(&mut out, 1, 10).await.len(), 1);
        completed(&mut input, seq).await;
        input
            .submit(&readings(&[("acme", 2)]))
            .await
            .expect("submit");
        let unacknowledged = next_delivery(&mut out, 10).await;
        assert_eq!(unacknowledged.batch.num_rows(), 1);
        // Periodic snapshots run every second: two have passed before the crash.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
    });
    node.kill();
    node.restart();
    rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        let seq = input
            .submit(&readings(&[("acme", 1), ("acme", 2)]))
            .await
            .expect("submit");
        assert_eq!(
            receive(&mut out, 1, 10).await,
            vec![serde_json::json!({"tenant": "acme", "value": 2})],
            "the unacknowledged row passes again; the acknowledged one is a duplicate"
        );
        completed(&mut input, seq).await;
        assert!(quiet_for(&mut out, 300).await, "one row only");
    });
}

/// `nervix state …` against `dir`; panics with its output unless it succeeds.
fn state_command(args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_nervix"))
        .arg("state")
        .args(args)
        .output()
        .expect("nervix runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "nervix state {args:?}: {text}");
    text
}

#[test]
fn a_restored_backup_brings_back_the_deduplication_keys() {
    let dir = support::scratch_dir("dedup-backup");
    let archive = dir.with_extension("state-backup");
    let _ = std::fs::remove_file(&archive);
    let mut node = Node::start(&dir);
    define(&mut node.admin(), &readings_graph(DEDUP_PROCESSOR));
    let rt = runtime();
    rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        let seq = input
            .submit(&readings(&[("acme", 1), ("zen", 1)]))
            .await
            .expect("submit");
        assert_eq!(receive(&mut out, 2, 10).await.len(), 2);
        completed(&mut input, seq).await;
    });
    node.terminate();
    let data_dir = dir.to_string_lossy().to_string();
    let archive_path = archive.to_string_lossy().to_string();
    let said = state_command(&["backup", "--data-dir", &data_dir, "--to", &archive_path]);
    assert!(said.contains("2 processor branch snapshots"), "{said}");
    // The state is lost (a new disk, say); the catalog stays.
    std::fs::remove_dir_all(dir.join("runtime-state")).expect("state removed");
    let said = state_command(&["restore", "--data-dir", &data_dir, "--from", &archive_path]);
    assert!(
        said.contains("restored 2 processor branch snapshots"),
        "{said}"
    );
    node.restart();
    rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        let seq = input
            .submit(&readings(&[("acme", 1), ("acme", 2), ("zen", 1)]))
            .await
            .expect("submit");
        let fresh = receive(&mut out, 1, 10).await;
        completed(&mut input, seq).await;
        assert_eq!(
            fresh,
            vec![serde_json::json!({"tenant": "acme", "value": 2})]
        );
        assert!(
            quiet_for(&mut out, 500).await,
            "a key in the restored backup passed again"
        );
    });
    let _ = std::fs::remove_file(&archive);
}

const CORRELATE_GRAPH: &str = "
CREATE DOMAIN cases;
USE cases;
CREATE SCHEMA order_in (tenant STRING, order_id STRING, amount I64);
CREATE SCHEMA payment_in (tenant STRING, order_id STRING, paid I64);
CREATE SCHEMA paid_order (tenant STRING, order_id STRING, amount I64, paid I64);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY orders SCHEMA order_in BRANCHED BY by_tenant;
CREATE RELAY payments SCHEMA payment_in BRANCHED BY by_tenant;
CREATE RELAY paid_orders SCHEMA paid_order BRANCHED BY by_tenant;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT PRODUCER INGESTOR payments_in
  FROM SCHEMA payment_in
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO payments
    INHERIT ALL
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CORRELATOR paid_orders_join
  LEFT FROM orders
  RIGHT FROM payments
  CORRELATE WHERE left.order_id = right.order_id
  MATCH EARLIEST
  MAX TIME 5m
  ON CORRELATION TIMEOUT DROP, DROP
  BRANCHED BY by_tenant
  TO paid_orders
    SET tenant = left.tenant,
        order_id = left.order_id,
        amount = left.amount,
        paid = right.paid
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
CREATE CLIENT CONSUMER EMITTER rows_out
  FROM paid_orders
  TO SCHEMA paid_order
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

/// Rows of `(tenant, order_id, number)` under the side schema whose number field is `number`.
fn side_rows(number: &str, rows: &[(&str, &str, i64)]) -> RecordBatch {
    let schema = std::sync::Arc::new(Schema::new(vec![
        Field::new("tenant", DataType::Utf8, false),
        Field::new("order_id", DataType::Utf8, false),
        Field::new(number, DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            std::sync::Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            std::sync::Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            std::sync::Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
        ],
    )
    .expect("batch")
}

/// How the node goes down between a pending row and its partner.
#[derive(Clone, Copy, Debug)]
enum Outage {
    /// SIGTERM: the stop writes the pending rows.
    Stop,
    /// kill -9 after the producer's batch completed (so a periodic snapshot held the row).
    Crash,
    /// SIGTERM, a `nervix state backup`, the state lost, the backup restored.
    BackupRestore,
}

/// A left row waits; the node goes down as `outage` says and comes back; the right row then
/// pairs with it exactly once.
fn correlation_across(outage: Outage) {
    let dir = support::scratch_dir(&format!("correlate-{outage:?}").to_lowercase());
    let archive = dir.with_extension("state-backup");
    let _ = std::fs::remove_file(&archive);
    let mut node = Node::start(&dir);
    define(&mut node.admin(), CORRELATE_GRAPH);
    let rt = runtime();
    let order_spec = fields(&[
        ("tenant", "STRING"),
        ("order_id", "STRING"),
        ("amount", "I64"),
    ]);
    let payment_spec = fields(&[
        ("tenant", "STRING"),
        ("order_id", "STRING"),
        ("paid", "I64"),
    ]);
    rt.block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut orders = producer(&session, "cases", "orders_in", order_spec, 16, 1 << 20).await;
        // The row is pending, so its batch completes only once a snapshot holds it.
        let batch = side_rows("amount", &[("acme", "o1", 100), ("zen", "o9", 7)]);
        submit_completed(&mut orders, &batch).await;
    });
    match outage {
        Outage::Stop => node.terminate(),
        Outage::Crash => node.kill(),
        Outage::BackupRestore => {
            node.terminate();
            let data_dir = dir.to_string_lossy().to_string();
            let archive_path = archive.to_string_lossy().to_string();
            let said = state_command(&["backup", "--data-dir", &data_dir, "--to", &archive_path]);
            assert!(said.contains("2 processor branch snapshots"), "{said}");
            std::fs::remove_dir_all(dir.join("runtime-state")).expect("state removed");
            state_command(&["restore", "--data-dir", &data_dir, "--from", &archive_path]);
        }
    }
    node.restart();
    rt.block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut out = consumer(&session, "cases", "rows_out", 16).await;
        let mut payments =
            producer(&session, "cases", "payments_in", payment_spec, 16, 1 << 20).await;
        let batch = side_rows("paid", &[("acme", "o1", 1), ("acme", "o2", 2)]);
        let seq = payments.submit(&batch).await.expect("submit");
        let pairs = receive(&mut out, 1, 10).await;
        assert_eq!(
            pairs,
            vec![serde_json::json!({"tenant": "acme", "order_id": "o1", "amount": 100, "paid": 1})],
            "{outage:?}"
        );
        completed(&mut payments, seq).await;
        assert!(
            quiet_for(&mut out, 500).await,
            "{outage:?}: the restored row paired more than once"
        );
        // The restored row left with its pair: another payment for it waits unpaired.
        let again = side_rows("paid", &[("acme", "o1", 3)]);
        submit_completed(&mut payments, &again).await;
        assert!(
            quiet_for(&mut out, 500).await,
            "{outage:?}: o1 paired twice"
        );
    });
    let _ = std::fs::remove_file(&archive);
}

#[test]
fn a_pending_correlator_row_pairs_once_after_a_stop() {
    correlation_across(Outage::Stop);
}

#[test]
fn a_pending_correlator_row_pairs_once_after_a_crash() {
    correlation_across(Outage::Crash);
}

#[test]
fn a_pending_correlator_row_pairs_once_after_a_backup_restore() {
    correlation_across(Outage::BackupRestore);
}

const REORDER_PROCESSOR: &str = "
CREATE REORDERER ordered
  FROM readings
  BY input.value
  MAX TIME 8s
  BRANCHED BY by_tenant
  TO processed
    INHERIT ALL
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
";

#[test]
fn a_reorderer_releases_its_held_rows_in_order_after_a_restart() {
    let dir = support::scratch_dir("reorder-restart");
    let mut node = Node::start(&dir);
    define(&mut node.admin(), &readings_graph(REORDER_PROCESSOR));
    let rt = runtime();
    rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        // Held for MAX TIME; the batches complete once a snapshot holds the rows.
        submit_completed(&mut input, &readings(&[("acme", 3), ("acme", 1)])).await;
        submit_completed(&mut input, &readings(&[("acme", 2)])).await;
        assert!(quiet_for(&mut out, 200).await, "held rows left early");
    });
    node.terminate();
    node.restart();
    rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        // Sent after the restart, well within the restored rows' MAX TIME: it sorts first
        // and leaves with them.
        submit_completed(&mut input, &readings(&[("acme", 0)])).await;
        let mut values = Vec::new();
        while values.len() < 4 {
            let delivery = next_delivery(&mut out, 20).await;
            for row in rows(&delivery.batch, BytesAs::Hex) {
                values.push(row["value"].as_i64().expect("value"));
            }
            out.ack(delivery.seq).await.expect("ack");
        }
        assert_eq!(values, vec![0, 1, 2, 3]);
        assert!(quiet_for(&mut out, 500).await, "a held row left twice");
    });
}
