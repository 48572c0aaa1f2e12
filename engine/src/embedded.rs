//! A whole node inside another program: the replicated catalog (Raft over LMDB in a data
//! directory), the data plane, and an admin session to run NSPL — without the console
//! listener. `nervix demo` and the benchmarks run on it; applications can too.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;

use nervix_nspl::ast::catalog::Role;

use crate::control::{ControlNode, ControlSession, ControlStateMachine};
use crate::runtime::{DataPlane, DataPlaneConfig};

/// How an embedded node starts.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    pub data_dir: PathBuf,
    pub shards: NonZeroUsize,
    pub pin: bool,
    /// Shard CPUs, io_uring sizes and spinning (spinning only applies to pinned shards).
    pub shard_tuning: crate::runtime::ShardTuning,
    /// The session listener (port 0 picks a free one).
    pub session_addr: SocketAddr,
    /// HTTP / HTTPS listeners for endpoint ingestors (none by default).
    pub listeners: crate::runtime::http::DataListeners,
}

impl EmbeddedConfig {
    /// `shards` unpinned shards in `data_dir`, the session listener on a free loopback port
    /// and no data listeners: the node `nervix demo`, the benchmarks and tests run.
    pub fn loopback(data_dir: PathBuf, shards: NonZeroUsize) -> EmbeddedConfig {
        EmbeddedConfig {
            data_dir,
            shards,
            pin: false,
            shard_tuning: Default::default(),
            session_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            listeners: Default::default(),
        }
    }
}

/// A data directory under the system's temp dir that no other run names:
/// `nervix-<label>-<pid>-<ns since the epoch>` (not created here).
pub fn scratch_data_dir(label: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("nervix-{label}-{}-{nanos}", std::process::id()))
}

/// Why an embedded node could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("cannot prepare {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the catalog: {0}")]
    Catalog(String),
    #[error("cannot start the data plane: {0}")]
    DataPlane(#[from] crate::runtime::DataPlaneError),
}

/// A running embedded node.
pub struct EmbeddedNode {
    pub control: Arc<ControlNode>,
    pub data_plane: Arc<DataPlane>,
    session: ControlSession,
}

/// Longest a start waits for the one-member cluster to elect itself.
const LEADER_WAIT_MS: u64 = 10_000;

impl EmbeddedNode {
    pub async fn start(config: EmbeddedConfig) -> Result<EmbeddedNode, EmbeddedError> {
        std::fs::create_dir_all(&config.data_dir).map_err(|source| EmbeddedError::DataDir {
            path: config.data_dir.clone(),
            source,
        })?;
        // Port 0: the raft listener binds a free port itself (a probed-then-released port could
        // be taken in between), and a one-member cluster has no peer to tell it to.
        let raft_addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let raft_config = nervix_raft::RaftConfig::new(config.data_dir.join("raft"), 1, raft_addr);
        let raft = nervix_raft::RaftNode::open(raft_config, ControlStateMachine::default())
            .await
            .map_err(|e| EmbeddedError::Catalog(e.to_string()))?;
        raft.wait_for_leader(std::time::Duration::from_millis(LEADER_WAIT_MS))
            .await
            .map_err(|e| EmbeddedError::Catalog(e.to_string()))?;
        let control = Arc::new(ControlNode::new(
            raft,
            config.data_dir.join("resources"),
            "node-1".to_string(),
        ));
        let data_plane = Arc::new(DataPlane::start(DataPlaneConfig {
            shards: config.shards,
            pin: config.pin,
            tuning: config.shard_tuning.clone(),
            session_addr: config.session_addr,
            data_dir: config.data_dir.clone(),
            listeners: config.listeners.clone(),
            state_map_bytes: crate::runtime::state_store::DEFAULT_STATE_MAP_BYTES,
        })?);
        control.attach_data_plane(data_plane.clone()).await;
        Ok(EmbeddedNode {
            control,
            data_plane,
            session: ControlSession::new("admin", Role::Admin),
        })
    }

    /// Runs every statement of `script` in order as the admin session; returns the output
    /// lines, or the first refusal as `<line>:<col> <message>`.
    pub async fn run(&mut self, script: &str) -> Result<Vec<String>, String> {
        let parsed = nervix_nspl::parse_script(script);
        if let Some(error) = parsed.errors.first() {
            let at = nervix_nspl::position(script, error.span.start);
            return Err(format!("{at} {}", error.message));
        }
        let mut lines = Vec::new();
        for statement in &parsed.statements {
            let text = &script[statement.span.start as usize..statement.span.end as usize];
            let reply = self.control.execute(&mut self.session, text).await;
            lines.extend(reply.lines);
            if let Err(refusal) = reply.outcome {
                let at = nervix_nspl::position(script, statement.span.start + refusal.span.start);
                return Err(format!("{at} {}", refusal.message));
            }
        }
        Ok(lines)
    }

    /// Subscription lines the admin session receives.
    pub fn subscription_lines(&mut self) -> &mut tokio::sync::mpsc::Receiver<String> {
        &mut self.session.incoming
    }

    /// Graceful stop: flush, let sinks confirm for at most `drain_ms`, stop the catalog.
    pub async fn shutdown(self, drain_ms: u64) {
        self.control.detach_data_plane();
        drop(self.session);
        if let Ok(data_plane) = Arc::try_unwrap(self.data_plane) {
            data_plane.shutdown(drain_ms).await;
        }
        if let Ok(control) = Arc::try_unwrap(self.control) {
            let _ = control.into_raft().shutdown().await;
        }
    }
}
