//! KAFKA TOPIC emitters writing codec bodies, through a real node against librdkafka's mock
//! cluster: a WIRE CBOR codec writes one CBOR map per record, a JAQ codec's ON EMITTING (run
//! on the extension workers) writes the program's output in CBOR, both read back from their
//! topics, decoded and compared in frame order; a row the program refuses is not produced and
//! becomes an error record under ON MESSAGE ERROR SEND TO, itself produced as plain JSON.

mod support;

#[path = "support/kafka.rs"]
mod kafka;

use std::time::Duration;

use nervix_net::session::frame::Outcome;
use support::dataplane::{define, order_fields, orders, producer, runtime};
use support::Node;

fn graph(bootstrap: &str) -> String {
    format!(
        "
CREATE DOMAIN kout;
USE kout;
CREATE SCHEMA order_row (tenant STRING, item STRING, amount I64);
CREATE WIRE CBOR SCHEMA order_cbor MODE STRICT (tenant string, item string, amount integer);
CREATE CODEC cbor_codec FROM WIRE CBOR SCHEMA order_cbor TO SCHEMA order_row;
CREATE CODEC jaq_codec FROM CBOR TO SCHEMA order_row WITH JAQ TRANSFORMATIONS
  ON EMITTING 'if .amount < 0 then error(\"negative amount\") else {{who: .tenant, cents: (.amount * 100)}} end';
CREATE RELAY orders SCHEMA order_row UNBRANCHED;
CREATE SCHEMA refusal (item STRING, reason STRING);
CREATE RELAY refusals SCHEMA refusal UNBRANCHED;
CREATE CLIENT kafka_main TYPE KAFKA CONFIG {{'bootstrap.servers' = '{bootstrap}'}};
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_row
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE KAFKA TOPIC EMITTER cbor_out
  FROM orders
  TO kafka_main TOPIC 'cbor' KEY input.item
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 20s
    RETRY POLICY BACKOFF 10ms MAX 100ms
    ENCODE USING cbor_codec
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE KAFKA TOPIC EMITTER jaq_out
  FROM orders
  TO kafka_main TOPIC 'jaq' KEY input.item
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 20s
    RETRY POLICY BACKOFF 10ms MAX 100ms
    ENCODE USING jaq_codec
  FLUSH IMMEDIATE
  ON MESSAGE ERROR SEND TO refusals
    SET item = input.item, reason = error.message
  ON GENERAL ERROR LOG;
CREATE KAFKA TOPIC EMITTER refusals_out
  FROM refusals
  TO kafka_main TOPIC 'refused'
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 20s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
"
    )
}

/// One CBOR item that fills `bytes` exactly, as JSON.
fn cbor(bytes: &[u8]) -> serde_json::Value {
    let mut reader = std::io::Cursor::new(bytes);
    let value = ciborium::from_reader(&mut reader).expect("a CBOR item");
    assert_eq!(reader.position() as usize, bytes.len(), "nothing after it");
    value
}

#[test]
fn cbor_and_jaq_records_read_back_in_order_and_a_refused_row_becomes_an_error_record() {
    let cluster = kafka::cluster(1);
    let bootstrap = cluster.bootstrap_servers();
    for topic in ["cbor", "jaq", "refused"] {
        cluster.create_topic(topic, 1).expect("topic");
    }
    let node = Node::start(&support::scratch_dir("egress_kafka_codecs"));
    define(&mut node.admin(), &graph(&bootstrap));

    let batches = [
        vec![("t1", "a", 1), ("t2", "b", -2), ("t3", "c", 3)],
        vec![("t4", "d", 4)],
    ];
    let rt = runtime();
    let outcomes = rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut producer =
            producer(&session, "kout", "orders_in", order_fields(), 4, 1 << 20).await;
        let mut outcomes = Vec::new();
        for rows in &batches {
            producer.submit(&orders(rows)).await.expect("submit");
            let (_, outcome) =
                tokio::time::timeout(Duration::from_secs(30), producer.next_outcome())
                    .await
                    .expect("an outcome in time")
                    .expect("healthy")
                    .expect("an outcome");
            outcomes.push(outcome);
        }
        outcomes
    });
    assert_eq!(
        outcomes,
        vec![Outcome::Completed, Outcome::Completed],
        "every row produced or sent to refusals"
    );

    let all: Vec<_> = batches.iter().flatten().collect();
    let read = kafka::read_until(&bootstrap, "cbor", 30, |read| read.len() >= all.len());
    assert_eq!(read.len(), all.len(), "{read:?}");
    for (record, (tenant, item, amount)) in read.iter().zip(&all) {
        assert_eq!(record.key.as_deref(), Some(*item));
        assert_eq!(
            cbor(&record.payload),
            serde_json::json!({"tenant": tenant, "item": item, "amount": amount})
        );
    }

    let produced: Vec<_> = all.iter().filter(|(_, _, amount)| *amount >= 0).collect();
    let read = kafka::read_until(&bootstrap, "jaq", 30, |read| read.len() >= produced.len());
    assert_eq!(read.len(), produced.len(), "{read:?}");
    for (record, (tenant, item, amount)) in read.iter().zip(&produced) {
        assert_eq!(record.key.as_deref(), Some(*item));
        assert_eq!(
            cbor(&record.payload),
            serde_json::json!({"who": tenant, "cents": amount * 100})
        );
    }

    let refused = kafka::read_until(&bootstrap, "refused", 30, |read| !read.is_empty());
    assert_eq!(refused.len(), 1, "{refused:?}");
    let record: serde_json::Value = serde_json::from_str(&refused[0].value).expect("JSON");
    assert_eq!(record["item"], "b");
    let reason = record["reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("cannot encode the row: the ON EMITTING program failed")
            && reason.contains("negative amount"),
        "{reason}"
    );
}
