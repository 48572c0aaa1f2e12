//! kill -9 mid-stream: the node restarts from its catalog with the domain still started; the
//! producer resends every batch that had no terminal outcome, the consumer reattaches, and
//! every row is delivered at least once (duplicates allowed and counted).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use nervix_net::client::Session;
use nervix_net::session::frame::Outcome;
use support::dataplane::{
    consumer, define, drain, order_fields, orders, producer, rows_of, runtime,
};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY orders SCHEMA order_in BRANCHED BY by_tenant;
CREATE RELAY out SCHEMA order_in BRANCHED BY by_tenant;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_in
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders
    INHERIT ALL
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE JUNCTION pass
  FROM orders
  BRANCHED BY by_tenant
  TO out
    INHERIT ALL
    FLUSH EACH 20ms MAX BATCH SIZE 1MiB
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

const BATCHES: i64 = 30;
const ROWS_PER_BATCH: i64 = 10;

fn batch(index: i64) -> arrow_array::RecordBatch {
    let rows: Vec<(String, i64)> = (0..ROWS_PER_BATCH)
        .map(|r| (format!("t{}", r % 3), index * ROWS_PER_BATCH + r))
        .collect();
    let refs: Vec<(&str, &str, i64)> = rows.iter().map(|(t, id)| (t.as_str(), "x", *id)).collect();
    orders(&refs)
}

#[test]
fn kill_9_mid_stream_then_resend_delivers_every_row_at_least_once() {
    let dir = support::scratch_dir("recovery");
    let mut node = Node::start(&dir);
    define(&mut node.admin(), GRAPH);
    let rt = runtime();
    let mut seen: BTreeMap<i64, u32> = BTreeMap::new();
    // Batches the application must keep until they complete (spec: it replays them).
    let mut unfinished: BTreeSet<i64> = (0..BATCHES).collect();
    rt.block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut consumer = consumer(&session, "shop", "out_consumer", 8).await;
        let mut producer =
            producer(&session, "shop", "orders_in", order_fields(), 32, 4 << 20).await;
        let mut seq_to_batch = BTreeMap::new();
        for index in 0..BATCHES {
            let seq = producer.submit(&batch(index)).await.expect("submit");
            seq_to_batch.insert(seq, index);
        }
        // Read a part of the stream, acking it, then the node dies without warning.
        for _ in 0..3 {
            let Ok(Ok(Some(delivery))) =
                tokio::time::timeout(Duration::from_secs(5), consumer.next()).await
            else {
                break;
            };
            for (_, _, id) in rows_of(&delivery.batch) {
                *seen.entry(id).or_default() += 1;
            }
            let _ = consumer.ack(delivery.seq).await;
        }
        while let Ok(Ok(Some((seq, outcome)))) =
            tokio::time::timeout(Duration::from_millis(200), producer.next_outcome()).await
        {
            if outcome == Outcome::Completed {
                unfinished.remove(&seq_to_batch[&seq]);
            }
        }
    });
    assert!(
        !unfinished.is_empty(),
        "some batches must still be in flight at the crash"
    );
    node.kill();
    node.restart();
    rt.block_on(async {
        let session = Session::connect(node.session)
            .await
            .expect("session after restart");
        let mut consumer = consumer(&session, "shop", "out_consumer", 8).await;
        let mut producer =
            producer(&session, "shop", "orders_in", order_fields(), 32, 4 << 20).await;
        let resend: Vec<i64> = unfinished.iter().copied().collect();
        for index in &resend {
            producer.submit(&batch(*index)).await.expect("resend");
        }
        let expected: BTreeSet<i64> = resend
            .iter()
            .flat_map(|b| (b * ROWS_PER_BATCH)..((b + 1) * ROWS_PER_BATCH))
            .collect();
        let mut got_after = BTreeSet::new();
        while !expected.is_subset(&got_after) {
            let delivery = tokio::time::timeout(Duration::from_secs(10), consumer.next())
                .await
                .expect("deliveries after restart")
                .expect("healthy")
                .expect("not ended");
            for (_, _, id) in rows_of(&delivery.batch) {
                got_after.insert(id);
                *seen.entry(id).or_default() += 1;
            }
            consumer.ack(delivery.seq).await.expect("ack");
        }
        let outcomes = drain(&mut producer, 10).await;
        assert!(outcomes.iter().all(|(_, o)| *o == Outcome::Completed));
    });
    // Every row of every batch, at least once.
    let all: BTreeSet<i64> = (0..BATCHES * ROWS_PER_BATCH).collect();
    let seen_ids: BTreeSet<i64> = seen.keys().copied().collect();
    let missing: Vec<&i64> = all.difference(&seen_ids).collect();
    assert!(missing.is_empty(), "rows never delivered: {missing:?}");
    let duplicates = seen.values().filter(|n| **n > 1).count();
    eprintln!(
        "recovery: {} rows, {duplicates} delivered more than once, {} batches resent",
        all.len(),
        unfinished.len()
    );
}
