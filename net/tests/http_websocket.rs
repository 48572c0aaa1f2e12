//! WebSockets end to end on loopback with tokio-tungstenite as the client: text, binary and
//! fragmented messages, ping/pong, the close handshake, 1009 (too big), 1007 (bad UTF-8),
//! 1002 (unmasked, via a raw socket), a service-requested close, the server-initiated 1013,
//! and 1001 at shutdown.

#[path = "support/http.rs"]
mod http_support;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http_support::{connect, read_reply, Server};
use nervix_net::http::{
    HeadDecision, HttpService, RequestHead, Response, ServerLimits, WsMessage, WsVerdict,
};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;

const MAX_MESSAGE: usize = 1024;

struct Ws {
    log: Arc<Mutex<Vec<String>>>,
    quiesce: async_channel::Receiver<()>,
}

impl HttpService for Ws {
    type Route = String;

    fn head(&self, head: &RequestHead, _tls: bool) -> HeadDecision<String> {
        match (head.path.as_str(), head.websocket) {
            ("/ws", true) => HeadDecision::Upgrade(head.path.clone()),
            ("/ws", false) => HeadDecision::Respond(Response::status(400)),
            _ => HeadDecision::Respond(Response::status(404)),
        }
    }

    async fn request(&self, _: String, _: &RequestHead, _: &[u8]) -> Response {
        Response::status(500)
    }

    async fn websocket_message(
        &self,
        route: &String,
        _head: &RequestHead,
        msg: WsMessage<'_>,
    ) -> WsVerdict {
        let entry = match msg {
            WsMessage::Text(t) => format!("{route} text:{}", String::from_utf8_lossy(t)),
            WsMessage::Binary(b) => format!("{route} binary:{}", b.len()),
        };
        let close = entry.ends_with("text:close-me");
        self.log.lock().unwrap().push(entry);
        if close {
            WsVerdict::Close {
                code: 4000,
                reason: "bye",
            }
        } else {
            WsVerdict::Continue
        }
    }

    async fn websocket_closed(&self, _: &String) -> u16 {
        match self.quiesce.recv().await {
            Ok(()) => 1013,
            Err(_) => std::future::pending().await,
        }
    }
}

struct Harness {
    server: Server,
    log: Arc<Mutex<Vec<String>>>,
    quiesce: async_channel::Sender<()>,
}

fn start() -> Harness {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (quiesce, rx) = async_channel::unbounded();
    let limits = ServerLimits {
        max_ws_message_bytes: MAX_MESSAGE,
        ..ServerLimits::default()
    };
    let service_log = Arc::clone(&log);
    let server = Server::start(
        move || Ws {
            log: service_log,
            quiesce: rx,
        },
        limits,
        None,
    );
    Harness {
        server,
        log,
        quiesce,
    }
}

type Client =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn open(h: &Harness) -> Client {
    let url = format!("ws://{}/ws", h.server.addr);
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

/// Reads until the server's close frame; returns its code, then drives the close handshake.
async fn close_code(ws: &mut Client) -> Option<u16> {
    let read = async {
        while let Some(msg) = ws.next().await {
            if let Ok(Message::Close(frame)) = msg {
                return frame.map(|f| u16::from(f.code));
            }
        }
        None
    };
    let code = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("a close frame");
    // Our close reply goes out; the server then ends the connection.
    let rest = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(_)) = ws.next().await {}
    });
    rest.await.expect("the connection ends");
    code
}

async fn log_eventually(h: &Harness, want: &[&str]) {
    for _ in 0..200 {
        if *h.log.lock().unwrap() == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*h.log.lock().unwrap(), want);
}

#[tokio::test]
async fn text_binary_fragments_ping_and_a_client_close() {
    let h = start();
    let mut ws = open(&h).await;
    ws.send(Message::text("hello")).await.unwrap();
    ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    ws.send(Message::Frame(Frame::message(
        "frag",
        OpCode::Data(Data::Text),
        false,
    )))
    .await
    .unwrap();
    ws.send(Message::Ping(b"p".to_vec().into())).await.unwrap();
    ws.send(Message::Frame(Frame::message(
        "ment",
        OpCode::Data(Data::Continue),
        true,
    )))
    .await
    .unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(pong, Message::Pong(b"p".to_vec().into()));
    log_eventually(&h, &["/ws text:hello", "/ws binary:3", "/ws text:fragment"]).await;
    ws.close(None).await.unwrap();
    // The server echoes the close and ends the connection.
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(_)) = ws.next().await {}
    });
    end.await.unwrap();
}

