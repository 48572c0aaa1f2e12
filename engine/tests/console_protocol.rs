//! The console over real sockets: the protocol's cases as data (chunks in, lines out) against
//! the real server and a small in-memory backend, session bounds and shutdown, a TLS round trip
//! with a certificate made here, and the `nervix console` binary against the same server.
//!
//! The backend exercises the protocol only (domains in a set, users in a table, passwords
//! compared plainly); the node's own backend is tested end to end elsewhere. Every socket read
//! has a timeout and every child process a deadline, so no test can hang.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nervix::console::protocol::MAX_STATEMENT_BYTES;
use nervix::console::{
    tls_config, AuthError, ConsoleBackend, ConsoleConfig, ConsoleServer, Reply, Role, Security,
};
use nervix_nspl::ast::catalog::CatalogStmt;
use nervix_nspl::ast::session::SessionStmt;
use nervix_nspl::{Completion, NoCatalog, ObjectKind, Statement};

/// The longest any socket read in these tests waits.
const READ_TIMEOUT: Duration = Duration::from_secs(20);

/// The longest a `nervix console` run may take.
const CHILD_DEADLINE: Duration = Duration::from_secs(30);

/// Pause between chunks, so each tends to arrive in a read of its own.
const CHUNK_PAUSE: Duration = Duration::from_millis(20);

// ----- the in-memory backend -----

#[derive(Default)]
struct MapBackend {
    domains: Mutex<BTreeSet<String>>,
    opened: AtomicUsize,
    closed: AtomicUsize,
}

struct TestSession {
    domain: Option<String>,
}

impl ConsoleBackend for MapBackend {
    type Session = TestSession;

    async fn authenticate(&self, user: &str, password: &str) -> Result<Role, AuthError> {
        let role = match user {
            "admin" => Role::Admin,
            "ops" => Role::Operator,
            "reader" => Role::Reader,
            _ => return Err(AuthError::InvalidCredentials),
        };
        if password == "pw" {
            Ok(role)
        } else {
            Err(AuthError::InvalidCredentials)
        }
    }

    fn open_session(&self, _user: &str, _role: Role) -> TestSession {
        self.opened.fetch_add(1, Ordering::SeqCst);
        TestSession { domain: None }
    }

    async fn execute(&self, session: &mut TestSession, statement: &str) -> Reply {
        let Ok(parsed) = nervix_nspl::parse_statement(statement) else {
            return Reply::ok(vec!["unparsed".into()]);
        };
        let mut domains = self.domains.lock().expect("domains");
        match parsed {
            Statement::Catalog(CatalogStmt::CreateDomain(create)) => {
                if domains.insert(create.name.name.clone()) {
                    Reply::ok(Vec::new())
                } else {
                    Reply::refused(
                        create.name.span,
                        format!("domain {} already exists", create.name.name),
                    )
                }
            }
            Statement::Session(SessionStmt::ShowAll(ObjectKind::Domain)) => {
                Reply::ok(domains.iter().cloned().collect())
            }
            Statement::Session(SessionStmt::Use(name)) => {
                if domains.contains(&name.name) {
                    session.domain = Some(name.name);
                    Reply::ok(Vec::new())
                } else {
                    Reply::refused(name.span, format!("no domain {}", name.name))
                }
            }
            Statement::Session(SessionStmt::ShowRoles) => Reply::ok(vec![format!(
                "domain {}",
                session.domain.as_deref().unwrap_or("-")
            )]),
            _ => Reply::ok(Vec::new()),
        }
    }

    fn complete(&self, _: &TestSession, text: &str, cursor: usize) -> Vec<Completion> {
        nervix_nspl::complete(text, cursor, &NoCatalog)
    }

