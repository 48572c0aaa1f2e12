//! Paced domain time through the real interfaces: `START AT '<instant>' TIME RATE f` runs the
//! domain's `now()` from that instant at `f` times the wall clock, and a node that restarts
//! continues it from the START's recorded wall time instead of starting it over.
//!
//! A row's `now()` is bracketed by wall-clock readings the test takes around the START and
//! around the row's trip, scaled by the rate: the START ran between `defined_from` and
//! `defined_to`, the row was evaluated between `sent` and `received`.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow_array::{Array, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use arrow_schema::{DataType, Field, Schema};
use support::dataplane::{consumer, define, fields, next_delivery, producer, runtime};
use support::Node;

/// `2000-01-01T00:00:00Z` in ns.
const ANCHOR_NS: i64 = 946_684_800_000_000_000;
const RATE: i64 = 100;
/// Slack for the monotonic clock drifting from the wall clock during the test, logical ns.
const SLACK_NS: i64 = 50_000_000 * RATE;

const GRAPH: &str = "
CREATE DOMAIN cases;
USE cases;
CREATE SCHEMA reading (sensor STRING, value I64);
CREATE SCHEMA stamped (sensor STRING, value I64, seen_at DATETIME);
CREATE RELAY readings SCHEMA reading UNBRANCHED;
CREATE RELAY stamped_readings SCHEMA stamped UNBRANCHED;
CREATE CLIENT PRODUCER INGESTOR rows_in
  FROM SCHEMA reading
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO readings
    INHERIT ALL
    UNBRANCHED
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE JUNCTION stamp
  FROM readings
  UNBRANCHED
  TO stamped_readings
    INHERIT ALL
    SET seen_at = now()
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
CREATE CLIENT CONSUMER EMITTER rows_out
  FROM stamped_readings
  TO SCHEMA stamped
    MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START AT '2000-01-01T00:00:00Z' TIME RATE 100;
";

fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_nanos() as i64
}

fn reading(value: i64) -> RecordBatch {
    let schema = std::sync::Arc::new(Schema::new(vec![
        Field::new("sensor", DataType::Utf8, false),
        Field::new("value", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            std::sync::Arc::new(StringArray::from_iter_values(["s"])),
            std::sync::Arc::new(Int64Array::from_iter_values([value])),
        ],
    )
    .expect("batch")
}

/// Sends one row and returns (wall before sending, its `now()`, wall after receiving it).
fn stamp(node: &Node, value: i64) -> (i64, i64, i64) {
    runtime().block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut out = consumer(&session, "cases", "rows_out", 16).await;
        let spec = fields(&[("sensor", "STRING"), ("value", "I64")]);
        let mut input = producer(&session, "cases", "rows_in", spec, 16, 1 << 20).await;
        let sent = wall_ns();
        input.submit(&reading(value)).await.expect("submit");
        let delivery = next_delivery(&mut out, 10).await;
        let received = wall_ns();
        out.ack(delivery.seq).await.expect("ack");
        let column = delivery
            .batch
            .column_by_name("seen_at")
            .expect("a seen_at column");
        let seen = column
            .as_any()
            .downcast_ref::<TimestampNanosecondArray>()
            .expect("DATETIME is ns timestamps");
        assert_eq!(seen.len(), 1);
        (sent, seen.value(0), received)
    })
}

/// Asserts `seen` is the domain time of an evaluation between `sent` and `received` for a
/// START between `defined_from` and `defined_to`.
fn assert_paced(defined: (i64, i64), (sent, seen, received): (i64, i64, i64), what: &str) {
    let (defined_from, defined_to) = defined;
    let low = ANCHOR_NS + (sent - defined_to) * RATE - SLACK_NS;
    let high = ANCHOR_NS + (received - defined_from) * RATE + SLACK_NS;
    assert!(
        (low..=high).contains(&seen),
        "{what}: now() = {seen}, expected within [{low}, {high}] \
         ({:.1} s of domain time after the anchor)",
        (seen - ANCHOR_NS) as f64 / 1e9
    );
}

#[test]
fn a_paced_domain_runs_from_its_instant_at_its_rate_and_continues_across_a_restart() {
    let dir = support::scratch_dir("paced-restart");
    let mut node = Node::start(&dir);
    let defined_from = wall_ns();
    define(&mut node.admin(), GRAPH);
    let defined_to = wall_ns();
    let defined = (defined_from, defined_to);

    let before = stamp(&node, 1);
    assert_paced(defined, before, "before the restart");

    // Let domain time move on by whole logical minutes while the node is down.
    node.terminate();
    std::thread::sleep(Duration::from_millis(700));
    node.restart();

    let after = stamp(&node, 2);
    assert_paced(defined, after, "after the restart");
    assert!(
        after.1 - before.1 >= 70 * 1_000_000_000,
        "domain time went on while the node was down: {} s",
        (after.1 - before.1) as f64 / 1e9
    );
}
