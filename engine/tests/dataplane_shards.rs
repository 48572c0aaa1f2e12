//! Several shards: branches hash to their shard (arrow-row key, fixed-seed xxh3), frames and
//! acknowledgements cross the shard mesh, and the graph delivers exactly what one shard does.

mod support;

use std::collections::BTreeMap;

use nervix_net::client::Session;
use nervix_net::session::frame::Outcome;
use support::dataplane::{
    consumer, define, drain, http_get, metric, next_delivery, order_fields, orders, producer,
    rows_of, runtime,
};
use support::{free_addr, Node};

const GRAPH: &str = "
CREATE DOMAIN shop;
USE shop;
CREATE SCHEMA order_in (tenant STRING, item STRING, amount I64);
CREATE SCHEMA tenant_key (tenant STRING);
CREATE BRANCH by_tenant SCHEMA tenant_key TTL 5m;
CREATE RELAY orders SCHEMA order_in BRANCHED BY by_tenant CAPACITY 4;
CREATE RELAY picked SCHEMA order_in BRANCHED BY by_tenant CAPACITY 4;
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
CREATE JUNCTION pick
  FROM orders
  FILTER WHERE input.amount % 2 = 0
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

const TENANTS: usize = 16;
const BATCHES: i64 = 50;

#[test]
fn two_shards_deliver_every_matching_row_once_and_place_branches_on_both() {
    let dir = support::scratch_dir("two-shards");
    let node = Node::start_full(
        &dir,
        free_addr(),
        free_addr(),
        free_addr(),
        free_addr(),
        &["--shards", "2"],
    );
    define(&mut node.admin(), GRAPH);
    runtime().block_on(async {
        let session = Session::connect(node.session).await.expect("session");
        let mut consumer = consumer(&session, "shop", "picked_out", 8).await;
        let mut producer =
            producer(&session, "shop", "orders_in", order_fields(), 16, 8 << 20).await;
        let names: Vec<String> = (0..TENANTS).map(|t| format!("tenant-{t}")).collect();
        let mut expected: BTreeMap<i64, String> = BTreeMap::new();
        let submit = async {
            for b in 0..BATCHES {
                let rows: Vec<(&str, &str, i64)> = (0..TENANTS as i64)
                    .map(|t| {
                        let amount = b * TENANTS as i64 + t;
                        (names[t as usize].as_str(), "item", amount)
                    })
                    .collect();
                for (tenant, _, amount) in &rows {
                    if amount % 2 == 0 {
                        expected.insert(*amount, tenant.to_string());
                    }
                }
                producer.submit(&orders(&rows)).await.expect("submit");
            }
            producer
        };
        let receive = async {
            let mut got: BTreeMap<i64, String> = BTreeMap::new();
            let total = (BATCHES as usize * TENANTS) / 2;
            while got.len() < total {
                let delivery = next_delivery(&mut consumer, 10).await;
                let rows = rows_of(&delivery.batch);
                let tenant = &rows[0].0;
                for (t, item, amount) in &rows {
                    assert_eq!(t, tenant, "a delivery holds one branch");
                    assert_eq!(item, "ITEM");
                    assert!(
                        got.insert(*amount, t.clone()).is_none(),
                        "row {amount} twice"
                    );
                }
                consumer.ack(delivery.seq).await.expect("ack");
            }
            got
        };
        let (mut producer, got) = tokio::join!(submit, receive);
        assert_eq!(got, expected);
        let outcomes = drain(&mut producer, 10).await;
        assert_eq!(outcomes.len(), BATCHES as usize);
        assert!(outcomes.iter().all(|(_, o)| *o == Outcome::Completed));
    });
    let metrics = http_get(node.metrics, "/metrics");
    for shard in 0..2 {
        let live = metric(
            &metrics,
            &format!(
                "nervix_branch_instances{{domain=\"shop\",branch=\"by_tenant\",shard=\"{shard}\"}}"
            ),
        )
        .unwrap_or(0);
        assert!(live > 0, "no branch placed on shard {shard}: {metrics}");
        // Every shard reports its wake watchdog (how often it missed its heartbeat).
        assert!(
            metric(
                &metrics,
                &format!("nervix_shard_watchdog_wakes_total{{shard=\"{shard}\"}}")
            )
            .is_some(),
            "no watchdog counter for shard {shard}: {metrics}"
        );
    }
}
