//! The crate's error types: [`RaftError`] for every public operation, [`StateError`] for the
//! application's reads and writes of the `state` database.
//!
//! Every variant carries the context a person needs to act on it (which directory, which
//! address, which bound). I/O and LMDB failures always surface as errors, never panics; the crate
//! panics only when one of its own invariants is broken.

use std::path::PathBuf;
use std::time::Duration;

use crate::NodeId;

/// Failure of a [`crate::RaftNode`] operation.
#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    /// The configuration is inconsistent.
    #[error("invalid raft configuration: {reason}")]
    Config { reason: String },

    /// A file-system operation on the data directory failed.
    #[error("raft I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    /// LMDB (heed) failed.
    #[error("raft storage error while {context}: {source}")]
    Storage {
        context: String,
        #[source]
        source: heed::Error,
    },

    /// Stored bytes could not be decoded: the data directory is damaged or from another version.
    #[error("raft storage in {dir} is corrupt: {reason}")]
    Corrupt { dir: PathBuf, reason: String },

    /// The LMDB environment of this directory is already open in this process.
    #[error("raft data directory {dir} is already open in this process")]
    AlreadyOpen { dir: PathBuf },

    /// The directory belongs to another node.
    #[error("raft data directory {dir} belongs to node {stored}, not node {configured}")]
    NodeIdMismatch {
        dir: PathBuf,
        stored: NodeId,
        configured: NodeId,
    },

    /// The application's state machine refused to load its state.
    #[error("state machine failed to load from {dir}: {reason}")]
    StateMachineLoad { dir: PathBuf, reason: String },

    /// The Raft RPC listener could not be bound.
    #[error("cannot bind raft RPC listener on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },

    /// This node is not the leader; the leader, when known, is named.
    #[error("not the raft leader (leader: {})", leader_text(.leader_id, .leader_addr))]
    NotLeader {
        leader_id: Option<NodeId>,
        leader_addr: Option<String>,
    },

    /// A command is larger than [`crate::config::MAX_COMMAND_BYTES`].
    #[error("raft command of {len} bytes exceeds the {max}-byte limit")]
    CommandTooLarge { len: usize, max: usize },

    /// An operation did not finish in time. For a write this is ambiguous: the command may still
    /// commit later.
    #[error("raft {operation} did not finish within {after:?}")]
    Timeout {
        operation: &'static str,
        after: Duration,
    },

    /// A membership change was refused (one in progress, empty set, unknown learner, ...).
    #[error("raft membership change refused: {reason}")]
    Membership { reason: String },

    /// openraft stopped: storage failed underneath it, or the node is shutting down.
    #[error("raft stopped: {reason}")]
    Fatal { reason: String },
}

fn leader_text(id: &Option<NodeId>, addr: &Option<String>) -> String {
    match (id, addr) {
        (Some(id), Some(addr)) => format!("node {id} at {addr}"),
        (Some(id), None) => format!("node {id}"),
        _ => "unknown".to_string(),
    }
}

impl RaftError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        RaftError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn storage(context: impl Into<String>, source: heed::Error) -> Self {
        RaftError::Storage {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn fatal(reason: impl std::fmt::Display) -> Self {
        RaftError::Fatal {
            reason: reason.to_string(),
        }
    }
}

/// Failure of a read or write of the `state` database through [`crate::StateTxn`].
///
/// The size errors are deterministic (every replica rejects the same write the same way), so an
/// application may handle them. A [`StateError::Storage`] is not: it poisons the transaction, and
/// the raft crate aborts the whole apply batch and stops the node rather than let replicas
/// diverge.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// LMDB keys are 1 to [`crate::MAX_STATE_KEY_BYTES`] bytes.
    #[error("state key of {len} bytes is outside 1..={max} bytes")]
    KeyLength { len: usize, max: usize },

    /// Values are at most [`crate::config::MAX_STATE_VALUE_BYTES`] bytes.
    #[error("state value of {len} bytes exceeds the {max}-byte limit")]
    ValueTooLarge { len: usize, max: usize },

    /// LMDB failed; the transaction is poisoned.
    #[error("state database error: {0}")]
    Storage(String),

    /// An earlier operation in this transaction failed in LMDB.
    #[error("state transaction is poisoned by an earlier storage error: {0}")]
    Poisoned(String),
}
