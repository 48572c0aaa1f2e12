//! WEBSOCKETS CONNECTION ingestors through a real node against a scripted WebSocket server on
//! loopback: each step form of a signaling protocol (ON CONNECT ACCEPT DATA; SEND then WAIT …
//! ACCEPT DATA; WAIT with CAPTURE then SEND using `$state`; two matchers in one WAIT in either
//! order), a FAIL (its value is the logged reason, nothing reaches the relay) and a TIMEOUT
//! (the logged error names the matchers still outstanding). Data frames after the handshake
//! reach a CLIENT CONSUMER; frames before ACCEPT DATA are dropped; a reconnect after the
//! server closes runs the handshake again.

mod support;

#[path = "support/ws_peer.rs"]
mod ws_peer;

use std::time::{Duration, Instant};

use support::dataplane::{consumer, define, next_delivery, quiet_for, runtime};
use support::Node;
use ws_peer::{Peer, WsPeer};

/// A graph whose ingestor reads `ws://addr/feed` under `protocol` (a CREATE SIGNALING
/// PROTOCOL named `proto`).
fn graph(addr: std::net::SocketAddr, protocol: &str) -> String {
    format!(
        "
CREATE DOMAIN feed;
USE feed;
CREATE SCHEMA reading (city STRING, celsius I64);
CREATE WIRE JSON SCHEMA reading_wire MODE LOOSE (city string, celsius integer);
CREATE CODEC reading_codec FROM WIRE JSON SCHEMA reading_wire TO SCHEMA reading;
CREATE RELAY readings SCHEMA reading UNBRANCHED;
{protocol}
CREATE CLIENT feed_ws TYPE WEBSOCKETS WITH SIGNALING PROTOCOL proto
  CONFIG {{'endpoint' = 'ws://{addr}/feed'}};
CREATE WEBSOCKETS CONNECTION INGESTOR feed_in
  FROM feed_ws MODE NO ACK ON QUIESCE BUFFER MAX SIZE 1MiB ON OVERFLOW DROP OLDEST
  DECODE USING reading_codec
  TO readings INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER readings_out
  FROM readings
  TO SCHEMA reading
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE ON MESSAGE ERROR LOG ON GENERAL ERROR LOG;
START;
"
    )
}

/// Runs one case: the server plays `scripts`, the node runs `protocol`; returns the first
/// `want` cities delivered (or, with `want == 0`, checks that nothing is delivered for
/// `quiet_ms`), with the node and the server for further checks.
fn run_case(
    test: &str,
    protocol: &str,
    scripts: Vec<Vec<Peer>>,
    want: usize,
    quiet_ms: u64,
) -> (Vec<String>, Node, WsPeer) {
    let rt = runtime();
    let peer = WsPeer::start(&rt, scripts);
    let dir = support::scratch_dir(test);
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, &graph(peer.addr, protocol));
    let cities = rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut consumer = consumer(&session, "feed", "readings_out", 4).await;
        let mut cities = Vec::new();
        while cities.len() < want {
            let delivery = next_delivery(&mut consumer, 15).await;
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
        if want == 0 {
            assert!(
                quiet_for(&mut consumer, quiet_ms).await,
                "nothing is delivered"
            );
        }
        cities
    });
    // Stops the server; what it saw stays readable through `peer`.
    drop(rt);
    (cities, node, peer)
}