#[tokio::test]
async fn a_message_over_the_limit_closes_1009() {
    let h = start();
    let mut ws = open(&h).await;
    ws.send(Message::binary(vec![0u8; MAX_MESSAGE + 1]))
        .await
        .unwrap();
    assert_eq!(close_code(&mut ws).await, Some(1009));
    // Fragments count together.
    let mut ws = open(&h).await;
    for fin in [false, true] {
        let op = if fin { Data::Continue } else { Data::Binary };
        let frame = Frame::message(vec![0u8; MAX_MESSAGE / 2 + 1], OpCode::Data(op), fin);
        ws.send(Message::Frame(frame)).await.unwrap();
    }
    assert_eq!(close_code(&mut ws).await, Some(1009));
}

#[tokio::test]
async fn invalid_utf8_text_closes_1007() {
    let h = start();
    let mut ws = open(&h).await;
    let frame = Frame::message(vec![b'a', 0xff, 0xfe], OpCode::Data(Data::Text), true);
    ws.send(Message::Frame(frame)).await.unwrap();
    assert_eq!(close_code(&mut ws).await, Some(1007));
    assert!(h.log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn the_service_can_close_and_the_server_closes_1013_on_quiesce() {
    let h = start();
    let mut ws = open(&h).await;
    ws.send(Message::text("close-me")).await.unwrap();
    assert_eq!(close_code(&mut ws).await, Some(4000));

    let mut ws = open(&h).await;
    ws.send(Message::text("before")).await.unwrap();
    log_eventually(&h, &["/ws text:close-me", "/ws text:before"]).await;
    h.quiesce.send(()).await.unwrap();
    assert_eq!(close_code(&mut ws).await, Some(1013));
}

#[tokio::test]
async fn shutdown_closes_websockets_1001() {
    let h = start();
    let mut ws = open(&h).await;
    ws.send(Message::text("x")).await.unwrap();
    log_eventually(&h, &["/ws text:x"]).await;
    let Harness { server, .. } = h;
    let stopping = tokio::task::spawn_blocking(move || server.stop());
    assert_eq!(close_code(&mut ws).await, Some(1001));
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .unwrap()
        .unwrap();
}

const RAW_UPGRADE: &[u8] =
    b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
    Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

#[test]
fn raw_handshake_accept_key_and_unmasked_frames_close_1002() {
    let h = start();
    let mut c = connect(h.server.addr);
    // The first frame rides in the same write as the upgrade request.
    let mut req = RAW_UPGRADE.to_vec();
    req.extend_from_slice(&[0x81, 0x02, b'h', b'i']);
    c.write_all(&req).unwrap();
    let mut pending = Vec::new();
    let r = read_reply(&mut c, &mut pending).unwrap();
    assert_eq!(r.status, 101);
    assert_eq!(
        r.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    while pending.len() < 4 {
        let mut b = [0u8; 64];
        let n = c.read(&mut b).unwrap();
        assert!(n > 0);
        pending.extend_from_slice(&b[..n]);
    }
    assert_eq!(pending[0], 0x88);
    assert_eq!(u16::from_be_bytes([pending[2], pending[3]]), 1002);
}

#[test]
fn bad_upgrades_are_refused() {
    let h = start();
    let req = String::from_utf8(RAW_UPGRADE.to_vec()).unwrap();
    let r = http_support::exchange(
        h.server.addr,
        req.replace("Version: 13", "Version: 8").as_bytes(),
    );
    assert_eq!(
        (r.status, r.header("sec-websocket-version")),
        (426, Some("13"))
    );
    let r = http_support::exchange(h.server.addr, req.replace("ZQ==", "").as_bytes());
    assert_eq!(r.status, 400);
    let r = http_support::exchange(
        h.server.addr,
        b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 400);
}
