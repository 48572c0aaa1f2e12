//! The HTTP/1.1 server end to end on loopback: curl for the ordinary paths (keep-alive reuse,
//! bodies, chunked uploads, the 413 a real client sees), raw sockets for the edge cases
//! (pipelining, 100-continue, 400/413/431/501/505, HTTP/1.0, idle close, the connection bound,
//! shutdown).

#[path = "support/http.rs"]
mod http_support;

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use http_support::{closed_by_server, connect, exchange, read_reply, Server};
use nervix_net::http::{
    HeadDecision, HttpService, RequestHead, Response, ServerLimits, WsMessage, WsVerdict,
};

/// Small limits so the tests cross them cheaply.
fn limits() -> ServerLimits {
    ServerLimits {
        max_head_bytes: 4096,
        max_headers: 20,
        max_body_bytes: 64 * 1024,
        idle_timeout_ms: 5_000,
        ..ServerLimits::default()
    }
}

struct Echo;

impl HttpService for Echo {
    type Route = ();

    fn head(&self, head: &RequestHead, _tls: bool) -> HeadDecision<()> {
        match head.path.as_str() {
            "/echo" => HeadDecision::ReadBody(()),
            "/info" => HeadDecision::Respond(Response::status(200).body(format!(
                    "{:?} {} {:?} {:?} {}",
                    head.method,
                    head.path,
                    head.query,
                    head.host,
                    head.header("x-a")
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                        .unwrap_or_default()
                ))),
            "/hello" => HeadDecision::Respond(
                Response::status(200)
                    .header("content-type", "text/plain")
                    .body("hello"),
            ),
            _ => HeadDecision::Respond(Response::status(404)),
        }
    }

    async fn request(&self, _route: (), _head: &RequestHead, body: &[u8]) -> Response {
        Response::status(200)
            .header("x-body-len", body.len().to_string())
            .body(body.to_vec())
    }

    async fn websocket_message(&self, _: &(), _: &RequestHead, _: WsMessage<'_>) -> WsVerdict {
        WsVerdict::Continue
    }

    async fn websocket_closed(&self, _: &()) -> u16 {
        std::future::pending().await
    }
}

fn server() -> Server {
    Server::start(|| Echo, limits(), None)
}

fn curl(args: &[&str]) -> (String, String) {
    let out = Command::new("/usr/bin/curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn curl_reuses_a_keep_alive_connection() {
    let s = server();
    let url = format!("http://{}/hello", s.addr);
    let (out, err) = curl(&["-v", &url, &url]);
    assert_eq!(out, "hellohello");
    assert!(
        err.contains("Re-using existing") || err.contains("Reusing existing"),
        "{err}"
    );
}

#[test]
fn curl_posts_plain_and_chunked_bodies() {
    let s = server();
    let url = format!("http://{}/echo", s.addr);
    let (out, _) = curl(&["--data-binary", "some body", &url]);
    assert_eq!(out, "some body");
    let (out, _) = curl(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        "chunked body",
        &url,
    ]);
    assert_eq!(out, "chunked body");
}

#[test]
fn curl_sees_413_for_a_large_body() {
    let s = server();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big");
    std::fs::write(&file, vec![b'x'; 200 * 1024]).unwrap();
    let url = format!("http://{}/echo", s.addr);
    let data = format!("@{}", file.display());
    let (out, err) = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--data-binary",
        &data,
        &url,
    ]);
    assert_eq!(out, "413", "{err}");
    let (out, err) = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &data,
        &url,
    ]);
    assert_eq!(out, "413", "{err}");
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let s = server();
    let mut c = connect(s.addr);
    c.write_all(
        b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\n\
          POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcde\
          POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n\
          GET /info?q=1 HTTP/1.1\r\nHost: Example.COM:8080\r\nX-A: v\r\n\r\n",
    )
    .unwrap();
    let mut pending = Vec::new();
    let bodies: Vec<Vec<u8>> = (0..4)
        .map(|_| read_reply(&mut c, &mut pending).unwrap().body)
        .collect();
    assert_eq!(bodies[0], b"hello");
    assert_eq!(bodies[1], b"abcde");
    assert_eq!(bodies[2], b"xyz");
    assert_eq!(
        String::from_utf8_lossy(&bodies[3]),
        r#"Get /info Some("q=1") Some("example.com") v"#
    );
}

