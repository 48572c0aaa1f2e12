//! Branch lifecycle through the real interfaces: MAX INSTANCES … EVICT LRU and TTL evictions
//! are counted by reason in `/metrics`, and an evicted branch's buffered rows are not lost.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nervix_net::client::Session;
use nervix_net::session::frame::Outcome;
use support::dataplane::{
    consumer, define, http_get, metric, next_delivery, order_fields, orders, producer, rows_of,
    runtime,
};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 1s MAX INSTANCES 2 EVICT LRU;
CREATE RELAY orders SCHEMA order_in BRANCHED BY by_tenant;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH EACH 300ms MAX BATCH SIZE 1MiB
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

fn evictions(metrics: &str, reason: &str) -> u64 {
    metric(
        metrics,
        &format!(
            "nervix_branch_evictions_total{{domain=\"shop\",branch=\"by_tenant\",shard=\"0\",reason=\"{reason}\"}}"
        ),
    )
    .unwrap_or(0)
}

#[test]
fn lru_and_ttl_evictions_are_counted_and_lose_no_rows() {
    let dir = support::scratch_dir("branches");
    let node = Node::start(&dir);
    define(&mut node.admin(), GRAPH);
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut consumer = consumer(&session, "shop", "orders_out", 8).await;
        let mut producer =
            producer(&session, "shop", "orders_in", order_fields(), 8, 1 << 20).await;
        // Three tenants into a table of two: the least recently used one is evicted, and its
        // buffered rows leave with it instead of being dropped.
        producer.submit(&orders(&[("a", "x", 1)])).await.unwrap();
        producer.submit(&orders(&[("b", "x", 2)])).await.unwrap();
        producer.submit(&orders(&[("c", "x", 3)])).await.unwrap();
        let mut seen = BTreeSet::new();
        while seen.len() < 3 {
            let delivery = next_delivery(&mut consumer, 5).await;
            for (_, _, amount) in rows_of(&delivery.batch) {
                seen.insert(amount);
            }
            consumer.ack(delivery.seq).await.unwrap();
        }
        assert_eq!(seen, BTreeSet::from([1, 2, 3]));
        let outcomes = producer.drain().await.expect("drain");
        assert!(outcomes.iter().all(|(_, o)| *o == Outcome::Completed));
        let metrics = http_get(node.metrics, "/metrics");
        assert_eq!(evictions(&metrics, "lru"), 1, "{metrics}");
        // After the TTL, the sweep releases the two that remain.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let metrics = http_get(node.metrics, "/metrics");
            if evictions(&metrics, "ttl") == 2 {
                let live = metric(
                    &metrics,
                    "nervix_branch_instances{domain=\"shop\",branch=\"by_tenant\",shard=\"0\"}",
                );
                assert_eq!(live, Some(0));
                break;
            }
            assert!(Instant::now() < deadline, "no TTL evictions: {metrics}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}
