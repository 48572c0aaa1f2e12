//! What shards say to each other over the mesh, and the rule that keeps acknowledgements
//! correct across shards (DESIGN §3, §5 item 7).
//!
//! Placement: client ingestors and unbranched relays live on shard 0 (where sessions are
//! accepted); a branched relay's frame lives on `shard_of(branch key)`; every sink delivers on
//! shard 0 (consumers attach there, files have one writer). So every acknowledgement root lives
//! on shard 0, and every root operation made elsewhere travels to shard 0 as an [`AckOp`].
//!
//! Why roots never resolve early: a node holding `n` units of a root may turn them into `m`
//! (a transfer) before its derived rows move on. A remote shard's transfer reaches shard 0 on
//! the same FIFO channel as — and ahead of — anything it sends to shard 0 afterwards, and a
//! frame between two non-zero shards is routed through shard 0 ([`route_via`]), so shard 0 has
//! applied every transfer that happened before any operation that could follow from it.
//! Units therefore never reach zero while a derived row is still held somewhere.

use std::collections::VecDeque;

use nervix_shards::ack::{AckHandle, AckSlab};

use super::graph::PayloadToken;
use super::watch::{WatchOutcome, Watches};
use crate::runtime::frame::Frame;

/// Frames one shard may have queued for one other shard before the nodes feeding them wait.
pub const MESH_OUTBOX_FRAMES: usize = 16;
/// Capacity of each directed mesh channel, in messages.
pub const MESH_CHANNEL_MESSAGES: usize = 64;
/// The shard that owns every acknowledgement root and every sink.
pub const ROOT_SHARD: usize = 0;

/// One root operation made away from shard 0.
#[derive(Debug, Clone, Copy)]
pub enum AckOp {
    Transfer {
        root: AckHandle,
        from: u64,
        into: u64,
    },
    Ack {
        root: AckHandle,
        rows: u64,
    },
    Nack {
        root: AckHandle,
    },
    /// Shard `shard` waits for `root`'s outcome under `entry` (`watch.rs`).
    Watch {
        root: AckHandle,
        shard: usize,
        entry: u64,
    },
}

/// A message between shards.
pub enum MeshMsg {
    /// A frame for `relay` of `domain` (names, so a frame crossing a model swap can be told
    /// apart); `forward_to` when shard 0 relays it on to another shard.
    RelayFrame {
        domain: String,
        relay: String,
        frame: Frame,
        forward_to: Option<usize>,
    },
    /// A constructed emitter frame for its sink on shard 0.
    EmitterFrame {
        domain: String,
        emitter: String,
        frame: Frame,
    },
    AckOps(Vec<AckOp>),
    /// Shard 0's answers to this shard's watches (`watch.rs`).
    WatchOutcomes(Vec<WatchOutcome>),
}

/// The next hop of a frame from `from` to `to`: direct to or from shard 0, otherwise through
/// shard 0 (see the module docs).
pub fn route_via(from: usize, to: usize) -> (usize, Option<usize>) {
    if from == ROOT_SHARD || to == ROOT_SHARD {
        (to, None)
    } else {
        (ROOT_SHARD, Some(to))
    }
}

/// Messages waiting for the mesh, per destination, in the order they were made.
pub struct Outbox {
    pub queues: Vec<VecDeque<MeshMsg>>,
}

impl Outbox {
    pub fn new(shards: usize) -> Outbox {
        Outbox {
            queues: (0..shards).map(|_| VecDeque::new()).collect(),
        }
    }

    /// Frames queued for `to`.
    pub fn frames_for(&self, to: usize) -> usize {
        self.queues[to].len()
    }

    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    fn push_op(&mut self, op: AckOp) {
        let queue = &mut self.queues[ROOT_SHARD];
        // Consecutive operations share one message.
        if let Some(MeshMsg::AckOps(ops)) = queue.back_mut() {
            ops.push(op);
        } else {
            queue.push_back(MeshMsg::AckOps(vec![op]));
        }
    }
}

/// The acknowledgement side of one step: the slab on shard 0, the outbox elsewhere.
pub struct Ctx<'a> {
    pub shard: usize,
    pub shards: usize,
    pub slab: &'a mut AckSlab<PayloadToken>,
    pub outbox: &'a mut Outbox,
    /// Roots that made acknowledgement progress this step (ACK TIMEOUT counts from the last).
    pub progressed: &'a mut Vec<AckHandle>,
    pub watches: &'a mut Watches,
}

impl Ctx<'_> {
    pub fn transfer(&mut self, root: AckHandle, from: u64, into: u64) {
        if self.shard == ROOT_SHARD {
            let _ = self.slab.transfer(root, from, into);
            self.progressed.push(root);
        } else {
            self.outbox.push_op(AckOp::Transfer { root, from, into });
        }
    }

    pub fn ack(&mut self, root: AckHandle, rows: u64) {
        if self.shard == ROOT_SHARD {
            let _ = self.slab.ack(root, rows);
            self.progressed.push(root);
        } else {
            self.outbox.push_op(AckOp::Ack { root, rows });
        }
    }

    pub fn nack(&mut self, root: AckHandle) {
        if self.shard == ROOT_SHARD {
            let _ = self.slab.nack(root);
        } else {
            self.outbox.push_op(AckOp::Nack { root });
        }
    }

    /// Asks for `root`'s outcome; returns the entry its answer will carry. The caller holds
    /// units of `root` (see `watch.rs` for why that makes the answer right).
    pub fn watch(&mut self, root: AckHandle) -> u64 {
        let entry = self.watches.next_entry();
        if self.shard == ROOT_SHARD {
            self.watches
                .register(self.slab, self.outbox, ROOT_SHARD, root, entry);
        } else {
            self.outbox.push_op(AckOp::Watch {
                root,
                shard: self.shard,
                entry,
            });
        }
        entry
    }
}

/// Applies operations that arrived from another shard; the roots they touched are progress,
/// and watches are registered (their immediate answers go to `outbox`).
pub fn apply_ops(
    slab: &mut AckSlab<PayloadToken>,
    ops: &[AckOp],
    progressed: &mut Vec<AckHandle>,
    watches: &mut Watches,
    outbox: &mut Outbox,
) -> usize {
    let mut refused = 0;
    for op in ops {
        let result = match *op {
            AckOp::Transfer { root, from, into } => {
                progressed.push(root);
                slab.transfer(root, from, into)
            }
            AckOp::Ack { root, rows } => {
                progressed.push(root);
                slab.ack(root, rows)
            }
            AckOp::Nack { root } => slab.nack(root),
            AckOp::Watch { root, shard, entry } => {
                watches.register(slab, outbox, shard, root, entry);
                continue;
            }
        };
        if result.is_err() {
            refused += 1;
        }
    }
    refused
}
