//! Unit and property tests of the request-head parser.

use super::*;
use proptest::prelude::*;

fn limits() -> ServerLimits {
    ServerLimits {
        max_head_bytes: 1024,
        max_headers: 8,
        ..ServerLimits::default()
    }
}

fn parse(input: &[u8]) -> Result<(RequestHead, HeadFacts), HeadError> {
    let mut scanner = HeadScanner::default();
    let skip = leading_empty_lines(input);
    let len = scanner.scan(&input[skip..]).expect("a complete head");
    let mut head = RequestHead::default();
    let facts = parse_head(&input[skip..skip + len], &limits(), &mut head)?;
    Ok((head, facts))
}

#[test]
fn parses_a_request() {
    let (head, facts) = parse(
        b"\r\nPOST /a/b?x=1&y HTTP/1.1\r\nHost: API.Example.com:8080\r\nX-Multi: 1\r\n\
          x-multi:  2 \r\nContent-Length: 12\r\n\r\nbody",
    )
    .unwrap();
    assert_eq!(head.method, Method::Post);
    assert_eq!(head.path, "/a/b");
    assert_eq!(head.query.as_deref(), Some("x=1&y"));
    assert_eq!(head.host.as_deref(), Some("api.example.com"));
    assert_eq!(
        head.headers("X-MULTI").collect::<Vec<_>>(),
        [&b"1"[..], b"2"]
    );
    assert_eq!(head.header("content-length"), Some(&b"12"[..]));
    assert!(head.keep_alive && !head.websocket);
    assert_eq!(facts.framing, BodyFraming::Length(12));
    assert!(facts.http11 && !facts.expect_continue);
}

