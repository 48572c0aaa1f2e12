//! The Raft transport's wire format and client half: openraft's `RaftNetworkFactory` and
//! `RaftNetwork` over TCP.
//!
//! Wire format: each message is one frame, a u32 big-endian length followed by that many bytes of
//! postcard, bounded by [`MAX_RAFT_FRAME_BYTES`] on both sides. A request frame names the node it
//! is meant for (so a misdirected connection is refused, not obeyed) and carries an
//! AppendEntries, Vote or InstallSnapshot (one chunk; openraft splits snapshots into chunks of
//! `snapshot_chunk_bytes`). Each response frame answers the request before it on the same
//! connection.
//!
//! Why this is correct: every RPC runs under the deadline openraft gives it (its `RPCOption`),
//! including connecting. A connection is taken out of the client before use and put back only
//! after a whole request/response round trip, so an RPC cancelled or failed midway (openraft drops
//! futures on timeout) can never leave a half-read response for the next RPC: the connection is
//! simply dropped. Raft RPCs are idempotent, so one retry on a fresh connection after a reused
//! one failed (the peer may have restarted) is safe. An AppendEntries of several entries larger
//! than [`MAX_APPEND_ENTRIES_BYTES`] is not sent but reported as `PayloadTooLarge` with a smaller
//! entry count, which openraft retries with, so every RPC fits its heartbeat-long deadline.

use std::io;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError as OpenRaftError,
    RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes, SnapshotMeta, Vote};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::config::{MAX_APPEND_ENTRIES_BYTES, MAX_RAFT_FRAME_BYTES, RAFT_CONNECT_TIMEOUT_MS};
use crate::{NodeId, TypeConfig};

/// One Raft RPC.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum RpcRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(SnapshotChunk),
}

/// openraft's `InstallSnapshotRequest` with its data encoded as one byte string (openraft's own
/// serde derive would encode the chunk byte by byte).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SnapshotChunk {
    vote: Vote<NodeId>,
    meta: SnapshotMeta<NodeId, BasicNode>,
    offset: u64,
    #[serde(with = "serde_bytes")]
    data: Vec<u8>,
    done: bool,
}

impl From<InstallSnapshotRequest<TypeConfig>> for SnapshotChunk {
    fn from(r: InstallSnapshotRequest<TypeConfig>) -> Self {
        SnapshotChunk {
            vote: r.vote,
            meta: r.meta,
            offset: r.offset,
            data: r.data,
            done: r.done,
        }
    }
}

impl From<SnapshotChunk> for InstallSnapshotRequest<TypeConfig> {
    fn from(c: SnapshotChunk) -> Self {
        InstallSnapshotRequest {
            vote: c.vote,
            meta: c.meta,
            offset: c.offset,
            data: c.data,
            done: c.done,
        }
    }
}

/// What travels in a request frame.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RequestFrame {
    /// The node the sender believes it is talking to.
    pub(crate) target: NodeId,
    pub(crate) request: RpcRequest,
}

/// What travels in a response frame.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ResponseFrame {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, OpenRaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, OpenRaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, OpenRaftError<NodeId, InstallSnapshotError>>,
    ),
    /// The request named another node than the one listening here.
    WrongTarget {
        expected: NodeId,
        actual: NodeId,
    },
}

/// Writes one frame.
pub(crate) async fn write_frame(stream: &mut TcpStream, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|len| *len <= MAX_RAFT_FRAME_BYTES)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "raft frame of {} bytes exceeds {MAX_RAFT_FRAME_BYTES} bytes",
                    payload.len()
                ),
            )
        })?;
    let mut buf = Vec::with_capacity(4 + payload.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(payload);
    stream.write_all(&buf).await?;
    stream.flush().await
}

/// Reads one frame's length prefix; `None` on a clean end of stream before it.
pub(crate) async fn read_frame_len(stream: &mut TcpStream) -> io::Result<Option<u32>> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len);
    if len > MAX_RAFT_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("raft frame of {len} bytes exceeds {MAX_RAFT_FRAME_BYTES} bytes"),
        ));
    }
    Ok(Some(len))
}

