//! Processor state across a node restart, through the real interfaces: a window that was open
//! when the node stopped gives, after the restart, exactly the record an uninterrupted run
//! gives; a deduplicator still knows the keys it saw before the restart, and after its state
//! was lost and restored from a `nervix state backup` file.
//!
//! Window rows are acknowledged once a snapshot holding them is durable, so the producer's
//! batch completes before the node stops, and the restored window is the only place those
//! rows live.

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
use support::dataplane::{consumer, define, fields, next_delivery, producer, quiet_for, runtime};
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

const DEDUP_GRAPH: &str = "
CREATE DOMAIN cases;
USE cases;
CREATE SCHEMA reading (tenant STRING, value I64);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY readings SCHEMA reading BRANCHED BY by_tenant;
CREATE RELAY unique_readings SCHEMA reading BRANCHED BY by_tenant;
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
CREATE DEDUPLICATOR once
  FROM readings
  DEDUPLICATE ON input.value
  MAX TIME 10m
  BRANCHED BY by_tenant
  TO unique_readings
    INHERIT ALL
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
CREATE CLIENT CONSUMER EMITTER rows_out
  FROM unique_readings
  TO SCHEMA reading
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
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

/// Waits until batch `seq` completed (every row acknowledged).
async fn completed(producer: &mut Producer, seq: u64) {
    let outcome = tokio::time::timeout(Duration::from_secs(10), producer.next_outcome())
        .await
        .expect("an outcome in time")
        .expect("producer healthy")
        .expect("producer open");
    assert_eq!(outcome, (seq, Outcome::Completed));
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

/// Feeds two batches into the window, restarting the node between them when asked; the
/// records the window emits.
fn window_records(restart: bool) -> Vec<Value> {
    let name = if restart {
        "window-restart"
    } else {
        "window-uninterrupted"
    };
    let dir = support::scratch_dir(name);
    let mut node = Node::start(&dir);
    define(&mut node.admin(), WINDOW_GRAPH);
    let rt = runtime();
    rt.block_on(async {
        let (_session, mut input, _out) = attach(&node).await;
        submit_completed(
            &mut input,
            &readings(&[("acme", 5), ("acme", 7), ("zen", 40)]),
        )
        .await;
    });
    if restart {
        node.terminate();
        node.restart();
    }
    rt.block_on(async {
        let (_session, mut input, mut out) = attach(&node).await;
        submit_completed(&mut input, &readings(&[("acme", 3), ("zen", 2)])).await;
        let records = receive(&mut out, 2, 20).await;
        assert!(quiet_for(&mut out, 300).await, "only one record per branch");
        records
    })
}

#[test]
fn a_restart_mid_window_gives_the_uninterrupted_record() {
    let uninterrupted = window_records(false);
    let expected = sorted(vec![
        serde_json::json!({"tenant": "acme", "n": 3, "total": 15, "low": 3}),
        serde_json::json!({"tenant": "zen", "n": 2, "total": 42, "low": 2}),
    ]);
    assert_eq!(uninterrupted, expected);
    assert_eq!(window_records(true), uninterrupted);
}

#[test]
fn a_deduplicator_remembers_its_keys_across_a_restart() {
    let dir = support::scratch_dir("dedup-restart");
    let mut node = Node::start(&dir);
    define(&mut node.admin(), DEDUP_GRAPH);
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
    define(&mut node.admin(), DEDUP_GRAPH);
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
