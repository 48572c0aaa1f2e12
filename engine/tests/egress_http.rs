//! HTTP REQUEST emitters and ingestors through a real node against a scripted HTTP/1.1 server
//! on loopback: one request per row with METHOD, PATH, write_header and a codec body; 2xx
//! delivers; 429 / 503 are retried (honouring Retry-After) until delivered; a 400 is refused
//! and follows ON MESSAGE ERROR (LOG: the batch is rejected). Bodies in every codec kind —
//! WIRE CBOR maps, bare WIRE AVRO datums, JAQ ON EMITTING output — are decoded here and
//! compared; a row the Avro encoder refuses becomes an error record under SEND TO. Polls start
//! at once, follow the cadence, treat 204 as no message and decode bodies into rows.

mod support;

#[path = "support/http_server.rs"]
mod http_server;

use std::time::{Duration, Instant};

use http_server::ScriptedServer;
use nervix_net::session::frame::Outcome;
use support::dataplane::{
    consumer, define, next_delivery, order_fields, orders, producer, runtime,
};
use support::Node;

fn emitter_graph(endpoint: &str) -> String {
    format!(
        "
CREATE DOMAIN out;
USE out;
CREATE SCHEMA order_row (tenant STRING, item STRING, amount I64);
CREATE WIRE JSON SCHEMA order_wire MODE STRICT (tenant string, item string, amount integer);
CREATE CODEC order_codec FROM WIRE JSON SCHEMA order_wire TO SCHEMA order_row;
CREATE RELAY orders SCHEMA order_row UNBRANCHED;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_row
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT api TYPE HTTP CONFIG {{'endpoint' = '{endpoint}', 'timeout_ms' = 5000}};
CREATE HTTP REQUEST EMITTER orders_http
  FROM orders
  TO api METHOD 'POST' PATH '/orders/' || input.item
    MODE ACK PARALLEL MAX 4 ACK TIMEOUT 20s
    RETRY POLICY BACKOFF 20ms MAX 200ms
    ENCODE USING order_codec
  INVOKE write_header('x-tenant', output.tenant)
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
"
    )
}

/// Submits `batch` and waits for its outcome.
async fn outcome(
    producer: &mut nervix_net::client::Producer,
    batch: arrow_array::RecordBatch,
) -> Outcome {
    producer.submit(&batch).await.expect("submit");
    let (_, outcome) = tokio::time::timeout(Duration::from_secs(20), producer.next_outcome())
        .await
        .expect("an outcome in time")
        .expect("healthy")
        .expect("an outcome");
    outcome
}

#[test]
fn one_request_per_row_retries_retryable_statuses_and_refuses_4xx() {
    // /orders/a: 503 then 200; /orders/b: 429 (Retry-After: 1) then 201; /orders/bad: 400.
    let server = ScriptedServer::start(|request| {
        let status = match (request.path.as_str(), request.attempt) {
            ("/orders/a", 1) => 503,
            ("/orders/b", 1) => 429,
            ("/orders/bad", _) => 400,
            ("/orders/b", _) => 201,
            _ => 200,
        };
        let headers = if status == 429 {
            vec![("Retry-After".to_string(), "1".to_string())]
        } else {
            Vec::new()
        };
        (status, headers, Vec::new())
    });
    let dir = support::scratch_dir("egress_http_emitter");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, &emitter_graph(&server.url()));

    let rt = runtime();
    let started = Instant::now();
    let (good, bad) = rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut producer = producer(&session, "out", "orders_in", order_fields(), 4, 1 << 20).await;
        let good = outcome(&mut producer, orders(&[("t1", "a", 10), ("t2", "b", 20)])).await;
        let bad = outcome(&mut producer, orders(&[("t3", "bad", 30)])).await;
        (good, bad)
    });
    assert_eq!(
        good,
        Outcome::Completed,
        "both rows delivered after retries"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "the 429's Retry-After of 1 s was honoured"
    );
    assert_eq!(
        bad,
        Outcome::Rejected,
        "a 400 is refused and LOG rejects the batch"
    );

    let requests = server.requests();
    let to = |path: &str| requests.iter().filter(|r| r.path == path).count();
    assert_eq!(to("/orders/a"), 2, "{requests:?}");
    assert_eq!(to("/orders/b"), 2, "{requests:?}");
    assert_eq!(to("/orders/bad"), 1, "a refusal is not retried");
    let delivered = requests
        .iter()
        .find(|r| r.path == "/orders/b" && r.attempt == 2)
        .expect("b's second attempt");
    assert_eq!(delivered.method, "POST");
    assert_eq!(delivered.header("x-tenant"), Some("t2"));
    let body: serde_json::Value = serde_json::from_slice(&delivered.body).expect("a JSON body");
    assert_eq!(
        body,
        serde_json::json!({"tenant": "t2", "item": "b", "amount": 20})
    );
}

