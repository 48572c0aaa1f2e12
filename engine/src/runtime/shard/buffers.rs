//! Route buffers: the rows one route of one node built for one concrete branch, waiting for
//! their FLUSH (DESIGN §5 item 3). The decision of *when* is `nervix_shards::flush`'s
//! [`RouteFlusher`]; this module keeps the Arrow parts and acknowledgement runs and turns a
//! flush into frames.
//!
//! How a flush makes frames ([`Frames`]): an emitter's flush is one frame (its sink delivers
//! what one flush gathered as one batch, the boundary FLUSH promises). A flush towards a relay
//! joins consecutive parts until the frame holds [`OWN_FRAME_MIN_ROWS`] rows, so a part that
//! large leaves as it came: copying it into a bigger batch costs more than the frame it saves
//! the next node, and a frame of one payload needs no per-row acknowledgement bookkeeping
//! downstream. Rows keep their order either way; the frames of one flush leave together. A
//! route whose policy flushes every append (`FlushPolicy::AT_ONCE`: routes without FLUSH, such
//! as a window's) opens no buffer at all: each append leaves as its own frame.
//!
//! Sizes: an append is sized (its logical Arrow bytes, as `MAX BATCH SIZE` counts them) only
//! under a policy with a byte bound, `FLUSH EACH`; under `FLUSH IMMEDIATE` nothing reads the
//! size, and sizing reads every column of every group. An ALTER to `FLUSH EACH` sizes what the
//! buffers hold before the new bound is checked.
//!
//! Which buffers are due: a min-heap of (deadline, branch) entries ordered by deadline,
//! pushed whenever a buffer arms a deadline, so a tick visits only the buffers whose deadline
//! came rather than every buffered branch (a route of 100,000 branches would otherwise be
//! scanned on every tick any route's FLUSH IMMEDIATE window causes). An entry whose buffer
//! flushed early (size bound, forced flush) or re-armed is stale: it no longer equals the
//! buffer's deadline and is dropped when a tick reaches it or it comes to the top. Stale
//! entries are bounded: the heap is rebuilt from the live buffers once it holds more than
//! twice their number plus [`DUE_INDEX_SLACK`]. A tick that finds a large share of the buffers
//! due (those one input batch opened share a deadline) switches to one pass over all of them
//! and rebuilds the index: popping 100,000 entries one by one cost 2.6 times the pass
//! (`cargo bench -p nervix-bench --bench route_buffers`), while the pass's cost is then
//! spread over at least 1/[`SCAN_FRACTION`] of the buffers flushing.
//!
//! A pass's fresh buffers: under `FLUSH IMMEDIATE`, a node pass that finds the route holding
//! no buffer ([`RouteBuffers::begin_pass`]) opens a buffer for each of its groups, all at the
//! same instant with the same deadline, and one pass's groups have distinct branches. Those
//! buffers are kept as a list with one shared deadline instead of a map entry, a flusher and a
//! due-index entry each: a fan-out over thousands of branches per batch (Nexmark q5's
//! reingestor) otherwise pays a map insert and removal and a heap push and pop per branch for
//! buffers that never take a second part. The list is exactly those buffers: when anything
//! else needs them by branch (the next pass's appends, a forced flush, a policy change), they
//! first move into the map as the buffers they would have been (a flusher that took the one
//! part at the pass's instant, its deadline indexed), so every other path sees the map alone.
//!
//! A pass's groups kept whole ([`RouteBuffers::append_grouped`]): when the route's target
//! takes grouped frames, the pass keeps its groups as the one batch the route built (rows in
//! group order) instead of one part per group, and its flush is one grouped frame
//! (`Frame::groups`). Nothing else changes: the groups take the opening numbers their buffers
//! would have, and anything that needs them by branch first cuts the pass into the fresh
//! buffers it stands for.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use nervix_shards::branch_key::{BranchKey, BranchMap};
use nervix_shards::flush::{Action, Chunk, Deadline, FlushPolicy, Now, RouteFlusher};

use crate::runtime::frame::{append_runs, AckRuns, BranchRows, Frame, RunCursor};
use crate::runtime::logical_bytes::logical_bytes;

/// On a relay-bound route, a flush joins parts into one frame until it holds this many rows;
/// a part this large leaves as a frame of its own (module docs).
pub const OWN_FRAME_MIN_ROWS: usize = 1_024;

/// How a route's flush turns parts into frames (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frames {
    /// One frame per flush (emitters).
    OnePerFlush,
    /// Parts joined up to [`OWN_FRAME_MIN_ROWS`] rows (relay-bound routes).
    JoinSmallParts,
}

/// One appended batch with the acknowledgement runs and event times of its rows.
struct Part {
    batch: RecordBatch,
    runs: AckRuns,
    /// A frame has times only when every part it joins had them.
    times: Option<ArrayRef>,
    /// The part's earliest row time (None when untimed or empty), taken on append while
    /// the times are in cache: the flush orders frames by it (`Flushed::earliest_ns`).
    earliest_ns: Option<i64>,
}

