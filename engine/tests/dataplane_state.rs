//! USING MATERIALIZED STATE over relays WITH MATERIALIZED STATE: REQUIRED WAIT holds input
//! until its branch has state, DEFAULT binds a constant record, REQUIRED SKIP suppresses the
//! input; `relay_state.<relay>.<field>` reads the branch's last row.

mod support;

use std::time::Duration;

use arrow_array::{Array, RecordBatch, StringArray};
use nervix_net::client::{Consumer, ProducerOptions, Session};
use nervix_net::session::frame::Outcome;
use support::dataplane::{
    consumer, define, drain, fields, next_delivery, order_fields, orders, producer, quiet_for,
    runtime,
};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE SCHEMA profile (tenant STRING, tier STRING);
CREATE SCHEMA enriched (tenant STRING, item STRING, tier STRING);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY orders SCHEMA order_in BRANCHED BY by_tenant;
CREATE RELAY profiles SCHEMA profile BRANCHED BY by_tenant WITH MATERIALIZED STATE LAST BY TIMESTAMP;
CREATE RELAY waited SCHEMA enriched BRANCHED BY by_tenant;
CREATE RELAY defaulted SCHEMA enriched BRANCHED BY by_tenant;
CREATE RELAY skipped SCHEMA enriched BRANCHED BY by_tenant;
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
CREATE CLIENT PRODUCER INGESTOR profiles_in
  FROM SCHEMA profile
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO profiles
    INHERIT ALL
    BRANCHED BY by_tenant SET tenant = message.tenant
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE JUNCTION wait_for_profile
  FROM orders
  BRANCHED BY by_tenant
  USING MATERIALIZED STATE profiles REQUIRED WAIT
  TO waited
    INHERIT tenant, item
    SET tier = relay_state.profiles.tier
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
CREATE JUNCTION default_profile
  FROM orders
  BRANCHED BY by_tenant
  USING MATERIALIZED STATE profiles DEFAULT {tenant = 'unknown', tier = 'none'}
  TO defaulted
    INHERIT tenant, item
    SET tier = relay_state.profiles.tier
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
CREATE JUNCTION skip_without_profile
  FROM orders
  BRANCHED BY by_tenant
  USING MATERIALIZED STATE profiles REQUIRED SKIP
  TO skipped
    INHERIT tenant, item
    SET tier = relay_state.profiles.tier
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG;
CREATE CLIENT CONSUMER EMITTER waited_out FROM waited TO SCHEMA enriched
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER defaulted_out FROM defaulted TO SCHEMA enriched
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER skipped_out FROM skipped TO SCHEMA enriched
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;
START;
";

fn enriched(batch: &RecordBatch) -> Vec<(String, String, String)> {
    let column = |i: usize| {
        batch
            .column(i)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("strings")
            .clone()
    };
    let (tenant, item, tier) = (column(0), column(1), column(2));
    (0..batch.num_rows())
        .map(|i| {
            (
                tenant.value(i).to_string(),
                item.value(i).to_string(),
                tier.value(i).to_string(),
            )
        })
        .collect()
}

async fn take(consumer: &mut Consumer) -> Vec<(String, String, String)> {
    let delivery = next_delivery(consumer, 5).await;
    consumer.ack(delivery.seq).await.expect("ack");
    enriched(&delivery.batch)
}

fn profile_batch(tenant: &str, tier: &str) -> RecordBatch {
    let schema = std::sync::Arc::new(arrow_schema::Schema::new(vec![
        arrow_schema::Field::new("tenant", arrow_schema::DataType::Utf8, false),
        arrow_schema::Field::new("tier", arrow_schema::DataType::Utf8, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            std::sync::Arc::new(StringArray::from(vec![tenant])),
            std::sync::Arc::new(StringArray::from(vec![tier])),
        ],
    )
    .expect("batch")
}

#[test]
fn required_wait_default_and_skip_resolve_materialized_state_per_branch() {
    let dir = support::scratch_dir("materialized-state");
    let node = Node::start(&dir);
    define(&mut node.admin(), GRAPH);
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut waited = consumer(&session, "shop", "waited_out", 8).await;
        let mut defaulted = consumer(&session, "shop", "defaulted_out", 8).await;
        let mut skipped = consumer(&session, "shop", "skipped_out", 8).await;
        let mut orders_in =
            producer(&session, "shop", "orders_in", order_fields(), 8, 1 << 20).await;
        let mut profiles_in = session
            .open_producer(ProducerOptions {
                domain: "shop".into(),
                ingestor: "profiles_in".into(),
                expected_fields: fields(&[("tenant", "STRING"), ("tier", "STRING")]),
                credit_batches: 8,
                credit_bytes: 1 << 20,
            })
            .await
            .unwrap();
        // An order before its tenant has a profile.
        orders_in
            .submit(&orders(&[("acme", "a", 1)]))
            .await
            .unwrap();
        assert_eq!(
            take(&mut defaulted).await,
            vec![("acme".into(), "a".into(), "none".into())]
        );
        assert!(
            quiet_for(&mut waited, 300).await,
            "REQUIRED WAIT let an order pass without state"
        );
        assert!(
            quiet_for(&mut skipped, 100).await,
            "REQUIRED SKIP let an order pass without state"
        );
        // The profile arrives: the waiting order goes on with it.
        profiles_in
            .submit(&profile_batch("acme", "gold"))
            .await
            .unwrap();
        assert_eq!(
            take(&mut waited).await,
            vec![("acme".into(), "a".into(), "gold".into())]
        );
        // Later orders of that branch read the state everywhere; the last row wins.
        profiles_in
            .submit(&profile_batch("acme", "platinum"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        orders_in
            .submit(&orders(&[("acme", "b", 2)]))
            .await
            .unwrap();
        let b = vec![("acme".to_string(), "b".to_string(), "platinum".to_string())];
        assert_eq!(take(&mut waited).await, b);
        assert_eq!(take(&mut defaulted).await, b);
        assert_eq!(take(&mut skipped).await, b);
        let outcomes = drain(&mut orders_in, 5).await;
        assert!(
            outcomes.iter().all(|(_, o)| *o == Outcome::Completed),
            "{outcomes:?}"
        );
    });
}
