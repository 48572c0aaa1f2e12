//! Header reads at runtime (spec "Header Context") through a real node: an HTTP ENDPOINT whose
//! FILTER WHERE reads `read_header('x-tenant')`, a route SET reading a header named by an input
//! field (`read_header(lower(input.header_name))`) and `read_headers` (repeated headers in
//! transport order; absent → NULL / empty list), an ON MESSAGE ERROR SEND TO record reading a
//! header of the failed row's payload, a payload whose decode fails leaving no headers behind,
//! a WEBSOCKETS ENDPOINT reading its upgrade request's headers, and an HTTP REQUEST poll
//! reading its response's headers.

mod support;

#[path = "support/http_server.rs"]
mod http_server;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use futures_util::SinkExt;
use http_server::ScriptedServer;
use support::dataplane::{consumer, define, next_delivery, runtime};
use support::Node;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

fn graph(poll_url: &str) -> String {
    format!(
        "
CREATE DOMAIN hdr;
USE hdr;
CREATE SCHEMA event (id I64, header_name STRING OPTIONAL);
CREATE WIRE JSON SCHEMA event_wire MODE STRICT (id integer, header_name string OPTIONAL);
CREATE CODEC event_codec FROM WIRE JSON SCHEMA event_wire TO SCHEMA event;
CREATE SCHEMA tagged (id I64, tenant STRING OPTIONAL, tags LIST<STRING>);
CREATE SCHEMA failure (id I64, tenant STRING OPTIONAL, reason STRING);
CREATE RELAY tagged SCHEMA tagged UNBRANCHED;
CREATE RELAY failures SCHEMA failure UNBRANCHED;
CREATE VHOST edge localhost;
CREATE ENDPOINT ingress ON edge PATH '/events' TYPE HTTP;
CREATE ENDPOINT stream ON edge PATH '/ws' TYPE WEBSOCKETS;
CREATE HTTP ENDPOINT INGESTOR events_http
  FROM ingress MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1s
  DECODE USING event_codec
  FILTER WHERE read_header('x-tenant') = 'a'
  TO tagged
    SET id = input.id + 0 * (10 / (input.id - 13)),
        tenant = read_header(lower(input.header_name)),
        tags = read_headers('X-Tag')
    UNBRANCHED FLUSH IMMEDIATE
    ON MESSAGE ERROR SEND TO failures
      SET id = input.id, tenant = read_header('X-TENANT'), reason = error.message
  ON GENERAL ERROR LOG;
CREATE WEBSOCKETS ENDPOINT INGESTOR events_ws
  FROM stream MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1s
  DECODE USING event_codec
  TO tagged
    SET id = input.id, tenant = read_header('x-tenant'), tags = read_headers('x-tag')
    UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT feed TYPE HTTP CONFIG {{'endpoint' = '{poll_url}/feed', 'method' = 'GET'}};
CREATE HTTP REQUEST INGESTOR events_poll
  FROM feed EVERY 200ms MODE NO ACK ON QUIESCE SUSPEND
  DECODE USING event_codec
  TO tagged
    SET id = input.id, tenant = read_header('X-Tenant'), tags = read_headers('x-tag')
    UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER tagged_out
  FROM tagged
  TO SCHEMA tagged
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER failures_out
  FROM failures
  TO SCHEMA failure
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;
START;
"
    )
}

/// POSTs `body` to `/events` with `headers` (each `Name: value`, repeated names allowed);
/// the status.
fn post(addr: SocketAddr, headers: &[&str], body: &str) -> u16 {
    post_to(addr, "/events", headers, body)
}

/// One row of `tagged`: tenant and tags.
type Tagged = (Option<String>, Vec<String>);

fn tagged_rows(batch: &RecordBatch) -> Vec<(i64, Tagged)> {
    let ids = batch.column(0).as_primitive::<Int64Type>();
    let tenants = batch.column(1).as_string::<i32>();
    let tags = batch.column(2).as_list::<i32>();
    (0..batch.num_rows())
        .map(|row| {
            let tenant = (!tenants.is_null(row)).then(|| tenants.value(row).to_string());
            let values = tags.value(row);
            let values = values.as_string::<i32>();
            let list = values.iter().map(|v| v.unwrap_or("").to_string()).collect();
            (ids.value(row), (tenant, list))
        })
        .collect()
}

fn failure_rows(batch: &RecordBatch) -> Vec<(i64, Option<String>, String)> {
    let ids = batch.column(0).as_primitive::<Int64Type>();
    let tenants = batch.column(1).as_string::<i32>();
    let reasons = batch.column(2).as_string::<i32>();
    (0..batch.num_rows())
        .map(|row| {
            let tenant = (!tenants.is_null(row)).then(|| tenants.value(row).to_string());
            (ids.value(row), tenant, reasons.value(row).to_string())
        })
        .collect()
}