#[test]
fn polls_start_at_once_follow_the_cadence_and_decode_bodies() {
    // The first poll returns two records, later ones 204 No Content.
    let server = ScriptedServer::start(|request| match request.attempt {
        1 => (
            200,
            vec![("Content-Type".to_string(), "application/json".to_string())],
            br#"[{"city": "Oslo", "celsius": -3}, {"city": "Lima", "celsius": 19}]"#.to_vec(),
        ),
        _ => (204, Vec::new(), Vec::new()),
    });
    let dir = support::scratch_dir("egress_http_poll");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(
        &mut admin,
        &format!(
            "
CREATE DOMAIN weather;
USE weather;
CREATE SCHEMA reading (city STRING, celsius I64);
CREATE WIRE JSON SCHEMA reading_wire MODE LOOSE (city string, celsius integer);
CREATE CODEC reading_codec FROM WIRE JSON SCHEMA reading_wire TO SCHEMA reading;
CREATE RELAY readings SCHEMA reading UNBRANCHED;
CREATE CLIENT weather_api TYPE HTTP CONFIG {{'endpoint' = '{}/feed', 'method' = 'GET'}};
CREATE HTTP REQUEST INGESTOR weather_poll
  FROM weather_api EVERY 300ms MODE NO ACK ON QUIESCE SUSPEND
  DECODE USING reading_codec
  TO readings INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER readings_out
  FROM readings
  TO SCHEMA reading
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;
START;
",
            server.url()
        ),
    );
    let started = Instant::now();
    let rt = runtime();
    let cities = rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut consumer = consumer(&session, "weather", "readings_out", 4).await;
        let mut cities = Vec::new();
        while cities.len() < 2 {
            let delivery = next_delivery(&mut consumer, 10).await;
            let column = delivery
                .batch
                .column(0)
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .expect("city")
                .clone();
            cities.extend(column.iter().flatten().map(str::to_string));
            consumer.ack(delivery.seq).await.expect("ack");
        }
        cities
    });
    assert_eq!(cities, vec!["Oslo", "Lima"]);
    std::thread::sleep(Duration::from_millis(1_000));
    let polls = server.requests();
    assert!(polls.iter().all(|r| r.method == "GET" && r.path == "/feed"));
    // Within ~1.2 s of START at a 300 ms cadence: the immediate poll and at least two more
    // (204s, no rows), never a burst.
    assert!(polls.len() >= 3, "{} polls", polls.len());
    let bound = started.elapsed().as_millis() as usize / 300 + 2;
    assert!(polls.len() <= bound, "{} polls within {bound}", polls.len());
}

#[test]
fn refused_requests_become_error_records_under_send_to() {
    // /orders/bad is refused (400); the others are delivered.
    let server = ScriptedServer::start(|request| {
        let status = if request.path == "/orders/bad" {
            400
        } else {
            200
        };
        (status, Vec::new(), Vec::new())
    });
    let dir = support::scratch_dir("egress_http_send_to");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    let script = emitter_graph(&server.url())
        .replace(
            "CREATE RELAY orders SCHEMA order_row UNBRANCHED;",
            "CREATE RELAY orders SCHEMA order_row UNBRANCHED;
CREATE SCHEMA refusal (item STRING, reason STRING);
CREATE RELAY refusals SCHEMA refusal UNBRANCHED;
CREATE CLIENT CONSUMER EMITTER refusals_out
  FROM refusals
  TO SCHEMA refusal
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;",
        )
        .replace(
            "  FLUSH IMMEDIATE\n  ON MESSAGE ERROR LOG\n  ON GENERAL ERROR LOG;\nSTART;",
            "  FLUSH IMMEDIATE\n  ON MESSAGE ERROR SEND TO refusals\n    SET item = input.item, \
             reason = error.message\n  ON GENERAL ERROR LOG;\nSTART;",
        );
    assert!(script.contains("SEND TO refusals"), "{script}");
    define(&mut admin, &script);
    let rt = runtime();
    let (outcome, refusal) = rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut refusals = consumer(&session, "out", "refusals_out", 4).await;
        let mut producer = producer(&session, "out", "orders_in", order_fields(), 4, 1 << 20).await;
        let batch = orders(&[("t1", "a", 1), ("t2", "bad", 2)]);
        producer.submit(&batch).await.expect("submit");
        // The error record must be acknowledged before the batch can complete.
        let delivery = next_delivery(&mut refusals, 20).await;
        let column = |i: usize| {
            delivery
                .batch
                .column(i)
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .expect("a STRING column")
                .value(0)
                .to_string()
        };
        let refusal = (delivery.batch.num_rows(), column(0), column(1));
        refusals.ack(delivery.seq).await.expect("ack");
        let (_, outcome) = tokio::time::timeout(Duration::from_secs(20), producer.next_outcome())
            .await
            .expect("an outcome in time")
            .expect("healthy")
            .expect("an outcome");
        (outcome, refusal)
    });
    assert_eq!(
        outcome,
        Outcome::Completed,
        "the refused row went to its error relay, so the batch completes"
    );
    assert_eq!(refusal.0, 1, "one error record");
    assert_eq!(refusal.1, "bad");
    assert!(refusal.2.contains("400"), "the sink's cause: {}", refusal.2);
}

