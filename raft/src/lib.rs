//! Replicated log and state-machine plumbing for the Nervix control plane.
//!
//! This crate owns consensus: [openraft] over heed (LMDB) storage, snapshots and log purge, a
//! TCP transport for the Raft RPCs, all generic over the application state machine it
//! replicates (the engine supplies the catalog's). It depends on no other Nervix crate.
//!
//! The pieces, one module each:
//!
//! - [`config`]: [`RaftConfig`] and every named bound (timeouts, sizes, snapshot policy).
//! - [`error`]: [`RaftError`], the one error type of the public API, and [`StateError`].
//! - [`state`]: the [`StateMachine`] trait the application implements, and the
//!   [`StateTxn`]/[`StateReadTxn`] views of the `state` database it reads and writes.
//! - `store`: the heed environment (log, vote, meta and state databases), openraft's
//!   `RaftLogStorage` and `RaftStateMachine` over it, and the snapshot file format.
//! - `network`/`server`: length-prefixed postcard frames over TCP, client and server halves.
//! - [`node`]: [`RaftNode`], which ties them together behind a small async API.
//!
//! Commands and responses are opaque bytes ([`Command`], [`Response`]); the engine encodes its
//! own types inside them. Everything the crate does to disk is committed with LMDB's default
//! durable commit (fsync), so an acknowledged write survives `kill -9`.

pub mod config;
pub mod error;
mod network;
pub mod node;
mod server;
pub mod state;
mod store;

use serde::{Deserialize, Serialize};

pub use config::{RaftConfig, StartMode};
pub use error::{RaftError, StateError};
pub use node::RaftNode;
pub use openraft::{BasicNode, LogId, RaftMetrics, ServerState};
pub use state::{StateMachine, StatePrefixIter, StateReadTxn, StateTxn, MAX_STATE_KEY_BYTES};
pub use store::SnapshotFile;

/// Identifies a node of the cluster. Stable for the life of its data directory.
pub type NodeId = u64;

/// One replicated command: opaque bytes the application's [`StateMachine`] interprets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command(#[serde(with = "serde_bytes")] pub Vec<u8>);

/// What applying one [`Command`] answered: opaque bytes from [`StateMachine::apply`]. Blank and
/// membership entries answer an empty response.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Response(#[serde(with = "serde_bytes")] pub Vec<u8>);

openraft::declare_raft_types!(
    /// openraft's type configuration for Nervix: u64 node ids, a network address per node,
    /// byte commands and responses, snapshots held in files.
    pub TypeConfig:
        D = Command,
        R = Response,
        NodeId = NodeId,
        Node = BasicNode,
        SnapshotData = SnapshotFile,
);