impl Part {
    /// The part as branch `key`'s frame, with its earliest row time.
    fn into_frame(self, key: &BranchKey) -> (Frame, Option<i64>) {
        let frame = Frame {
            groups: None,
            batch: self.batch,
            key: key.clone(),
            acks: self.runs,
            times: self.times,
        };
        (frame, self.earliest_ns)
    }
}

/// A frame a tick, policy change or forced flush released from a buffer.
pub struct Flushed {
    /// When its buffer was opened (the graph's opening counter then).
    pub opened: u64,
    /// Its earliest row time; None when it carries no event time (or no rows).
    pub earliest_ns: Option<i64>,
    pub frame: Frame,
}

struct Buffer {
    flusher: RouteFlusher,
    parts: Vec<Part>,
    /// When the buffer was opened (its first row): the graph's opening counter then.
    opened: u64,
}

/// Fresh buffers a debug build checks a new one's branch against (the check is quadratic).
const MAX_CHECKED_FRESH_BUFFERS: usize = 256;

/// Stale due-index entries tolerated beyond twice the live buffers before a rebuild.
const DUE_INDEX_SLACK: usize = 64;

/// A tick that finds more than 1/`SCAN_FRACTION` of the buffers (and at least
/// [`SCAN_MIN_DUE`]) due flushes by one pass over all of them instead (module docs).
const SCAN_FRACTION: usize = 32;

/// The fewest due entries a tick pops before it may switch to a pass over every buffer.
const SCAN_MIN_DUE: usize = 64;

/// A due-index entry: ordered by deadline alone, so the heap never compares branch keys
/// (buffers opened together share a deadline; their order among themselves does not matter —
/// the caller orders the frames of a flush pass).
struct Due {
    deadline: Deadline,
    key: BranchKey,
}

impl PartialEq for Due {
    fn eq(&self, other: &Due) -> bool {
        self.deadline == other.deadline
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Due) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Due) -> std::cmp::Ordering {
        self.deadline.cmp(&other.deadline)
    }
}

/// A buffer one pass opened and holds in its list rather than the map (module docs).
struct FreshBuffer {
    key: BranchKey,
    /// The graph's opening counter when it was opened.
    opened: u64,
    part: Part,
}

/// A pass's groups kept whole (module docs): `part` holds every group's rows, group after
/// group; group `i` was opened `opened + i`.
struct GroupedPass {
    groups: Vec<BranchRows>,
    opened: u64,
    part: Part,
}

impl GroupedPass {
    /// The pass as one grouped frame, with its earliest row time.
    fn into_frame(self) -> (Frame, Option<i64>) {
        let key = self.groups[0].key.clone();
        let (mut frame, earliest_ns) = self.part.into_frame(&key);
        frame.groups = Some(self.groups.into());
        (frame, earliest_ns)
    }

    /// The fresh buffers the pass stands for, one per group (each a slice of the rows).
    fn into_buffers(self) -> Vec<FreshBuffer> {
        let GroupedPass {
            groups,
            opened,
            part,
        } = self;
        let mut runs = RunCursor::new(&part.runs);
        let mut offset = 0usize;
        let mut buffers = Vec::with_capacity(groups.len());
        for (index, group) in groups.into_iter().enumerate() {
            let len = group.rows as usize;
            let times = part.times.as_ref().map(|t| t.slice(offset, len));
            buffers.push(FreshBuffer {
                key: group.key,
                opened: opened + index as u64,
                part: Part {
                    batch: part.batch.slice(offset, len),
                    runs: runs.take(len),
                    earliest_ns: earliest_time_ns(times.as_ref()),
                    times,
                },
            });
            offset += len;
        }
        buffers
    }
}

/// The buffers a pass opened while the route held no other (module docs): one part each,
/// distinct branches, opened at `opened_at` and due at `deadline`; or the pass's groups kept
/// whole (`grouped`).
struct FreshPass {
    buffers: Vec<FreshBuffer>,
    grouped: Option<GroupedPass>,
    opened_at: Now,
    deadline: Option<Deadline>,
}

/// Every concrete branch's buffer of one route.
pub struct RouteBuffers {
    policy: FlushPolicy,
    schema: SchemaRef,
    frames: Frames,
    buffers: BranchMap<Buffer>,
    /// Armed deadlines, earliest on top (module docs); may hold stale entries.
    due: BinaryHeap<Reverse<Due>>,
    /// Buffers the current or last pass opened outside the map (module docs).
    fresh: FreshPass,
    /// Whether this pass's appends open fresh buffers: set by [`RouteBuffers::begin_pass`],
    /// cleared by anything else that touches the buffers.
    fresh_lane: bool,
}

impl RouteBuffers {
    pub fn new(policy: FlushPolicy, schema: SchemaRef, frames: Frames) -> RouteBuffers {
        RouteBuffers {
            policy,
            schema,
            frames,
            buffers: BranchMap::default(),
            due: BinaryHeap::new(),
            fresh: FreshPass {
                buffers: Vec::new(),
                grouped: None,
                opened_at: Now::new(0, 0),
                deadline: None,
            },
            fresh_lane: false,
        }
    }