/// Three HTTP REQUEST emitters of one relay, one per codec kind, each under its own path
/// prefix; the Avro one sends refused rows to `refusals`.
fn codec_graph(endpoint: &str) -> String {
    let emitter = |name: &str, prefix: &str, codec: &str, on_error: &str| {
        format!(
            "CREATE HTTP REQUEST EMITTER {name}
  FROM orders
  TO api METHOD 'POST' PATH '/{prefix}/' || input.item
    MODE ACK PARALLEL MAX 4 ACK TIMEOUT 20s
    RETRY POLICY BACKOFF 20ms MAX 200ms
    ENCODE USING {codec}
  FLUSH IMMEDIATE
  ON MESSAGE ERROR {on_error}
  ON GENERAL ERROR LOG;
"
        )
    };
    format!(
        "
CREATE DOMAIN out;
USE out;
CREATE SCHEMA order_row (tenant STRING, item STRING, amount I64);
CREATE WIRE CBOR SCHEMA order_cbor MODE STRICT (tenant string, item string, amount integer);
CREATE CODEC cbor_codec FROM WIRE CBOR SCHEMA order_cbor TO SCHEMA order_row;
CREATE WIRE AVRO SCHEMA order_avro (tenant enum('t1', 't2'), item string, amount long);
CREATE CODEC avro_codec FROM WIRE AVRO SCHEMA order_avro TO SCHEMA order_row;
CREATE CODEC jaq_codec FROM JSON TO SCHEMA order_row WITH JAQ TRANSFORMATIONS
  ON EMITTING '{{who: .tenant, what: (.item | ascii_upcase), cents: (.amount * 100)}}';
CREATE RELAY orders SCHEMA order_row UNBRANCHED;
CREATE SCHEMA refusal (item STRING, reason STRING);
CREATE RELAY refusals SCHEMA refusal UNBRANCHED;
CREATE CLIENT CONSUMER EMITTER refusals_out
  FROM refusals
  TO SCHEMA refusal
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;
CREATE CLIENT PRODUCER INGESTOR orders_in
  FROM SCHEMA order_row
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
    ON QUIESCE SUSPEND
  TO orders INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT api TYPE HTTP CONFIG {{'endpoint' = '{endpoint}', 'timeout_ms' = 5000}};
{}{}{}START;
",
        emitter("cbor_http", "cbor", "cbor_codec", "LOG"),
        emitter(
            "avro_http",
            "avro",
            "avro_codec",
            "SEND TO refusals\n    SET item = input.item, reason = error.message"
        ),
        emitter("jaq_http", "jaq", "jaq_codec", "LOG"),
    )
}

/// One Avro `long` (zigzag varint) from the front of `bytes`.
fn avro_long(bytes: &mut &[u8]) -> i64 {
    let (mut value, mut shift) = (0u64, 0);
    loop {
        let (byte, rest) = bytes.split_first().expect("a long's byte");
        *bytes = rest;
        value |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return (value >> 1) as i64 ^ -((value & 1) as i64);
        }
        shift += 7;
    }
}

/// One Avro `string` from the front of `bytes`.
fn avro_string(bytes: &mut &[u8]) -> String {
    let length = usize::try_from(avro_long(bytes)).expect("a length");
    let (text, rest) = bytes.split_at(length);
    *bytes = rest;
    String::from_utf8(text.to_vec()).expect("UTF-8")
}

