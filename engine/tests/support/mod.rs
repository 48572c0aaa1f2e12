//! A real `nervix serve` process for integration tests, and a console client that speaks the
//! text protocol over TCP the way `nc` would.

#![allow(dead_code)] // each test binary uses a different part

pub mod resources;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a node may take to open its console.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest one statement may take to answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

pub const ADMIN_PASSWORD: &str = "admin-secret";

/// Ports handed to nodes come from below the kernel's ephemeral range (32768 and up by
/// default): a port probed free there can still become the local end of some test's outbound
/// connection before the node binds it, which failed CI once with `Address already in use`.
const NODE_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A free loopback port for a node's listener, never one handed out before in this process:
/// tests start nodes in parallel, and one probe's port must not become two nodes' listeners.
/// The scan starts at an offset taken from the process id so that two test processes on one
/// machine seldom probe the same ports.
pub fn free_addr() -> SocketAddr {
    static NEXT: std::sync::Mutex<Option<u16>> = std::sync::Mutex::new(None);
    let span = NODE_PORTS.end - NODE_PORTS.start;
    let mut next = NEXT.lock().expect("port registry");
    let mut offset = next.unwrap_or((std::process::id() % u32::from(span)) as u16);
    for _ in 0..span {
        let port = NODE_PORTS.start + offset;
        offset = (offset + 1) % span;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            *next = Some(offset);
            return SocketAddr::from(([127, 0, 0, 1], port));
        }
    }
    panic!("no free loopback port in {NODE_PORTS:?}");
}

pub fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nervix-it-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

pub struct Node {
    pub child: Child,
    pub console: SocketAddr,
    pub raft: SocketAddr,
    /// The session protocol listener (client producers and consumers).
    pub session: SocketAddr,
    /// `/metrics`, `/livez`, `/readyz`.
    pub metrics: SocketAddr,
    /// The data listeners: HTTP / WS and HTTPS / WSS.
    pub http: SocketAddr,
    pub https: SocketAddr,
    pub data_dir: PathBuf,
    extra: Vec<String>,
}

impl Node {
    /// Starts a node on `data_dir` with fresh ports and NERVIX_ADMIN_PASSWORD set.
    pub fn start(data_dir: &Path) -> Node {
        Node::start_on(data_dir, free_addr(), free_addr(), &[])
    }

    pub fn start_on(
        data_dir: &Path,
        console: SocketAddr,
        raft: SocketAddr,
        extra: &[&str],
    ) -> Node {
        Node::start_full(data_dir, console, raft, free_addr(), free_addr(), extra)
    }

    /// Every listener chosen by the caller; one shard, unpinned (tests share the machine).
    pub fn start_full(
        data_dir: &Path,
        console: SocketAddr,
        raft: SocketAddr,
        session: SocketAddr,
        metrics: SocketAddr,
        extra: &[&str],
    ) -> Node {
        let data = (free_addr(), free_addr());
        Node::spawn(data_dir, console, raft, session, metrics, data, extra)
    }