    /// Starts a node pass over this route: the appends until the next call belong to one
    /// pass, each for a different branch (one route output's groups). When the route holds no
    /// buffer under `FLUSH IMMEDIATE`, they open fresh buffers (module docs); buffers an
    /// earlier pass left fresh move into the map first, since this pass may append to them.
    pub fn begin_pass(&mut self) {
        self.index_fresh();
        self.fresh_lane = self.policy == FlushPolicy::Immediate && self.buffers.is_empty();
    }

    /// Moves the fresh buffers into the map as the buffers they stand for (module docs).
    fn index_fresh(&mut self) {
        self.fresh_lane = false;
        if let Some(grouped) = self.fresh.grouped.take() {
            self.fresh.buffers.extend(grouped.into_buffers());
        }
        if self.fresh.buffers.is_empty() {
            return;
        }
        let opened_at = self.fresh.opened_at;
        for fresh in std::mem::take(&mut self.fresh.buffers) {
            let mut flusher = RouteFlusher::new(self.policy);
            let chunk = Chunk::new(0, fresh.part.batch.num_rows() as u64);
            let actions = flusher.append(chunk, opened_at);
            debug_assert!(
                actions.flushes().next().is_none(),
                "a fresh buffer's part flushed on its append"
            );
            if let Some(deadline) = flusher.next_deadline() {
                self.due.push(Reverse(Due {
                    deadline,
                    key: fresh.key.clone(),
                }));
            }
            let buffer = Buffer {
                flusher,
                parts: vec![fresh.part],
                opened: fresh.opened,
            };
            let earlier = self.buffers.insert(fresh.key, buffer);
            debug_assert!(earlier.is_none(), "a fresh buffer's branch had a buffer");
        }
        self.fresh.deadline = None;
    }

    /// The deadline a fresh buffer of `rows` rows opened at `now` waits for: the pass's, or,
    /// for its first buffer, the one a flusher arms. None when the append must take the map
    /// instead (a flusher that would flush on the append itself).
    fn fresh_deadline(&mut self, rows: usize, now: Now) -> Option<Deadline> {
        if !self.fresh.buffers.is_empty() {
            debug_assert!(
                self.fresh.opened_at == now,
                "one pass's appends share their instant"
            );
            return self.fresh.deadline;
        }
        let mut flusher = RouteFlusher::new(self.policy);
        let actions = flusher.append(Chunk::new(0, rows as u64), now);
        if actions.flushes().next().is_some() {
            return None;
        }
        self.fresh.opened_at = now;
        self.fresh.deadline = flusher.next_deadline();
        self.fresh.deadline
    }

    /// Whether an append leaves at once as its own frame, without a buffer: the route's policy
    /// flushes every append ([`FlushPolicy::AT_ONCE`]) and no buffer holds rows (one adopted by
    /// a policy change is flushed when the change is applied), so nothing older can be
    /// overtaken.
    fn publishes_at_once(&self) -> bool {
        self.policy == FlushPolicy::AT_ONCE
            && self.buffers.is_empty()
            && self.fresh.buffers.is_empty()
            && self.fresh.grouped.is_none()
    }

    pub fn buffered_branches(&self) -> usize {
        let grouped = self.fresh.grouped.as_ref().map_or(0, |g| g.groups.len());
        self.buffers.len() + self.fresh.buffers.len() + grouped
    }

    /// Whether this pass may keep its groups whole ([`RouteBuffers::append_grouped`]): it
    /// opens fresh buffers and has appended nothing yet.
    pub fn takes_grouped_pass(&self) -> bool {
        self.fresh_lane && self.fresh.buffers.is_empty() && self.fresh.grouped.is_none()
    }

