//! Configuration of a Raft node, and every bound the crate enforces, named with its unit.
//!
//! [`RaftConfig`] is what the engine fills from `nervix serve` flags; [`RaftConfig::new`] gives
//! the defaults below, and [`RaftConfig::to_openraft`] validates the whole and derives openraft's
//! `Config` from it. Nothing else in the crate invents a number: timeouts, frame and command
//! sizes, connection counts and the LMDB map size all come from here, so a reader can audit the
//! limits in one place (TigerBeetle style: every bound named, units in names).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use openraft::SnapshotPolicy;

use crate::error::RaftError;
use crate::NodeId;

/// Largest frame (length prefix excluded) either side of a Raft connection accepts or sends.
pub const MAX_RAFT_FRAME_BYTES: u32 = 32 * 1024 * 1024;

/// Largest command [`crate::RaftNode::write`] accepts. openraft gives an AppendEntries one
/// heartbeat interval to complete, so an entry must cross the network and be fsynced well within
/// it; control-plane commands are catalog models, far smaller.
pub const MAX_COMMAND_BYTES: usize = 4 * 1024 * 1024;

/// An AppendEntries of more than one entry is kept under this many encoded bytes (openraft is
/// asked to send fewer entries), for the same reason. A single entry may exceed it, up to
/// [`MAX_COMMAND_BYTES`] plus its envelope.
pub const MAX_APPEND_ENTRIES_BYTES: usize = 1024 * 1024;

/// Largest value the application may store under one key of the `state` database, and the
/// largest a snapshot file may carry.
pub const MAX_STATE_VALUE_BYTES: usize = 64 * 1024 * 1024;

/// Leader heartbeat period; also the timeout openraft gives one AppendEntries RPC (send, fsync
/// on the follower, answer), hence the byte bounds on AppendEntries below.
pub const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 200;
/// Lower bound of the randomized election timeout (a follower that heard nothing for this long
/// campaigns); five heartbeats, so a slow fsync or two does not depose a healthy leader.
pub const DEFAULT_ELECTION_TIMEOUT_MIN_MS: u64 = 1_000;
/// Upper bound of the randomized election timeout.
pub const DEFAULT_ELECTION_TIMEOUT_MAX_MS: u64 = 2_000;
/// Timeout for sending one snapshot chunk, and for installing the last one.
pub const DEFAULT_INSTALL_SNAPSHOT_TIMEOUT_MS: u64 = 10_000;
/// Build a snapshot once this many entries were applied since the last one.
pub const DEFAULT_SNAPSHOT_LOGS_SINCE_LAST: u64 = 5_000;
/// Entries already covered by a snapshot that are kept in the log (so slightly lagging
/// followers catch up from the log rather than a snapshot).
pub const DEFAULT_MAX_IN_SNAPSHOT_LOG_TO_KEEP: u64 = 1_000;
/// Size of one InstallSnapshot chunk.
pub const DEFAULT_SNAPSHOT_CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// Most entries one AppendEntries carries (fewer when they would exceed
/// [`MAX_APPEND_ENTRIES_BYTES`]).
pub const DEFAULT_MAX_PAYLOAD_ENTRIES: u64 = 256;
/// How long [`crate::RaftNode::write`] waits for commit and apply before reporting a timeout.
pub const DEFAULT_WRITE_TIMEOUT_MS: u64 = 10_000;
/// How long a membership change (or a blocking add-learner catch-up) may take.
pub const DEFAULT_MEMBERSHIP_TIMEOUT_MS: u64 = 30_000;
/// How long [`crate::RaftNode::open`] waits for a sole voter to become leader.
pub const DEFAULT_LEADER_WAIT_TIMEOUT_MS: u64 = 10_000;
/// LMDB map size: the most the environment's file may grow to (virtual memory, not RAM).
pub const DEFAULT_ENV_MAP_SIZE_BYTES: usize = 1024 * 1024 * 1024;

/// Connecting to a peer's Raft port gives up after this long (within the RPC's own timeout).
pub const RAFT_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Once a frame's length prefix arrived, its body must arrive within this long.
pub const RAFT_FRAME_READ_TIMEOUT_MS: u64 = 30_000;
/// Most inbound Raft connections served at once; further ones are closed on accept.
pub const MAX_RAFT_CONNECTIONS: usize = 64;
/// [`crate::RaftNode::shutdown`] waits this long for the LMDB environment to close.
pub const ENV_CLOSE_TIMEOUT_MS: u64 = 10_000;