    fn spawn(
        data_dir: &Path,
        console: SocketAddr,
        raft: SocketAddr,
        session: SocketAddr,
        metrics: SocketAddr,
        (http, https): (SocketAddr, SocketAddr),
        extra: &[&str],
    ) -> Node {
        let child = Command::new(env!("CARGO_BIN_EXE_nervix"))
            .args(["serve", "--data-dir"])
            .arg(data_dir)
            .args([
                "--console-addr",
                &console.to_string(),
                "--raft-addr",
                &raft.to_string(),
                "--session-addr",
                &session.to_string(),
                "--metrics-addr",
                &metrics.to_string(),
                "--http-addr",
                &http.to_string(),
                "--https-addr",
                &https.to_string(),
                "--no-pin",
            ])
            .args(if extra.contains(&"--shards") {
                &[][..]
            } else {
                &["--shards", "1"][..]
            })
            .args(extra)
            .env("NERVIX_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .stdout(Stdio::null())
            .stderr(log_file(data_dir))
            .spawn()
            .expect("nervix serve starts");
        let node = Node {
            child,
            console,
            raft,
            session,
            metrics,
            http,
            https,
            data_dir: data_dir.to_path_buf(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while TcpStream::connect(console).is_err() {
            assert!(
                Instant::now() < deadline,
                "node did not open its console in time"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        node
    }

    /// kill -9, then wait for the process to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (a graceful drain), then wait until the process exited; panics with the log
    /// when it does not stop within 30 s or exits with a failure.
    pub fn terminate(&mut self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        let exit = loop {
            if let Some(exit) = self.child.try_wait().expect("wait") {
                break exit;
            }
            assert!(
                Instant::now() < deadline,
                "the node did not stop after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(exit.success(), "exit status {exit:?}; log:\n{}", self.log());
    }

    /// The same data dir and ports, after a kill.
    pub fn restart(&mut self) {
        self.kill();
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let fresh = Node::spawn(
            &self.data_dir,
            self.console,
            self.raft,
            self.session,
            self.metrics,
            (self.http, self.https),
            &extra,
        );
        *self = fresh;
    }

    pub fn client(&self) -> Client {
        Client::connect(self.console)
    }

    pub fn admin(&self) -> Client {
        let mut client = self.client();
        client
            .auth("admin", ADMIN_PASSWORD)
            .expect("admin signs in");
        client
    }
}

fn greets(addr: SocketAddr) -> bool {
    let Ok(stream) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).is_ok() && line.starts_with("NERVIX ")
}

/// The node's stderr goes to `<data dir>.log` (never a pipe nobody reads, which would block
/// the node once full); tests print it when they fail.
fn log_file(data_dir: &Path) -> Stdio {
    let path = data_dir.with_extension("log");
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null())
}

impl Node {
    /// What the node wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.with_extension("log")).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- node log ---\n{}", self.log());
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
        let _ = std::fs::remove_file(self.data_dir.with_extension("log"));
    }
}

/// One statement's answer: output lines (without their two-space prefix) and the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub lines: Vec<String>,
    pub status: Result<(), String>,
}

impl Answer {
    /// The refusal message without its `line:col` position.
    pub fn message(&self) -> Option<&str> {
        let status = self.status.as_ref().err()?;
        Some(match status.split_once(' ') {
            Some((at, rest))
                if at.contains(':') && at.chars().all(|c| c.is_ascii_digit() || c == ':') =>
            {
                rest
            }
            _ => status,
        })
    }
}

pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    pub greeting: String,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("console accepts");
        stream.set_nodelay(true).expect("nodelay");
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .expect("timeout");
        let writer = stream.try_clone().expect("clone");
        let mut reader = BufReader::new(stream);
        let mut greeting = String::new();
        reader.read_line(&mut greeting).expect("greeting");
        Client {
            reader,
            writer,
            greeting: greeting.trim_end().to_string(),
        }
    }

    fn read_answer(&mut self) -> Answer {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).expect("reply line");
            assert!(n > 0, "console closed the connection");
            let line = line.trim_end_matches(['\n', '\r']);
            if let Some(output) = line.strip_prefix("  ") {
                lines.push(output.to_string());
            } else if line == "OK" {
                return Answer {
                    lines,
                    status: Ok(()),
                };
            } else if let Some(error) = line.strip_prefix("ERROR ") {
                return Answer {
                    lines,
                    status: Err(error.to_string()),
                };
            } else {
                panic!("unexpected console line: {line:?}");
            }
        }
    }

    /// Sends one complete statement (or meta-command line) and reads its answer.
    pub fn send(&mut self, text: &str) -> Answer {
        let mut line = text.to_string();
        if !line.ends_with('\n') {
            line.push('\n');
        }
        self.writer.write_all(line.as_bytes()).expect("send");
        self.read_answer()
    }

    pub fn auth(&mut self, user: &str, password: &str) -> Result<(), String> {
        self.send(&format!("\\auth {user} {password}")).status
    }

    /// Reads one raw line (a subscription row between statements), within `timeout`.
    pub fn read_raw_line(&mut self, timeout: Duration) -> Option<String> {
        self.reader.get_ref().set_read_timeout(Some(timeout)).ok()?;
        let mut line = String::new();
        let result = self.reader.read_line(&mut line);
        let _ = self.reader.get_ref().set_read_timeout(Some(REPLY_TIMEOUT));
        match result {
            Ok(n) if n > 0 => Some(line.trim_end_matches(['\n', '\r']).to_string()),
            _ => None,
        }
    }

    /// Sends a statement that must succeed; returns its output lines.
    pub fn ok(&mut self, statement: &str) -> Vec<String> {
        let answer = self.send(statement);
        assert_eq!(answer.status, Ok(()), "statement refused: {statement}");
        answer.lines
    }
}

pub mod dataplane;