    /// Appends a whole pass at once (module docs): `batch` holds `groups`' rows group after
    /// group (distinct branches), with their acknowledgement runs and event times in the same
    /// order. Only when [`RouteBuffers::takes_grouped_pass`]. The groups take the next opening
    /// numbers. Frames that must leave now go to `out` (a policy that flushes on the append
    /// itself); returns the deadline the pass waits for otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn append_grouped(
        &mut self,
        batch: RecordBatch,
        groups: Vec<BranchRows>,
        runs: AckRuns,
        times: Option<ArrayRef>,
        now: Now,
        openings: &mut u64,
        out: &mut Vec<Frame>,
    ) -> Option<Deadline> {
        assert!(
            self.takes_grouped_pass(),
            "a grouped pass outside a fresh lane"
        );
        debug_assert_eq!(
            groups.iter().map(|g| g.rows as usize).sum::<usize>(),
            batch.num_rows(),
            "the groups cover the batch"
        );
        debug_assert!(
            times.as_ref().is_none_or(|t| t.len() == batch.num_rows()),
            "a grouped pass's times are its rows'"
        );
        let opened = *openings;
        *openings += groups.len() as u64;
        let earliest_ns = earliest_time_ns(times.as_ref());
        let pass = GroupedPass {
            groups,
            opened,
            part: Part {
                batch,
                runs,
                times,
                earliest_ns,
            },
        };
        let Some(deadline) = self.fresh_deadline(pass.part.batch.num_rows(), now) else {
            out.push(pass.into_frame().0);
            return None;
        };
        self.fresh.grouped = Some(pass);
        Some(deadline)
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
        runs: AckRuns,
        times: Option<ArrayRef>,
        now: Now,
        openings: &mut u64,
        out: &mut Vec<Frame>,
    ) -> Option<nervix_shards::flush::Deadline> {
        if self.publishes_at_once() {
            // No buffer is opened and closed around a group that leaves as it came.
            out.push(Frame {
                groups: None,
                batch,
                key,
                acks: runs,
                times,
            });
            return None;
        }
        if self.fresh_lane && batch.num_rows() > 0 {
            if let Some(deadline) = self.fresh_deadline(batch.num_rows(), now) {
                debug_assert!(
                    self.fresh.buffers.len() > MAX_CHECKED_FRESH_BUFFERS
                        || self.fresh.buffers.iter().all(|fresh| fresh.key != key),
                    "one pass appended twice to a branch"
                );
                let earliest_ns = earliest_time_ns(times.as_ref());
                let part = Part {
                    batch,
                    runs,
                    times,
                    earliest_ns,
                };
                let opened = *openings;
                *openings += 1;
                self.fresh.buffers.push(FreshBuffer { key, opened, part });
                return Some(deadline);
            }
            // Not a buffer the lane can hold: this pass takes the map from here on.
            self.index_fresh();
        }
        // Sizing a batch reads every column; FLUSH IMMEDIATE has no byte bound to check.
        let bytes = if self.policy.counts_bytes() {
            logical_bytes(&batch)
        } else {
            0
        };
        let chunk = Chunk::new(bytes, batch.num_rows() as u64);
        let policy = self.policy;
        let opened = *openings;
        let buffer = self.buffers.entry(key.clone()).or_insert_with(|| Buffer {
            flusher: RouteFlusher::new(policy),
            parts: Vec::new(),
            opened,
        });
        if buffer.opened == opened {
            *openings += 1;
        }
        let armed_before = buffer.flusher.next_deadline();
        let actions = buffer.flusher.append(chunk, now);
        if actions.before.is_flush() {
            take(&self.schema, self.frames, &key, buffer, |frame, _| {
                out.push(frame)
            });
        }
        let earliest_ns = earliest_time_ns(times.as_ref());
        buffer.parts.push(Part {
            batch,
            runs,
            times,
            earliest_ns,
        });
        if actions.after.is_flush() {
            take(&self.schema, self.frames, &key, buffer, |frame, _| {
                out.push(frame)
            });
        }
        let deadline = buffer.flusher.next_deadline();
        if buffer.parts.is_empty() {
            self.buffers.remove(&key);
        } else if let Some(armed) = deadline.filter(|d| Some(*d) != armed_before) {
            self.index(armed, key);
        }
        deadline
    }

    /// Records `key`'s newly armed deadline in the due index, rebuilding the index when stale
    /// entries outnumber its bound (module docs).
    fn index(&mut self, deadline: Deadline, key: BranchKey) {
        self.due.push(Reverse(Due { deadline, key }));
        if self.due.len() > 2 * self.buffers.len() + DUE_INDEX_SLACK {
            self.reindex();
        }
    }

    /// Rebuilds the due index from the live buffers' deadlines.
    fn reindex(&mut self) {
        let entries: Vec<Reverse<Due>> = self
            .buffers
            .iter()
            .filter_map(|(key, buffer)| {
                let deadline = buffer.flusher.next_deadline()?;
                Some(Reverse(Due {
                    deadline,
                    key: key.clone(),
                }))
            })
            .collect();
        self.due = BinaryHeap::from(entries);
    }

    /// Drops stale entries from the top of the due index, so its top is the earliest live
    /// deadline.
    fn drop_stale_due(&mut self) {
        while let Some(Reverse(due)) = self.due.peek() {
            let live = self
                .buffers
                .get(&due.key)
                .and_then(|buffer| buffer.flusher.next_deadline());
            if live == Some(due.deadline) {
                return;
            }
            self.due.pop();
        }
    }

    /// Flushes every buffer whose deadline has come, each frame with its buffer's opening
    /// number: the caller publishes the frames of all routes by earliest event time, then
    /// oldest buffer, so a branch whose rows are later (an end of input, a far-ahead event
    /// time) does not overtake rows of the same input on another route or branch and move a
    /// downstream watermark past them. Returns the earliest deadline of the buffers left, as
    /// [`RouteBuffers::next_deadline`] (in the same pass).
    pub fn tick(&mut self, now: Now, out: &mut Vec<Flushed>) -> (Option<i64>, Option<u64>) {
        self.fresh_lane = false;
        if self
            .fresh
            .deadline
            .is_some_and(|deadline| deadline.is_reached(now))
        {
            // Every fresh buffer is due at once: each is its one part's frame; a pass kept
            // whole is one grouped frame.
            self.fresh.deadline = None;
            if let Some(grouped) = self.fresh.grouped.take() {
                let opened = grouped.opened;
                let (frame, earliest_ns) = grouped.into_frame();
                out.push(Flushed {
                    opened,
                    earliest_ns,
                    frame,
                });
            }
            out.extend(self.fresh.buffers.drain(..).map(|fresh| {
                let (frame, earliest_ns) = fresh.part.into_frame(&fresh.key);
                Flushed {
                    opened: fresh.opened,
                    earliest_ns,
                    frame,
                }
            }));
        }
        // Past this many due entries in one tick, one pass over every buffer is cheaper than
        // popping the rest one by one (module docs).
        let scan_after = (self.buffers.len() / SCAN_FRACTION).max(SCAN_MIN_DUE);
        let mut popped = 0usize;
        while let Some(Reverse(due)) = self.due.peek() {
            if !due.deadline.is_reached(now) {
                break;
            }
            if popped >= scan_after {
                return self.tick_by_scan(now, out);
            }
            popped += 1;
            let Some(Reverse(due)) = self.due.pop() else {
                break;
            };
            // A stale entry (its buffer gone or re-armed since) is dropped here.
            let Some(buffer) = self
                .buffers
                .get_mut(&due.key)
                .filter(|buffer| buffer.flusher.next_deadline() == Some(due.deadline))
            else {
                continue;
            };
            // Its deadline is reached at `now`, so the flusher flushes and the buffer empties.
            let flushed = buffer.flusher.tick(now).is_flush();
            debug_assert!(flushed, "a live entry whose deadline came must flush");
            let opened = buffer.opened;
            take(
                &self.schema,
                self.frames,
                &due.key,
                buffer,
                |frame, earliest_ns| {
                    out.push(Flushed {
                        opened,
                        earliest_ns,
                        frame,
                    })
                },
            );
            self.buffers.remove(&due.key);
        }
        self.drop_stale_due();
        self.next_deadline()
    }

    /// [`RouteBuffers::tick`] by one pass over every buffer, then a fresh due index: for a
    /// tick that finds a large share of the buffers due (buffers opened by one input batch
    /// share a deadline).
    fn tick_by_scan(&mut self, now: Now, out: &mut Vec<Flushed>) -> (Option<i64>, Option<u64>) {
        let (schema, frames) = (&self.schema, self.frames);
        self.buffers.retain(|key, buffer| {
            if let Action::Flush { .. } = buffer.flusher.tick(now) {
                let opened = buffer.opened;
                take(schema, frames, key, buffer, |frame, earliest_ns| {
                    out.push(Flushed {
                        opened,
                        earliest_ns,
                        frame,
                    })
                });
            }
            !buffer.parts.is_empty()
        });
        self.reindex();
        self.next_deadline()
    }

    /// Adopts `policy` (a dynamic ALTER of the route's FLUSH): every buffer is evaluated
    /// against it at `now` ([`RouteFlusher::set_policy`]); those it finds due or full flush.
    pub fn set_policy(&mut self, policy: FlushPolicy, now: Now, out: &mut Vec<Flushed>) {
        self.index_fresh();
        if policy == self.policy {
            return;
        }
        // Rows appended under a policy that reads no size were not sized (`append`).
        let recount = policy.counts_bytes() && !self.policy.counts_bytes();
        self.policy = policy;
        let (schema, frames) = (&self.schema, self.frames);
        self.buffers.retain(|key, buffer| {
            if recount {
                let bytes = buffer
                    .parts
                    .iter()
                    .map(|part| logical_bytes(&part.batch))
                    .sum();
                buffer.flusher.recount_bytes(bytes);
            }
            if buffer.flusher.set_policy(policy, now).is_flush() {
                let opened = buffer.opened;
                take(schema, frames, key, buffer, |frame, earliest_ns| {
                    out.push(Flushed {
                        opened,
                        earliest_ns,
                        frame,
                    })
                });
            }
            !buffer.parts.is_empty()
        });
        // The policy re-armed every buffer left.
        self.reindex();
    }

    /// Flushes everything (model alteration, stop, shutdown), or one branch's buffer (its
    /// eviction).
    pub fn force_flush(&mut self, only: Option<&BranchKey>, out: &mut Vec<Flushed>) {
        self.index_fresh();
        let (schema, frames) = (&self.schema, self.frames);
        let mut flush = |key: &BranchKey, mut buffer: Buffer| {
            buffer.flusher.force_flush();
            let opened = buffer.opened;
            take(schema, frames, key, &mut buffer, |frame, earliest_ns| {
                out.push(Flushed {
                    opened,
                    earliest_ns,
                    frame,
                })
            });
        };
        match only {
            Some(key) => {
                if let Some(buffer) = self.buffers.remove(key) {
                    flush(key, buffer);
                }
                self.drop_stale_due();
            }
            None => {
                for (key, buffer) in self.buffers.drain() {
                    flush(&key, buffer);
                }
                self.due.clear();
            }
        }
    }

    /// The earliest deadline of any buffer: (logical, physical) instants in ns. It may be
    /// earlier than the earliest live one (a stale due-index entry; module docs), never later:
    /// a tick at that instant finds nothing due and leaves the index clean.
    pub fn next_deadline(&self) -> (Option<i64>, Option<u64>) {
        let mut earliest = (None, None);
        if let Some(Reverse(due)) = self.due.peek() {
            lower_to(&mut earliest, Some(due.deadline));
        }
        lower_to(&mut earliest, self.fresh.deadline);
        earliest
    }
}

