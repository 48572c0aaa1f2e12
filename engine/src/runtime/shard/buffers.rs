//! Route buffers: the rows one route of one node built for one concrete branch, waiting for
//! their FLUSH (DESIGN §5 item 3). The decision of *when* is `nervix_shards::flush`'s
//! [`RouteFlusher`]; this module keeps the Arrow parts and acknowledgement runs and turns a
//! flush into one [`Frame`].

use std::collections::HashMap;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use nervix_shards::branch_key::BranchKey;
use nervix_shards::flush::{Action, Chunk, FlushPolicy, Now, RouteFlusher};

use crate::runtime::frame::{append_runs, AckRun, Frame};

/// Logical Arrow bytes of a batch as `MAX BATCH SIZE` counts them: values, offsets and
/// validity, not allocation slack.
pub fn logical_bytes(batch: &RecordBatch) -> u64 {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0) as u64)
        .sum()
}

struct Buffer {
    flusher: RouteFlusher,
    parts: Vec<RecordBatch>,
    runs: Vec<AckRun>,
    /// The parts' event times; a frame has times only when every part had them.
    times: Vec<ArrayRef>,
    untimed: bool,
    /// When the buffer was opened (its first row): the graph's opening counter then.
    opened: u64,
}

/// Every concrete branch's buffer of one route.
pub struct RouteBuffers {
    policy: FlushPolicy,
    schema: SchemaRef,
    buffers: HashMap<BranchKey, Buffer>,
}

impl RouteBuffers {
    pub fn new(policy: FlushPolicy, schema: SchemaRef) -> RouteBuffers {
        RouteBuffers {
            policy,
            schema,
            buffers: HashMap::new(),
        }
    }

    pub fn buffered_branches(&self) -> usize {
        self.buffers.len()
    }

