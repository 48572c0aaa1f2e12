//! Frames a stateless processor takes together: when a relay's only consumer is a junction or
//! reingestor whose work never reads the frame's branch, the frames queued at the relay's
//! front are handed to it as one frame.
//!
//! Why: a relay fed by many branches carries many small frames — a window closing hundreds of
//! branches' windows sends one record per branch (Nexmark q5 regroups them by window) — and a
//! node pass per frame costs far more than its rows.
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
//! event times. One difference is visible: a logged row error numbers the row within the
//! merged frame.
//!
//! Bounds: at most [`MAX_MERGED_FRAMES`] frames and, past the first, [`MAX_MERGED_ROWS`] rows
//! per merged frame; each frame taken counts against the pump's delivery budget.

use arrow_array::ArrayRef;
use arrow_select::concat::{concat, concat_batches};

use super::{Graph, NodeRef};
use crate::runtime::frame::{append_runs, Frame};
use crate::runtime::plan::{BranchOut, ErrorPlan, NodeWork, RelayId};

/// Frames merged into one delivery at most.
pub const MAX_MERGED_FRAMES: usize = 1_024;
/// Rows a merged delivery stops growing at (the frame that crosses it is the last).
pub const MAX_MERGED_ROWS: usize = 8_192;

/// Whether `next` can join a delivery that began with `first` (module doc).
fn joins(first: &Frame, next: &Frame) -> bool {
    first.acks.is_empty() == next.acks.is_empty()
        && first.times.is_some() == next.times.is_some()
        && first.batch.schema_ref() == next.batch.schema_ref()
}

/// One frame holding `frames`' rows in order, or None when their columns do not concatenate
/// (frames of one relay always do).
fn merge(frames: &[Frame]) -> Option<Frame> {
    let first = frames.first()?;
    let batch = concat_batches(first.batch.schema_ref(), frames.iter().map(|f| &f.batch)).ok()?;
    let mut acks = Vec::with_capacity(frames.iter().map(|f| f.acks.len()).sum());
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
    Some(Frame {
        batch,
        key: first.key.clone(),
        acks,
        times,
    })
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

    /// `first`, popped from `relay`, with the frames behind it that can join it (bounds in
    /// the module doc): one merged frame, or the frames as they were when they cannot merge.
    pub(super) fn take_following(&mut self, relay: RelayId, first: Frame) -> Vec<Frame> {
        let mut frames = vec![first];
        let mut rows = frames[0].num_rows();
        while frames.len() < MAX_MERGED_FRAMES && rows < MAX_MERGED_ROWS && self.deliver_budget > 0
        {
            let buffer = &mut self.relays[relay].buffer;
            if !buffer.front().is_some_and(|next| joins(&frames[0], next)) {
                break;
            }
            let Some(popped) = buffer.pop() else {
                break;
            };
            self.deliver_budget -= 1;
            rows += popped.frame.num_rows();
            frames.push(popped.frame);
        }
        if frames.len() == 1 {
            return frames;
        }
        match merge(&frames) {
            Some(merged) => vec![merged],
            None => frames,
        }
    }
}
