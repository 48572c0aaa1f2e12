//! Frames leaving a node (DESIGN §5 items 3–4): into this shard's owner buffer of a relay, to
//! another shard over the mesh when the frame's branch is owned there, or queued on the node
//! while the relay is full; and frames arriving from other shards for a relay or an emitter.
//!
//! Why nothing is lost: a frame a full relay refuses goes back to its node's blocked queue (or
//! the inbound queue, for a frame from another shard) in order, and the pump retries those
//! before anything else moves; a frame for a relay or emitter the running model lacks has its
//! rows negatively acknowledged, so their sources deliver them again.

use std::num::NonZeroUsize;

use nervix_shards::branch_key::{shard_of_key_bytes, BranchKey};
use nervix_shards::relay_buffer::ProducerId;

use super::{Graph, Instant, NodeRef, EMITTER_QUEUE_FRAMES, INBOUND_PRODUCER};
use crate::runtime::frame::Frame;
use crate::runtime::plan::RelayId;
use crate::runtime::shard::mesh::{route_via, Ctx, MeshMsg, MESH_OUTBOX_FRAMES, ROOT_SHARD};

impl Graph {
    /// Publishes into a relay, or queues the frame on its node when the relay is full.
    pub(super) fn publish(
        &mut self,
        from: NodeRef,
        relay: RelayId,
        frame: Frame,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        if !self.node(from).blocked.is_empty() {
            self.node_mut(from).blocked.push_back((relay, frame));
            return;
        }
        if let Err(full) = self.try_publish(from, relay, frame, at, cx) {
            self.node_mut(from).blocked.push_back((relay, full));
        }
    }

    /// The shard that owns `frame` in `relay`: its branch's shard, or the root shard for
    /// unbranched frames.
    pub(super) fn owner_shard(&self, relay: RelayId, frame: &Frame, shards: usize) -> usize {
        self.key_owner_shard(relay, &frame.key, shards)
    }

    /// The shard that owns branch `key`'s rows in `relay`.
    pub(super) fn key_owner_shard(&self, relay: RelayId, key: &BranchKey, shards: usize) -> usize {
        match (
            &self.plan.relays[relay].branch,
            key,
            NonZeroUsize::new(shards),
        ) {
            (Some(_), BranchKey::Key(bytes), Some(count)) => shard_of_key_bytes(bytes, count),
            _ => ROOT_SHARD,
        }
    }

    pub(super) fn try_publish(
        &mut self,
        from: NodeRef,
        relay: RelayId,
        frame: Frame,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) -> Result<(), Frame> {
        let owner = self.owner_shard(relay, &frame, cx.shards);
        debug_assert!(
            (frame.groups.iter().flat_map(|groups| groups.iter()))
                .all(|group| self.key_owner_shard(relay, &group.key, cx.shards) == owner),
            "a grouped frame is published cut by owner shard"
        );
        if owner != cx.shard {
            let (hop, forward_to) = route_via(cx.shard, owner);
            if cx.outbox.frames_for(hop) >= MESH_OUTBOX_FRAMES {
                return Err(frame);
            }
            cx.outbox.queues[hop].push_back(MeshMsg::RelayFrame {
                domain: self.plan.name.clone(),
                relay: self.plan.relays[relay].name.clone(),
                frame,
                forward_to,
            });
            self.node_mut(from).counters.frames_out += 1;
            return Ok(());
        }
        self.push_local(from.producer_id(), relay, frame, at, cx)?;
        self.node_mut(from).counters.frames_out += 1;
        Ok(())
    }

