//! ON MESSAGE ERROR through the real interfaces: a row whose SET fails reaches the error relay
//! with its error record while its batch-mates pass; under LOG its batch is rejected.

mod support;

use arrow_array::{Array, StringArray};
use nervix_net::client::Session;
use nervix_net::session::frame::Outcome;
use support::dataplane::{
    consumer, define, drain, next_delivery, order_fields, orders, producer, rows_of, runtime,
};
use support::Node;

fn graph(policy: &str) -> String {
    format!(
        "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE SCHEMA failure (tenant STRING, reason STRING, item STRING OPTIONAL);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY priced SCHEMA order_in BRANCHED BY by_tenant;
CREATE RELAY failures SCHEMA failure BRANCHED BY by_tenant;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK PARALLEL MAX 4 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO priced
    INHERIT tenant, item
    SET amount = 100 / (input.amount - 5)
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH IMMEDIATE
    {policy}
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER priced_out
  FROM priced
  TO SCHEMA order_in
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER failures_out
  FROM failures
  TO SCHEMA failure
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
"
    )
}

#[test]
fn a_failing_row_reaches_its_error_relay_while_its_batch_mates_pass() {
    let dir = support::scratch_dir("errors-send-to");
    let node = Node::start(&dir);
    define(
        &mut node.admin(),
        &graph(
            "ON MESSAGE ERROR SEND TO failures SET tenant = input.tenant, reason = error.message, item = partial_output.item",
        ),
    );
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut priced = consumer(&session, "shop", "priced_out", 8).await;
        let mut failures = consumer(&session, "shop", "failures_out", 8).await;
        let mut producer =
            producer(&session, "shop", "orders_in", order_fields(), 4, 1 << 20).await;
        producer
            .submit(&orders(&[
                ("acme", "a", 7),
                ("acme", "b", 5),
                ("acme", "c", 15),
            ]))
            .await
            .unwrap();
        let delivery = next_delivery(&mut priced, 5).await;
        let rows = rows_of(&delivery.batch);
        assert_eq!(
            rows,
            vec![
                ("acme".to_string(), "a".to_string(), 50),
                ("acme".to_string(), "c".to_string(), 10)
            ]
        );
        priced.ack(delivery.seq).await.unwrap();
        let failure = next_delivery(&mut failures, 5).await;
        let batch = &failure.batch;
        assert_eq!(batch.num_rows(), 1);
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
                .expect("a string column")
        };
        assert_eq!(column("tenant").value(0), "acme");
        assert_eq!(column("item").value(0), "b");
        let reason = column("reason").value(0).to_string();
        assert!(reason.contains("division by zero"), "{reason}");
        failures.ack(failure.seq).await.unwrap();
        let outcomes = drain(&mut producer, 5).await;
        assert_eq!(outcomes, vec![(0, Outcome::Completed)]);
    });
}

#[test]
fn under_log_a_failing_row_rejects_its_batch_and_the_others_still_flow() {
    let dir = support::scratch_dir("errors-log");
    let node = Node::start(&dir);
    define(&mut node.admin(), &graph("ON MESSAGE ERROR LOG"));
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut priced = consumer(&session, "shop", "priced_out", 8).await;
        let mut producer =
            producer(&session, "shop", "orders_in", order_fields(), 4, 1 << 20).await;
        producer
            .submit(&orders(&[("acme", "a", 7), ("acme", "b", 5)]))
            .await
            .unwrap();
        producer.submit(&orders(&[("zen", "z", 6)])).await.unwrap();
        let mut rows = Vec::new();
        while rows.len() < 2 {
            let delivery = next_delivery(&mut priced, 5).await;
            rows.extend(rows_of(&delivery.batch));
            priced.ack(delivery.seq).await.unwrap();
        }
        rows.sort();
        assert_eq!(
            rows,
            vec![
                ("acme".to_string(), "a".to_string(), 50),
                ("zen".to_string(), "z".to_string(), 100)
            ]
        );
        let mut outcomes = drain(&mut producer, 5).await;
        outcomes.sort_by_key(|(seq, _)| *seq);
        assert_eq!(
            outcomes,
            vec![(0, Outcome::Rejected), (1, Outcome::Completed)]
        );
        let log = node.log();
        assert!(
            log.contains("division by zero"),
            "the failure is logged: {log}"
        );
    });
}
