//! A structural ALTER (entity pause) on a running domain: the graph is swapped after its rows
//! drain; a producer whose ingestor keeps its contract stays attached (admission is suspended
//! for the hold and reopens), and no row is lost across the swap. Dynamic ALTERs, applied hot,
//! are the `*_alter_dynamic.case` files of `processor_cases`.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use nervix_net::client::Session;
use support::dataplane::{
    assert_completed, consumer, define, drain, order_fields, orders, producer, rows_of, runtime,
};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE RELAY orders SCHEMA order_in UNBRANCHED;
CREATE RELAY out SCHEMA order_in UNBRANCHED;
CREATE RELAY returns SCHEMA order_in UNBRANCHED;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    UNBRANCHED
    FLUSH EACH 200ms MAX BATCH SIZE 1MiB
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
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

#[test]
fn an_alter_that_keeps_the_contract_keeps_producers_attached_and_loses_no_row() {
    let dir = support::scratch_dir("alter-live");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut consumer = consumer(&session, "shop", "out_consumer", 8).await;
        let mut producer = producer(&session, "shop", "orders_in", order_fields(), 8, 1 << 20).await;
        producer.submit(&orders(&[("a", "x", 1)])).await.unwrap();
        producer.submit(&orders(&[("a", "x", 2)])).await.unwrap();
        // The rows sit in a 200 ms FLUSH EACH buffer while the junction changes: a live
        // alteration of a processor, not of the ingestor's contract. A new input makes it
        // structural, so the buffer is force-flushed through the old junction first. The console answers once
        // the swap is done, so the consumer must keep acking meanwhile: do it from a task.
        let reader = tokio::spawn(async move {
            let mut seen = BTreeSet::new();
            while seen.len() < 4 {
                let delivery = tokio::time::timeout(Duration::from_secs(15), consumer.next())
                    .await
                    .unwrap_or_else(|_| panic!("no delivery in time; seen so far: {seen:?}"))
                    .expect("healthy")
                    .expect("not ended");
                for (_, item, amount) in rows_of(&delivery.batch) {
                    seen.insert((item, amount));
                }
                consumer.ack(delivery.seq).await.unwrap();
            }
            seen
        });
        let alter = tokio::task::spawn_blocking(move || {
            admin.ok("ALTER JUNCTION pass ADD FROM returns, REPLACE ROUTE TO out INHERIT tenant, amount SET item = upper(input.item) FLUSH IMMEDIATE ON MESSAGE ERROR LOG;");
            admin
        });
        let _admin = alter.await.expect("alter ran");
        // Still attached: new batches flow through the new junction.
        producer.submit(&orders(&[("a", "x", 3)])).await.unwrap();
        producer.submit(&orders(&[("a", "x", 4)])).await.unwrap();
        // The client resends what admission held back while the application is in a producer
        // call: drain while the reader acks.
        let outcomes = drain(&mut producer, 20).await;
        let seen = tokio::time::timeout(Duration::from_secs(20), reader)
            .await
            .expect("rows in time")
            .expect("reader");
        let amounts: BTreeSet<i64> = seen.iter().map(|(_, a)| *a).collect();
        assert_eq!(amounts, BTreeSet::from([1, 2, 3, 4]), "{seen:?}");
        assert!(seen.contains(&("x".to_string(), 1)), "old rows left through the old graph");
        assert!(seen.contains(&("X".to_string(), 4)), "new rows go through the new junction");
        assert_completed(&outcomes, 4);
        assert_eq!(producer.ended_reason(), None);
    });
}