    fn close_session(&self, _: TestSession) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

// ----- a server on its own thread -----

struct TestServer {
    addr: SocketAddr,
    backend: Arc<MapBackend>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl TestServer {
    fn start(configure: impl FnOnce(&mut ConsoleConfig) + Send + 'static) -> TestServer {
        let backend = Arc::new(MapBackend::default());
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = backend.clone();
        let thread = thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let mut config = ConsoleConfig::new("127.0.0.1:0".parse().expect("addr"));
                configure(&mut config);
                let server = ConsoleServer::start(config, served)
                    .await
                    .expect("the console starts");
                addr_tx.send(server.local_addr()).expect("address");
                let _ = stop_rx.await;
                tokio::time::timeout(READ_TIMEOUT, server.shutdown())
                    .await
                    .expect("shutdown is bounded");
            });
        });
        let addr = addr_rx
            .recv_timeout(READ_TIMEOUT)
            .expect("the server starts");
        TestServer {
            addr,
            backend,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the server thread ends cleanly");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("timeout");
    stream
}

/// Sends `chunks` with pauses between them, closes the sending half, and returns every line
/// the server sent until it closed.
fn converse(addr: SocketAddr, chunks: &[&[u8]]) -> Vec<String> {
    let mut stream = connect(addr);
    for chunk in chunks {
        stream.write_all(chunk).expect("send");
        stream.flush().expect("flush");
        thread::sleep(CHUNK_PAUSE);
    }
    stream.shutdown(Shutdown::Write).expect("half-close");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("the server closes");
    text.lines().map(str::to_owned).collect()
}

const AUTH_OPS: &str = "\\auth ops pw\n";
const OPS_OK: [&str; 2] = ["  authenticated as ops with role OPERATOR", "OK"];
const NOT_AUTHENTICATED: &str = "ERROR 1:1 not authenticated: use \\auth <user> <password>";

/// One case: what the client sends, in chunks, and every line after the greeting it gets.
struct Case {
    name: &'static str,
    security: Security,
    chunks: &'static [&'static str],
    expected: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "statement split across chunks",
        security: Security::Required,
        chunks: &[
            AUTH_OPS,
            "CREATE DOM",
            "AIN sa",
            "les",
            ";\nSHOW DOMAINS",
            ";",
        ],
        expected: &[OPS_OK[0], OPS_OK[1], "OK", "  sales", "OK"],
    },
    Case {
        name: "two statements in one chunk",
        security: Security::Required,
        chunks: &[AUTH_OPS, "CREATE DOMAIN a; SHOW DOMAINS;\n"],
        expected: &[OPS_OK[0], OPS_OK[1], "OK", "  a", "OK"],
    },
    Case {
        name: "semicolons inside strings and comments",
        security: Security::Insecure,
        chunks: &[
            "CREATE /* ; */ DOMAIN -- ;\n a;",
            "CREATE USER x WITH PASSWORD 'a;''b\" ; ' ROLE READER; SHOW DOMAINS;",
        ],
        expected: &["OK", "OK", "  a", "OK"],
    },
    Case {
        name: "refusals are positioned within their statement",
        security: Security::Insecure,
        chunks: &["CREATE DOMAIN a;\n  CREATE DOMAIN\n a;"],
        expected: &["OK", "ERROR 2:2 domain a already exists"],
    },
    Case {
        name: "meta-commands",
        security: Security::Required,
        chunks: &[
            "\\frob\n\\auth ops pw\n\\complete 10 CREATE DOM\n\\complete x\n\\quit\nSHOW DOMAINS;",
        ],
        expected: &[
            "ERROR unknown meta-command \\frob: use \\auth, \\complete or \\quit",
            OPS_OK[0],
            OPS_OK[1],
            "  7 DOMAIN",
            "OK",
            "ERROR usage: \\complete <byte offset> <text>",
            "OK",
        ],
    },
    Case {
        name: "unauthenticated refusal",
        security: Security::Required,
        chunks: &["SHOW DOMAINS;\n\\complete 0 S\n"],
        expected: &[NOT_AUTHENTICATED, NOT_AUTHENTICATED],
    },
    Case {
        name: "wrong password",
        security: Security::Required,
        chunks: &["\\auth ops wrong\n\\auth nobody pw\nSHOW DOMAINS;\n"],
        expected: &[
            "ERROR authentication failed",
            "ERROR authentication failed",
            NOT_AUTHENTICATED,
        ],
    },
    Case {
        name: "reader refused a CREATE",
        security: Security::Required,
        chunks: &["\\auth reader pw\nCREATE DOMAIN a;\nSHOW DOMAINS;\n"],
        expected: &[
            "  authenticated as reader with role READER",
            "OK",
            "ERROR 1:1 role READER may only run SHOW, DESCRIBE and USE",
            "OK",
        ],
    },
    Case {
        name: "operator refused user management",
        security: Security::Required,
        chunks: &[AUTH_OPS, "DROP USER admin;"],
        expected: &[
            OPS_OK[0],
            OPS_OK[1],
            "ERROR 1:1 role OPERATOR may run everything except user management: CREATE USER, \
             ALTER USER and DROP USER need role ADMIN",
        ],
    },
    Case {
        name: "parse errors",
        security: Security::Insecure,
        chunks: &["SHOW\n  DOMANS;"],
        expected: &["ERROR 2:3 expected `DOMAINS`, found `DOMANS`"],
    },
];