/// Lowers `earliest` (logical, physical ns) to `deadline` when it is earlier.
pub(super) fn lower_to(earliest: &mut (Option<i64>, Option<u64>), deadline: Option<Deadline>) {
    match deadline {
        Some(Deadline::Logical(at)) => earliest.0 = Some(earliest.0.map_or(at, |l| l.min(at))),
        Some(Deadline::Physical(at)) => earliest.1 = Some(earliest.1.map_or(at, |p| p.min(at))),
        None => {}
    }
}

/// Empties `buffer` into frames (module docs), in row order, each passed to `out`.
fn take(
    schema: &SchemaRef,
    frames: Frames,
    key: &BranchKey,
    buffer: &mut Buffer,
    mut out: impl FnMut(Frame, Option<i64>),
) {
    let min_rows = match frames {
        Frames::OnePerFlush => usize::MAX,
        Frames::JoinSmallParts => OWN_FRAME_MIN_ROWS,
    };
    let mut parts = std::mem::take(&mut buffer.parts);
    // One part (a branch that took rows once since its last flush, the common case of a
    // fan-out over many branches) is the frame as it is.
    if parts.len() == 1 {
        if let Some((frame, earliest_ns)) = parts.pop().map(|part| part.into_frame(key)) {
            out(frame, earliest_ns);
        }
        return;
    }
    let mut joined: Vec<Part> = Vec::new();
    let mut joined_rows = 0usize;
    let last = parts.len().saturating_sub(1);
    for (index, part) in parts.into_iter().enumerate() {
        joined_rows += part.batch.num_rows();
        joined.push(part);
        if joined_rows >= min_rows || index == last {
            if let Some((frame, earliest_ns)) = join(schema, key, std::mem::take(&mut joined)) {
                out(frame, earliest_ns);
            }
            joined_rows = 0;
        }
    }
}

