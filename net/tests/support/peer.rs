//! A scripted protocol peer for the client tests: it plays the server's side of a session over
//! a real loopback TCP connection, with the crate's own frame encoding and decoder.

#![allow(dead_code)]

use std::time::Duration;

use nervix_net::client::Session;
use nervix_net::session::frame::{Frame, FrameDecoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long a peer waits for a frame the script expects.
const WAIT: Duration = Duration::from_secs(10);

/// The server's side of a session, driven by a test script.
pub struct Peer {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: Vec<u8>,
}

impl Peer {
    /// The next frame from the client.
    pub async fn recv(&mut self) -> Frame {
        tokio::time::timeout(WAIT, self.try_recv())
            .await
            .expect("the client sent no frame in time")
            .expect("the client closed the connection")
    }

    pub async fn try_recv(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self
                .decoder
                .next_frame()
                .expect("the client's frames decode")
            {
                return Some(frame);
            }
            let n = self.stream.read(&mut self.buf).await.ok()?;
            if n == 0 {
                return None;
            }
            self.decoder.push(&self.buf[..n]);
        }
    }

    /// Asserts the client sends nothing for `d`.
    pub async fn silence(&mut self, d: Duration) {
        if let Ok(frame) = tokio::time::timeout(d, self.try_recv()).await {
            panic!("expected silence, got {frame:?}");
        }
    }

    pub async fn send(&mut self, frame: Frame) {
        let bytes = frame.encode().expect("the script's frames encode");
        self.stream.write_all(&bytes).await.expect("peer write");
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("peer write");
    }
}

/// A connected client session and the peer playing its server.
pub async fn connect() -> (Session, Peer) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (session, accepted) = tokio::join!(Session::connect(addr), listener.accept());
    let (stream, _) = accepted.unwrap();
    (
        session.unwrap(),
        Peer {
            stream,
            decoder: FrameDecoder::new(),
            buf: vec![0; 1 << 20],
        },
    )
}
