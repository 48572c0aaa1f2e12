//! HTTP ENDPOINT ingestors through a real node and a real HTTP client (curl): bodies decoded by
//! a WIRE JSON codec reach the relay; every status rule of the spec — 202, 404 (unknown or
//! withdrawn route), 405, 413, decode failures accepted and counted, quiesce REJECT (503 with
//! Retry-After rounded up to seconds) and BUFFER (202 and held, 503 when full, drained in
//! order after the hold).

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
CREATE WIRE JSON SCHEMA event_wire MODE STRICT (id integer, tenant string, note string OPTIONAL);
CREATE CODEC event_codec FROM WIRE JSON SCHEMA event_wire TO SCHEMA event;
CREATE RELAY events SCHEMA event UNBRANCHED CAPACITY 4;
CREATE VHOST edge localhost, 'api.example.com';
CREATE ENDPOINT ingress ON edge PATH '/events' TYPE HTTP;
CREATE ENDPOINT held ON edge PATH '/held' TYPE HTTP;
CREATE HTTP ENDPOINT INGESTOR events_http
  FROM ingress MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1500ms
  DECODE USING event_codec
  TO events INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE HTTP ENDPOINT INGESTOR held_http
  FROM held MODE NO ACK ON QUIESCE BUFFER MAX SIZE 64B
  DECODE USING event_codec
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

