//! WEBSOCKETS ENDPOINT ingestors whose endpoint declares `WITH SIGNALING PROTOCOL`, through a
//! real node and a real WebSocket client (tokio-tungstenite): after the upgrade the server
//! runs the protocol (ON CONNECT: it sends first, then waits), frames before the handshake
//! completes and the frames its matchers consume are not delivered, data after it is; a FAIL
//! closes the connection with 1008 and a TIMEOUT with 1002, both logged with their reason.

mod support;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use support::dataplane::{consumer, define, next_delivery, quiet_for, runtime};
use support::Node;
use tokio_tungstenite::tungstenite::Message;

const GRAPH: &str = "
CREATE DOMAIN live;
USE live;
CREATE SCHEMA tick (id I64, symbol STRING);
CREATE WIRE JSON SCHEMA tick_wire MODE LOOSE (id integer, symbol string);
CREATE CODEC tick_codec FROM WIRE JSON SCHEMA tick_wire TO SCHEMA tick;
CREATE RELAY ticks SCHEMA tick UNBRANCHED CAPACITY 4;
CREATE SIGNALING PROTOCOL login
  FORMAT JSON
  ON CONNECT
  SEND JAQ '{op: \"welcome\"}'
  WAIT JAQ '.op == \"auth\" and .token == \"t1\"'
    FAIL JAQ 'select(.op == \"auth\" and .token != \"t1\") | \"bad token\"'
    CAPTURE '{user: .user}'
  SEND JAQ '{op: \"ready\", user: $state.user}'
  TIMEOUT 1s;
CREATE VHOST live_host localhost;
CREATE ENDPOINT stream ON live_host PATH '/ticks' TYPE WEBSOCKETS
  WITH SIGNALING PROTOCOL login;
CREATE WEBSOCKETS ENDPOINT INGESTOR ticks_ws
  FROM stream MODE NO ACK ON QUIESCE REJECT RETRY AFTER 2s
  DECODE USING tick_codec
  TO ticks INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER ticks_out
  FROM ticks
  TO SCHEMA tick
    MODE ACK SEQUENTIAL ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects once the endpoint is up.
async fn connect(node: &Node) -> Socket {
    let deadline = Instant::now() + Duration::from_secs(10);
    let url = format!("ws://localhost:{}/ticks", node.http.port());
    loop {
        match tokio_tungstenite::connect_async(url.as_str()).await {
            Ok((socket, _)) => return socket,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(error) => panic!("the endpoint never came up: {error}"),
        }
    }
}

/// The next text message the server sends.
async fn next_text(socket: &mut Socket) -> String {
    let next = tokio::time::timeout(Duration::from_secs(5), socket.next())
        .await
        .expect("a message in time");
    match next {
        Some(Ok(Message::Text(text))) => text.to_string(),
        other => panic!("expected a text message, got {other:?}"),
    }
}

/// The code of the close frame the server sends within `seconds` (other messages skipped).
async fn close_code(socket: &mut Socket, seconds: u64) -> (u16, String) {
    tokio::time::timeout(Duration::from_secs(seconds), async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(Some(frame)))) => {
                    break (u16::from(frame.code), frame.reason.to_string())
                }
                Some(Ok(_)) => continue,
                other => panic!("expected a close frame, got {other:?}"),
            }
        }
    })
    .await
    .expect("the server closes in time")
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
fn the_endpoint_runs_its_protocol_before_data_and_closes_on_fail_and_timeout() {
    let dir = support::scratch_dir("endpoint_signaling");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    let rt = runtime();
    rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut consumer = consumer(&session, "live", "ticks_out", 4).await;

        // The handshake: the server speaks first; a data frame before the handshake completes
        // and the auth frame its matcher consumes are not delivered; after `ready` data is.
        let mut socket = connect(&node).await;
        assert_eq!(next_text(&mut socket).await, r#"{"op":"welcome"}"#);
        socket
            .send(Message::text(r#"{"id": 100, "symbol": "EARLY"}"#))
            .await
            .expect("early");
        socket
            .send(Message::text(
                r#"{"op": "auth", "token": "t1", "user": "zq-user-7", "id": 101}"#,
            ))
            .await
            .expect("auth");
        assert_eq!(
            next_text(&mut socket).await,
            r#"{"op":"ready","user":"zq-user-7"}"#
        );
        for id in [1, 2] {
            socket
                .send(Message::text(format!(r#"{{"id": {id}, "symbol": "S"}}"#)))
                .await
                .expect("data");
        }
        let mut ids = Vec::new();
        while ids.len() < 2 {
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
        assert_eq!(ids, vec![1, 2], "handshake frames were delivered");
        // Past the TIMEOUT the established connection stays open and keeps delivering.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        socket
            .send(Message::text(r#"{"id": 3, "symbol": "S"}"#))
            .await
            .expect("data after the timeout budget");
        let delivery = next_delivery(&mut consumer, 10).await;
        assert_eq!(delivery.batch.num_rows(), 1);
        consumer.ack(delivery.seq).await.expect("ack");

        // A FAIL closes with 1008; nothing it sent is delivered.
        let mut failing = connect(&node).await;
        assert_eq!(next_text(&mut failing).await, r#"{"op":"welcome"}"#);
        failing
            .send(Message::text(
                r#"{"op": "auth", "token": "nope", "id": 200}"#,
            ))
            .await
            .expect("bad auth");
        let (code, reason) = close_code(&mut failing, 5).await;
        assert_eq!(
            (code, reason.as_str()),
            (1008, "signaling handshake failed")
        );
        assert!(
            log_shows(
                &node,
                "endpoint 'stream': signaling handshake failed (closing with 1008): bad token"
            ),
            "{}",
            node.log()
        );

        // A TIMEOUT closes with 1002 and names the matcher still outstanding.
        let started = Instant::now();
        let mut silent = connect(&node).await;
        assert_eq!(next_text(&mut silent).await, r#"{"op":"welcome"}"#);
        let (code, _) = close_code(&mut silent, 5).await;
        assert_eq!(code, 1002);
        assert!(started.elapsed() >= Duration::from_millis(900));
        assert!(
            log_shows(&node, "(closing with 1002): signaling protocol 'login'"),
            "{}",
            node.log()
        );
        assert!(
            node.log().contains("waiting for WAIT JAQ"),
            "{}",
            node.log()
        );
        // `$state` is never logged.
        assert!(!node.log().contains("zq-user-7"), "{}", node.log());
        assert!(
            quiet_for(&mut consumer, 300).await,
            "nothing else delivered"
        );
    });
}
