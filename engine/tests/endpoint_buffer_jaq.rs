//! Bodies an HTTP ENDPOINT ingestor's `BUFFER` retained, with a JAQ ON INGESTION codec,
//! through a real node and a real HTTP client (curl): they stay in the buffer (counted in its
//! bytes on /metrics) while the domain is held, then drain in arrival order after the hold,
//! unfolded on the extension workers (the node logs how many); a body the program refuses is
//! reported and not delivered, and the bodies behind it follow.

mod support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use support::dataplane::{consumer, define, http_get, metric, next_delivery, runtime};
use support::Node;

const GRAPH: &str = "
CREATE DOMAIN web;
USE web;
CREATE SCHEMA event (id I64, tenant STRING, note STRING OPTIONAL);
CREATE CODEC items_codec FROM JSON TO SCHEMA event
  WITH JAQ TRANSFORMATIONS ON INGESTION '.items[] | {id, tenant: .who}';
CREATE RELAY events SCHEMA event UNBRANCHED CAPACITY 4;
CREATE VHOST edge localhost;
CREATE ENDPOINT ingress ON edge PATH '/events' TYPE HTTP;
CREATE ENDPOINT held ON edge PATH '/held' TYPE HTTP;
CREATE HTTP ENDPOINT INGESTOR events_http
  FROM ingress MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1s
  DECODE USING items_codec
  TO events INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE HTTP ENDPOINT INGESTOR held_http
  FROM held MODE NO ACK ON QUIESCE BUFFER MAX SIZE 1MiB
  DECODE USING items_codec
  TO events INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER events_out
  FROM events
  TO SCHEMA event
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

/// POSTs `body` to `path` on the node's HTTP listener through curl; the status.
fn post(addr: SocketAddr, path: &str, body: &str) -> u16 {
    let output = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args([
            "-H",
            "Host: localhost",
            "-H",
            "Content-Type: application/json",
        ])
        .args(["--data-binary", body])
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no status from curl: {output:?}"))
}

/// A body of two items `100 k + 1` and `100 k + 2`.
fn body(k: i64) -> String {
    format!(
        r#"{{"items": [{{"id": {}, "who": "t{k}"}}, {{"id": {}, "who": "t{k}"}}]}}"#,
        100 * k + 1,
        100 * k + 2
    )
}

/// The retained bytes of `held_http` on /metrics.
fn buffered_bytes(node: &Node) -> Option<u64> {
    metric(
        &http_get(node.metrics, "/metrics"),
        "nervix_ingestor_buffered_bytes{domain=\"web\",ingestor=\"held_http\",shard=\"0\"}",
    )
}

/// Waits until `node`'s log holds `text` (logs are written as they happen).
fn log_shows(node: &Node, text: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if node.log().contains(text) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn retained_jaq_bodies_drain_in_order_on_the_extension_workers() {
    let dir = support::scratch_dir("endpoint_buffer_jaq");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    let deadline = Instant::now() + Duration::from_secs(10);
    while post(node.http, "/events", r#"{"items": []}"#) == 404 {
        assert!(Instant::now() < deadline, "the endpoint never came up");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Rows wait in the relay (no consumer), so an alteration's hold lasts; REJECT answering
    // 503 says the hold began.
    assert_eq!(post(node.http, "/events", &body(0)), 202);
    let mut alterer = node.admin();
    let alter = std::thread::spawn(move || {
        alterer.ok("USE web;");
        alterer.ok("ALTER HTTP ENDPOINT INGESTOR events_http SET GENERAL ERROR IGNORE;");
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while post(node.http, "/events", r#"{"items": []}"#) != 503 {
        assert!(Instant::now() < deadline, "the hold never began");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Retained: five bodies of two items, and one the program cannot unfold (third).
    let mut sent = 0;
    for k in 1..=5 {
        if k == 3 {
            assert_eq!(post(node.http, "/held", r#"{"items": 7}"#), 202);
            sent += r#"{"items": 7}"#.len() as u64;
        }
        let body = body(k);
        assert_eq!(post(node.http, "/held", &body), 202);
        sent += body.len() as u64;
    }
    assert_eq!(
        buffered_bytes(&node),
        Some(sent),
        "the buffer counts every body"
    );

    // A consumer drains the relay, the hold ends, and the retained bodies follow in order.
    let ids = runtime().block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut consumer = consumer(&session, "web", "events_out", 4).await;
        let mut ids = Vec::new();
        while !ids.contains(&502) {
            let delivery = next_delivery(&mut consumer, 10).await;
            let column = delivery
                .batch
                .column(0)
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .expect("id column")
                .clone();
            ids.extend(column.values().iter().copied());
            consumer.ack(delivery.seq).await.expect("ack");
        }
        ids
    });
    let retained: Vec<i64> = ids.iter().copied().filter(|id| *id > 100).collect();
    assert_eq!(
        retained,
        vec![101, 102, 201, 202, 301, 302, 401, 402, 501, 502],
        "{ids:?}"
    );
    assert_eq!(
        &ids[..2],
        &[1, 2],
        "the body accepted before the hold comes first"
    );
    assert!(
        log_shows(
            &node,
            "ingestor 'held_http': 6 retained bodies drained, unfolded on the extension workers"
        ),
        "{}",
        node.log()
    );
    assert!(
        node.log()
            .contains("ingestor 'held_http' could not decode a payload"),
        "the refused body is reported: {}",
        node.log()
    );
    assert_eq!(buffered_bytes(&node), Some(0));
    alter.join().expect("the ALTER returns");
}
