//! [`RaftNode`]: one member of a Raft cluster replicating an application [`StateMachine`], with
//! its storage, its RPC server and a small async API for the control core.
//!
//! Why this is correct:
//! - *Open.* The state machine is loaded from the `state` database before openraft starts, and
//!   openraft then replays committed-but-unapplied entries from the log; a node that never
//!   stored anything initializes a one-member cluster ([`StartMode::Bootstrap`]) or waits to be
//!   added ([`StartMode::Join`]), and an initialized one never initializes again.
//! - *Write.* [`RaftNode::write`] returns only after openraft reports the entry committed and
//!   applied; commit needs a quorum of durably appended logs (fsynced LMDB commits) and apply
//!   is itself a durable transaction, so every acknowledged write survives a crash.
//! - *Shutdown.* openraft, the RPC server and every handle on the LMDB environment are stopped
//!   and [`RaftNode::shutdown`] waits until the environment is closed, so the same directory can
//!   be opened again in-process right after.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use heed::{Env, WithoutTls};
use openraft::error::ClientWriteError;
use openraft::{BasicNode, Raft, RaftMetrics, ServerState};
use tokio::net::TcpListener;

use crate::config::{RaftConfig, StartMode, ENV_CLOSE_TIMEOUT_MS, MAX_COMMAND_BYTES};
use crate::error::RaftError;
use crate::network::NetworkFactory;
use crate::server::RpcServer;
use crate::state::StateMachine;
use crate::store::{load_state_machine, LogStore, StateMachineStore, Store};
use crate::{Command, NodeId, TypeConfig};

/// A running Raft member. Dropping it stops it in the background; prefer
/// [`RaftNode::shutdown`], which waits until the data directory is released.
pub struct RaftNode<SM: StateMachine> {
    config: RaftConfig,
    raft: Raft<TypeConfig>,
    state: Arc<RwLock<SM>>,
    server: Option<RpcServer>,
    env: Option<Env<WithoutTls>>,
    advertise_addr: String,
}

type ClientWriteFailure = openraft::error::RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>;

fn client_write_error(e: ClientWriteFailure) -> RaftError {
    match e {
        openraft::error::RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
            RaftError::NotLeader {
                leader_id: forward.leader_id,
                leader_addr: forward.leader_node.map(|node| node.addr),
            }
        }
        openraft::error::RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            RaftError::Membership {
                reason: e.to_string(),
            }
        }
        openraft::error::RaftError::Fatal(fatal) => RaftError::fatal(fatal),
    }
}