    /// Appends `batch` for `key`; frames that must leave now are pushed to `out` in order.
    /// `openings` counts the buffers the graph opened (a new buffer takes the next number).
    /// Returns the deadline the branch's buffer waits for afterwards, if it holds rows (the
    /// shard's ticker must wake by then).
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        key: BranchKey,
        batch: RecordBatch,
        runs: Vec<AckRun>,
        times: Option<ArrayRef>,
        now: Now,
        openings: &mut u64,
        out: &mut Vec<Frame>,
    ) -> Option<nervix_shards::flush::Deadline> {
        let chunk = Chunk::new(logical_bytes(&batch), batch.num_rows() as u64);
        let policy = self.policy;
        let opened = *openings;
        let buffer = self.buffers.entry(key.clone()).or_insert_with(|| Buffer {
            flusher: RouteFlusher::new(policy),
            parts: Vec::new(),
            runs: Vec::new(),
            times: Vec::new(),
            untimed: false,
            opened,
        });
        if buffer.opened == opened {
            *openings += 1;
        }
        let actions = buffer.flusher.append(chunk, now);
        if actions.before.is_flush() {
            if let Some(frame) = take(&self.schema, &key, buffer) {
                out.push(frame);
            }
        }
        buffer.parts.push(batch);
        append_runs(&mut buffer.runs, &runs);
        match times {
            Some(times) => buffer.times.push(times),
            None => buffer.untimed = true,
        }
        if actions.after.is_flush() {
            if let Some(frame) = take(&self.schema, &key, buffer) {
                out.push(frame);
            }
        }
        let deadline = buffer.flusher.next_deadline();
        if buffer.parts.is_empty() {
            self.buffers.remove(&key);
        }
        deadline
    }

    /// Flushes every buffer whose deadline has come, each frame with its buffer's opening
    /// number: the caller publishes the frames of all routes by earliest event time, then
    /// oldest buffer, so a branch whose rows are later (an end of input, a far-ahead event
    /// time) does not overtake rows of the same input on another route or branch and move a
    /// downstream watermark past them. Returns the earliest deadline of the buffers left, as
    /// [`RouteBuffers::next_deadline`] (in the same pass).
    pub fn tick(&mut self, now: Now, out: &mut Vec<(u64, Frame)>) -> (Option<i64>, Option<u64>) {
        let schema = &self.schema;
        let mut logical: Option<i64> = None;
        let mut physical: Option<u64> = None;
        self.buffers.retain(|key, buffer| {
            if let Action::Flush { .. } = buffer.flusher.tick(now) {
                if let Some(frame) = take(schema, key, buffer) {
                    out.push((buffer.opened, frame));
                }
            }
            match buffer.flusher.next_deadline() {
                Some(nervix_shards::flush::Deadline::Logical(at)) => {
                    logical = Some(logical.map_or(at, |l| l.min(at)))
                }
                Some(nervix_shards::flush::Deadline::Physical(at)) => {
                    physical = Some(physical.map_or(at, |p| p.min(at)))
                }
                None => {}
            }
            !buffer.parts.is_empty()
        });
        (logical, physical)
    }

    /// Adopts `policy` (a dynamic ALTER of the route's FLUSH): every buffer is evaluated
    /// against it at `now` ([`RouteFlusher::set_policy`]); those it finds due or full flush.
    pub fn set_policy(&mut self, policy: FlushPolicy, now: Now, out: &mut Vec<(u64, Frame)>) {
        if policy == self.policy {
            return;
        }
        self.policy = policy;
        let schema = &self.schema;
        self.buffers.retain(|key, buffer| {
            if buffer.flusher.set_policy(policy, now).is_flush() {
                if let Some(frame) = take(schema, key, buffer) {
                    out.push((buffer.opened, frame));
                }
            }
            !buffer.parts.is_empty()
        });
    }

    /// Flushes everything (model alteration, stop, shutdown, eviction of one branch).
    pub fn force_flush(&mut self, only: Option<&BranchKey>, out: &mut Vec<(u64, Frame)>) {
        let schema = &self.schema;
        self.buffers.retain(|key, buffer| {
            if only.is_some_and(|k| k != key) {
                return true;
            }
            buffer.flusher.force_flush();
            if let Some(frame) = take(schema, key, buffer) {
                out.push((buffer.opened, frame));
            }
            false
        });
    }

    /// The earliest deadline of any buffer: (logical, physical) instants in ns.
    pub fn next_deadline(&self) -> (Option<i64>, Option<u64>) {
        let mut logical: Option<i64> = None;
        let mut physical: Option<u64> = None;
        for buffer in self.buffers.values() {
            match buffer.flusher.next_deadline() {
                Some(nervix_shards::flush::Deadline::Logical(at)) => {
                    logical = Some(logical.map_or(at, |l| l.min(at)))
                }
                Some(nervix_shards::flush::Deadline::Physical(at)) => {
                    physical = Some(physical.map_or(at, |p| p.min(at)))
                }
                None => {}
            }
        }
        (logical, physical)
    }
}

fn take(schema: &SchemaRef, key: &BranchKey, buffer: &mut Buffer) -> Option<Frame> {
    if buffer.parts.is_empty() {
        return None;
    }
    let parts = std::mem::take(&mut buffer.parts);
    let batch = if parts.len() == 1 {
        parts.into_iter().next()?
    } else {
        // Every part has the route's schema, so concatenation cannot fail.
        arrow_select::concat::concat_batches(schema, &parts).ok()?
    };
    let times = std::mem::take(&mut buffer.times);
    let untimed = std::mem::take(&mut buffer.untimed);
    let times = match times.as_slice() {
        _ if untimed => None,
        [] => None,
        [one] => Some(one.clone()),
        many => {
            let parts: Vec<&dyn arrow_array::Array> = many.iter().map(|t| t.as_ref()).collect();
            arrow_select::concat::concat(&parts).ok()
        }
    };
    Some(Frame {
        batch,
        key: key.clone(),
        acks: std::mem::take(&mut buffer.runs),
        times,
    })
}