#[test]
fn on_connect_accept_data_delivers_from_the_first_frame() {
    let (cities, _node, peer) = run_case(
        "ws_conn_on_connect",
        "CREATE SIGNALING PROTOCOL proto FORMAT JSON ON CONNECT ACCEPT DATA
           SEND JAQ '{op: \"hello\"}' TIMEOUT 5s;",
        vec![vec![
            Peer::Send(r#"{"city":"Oslo","celsius":-3}"#),
            Peer::Receive,
            Peer::Send(r#"{"city":"Lima","celsius":19}"#),
        ]],
        2,
        0,
    );
    assert_eq!(cities, ["Oslo", "Lima"]);
    assert_eq!(peer.received(), [r#"{"op":"hello"}"#]);
}

#[test]
fn send_then_wait_accept_data_drops_early_frames_and_reconnects_with_a_new_handshake() {
    let subscribed = vec![
        Peer::Send(r#"{"city":"Early","celsius":0}"#),
        Peer::Receive,
        Peer::Send(r#"{"city":"Acked-too-early","celsius":0}"#),
        Peer::Send(r#"{"op":"subscribe","success":true,"conn_id":"c1"}"#),
        Peer::Send(r#"{"city":"Oslo","celsius":-3}"#),
        Peer::Close,
    ];
    let again = vec![
        Peer::Receive,
        Peer::Send(r#"{"op":"subscribe","success":true}"#),
        Peer::Send(r#"{"city":"Lima","celsius":19}"#),
    ];
    let (cities, _node, peer) = run_case(
        "ws_conn_send_wait",
        "CREATE SIGNALING PROTOCOL proto FORMAT JSON ON CONNECT
           SEND JAQ '{op: \"subscribe\", args: [\"t\"]}'
           WAIT JAQ '.op == \"subscribe\" and .success == true'
             FAIL JAQ 'select(.success == false) | .ret_msg'
             ACCEPT DATA
           TIMEOUT 5s;",
        vec![subscribed, again],
        2,
        0,
    );
    assert_eq!(cities, ["Oslo", "Lima"]);
    assert_eq!(peer.connections(), 2);
    assert_eq!(
        peer.received(),
        [
            r#"{"op":"subscribe","args":["t"]}"#,
            r#"{"op":"subscribe","args":["t"]}"#
        ]
    );
}

#[test]
fn wait_with_capture_then_send_reads_state() {
    let (cities, _node, peer) = run_case(
        "ws_conn_capture",
        "CREATE SIGNALING PROTOCOL proto FORMAT JSON ON CONNECT
           WAIT JAQ '.challenge' CAPTURE '{nonce: .challenge}'
           SEND JAQ '{op: \"answer\", nonce: $state.nonce}'
           WAIT JAQ '.accepted'
           TIMEOUT 5s;",
        vec![vec![
            Peer::Send(r#"{"challenge":"n-42"}"#),
            Peer::Receive,
            Peer::Send(r#"{"accepted":true}"#),
            Peer::Send(r#"{"city":"Oslo","celsius":-3}"#),
        ]],
        1,
        0,
    );
    assert_eq!(cities, ["Oslo"]);
    assert_eq!(peer.received(), [r#"{"op":"answer","nonce":"n-42"}"#]);
}

#[test]
fn two_matchers_in_one_wait_complete_in_either_order() {
    for (test, first, second) in [
        ("ws_conn_two_12", r#"{"id":1}"#, r#"{"id":2}"#),
        ("ws_conn_two_21", r#"{"id":2}"#, r#"{"id":1}"#),
    ] {
        let (cities, _node, peer) = run_case(
            test,
            "CREATE SIGNALING PROTOCOL proto FORMAT JSON ON CONNECT
               SEND JAQ '{id: 1}', '{id: 2}'
               WAIT JAQ '.id == 1', '.id == 2' ACCEPT DATA
               TIMEOUT 5s;",
            vec![vec![
                Peer::Receive,
                Peer::Receive,
                Peer::Send(first),
                Peer::Send(second),
                Peer::Send(r#"{"city":"Oslo","celsius":-3}"#),
            ]],
            1,
            0,
        );
        assert_eq!(cities, ["Oslo"]);
        assert_eq!(peer.received(), [r#"{"id":1}"#, r#"{"id":2}"#]);
    }
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
fn a_fail_matcher_aborts_with_its_value_and_delivers_nothing() {
    let (_, node, peer) = run_case(
        "ws_conn_fail",
        "CREATE SIGNALING PROTOCOL proto FORMAT JSON ON CONNECT
           SEND JAQ '{op: \"subscribe\"}'
           WAIT JAQ '.success == true'
             FAIL JAQ 'select(.success == false) | .ret_msg'
             ACCEPT DATA
           TIMEOUT 5s;",
        vec![vec![
            Peer::Receive,
            Peer::Send(r#"{"success":false,"ret_msg":"bad topic"}"#),
            Peer::Send(r#"{"city":"Oslo","celsius":-3}"#),
        ]],
        0,
        1_500,
    );
    assert!(
        log_shows(&node, "handshake failed: bad topic"),
        "{}",
        node.log()
    );
    assert!(peer.connections() >= 2, "a failed handshake reconnects");
}

#[test]
fn a_timeout_names_the_matchers_still_outstanding() {
    let (_, node, peer) = run_case(
        "ws_conn_timeout",
        "CREATE SIGNALING PROTOCOL proto FORMAT JSON ON CONNECT
           WAIT JAQ '.a', '.b' ACCEPT DATA
           TIMEOUT 300ms;",
        vec![vec![
            Peer::Send(r#"{"a":1}"#),
            Peer::Send(r#"{"city":"Oslo","celsius":-3}"#),
        ]],
        0,
        1_500,
    );
    assert!(
        log_shows(&node, "waiting for WAIT JAQ '.b'"),
        "{}",
        node.log()
    );
    assert!(!node.log().contains("'.a', '.b'"), "'.a' was satisfied");
    assert!(peer.connections() >= 2, "a timed-out handshake reconnects");
}