#[test]
fn protocol_cases_over_tcp() {
    for case in CASES {
        let security = case.security;
        let mut server = TestServer::start(move |config| config.security = security);
        let chunks: Vec<&[u8]> = case.chunks.iter().map(|c| c.as_bytes()).collect();
        let lines = converse(server.addr, &chunks);
        let greeting = match security {
            Security::Required => "AUTH REQUIRED",
            Security::Insecure => "READY",
        };
        assert!(
            lines[0].starts_with("NERVIX ") && lines[0].contains(greeting),
            "{}: {lines:?}",
            case.name
        );
        if case.name == "parse errors" {
            // The parser's wording is its own; the position is the console's.
            assert_eq!(lines.len(), 2, "{}: {lines:?}", case.name);
            assert!(
                lines[1].starts_with("ERROR 2:3 "),
                "{}: {lines:?}",
                case.name
            );
        } else {
            assert_eq!(lines[1..], case.expected[..], "{}", case.name);
        }
        server.stop();
        let opened = server.backend.opened.load(Ordering::SeqCst);
        let closed = server.backend.closed.load(Ordering::SeqCst);
        assert_eq!(
            opened, closed,
            "{}: every session is closed once",
            case.name
        );
    }
}

#[test]
fn oversize_statements_are_refused_and_skipped() {
    let server = TestServer::start(|config| config.security = Security::Insecure);
    let mut big = b"CREATE DOMAIN '".to_vec();
    big.resize(MAX_STATEMENT_BYTES + 1024, b'x');
    big.extend_from_slice(b"; ';\nSHOW DOMAINS;\n");
    let lines = converse(server.addr, &[&big]);
    assert_eq!(
        lines[1..],
        [
            format!(
                "ERROR 1:1 statement longer than {MAX_STATEMENT_BYTES} bytes without its `;`: \
                 discarded up to its `;`"
            ),
            "OK".to_string(),
        ]
    );
}

#[test]
fn sessions_beyond_the_bound_are_refused() {
    let server = TestServer::start(|config| config.max_sessions = 1);
    let first = connect(server.addr);
    let mut first_reader = BufReader::new(first.try_clone().expect("clone"));
    let mut greeting = String::new();
    first_reader.read_line(&mut greeting).expect("greeting");
    assert!(greeting.starts_with("NERVIX "), "{greeting}");
    let mut second = connect(server.addr);
    let mut refusal = String::new();
    second
        .read_to_string(&mut refusal)
        .expect("refused and closed");
    assert_eq!(
        refusal,
        "ERROR too many console sessions (1): try again later\n"
    );
    drop(first);
}

