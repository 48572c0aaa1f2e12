//! The WebSocket client half: the outbound session of a WEBSOCKETS CONNECTION ingestor, on
//! the connector runtime (DESIGN §3), exchanging frames with its shard through bounded
//! channels. It knows frames and connections, never signaling programs: the engine drives the
//! handshake over the frames this session carries (spec: "WEBSOCKETS CONNECTION").
//!
//! A `TYPE WEBSOCKETS` client's CONFIG is read by [`WsClientConfig::from_entries`]: `endpoint`
//! (required, `ws://` or `wss://`), `tls_ca_file` (trust that CA alone; without it the
//! platform's roots), `tls_cert_file` + `tls_key_file` (client identity). Unknown keys are
//! refused, so a typo is never silently ignored.
//!
//! Connecting ([`connect`]): the URL's host is resolved through the node's hickory resolver
//! ([`crate::resolve::node_resolver`], itself bounded by [`crate::resolve::RESOLVE_BUDGET_MS`])
//! on every attempt, the returned addresses are tried in order, and DNS, TCP, TLS and the
//! upgrade share one [`CONNECT_BUDGET_MS`] budget. The upgrade uses the configured URL (Host
//! header, path, query) and the TLS server name is the URL's host. Every connection failure is
//! transient: [`session_loop`] reports it and tries again after a backoff doubling from
//! [`RECONNECT_BACKOFF_MIN_MS`] to [`RECONNECT_BACKOFF_MAX_MS`], reset by
//! [`Command::Established`] (the engine's word that the handshake completed). Pings are
//! answered by tungstenite while the socket is read; the session reads continuously, so
//! keepalives stay live whatever the shard does with the frames.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::Message;

use crate::ConnectorError;

/// One budget for DNS, TCP, TLS and the opening upgrade (spec: "one 30-second budget").
pub const CONNECT_BUDGET_MS: u64 = 30_000;
/// The first reconnect delay; each failure without an established handshake doubles it.
pub const RECONNECT_BACKOFF_MIN_MS: u64 = 100;
/// The longest reconnect delay.
pub const RECONNECT_BACKOFF_MAX_MS: u64 = 30_000;
/// How often the session checks its `stopped` flag while idle.
const STOP_CHECK_MS: u64 = 100;

/// A data frame (control frames are the session's business).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Text(String),
    Binary(Vec<u8>),
}

impl Frame {
    /// The frame's payload bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Frame::Text(text) => text.as_bytes(),
            Frame::Binary(bytes) => bytes,
        }
    }
}

/// What the session tells its shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// Connection number `n` (counting from 1) completed its upgrade: a handshake starts.
    /// Commands name the connection they are for, so none reaches a later one.
    Connected(u64),
    Frame(Frame),
    /// The connection ended or could not be made; the session will try again.
    Disconnected(ConnectorError),
}

/// What the shard asks of the session, for one connection (by its number); a command for a
/// connection that already ended is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Send(u64, Frame),
    /// The handshake completed: the reconnect backoff starts over.
    Established(u64),
    /// Close this connection (a failed handshake) and connect again after the backoff.
    Reconnect(u64),
}

/// A `TYPE WEBSOCKETS` client's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsClientConfig {
    pub endpoint: String,
    pub tls_ca_file: Option<String>,
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
}

impl WsClientConfig {
    /// Reads CONFIG entries (values already rendered as text, mounts resolved).
    pub fn from_entries(entries: &[(String, String)]) -> Result<WsClientConfig, ConnectorError> {
        let mut config = WsClientConfig {
            endpoint: String::new(),
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
        };
        for (key, value) in entries {
            match key.as_str() {
                "endpoint" => config.endpoint = value.clone(),
                "tls_ca_file" => config.tls_ca_file = Some(value.clone()),
                "tls_cert_file" => config.tls_cert_file = Some(value.clone()),
                "tls_key_file" => config.tls_key_file = Some(value.clone()),
                other => {
                    return Err(ConnectorError::config(
                        other,
                        "is not a WEBSOCKETS client setting (endpoint, tls_ca_file, \
                         tls_cert_file, tls_key_file)",
                    ))
                }
            }
        }
        if !(config.endpoint.starts_with("ws://") || config.endpoint.starts_with("wss://")) {
            return Err(ConnectorError::config(
                "endpoint",
                format!("'{}' must be a ws:// or wss:// URL", config.endpoint),
            ));
        }
        if config.tls_cert_file.is_some() != config.tls_key_file.is_some() {
            return Err(ConnectorError::config(
                "tls_cert_file",
                "tls_cert_file and tls_key_file go together",
            ));
        }
        Ok(config)
    }

