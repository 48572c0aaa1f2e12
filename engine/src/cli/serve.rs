//! `nervix serve`: one node — the replicated catalog (Raft over LMDB under `--data-dir`) and
//! the console listener, on the control core's current-thread tokio runtime. The data plane
//! joins with a later issue.
//!
//! First start: with no user in the catalog, `admin` is created from NERVIX_ADMIN_PASSWORD or
//! `--admin-password-file`; without either the node refuses to start unless
//! `--insecure-console` (development only) is given.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;

use nervix::console::{tls_config, ConsoleConfig, ConsoleServer, Security};
use nervix::control::{ControlNode, ControlStateMachine};

use super::Status;

/// Longest a start waits for its cluster to elect a leader.
const LEADER_WAIT_MS: u64 = 10_000;
/// Longest an admin password file may be.
const MAX_PASSWORD_FILE_BYTES: u64 = 4_096;

#[derive(Args)]
pub struct ServeArguments {
    /// Where the catalog (Raft log, state, snapshots) and uploaded resources live.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// Console listener.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:47391")]
    console_addr: SocketAddr,
    /// Raft RPC listener (cluster members replicate through it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:47393")]
    raft_addr: SocketAddr,
    /// This node's id in the cluster (≥ 1).
    #[arg(long, value_name = "ID", default_value_t = 1)]
    node_id: u64,
    /// PEM certificate chain for console TLS (with --console-tls-key).
    #[arg(long, value_name = "FILE", requires = "console_tls_key")]
    console_tls_cert: Option<PathBuf>,
    /// PEM private key for console TLS (with --console-tls-cert).
    #[arg(long, value_name = "FILE", requires = "console_tls_cert")]
    console_tls_key: Option<PathBuf>,
    /// A file holding the first `admin` password (instead of NERVIX_ADMIN_PASSWORD).
    #[arg(long, value_name = "FILE")]
    admin_password_file: Option<PathBuf>,
    /// Accept console sessions without authentication (development only).
    #[arg(long)]
    insecure_console: bool,
    /// Session protocol listener (client producers and consumers).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:47392")]
    session_addr: SocketAddr,
    /// HTTP (and WebSocket) listener for endpoint ingestors of plain VHOSTs, on every shard.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    http_addr: SocketAddr,
    /// HTTPS (and WSS) listener for TLS VHOSTs, on every shard.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443")]
    https_addr: SocketAddr,
    /// Request bodies larger than this are answered 413.
    #[arg(long, value_name = "BYTES", default_value_t = nervix::runtime::http::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// `/metrics`, `/livez` and `/readyz` listener.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9090")]
    metrics_addr: SocketAddr,
    /// Data shards (default: cores − 1, at least 1).
    #[arg(long, value_name = "N")]
    shards: Option<std::num::NonZeroUsize>,
    /// Do not pin shards to CPUs (containers, CI).
    #[arg(long)]
    no_pin: bool,
    /// The CPU of each shard, comma-separated (shard i on the i-th, wrapping; default: cpus
    /// 1..=shards when there are more cores than shards, else 0.., wrapping).
    #[arg(
        long,
        value_name = "CPUS",
        value_delimiter = ',',
        conflicts_with = "no_pin"
    )]
    shard_cpus: Option<Vec<usize>>,
    /// io_uring memory registered per shard, in bytes (at most 1 GiB; locked memory, so it
    /// counts against `ulimit -l` three times, once per ring).
    #[arg(long, value_name = "BYTES", default_value_t = nervix_shards::runtime::DEFAULT_IO_MEMORY_BYTES)]
    shard_io_memory: usize,
    /// io_uring entries per ring (1..=32768).
    #[arg(long, value_name = "N", default_value_t = nervix_shards::runtime::DEFAULT_RING_DEPTH)]
    shard_ring_depth: usize,
    /// Microseconds a pinned shard that ran out of work keeps polling before it parks: lower
    /// wake-up latency (FLUSH IMMEDIATE windows, arriving batches) for busy CPU (0 = off,
    /// at most 10,000; an unpinned shard polls at most 20).
    #[arg(long, value_name = "US", default_value_t = nervix::runtime::DEFAULT_SPIN_BEFORE_PARK_US)]
    shard_spin_us: u64,
    /// Longest a graceful stop waits for sinks to confirm buffered rows, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    drain_timeout_ms: u64,
    /// The most runtime state (processor snapshots, Kafka offsets) the node keeps on disk, in
    /// bytes (at least 1 MiB); a snapshot that would outgrow it is not written, and the rows it
    /// holds stay unacknowledged until one fits (`nervix_snapshot_failed_total`).
    #[arg(long, value_name = "BYTES", default_value_t = nervix::runtime::state_store::DEFAULT_STATE_MAP_BYTES,
          value_parser = state_map_bytes)]
    state_map_bytes: usize,
}

/// Parses `--state-map-bytes`, refusing less than the store's minimum.
fn state_map_bytes(text: &str) -> Result<usize, String> {
    let bytes: usize = text
        .parse()
        .map_err(|_| format!("'{text}' is not a byte count"))?;
    let least = nervix::runtime::state_store::MIN_STATE_MAP_BYTES;
    if bytes < least {
        return Err(format!("{bytes} bytes is less than the least, {least}"));
    }
    Ok(bytes)
}