/// Reads a frame body of `len` bytes (already checked against the bound).
pub(crate) async fn read_frame_body(stream: &mut TcpStream, len: u32) -> io::Result<Vec<u8>> {
    let mut body = vec![0u8; len as usize];
    stream.read_exact(&mut body).await?;
    Ok(body)
}

pub(crate) fn encode_frame<T: Serialize>(value: &T) -> io::Result<Vec<u8>> {
    postcard::to_allocvec(value).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

pub(crate) fn decode_frame<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> io::Result<T> {
    postcard::from_bytes(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Creates one [`PeerClient`] per replication stream or vote round.
pub(crate) struct NetworkFactory {
    pub(crate) self_id: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            self_id: self.self_id,
            target,
            node: node.clone(),
            conn: None,
        }
    }
}

/// A client of one peer, holding at most one idle connection to it.
pub(crate) struct PeerClient {
    self_id: NodeId,
    target: NodeId,
    node: BasicNode,
    conn: Option<TcpStream>,
}

/// Why one RPC attempt failed, before mapping to openraft's error for the RPC at hand.
enum CallError {
    Connect(io::Error),
    Io(io::Error),
    TimedOut,
    TooLarge(usize),
}

impl PeerClient {
    async fn connect(&self, deadline: Instant) -> Result<TcpStream, CallError> {
        let connect_deadline =
            deadline.min(Instant::now() + Duration::from_millis(RAFT_CONNECT_TIMEOUT_MS));
        match tokio::time::timeout_at(connect_deadline, TcpStream::connect(&self.node.addr)).await {
            Ok(Ok(stream)) => {
                stream.set_nodelay(true).map_err(CallError::Connect)?;
                Ok(stream)
            }
            Ok(Err(e)) => Err(CallError::Connect(e)),
            Err(_) => Err(CallError::Connect(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting to {} timed out", self.node.addr),
            ))),
        }
    }

    async fn round_trip(stream: &mut TcpStream, payload: &[u8]) -> io::Result<ResponseFrame> {
        write_frame(stream, payload).await?;
        let len = read_frame_len(stream).await?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the connection before answering",
            )
        })?;
        let body = read_frame_body(stream, len).await?;
        decode_frame(&body)
    }

    /// Sends `request` and waits for its response, all before `ttl` elapses. A request whose
    /// encoding exceeds `max_bytes` is not sent.
    async fn call(
        &mut self,
        request: RpcRequest,
        ttl: Duration,
        max_bytes: usize,
    ) -> Result<ResponseFrame, CallError> {
        let payload = encode_frame(&RequestFrame {
            target: self.target,
            request,
        })
        .map_err(CallError::Io)?;
        if payload.len() > max_bytes.min(MAX_RAFT_FRAME_BYTES as usize) {
            return Err(CallError::TooLarge(payload.len()));
        }
        let deadline = Instant::now() + ttl;
        let attempt = async {
            // A pooled connection may have died with its peer; retry once on a fresh one.
            if let Some(mut stream) = self.conn.take() {
                if let Ok(response) = Self::round_trip(&mut stream, &payload).await {
                    self.conn = Some(stream);
                    return Ok(response);
                }
            }
            let mut stream = self.connect(deadline).await?;
            let response = Self::round_trip(&mut stream, &payload)
                .await
                .map_err(CallError::Io)?;
            self.conn = Some(stream);
            Ok(response)
        };
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(result) => result,
            Err(_) => Err(CallError::TimedOut),
        }
    }

    fn rpc_error<E: std::error::Error>(
        &self,
        error: CallError,
        action: RPCTypes,
        ttl: Duration,
        entries: usize,
    ) -> RPCError<NodeId, BasicNode, E> {
        match error {
            CallError::Connect(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Io(e) => RPCError::Network(NetworkError::new(&e)),
            CallError::TimedOut => RPCError::Timeout(Timeout {
                action,
                id: self.self_id,
                target: self.target,
                timeout: ttl,
            }),
            CallError::TooLarge(len) if action == RPCTypes::AppendEntries && entries > 1 => {
                // Ask openraft to resend with proportionally fewer entries (at least one).
                let fitting = (entries as u64 * MAX_APPEND_ENTRIES_BYTES as u64 / len as u64)
                    .clamp(1, entries as u64 - 1);
                RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(fitting))
            }
            CallError::TooLarge(len) => RPCError::Network(NetworkError::new(&io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("raft {action:?} of {len} bytes exceeds {MAX_RAFT_FRAME_BYTES} bytes"),
            ))),
        }
    }

    fn unexpected<E: std::error::Error>(
        &self,
        response: ResponseFrame,
    ) -> RPCError<NodeId, BasicNode, E> {
        let message = match response {
            ResponseFrame::WrongTarget { expected, actual } => {
                format!("{} is node {actual}, not node {expected}", self.node.addr)
            }
            other => format!("mismatched response from {}: {other:?}", self.node.addr),
        };
        RPCError::Unreachable(Unreachable::new(&io::Error::other(message)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, OpenRaftError<NodeId>>>
    {
        let ttl = option.hard_ttl();
        let entries = rpc.entries.len();
        let max_bytes = if entries > 1 {
            MAX_APPEND_ENTRIES_BYTES
        } else {
            MAX_RAFT_FRAME_BYTES as usize
        };
        match self
            .call(RpcRequest::AppendEntries(rpc), ttl, max_bytes)
            .await
        {
            Ok(ResponseFrame::AppendEntries(Ok(response))) => Ok(response),
            Ok(ResponseFrame::AppendEntries(Err(e))) => Err(RPCError::RemoteError(
                RemoteError::new_with_node(self.target, self.node.clone(), e),
            )),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.rpc_error(e, RPCTypes::AppendEntries, ttl, entries)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, OpenRaftError<NodeId, InstallSnapshotError>>,
    > {
        let ttl = option.hard_ttl();
        let max_bytes = MAX_RAFT_FRAME_BYTES as usize;
        match self
            .call(RpcRequest::InstallSnapshot(rpc.into()), ttl, max_bytes)
            .await
        {
            Ok(ResponseFrame::InstallSnapshot(Ok(response))) => Ok(response),
            Ok(ResponseFrame::InstallSnapshot(Err(e))) => Err(RPCError::RemoteError(
                RemoteError::new_with_node(self.target, self.node.clone(), e),
            )),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.rpc_error(e, RPCTypes::InstallSnapshot, ttl, 0)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, OpenRaftError<NodeId>>> {
        let ttl = option.hard_ttl();
        let max_bytes = MAX_RAFT_FRAME_BYTES as usize;
        match self.call(RpcRequest::Vote(rpc), ttl, max_bytes).await {
            Ok(ResponseFrame::Vote(Ok(response))) => Ok(response),
            Ok(ResponseFrame::Vote(Err(e))) => Err(RPCError::RemoteError(
                RemoteError::new_with_node(self.target, self.node.clone(), e),
            )),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.rpc_error(e, RPCTypes::Vote, ttl, 0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Membership};

    use super::*;
    use crate::Command;

    #[test]
    fn frames_round_trip_through_postcard() {
        let log_id = LogId::new(CommittedLeaderId::new(2, 1), 7);
        let membership = Membership::new(
            vec![[1u64, 2, 3].into_iter().collect()],
            BTreeMap::from([(1u64, BasicNode::new("127.0.0.1:1"))]),
        );
        let request = RequestFrame {
            target: 2,
            request: RpcRequest::AppendEntries(AppendEntriesRequest {
                vote: Vote::new_committed(2, 1),
                prev_log_id: Some(log_id),
                leader_commit: Some(log_id),
                entries: vec![
                    Entry {
                        log_id,
                        payload: EntryPayload::Normal(Command(vec![1, 2, 3])),
                    },
                    Entry {
                        log_id,
                        payload: EntryPayload::Membership(membership),
                    },
                    Entry {
                        log_id,
                        payload: EntryPayload::Blank,
                    },
                ],
            }),
        };
        let bytes = encode_frame(&request).unwrap();
        let back: RequestFrame = decode_frame(&bytes).unwrap();
        assert_eq!(format!("{back:?}"), format!("{request:?}"));

        let fatal: ResponseFrame =
            ResponseFrame::Vote(Err(OpenRaftError::Fatal(openraft::error::Fatal::Stopped)));
        let bytes = encode_frame(&fatal).unwrap();
        let back: ResponseFrame = decode_frame(&bytes).unwrap();
        assert_eq!(format!("{back:?}"), format!("{fatal:?}"));
    }
}
