//! The console listener: TCP, optionally TLS, one task per connection driving the
//! [`Protocol`] state machine against a [`ConsoleBackend`].
//!
//! Bounds: at most [`ConsoleConfig::max_sessions`] connections are served at once (default
//! [`MAX_CONSOLE_SESSIONS`]); one more is answered with one refusal line and closed, and at
//! most [`MAX_REFUSALS_IN_FLIGHT`] such refusals are written at once (beyond that the socket is
//! simply closed). A TLS handshake gets [`TLS_HANDSHAKE_TIMEOUT`], an unauthenticated
//! connection [`AUTH_TIMEOUT`], so idle strangers cannot hold the session slots. Reads are
//! [`READ_CHUNK_BYTES`] at a time and only when the machine asks for input; output is flushed
//! whenever the machine waits (for input or for the backend), so each answer is written as it
//! is produced and a peer that stops reading stops its own session, not the server.
//!
//! Shutdown ([`ConsoleServer::shutdown`], or dropping the [`ConsoleServer`]) stops accepting
//! and closes every connection at its next wait for input; a statement already running
//! finishes and is answered first, and every backend session is closed exactly once.
//!
//! Nothing here logs input: statements may hold secrets and `\auth` lines always do.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{timeout, Instant};
use tokio_rustls::TlsAcceptor;

use super::backend::ConsoleBackend;
use super::error::ConsoleError;
use super::protocol::{Action, Protocol, Security};

/// Where `nervix serve` listens and `nervix console` connects by default (DESIGN §8).
pub const DEFAULT_CONSOLE_ADDR: &str = "127.0.0.1:47391";

/// Console connections served at once by default.
pub const MAX_CONSOLE_SESSIONS: usize = 64;

/// Refusals of connections beyond the session bound written at once.
pub const MAX_REFUSALS_IN_FLIGHT: usize = 8;

/// How long a refusal may take to write before the socket is dropped.
pub const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a TLS handshake may take.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may stay unauthenticated.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes read from a connection at a time.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Pause after a failed `accept` (such as running out of file descriptors) before the next.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// How the console listens.
#[derive(Clone)]
pub struct ConsoleConfig {
    pub addr: SocketAddr,
    /// TLS for every connection, from [`tls_config`]; `None` is plain TCP.
    pub tls: Option<Arc<ServerConfig>>,
    pub security: Security,
    pub max_sessions: usize,
}

impl ConsoleConfig {
    /// Plain TCP on `addr`, authentication required, the default session bound.
    pub fn new(addr: SocketAddr) -> ConsoleConfig {
        ConsoleConfig {
            addr,
            tls: None,
            security: Security::Required,
            max_sessions: MAX_CONSOLE_SESSIONS,
        }
    }
}