/// How a node whose data directory holds no Raft state starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartMode {
    /// Initialize a one-member cluster of this node (first start of `nervix serve`).
    #[default]
    Bootstrap,
    /// Wait, empty, to be added by an existing cluster's leader (`nervix serve --join`).
    Join,
}

/// Everything [`crate::RaftNode::open`] needs. Build with [`RaftConfig::new`] and override fields.
#[derive(Debug, Clone)]
pub struct RaftConfig {
    /// Directory of the LMDB environment and the snapshot files (the node's `--data-dir`/raft).
    pub data_dir: PathBuf,
    /// This node's id; must match the id recorded in `data_dir` on later starts.
    pub node_id: NodeId,
    /// Address the Raft RPC server binds. Port 0 picks a free port, which suits a one-node
    /// cluster; members of a larger cluster need a fixed one, since peers keep the address they
    /// were given in the membership.
    pub listen_addr: SocketAddr,
    /// Address peers use to reach this node; `None` means the address actually bound.
    pub advertise_addr: Option<String>,
    /// What to do when `data_dir` holds no Raft state yet.
    pub start_mode: StartMode,
    /// Name of the cluster, for logs.
    pub cluster_name: String,
    /// See [`DEFAULT_HEARTBEAT_INTERVAL_MS`].
    pub heartbeat_interval_ms: u64,
    /// See [`DEFAULT_ELECTION_TIMEOUT_MIN_MS`].
    pub election_timeout_min_ms: u64,
    /// See [`DEFAULT_ELECTION_TIMEOUT_MAX_MS`].
    pub election_timeout_max_ms: u64,
    /// See [`DEFAULT_INSTALL_SNAPSHOT_TIMEOUT_MS`].
    pub install_snapshot_timeout_ms: u64,
    /// See [`DEFAULT_SNAPSHOT_LOGS_SINCE_LAST`].
    pub snapshot_logs_since_last: u64,
    /// See [`DEFAULT_MAX_IN_SNAPSHOT_LOG_TO_KEEP`].
    pub max_in_snapshot_log_to_keep: u64,
    /// See [`DEFAULT_SNAPSHOT_CHUNK_BYTES`].
    pub snapshot_chunk_bytes: u64,
    /// See [`DEFAULT_MAX_PAYLOAD_ENTRIES`].
    pub max_payload_entries: u64,
    /// See [`DEFAULT_WRITE_TIMEOUT_MS`].
    pub write_timeout_ms: u64,
    /// See [`DEFAULT_MEMBERSHIP_TIMEOUT_MS`].
    pub membership_timeout_ms: u64,
    /// See [`DEFAULT_LEADER_WAIT_TIMEOUT_MS`].
    pub leader_wait_timeout_ms: u64,
    /// See [`DEFAULT_ENV_MAP_SIZE_BYTES`].
    pub env_map_size_bytes: usize,
}

impl RaftConfig {
    /// A configuration with every bound at its default.
    pub fn new(data_dir: impl Into<PathBuf>, node_id: NodeId, listen_addr: SocketAddr) -> Self {
        RaftConfig {
            data_dir: data_dir.into(),
            node_id,
            listen_addr,
            advertise_addr: None,
            start_mode: StartMode::Bootstrap,
            cluster_name: "nervix".to_string(),
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_INTERVAL_MS,
            election_timeout_min_ms: DEFAULT_ELECTION_TIMEOUT_MIN_MS,
            election_timeout_max_ms: DEFAULT_ELECTION_TIMEOUT_MAX_MS,
            install_snapshot_timeout_ms: DEFAULT_INSTALL_SNAPSHOT_TIMEOUT_MS,
            snapshot_logs_since_last: DEFAULT_SNAPSHOT_LOGS_SINCE_LAST,
            max_in_snapshot_log_to_keep: DEFAULT_MAX_IN_SNAPSHOT_LOG_TO_KEEP,
            snapshot_chunk_bytes: DEFAULT_SNAPSHOT_CHUNK_BYTES,
            max_payload_entries: DEFAULT_MAX_PAYLOAD_ENTRIES,
            write_timeout_ms: DEFAULT_WRITE_TIMEOUT_MS,
            membership_timeout_ms: DEFAULT_MEMBERSHIP_TIMEOUT_MS,
            leader_wait_timeout_ms: DEFAULT_LEADER_WAIT_TIMEOUT_MS,
            env_map_size_bytes: DEFAULT_ENV_MAP_SIZE_BYTES,
        }
    }