impl<SM: StateMachine> RaftNode<SM> {
    /// Opens the node's storage in `config.data_dir` (creating it on first start), loads
    /// `state_machine` from it, binds the RPC listener and starts openraft. On first start in
    /// [`StartMode::Bootstrap`] it initializes a one-member cluster of itself. When this node is
    /// the only voter it returns once it leads, so [`RaftNode::write`] works right away.
    pub async fn open(config: RaftConfig, state_machine: SM) -> Result<Self, RaftError> {
        let raft_config = Arc::new(config.to_openraft()?);
        let dir = config.data_dir.clone();
        let store = Store::open(&dir, config.node_id, config.env_map_size_bytes)?;
        let state = Arc::new(RwLock::new(state_machine));
        load_state_machine(&store, &state)
            .map_err(|e| e.into_raft(&dir, "loading the state machine"))?;
        let listener = TcpListener::bind(config.listen_addr)
            .await
            .map_err(|source| RaftError::Bind {
                addr: config.listen_addr,
                source,
            })?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| RaftError::io("reading the raft listener's address", e))?;
        let advertise_addr = config
            .advertise_addr
            .clone()
            .unwrap_or_else(|| local_addr.to_string());
        let env = store.env.clone();
        let raft = Raft::new(
            config.node_id,
            raft_config,
            NetworkFactory {
                self_id: config.node_id,
            },
            LogStore::new(store.clone()),
            StateMachineStore::new(store, state.clone()),
        )
        .await
        .map_err(RaftError::fatal)?;
        let server = RpcServer::start(listener, config.node_id, raft.clone());
        let node = RaftNode {
            config,
            raft,
            state,
            server: Some(server),
            env: Some(env),
            advertise_addr,
        };
        match node.start().await {
            Ok(()) => Ok(node),
            Err(e) => {
                if let Err(shutdown) = node.shutdown().await {
                    tracing::warn!(error = %shutdown, "shutdown after a failed open failed");
                }
                Err(e)
            }
        }
    }

    async fn start(&self) -> Result<(), RaftError> {
        let id = self.config.node_id;
        let initialized = self.raft.is_initialized().await.map_err(RaftError::fatal)?;
        if !initialized && self.config.start_mode == StartMode::Bootstrap {
            let members = BTreeMap::from([(id, BasicNode::new(&self.advertise_addr))]);
            self.raft
                .initialize(members)
                .await
                .map_err(RaftError::fatal)?;
            tracing::info!(node = id, addr = %self.advertise_addr, "initialized a one-member raft cluster");
        }
        let sole_voter = {
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow();
            let voters: Vec<NodeId> = metrics.membership_config.voter_ids().collect();
            voters == [id]
        };
        if sole_voter {
            // No one else can vote: take leadership now instead of after an election timeout.
            if !self.is_leader() {
                self.raft
                    .trigger()
                    .elect()
                    .await
                    .map_err(RaftError::fatal)?;
            }
            self.wait_for_leader(self.config.leader_wait_timeout())
                .await?;
        }
        Ok(())
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.config.node_id
    }

    /// The address the RPC server is bound to (the actual port when `listen_addr` had port 0).
    pub fn listen_addr(&self) -> SocketAddr {
        self.server
            .as_ref()
            .expect("the RPC server runs until shutdown")
            .local_addr()
    }

    /// The address peers are told to use for this node.
    pub fn advertise_addr(&self) -> &str {
        &self.advertise_addr
    }

    /// Proposes `command`; answers the state machine's response once the command is committed
    /// (durably, on a quorum) and applied here. Only the leader accepts writes: elsewhere the
    /// error names the leader when known. A [`RaftError::Timeout`] is ambiguous: the command
    /// may still commit.
    pub async fn write(&self, command: Vec<u8>) -> Result<Vec<u8>, RaftError> {
        if command.len() > MAX_COMMAND_BYTES {
            return Err(RaftError::CommandTooLarge {
                len: command.len(),
                max: MAX_COMMAND_BYTES,
            });
        }
        let after = self.config.write_timeout();
        match tokio::time::timeout(after, self.raft.client_write(Command(command))).await {
            Err(_) => Err(RaftError::Timeout {
                operation: "write",
                after,
            }),
            Ok(Ok(response)) => Ok(response.data.0),
            Ok(Err(e)) => Err(client_write_error(e)),
        }
    }

    /// Runs `f` with read access to the state machine (as of the last applied entry).
    pub fn with_state<R>(&self, f: impl FnOnce(&SM) -> R) -> R {
        let state = self
            .state
            .read()
            .expect("state machine lock poisoned: an apply or load panicked");
        f(&state)
    }

    /// Whether this node currently believes it leads (local view; may be stale by an election).
    pub fn is_leader(&self) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        metrics.state == ServerState::Leader && metrics.current_leader == Some(self.id())
    }

    /// The leader this node knows of, with its address.
    pub fn leader(&self) -> Option<(NodeId, String)> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let leader = metrics.current_leader?;
        let addr = metrics
            .membership_config
            .membership()
            .get_node(&leader)
            .map(|node| node.addr.clone())
            .unwrap_or_default();
        Some((leader, addr))
    }

    /// A copy of openraft's current metrics (role, term, log and applied indexes, membership).
    pub fn metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    /// Waits until some node is known as leader; answers its id.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<NodeId, RaftError> {
        self.wait_metrics("leader election", timeout, |m| m.current_leader)
            .await
    }

    /// Waits until this node applied the entry at `index` (or later).
    pub async fn wait_for_applied(&self, index: u64, timeout: Duration) -> Result<(), RaftError> {
        self.wait_metrics("catch-up", timeout, |m| {
            m.last_applied
                .filter(|applied| applied.index >= index)
                .map(|_| ())
        })
        .await
    }

    async fn wait_metrics<T>(
        &self,
        operation: &'static str,
        timeout: Duration,
        mut ready: impl FnMut(&RaftMetrics<NodeId, BasicNode>) -> Option<T>,
    ) -> Result<T, RaftError> {
        let mut rx = self.raft.metrics();
        let wait = async {
            loop {
                {
                    let metrics = rx.borrow_and_update();
                    if let Err(fatal) = &metrics.running_state {
                        return Err(RaftError::fatal(fatal));
                    }
                    if let Some(value) = ready(&metrics) {
                        return Ok(value);
                    }
                }
                rx.changed()
                    .await
                    .map_err(|_| RaftError::fatal("raft core stopped"))?;
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| RaftError::Timeout {
                operation,
                after: timeout,
            })?
    }

    /// Adds node `id`, reachable at `addr`, as a non-voting learner, and waits (bounded by
    /// `membership_timeout_ms`) until it has caught up with the log. Leader only.
    pub async fn add_learner(&self, id: NodeId, addr: impl Into<String>) -> Result<(), RaftError> {
        let after = self.config.membership_timeout();
        let node = BasicNode { addr: addr.into() };
        match tokio::time::timeout(after, self.raft.add_learner(id, node, true)).await {
            Err(_) => Err(RaftError::Timeout {
                operation: "add learner",
                after,
            }),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(client_write_error(e)),
        }
    }

    /// Makes `voters` the voting members (each must already be a member or learner); nodes
    /// that stop being voters are removed. Leader only; bounded by `membership_timeout_ms`.
    pub async fn change_membership(
        &self,
        voters: impl IntoIterator<Item = NodeId>,
    ) -> Result<(), RaftError> {
        let voters: BTreeSet<NodeId> = voters.into_iter().collect();
        let after = self.config.membership_timeout();
        match tokio::time::timeout(after, self.raft.change_membership(voters, false)).await {
            Err(_) => Err(RaftError::Timeout {
                operation: "membership change",
                after,
            }),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(client_write_error(e)),
        }
    }

    /// Builds a snapshot now (and lets the log be purged behind it), instead of waiting for the
    /// snapshot policy. Returns once the request is queued; watch [`RaftNode::metrics`].
    pub async fn trigger_snapshot(&self) -> Result<(), RaftError> {
        self.raft
            .trigger()
            .snapshot()
            .await
            .map_err(RaftError::fatal)
    }

    /// Stops openraft and the RPC server, and waits until the data directory's LMDB environment
    /// is closed, so it can be opened again (in this process or another).
    pub async fn shutdown(mut self) -> Result<(), RaftError> {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
        let stopped = self
            .raft
            .shutdown()
            .await
            .map_err(|e| RaftError::fatal(format!("raft core task failed: {e}")));
        if let Some(env) = self.env.take() {
            let closing = env.prepare_for_closing();
            let timeout = Duration::from_millis(ENV_CLOSE_TIMEOUT_MS);
            let closed = tokio::task::spawn_blocking(move || closing.wait_timeout(timeout))
                .await
                .unwrap_or(false);
            if !closed {
                return Err(RaftError::Timeout {
                    operation: "closing the raft storage",
                    after: timeout,
                });
            }
        }
        stopped
    }
}