/// A row time array's earliest time: None when there is none, or no row.
fn earliest_time_ns(times: Option<&ArrayRef>) -> Option<i64> {
    times
        .and_then(|t| t.as_any().downcast_ref::<arrow_array::Int64Array>())
        .and_then(|t| t.values().iter().min().copied())
}

/// One frame of `parts` (at least one, all in the route's schema), with its earliest row time.
fn join(schema: &SchemaRef, key: &BranchKey, mut parts: Vec<Part>) -> Option<(Frame, Option<i64>)> {
    if parts.len() == 1 {
        return parts.pop().map(|part| part.into_frame(key));
    }
    let batches: Vec<&RecordBatch> = parts.iter().map(|p| &p.batch).collect();
    // Every part has the route's schema, so concatenation cannot fail.
    let batch = arrow_select::concat::concat_batches(schema, batches).ok()?;
    let times: Option<Vec<&dyn Array>> = parts
        .iter()
        .map(|p| p.times.as_deref().map(|t| t as &dyn Array))
        .collect();
    let times = times.and_then(|t| arrow_select::concat::concat(&t).ok());
    let mut acks = AckRuns::new();
    for part in &parts {
        append_runs(&mut acks, &part.runs);
    }
    // Timed only when every part was; then the least of the parts' earliest times.
    let earliest_ns = times
        .as_ref()
        .and_then(|_| parts.iter().filter_map(|part| part.earliest_ns).min());
    let frame = Frame {
        groups: None,
        batch,
        key: key.clone(),
        acks,
        times,
    };
    Some((frame, earliest_ns))
}

