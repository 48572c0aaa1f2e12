//! WEBSOCKETS ENDPOINT ingestors through a real node and a real WebSocket client
//! (tokio-tungstenite): text and binary messages are payloads decoded by the codec; an upgrade
//! to a path no endpoint serves is refused 404, a plain request to a WebSocket endpoint 426; a
//! quiesce under REJECT closes established WebSockets with 1013 and refuses new upgrades 503.

mod support;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use support::dataplane::{consumer, define, next_delivery, runtime};
use support::Node;
use tokio_tungstenite::tungstenite::{self, Message};

const GRAPH: &str = "
CREATE DOMAIN live;
USE live;
CREATE SCHEMA tick (id I64, symbol STRING);
CREATE WIRE JSON SCHEMA tick_wire MODE LOOSE (id integer, symbol string);
CREATE CODEC tick_codec FROM WIRE JSON SCHEMA tick_wire TO SCHEMA tick;
CREATE RELAY ticks SCHEMA tick UNBRANCHED CAPACITY 4;
CREATE VHOST live_host localhost;
CREATE ENDPOINT stream ON live_host PATH '/ticks' TYPE WEBSOCKETS;
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

async fn connect(node: &Node, path: &str) -> Result<Socket, tungstenite::Error> {
    tokio_tungstenite::connect_async(format!("ws://localhost:{}{path}", node.http.port()))
        .await
        .map(|(socket, _)| socket)
}

/// The HTTP status a refused upgrade was answered with.
fn refused_status(result: Result<Socket, tungstenite::Error>) -> u16 {
    match result {
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(other) => panic!("expected an HTTP refusal, got {other}"),
        Ok(_) => panic!("expected an HTTP refusal, the upgrade succeeded"),
    }
}

/// Ids the consumer receives until `count` arrived.
async fn ids(node: &Node, count: usize) -> Vec<i64> {
    let session = nervix_net::client::Session::connect(node.session)
        .await
        .expect("session");
    let mut consumer = consumer(&session, "live", "ticks_out", 4).await;
    let mut ids = Vec::new();
    while ids.len() < count {
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
}

#[test]
fn websocket_messages_are_payloads_and_quiesce_closes_with_1013() {
    let dir = support::scratch_dir("endpoint_websocket");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    define(&mut admin, GRAPH);
    let rt = runtime();
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut socket = loop {
            match connect(&node, "/ticks").await {
                Ok(socket) => break socket,
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(error) => panic!("the endpoint never came up: {error}"),
            }
        };
        socket
            .send(Message::text(r#"{"id": 1, "symbol": "ABC"}"#))
            .await
            .expect("text");
        socket
            .send(Message::binary(
                br#"[{"id": 2, "symbol": "DEF"}, {"id": 3, "symbol": "GHI", "venue": "x"}]"#
                    .to_vec(),
            ))
            .await
            .expect("binary");
        let mut got = ids(&node, 3).await;
        got.sort();
        assert_eq!(got, vec![1, 2, 3]);

        assert_eq!(refused_status(connect(&node, "/elsewhere").await), 404);
        let plain = plain_get(node.http, "/ticks");
        assert!(plain.starts_with("HTTP/1.1 426"), "{plain}");

        // Rows wait in the relay (no consumer), so an alteration's hold lasts: the established
        // socket is closed with 1013 and a new upgrade is refused 503 with Retry-After.
        socket
            .send(Message::text(r#"{"id": 4, "symbol": "JKL"}"#))
            .await
            .expect("text");
        let mut alterer = node.admin();
        let alter = std::thread::spawn(move || {
            alterer.ok("USE live;");
            alterer.ok("ALTER WEBSOCKETS ENDPOINT INGESTOR ticks_ws SET GENERAL ERROR IGNORE;");
        });
        let close = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match socket.next().await {
                    Some(Ok(Message::Close(Some(frame)))) => break u16::from(frame.code),
                    Some(Ok(_)) => continue,
                    other => panic!("expected a close frame, got {other:?}"),
                }
            }
        })
        .await
        .expect("the socket is closed during the hold");
        assert_eq!(close, 1013);
        match connect(&node, "/ticks").await {
            Err(tungstenite::Error::Http(response)) => {
                assert_eq!(response.status().as_u16(), 503);
                assert_eq!(
                    response
                        .headers()
                        .get("retry-after")
                        .map(|v| v.to_str().unwrap_or("").to_string()),
                    Some("2".to_string())
                );
            }
            other => panic!("expected 503 during the hold, got {:?}", other.map(|_| ())),
        }
        assert_eq!(ids(&node, 1).await, vec![4]);
        alter.join().expect("the ALTER returns");
    });
}

/// A plain GET over a raw socket (no upgrade headers); the whole response.
fn plain_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
}
