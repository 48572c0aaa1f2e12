//! A slow consumer backpressures the producer through every bounded buffer — the emitter's
//! queue, the relays' CAPACITY, the ingestor's ACK window, the producer's credit — and nothing
//! is dropped: once the consumer reads again, every row arrives exactly once.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use nervix_net::client::Session;
use nervix_net::session::frame::Outcome;
use support::dataplane::{
    consumer, define, drain, http_get, metric, next_delivery, order_fields, orders, producer,
    rows_of, runtime,
};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE RELAY orders SCHEMA order_in UNBRANCHED CAPACITY 1;
CREATE RELAY out SCHEMA order_in UNBRANCHED CAPACITY 1;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK PARALLEL MAX 4 ACK TIMEOUT 60s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    UNBRANCHED
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE JUNCTION pass
  FROM orders
  UNBRANCHED
  TO out
    INHERIT ALL
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
CREATE CLIENT CONSUMER EMITTER out_consumer
  FROM out
  TO SCHEMA order_in
    MODE ACK PARALLEL MAX 1 ACK TIMEOUT 60s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

const BATCHES: i64 = 40;

#[test]
fn a_slow_consumer_backpressures_the_producer_and_nothing_is_dropped() {
    let dir = support::scratch_dir("backpressure");
    let node = Node::start(&dir);
    define(&mut node.admin(), GRAPH);
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut consumer = consumer(&session, "shop", "out_consumer", 1).await;
        let mut producer = producer(&session, "shop", "orders_in", order_fields(), 64, 8 << 20).await;
        for i in 0..BATCHES {
            producer
                .submit(&orders(&[("acme", "x", i)]))
                .await
                .expect("submit within credit");
        }
        // The consumer takes one delivery and holds it: everything behind it must wait.
        let held = next_delivery(&mut consumer, 5).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let metrics = http_get(node.metrics, "/metrics");
        let admitted_rows = metric(
            &metrics,
            "nervix_node_rows_total{domain=\"shop\",kind=\"ingestor\",node=\"orders_in\",direction=\"in\"}",
        )
        .expect("ingestor rows metric");
        assert!(
            admitted_rows < BATCHES as u64,
            "the ingestor admitted {admitted_rows} of {BATCHES} rows while the consumer held its \
             only credit: no backpressure"
        );
        for relay in ["orders", "out"] {
            let held_frames = metric(
                &metrics,
                &format!("nervix_relay_buffer_len{{domain=\"shop\",relay=\"{relay}\"}}"),
            )
            .expect("relay metric");
            assert!(held_frames <= 1, "relay {relay} holds {held_frames} frames over CAPACITY 1");
        }
        let completed = metric(&metrics, "nervix_batches_total{shard=\"0\",outcome=\"completed\"}")
            .unwrap_or(0);
        assert_eq!(completed, 0, "no batch can complete while its row is held");
        // Now read everything.
        let mut seen = BTreeSet::new();
        for (_, _, amount) in rows_of(&held.batch) {
            assert!(seen.insert(amount));
        }
        consumer.ack(held.seq).await.unwrap();
        while seen.len() < BATCHES as usize {
            let delivery = next_delivery(&mut consumer, 10).await;
            for (_, _, amount) in rows_of(&delivery.batch) {
                assert!(seen.insert(amount), "row {amount} delivered twice");
            }
            consumer.ack(delivery.seq).await.unwrap();
        }
        let outcomes = drain(&mut producer, 10).await;
        assert_eq!(outcomes.len(), BATCHES as usize);
        assert!(outcomes.iter().all(|(_, o)| *o == Outcome::Completed));
        assert_eq!(seen, (0..BATCHES).collect());
    });
}

const SLOW_GRAPH: &str = "
CREATE DOMAIN slow;
USE slow;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY orders SCHEMA order_in BRANCHED BY by_tenant;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK SEQUENTIAL ACK TIMEOUT 1s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER orders_out
  FROM orders
  TO SCHEMA order_in
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

#[test]
fn ack_timeout_counts_from_the_last_progress_not_from_admission() {
    let dir = support::scratch_dir("ack-progress");
    let node = Node::start(&dir);
    define(&mut node.admin(), SLOW_GRAPH);
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut consumer = consumer(&session, "slow", "orders_out", 8).await;
        let mut producer =
            producer(&session, "slow", "orders_in", order_fields(), 4, 1 << 20).await;
        // One batch, three branches: three deliveries, acknowledged 600 ms apart. The batch
        // lives 1.8 s, longer than its 1 s ACK TIMEOUT, but never 1 s without progress.
        producer
            .submit(&orders(&[("a", "x", 1), ("b", "x", 2), ("c", "x", 3)]))
            .await
            .unwrap();
        let mut pending = Vec::new();
        while pending.len() < 3 {
            pending.push(next_delivery(&mut consumer, 5).await.seq);
        }
        for seq in pending {
            tokio::time::sleep(Duration::from_millis(600)).await;
            consumer.ack(seq).await.unwrap();
        }
        let outcomes = drain(&mut producer, 5).await;
        assert_eq!(outcomes, vec![(0, Outcome::Completed)]);
    });
}