#[test]
fn shutdown_closes_idle_connections() {
    let mut server = TestServer::start(|config| config.security = Security::Insecure);
    let mut client = connect(server.addr);
    let mut reader = BufReader::new(client.try_clone().expect("clone"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("greeting");
    client.write_all(b"CREATE DOMAIN a;\n").expect("send");
    line.clear();
    reader.read_line(&mut line).expect("answer");
    assert_eq!(line, "OK\n");
    let started = Instant::now();
    server.stop();
    assert!(started.elapsed() < READ_TIMEOUT);
    let mut rest = String::new();
    reader.read_to_string(&mut rest).expect("closed");
    assert_eq!(rest, "");
    assert_eq!(server.backend.closed.load(Ordering::SeqCst), 1);
}

// ----- TLS -----

/// A self-signed certificate for `localhost` and its key, as PEM files in a fresh directory.
struct Certificate {
    dir: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Certificate {
    fn new(tag: &str) -> Certificate {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nervix-console-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let generated =
            rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        std::fs::write(&cert, generated.cert.pem()).expect("write cert");
        std::fs::write(&key, generated.signing_key.serialize_pem()).expect("write key");
        Certificate { dir, cert, key }
    }
}

impl Drop for Certificate {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tls_server(certificate: &Certificate) -> TestServer {
    let tls = tls_config(&certificate.cert, &certificate.key).expect("TLS configuration");
    TestServer::start(move |config| config.tls = Some(tls))
}

#[test]
fn tls_round_trip() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};

    let certificate = Certificate::new("tls");
    let server = tls_server(&certificate);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&certificate.cert).expect("cert"))
        .expect("root");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("localhost").expect("name");
    let connection = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
    let mut tls = rustls::StreamOwned::new(connection, connect(server.addr));
    tls.write_all(b"\\auth ops pw\nCREATE DOMAIN secure;\nSHOW DOMAINS;\n\\quit\n")
        .expect("send");
    let mut text = String::new();
    let mut reader = BufReader::new(tls);
    while !text.ends_with("OK\nOK\n  secure\nOK\nOK\n") {
        let before = text.len();
        reader.read_line(&mut text).expect("read");
        assert_ne!(before, text.len(), "the server closed early: {text:?}");
    }
    assert!(text.starts_with("NERVIX "), "{text}");

    // A plain-text client gets no greeting from a TLS listener.
    let mut plain = connect(server.addr);
    plain.write_all(b"\\quit\n").expect("send");
    let mut bytes = Vec::new();
    let _ = plain.read_to_end(&mut bytes);
    assert!(!String::from_utf8_lossy(&bytes).contains("NERVIX"));
}

#[test]
fn tls_configuration_errors_name_the_file() {
    let certificate = Certificate::new("bad");
    let missing = certificate.dir.join("missing.pem");
    let error = tls_config(&missing, &certificate.key).expect_err("no such file");
    assert!(error.to_string().contains("missing.pem"), "{error}");
    let error = tls_config(&certificate.key, &certificate.key).expect_err("a key is no cert");
    assert!(error.to_string().contains("certificate"), "{error}");
}

// ----- the `nervix console` binary -----

