//! Frames a stateless processor takes together: when a relay's only consumer is a junction or
//! reingestor whose work never reads the frame's branch, frames for it travel and are handed
//! to it as one frame — merged where they are published ([`Graph::publish_all`]: consecutive
//! frames one node pass sends into the relay) and again where they are delivered (the frames
//! queued at the relay's front).
//!
//! Why: a relay fed by many branches carries many small frames — a window closing hundreds of
//! branches' windows sends one record per branch (Nexmark q5 regroups them by window) — and a
//! relay slot and a node pass per frame cost far more than its rows.
//!
//! Why it is the same as taking them one by one: such a node's work is row by row. Its
//! filters, construction, WHERE and branch construction read the row and the execution
//! snapshot (one for the whole pump), never the incoming branch: it binds no materialized
//! state, reads no `branch.` field, keeps no incoming branch in a route and sends no error
//! record (those keep the branch that failed); COLLECT FOR and node work (deduplication,
//! ordering, windows, correlation) are per branch, so nodes with them take frames one by one.
//! A route's output keeps input order within each outgoing branch, and rows of one pump
//! share their route buffers' opening instant, so every outgoing branch receives the same rows
//! in the same order. Acknowledgement runs are concatenated in row order, so each row keeps
//! its payload; frames are merged only while they agree on carrying acknowledgements and
//! event times, and on publish only while they belong to one shard and the relay keeps no
//! materialized state (that is per branch). One difference is visible: a logged row error
//! numbers the row within the merged frame.
//!
//! Grouped frames (`Frame::groups`) one pass publishes into the same relay are merged on
//! publish too, keeping their groups in order, and then cut into one grouped frame per shard
//! that owns some of their groups: one flush sends each shard's window one grouped frame
//! however many routes fanned the batch out (Nexmark q5's five), so the window admits every
//! row of the flush before its watermark moves, and no route's rows arrive after another
//! route's later rows closed a window (`graph/grouped_window.rs`).
//!
//! Bounds: at most [`MAX_MERGED_FRAMES`] frames and, past the first, [`MAX_MERGED_ROWS`] rows
//! per merged frame ([`MAX_GROUPED_MERGE_ROWS`] for grouped frames); on delivery each frame
//! taken counts against the pump's frame budget (the merge itself is one delivery, so the time
//! budget is checked once for it).

use arrow_array::ArrayRef;
use arrow_select::concat::{concat, concat_batches};

use nervix_shards::branch_key::BranchKey;

use super::{Ctx, Graph, Instant, NodeRef};
use crate::runtime::frame::{append_runs, AckRuns, Frame};
use crate::runtime::plan::{BranchOut, ErrorPlan, NodeWork, RelayId};

/// Frames merged into one delivery at most.
pub const MAX_MERGED_FRAMES: usize = 1_024;
/// Rows a merged delivery stops growing at (the frame that crosses it is the last).
pub const MAX_MERGED_ROWS: usize = 8_192;
/// Rows a merge of grouped frames stops growing at: one input batch's rows (at most 65,536)
/// fanned out over a few routes.
pub const MAX_GROUPED_MERGE_ROWS: usize = 262_144;

/// Whether `next` can join a delivery that began with `first` (module doc).
fn joins(first: &Frame, next: &Frame) -> bool {
    first.acks.is_empty() == next.acks.is_empty()
        && first.groups.is_some() == next.groups.is_some()
        && first.times.is_some() == next.times.is_some()
        && first.batch.schema_ref() == next.batch.schema_ref()
}

/// One frame holding `frames`' rows in order, or None when their columns do not concatenate
/// (frames of one relay always do).
fn merge(frames: &[Frame]) -> Option<Frame> {
    let first = frames.first()?;
    let batch = concat_batches(first.batch.schema_ref(), frames.iter().map(|f| &f.batch)).ok()?;
    let mut acks = AckRuns::with_capacity(frames.iter().map(|f| f.acks.len()).sum());
    for frame in frames {
        append_runs(&mut acks, &frame.acks);
    }
    let times = match first.times {
        Some(_) => {
            let parts: Vec<&dyn arrow_array::Array> = frames
                .iter()
                .filter_map(|f| f.times.as_ref().map(|t| t.as_ref()))
                .collect();
            Some(concat(&parts).ok()? as ArrayRef)
        }
        None => None,
    };
    // Grouped frames stay grouped: their groups, in order, cover the merged rows.
    let groups = frames
        .iter()
        .map(|f| f.groups.as_deref())
        .collect::<Option<Vec<_>>>()
        .map(|groups| groups.concat().into());
    Some(Frame {
        groups,
        batch,
        key: first.key.clone(),
        acks,
        times,
    })
}

