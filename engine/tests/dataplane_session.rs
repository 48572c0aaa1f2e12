//! The session protocol's refusals through a real node: opens refused with the spec's reasons
//! and nothing attached, and a batch that is not the ingestor's input schema refused whole as
//! `invalid: schema mismatch` without touching the graph.

mod support;

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use nervix_net::client::{ClientError, ConsumerOptions, ProducerOptions, Session};
use nervix_net::session::frame::{ConsumerRefusal, DefectKind, OpenRefusal, Outcome};
use support::dataplane::{
    consumer, define, drain, fields, order_fields, orders, producer, runtime,
};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE RELAY orders SCHEMA order_in UNBRANCHED;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
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
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE DOMAIN idle;
";

async fn open(session: &Session, domain: &str, ingestor: &str) -> Result<(), ClientError> {
    session
        .open_producer(ProducerOptions {
            domain: domain.into(),
            ingestor: ingestor.into(),
            expected_fields: order_fields(),
            credit_batches: 4,
            credit_bytes: 1 << 20,
        })
        .await
        .map(|_| ())
}

#[test]
fn opens_are_refused_with_the_spec_reasons() {
    let dir = support::scratch_dir("session-refusals");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    admin.ok("USE shop;");
    admin.ok("START;");
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let refused = |r: Result<(), ClientError>| match r {
            Err(ClientError::Refused(reason)) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(
            refused(open(&session, "nowhere", "orders_in").await),
            OpenRefusal::DomainNotFound
        );
        assert_eq!(
            refused(open(&session, "idle", "orders_in").await),
            OpenRefusal::DomainStopped
        );
        assert_eq!(
            refused(open(&session, "shop", "nope").await),
            OpenRefusal::IngestorNotFound
        );
        let differ = session
            .open_producer(ProducerOptions {
                domain: "shop".into(),
                ingestor: "orders_in".into(),
                expected_fields: fields(&[("tenant", "STRING"), ("item", "STRING")]),
                credit_batches: 4,
                credit_bytes: 1 << 20,
            })
            .await
            .map(|_| ());
        assert_eq!(refused(differ), OpenRefusal::FieldsDiffer);
        let too_much = session
            .open_producer(ProducerOptions {
                domain: "shop".into(),
                ingestor: "orders_in".into(),
                expected_fields: order_fields(),
                credit_batches: 1_000_000,
                credit_bytes: 1 << 20,
            })
            .await
            .map(|_| ());
        assert_eq!(refused(too_much), OpenRefusal::CreditTooLarge);
        let consumer_refused = session
            .open_consumer(ConsumerOptions {
                domain: "shop".into(),
                emitter: "missing".into(),
                credit_batches: 4,
            })
            .await
            .map(|_| ());
        assert!(
            matches!(
                consumer_refused,
                Err(ClientError::ConsumerRefused(
                    ConsumerRefusal::EmitterNotFound
                ))
            ),
            "{consumer_refused:?}"
        );
        // After every refusal the session still works.
        let mut good = producer(&session, "shop", "orders_in", order_fields(), 4, 1 << 20).await;
        let mut reader = consumer(&session, "shop", "orders_out", 4).await;
        good.submit(&orders(&[("a", "x", 1)]))
            .await
            .expect("submit");
        let delivery = tokio::time::timeout(Duration::from_secs(5), reader.next())
            .await
            .expect("in time")
            .expect("healthy")
            .expect("not ended");
        reader.ack(delivery.seq).await.expect("ack");
        let outcomes = good.drain().await.expect("drain");
        assert_eq!(outcomes, vec![(0, Outcome::Completed)]);
    });
}

#[test]
fn a_batch_that_is_not_the_input_schema_is_refused_whole() {
    let dir = support::scratch_dir("session-invalid");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    admin.ok("USE shop;");
    admin.ok("START;");
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut good = producer(&session, "shop", "orders_in", order_fields(), 4, 1 << 20).await;
        // Same names, but `amount` is a STRING column: a schema mismatch.
        let schema = Arc::new(Schema::new(vec![
            Field::new("tenant", DataType::Utf8, false),
            Field::new("item", DataType::Utf8, false),
            Field::new("amount", DataType::Utf8, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["a"])),
            Arc::new(StringArray::from(vec!["x"])),
            Arc::new(StringArray::from(vec!["1"])),
        ];
        let wrong = RecordBatch::try_new(schema, columns).expect("batch");
        good.submit(&wrong).await.expect("sent");
        let outcomes = drain(&mut good, 5).await;
        match &outcomes[..] {
            [(0, Outcome::Invalid { defect, detail })] => {
                assert_eq!(*defect, DefectKind::SchemaMismatch, "{detail}");
            }
            other => panic!("expected one invalid outcome, got {other:?}"),
        }
    });
    let metrics = support::dataplane::http_get(node.metrics, "/metrics");
    assert_eq!(
        support::dataplane::metric(
            &metrics,
            "nervix_batches_total{shard=\"0\",outcome=\"invalid\"}"
        ),
        Some(1)
    );
    assert_eq!(
        support::dataplane::metric(
            &metrics,
            "nervix_node_rows_total{domain=\"shop\",kind=\"ingestor\",node=\"orders_in\",direction=\"in\"}"
        ),
        Some(0),
        "nothing of an invalid batch reaches the graph"
    );
}
