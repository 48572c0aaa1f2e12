//! The broker of `kafka-filter-map`, in a process of its own so its CPU can be measured apart
//! from the node's: `nervix dev kafka` (librdkafka's mock cluster) from the `nervix` binary
//! next to the running `nervix-bench`, or — with `--broker self` — the same mock cluster
//! hosted by a `nervix-bench kafka-broker` child ([`serve`]).
//!
//! Why it is correct: the child's stdout is read line by line on a thread of its own until the
//! `bootstrap.servers=HOST:PORT` line (the reader keeps draining afterwards so the child never
//! blocks on a full pipe); [`Broker`]'s `Drop` kills and reaps the child, so every exit path —
//! errors included — leaves no broker behind. A `kafka-broker` child also exits when its stdin
//! closes, which covers the bench process dying without running `Drop`.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context};

/// How long the broker may take to print its bootstrap line.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// What precedes the bootstrap list on the broker's stdout.
const BOOTSTRAP_PREFIX: &str = "bootstrap.servers=";

/// Which program hosts the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerHost {
    /// `nervix dev kafka`, the `nervix` binary next to `nervix-bench`.
    Nervix,
    /// `nervix-bench kafka-broker` (the same mock cluster, for trees without `dev kafka`).
    SelfHosted,
}

/// A running broker child; dropping it kills it.
pub struct Broker {
    child: Child,
    pub bootstrap: String,
    /// The command line, for the report.
    pub command: String,
}

impl Broker {
    /// Starts the broker with `partitions` partitions per topic and the given topics created
    /// up front (when the host can create them).
    pub fn start(host: BrokerHost, partitions: i32, topics: &[&str]) -> anyhow::Result<Broker> {
        let exe = std::env::current_exe().context("cannot locate the running nervix-bench")?;
        let (program, mut arguments): (PathBuf, Vec<String>) = match host {
            BrokerHost::Nervix => {
                let nervix = exe.with_file_name(format!("nervix{}", std::env::consts::EXE_SUFFIX));
                if !nervix.is_file() {
                    bail!(
                        "{} not found; kafka-filter-map runs the broker with `nervix dev kafka` \
                         from the nervix binary next to nervix-bench.\n\
                         Build it with: cargo build --release -p nervix\n\
                         (or `cargo build -p nervix` next to a debug nervix-bench; or pass \
                         `--broker self` to host the same mock cluster in a nervix-bench child)",
                        nervix.display()
                    );
                }
                let mut arguments = vec![
                    "dev".to_string(),
                    "kafka".to_string(),
                    "--partitions".to_string(),
                    partitions.to_string(),
                ];
                if dev_kafka_creates_topics(&nervix)? {
                    for topic in topics {
                        arguments.extend(["--topic".to_string(), (*topic).to_string()]);
                    }
                }
                (nervix, arguments)
            }
            BrokerHost::SelfHosted => {
                let mut arguments = vec![
                    "kafka-broker".to_string(),
                    "--partitions".to_string(),
                    partitions.to_string(),
                ];
                for topic in topics {
                    arguments.extend(["--topic".to_string(), (*topic).to_string()]);
                }
                (exe, arguments)
            }
        };
        let command = format!("{} {}", program.display(), arguments.join(" "));
        let mut child = Command::new(&program)
            .args(arguments.drain(..))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start the broker: {command}"))?;
        let stdout = child.stdout.take().context("the broker's stdout")?;
        // From here on `Drop` kills the child whatever happens.
        let mut broker = Broker {
            child,
            bootstrap: String::new(),
            command,
        };
        let (lines, received) = mpsc::channel();
        std::thread::Builder::new()
            .name("bench-broker-out".to_string())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    // After the bootstrap line nobody listens: keep draining regardless.
                    let _ = lines.send(line);
                }
            })
            .context("cannot start the broker's stdout reader")?;
        let deadline = std::time::Instant::now() + STARTUP_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match received.recv_timeout(left) {
                Ok(line) => {
                    if let Some(list) = line.trim().strip_prefix(BOOTSTRAP_PREFIX) {
                        broker.bootstrap = list.trim().to_string();
                        return Ok(broker);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => bail!(
                    "the broker ({}) printed no `{BOOTSTRAP_PREFIX}…` line within {STARTUP_TIMEOUT:?}",
                    broker.command
                ),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = broker.child.wait().ok();
                    bail!(
                        "the broker ({}) exited ({status:?}) before printing `{BOOTSTRAP_PREFIX}…`",
                        broker.command
                    )
                }
            }
        }
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether this `nervix dev kafka` takes `--topic` (topics created with `--partitions`
/// partitions; librdkafka's mock cluster auto-creates topics with its own fixed count).
fn dev_kafka_creates_topics(nervix: &std::path::Path) -> anyhow::Result<bool> {
    let help = Command::new(nervix)
        .args(["dev", "kafka", "--help"])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {} dev kafka --help", nervix.display()))?;
    if !help.status.success() {
        bail!(
            "{} has no `dev kafka` subcommand ({}): build the current tree with \
             `cargo build --release -p nervix`, or pass `--broker self`",
            nervix.display(),
            String::from_utf8_lossy(&help.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&help.stdout).contains("--topic"))
}

/// `nervix-bench kafka-broker`: hosts librdkafka's mock cluster (one broker), creates
/// `topics` with `partitions` partitions, prints the bootstrap line, and runs until stdin
/// closes or the process is killed.
pub fn serve(partitions: i32, topics: &[String]) -> anyhow::Result<()> {
    let cluster = rdkafka::mocking::MockCluster::new(1)
        .map_err(|e| anyhow::anyhow!("cannot start the mock cluster: {e}"))?;
    for topic in topics {
        cluster
            .create_topic(topic, partitions, 1)
            .map_err(|e| anyhow::anyhow!("cannot create topic '{topic}': {e}"))?;
    }
    println!("{BOOTSTRAP_PREFIX}{}", cluster.bootstrap_servers());
    // Wait for stdin to close (the parent went away); kill ends it sooner.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(cluster);
    Ok(())
}