/// `frames` as one merged frame, or as they were when there is one or they do not
/// concatenate.
fn merged_or_apart(frames: Vec<Frame>) -> Vec<Frame> {
    if frames.len() == 1 {
        return frames;
    }
    match merge(&frames) {
        Some(merged) => vec![merged],
        None => frames,
    }
}

impl Graph {
    /// Whether `consumer` may take consecutive frames of a relay as one (module doc).
    pub(super) fn takes_merged(&self, consumer: NodeRef) -> bool {
        let NodeRef::Processor(index) = consumer else {
            return false;
        };
        let processor = &self.plan.processors[index];
        matches!(processor.work, NodeWork::Pass)
            && processor.collect.is_none()
            && processor.state.is_empty()
            && processor.branch_scope.is_none()
            && processor.routes.iter().all(|route| {
                matches!(
                    route.branch,
                    BranchOut::Construct { .. } | BranchOut::Unbranched
                ) && !matches!(route.on_error, ErrorPlan::SendTo(_))
            })
    }

    /// Whether frames published into `relay` may be merged on the way in (module doc).
    pub(super) fn merges_on_publish(&self, relay: RelayId) -> bool {
        match self.relays[relay].consumers[..] {
            [only] => self.takes_merged(only) && !self.plan.relays[relay].materialized,
            _ => false,
        }
    }

    /// Publishes `frames` from one pass of `from`, in order; consecutive frames into a relay
    /// that merges on publish go as one frame while they join and belong to one shard.
    pub(super) fn publish_all(
        &mut self,
        from: NodeRef,
        frames: Vec<(RelayId, Frame)>,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let mut merging: Vec<Frame> = Vec::new();
        let mut merging_into: Option<(RelayId, usize)> = None;
        let mut merging_rows = 0usize;
        for (relay, frame) in frames {
            // Grouped frames merge whatever shards own their groups; the merge is cut by
            // owner when it is published.
            let owner = match frame.groups {
                Some(_) => usize::MAX,
                None => self.owner_shard(relay, &frame, cx.shards),
            };
            let max_rows = match frame.groups {
                Some(_) => MAX_GROUPED_MERGE_ROWS,
                None => MAX_MERGED_ROWS,
            };
            let joins_pending = merging_into == Some((relay, owner))
                && merging.len() < MAX_MERGED_FRAMES
                && merging_rows < max_rows
                && joins(&merging[0], &frame);
            if !joins_pending {
                if let Some((into, _)) = merging_into.take() {
                    self.publish_merged(from, into, std::mem::take(&mut merging), at, cx);
                }
                if frame.groups.is_none() && !self.merges_on_publish(relay) {
                    self.publish(from, relay, frame, at, cx);
                    continue;
                }
                merging_into = Some((relay, owner));
                merging_rows = 0;
            }
            merging_rows += frame.num_rows();
            merging.push(frame);
        }
        if let Some((into, _)) = merging_into {
            self.publish_merged(from, into, merging, at, cx);
        }
    }

    /// Publishes `frames` as one merged frame, or one by one when they do not concatenate. A
    /// grouped frame goes as one frame per shard that owns some of its groups.
    fn publish_merged(
        &mut self,
        from: NodeRef,
        relay: RelayId,
        frames: Vec<Frame>,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        for frame in merged_or_apart(frames) {
            if frame.groups.is_none() || cx.shards == 1 {
                self.publish(from, relay, frame, at, cx);
                continue;
            }
            let owner_of = |key: &BranchKey| self.key_owner_shard(relay, key, cx.shards);
            let parts = frame
                .part_groups(owner_of)
                .unwrap_or_else(|| frame.ungroup());
            for part in parts {
                self.publish(from, relay, part, at, cx);
            }
        }
    }

    /// `first`, popped from `relay`, with the frames behind it that can join it (bounds in
    /// the module doc): one merged frame, or the frames as they were when they cannot merge.
    pub(super) fn take_following(&mut self, relay: RelayId, first: Frame) -> Vec<Frame> {
        let mut frames = vec![first];
        let mut rows = frames[0].num_rows();
        while frames.len() < MAX_MERGED_FRAMES
            && rows < MAX_MERGED_ROWS
            && self.deliver_budget.frames > 0
        {
            let buffer = &mut self.relays[relay].buffer;
            if !buffer.front().is_some_and(|next| joins(&frames[0], next)) {
                break;
            }
            let Some(popped) = buffer.pop() else {
                break;
            };
            self.deliver_budget.take_frame();
            rows += popped.frame.num_rows();
            frames.push(popped.frame);
        }
        merged_or_apart(frames)
    }
}