#[test]
fn keep_alive_hosts_and_targets() {
    let ka = |req: &[u8]| parse(req).unwrap().0.keep_alive;
    assert!(!ka(
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n"
    ));
    assert!(!ka(b"GET / HTTP/1.0\r\n\r\n"));
    assert!(ka(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    let host = |req: &[u8]| parse(req).unwrap().0.host;
    assert_eq!(
        host(b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n").as_deref(),
        Some("[::1]")
    );
    assert_eq!(host(b"GET / HTTP/1.1\r\nHost:\r\n\r\n"), None);
    let (head, _) = parse(b"GET http://Other.org:1/p?q HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(
        (head.host.as_deref(), head.path.as_str()),
        (Some("other.org"), "/p")
    );
    assert_eq!(head.query.as_deref(), Some("q"));
    let (head, _) = parse(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(head.path, "*");
    let (head, _) = parse(b"BREW /pot HTTP/1.1\nHost: a\n\n").unwrap();
    assert_eq!(head.method, Method::Other("BREW".into()));
}

#[test]
fn framing_and_expectations() {
    let facts = |req: &[u8]| parse(req).map(|(_, f)| f);
    let chunked = facts(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n");
    assert_eq!(chunked.unwrap().framing, BodyFraming::Chunked);
    let same = facts(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n");
    assert_eq!(same.unwrap().framing, BodyFraming::Length(3));
    let huge =
        facts(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n");
    assert_eq!(huge.unwrap().framing, BodyFraming::Length(u64::MAX));
    let expect = facts(b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n");
    assert!(expect.unwrap().expect_continue);
    let status = |req: &[u8]| parse(req).map(|_| ()).map_err(HeadError::status);
    assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), Err(400));
    assert_eq!(
        status(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        Err(400)
    );
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), Err(400));
    assert_eq!(
        status(b"GET / HTTP/1.1\r\nHost: a\r\n fold\r\n\r\n"),
        Err(400)
    );
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost : a\r\n\r\n"), Err(400));
    assert_eq!(status(b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), Err(400));
    assert_eq!(
        status(b"GET relative HTTP/1.1\r\nHost: a\r\n\r\n"),
        Err(400)
    );
    assert_eq!(status(b"G@T / HTTP/1.1\r\nHost: a\r\n\r\n"), Err(400));
    assert_eq!(status(b"GET / HTTP/3.0\r\nHost: a\r\n\r\n"), Err(505));
    assert_eq!(status(b"GET / HTTX/1.1\r\nHost: a\r\n\r\n"), Err(400));
    let cl = |v: &str| {
        status(format!("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: {v}\r\n\r\n").as_bytes())
    };
    assert_eq!(cl("-1"), Err(400));
    assert_eq!(cl("1, 2"), Err(400));
    assert_eq!(cl(""), Err(400));
    let te = |v: &str| {
        status(format!("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {v}\r\n\r\n").as_bytes())
    };
    assert_eq!(te("gzip, chunked"), Err(501));
    assert_eq!(te("chunked, chunked"), Err(400));
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
        Err(400)
    );
    assert_eq!(
        status(b"GET / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n"),
        Err(417)
    );
    let mut many = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    many.extend(b"X: y\r\n".repeat(8));
    many.extend(b"\r\n");
    assert_eq!(status(&many), Err(431));
}

#[test]
fn websocket_upgrades() {
    const OK: &[u8] =
        b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n\
        Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    let (head, facts) = parse(OK).unwrap();
    assert!(head.websocket);
    assert_eq!(facts.ws_refusal, None);
    let with = |from: &str, to: &str| {
        let req = String::from_utf8(OK.to_vec()).unwrap().replace(from, to);
        let (head, facts) = parse(req.as_bytes()).unwrap();
        (head.websocket, facts.ws_refusal)
    };
    assert_eq!(with("Version: 13", "Version: 8"), (false, Some(426)));
    assert_eq!(with("ZQ==", "ZQ"), (false, Some(400)));
    assert_eq!(
        with("dGhlIHNhbXBsZSBub25jZQ==", "c2hvcnQ="),
        (false, Some(400))
    );
    assert_eq!(with("GET", "POST"), (false, Some(400)));
    assert_eq!(
        with("keep-alive, Upgrade", "keep-alive"),
        (false, Some(400))
    );
    assert_eq!(with("Upgrade: WebSocket", "Upgrade: h2c"), (false, None));
}

#[test]
fn heads_over_the_limit_are_431() {
    let mut big = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
    big.extend([b'a'; 1100]);
    big.extend(b"\r\n\r\n");
    assert_eq!(parse(&big).map(|_| ()), Err(HeadError::TooLarge));
}

proptest! {
    #[test]
    fn the_scanner_finds_the_same_end_at_every_split(
        headers in proptest::collection::vec(("[a-z]{1,8}", "[ -~]{0,12}"), 0..6),
        lf_only in any::<bool>(),
        tail in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let eol = if lf_only { "\n" } else { "\r\n" };
        let mut text = format!("GET / HTTP/1.1{eol}Host: a{eol}");
        for (n, v) in &headers {
            text.push_str(&format!("x-{n}: {v}{eol}"));
        }
        text.push_str(eol);
        let head_len = text.len();
        let mut input = text.into_bytes();
        input.extend(&tail);
        let expected = HeadScanner::default().scan(&input);
        prop_assert_eq!(expected, Some(head_len));
        for split in 0..=input.len() {
            let mut s = HeadScanner::default();
            let first = s.scan(&input[..split]);
            let found = first.or_else(|| s.scan(&input));
            prop_assert_eq!(found, expected);
        }
        // Byte at a time.
        let mut s = HeadScanner::default();
        let found = (1..=input.len()).find_map(|n| s.scan(&input[..n]));
        prop_assert_eq!(found, expected);
        let parsed = parse_head(&input[..head_len], &limits(), &mut RequestHead::default());
        prop_assert!(parsed.is_ok(), "{:?}", parsed);
    }

    #[test]
    fn arbitrary_heads_never_panic(input in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut head = RequestHead::default();
        let _ = parse_head(&input, &limits(), &mut head);
        let _ = HeadScanner::default().scan(&input);
    }
}
