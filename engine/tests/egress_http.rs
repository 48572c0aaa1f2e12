//! HTTP REQUEST emitters and ingestors through a real node against a scripted HTTP/1.1 server
//! on loopback: one request per row with METHOD, PATH, write_header and a codec body; 2xx
//! delivers; 429 / 503 are retried (honouring Retry-After) until delivered; a 400 is refused
//! and follows ON MESSAGE ERROR (LOG: the batch is rejected). Polls start at once, follow the
//! cadence, treat 204 as no message and decode bodies into rows.

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
