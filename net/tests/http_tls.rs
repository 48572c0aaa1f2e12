//! HTTPS end to end on loopback: a CA and server certificates generated with rcgen, written as
//! a bundle directory (tls.crt, tls.key, ca.crt) and loaded with `CertStore::load_bundle`; a
//! tokio-rustls client that trusts only that CA. Then rotation: `CertStore::set` with a second
//! certificate while a keep-alive connection stays up; new handshakes see the new certificate
//! (serial 2), the old connection keeps working on the old one (serial 1).

#[path = "support/http.rs"]
mod http_support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http_support::Server;
use nervix_net::http::{
    CertStore, HeadDecision, HttpService, RequestHead, Response, ServerLimits, TlsAcceptor,
    WsMessage, WsVerdict,
};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Hello;

impl HttpService for Hello {
    type Route = ();

    fn head(&self, head: &RequestHead, tls: bool) -> HeadDecision<()> {
        let host = head.host.clone().unwrap_or_default();
        HeadDecision::Respond(Response::status(200).body(format!("{host} tls={tls}")))
    }

    async fn request(&self, _: (), _: &RequestHead, _: &[u8]) -> Response {
        Response::status(500)
    }

    async fn websocket_message(&self, _: &(), _: &RequestHead, _: WsMessage<'_>) -> WsVerdict {
        WsVerdict::Continue
    }

    async fn websocket_closed(&self, _: &()) -> u16 {
        std::future::pending().await
    }
}

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
    der: CertificateDer<'static>,
}

fn ca() -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        der: cert.der().clone(),
        issuer: Issuer::new(params, key),
    }
}

/// Writes a bundle for `localhost` with this serial; returns the server certificate's DER.
fn write_bundle(ca: &Ca, serial: u64, dir: &Path) -> Vec<u8> {
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.serial_number = Some(serial.into());
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.join("ca.crt"), &ca.pem).unwrap();
    cert.der().to_vec()
}

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn open(addr: SocketAddr, ca: &Ca, name: &str) -> std::io::Result<Tls> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    connector
        .connect(ServerName::try_from(name.to_owned()).unwrap(), tcp)
        .await
}

fn peer_cert(c: &Tls) -> Vec<u8> {
    c.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// One keep-alive GET; returns the body.
async fn get(c: &mut Tls) -> String {
    c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .unwrap()
                    .parse()
                    .unwrap();
                if got.len() >= end + 4 + len {
                    assert!(head.starts_with("http/1.1 200"), "{head}");
                    return String::from_utf8(got[end + 4..end + 4 + len].to_vec()).unwrap();
                }
            }
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed");
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap()
}

#[tokio::test]
async fn serves_https_and_rotates_certificates_without_dropping_connections() {
    let ca = ca();
    let first_dir = tempfile::tempdir().unwrap();
    let second_dir = tempfile::tempdir().unwrap();
    let first = write_bundle(&ca, 1, first_dir.path());
    let second = write_bundle(&ca, 2, second_dir.path());

    let store = CertStore::new();
    let hosts = vec!["localhost".to_owned()];
    store.set(&hosts, &CertStore::load_bundle(first_dir.path()).unwrap());
    let acceptor = TlsAcceptor::new(Arc::clone(&store)).unwrap();
    let server = Server::start(|| Hello, ServerLimits::default(), Some(acceptor));

    let mut old = open(server.addr, &ca, "localhost").await.unwrap();
    assert_eq!(get(&mut old).await, "localhost tls=true");
    assert_eq!(peer_cert(&old), first);

    // Rotate (REBIND RESOURCE): the open connection is untouched.
    store.set(&hosts, &CertStore::load_bundle(second_dir.path()).unwrap());
    let mut new = open(server.addr, &ca, "localhost").await.unwrap();
    assert_eq!(peer_cert(&new), second);
    assert_eq!(get(&mut new).await, "localhost tls=true");
    assert_eq!(get(&mut old).await, "localhost tls=true");
    assert_eq!(peer_cert(&old), first);

    // A name the store does not serve fails the handshake; removal takes effect at once.
    assert!(open(server.addr, &ca, "other.test").await.is_err());
    store.remove(&hosts);
    assert!(open(server.addr, &ca, "localhost").await.is_err());
    assert_eq!(get(&mut old).await, "localhost tls=true");
    drop((old, new));
    server.stop();
}

#[test]
fn load_bundle_reports_missing_and_invalid_files() {
    let dir = tempfile::tempdir().unwrap();
    let err = CertStore::load_bundle(dir.path()).unwrap_err();
    assert!(err.to_string().contains("tls.crt"), "{err}");
    let ca = ca();
    write_bundle(&ca, 3, dir.path());
    std::fs::write(
        dir.path().join("tls.key"),
        KeyPair::generate().unwrap().serialize_pem(),
    )
    .unwrap();
    let err = CertStore::load_bundle(dir.path()).unwrap_err();
    assert!(err.to_string().contains("invalid TLS bundle"), "{err}");
}