/// One request through curl: the status and the response headers (lower-case names).
fn curl(addr: SocketAddr, method: &str, host: &str, path: &str, body: &[u8]) -> (u16, String) {
    use std::io::Write;
    let mut child = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-D", "-", "-X", method])
        .args(["-H", &format!("Host: {host}")])
        .args(["-H", "Content-Type: application/json"])
        .args(["--data-binary", "@-"])
        .arg(format!("http://{addr}{path}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body)
        .expect("body written");
    let output = child.wait_with_output().expect("curl finishes");
    let head = String::from_utf8_lossy(&output.stdout).to_ascii_lowercase();
    let status = head
        .lines()
        .find(|l| l.starts_with("http/"))
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line from curl: {head:?}"));
    (status, head)
}

fn post(node: &Node, path: &str, body: &str) -> (u16, String) {
    curl(node.http, "POST", "localhost", path, body.as_bytes())
}

/// Waits until `/events` answers something other than 404 (the graph deploys after START).
fn wait_until_served(node: &Node) {
    wait_until_path_served(node, "/events");
}

fn wait_until_path_served(node: &Node, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while curl(node.http, "POST", "localhost", path, b"[]").0 == 404 {
        assert!(Instant::now() < deadline, "the endpoint never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The ids of every row a new consumer receives until `done` says so.
fn received_ids(node: &Node, expected: usize) -> Vec<i64> {
    ids_until(node, |ids| ids.len() >= expected)
}

fn ids_until(node: &Node, done: impl Fn(&[i64]) -> bool) -> Vec<i64> {
    let rt = runtime();
    rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut consumer = consumer(&session, "web", "events_out", 4).await;
        let mut ids = Vec::new();
        while !done(&ids) {
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
    })
}

#[test]
fn bodies_in_every_payload_form_reach_the_relay_and_status_rules_hold() {
    let dir = support::scratch_dir("endpoint_http_forms");
    let node = Node::start_on(
        &dir,
        support::free_addr(),
        support::free_addr(),
        &["--max-body-bytes", "4096"],
    );
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    wait_until_served(&node);

    // One object, an array of objects, NDJSON: each one payload, 202.
    assert_eq!(post(&node, "/events", r#"{"id": 1, "tenant": "a"}"#).0, 202);
    assert_eq!(
        post(
            &node,
            "/events",
            r#"[{"id": 2, "tenant": "b", "note": "x"}, {"id": 3, "tenant": "c", "note": null}]"#
        )
        .0,
        202
    );
    assert_eq!(
        post(
            &node,
            "/events",
            "{\"id\": 4, \"tenant\": \"d\"}\n{\"id\": 5, \"tenant\": \"e\"}\n"
        )
        .0,
        202
    );
    // A body the codec refuses is still accepted (spec) and its rows are not delivered; an
    // unknown key under MODE STRICT refuses the payload too.
    assert_eq!(
        post(&node, "/events", r#"{"id": "six", "tenant": "f"}"#).0,
        202
    );
    assert_eq!(
        post(&node, "/events", r#"{"id": 7, "tenant": "g", "extra": 1}"#).0,
        202
    );
    // The Host header picks the VHOST (case-insensitively); PUT works as POST.
    assert_eq!(
        curl(
            node.http,
            "PUT",
            "API.Example.com",
            "/events",
            br#"{"id": 8, "tenant": "h"}"#
        )
        .0,
        202
    );

    // Routing refusals.
    assert_eq!(post(&node, "/nowhere", "{}").0, 404);
    assert_eq!(
        curl(node.http, "POST", "other.example.com", "/events", b"{}").0,
        404
    );
    let (status, head) = curl(node.http, "GET", "localhost", "/events", b"");
    assert_eq!(status, 405);
    assert!(head.contains("allow: post, put"), "{head}");
    // Over --max-body-bytes.
    let big = format!(r#"{{"id": 9, "tenant": "{}"}}"#, "x".repeat(5_000));
    assert_eq!(post(&node, "/events", &big).0, 413);

    let mut ids = received_ids(&node, 6);
    ids.sort();
    assert_eq!(ids, vec![1, 2, 3, 4, 5, 8]);
    // The two refused bodies are counted; accepted payloads are the six above plus the empty
    // array `wait_until_served` probed with.
    let metrics = http_get(node.metrics, "/metrics");
    let labels = "domain=\"web\",ingestor=\"events_http\",shard=\"0\"";
    assert_eq!(
        metric(
            &metrics,
            &format!("nervix_ingestor_decode_failures_total{{{labels}}}")
        ),
        Some(2),
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            &format!("nervix_ingestor_payloads_total{{{labels},outcome=\"accepted\"}}")
        ),
        Some(7),
        "{metrics}"
    );

    // STOP withdraws the routes: 404, never a silent 202.
    admin.ok("STOP;");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = post(&node, "/events", r#"{"id": 10, "tenant": "z"}"#).0;
        if status == 404 {
            break;
        }
        assert_ne!(status, 202, "a stopped domain accepted a body");
        assert!(Instant::now() < deadline, "routes not withdrawn after STOP");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn quiesce_rejects_with_retry_after_and_buffers_up_to_its_bound() {
    let dir = support::scratch_dir("endpoint_http_quiesce");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    wait_until_served(&node);

    // Rows wait in the relay: no consumer is attached, so an alteration's hold cannot drain
    // and the ingestors stay quiesced while it lasts.
    assert_eq!(post(&node, "/events", r#"{"id": 1, "tenant": "a"}"#).0, 202);
    // The console answers an ALTER once the swap is done, so it runs on its own thread.
    let mut alterer = node.admin();
    let alter = std::thread::spawn(move || {
        alterer.ok("USE web;");
        alterer.ok("ALTER HTTP ENDPOINT INGESTOR events_http SET GENERAL ERROR IGNORE;");
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let (status, head) = loop {
        let (status, head) = post(&node, "/events", r#"{"id": 2, "tenant": "b"}"#);
        if status != 202 || Instant::now() > deadline {
            break (status, head);
        }
        // Accepted before the hold began: this row is delivered too.
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status, 503, "REJECT answers 503 during the hold");
    assert!(head.contains("retry-after: 2"), "1500ms rounds up: {head}");

    // BUFFER: a body that fits is accepted and held; one that does not fit is refused
    // without Retry-After.
    let small = r#"{"id": 3, "tenant": "c"}"#;
    assert_eq!(post(&node, "/held", small).0, 202);
    let (status, head) = post(&node, "/held", &format!("[{small}, {small}, {small}]"));
    assert_eq!(status, 503);
    assert!(!head.contains("retry-after"), "{head}");

    // Once a consumer drains the relay, the hold ends and the retained body follows, after
    // everything accepted before the hold (id 2 rows accepted before it began).
    let ids = ids_until(&node, |ids| ids.contains(&3));
    assert_eq!(ids.first(), Some(&1), "{ids:?}");
    assert_eq!(ids.last(), Some(&3), "{ids:?}");
    assert!(ids[1..ids.len() - 1].iter().all(|id| *id == 2), "{ids:?}");
    alter.join().expect("the ALTER returns");
    assert_eq!(post(&node, "/events", r#"{"id": 4, "tenant": "d"}"#).0, 202);
    // A delivery whose ack was still in flight when the last consumer left comes again.
    let ids = ids_until(&node, |ids| ids.contains(&4));
    assert!(ids.iter().all(|id| *id == 3 || *id == 4), "{ids:?}");
}

#[test]
fn a_jaq_codec_unfolds_each_body_on_the_extension_workers() {
    let dir = support::scratch_dir("endpoint_http_jaq");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(
        &mut admin,
        "
CREATE DOMAIN web;
USE web;
CREATE SCHEMA event (id I64, tenant STRING, note STRING OPTIONAL);
CREATE CODEC items_codec FROM JSON TO SCHEMA event
  WITH JAQ TRANSFORMATIONS ON INGESTION '.items[] | select(.id > 0) | {id, tenant: .who}';
CREATE RELAY events SCHEMA event UNBRANCHED CAPACITY 4;
CREATE VHOST edge localhost;
CREATE ENDPOINT ingress ON edge PATH '/events' TYPE HTTP;
CREATE HTTP ENDPOINT INGESTOR events_http
  FROM ingress MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1s
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
",
    );
    wait_until_served(&node);
    let body =
        r#"{"items": [{"id": 1, "who": "a"}, {"id": 0, "who": "skipped"}, {"id": 2, "who": "b"}]}"#;
    assert_eq!(post(&node, "/events", body).0, 202);
    // A body the program cannot handle is accepted and reported as a decode failure.
    assert_eq!(post(&node, "/events", r#"{"items": 7}"#).0, 202);
    assert_eq!(
        post(&node, "/events", r#"{"items": [{"id": 3, "who": "c"}]}"#).0,
        202
    );
    let mut ids = received_ids(&node, 3);
    ids.sort();
    assert_eq!(ids, vec![1, 2, 3]);
}

#[test]
fn cbor_and_avro_bodies_decode_through_their_wire_codecs() {
    let dir = support::scratch_dir("endpoint_http_binary");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(
        &mut admin,
        "
CREATE DOMAIN web;
USE web;
CREATE SCHEMA event (id I64, tenant STRING, note STRING OPTIONAL);
CREATE WIRE CBOR SCHEMA event_cbor MODE STRICT (id integer, tenant string);
CREATE CODEC cbor_codec FROM WIRE CBOR SCHEMA event_cbor TO SCHEMA event;
CREATE WIRE AVRO SCHEMA event_avro (id long, tenant string);
CREATE CODEC avro_codec FROM WIRE AVRO SCHEMA event_avro TO SCHEMA event;
CREATE RELAY events SCHEMA event UNBRANCHED CAPACITY 4;
CREATE VHOST edge localhost;
CREATE ENDPOINT cbor_in ON edge PATH '/cbor' TYPE HTTP;
CREATE ENDPOINT avro_in ON edge PATH '/avro' TYPE HTTP;
CREATE HTTP ENDPOINT INGESTOR cbor_http
  FROM cbor_in MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1s
  DECODE USING cbor_codec
  TO events INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE HTTP ENDPOINT INGESTOR avro_http
  FROM avro_in MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1s
  DECODE USING avro_codec
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
",
    );
    wait_until_path_served(&node, "/cbor");
    // A CBOR array of two maps: [{"id": 1, "tenant": "a"}, {"id": 2, "tenant": "b"}].
    let mut cbor = Vec::new();
    let records = ciborium::Value::Array(
        [(1, "a"), (2, "b")]
            .iter()
            .map(|(id, tenant)| {
                ciborium::Value::Map(vec![
                    (ciborium::Value::from("id"), ciborium::Value::from(*id)),
                    (
                        ciborium::Value::from("tenant"),
                        ciborium::Value::from(*tenant),
                    ),
                ])
            })
            .collect(),
    );
    ciborium::into_writer(&records, &mut cbor).expect("cbor");
    assert_eq!(curl(node.http, "POST", "localhost", "/cbor", &cbor).0, 202);
    // A bare Avro datum of the record (id long = 3 → zigzag 6, tenant "c").
    assert_eq!(
        curl(node.http, "POST", "localhost", "/avro", &[6, 2, b'c']).0,
        202
    );
    let mut ids = received_ids(&node, 3);
    ids.sort();
    assert_eq!(ids, vec![1, 2, 3]);
}