    /// `(tls, host, port)` of the endpoint.
    fn target(&self) -> Result<(bool, String, u16), ConnectorError> {
        let (tls, rest) = match self.endpoint.split_once("://") {
            Some(("wss", rest)) => (true, rest),
            Some(("ws", rest)) => (false, rest),
            _ => {
                return Err(ConnectorError::config(
                    "endpoint",
                    "must be ws:// or wss://",
                ))
            }
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((host, rest)) => (host, rest.strip_prefix(':')),
                None => return Err(ConnectorError::config("endpoint", "has an unclosed '['")),
            },
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        let port = match port {
            Some(port) => port.parse().map_err(|_| {
                ConnectorError::config("endpoint", format!("'{port}' is not a port"))
            })?,
            None if tls => 443,
            None => 80,
        };
        if host.is_empty() {
            return Err(ConnectorError::config("endpoint", "has no host"));
        }
        Ok((tls, host.to_string(), port))
    }
}

/// The TLS client configuration of `config`: its CA alone when `tls_ca_file` is set, else
/// the platform's roots; its identity when `tls_cert_file` + `tls_key_file` are set.
pub fn tls_config(config: &WsClientConfig) -> Result<rustls::ClientConfig, ConnectorError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    match &config.tls_ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    ConnectorError::config("tls_ca_file", format!("cannot read '{path}': {e}"))
                })?;
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| ConnectorError::config("tls_ca_file", format!("'{path}': {e}")))?;
            }
            if roots.is_empty() {
                return Err(ConnectorError::config(
                    "tls_ca_file",
                    format!("'{path}' holds no certificate"),
                ));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConnectorError::config("endpoint", e.to_string()))?
        .with_root_certificates(roots);
    match (&config.tls_cert_file, &config.tls_key_file) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    ConnectorError::config("tls_cert_file", format!("cannot read '{cert}': {e}"))
                })?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                ConnectorError::config("tls_key_file", format!("cannot read '{key}': {e}"))
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| ConnectorError::config("tls_cert_file", e.to_string()))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// A stream the upgrade runs over: plain TCP or TLS over TCP.
trait Transport: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Transport for T {}

/// An open, upgraded connection.
pub struct Connection {
    socket: tokio_tungstenite::WebSocketStream<Box<dyn Transport>>,
}

/// Connects within [`CONNECT_BUDGET_MS`]: resolve, try each address in order, TLS for
/// `wss://`, then the upgrade. Every failure is transient.
pub async fn connect(
    config: &WsClientConfig,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Connection, ConnectorError> {
    let budget = Duration::from_millis(CONNECT_BUDGET_MS);
    match tokio::time::timeout(budget, connect_within(config, tls)).await {
        Ok(result) => result,
        Err(_) => Err(ConnectorError::transient(format!(
            "{}: no connection within {CONNECT_BUDGET_MS} ms",
            config.endpoint
        ))),
    }
}

async fn connect_within(
    config: &WsClientConfig,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Connection, ConnectorError> {
    let (secure, host, port) = config.target()?;
    let url = &config.endpoint;
    let ips = crate::resolve::node_resolver()
        .lookup(&host)
        .await
        .map_err(|e| ConnectorError::transient(format!("{url}: {e}")))?;
    let mut last = format!("'{host}' resolved to no address");
    let mut tcp = None;
    for ip in ips {
        let addr = std::net::SocketAddr::new(ip, port);
        match tokio::net::TcpStream::connect(addr).await {
            Ok(stream) => {
                tcp = Some(stream);
                break;
            }
            Err(e) => last = format!("{addr}: {e}"),
        }
    }
    let tcp = tcp.ok_or_else(|| ConnectorError::transient(format!("{url}: {last}")))?;
    // Frames are small and latency matters more than packet count.
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Transport> = if secure {
        let tls = tls.ok_or_else(|| {
            ConnectorError::config("endpoint", "a wss:// endpoint needs a TLS configuration")
        })?;
        let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|_| {
            ConnectorError::config("endpoint", format!("'{host}' is not a TLS server name"))
        })?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| ConnectorError::transient(format!("{url}: TLS: {e}")))?;
        Box::new(stream)
    } else {
        Box::new(tcp)
    };
    let (socket, _response) = tokio_tungstenite::client_async(url.as_str(), stream)
        .await
        .map_err(|e| ConnectorError::transient(format!("{url}: upgrade: {e}")))?;
    Ok(Connection { socket })
}

