//! The Raft transport's server half: accepts peers' connections on the node's `listen_addr` and
//! hands each request frame to the local openraft instance.
//!
//! Why this is correct and bounded: at most [`MAX_RAFT_CONNECTIONS`] connections are served at
//! once (more are closed on accept); a frame longer than [`MAX_RAFT_FRAME_BYTES`] closes its
//! connection before any of it is buffered; once a frame's length arrived its body must arrive
//! within [`RAFT_FRAME_READ_TIMEOUT_MS`]; requests on one connection are answered in order, one
//! at a time. A request addressed to another node id is answered `WrongTarget` and not executed,
//! so a peer with a stale address book cannot drive this node. Stopping the server (a watch
//! signal) ends the accept loop and every connection task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use openraft::Raft;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

use crate::config::{MAX_RAFT_CONNECTIONS, MAX_RAFT_FRAME_BYTES, RAFT_FRAME_READ_TIMEOUT_MS};
use crate::network::{
    decode_frame, encode_frame, read_frame_body, read_frame_len, write_frame, RequestFrame,
    ResponseFrame, RpcRequest,
};
use crate::{NodeId, TypeConfig};

/// A running RPC server; [`RpcServer::stop`] ends it.
pub(crate) struct RpcServer {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    local_addr: SocketAddr,
}

impl RpcServer {
    /// Starts serving `listener` for `raft` (node `node_id`).
    pub(crate) fn start(listener: TcpListener, node_id: NodeId, raft: Raft<TypeConfig>) -> Self {
        let local_addr = listener
            .local_addr()
            .expect("a bound TCP listener has a local address");
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, node_id, raft, stop_rx));
        RpcServer {
            stop,
            task,
            local_addr,
        }
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, closes every connection, and waits for the accept loop to end.
    pub(crate) async fn stop(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    node_id: NodeId,
    raft: Raft<TypeConfig>,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(MAX_RAFT_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                // Typically EMFILE or a connection reset before accept: back off briefly.
                tracing::warn!(error = %e, "raft RPC accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(%peer, limit = MAX_RAFT_CONNECTIONS, "raft RPC connection limit reached; closing");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let raft = raft.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.changed() => {}
                result = serve_connection(stream, node_id, raft) => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "raft RPC connection closed");
                    }
                }
            }
            drop(permit);
        });
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    node_id: NodeId,
    raft: Raft<TypeConfig>,
) -> std::io::Result<()> {
    let body_timeout = Duration::from_millis(RAFT_FRAME_READ_TIMEOUT_MS);
    loop {
        let Some(len) = read_frame_len(&mut stream).await? else {
            return Ok(());
        };
        debug_assert!(len <= MAX_RAFT_FRAME_BYTES);
        let body = tokio::time::timeout(body_timeout, read_frame_body(&mut stream, len))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "raft frame body timed out")
            })??;
        let frame: RequestFrame = decode_frame(&body)?;
        let response = if frame.target != node_id {
            ResponseFrame::WrongTarget {
                expected: frame.target,
                actual: node_id,
            }
        } else {
            match frame.request {
                RpcRequest::AppendEntries(rpc) => {
                    ResponseFrame::AppendEntries(raft.append_entries(rpc).await)
                }
                RpcRequest::Vote(rpc) => ResponseFrame::Vote(raft.vote(rpc).await),
                RpcRequest::InstallSnapshot(rpc) => {
                    ResponseFrame::InstallSnapshot(raft.install_snapshot(rpc.into()).await)
                }
            }
        };
        write_frame(&mut stream, &encode_frame(&response)?).await?;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use openraft::raft::VoteRequest;
    use openraft::Vote;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::state::{StateMachine, StateReadTxn, StateTxn};
    use crate::{RaftConfig, RaftNode};

    struct Nothing;

    impl StateMachine for Nothing {
        fn apply(&mut self, _: &mut StateTxn<'_>, _: &[u8]) -> Vec<u8> {
            Vec::new()
        }

        fn load(&mut self, _: &StateReadTxn<'_>) -> Result<(), String> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn misdirected_and_oversized_frames_are_refused() {
        let run = async {
            let dir = tempfile::tempdir().unwrap();
            let mut config = RaftConfig::new(dir.path(), 1, "127.0.0.1:0".parse().unwrap());
            config.env_map_size_bytes = 16 * 1024 * 1024;
            let node = RaftNode::open(config, Nothing).await.unwrap();

            let mut stream = TcpStream::connect(node.listen_addr()).await.unwrap();
            let request = RequestFrame {
                target: 99,
                request: RpcRequest::Vote(VoteRequest::new(Vote::new(9, 99), None)),
            };
            write_frame(&mut stream, &encode_frame(&request).unwrap())
                .await
                .unwrap();
            let len = read_frame_len(&mut stream).await.unwrap().unwrap();
            let body = read_frame_body(&mut stream, len).await.unwrap();
            match decode_frame::<ResponseFrame>(&body).unwrap() {
                ResponseFrame::WrongTarget {
                    expected: 99,
                    actual: 1,
                } => {}
                other => panic!("expected WrongTarget, got {other:?}"),
            }
            assert!(node.is_leader(), "the misdirected vote was not obeyed");

            stream
                .write_all(&(MAX_RAFT_FRAME_BYTES + 1).to_be_bytes())
                .await
                .unwrap();
            let mut byte = [0u8; 1];
            let read = stream.read(&mut byte).await;
            assert!(
                matches!(read, Ok(0) | Err(_)),
                "an oversized frame closes the connection"
            );
            node.shutdown().await.unwrap();
        };
        tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .expect("test exceeded its time limit");
    }
}