    /// Puts a frame into this shard's owner buffer of `relay`; hands it back when full.
    pub(super) fn push_local(
        &mut self,
        producer: ProducerId,
        relay: RelayId,
        frame: Frame,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) -> Result<(), Frame> {
        let consumers = self.relays[relay].consumers.len() as u64;
        let rows = frame.num_rows() as u64;
        if consumers == 0 {
            // Nobody reads this relay: its rows are resolved on arrival.
            self.materialize(relay, &frame);
            self.feed_taps(relay, &frame, at);
            self.relays[relay].published_rows += rows;
            for run in &frame.acks {
                cx.ack(run.root, run.rows as u64);
            }
            return Ok(());
        }
        // Each further consumer takes its own share of the rows' units once the frame is in.
        let shared_acks = (consumers > 1).then(|| frame.acks.clone());
        let tapped = (!self.relays[relay].taps.is_empty()).then(|| frame.clone());
        let materialized = self.plan.relays[relay].materialized.then(|| frame.clone());
        match self.relays[relay].buffer.try_push(producer, frame) {
            Ok(()) => {
                self.relays[relay].published_rows += rows;
                for run in shared_acks.iter().flatten() {
                    cx.transfer(run.root, run.rows as u64, run.rows as u64 * consumers);
                }
                if let Some(frame) = tapped {
                    self.feed_taps(relay, &frame, at);
                }
                if let Some(frame) = materialized {
                    self.materialize(relay, &frame);
                }
                Ok(())
            }
            Err(full) => Err(full.into_frame()),
        }
    }

    /// A frame another shard sent for `relay` (by name: it may come from before a model swap).
    pub fn receive_relay_frame(
        &mut self,
        relay: &str,
        frame: Frame,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let at = at.in_domain(&self.plan.pace);
        match self.plan.relay_id(relay) {
            Some(id) => {
                self.inbound.push_back((id, frame));
                self.retry_inbound(at, cx);
            }
            None => {
                tracing::warn!(
                    "domain '{}': a frame for relay '{relay}', which the running model lacks; \
                     its rows are negatively acknowledged",
                    self.plan.name
                );
                for run in &frame.acks {
                    cx.nack(run.root);
                }
            }
        }
    }

    /// A constructed frame of `emitter` from another shard, for its sink here.
    pub fn receive_emitter_frame(&mut self, emitter: &str, frame: Frame, cx: &mut Ctx<'_>) {
        match self.plan.emitter(emitter) {
            Some(id) => self.emitter_queues[id].ready.push_back(frame),
            None => {
                for run in &frame.acks {
                    cx.nack(run.root);
                }
            }
        }
    }

    /// Whether frames from other shards wait for room here (the mesh readers pause then).
    pub fn inbound_blocked(&self) -> bool {
        !self.inbound.is_empty()
            || self
                .emitter_queues
                .iter()
                .any(|q| q.ready.len() > 2 * EMITTER_QUEUE_FRAMES)
    }

    pub(super) fn retry_inbound(&mut self, at: Instant, cx: &mut Ctx<'_>) -> bool {
        let mut moved = false;
        while let Some((relay, frame)) = self.inbound.pop_front() {
            match self.push_local(INBOUND_PRODUCER, relay, frame, at, cx) {
                Ok(()) => moved = true,
                Err(frame) => {
                    self.inbound.push_front((relay, frame));
                    break;
                }
            }
        }
        moved
    }

    /// Away from the root shard, emitters construct here and deliver there.
    pub(super) fn ship_emitter_frames(&mut self, cx: &mut Ctx<'_>) -> bool {
        if cx.shard == ROOT_SHARD {
            return false;
        }
        let mut moved = false;
        for (index, queue) in self.emitter_queues.iter_mut().enumerate() {
            while let Some(frame) = queue.ready.pop_front() {
                moved = true;
                cx.outbox.queues[ROOT_SHARD].push_back(MeshMsg::EmitterFrame {
                    domain: self.plan.name.clone(),
                    emitter: self.plan.emitters[index].name.clone(),
                    frame,
                });
            }
        }
        moved
    }

    pub(super) fn feed_taps(&mut self, relay: RelayId, frame: &Frame, at: Instant) {
        if self.relays[relay].taps.is_empty() {
            return;
        }
        let plan = self.plan.clone();
        let sensitive = &plan.relays[relay].sensitive;
        for tap in &mut self.relays[relay].taps {
            crate::runtime::shard::subscription::feed(tap, &frame.batch, sensitive, at.snapshot_ns);
        }
    }
}