/// The reconnect delay after `failures` consecutive failures.
pub fn backoff(failures: u32) -> Duration {
    let ms = RECONNECT_BACKOFF_MIN_MS
        .saturating_mul(1u64 << failures.min(20))
        .min(RECONNECT_BACKOFF_MAX_MS);
    Duration::from_millis(ms)
}

/// How one connection ended.
enum Ended {
    /// The shard is gone or the source stopped: the session ends.
    Stop,
    /// Connect again after the backoff, reporting this cause.
    Lost(ConnectorError),
    /// The shard asked to reconnect (a failed handshake).
    Reconnect,
}

/// Runs the session until `stopped` or the shard's channels close: connect, report
/// [`SessionEvent::Connected`], carry frames both ways, and on any loss reconnect after
/// [`backoff`]. Incoming frames wait for room in `events` (bounded), which pauses reading.
pub async fn session_loop(
    config: WsClientConfig,
    stopped: Arc<AtomicBool>,
    commands: async_channel::Receiver<Command>,
    events: async_channel::Sender<SessionEvent>,
) {
    let tls = match config.endpoint.starts_with("wss://") {
        true => match tls_config(&config) {
            Ok(tls) => Some(Arc::new(tls)),
            Err(error) => {
                let _ = events.send(SessionEvent::Disconnected(error)).await;
                return;
            }
        },
        false => None,
    };
    let mut failures = 0u32;
    let mut number = 0u64;
    loop {
        if stopped.load(Ordering::Acquire) || events.is_closed() {
            return;
        }
        // Stopping the source drops a pending connection attempt.
        let Some(attempt) = until_stopped(&stopped, connect(&config, tls.as_ref())).await else {
            return;
        };
        let ended = match attempt {
            Ok(connection) => {
                number += 1;
                if events.send(SessionEvent::Connected(number)).await.is_err() {
                    return;
                }
                let current = Current {
                    number,
                    stopped: &stopped,
                    commands: &commands,
                    events: &events,
                };
                carry(connection, current, &mut failures).await
            }
            Err(error) => Ended::Lost(error),
        };
        match ended {
            Ended::Stop => return,
            Ended::Lost(error) => {
                if events
                    .send(SessionEvent::Disconnected(error))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Ended::Reconnect => {}
        }
        if until_stopped(&stopped, tokio::time::sleep(backoff(failures)))
            .await
            .is_none()
        {
            return;
        }
        failures = failures.saturating_add(1);
    }
}

/// `work`'s output, or `None` once `stopped` is set (checked every [`STOP_CHECK_MS`]).
async fn until_stopped<T>(
    stopped: &AtomicBool,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    let watch = async {
        while !stopped.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(STOP_CHECK_MS)).await;
        }
    };
    tokio::select! {
        output = work => Some(output),
        () = watch => None,
    }
}

/// The connection [`carry`] serves and the session's shared parts.
struct Current<'a> {
    number: u64,
    stopped: &'a AtomicBool,
    commands: &'a async_channel::Receiver<Command>,
    events: &'a async_channel::Sender<SessionEvent>,
}