#[cfg(test)]
mod due_index_tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema, SchemaRef};
    use nervix_shards::branch_key::BranchKey;
    use nervix_shards::flush::{FlushPolicy, Now};

    use super::{Frames, RouteBuffers, DUE_INDEX_SLACK};
    use crate::runtime::frame::AckRuns;

    const INTERVAL_NS: u64 = 1_000;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]))
    }

    fn one_row(value: i64) -> RecordBatch {
        RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(vec![value]))])
            .expect("batch")
    }

    fn key(branch: u8) -> BranchKey {
        BranchKey::Key([branch].into())
    }

    fn buffers(max_batch_bytes: u64) -> RouteBuffers {
        let policy = FlushPolicy::Each {
            interval_ns: INTERVAL_NS,
            max_batch_bytes,
        };
        RouteBuffers::new(policy, schema(), Frames::JoinSmallParts)
    }

    fn at(logical_ns: i64) -> Now {
        Now::new(logical_ns, 0)
    }

    fn append(route: &mut RouteBuffers, branch: u8, now: Now) -> Vec<super::Frame> {
        let mut out = Vec::new();
        let mut openings = 0;
        route.append(
            key(branch),
            one_row(1),
            AckRuns::new(),
            None,
            now,
            &mut openings,
            &mut out,
        );
        out
    }

    #[test]
    fn a_route_publishes_at_once_only_under_at_once_with_nothing_buffered() {
        let mut route = buffers(u64::MAX);
        assert!(!route.publishes_at_once(), "FLUSH EACH buffers");
        assert!(append(&mut route, 7, at(0)).is_empty());
        // A policy change to AT_ONCE flushes what was buffered before anything leaves at once,
        // so a group published directly never overtakes older rows of its branch.
        let mut out = Vec::new();
        route.set_policy(FlushPolicy::AT_ONCE, at(1), &mut out);
        assert_eq!(out.len(), 1, "the buffered row left with the change");
        assert!(route.publishes_at_once());
        assert_eq!(
            append(&mut route, 7, at(2)).len(),
            1,
            "a row leaves as it comes"
        );
        assert_eq!(route.buffered_branches(), 0, "no buffer was opened for it");
        let immediate = RouteBuffers::new(FlushPolicy::Immediate, schema(), Frames::OnePerFlush);
        assert!(!immediate.publishes_at_once());
    }

    #[test]
    fn rows_buffered_under_flush_immediate_are_sized_when_a_byte_bound_is_adopted() {
        // Three 8-byte rows, appended unsized under FLUSH IMMEDIATE: 24 bytes.
        let buffered = || {
            let mut route =
                RouteBuffers::new(FlushPolicy::Immediate, schema(), Frames::OnePerFlush);
            for _ in 0..3 {
                assert!(append(&mut route, 7, at(0)).is_empty());
            }
            route
        };
        let bound = |max_batch_bytes| FlushPolicy::Each {
            interval_ns: u64::MAX,
            max_batch_bytes,
        };
        let mut out = Vec::new();
        buffered().set_policy(bound(30), at(1), &mut out);
        assert!(out.is_empty(), "24 bytes stay under a 30-byte bound");
        buffered().set_policy(bound(20), at(1), &mut out);
        assert_eq!(
            out.len(),
            1,
            "24 bytes pass a 20-byte bound: the buffer flushes"
        );
        assert_eq!(out[0].frame.num_rows(), 3);
    }

    #[test]
    fn a_tick_flushes_exactly_the_branches_whose_deadline_came() {
        let mut route = buffers(u64::MAX);
        // Branch b opens at 10·b, so its deadline is 10·b + INTERVAL_NS.
        for branch in 0..100u8 {
            assert!(append(&mut route, branch, at(i64::from(branch) * 10)).is_empty());
        }
        assert_eq!(route.next_deadline(), (Some(1_000), None));
        let now = at(1_000 + 49 * 10);
        let mut out = Vec::new();
        let left = route.tick(now, &mut out);
        let mut flushed: Vec<BranchKey> =
            out.into_iter().map(|flushed| flushed.frame.key).collect();
        flushed.sort();
        let due: Vec<BranchKey> = (0..100u8)
            .filter(|b| i64::from(*b) * 10 + 1_000 <= now.logical_ns)
            .map(key)
            .collect();
        assert_eq!(flushed, due);
        assert_eq!(route.buffered_branches(), 50);
        assert_eq!(left, (Some(1_500), None));
    }

    #[test]
    fn a_tick_with_most_buffers_due_flushes_the_same_by_one_pass() {
        // 1,000 branches opened 1 ns apart, 600 due: past 64 of them (1,000 / 32 is fewer)
        // the tick switches to a pass over every buffer, which must flush exactly the due
        // ones and re-index the rest.
        let mut route = buffers(u64::MAX);
        let opened = |b: u16| i64::from(b);
        for branch in 0..1_000u16 {
            let key = BranchKey::Key(branch.to_be_bytes().into());
            let (mut openings, mut out) = (0, Vec::new());
            route.append(
                key,
                one_row(1),
                AckRuns::new(),
                None,
                at(opened(branch)),
                &mut openings,
                &mut out,
            );
        }
        let now = at(1_000 + 599);
        let mut out = Vec::new();
        let left = route.tick(now, &mut out);
        let mut flushed: Vec<BranchKey> =
            out.into_iter().map(|flushed| flushed.frame.key).collect();
        flushed.sort();
        let due: Vec<BranchKey> = (0..1_000u16)
            .filter(|b| opened(*b) + 1_000 <= now.logical_ns)
            .map(|b| BranchKey::Key(b.to_be_bytes().into()))
            .collect();
        assert_eq!(flushed.len(), 600);
        assert_eq!(flushed, due);
        assert_eq!(route.buffered_branches(), 400);
        assert_eq!(left, (Some(1_600), None));
        assert_eq!(route.due.len(), 400);
        let mut rest = Vec::new();
        route.tick(at(i64::MAX), &mut rest);
        assert_eq!(rest.len(), 400);
    }

    #[test]
    fn stale_entries_stay_bounded_and_the_live_deadline_still_fires() {
        // Two one-row appends fill the 16-byte bound: each pair flushes by size and leaves the
        // deadline it armed stale in the index.
        let mut route = buffers(16);
        let mut flushed_rows = 0;
        for step in 0..10_001i64 {
            for frame in append(&mut route, 7, at(step)) {
                flushed_rows += frame.batch.num_rows();
            }
            // One branch: never more than twice it plus the slack.
            assert!(route.due.len() <= 2 + DUE_INDEX_SLACK);
        }
        assert_eq!(flushed_rows, 10_000);
        // The last row waits for the deadline armed at step 10,000, and only for it.
        let mut out = Vec::new();
        assert_eq!(route.tick(at(10_000 + 999), &mut out), (Some(11_000), None));
        assert!(out.is_empty());
        route.tick(at(11_000), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(route.buffered_branches(), 0);
        assert_eq!(route.next_deadline(), (None, None));
    }

    #[test]
    fn a_forced_flush_of_one_branch_leaves_the_others_due_as_before() {
        let mut route = buffers(u64::MAX);
        for branch in 0..3u8 {
            append(&mut route, branch, at(i64::from(branch) * 100));
        }
        let mut out = Vec::new();
        route.force_flush(Some(&key(0)), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].frame.key, key(0));
        assert_eq!(route.next_deadline(), (Some(1_100), None));
        out.clear();
        route.tick(at(1_100), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].frame.key, key(1));
        route.force_flush(None, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(route.next_deadline(), (None, None));
    }

    /// One pass of `keys` (distinct) at `now` through `route`, each a one-row batch valued
    /// `value`; `passes` says whether the route is told passes begin (the fresh lane) or not
    /// (every append takes the map).
    fn pass(
        route: &mut RouteBuffers,
        keys: &[u8],
        value: i64,
        now: Now,
        passes: bool,
        openings: &mut u64,
    ) -> Vec<super::Frame> {
        if passes {
            route.begin_pass();
        }
        let mut out = Vec::new();
        for branch in keys {
            route.append(
                key(*branch),
                one_row(value),
                AckRuns::new(),
                None,
                now,
                openings,
                &mut out,
            );
        }
        out
    }

    /// What a flush released, in a comparable order: (opened, branch, values).
    fn released(out: Vec<super::Flushed>) -> Vec<(u64, BranchKey, Vec<i64>)> {
        let mut released: Vec<(u64, BranchKey, Vec<i64>)> = out
            .into_iter()
            .map(|flushed| {
                let values = flushed
                    .frame
                    .batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .expect("values")
                    .values()
                    .to_vec();
                (flushed.opened, flushed.frame.key, values)
            })
            .collect();
        released.sort();
        released
    }

    #[test]
    fn a_pass_opening_fresh_buffers_flushes_them_together_at_its_deadline() {
        let mut route = RouteBuffers::new(FlushPolicy::Immediate, schema(), Frames::JoinSmallParts);
        let mut openings = 0;
        let opened_at = Now::new(0, 5_000);
        assert!(pass(&mut route, &[1, 2, 3], 7, opened_at, true, &mut openings).is_empty());
        assert_eq!(route.buffered_branches(), 3);
        assert!(route.buffers.is_empty(), "held as a list, not in the map");
        let deadline = 5_000 + nervix_shards::flush::IMMEDIATE_WINDOW_NS;
        assert_eq!(route.next_deadline(), (None, Some(deadline)));
        let mut out = Vec::new();
        route.tick(Now::new(0, deadline - 1), &mut out);
        assert!(out.is_empty());
        route.tick(Now::new(0, deadline), &mut out);
        assert_eq!(
            released(out),
            vec![
                (0, key(1), vec![7]),
                (1, key(2), vec![7]),
                (2, key(3), vec![7])
            ]
        );
        assert_eq!(route.buffered_branches(), 0);
        assert_eq!(route.next_deadline(), (None, None));
    }

    proptest::proptest! {
        /// Passes through the fresh lane release exactly what the same appends release through
        /// the map: the same frames (branch, rows in order, opening number) at the same ticks,
        /// whatever passes, ticks and forced flushes come in between.
        #[test]
        fn fresh_buffers_release_what_mapped_buffers_do(
            steps in proptest::collection::vec(
                (0u8..4, proptest::collection::btree_set(0u8..6, 0..5), 0u64..150_000),
                1..40,
            ),
        ) {
            let immediate = || RouteBuffers::new(FlushPolicy::Immediate, schema(), Frames::JoinSmallParts);
            let (mut fresh, mut mapped) = (immediate(), immediate());
            let (mut fresh_openings, mut mapped_openings) = (0, 0);
            let mut physical_ns = 0u64;
            for (step, (kind, keys, advance_ns)) in steps.into_iter().enumerate() {
                physical_ns += advance_ns;
                let now = Now::new(0, physical_ns);
                let (mut from_fresh, mut from_mapped) = (Vec::new(), Vec::new());
                match kind {
                    0 | 1 => {
                        let keys: Vec<u8> = keys.into_iter().collect();
                        let value = step as i64;
                        // An append may flush first what waited past its deadline untimed.
                        let frames = |frames: Vec<super::Frame>| -> Vec<(BranchKey, usize)> {
                            frames.into_iter().map(|f| (f.key, f.batch.num_rows())).collect()
                        };
                        proptest::prop_assert_eq!(
                            frames(pass(&mut fresh, &keys, value, now, true, &mut fresh_openings)),
                            frames(pass(&mut mapped, &keys, value, now, false, &mut mapped_openings))
                        );
                    }
                    2 => {
                        let left = fresh.tick(now, &mut from_fresh);
                        proptest::prop_assert_eq!(left, mapped.tick(now, &mut from_mapped));
                    }
                    _ => {
                        let only = keys.first().map(|branch| key(*branch));
                        fresh.force_flush(only.as_ref(), &mut from_fresh);
                        mapped.force_flush(only.as_ref(), &mut from_mapped);
                    }
                }
                proptest::prop_assert_eq!(released(from_fresh), released(from_mapped));
                proptest::prop_assert_eq!(fresh.buffered_branches(), mapped.buffered_branches());
                proptest::prop_assert_eq!(fresh.next_deadline(), mapped.next_deadline());
            }
        }
    }
}
