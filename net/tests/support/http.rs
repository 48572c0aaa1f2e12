//! Helpers for the HTTP server tests: run `serve` on a glommio executor thread bound to
//! loopback, and speak raw HTTP over std sockets for the edge cases clients hide.

#![allow(dead_code)] // each test binary uses a subset

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use nervix_net::http::{serve, HttpService, Listener, ServerLimits, TlsAcceptor};

/// A server running on its own glommio executor; dropping it stops and joins it.
pub struct Server {
    pub addr: SocketAddr,
    stop: Option<async_channel::Sender<()>>,
    thread: Option<glommio::ExecutorJoinHandle<()>>,
}

impl Server {
    /// Starts `make()` behind a listener on 127.0.0.1 (any port).
    pub fn start<S, F>(make: F, limits: ServerLimits, tls: Option<TlsAcceptor>) -> Server
    where
        S: HttpService,
        F: FnOnce() -> S + Send + 'static,
    {
        Server::start_on("127.0.0.1:0".parse().unwrap(), make, limits, tls)
    }

    /// Starts `make()` behind a listener on `addr` (several servers may share one).
    pub fn start_on<S, F>(
        addr: SocketAddr,
        make: F,
        limits: ServerLimits,
        tls: Option<TlsAcceptor>,
    ) -> Server
    where
        S: HttpService,
        F: FnOnce() -> S + Send + 'static,
    {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = async_channel::bounded::<()>(1);
        let thread = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .name("http-test")
            .spawn(move || async move {
                let listener = Listener::bind(addr).unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let stop = async move {
                    let _ = stop_rx.recv().await;
                };
                serve(listener, tls, std::rc::Rc::new(make()), limits, stop)
                    .await
                    .unwrap();
            })
            .unwrap();
        let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        Server {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Signals shutdown and waits until `serve` returned (all connections closed).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A connected socket with a read timeout, so a broken server fails the test instead of
/// hanging it.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// A parsed response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response (Content-Length framed, or none for 1xx/204) from `s`, keeping any
/// bytes after it in `pending`.
pub fn read_reply(s: &mut TcpStream, pending: &mut Vec<u8>) -> Option<Reply> {
    let head_end = loop {
        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        pending.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(pending[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    pending.drain(..head_end);
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    while pending.len() < len {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        pending.extend_from_slice(&chunk[..n]);
    }
    let body = pending.drain(..len).collect();
    Some(Reply {
        status,
        headers,
        body,
    })
}

/// Sends `request` on a new connection and reads one response.
pub fn exchange(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut s = connect(addr);
    s.write_all(request).unwrap();
    read_reply(&mut s, &mut Vec::new()).expect("a response")
}

/// Whether the server closed `s` (EOF, or a reset) within the read timeout.
pub fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1024];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}
