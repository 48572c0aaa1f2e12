//! The first end-to-end graphs through the real interfaces: a `nervix serve` process, its
//! console, and client producers and consumers over the session protocol (the Rust client
//! library). Producer → ingestor (branching by tenant) → junction (`contains` filter, `upper`
//! map) → CLIENT CONSUMER emitter.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use nervix_net::client::{ProducerOptions, Session};
use support::dataplane::{
    assert_completed, consumer, define, drain, next_delivery, order_fields, orders, producer,
    rows_of, runtime,
};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY orders SCHEMA order_in BRANCHED BY by_tenant CAPACITY 8;
CREATE RELAY picked SCHEMA order_in BRANCHED BY by_tenant CAPACITY 8;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK PARALLEL MAX 4 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE JUNCTION pick
  FROM orders
  FILTER WHERE contains(input.item, 'a')
  BRANCHED BY by_tenant
  TO picked
    INHERIT tenant, amount
    SET item = upper(input.item)
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
CREATE CLIENT CONSUMER EMITTER picked_out
  FROM picked
  TO SCHEMA order_in
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

#[test]
fn producer_to_junction_to_consumer_delivers_exactly_the_matching_rows_per_branch() {
    let dir = support::scratch_dir("dataplane-e2e");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut consumer = consumer(&session, "shop", "picked_out", 4).await;
        let mut producer =
            producer(&session, "shop", "orders_in", order_fields(), 4, 1 << 20).await;
        let sent = [
            vec![
                ("acme", "banana", 3),
                ("zen", "kiwi", 1),
                ("acme", "apple", 2),
            ],
            vec![("zen", "mango", 7), ("acme", "fig", 5)],
            vec![("ink", "grape", 9)],
        ];
        for rows in &sent {
            producer.submit(&orders(rows)).await.expect("submit");
        }
        let mut received: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
        let expected_rows = 4;
        let mut got = 0;
        while got < expected_rows {
            let delivery = tokio::time::timeout(Duration::from_secs(10), consumer.next())
                .await
                .expect("a delivery in time")
                .expect("consumer healthy")
                .expect("not ended");
            for (tenant, item, amount) in rows_of(&delivery.batch) {
                // One delivery is one concrete branch.
                received.entry(tenant).or_default().push((item, amount));
                got += 1;
            }
            consumer.ack(delivery.seq).await.expect("ack");
        }
        let outcomes = drain(&mut producer, 10).await;
        assert_completed(&outcomes, 3);
        let mut expected: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
        expected.insert(
            "acme".into(),
            vec![("BANANA".into(), 3), ("APPLE".into(), 2)],
        );
        expected.insert("zen".into(), vec![("MANGO".into(), 7)]);
        expected.insert("ink".into(), vec![("GRAPE".into(), 9)]);
        assert_eq!(received, expected);
        // SHOW and DESCRIBE carry the running graph's figures.
        let ingestors = admin.ok("SHOW INGESTORS;");
        assert_eq!(
            ingestors,
            vec![
                "orders_in from=CLIENT PRODUCER schema=order_in owner=node-1 status=running \
                 admission=open producers=1 outstanding_batches=0 outstanding_bytes=0 \
                 admitted_batches=0"
                    .to_string()
            ]
        );
        let junction = admin.ok("DESCRIBE JUNCTION pick;");
        assert!(
            junction.contains(&"status: running".to_string()),
            "{junction:?}"
        );
        assert!(junction.contains(&"rows in: 6".to_string()), "{junction:?}");
        assert!(
            junction.contains(&"rows out: 4".to_string()),
            "{junction:?}"
        );
        let relay = admin.ok("DESCRIBE RELAY picked;");
        assert!(
            relay.contains(&"rows published: 4".to_string()),
            "{relay:?}"
        );
        let branch = admin.ok("DESCRIBE BRANCH by_tenant;");
        assert!(branch.contains(&"instances: 3".to_string()), "{branch:?}");
        admin.ok("STOP;");
        let stopped = admin.ok("SHOW JUNCTIONS;");
        assert_eq!(
            stopped,
            vec!["pick owner=node-1 status=stopped".to_string()]
        );
        let refused = session
            .open_producer(ProducerOptions {
                domain: "shop".into(),
                ingestor: "orders_in".into(),
                expected_fields: order_fields(),
                credit_batches: 4,
                credit_bytes: 1 << 20,
            })
            .await;
        assert!(
            matches!(
                refused,
                Err(nervix_net::client::ClientError::Refused(
                    nervix_net::session::frame::OpenRefusal::DomainStopped
                ))
            ),
            "{:?}",
            refused.err()
        );
    });
    drop(node);
}

/// A consumer emitter whose FLUSH EACH gathers two whole client batches into one flush.
const GATHERING_GRAPH: &str = "
CREATE DOMAIN bulk;
USE bulk;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE RELAY orders SCHEMA order_in UNBRANCHED CAPACITY 8;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK PARALLEL MAX 4 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    UNBRANCHED
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER orders_out
  FROM orders
  TO SCHEMA order_in
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH EACH 2s MAX BATCH SIZE 64MiB
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

#[test]
fn a_flush_larger_than_one_delivery_reaches_the_consumer_in_bounded_deliveries() {
    let dir = support::scratch_dir("dataplane-bounded-deliveries");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GATHERING_GRAPH);
    const BATCH_ROWS: i64 = 40_000;
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut consumer = consumer(&session, "bulk", "orders_out", 4).await;
        let mut producer =
            producer(&session, "bulk", "orders_in", order_fields(), 4, 16 << 20).await;
        // Two batches of 40,000 rows inside one 2 s flush: 80,000 rows, more than the 65,536
        // one delivery may carry.
        for batch in 0..2 {
            let rows: Vec<(&str, &str, i64)> = (0..BATCH_ROWS)
                .map(|i| ("t", "item", batch * BATCH_ROWS + i))
                .collect();
            producer.submit(&orders(&rows)).await.expect("submit");
        }
        let mut amounts = Vec::new();
        let mut sizes = Vec::new();
        while amounts.len() < 2 * BATCH_ROWS as usize {
            let delivery = next_delivery(&mut consumer, 10).await;
            sizes.push(delivery.batch.num_rows());
            amounts.extend(rows_of(&delivery.batch).into_iter().map(|(_, _, a)| a));
            consumer.ack(delivery.seq).await.expect("ack");
        }
        assert!(
            sizes
                .iter()
                .all(|&n| n <= nervix_net::batch::MAX_BATCH_ROWS),
            "{sizes:?}"
        );
        assert!(
            sizes.contains(&nervix_net::batch::MAX_BATCH_ROWS),
            "one flush held more rows than a delivery: {sizes:?}"
        );
        assert_eq!(
            amounts,
            (0..2 * BATCH_ROWS).collect::<Vec<_>>(),
            "every row, in order"
        );
        // The split deliveries' acknowledgements complete both batches.
        let outcomes = drain(&mut producer, 10).await;
        assert_completed(&outcomes, 2);
    });
    drop(node);
}