/// Carries frames over one connection until it ends.
async fn carry(mut connection: Connection, current: Current<'_>, failures: &mut u32) -> Ended {
    let Current {
        number,
        stopped,
        commands,
        events,
    } = current;
    let mut check = tokio::time::interval(Duration::from_millis(STOP_CHECK_MS));
    loop {
        tokio::select! {
            incoming = connection.socket.next() => {
                let frame = match incoming {
                    Some(Ok(Message::Text(text))) => Frame::Text(text.as_str().to_string()),
                    Some(Ok(Message::Binary(bytes))) => Frame::Binary(bytes.to_vec()),
                    Some(Ok(Message::Close(close))) => {
                        let reason = close.map_or_else(
                            || "the peer closed the connection".to_string(),
                            |c| format!("the peer closed the connection ({} {})", c.code, c.reason),
                        );
                        return Ended::Lost(ConnectorError::transient(reason));
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Ended::Lost(ConnectorError::transient(e.to_string())),
                    None => {
                        return Ended::Lost(ConnectorError::transient(
                            "the connection ended".to_string(),
                        ))
                    }
                };
                if events.send(SessionEvent::Frame(frame)).await.is_err() {
                    return Ended::Stop;
                }
            }
            command = commands.recv() => {
                let message = match command {
                    Ok(Command::Send(n, _) | Command::Established(n) | Command::Reconnect(n))
                        if n != number => continue,
                    Ok(Command::Send(_, Frame::Text(text))) => Message::text(text),
                    Ok(Command::Send(_, Frame::Binary(bytes))) => Message::binary(bytes),
                    Ok(Command::Established(_)) => {
                        *failures = 0;
                        continue;
                    }
                    Ok(Command::Reconnect(_)) => {
                        let _ = connection.socket.close(None).await;
                        return Ended::Reconnect;
                    }
                    Err(_) => return Ended::Stop,
                };
                if let Err(e) = connection.socket.send(message).await {
                    return Ended::Lost(ConnectorError::transient(format!("send: {e}")));
                }
            }
            _ = check.tick() => {
                if stopped.load(Ordering::Acquire) {
                    let _ = connection.socket.close(None).await;
                    return Ended::Stop;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn config_is_checked_key_by_key_and_the_target_is_parsed() {
        let config =
            WsClientConfig::from_entries(&entries(&[("endpoint", "wss://ex.com/v5?a=1")])).unwrap();
        assert_eq!(config.target().unwrap(), (true, "ex.com".to_string(), 443));
        let config =
            WsClientConfig::from_entries(&entries(&[("endpoint", "ws://[::1]:9000/x")])).unwrap();
        assert_eq!(config.target().unwrap(), (false, "::1".to_string(), 9000));
        let error =
            WsClientConfig::from_entries(&entries(&[("endpoint", "http://x")])).unwrap_err();
        assert!(error.to_string().contains("ws://"), "{error}");
        let error =
            WsClientConfig::from_entries(&entries(&[("endpoint", "ws://x"), ("tls_ca", "x")]))
                .unwrap_err();
        assert!(error.to_string().contains("tls_ca"), "{error}");
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(0), Duration::from_millis(RECONNECT_BACKOFF_MIN_MS));
        assert_eq!(
            backoff(1),
            Duration::from_millis(2 * RECONNECT_BACKOFF_MIN_MS)
        );
        assert_eq!(backoff(40), Duration::from_millis(RECONNECT_BACKOFF_MAX_MS));
    }

    #[tokio::test]
    async fn a_host_name_resolves_through_the_node_resolver() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let _ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        });
        let endpoint = format!("ws://localhost:{port}/s");
        let config = WsClientConfig::from_entries(&entries(&[("endpoint", &endpoint)])).unwrap();
        connect(&config, None).await.unwrap();
        let endpoint = "ws://nervix-test.invalid/s";
        let config = WsClientConfig::from_entries(&entries(&[("endpoint", endpoint)])).unwrap();
        let error = connect(&config, None).await.err().unwrap();
        assert!(error.retryable(), "{error}");
        assert!(
            error
                .to_string()
                .contains("could not resolve host 'nervix-test.invalid'"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_session_carries_frames_both_ways_and_reconnects() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            for round in 0..2u8 {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                let hello = ws.next().await.unwrap().unwrap();
                ws.send(Message::text(format!(
                    "{}:{round}",
                    hello.to_text().unwrap()
                )))
                .await
                .unwrap();
                ws.close(None).await.unwrap();
            }
        });
        let config =
            WsClientConfig::from_entries(&entries(&[("endpoint", &format!("ws://{addr}/s"))]))
                .unwrap();
        let stopped = Arc::new(AtomicBool::new(false));
        let (command_tx, command_rx) = async_channel::bounded(4);
        let (event_tx, event_rx) = async_channel::bounded(4);
        tokio::spawn(session_loop(config, stopped.clone(), command_rx, event_tx));
        for round in 0..2 {
            let number = round + 1;
            assert_eq!(
                event_rx.recv().await.unwrap(),
                SessionEvent::Connected(number)
            );
            // A command for another connection is ignored.
            command_tx
                .send(Command::Send(number + 7, Frame::Text("stale".into())))
                .await
                .unwrap();
            command_tx
                .send(Command::Send(number, Frame::Text("hi".into())))
                .await
                .unwrap();
            assert_eq!(
                event_rx.recv().await.unwrap(),
                SessionEvent::Frame(Frame::Text(format!("hi:{round}")))
            );
            assert!(matches!(
                event_rx.recv().await.unwrap(),
                SessionEvent::Disconnected(_)
            ));
        }
        stopped.store(true, Ordering::Release);
    }
}
