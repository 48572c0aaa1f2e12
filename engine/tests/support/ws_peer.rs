//! A scripted WebSocket server on loopback for WEBSOCKETS CONNECTION tests: each accepted
//! connection plays the next script (the last one repeats), then stays open and idle until
//! the client closes it. It records every text frame it received and counts connections.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

/// One scripted move of the server.
#[derive(Debug, Clone)]
pub enum Peer {
    /// Sends a text frame.
    Send(&'static str),
    /// Waits for the next text frame (recorded whatever it holds).
    Receive,
    /// Closes the connection.
    Close,
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub connections: usize,
    pub received: Vec<String>,
}

pub struct WsPeer {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Seen>>,
}

impl WsPeer {
    /// Starts the server on `rt`, playing `scripts` per connection in order.
    pub fn start(rt: &tokio::runtime::Runtime, scripts: Vec<Vec<Peer>>) -> WsPeer {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let recorded = seen.clone();
        rt.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let index = {
                    let mut seen = recorded.lock().expect("seen");
                    seen.connections += 1;
                    seen.connections - 1
                };
                let script = scripts[index.min(scripts.len() - 1)].clone();
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                        return;
                    };
                    for step in script {
                        match step {
                            Peer::Send(text) => {
                                if ws.send(Message::text(text)).await.is_err() {
                                    return;
                                }
                            }
                            Peer::Receive => loop {
                                match ws.next().await {
                                    Some(Ok(Message::Text(text))) => {
                                        let mut seen = recorded.lock().expect("seen");
                                        seen.received.push(text.as_str().to_string());
                                        break;
                                    }
                                    Some(Ok(_)) => continue,
                                    _ => return,
                                }
                            },
                            Peer::Close => {
                                let _ = ws.close(None).await;
                                return;
                            }
                        }
                    }
                    // Idle: read (answering pings) until the client goes.
                    while let Some(Ok(_)) = ws.next().await {}
                });
            }
        });
        WsPeer { addr, seen }
    }

    pub fn connections(&self) -> usize {
        self.seen.lock().expect("seen").connections
    }

    pub fn received(&self) -> Vec<String> {
        self.seen.lock().expect("seen").received.clone()
    }
}
