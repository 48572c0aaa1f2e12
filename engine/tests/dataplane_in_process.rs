//! The in-process client keeps to the session protocol's credit: a producer whose batches
//! would pass its granted bytes waits for outcomes instead of sending them (the shard would
//! answer credit exceeded and end it as a protocol violation), and goes on once the consumer
//! acknowledges and credit returns.

mod support;

use std::num::NonZeroUsize;
use std::time::Duration;

use nervix::embedded::{scratch_data_dir, EmbeddedConfig, EmbeddedNode};
use nervix::runtime::in_process::{InProcessConsumer, InProcessProducer};
use nervix::runtime::logical_bytes::logical_bytes;
use nervix_net::session::frame::Outcome;
use support::dataplane::{order_fields, orders, rows_of};

const SCRIPT: &str = "
CREATE DOMAIN credit;
USE credit;
CREATE SCHEMA order_row (tenant STRING, item STRING, amount I64);
CREATE RELAY orders SCHEMA order_row UNBRANCHED;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_row
    MODE ACK PARALLEL MAX 64 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    UNBRANCHED
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER orders_out
  FROM orders
  TO SCHEMA order_row
    MODE ACK PARALLEL MAX 64 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

/// Batches granted: more than the bytes allow, so bytes are the binding limit.
const CREDIT_BATCHES: u32 = 16;
/// Batches the test sends.
const BATCHES: i64 = 8;
/// Batches the granted bytes hold.
const BATCHES_IN_BYTES: u64 = 3;

#[tokio::test(flavor = "current_thread")]
async fn a_producer_waits_for_byte_credit_instead_of_passing_it() {
    let data_dir = scratch_data_dir("in-process-credit");
    let mut node = EmbeddedNode::start(EmbeddedConfig::loopback(
        data_dir.clone(),
        NonZeroUsize::MIN,
    ))
    .await
    .expect("an embedded node starts");
    node.run(SCRIPT).await.expect("the graph is defined");

    let batch = |n: i64| orders(&[("acme", "book", n), ("zen", "pen", n)]);
    let batch_bytes = logical_bytes(&batch(0));
    let mut producer = open_producer(&node, batch_bytes * BATCHES_IN_BYTES).await;

    // The first batches fit; the next must wait: nobody consumes, so no outcome comes.
    for n in 0..BATCHES_IN_BYTES as i64 {
        producer.submit(batch(n)).await.expect("submitted");
    }
    let blocked = tokio::time::timeout(
        Duration::from_millis(300),
        producer.submit(batch(BATCHES_IN_BYTES as i64)),
    )
    .await;
    assert!(blocked.is_err(), "a batch past the granted bytes was sent");

    // A consumer acknowledges; credit returns and every batch completes.
    let mut consumer = InProcessConsumer::open(node.data_plane.clone(), "credit", "orders_out", 64)
        .await
        .expect("consumer opens");
    let expected_rows = (BATCHES * 2) as usize;
    let reading = async {
        let mut amounts = Vec::new();
        while amounts.len() < expected_rows {
            let (seq, delivered) = consumer.next().await.expect("a delivery");
            amounts.extend(rows_of(&delivered).into_iter().map(|(_, _, n)| n));
            consumer.ack(seq).await.expect("ack");
        }
        amounts
    };
    let sending = async {
        for n in BATCHES_IN_BYTES as i64..BATCHES {
            producer.submit(batch(n)).await.expect("submitted");
        }
        let mut outcomes = Vec::new();
        while outcomes.len() < BATCHES as usize {
            outcomes.push(producer.next_outcome().await.expect("an outcome").1);
        }
        outcomes
    };
    let (mut amounts, outcomes) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(reading, sending)
    })
    .await
    .expect("every batch is delivered and answered");
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Completed),
        "outcomes: {outcomes:?}"
    );
    amounts.sort_unstable();
    let mut want: Vec<i64> = (0..BATCHES).flat_map(|n| [n, n]).collect();
    want.sort_unstable();
    assert_eq!(amounts, want);

    producer.close().await;
    consumer.close().await;
    node.shutdown(1_000).await;
    let _ = std::fs::remove_dir_all(&data_dir);
}

async fn open_producer(node: &EmbeddedNode, credit_bytes: u64) -> InProcessProducer {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match InProcessProducer::open(
            node.data_plane.clone(),
            "credit",
            "orders_in",
            order_fields(),
            CREDIT_BATCHES,
            credit_bytes,
        )
        .await
        {
            Ok(producer) => return producer,
            // The domain may still be deploying its graph.
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => panic!("the producer does not open: {error}"),
        }
    }
}