fn tagged(tenant: Option<&str>, tags: &[&str]) -> Tagged {
    (
        tenant.map(str::to_string),
        tags.iter().map(|t| t.to_string()).collect(),
    )
}

#[test]
fn header_reads_follow_each_rows_payload_for_every_header_source() {
    // The poll answers one record with repeated response headers, then nothing.
    let server = ScriptedServer::start(|request| match request.attempt {
        1 => (
            200,
            vec![
                ("Content-Type".to_string(), "application/json".to_string()),
                ("X-Tenant".to_string(), "poll-a".to_string()),
                ("X-Tag".to_string(), "p1".to_string()),
                ("X-Tag".to_string(), "p2".to_string()),
            ],
            br#"{"id": 30}"#.to_vec(),
        ),
        _ => (204, Vec::new(), Vec::new()),
    });
    let dir = support::scratch_dir("ingest_headers");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, &graph(&server.url()));
    let deadline = Instant::now() + Duration::from_secs(10);
    // Filtered out (no x-tenant), so it only probes that the endpoint is up.
    while post(node.http, &[], r#"{"id": 0}"#) != 202 {
        assert!(Instant::now() < deadline, "the endpoint never came up");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Another tenant: FILTER WHERE drops it.
    assert_eq!(
        post(
            node.http,
            &["X-Tenant: b"],
            r#"{"id": 3, "header_name": "x-tenant"}"#
        ),
        202
    );
    // Two rows of one payload, each reading the header its input names; repeated X-Tag
    // headers in order.
    assert_eq!(
        post(
            node.http,
            &["x-tenant: a", "X-Route: r1", "X-Tag: t1", "x-tag: t2"],
            r#"[{"id": 1, "header_name": "X-Tenant"}, {"id": 2, "header_name": "X-ROUTE"}]"#,
        ),
        202
    );
    // An absent header: NULL and an empty list.
    assert_eq!(
        post(
            node.http,
            &["X-Tenant: a"],
            r#"{"id": 4, "header_name": "x-missing"}"#
        ),
        202
    );
    // A payload the codec refuses (MODE STRICT) leaves no headers behind for the next one.
    assert_eq!(
        post(
            node.http,
            &["X-Tenant: a", "X-Route: bad", "X-Tag: bad"],
            r#"{"id": 6, "header_name": "x-route", "extra": 1}"#,
        ),
        202
    );
    assert_eq!(
        post(
            node.http,
            &["X-Tenant: a", "X-Route: good"],
            r#"{"id": 5, "header_name": "x-route"}"#,
        ),
        202
    );
    // Division by zero in the route's SET: the error record reads the payload's header.
    assert_eq!(
        post(
            node.http,
            &["X-Tenant: a"],
            r#"{"id": 13, "header_name": "x-tenant"}"#
        ),
        202
    );

    let rt = runtime();
    let (rows, failures) = rt.block_on(async {
        // A WebSocket whose upgrade request carries the headers every message reads.
        let mut request = format!("ws://localhost:{}/ws", node.http.port())
            .into_client_request()
            .expect("request");
        request
            .headers_mut()
            .insert("x-tenant", "ws-a".parse().expect("value"));
        request
            .headers_mut()
            .append("x-tag", "w1".parse().expect("value"));
        request
            .headers_mut()
            .append("x-tag", "w2".parse().expect("value"));
        let (mut socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .expect("upgrade");
        socket
            .send(Message::text(r#"{"id": 20}"#))
            .await
            .expect("message");
        socket
            .send(Message::text(r#"{"id": 21}"#))
            .await
            .expect("message");

        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut tagged_out = consumer(&session, "hdr", "tagged_out", 4).await;
        let mut failures_out = consumer(&session, "hdr", "failures_out", 4).await;
        let mut rows = BTreeMap::new();
        while rows.len() < 7 {
            let delivery = next_delivery(&mut tagged_out, 10).await;
            rows.extend(tagged_rows(&delivery.batch));
            tagged_out.ack(delivery.seq).await.expect("ack");
        }
        let delivery = next_delivery(&mut failures_out, 10).await;
        let failures = failure_rows(&delivery.batch);
        failures_out.ack(delivery.seq).await.expect("ack");
        (rows, failures)
    });

    let expected: BTreeMap<i64, Tagged> = [
        (1, tagged(Some("a"), &["t1", "t2"])),
        (2, tagged(Some("r1"), &["t1", "t2"])),
        (4, tagged(None, &[])),
        (5, tagged(Some("good"), &[])),
        (20, tagged(Some("ws-a"), &["w1", "w2"])),
        (21, tagged(Some("ws-a"), &["w1", "w2"])),
        (30, tagged(Some("poll-a"), &["p1", "p2"])),
    ]
    .into_iter()
    .collect();
    assert_eq!(rows, expected);
    assert_eq!(failures.len(), 1, "{failures:?}");
    let (id, tenant, reason) = &failures[0];
    assert_eq!((*id, tenant.as_deref()), (13, Some("a")));
    assert!(reason.contains("division by zero"), "{reason}");
}

const BUFFERED: &str = "
CREATE DOMAIN buf;
USE buf;
CREATE SCHEMA event (id I64, header_name STRING OPTIONAL);
CREATE CODEC items_codec FROM JSON TO SCHEMA event
  WITH JAQ TRANSFORMATIONS ON INGESTION '.items[] | {id}';
CREATE SCHEMA tagged (id I64, tenant STRING OPTIONAL, tags LIST<STRING>);
CREATE RELAY tagged SCHEMA tagged UNBRANCHED CAPACITY 4;
CREATE VHOST edge localhost;
CREATE ENDPOINT probe ON edge PATH '/probe' TYPE HTTP;
CREATE ENDPOINT held ON edge PATH '/held' TYPE HTTP;
CREATE HTTP ENDPOINT INGESTOR probe_http
  FROM probe MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1s
  DECODE USING items_codec
  TO tagged SET id = input.id, tenant = read_header('x-tenant'), tags = read_headers('x-tag')
    UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE HTTP ENDPOINT INGESTOR held_http
  FROM held MODE NO ACK ON QUIESCE BUFFER MAX SIZE 1KiB
  DECODE USING items_codec
  TO tagged SET id = input.id, tenant = read_header('x-tenant'), tags = read_headers('x-tag')
    UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER tagged_out
  FROM tagged
  TO SCHEMA tagged
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;
START;
";

/// POSTs `body` to `path` with `headers`; the status.
fn post_to(addr: SocketAddr, path: &str, headers: &[&str], body: &str) -> u16 {
    let mut command = Command::new("curl");
    command
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args([
            "-H",
            "Host: localhost",
            "-H",
            "Content-Type: application/json",
        ]);
    for header in headers {
        command.args(["-H", header]);
    }
    let output = command
        .args(["--data-binary", body])
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn unfolded_records_share_their_payloads_headers_and_retained_bodies_keep_theirs() {
    let dir = support::scratch_dir("ingest_headers_buffered");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, BUFFERED);
    let deadline = Instant::now() + Duration::from_secs(10);
    while post_to(node.http, "/probe", &[], r#"{"items": []}"#) != 202 {
        assert!(Instant::now() < deadline, "the endpoint never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A JAQ unfolding: both records read their one payload's headers.
    assert_eq!(
        post_to(
            node.http,
            "/held",
            &["X-Tenant: j", "X-Tag: 1"],
            r#"{"items": [{"id": 1}, {"id": 2}]}"#
        ),
        202
    );
    // Rows wait in the relay (no consumer yet), so an alteration's hold lasts; REJECT on the
    // probe tells when it began.
    let mut alterer = node.admin();
    let alter = std::thread::spawn(move || {
        alterer.ok("USE buf;");
        alterer.ok("ALTER HTTP ENDPOINT INGESTOR probe_http SET GENERAL ERROR IGNORE;");
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = post_to(
            node.http,
            "/probe",
            &["X-Tenant: p"],
            r#"{"items": [{"id": 3}]}"#,
        );
        if status == 503 {
            break;
        }
        assert!(Instant::now() < deadline, "the hold never began");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Retained by BUFFER with its headers, decoded after the hold.
    assert_eq!(
        post_to(
            node.http,
            "/held",
            &["X-Tenant: kept", "X-Tag: k1", "X-Tag: k2"],
            r#"{"items": [{"id": 5}]}"#
        ),
        202
    );
    let rt = runtime();
    let rows = rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut tagged_out = consumer(&session, "buf", "tagged_out", 4).await;
        let mut rows = Vec::new();
        while !rows.iter().any(|(id, _)| *id == 5) {
            let delivery = next_delivery(&mut tagged_out, 10).await;
            rows.extend(tagged_rows(&delivery.batch));
            tagged_out.ack(delivery.seq).await.expect("ack");
        }
        rows
    });
    alter.join().expect("the ALTER returns");
    for (id, row) in &rows {
        let expected = match id {
            1 | 2 => tagged(Some("j"), &["1"]),
            3 => tagged(Some("p"), &[]),
            5 => tagged(Some("kept"), &["k1", "k2"]),
            other => panic!("unexpected row {other}"),
        };
        assert_eq!(row, &expected, "row {id}");
    }
    let ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
    assert!(ids.contains(&1) && ids.contains(&2), "{ids:?}");
}