/// Logs go to stderr; `NERVIX_LOG` (an env-filter, e.g. `debug` or `nervix=trace`) overrides
/// the default `info`.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NERVIX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

pub fn run(arguments: &ServeArguments) -> anyhow::Result<Status> {
    init_logging();
    if arguments.node_id == 0 {
        bail!("--node-id must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the control runtime")?;
    runtime.block_on(serve(arguments))
}

fn admin_password(arguments: &ServeArguments) -> anyhow::Result<Option<String>> {
    if let Some(path) = &arguments.admin_password_file {
        let size = std::fs::metadata(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .len();
        if size > MAX_PASSWORD_FILE_BYTES {
            bail!(
                "{} is larger than {MAX_PASSWORD_FILE_BYTES} bytes",
                path.display()
            );
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let password = text.trim_end_matches(['\n', '\r']).to_string();
        if password.is_empty() {
            bail!("{} holds an empty password", path.display());
        }
        return Ok(Some(password));
    }
    match std::env::var("NERVIX_ADMIN_PASSWORD") {
        Ok(password) if !password.is_empty() => Ok(Some(password)),
        _ => Ok(None),
    }
}

async fn serve(arguments: &ServeArguments) -> anyhow::Result<Status> {
    let data_dir = &arguments.data_dir;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let config = nervix_raft::RaftConfig::new(
        data_dir.join("raft"),
        arguments.node_id,
        arguments.raft_addr,
    );
    let raft = nervix_raft::RaftNode::open(config, ControlStateMachine::default())
        .await
        .context("cannot open the catalog")?;
    raft.wait_for_leader(std::time::Duration::from_millis(LEADER_WAIT_MS))
        .await
        .context("the catalog has no leader")?;
    let node = Arc::new(ControlNode::new(
        raft,
        data_dir.join("resources"),
        format!("node-{}", arguments.node_id),
    ));

    if node.read(|c| c.users.is_empty()) {
        match admin_password(arguments)? {
            Some(password) => {
                node.bootstrap_admin(&password)
                    .await
                    .context("cannot create user admin")?;
                eprintln!("nervix: created user admin");
            }
            None if arguments.insecure_console => {}
            None => bail!(
                "no user exists yet: set NERVIX_ADMIN_PASSWORD or pass --admin-password-file to create user admin, or run with --insecure-console (development only)"
            ),
        }
    }

    let shards = arguments
        .shards
        .unwrap_or_else(nervix::runtime::default_shards);
    let data_plane = Arc::new(
        nervix::runtime::DataPlane::start(nervix::runtime::DataPlaneConfig {
            shards,
            pin: !arguments.no_pin,
            tuning: nervix::runtime::ShardTuning {
                cpus: arguments.shard_cpus.clone(),
                io_memory_bytes: arguments.shard_io_memory,
                ring_depth: arguments.shard_ring_depth,
                spin_before_park_us: arguments.shard_spin_us,
            },
            session_addr: arguments.session_addr,
            data_dir: data_dir.clone(),
            listeners: nervix::runtime::http::DataListeners {
                http_addr: Some(arguments.http_addr),
                https_addr: Some(arguments.https_addr),
                max_body_bytes: arguments.max_body_bytes,
            },
            state_map_bytes: arguments.state_map_bytes,
        })
        .context("cannot start the data plane")?,
    );
    node.attach_data_plane(data_plane.clone()).await;
    let metrics = nervix::runtime::observe::serve(arguments.metrics_addr, data_plane.clone())
        .await
        .context("cannot start the metrics listener")?;
    eprintln!(
        "nervix: {} shard(s); sessions on {}; metrics on {}",
        data_plane.shard_count(),
        data_plane.session_addr(),
        metrics
    );

    let mut console = ConsoleConfig::new(arguments.console_addr);
    if let (Some(cert), Some(key)) = (&arguments.console_tls_cert, &arguments.console_tls_key) {
        console.tls = Some(tls_config(cert, key).context("cannot load the console certificate")?);
    }
    if arguments.insecure_console {
        console.security = Security::Insecure;
    }
    let server = ConsoleServer::start(console, node.clone())
        .await
        .context("cannot start the console")?;
    eprintln!(
        "nervix: node-{} serving the console on {}{}",
        arguments.node_id,
        server.local_addr(),
        if arguments.insecure_console {
            " (insecure: no authentication)"
        } else {
            ""
        }
    );

    wait_for_termination().await?;
    eprintln!("nervix: shutting down: flushing and waiting for sinks");
    server.shutdown().await;
    let (data_plane, node) = (data_plane, node);
    node.detach_data_plane();
    match Arc::try_unwrap(data_plane) {
        Ok(data_plane) => data_plane.shutdown(arguments.drain_timeout_ms).await,
        Err(_) => eprintln!("nervix: the data plane is still in use; leaving it to the OS"),
    }
    match Arc::try_unwrap(node) {
        Ok(node) => node
            .into_raft()
            .shutdown()
            .await
            .context("cannot stop the catalog")?,
        Err(_) => eprintln!("nervix: sessions still hold the catalog; leaving it to the OS"),
    }
    Ok(Status::Success)
}

async fn wait_for_termination() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    tokio::select! {
        _ = terminate.recv() => {}
        result = tokio::signal::ctrl_c() => result.context("cannot watch SIGINT")?,
    }
    Ok(())
}