/// A TLS server configuration from a PEM certificate chain and a PEM private key, using the
/// aws-lc-rs provider and rustls' safe default protocol versions.
pub fn tls_config(cert_path: &Path, key_path: &Path) -> Result<Arc<ServerConfig>, ConsoleError> {
    let pem_error = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |error: rustls::pki_types::pem::Error| ConsoleError::Pem {
            what,
            path,
            message: error.to_string(),
        }
    };
    let certs = CertificateDer::pem_file_iter(cert_path)
        .map_err(pem_error("certificate", cert_path))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error("certificate", cert_path))?;
    if certs.is_empty() {
        return Err(ConsoleError::Pem {
            what: "certificate",
            path: cert_path.to_path_buf(),
            message: "the file holds no CERTIFICATE section".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(pem_error("private key", key_path))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    Ok(Arc::new(config))
}

/// A running console listener. Dropping it shuts the console down without waiting.
pub struct ConsoleServer {
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl ConsoleServer {
    /// Binds `config.addr` and starts accepting on the current tokio runtime.
    pub async fn start<B: ConsoleBackend>(
        config: ConsoleConfig,
        backend: Arc<B>,
    ) -> Result<ConsoleServer, ConsoleError> {
        let listener =
            TcpListener::bind(config.addr)
                .await
                .map_err(|source| ConsoleError::Bind {
                    addr: config.addr,
                    source,
                })?;
        let local_addr = listener.local_addr()?;
        let (shutdown, stop) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, config, backend, stop));
        Ok(ConsoleServer {
            local_addr,
            shutdown,
            task,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, closes every connection at its next wait for input, and waits until
    /// every connection has ended.
    pub async fn shutdown(self) {
        // Fails only when every receiver is gone, when there is nothing left to stop.
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Resolves once shutdown is asked for or the [`ConsoleServer`] is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

async fn accept_loop<B: ConsoleBackend>(
    listener: TcpListener,
    config: ConsoleConfig,
    backend: Arc<B>,
    mut stop: watch::Receiver<bool>,
) {
    let sessions = Arc::new(Semaphore::new(config.max_sessions));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    let acceptor = config.tls.clone().map(TlsAcceptor::from);
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => accepted,
        };
        while connections.try_join_next().is_some() {}
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(error) => {
                tracing::warn!("console: accepting a connection failed: {error}");
                tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        match sessions.clone().try_acquire_owned() {
            Ok(permit) => {
                let backend = backend.clone();
                let security = config.security;
                let stop = stop.clone();
                connections.spawn(async move {
                    serve_connection(stream, acceptor, backend.as_ref(), security, stop).await;
                    drop(permit);
                });
            }
            Err(_) => {
                let Ok(permit) = refusals.clone().try_acquire_owned() else {
                    continue;
                };
                let max_sessions = config.max_sessions;
                connections.spawn(async move {
                    let line = format!(
                        "ERROR too many console sessions ({max_sessions}): try again later\n"
                    );
                    let _ = timeout(REFUSAL_TIMEOUT, refuse(stream, acceptor, &line)).await;
                    drop(permit);
                });
            }
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Writes one line to a connection that will not be served, then closes it.
async fn refuse(stream: TcpStream, acceptor: Option<TlsAcceptor>, line: &str) {
    match acceptor {
        Some(acceptor) => {
            if let Ok(mut tls) = acceptor.accept(stream).await {
                let _ = tls.write_all(line.as_bytes()).await;
                let _ = tls.shutdown().await;
            }
        }
        None => {
            let mut stream = stream;
            let _ = stream.write_all(line.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
    }
}

async fn serve_connection<B: ConsoleBackend>(
    stream: TcpStream,
    acceptor: Option<TlsAcceptor>,
    backend: &B,
    security: Security,
    stop: watch::Receiver<bool>,
) {
    match acceptor {
        None => drive(stream, backend, security, stop).await,
        Some(acceptor) => match timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => drive(tls, backend, security, stop).await,
            Ok(Err(error)) => tracing::debug!("console: TLS handshake failed: {error}"),
            Err(_) => tracing::debug!("console: TLS handshake timed out"),
        },
    }
}

/// Runs one connection to its end; the backend session, if one was opened, is closed once.
async fn drive<S, B>(stream: S, backend: &B, security: Security, mut stop: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    B: ConsoleBackend,
{
    let (mut reader, writer) = tokio::io::split(stream);
    let mut writer = BufWriter::new(writer);
    let mut protocol = Protocol::new(security);
    let mut session = protocol
        .initial_login()
        .map(|login| backend.open_session(&login.user, login.role));
    let auth_deadline = Instant::now() + AUTH_TIMEOUT;
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut healthy = send(&mut writer, &protocol.greeting()).await;
    while healthy {
        match protocol.next_action() {
            Action::Send(line) => healthy = send(&mut writer, &line).await,
            Action::NeedInput => {
                if writer.flush().await.is_err() {
                    break;
                }
                let authenticated = protocol.is_authenticated();
                let streamed = async {
                    match session.as_mut().and_then(|s| backend.stream(s)) {
                        Some(lines) => lines.recv().await,
                        None => std::future::pending().await,
                    }
                };
                let read = tokio::select! {
                    _ = stopped(&mut stop) => break,
                    Some(line) = streamed => {
                        healthy = send(&mut writer, &line).await;
                        continue;
                    }
                    _ = tokio::time::sleep_until(auth_deadline), if !authenticated => {
                        let _ = send(&mut writer, "ERROR authentication timed out: closing").await;
                        break;
                    }
                    read = reader.read(&mut chunk) => read,
                };
                match read {
                    Ok(0) => protocol.end_of_input(),
                    Ok(n) => protocol.feed(&chunk[..n]),
                    Err(_) => break,
                }
            }
            Action::Authenticate { user, password } => {
                healthy = writer.flush().await.is_ok();
                let result = backend.authenticate(&user, &password).await;
                drop(password);
                if let Some(login) = protocol.auth_result(result) {
                    if let Some(old) = session.take() {
                        backend.close_session(old);
                    }
                    session = Some(backend.open_session(&login.user, login.role));
                }
            }
            Action::Execute { statement } => {
                healthy = writer.flush().await.is_ok();
                let reply = match session.as_mut() {
                    Some(session) => backend.execute(session, &statement).await,
                    None => super::backend::Reply::refused(
                        nervix_nspl::Span::new(0, 0),
                        super::protocol::NOT_AUTHENTICATED,
                    ),
                };
                protocol.executed(&statement, reply);
            }
            Action::Upload { resource, archive } => {
                healthy = writer.flush().await.is_ok();
                let reply = match session.as_mut() {
                    Some(session) => backend.upload(session, &resource, archive).await,
                    None => super::backend::Reply::refused(
                        nervix_nspl::Span::new(0, 0),
                        super::protocol::NOT_AUTHENTICATED,
                    ),
                };
                protocol.uploaded(reply);
            }
            Action::Complete { cursor, text } => {
                let candidates = session
                    .as_ref()
                    .map(|session| backend.complete(session, &text, cursor))
                    .unwrap_or_default();
                protocol.completed(candidates);
            }
            Action::Pending | Action::Close => break,
        }
    }
    let _ = writer.flush().await;
    let _ = writer.shutdown().await;
    if let Some(session) = session {
        backend.close_session(session);
    }
}

/// Writes one line into the connection's buffer; false once the connection is broken.
async fn send<W: AsyncWrite + Unpin>(writer: &mut W, line: &str) -> bool {
    writer.write_all(line.as_bytes()).await.is_ok() && writer.write_all(b"\n").await.is_ok()
}