#[test]
fn cbor_avro_and_jaq_bodies_are_one_message_per_row_and_avro_refusals_go_to_send_to() {
    let server = ScriptedServer::start(|_| (200, Vec::new(), Vec::new()));
    let dir = support::scratch_dir("egress_http_codecs");
    let node = Node::start(&dir);
    define(&mut node.admin(), &codec_graph(&server.url()));
    let rt = runtime();
    let (outcome, refusal) = rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut refusals = consumer(&session, "out", "refusals_out", 4).await;
        let mut producer = producer(&session, "out", "orders_in", order_fields(), 4, 1 << 20).await;
        // 't3' is not a symbol of the Avro enum.
        let batch = orders(&[("t1", "a", 10), ("t2", "b", -20), ("t3", "c", 30)]);
        producer.submit(&batch).await.expect("submit");
        let delivery = next_delivery(&mut refusals, 20).await;
        let column = |i: usize| {
            delivery
                .batch
                .column(i)
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .expect("a STRING column")
                .value(0)
                .to_string()
        };
        let refusal = (delivery.batch.num_rows(), column(0), column(1));
        refusals.ack(delivery.seq).await.expect("ack");
        let (_, outcome) = tokio::time::timeout(Duration::from_secs(20), producer.next_outcome())
            .await
            .expect("an outcome in time")
            .expect("healthy")
            .expect("an outcome");
        (outcome, refusal)
    });
    assert_eq!(
        outcome,
        Outcome::Completed,
        "every row delivered or sent to refusals"
    );
    assert_eq!(refusal.0, 1, "one error record");
    assert_eq!(refusal.1, "c");
    assert_eq!(
        refusal.2,
        "cannot encode the row: field 'tenant': 't3' is not a symbol of the enum"
    );

    let requests = server.requests();
    let body = |path: &str| -> Vec<u8> {
        let found: Vec<_> = requests.iter().filter(|r| r.path == path).collect();
        assert_eq!(found.len(), 1, "one request to {path}: {requests:?}");
        found[0].body.clone()
    };
    // CBOR: exactly one map per body.
    for (item, tenant, amount) in [("a", "t1", 10), ("b", "t2", -20), ("c", "t3", 30)] {
        let bytes = body(&format!("/cbor/{item}"));
        let mut reader = std::io::Cursor::new(&bytes);
        let map: serde_json::Value = ciborium::from_reader(&mut reader).expect("a CBOR item");
        assert_eq!(
            reader.position() as usize,
            bytes.len(),
            "nothing after the map"
        );
        assert_eq!(
            map,
            serde_json::json!({"tenant": tenant, "item": item, "amount": amount})
        );
    }
    // AVRO: one bare datum (enum index, string, long) per body; the refused row sent nothing.
    for (item, symbol, amount) in [("a", 0, 10), ("b", 1, -20)] {
        let bytes = body(&format!("/avro/{item}"));
        let mut datum = bytes.as_slice();
        assert_eq!(avro_long(&mut datum), symbol);
        assert_eq!(avro_string(&mut datum), item);
        assert_eq!(avro_long(&mut datum), amount);
        assert!(datum.is_empty(), "nothing after the datum");
    }
    assert!(requests.iter().all(|r| r.path != "/avro/c"), "{requests:?}");
    // JAQ ON EMITTING: the program's output for the row, as JSON.
    for (item, who, cents) in [("a", "t1", 1_000), ("b", "t2", -2_000), ("c", "t3", 3_000)] {
        let value: serde_json::Value =
            serde_json::from_slice(&body(&format!("/jaq/{item}"))).expect("a JSON body");
        assert_eq!(
            value,
            serde_json::json!({"who": who, "what": item.to_uppercase(), "cents": cents})
        );
    }
}

#[test]
fn a_jaq_codec_without_on_emitting_is_refused_when_the_domain_starts() {
    let dir = support::scratch_dir("egress_http_no_emitting");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    let script = codec_graph("http://127.0.0.1:9").replace("ON EMITTING", "ON INGESTION");
    define(&mut admin, &script);
    // The plan is built when the data plane takes the started domain; DESCRIBE shows why it
    // cannot run.
    let expected = "failure: emitter 'jaq_http' cannot run: codec 'jaq_codec' has no ON EMITTING \
                    program, which ENCODE USING needs to write a row";
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lines = admin.ok("DESCRIBE EMITTER jaq_http;");
        if lines.iter().any(|line| line.trim() == expected) {
            break;
        }
        assert!(Instant::now() < deadline, "{lines:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
