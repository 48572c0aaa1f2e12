//! A TLS VHOST through a real node: its endpoint is served on the HTTPS listener only, with the
//! certificate of the resource version it bound (a CA generated for the test, a rustls client
//! trusting only that CA); REBIND RESOURCE rotates the certificate while a keep-alive client
//! keeps posting, and every one of its requests is accepted — ingestion never pauses.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, ServerName};
use support::dataplane::{consumer, define, next_delivery, runtime};
use support::Node;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
    der: CertificateDer<'static>,
}

fn ca() -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().expect("ca key");
    let cert = params.self_signed(&key).expect("ca cert");
    Ca {
        pem: cert.pem(),
        der: cert.der().clone(),
        issuer: Issuer::new(params, key),
    }
}

/// Writes a `localhost` bundle (tls.crt, tls.key, ca.crt) with `serial`; returns its DER.
fn write_bundle(ca: &Ca, serial: u64, dir: &Path) -> Vec<u8> {
    std::fs::create_dir_all(dir).expect("bundle dir");
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    params.serial_number = Some(serial.into());
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, &ca.issuer).expect("signed");
    std::fs::write(dir.join("tls.crt"), cert.pem()).expect("tls.crt");
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).expect("tls.key");
    std::fs::write(dir.join("ca.crt"), &ca.pem).expect("ca.crt");
    cert.der().to_vec()
}

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn open(addr: SocketAddr, ca_der: &CertificateDer<'static>) -> std::io::Result<Tls> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_der.clone()).expect("root");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    connector
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
}

fn peer_cert(stream: &Tls) -> Vec<u8> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .expect("certificates")[0]
        .to_vec()
}

/// One keep-alive POST of `body` to `/secure`; the status.
async fn post(stream: &mut Tls, body: &str) -> u16 {
    let request = format!(
        "POST /secure HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                return head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .expect("status");
            }
        }
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("a response in time")
            .expect("read");
        assert!(read > 0, "the server closed the connection");
        got.extend_from_slice(&buf[..read]);
    }
}

const GRAPH: &str = "
CREATE SCHEMA event (id I64);
CREATE WIRE JSON SCHEMA event_wire MODE STRICT (id integer);
CREATE CODEC event_codec FROM WIRE JSON SCHEMA event_wire TO SCHEMA event;
CREATE RELAY events SCHEMA event UNBRANCHED;
CREATE ENDPOINT secure ON secure_host PATH '/secure' TYPE HTTP;
CREATE HTTP ENDPOINT INGESTOR secure_http
  FROM secure MODE NO ACK ON QUIESCE REJECT RETRY AFTER 1s
  DECODE USING event_codec
  TO events INHERIT ALL UNBRANCHED FLUSH IMMEDIATE ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE CLIENT CONSUMER EMITTER events_out
  FROM events
  TO SCHEMA event
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 30s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
";

#[test]
fn a_tls_vhost_serves_https_and_rotates_its_certificate_without_pausing() {
    let dir = support::scratch_dir("endpoint_tls");
    let ca = ca();
    let first = write_bundle(&ca, 1, &dir.join("bundle-1"));
    let second = write_bundle(&ca, 2, &dir.join("bundle-2"));
    let node = Node::start(&dir.join("node"));
    let mut admin = node.admin();
    define(
        &mut admin,
        &format!(
            "CREATE DOMAIN web; USE web; CREATE RESOURCE edge_tls;
             UPLOAD RESOURCE edge_tls FROM '{}';
             CREATE VHOST secure_host localhost WITH TLS edge_tls VERSION LATEST;",
            dir.join("bundle-1").display()
        ),
    );
    define(&mut admin, GRAPH);

    let rt = runtime();
    let (https, ca_der) = (node.https, ca.der.clone());
    let mut steady = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut stream) = open(https, &ca_der).await {
                if post(&mut stream, r#"{"id": 0}"#).await == 202 {
                    assert_eq!(peer_cert(&stream), first, "the bound version's certificate");
                    break stream;
                }
            }
            assert!(Instant::now() < deadline, "HTTPS never served the endpoint");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    // The TLS VHOST is not served on the plain listener.
    let plain = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Host: localhost",
        ])
        .args(["--data-binary", r#"{"id": 1}"#])
        .arg(format!("http://{}/secure", node.http))
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "404");

    // A keep-alive client posts throughout the rotation.
    let rotating = Arc::new(AtomicBool::new(true));
    let (flag, ca_der) = (rotating.clone(), ca.der.clone());
    let poster = std::thread::spawn(move || {
        runtime().block_on(async {
            let mut stream = open(https, &ca_der).await.expect("connect");
            let mut statuses = Vec::new();
            let mut id = 100;
            while flag.load(Ordering::Relaxed) {
                statuses.push(post(&mut stream, &format!(r#"{{"id": {id}}}"#)).await);
                id += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            statuses
        })
    });
    std::thread::sleep(Duration::from_millis(200));
    admin.ok(&format!(
        "UPLOAD RESOURCE edge_tls FROM '{}';",
        dir.join("bundle-2").display()
    ));
    admin.ok("REBIND RESOURCE edge_tls TO VERSION LATEST;");
    let ca_der = ca.der.clone();
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let stream = open(https, &ca_der).await.expect("connect");
            if peer_cert(&stream) == second {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the new certificate never served"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    rotating.store(false, Ordering::Relaxed);
    let statuses = poster.join().expect("poster");
    assert!(statuses.len() > 10, "{} requests", statuses.len());
    assert!(
        statuses.iter().all(|s| *s == 202),
        "every request during the rotation was accepted: {statuses:?}"
    );
    // The connection opened before the rotation still works, with its certificate.
    rt.block_on(async {
        assert_eq!(post(&mut steady, r#"{"id": 1}"#).await, 202);
        assert_eq!(peer_cert(&steady), first);
    });

    // Every accepted record arrives: ids 0, 1 and the poster's.
    let expected = statuses.len() + 2;
    let received = rt.block_on(async {
        let session = nervix_net::client::Session::connect(node.session)
            .await
            .expect("session");
        let mut consumer = consumer(&session, "web", "events_out", 8).await;
        let mut rows = 0;
        while rows < expected {
            let delivery = next_delivery(&mut consumer, 10).await;
            rows += delivery.batch.num_rows();
            consumer.ack(delivery.seq).await.expect("ack");
        }
        rows
    });
    assert_eq!(received, expected);
}