#[test]
fn keep_alive_reuses_one_socket_and_http10_closes() {
    let s = server();
    let mut c = connect(s.addr);
    let mut pending = Vec::new();
    for _ in 0..3 {
        c.write_all(b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        let r = read_reply(&mut c, &mut pending).unwrap();
        assert_eq!((r.status, r.header("connection")), (200, None));
    }
    c.write_all(b"GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let r = read_reply(&mut c, &mut pending).unwrap();
    assert_eq!(r.header("connection"), Some("close"));
    assert!(closed_by_server(&mut c));

    let mut c = connect(s.addr);
    c.write_all(b"GET /hello HTTP/1.0\r\n\r\n").unwrap();
    let r = read_reply(&mut c, &mut Vec::new()).unwrap();
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert!(closed_by_server(&mut c));

    let mut c = connect(s.addr);
    let mut pending = Vec::new();
    for _ in 0..2 {
        c.write_all(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let r = read_reply(&mut c, &mut pending).unwrap();
        assert_eq!(r.header("connection"), Some("keep-alive"));
    }
}

#[test]
fn head_requests_get_a_length_but_no_body() {
    let s = server();
    let mut c = connect(s.addr);
    c.write_all(b"HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"hello") {
        let n = std::io::Read::read(&mut c, &mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let one = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\n";
    assert_eq!(String::from_utf8(got).unwrap(), format!("{one}{one}hello"));
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let s = server();
    let mut c = connect(s.addr);
    c.write_all(
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    let mut pending = Vec::new();
    let r = read_reply(&mut c, &mut pending).unwrap();
    assert_eq!(r.status, 100);
    c.write_all(b"body").unwrap();
    let r = read_reply(&mut c, &mut pending).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"body"[..]));
    // A refused route never asks for the body and closes afterwards.
    c.write_all(
        b"POST /nope HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    let r = read_reply(&mut c, &mut pending).unwrap();
    assert_eq!((r.status, r.header("connection")), (404, Some("close")));
}

#[test]
fn a_refused_request_with_a_body_keeps_the_connection() {
    let s = server();
    let mut c = connect(s.addr);
    c.write_all(b"POST /nope HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let mut pending = Vec::new();
    assert_eq!(read_reply(&mut c, &mut pending).unwrap().status, 404);
    assert_eq!(read_reply(&mut c, &mut pending).unwrap().body, b"hello");
}

fn refused(request: &[u8], status: u16) {
    let s = server();
    let mut c = connect(s.addr);
    c.write_all(request).unwrap();
    let r = read_reply(&mut c, &mut Vec::new()).expect("a response");
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(request));
    assert_eq!(r.header("connection"), Some("close"));
    assert!(r.header("content-length").is_some());
    assert!(closed_by_server(&mut c));
}

#[test]
fn framing_errors_are_answered_then_closed() {
    refused(b"GET / HTTP/1.1\r\n\r\n", 400); // no Host
    refused(b"GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n", 400);
    refused(b"GET /\r\n\r\n", 400);
    refused(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505);
    refused(
        b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
        501,
    );
    refused(
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
    );
    refused(
        b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        400,
    );
    // Over the body limit from Content-Length: refused before any body byte is sent.
    refused(
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n",
        413,
    );
    let mut big = b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 8000));
    big.extend_from_slice(b"\r\n\r\n");
    refused(&big, 431);
    let mut many = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..30 {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    refused(&many, 431);
}

#[test]
fn a_chunked_body_over_the_limit_is_refused_while_reading() {
    let s = server();
    let mut c = connect(s.addr);
    c.write_all(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    let chunk = vec![b'x'; 16 * 1024];
    let mut status = None;
    let mut pending = Vec::new();
    for _ in 0..8 {
        if c.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .is_err()
            || c.write_all(&chunk).is_err()
            || c.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    if let Some(r) = read_reply(&mut c, &mut pending) {
        status = Some(r.status);
    }
    assert_eq!(status, Some(413));
}

#[test]
fn idle_connections_are_closed() {
    let limits = ServerLimits {
        idle_timeout_ms: 200,
        ..limits()
    };
    let s = Server::start(|| Echo, limits, None);
    let mut c = connect(s.addr);
    c.write_all(b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_reply(&mut c, &mut Vec::new()).unwrap().status, 200);
    let t = Instant::now();
    assert!(closed_by_server(&mut c));
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn the_connection_bound_holds_new_connections_until_one_closes() {
    let limits = ServerLimits {
        max_connections: 1,
        ..limits()
    };
    let s = Server::start(|| Echo, limits, None);
    let mut first = connect(s.addr);
    first
        .write_all(b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_reply(&mut first, &mut Vec::new()).unwrap().status, 200);
    let mut second = connect(s.addr);
    second
        .write_all(b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    second
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(read_reply(&mut second, &mut Vec::new()).is_none());
    drop(first);
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(
        read_reply(&mut second, &mut Vec::new()).unwrap().status,
        200
    );
}

#[test]
fn stop_closes_idle_connections_and_returns() {
    let s = server();
    let mut c = connect(s.addr);
    c.write_all(b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_reply(&mut c, &mut Vec::new()).unwrap().status, 200);
    let addr = s.addr;
    let t = Instant::now();
    s.stop();
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(closed_by_server(&mut c));
    // The kernel releases the listening socket once the executor's ring has let go of its
    // cancelled accept, which is asynchronous: allow it a moment.
    let refused = (0..40).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect(addr).is_err()
    });
    assert!(refused, "{addr} still accepts after stop");
}

#[test]
fn many_short_connections() {
    let s = server();
    for _ in 0..50 {
        let r = exchange(
            s.addr,
            b"GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.body, b"hello");
    }
}

#[test]
fn several_executors_share_one_address() {
    let first = server();
    let second = Server::start_on(first.addr, || Echo, limits(), None);
    assert_eq!(second.addr, first.addr);
    for _ in 0..20 {
        let r = exchange(first.addr, b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(r.body, b"hello");
    }
    // Either executor alone keeps serving the address. The first one's socket may still take
    // a connection while its executor shuts down (that connection is reset), so the address
    // is asked again until the second answers.
    drop(first);
    let mut answered = None;
    for _ in 0..50 {
        let mut s = connect(second.addr);
        s.write_all(b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        answered = read_reply(&mut s, &mut Vec::new());
        if answered.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        answered.expect("the second executor answers").body,
        b"hello"
    );
}