    /// [`Self::write_timeout_ms`] as a duration.
    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_ms)
    }

    /// [`Self::membership_timeout_ms`] as a duration.
    pub fn membership_timeout(&self) -> Duration {
        Duration::from_millis(self.membership_timeout_ms)
    }

    /// [`Self::leader_wait_timeout_ms`] as a duration.
    pub fn leader_wait_timeout(&self) -> Duration {
        Duration::from_millis(self.leader_wait_timeout_ms)
    }

    /// Checks the bounds against each other and derives openraft's configuration.
    pub fn to_openraft(&self) -> Result<openraft::Config, RaftError> {
        let invalid = |reason: String| Err(RaftError::Config { reason });
        if self.snapshot_logs_since_last == 0 {
            return invalid("snapshot_logs_since_last must be at least 1".into());
        }
        if self.snapshot_chunk_bytes == 0
            || self.snapshot_chunk_bytes > u64::from(MAX_RAFT_FRAME_BYTES / 2)
        {
            return invalid(format!(
                "snapshot_chunk_bytes {} must be within 1..={} (half a Raft frame)",
                self.snapshot_chunk_bytes,
                MAX_RAFT_FRAME_BYTES / 2
            ));
        }
        for (name, value) in [
            ("write_timeout_ms", self.write_timeout_ms),
            ("membership_timeout_ms", self.membership_timeout_ms),
            ("leader_wait_timeout_ms", self.leader_wait_timeout_ms),
            (
                "install_snapshot_timeout_ms",
                self.install_snapshot_timeout_ms,
            ),
        ] {
            if value == 0 {
                return invalid(format!("{name} must be at least 1"));
            }
        }
        if self.env_map_size_bytes < 1024 * 1024 {
            return invalid(format!(
                "env_map_size_bytes {} is below 1 MiB",
                self.env_map_size_bytes
            ));
        }
        let config = openraft::Config {
            cluster_name: self.cluster_name.clone(),
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            heartbeat_interval: self.heartbeat_interval_ms,
            install_snapshot_timeout: self.install_snapshot_timeout_ms,
            max_payload_entries: self.max_payload_entries,
            // A learner is "caught up" (add_learner returns) once it is within the entries a
            // snapshot round keeps; beyond that it would be fed a snapshot anyway.
            replication_lag_threshold: self
                .snapshot_logs_since_last
                .saturating_add(self.max_in_snapshot_log_to_keep),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_logs_since_last),
            snapshot_max_chunk_size: self.snapshot_chunk_bytes,
            max_in_snapshot_log_to_keep: self.max_in_snapshot_log_to_keep,
            purge_batch_size: 1,
            ..openraft::Config::default()
        };
        config.validate().map_err(|e| RaftError::Config {
            reason: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RaftConfig {
        RaftConfig::new("/nonexistent", 1, "127.0.0.1:0".parse().unwrap())
    }

    #[test]
    fn defaults_validate() {
        let c = config().to_openraft().unwrap();
        assert_eq!(c.snapshot_policy, SnapshotPolicy::LogsSinceLast(5_000));
        assert_eq!(c.max_in_snapshot_log_to_keep, 1_000);
    }

    #[test]
    fn rejects_inconsistent_bounds() {
        let mut c = config();
        c.election_timeout_min_ms = c.heartbeat_interval_ms;
        assert!(matches!(c.to_openraft(), Err(RaftError::Config { .. })));
        let mut c = config();
        c.snapshot_chunk_bytes = u64::from(MAX_RAFT_FRAME_BYTES);
        assert!(matches!(c.to_openraft(), Err(RaftError::Config { .. })));
        let mut c = config();
        c.snapshot_logs_since_last = 0;
        assert!(matches!(c.to_openraft(), Err(RaftError::Config { .. })));
    }
}