/// Runs `nervix console` with `args` (and `NERVIX_PASSWORD` when given) under a deadline.
fn nervix_console(args: &[&str], password: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nervix"));
    command
        .arg("console")
        .args(args)
        .env_remove("NERVIX_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(password) = password {
        command.env("NERVIX_PASSWORD", password);
    }
    let mut child = command.spawn().expect("nervix runs");
    let deadline = Instant::now() + CHILD_DEADLINE;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("nervix console {args:?} did not finish in {CHILD_DEADLINE:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn client_runs_commands_and_exits_zero() {
    let server = TestServer::start(|_| {});
    let addr = server.addr.to_string();
    let output = nervix_console(
        &[
            "--addr",
            &addr,
            "--user",
            "ops",
            "-c",
            "CREATE DOMAIN b; CREATE DOMAIN a;\nSHOW DOMAINS",
        ],
        Some("pw"),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "a\nb\n");

    let output = nervix_console(
        &[
            "--addr",
            &addr,
            "--user",
            "ops",
            "--domain",
            "a",
            "-c",
            "SHOW ROLES;",
        ],
        Some("pw"),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "domain a\n");
}

#[test]
fn client_stops_at_the_first_refusal_with_the_scripts_position() {
    let server = TestServer::start(|_| {});
    let addr = server.addr.to_string();
    let dir = Certificate::new("script");
    let script = dir.dir.join("setup.nspl");
    std::fs::write(
        &script,
        "-- setup\nCREATE DOMAIN a;\nSHOW DOMAINS; CREATE DOMAIN\n    a;\nCREATE DOMAIN never;\n",
    )
    .expect("script");
    let script = script.to_string_lossy().into_owned();
    let output = nervix_console(
        &["--addr", &addr, "--user", "ops", "-f", &script],
        Some("pw"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(text(&output.stdout), "a\n");
    assert_eq!(text(&output.stderr), "ERROR 4:5 domain a already exists\n");

    // A statement-relative position on the statement's first line keeps the script's column.
    let output = nervix_console(
        &[
            "--addr",
            &addr,
            "--user",
            "ops",
            "-c",
            "SHOW DOMAINS;  CREATE DOMAIN a;",
        ],
        Some("pw"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(text(&output.stderr), "ERROR 1:30 domain a already exists\n");

    // A parse error comes back positioned in the script too.
    let output = nervix_console(
        &[
            "--addr",
            &addr,
            "--user",
            "ops",
            "-c",
            "SHOW DOMAINS;\n  SHOW DOMANS;",
        ],
        Some("pw"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).starts_with("ERROR 2:8 "),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn client_refusals_exit_two() {
    let server = TestServer::start(|_| {});
    let addr = server.addr.to_string();

    let output = nervix_console(&["--addr", &addr, "-c", "SHOW DOMAINS;"], Some("nope"));
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(text(&output.stderr), "error: authentication failed\n");

    let output = nervix_console(
        &[
            "--addr",
            &addr,
            "--user",
            "reader",
            "-c",
            "CREATE DOMAIN x;",
        ],
        Some("pw"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        text(&output.stderr),
        "ERROR 1:1 role READER may only run SHOW, DESCRIBE and USE\n"
    );

    let output = nervix_console(
        &[
            "--addr",
            &addr,
            "--user",
            "ops",
            "--domain",
            "nowhere",
            "-c",
            "SHOW DOMAINS;",
        ],
        Some("pw"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        text(&output.stderr),
        "error: cannot use domain nowhere: no domain nowhere\n"
    );

    // Nothing listens on a port just released.
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_addr = closed.local_addr().expect("addr").to_string();
    drop(closed);
    let output = nervix_console(&["--addr", &closed_addr, "-c", "SHOW DOMAINS;"], Some("pw"));
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with(&format!("error: cannot connect to {closed_addr}: ")),
        "{stderr}"
    );
}

#[test]
fn client_needs_no_password_on_an_insecure_console() {
    let server = TestServer::start(|config| config.security = Security::Insecure);
    let addr = server.addr.to_string();
    let output = nervix_console(
        &["--addr", &addr, "-c", "CREATE DOMAIN z; SHOW DOMAINS;"],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "z\n");
}

#[test]
fn client_speaks_tls() {
    let certificate = Certificate::new("client-tls");
    let server = tls_server(&certificate);
    let addr = format!("localhost:{}", server.addr.port());
    let ca = certificate.cert.to_string_lossy().into_owned();
    let output = nervix_console(
        &[
            "--addr",
            &addr,
            "--tls-ca",
            &ca,
            "--user",
            "ops",
            "-c",
            "CREATE DOMAIN t; SHOW DOMAINS;",
        ],
        Some("pw"),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "t\n");

    // Without the CA the client refuses the connection.
    let other = Certificate::new("other-ca");
    let other_ca = other.cert.to_string_lossy().into_owned();
    let output = nervix_console(
        &[
            "--addr",
            &addr,
            "--tls-ca",
            &other_ca,
            "-c",
            "SHOW DOMAINS;",
        ],
        Some("pw"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).starts_with(&format!("error: cannot connect to {addr}: ")),
        "{}",
        text(&output.stderr)
    );
}
