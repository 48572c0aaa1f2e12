//! The node-specific work of stateful processors on a shard (spec "Processing order", step 3):
//! a deduplicator's keyspace, a reorderer's ordering buffer and a window's retained rows, one
//! per concrete branch, and the release of held rows (or a window's record) into the
//! processor's routes.
//!
//! Acknowledgements (the graph's rules, module doc of `graph`): a dropped duplicate gives its
//! unit up like a filtered row; a held row keeps its unit until it is released, and its run
//! travels with it into the routes, which transfer it like any input, unless a durable
//! snapshot took it first (`snapshot`). A branch that leaves (TTL, LRU) or a model change's
//! pause force-releases what its reorderer holds first, so held rows are never dropped; a stop
//! keeps them in the snapshot it writes, and a restart restores them. Processor state lives
//! only on the shard that owns the branch; nothing is shared.

use std::borrow::Cow;
use std::collections::BTreeSet;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, UInt32Array};
use arrow_select::filter::FilterBuilder;
use nervix_shards::branch_key::{BranchKey, BranchKeyEncoder, BranchMap};
use nervix_shards::slab_map::{Entry, SlabMap};

use super::window_records::WindowRecord;
use super::{mark_nacked, Graph, Instant, NodeRef};
use crate::runtime::envelope::Envelope;
use crate::runtime::exec::dedup::Keyspace;
use crate::runtime::exec::reorder::OrderBuffer;
use crate::runtime::exec::route::input_values;
use crate::runtime::exec::window::{RunArgs, WindowState};
use crate::runtime::frame::{derive_runs, AckRuns, Frame};
use crate::runtime::plan::{DomainPlan, NodeWork, ProcessorPlan};
use crate::runtime::shard::mesh::Ctx;

/// Windows one branch may emit in one pass (a watermark far ahead steps through at most this
/// many; the rest follow on the next tick).
pub const MAX_RECORDS_PER_PASS: usize = 1_024;
/// Branches whose due windows one pass emits (a watermark that makes thousands of windows due
/// at once, as every Nexmark q5 window boundary does, would otherwise hold the shard for the
/// whole burst; the rest follow on the next ticks, which come at once). A pass of this many
/// q5 windows takes under a millisecond here (emission is about a quarter of q5's shard time,
/// 0.8 µs per window), well inside the stall budget; 256 paid the pass's fixed work
/// (read-ahead, one records batch, one route run, one merged frame) four times as often
/// (perf/RESULTS.md, session 39).
pub const MAX_WINDOW_BRANCHES_PER_PASS: usize = 1_024;

/// The rows of a frame still in play after the filters.
pub(super) struct Kept<'f> {
    /// The frame's own columns until a filter drops rows or the branch scope adds columns:
    /// most frames pass unfiltered, and copying the list counted a reference per column (a
    /// locked instruction each) and allocated, per frame.
    pub columns: Cow<'f, [ArrayRef]>,
    pub rows: usize,
    /// Which frame row each kept row is, once a filter dropped some of a multi-payload frame.
    pub kept_rows: Option<UInt32Array>,
    pub envelope: Option<Envelope>,
    /// The kept rows' event times (see `Frame::times`).
    pub times: Option<ArrayRef>,
}

impl<'f> Kept<'f> {
    pub fn all(frame: &'f Frame, envelope: Option<Envelope>) -> Kept<'f> {
        Kept {
            columns: Cow::Borrowed(frame.batch.columns()),
            rows: frame.num_rows(),
            kept_rows: None,
            envelope,
            times: frame.times.clone(),
        }
    }

    /// The kept rows' event times, when every kept row has one (else the caller uses the
    /// execution snapshot).
    pub fn event_times(&self) -> Option<Int64Array> {
        self.times
            .as_ref()
            .and_then(|t| t.as_any().downcast_ref::<Int64Array>().cloned())
            .filter(|t| t.null_count() == 0)
    }

    /// The frame row of kept row `row`.
    pub fn frame_row(&self, row: u32) -> u32 {
        match &self.kept_rows {
            Some(kept) => kept.value(row as usize),
            None => row,
        }
    }

    /// Keeps the rows `mask` selects (`multi`: the frame holds several payloads, so row
    /// identities must be remembered); returns how many it dropped.
    pub fn keep(&mut self, mask: &BooleanArray, multi: bool) -> usize {
        let dropped = self.rows - mask.true_count();
        if dropped == 0 {
            return 0;
        }
        let predicate = FilterBuilder::new(mask).optimize().build();
        self.columns = self
            .columns
            .iter()
            .map(|c| predicate.filter(c.as_ref()).unwrap_or_else(|_| c.clone()))
            .collect::<Vec<_>>()
            .into();
        self.envelope = self.envelope.take().map(|e| e.filter(&predicate));
        self.times = self
            .times
            .take()
            .and_then(|t| predicate.filter(t.as_ref()).ok());
        if multi {
            let base = self
                .kept_rows
                .take()
                .unwrap_or_else(|| UInt32Array::from_iter_values(0..self.rows as u32));
            self.kept_rows = predicate
                .filter(&base)
                .ok()
                .and_then(|a| a.as_any().downcast_ref::<UInt32Array>().cloned());
        }
        self.rows -= dropped;
        dropped
    }

    /// Evaluates `programs` (each reading the input row) over the kept rows. Returns their
    /// values and the rows any of them failed on, ascending; the first failure is logged as
    /// `what`.
    pub(super) fn evaluate<'p>(
        &self,
        programs: impl Iterator<Item = &'p crate::vm::Program>,
        now_ns: i64,
        what: &str,
        logs: &mut Vec<String>,
    ) -> (RunArgs, Vec<u32>) {
        let mut values = RunArgs::new();
        let mut failed: Vec<u32> = Vec::new();
        for program in programs {
            let evaluated = input_values(program, &self.columns, self.rows, now_ns);
            for (row, message) in evaluated.errors.iter() {
                if failed.is_empty() {
                    logs.push(format!(
                        "{what} failed on row {}: {message}",
                        self.frame_row(row)
                    ));
                }
                failed.push(row);
            }
            values.push(evaluated.values);
        }
        failed.sort_unstable();
        failed.dedup();
        (values, failed)
    }

    /// Drops the kept rows `failed` (ascending) from the kept rows and from `values`.
    fn drop_rows(&mut self, failed: &[u32], values: &mut [ArrayRef], multi: bool) {
        if failed.is_empty() {
            return;
        }
        let mut mask = vec![true; self.rows];
        for row in failed {
            mask[*row as usize] = false;
        }
        let mask = BooleanArray::from(mask);
        let predicate = FilterBuilder::new(&mask).optimize().build();
        for array in values.iter_mut() {
            *array = predicate
                .filter(array.as_ref())
                .unwrap_or_else(|_| array.clone());
        }
        self.keep(&mask, multi);
    }

    /// The frame rows still kept, ascending.
    pub fn frame_rows(&self) -> UInt32Array {
        self.kept_rows
            .clone()
            .unwrap_or_else(|| UInt32Array::from_iter_values(0..self.rows as u32))
    }
}

/// When a window processor next needs a pass: at its earliest indexed window end
/// (`first_due_ns`; a stale entry is never later than the true earliest, and waking for it only
/// drops it), or at once (`i64::MIN`) when the input watermark already passed that end — a pass
/// capped at [`MAX_WINDOW_BRANCHES_PER_PASS`] left it due, and a paced domain clock may be far
/// behind the event time that closes it.
fn window_deadline(first_due_ns: Option<i64>, watermark_ns: Option<i64>) -> Option<i64> {
    first_due_ns.map(|at_ns| {
        if watermark_ns.is_some_and(|w| at_ns <= w) {
            i64::MIN
        } else {
            at_ns
        }
    })
}

/// Marks the payloads of the kept rows `failed` negatively acknowledged and counts them as
/// message errors in `counters`.
fn refuse_rows(
    counters: &mut super::NodeCounters,
    frame: &Frame,
    kept: &Kept,
    failed: &[u32],
    nacked: &mut [bool],
) {
    if failed.is_empty() {
        return;
    }
    mark_nacked(
        &frame.acks,
        failed.iter().map(|r| kept.frame_row(*r)),
        nacked,
    );
    counters.message_errors += failed.len() as u64;
}

/// Rows a node holds (reorderer, window) keep their acknowledgement units; what the filters
/// dropped gives its units up. A failed payload is negatively acknowledged first: giving up
/// its last units would otherwise resolve it as acknowledged. Returns the held rows' runs
/// (none when the node is DETACHED: it acknowledges at once).
pub(super) fn keep_units(
    frame: &Frame,
    kept: &Kept,
    detached: bool,
    nacked: &[bool],
    cx: &mut Ctx<'_>,
) -> AckRuns {
    nack_failed(&frame.acks, nacked, cx);
    if detached {
        for run in &frame.acks {
            cx.ack(run.root, run.rows as u64);
        }
        return AckRuns::new();
    }
    if kept.kept_rows.is_none() && kept.rows == frame.num_rows() {
        // Every row kept: each run's units stay with its rows as they are.
        for run in &frame.acks {
            cx.transfer(run.root, run.rows as u64, run.rows as u64);
        }
        return AckRuns::from_slice(&frame.acks);
    }
    let mut per_run = vec![0u64; frame.acks.len()];
    let runs = derive_runs(&frame.acks, &kept.frame_rows(), &mut per_run);
    for (run, derived) in frame.acks.iter().zip(&per_run) {
        cx.transfer(run.root, run.rows as u64, *derived);
    }
    runs
}

/// Negatively acknowledges the payloads of `runs` marked failed.
fn nack_failed(runs: &[crate::runtime::frame::AckRun], nacked: &[bool], cx: &mut Ctx<'_>) {
    for (run, failed) in runs.iter().zip(nacked) {
        if *failed {
            cx.nack(run.root);
        }
    }
}

/// One processor's branch-local state on this shard.
pub(super) enum WorkState {
    Pass,
    Dedup(super::dedup::DedupState),
    Reorder {
        buffers: BranchMap<OrderBuffer>,
    },
    Window {
        /// In a slab (`SlabMap`): a window's state is large, and a map holding it inline
        /// spreads tens of thousands of open windows (Nexmark q5) over a bucket array where
        /// every probe and every new window misses the cache.
        windows: SlabMap<BranchKey, WindowState>,
        /// The processor's input watermark on this shard: the latest row time admitted into
        /// any of its branches. Every branch's window is due once it passes the window's end
        /// (spec: "when an input watermark … reaches that logical target"), so a branch that
        /// receives no more rows still closes as event time moves on.
        watermark_ns: Option<i64>,
        /// (due, branch) of every open window, so a pass visits only due windows rather than
        /// every branch. Entries may be stale (the window moved on or left): a popped entry
        /// counts only when it matches the window's current due time.
        due: BTreeSet<(i64, BranchKey)>,
    },
    Correlate {
        branches: super::correlate::Correlations,
        /// Per side (left, right), the latest row time admitted on this shard. MAX TIME is
        /// measured against the earlier of the two (with the domain clock): a side that lags
        /// has rows still to come that may pair with the other side's pending rows.
        watermarks_ns: [Option<i64>; 2],
        /// (due, branch) of every branch with pending rows, so a tick visits only branches
        /// with rows due; entries may be stale (a popped one is checked against its branch).
        due: BTreeSet<(i64, BranchKey)>,
    },
    Generate(super::generator::GeneratorState),
}

impl WorkState {
    pub fn new(work: &NodeWork) -> WorkState {
        match work {
            NodeWork::Pass => WorkState::Pass,
            NodeWork::Dedup { .. } => WorkState::Dedup(Default::default()),
            NodeWork::Reorder { .. } => WorkState::Reorder {
                buffers: BranchMap::default(),
            },
            NodeWork::Window(_) => WorkState::Window {
                windows: SlabMap::default(),
                watermark_ns: None,
                due: BTreeSet::new(),
            },
            NodeWork::Correlate(_) => WorkState::Correlate {
                branches: BranchMap::default(),
                watermarks_ns: [None, None],
                due: BTreeSet::new(),
            },
            NodeWork::Generate { .. } => WorkState::Generate(Default::default()),
        }
    }

    /// The branches holding snapshotted state: those changed since their last snapshot when
    /// `changed_only`, else all.
    /// Rows held in reorder buffers (none for other work).
    pub fn held_reorder_rows(&self) -> usize {
        match self {
            WorkState::Reorder { buffers } => buffers.values().map(OrderBuffer::held_rows).sum(),
            _ => 0,
        }
    }

    pub fn keys(&self, changed_only: bool) -> Vec<BranchKey> {
        fn pick<'a, S>(
            states: impl Iterator<Item = (&'a BranchKey, &'a S)>,
            changed: impl Fn(&S) -> bool,
            changed_only: bool,
        ) -> Vec<BranchKey>
        where
            S: 'a,
        {
            states
                .filter(|(_, state)| !changed_only || changed(state))
                .map(|(key, _)| key.clone())
                .collect()
        }
        match self {
            WorkState::Dedup(super::dedup::DedupState { spaces, .. }) => {
                pick(spaces.iter(), Keyspace::is_dirty, changed_only)
            }
            WorkState::Reorder { buffers } => {
                pick(buffers.iter(), OrderBuffer::is_dirty, changed_only)
            }
            WorkState::Window { windows, .. } => {
                pick(windows.iter(), WindowState::is_dirty, changed_only)
            }
            WorkState::Correlate { branches, .. } => {
                pick(branches.iter(), |state| state.is_dirty(), changed_only)
            }
            WorkState::Pass | WorkState::Generate(_) => Vec::new(),
        }
    }

    /// Whether any branch's snapshotted state changed since its last snapshot.
    pub fn has_dirty(&self) -> bool {
        match self {
            WorkState::Dedup(super::dedup::DedupState { spaces, .. }) => {
                spaces.values().any(Keyspace::is_dirty)
            }
            WorkState::Reorder { buffers } => buffers.values().any(OrderBuffer::is_dirty),
            WorkState::Window { windows, .. } => windows.values().any(WindowState::is_dirty),
            WorkState::Correlate { branches, .. } => branches.values().any(|s| s.is_dirty()),
            WorkState::Pass | WorkState::Generate(_) => false,
        }
    }
}

impl Graph {
    /// Runs processor `index`'s node work on the kept rows of `frame`. Returns whether the
    /// rows were held (the caller then stops: no route runs now).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn node_work(
        &mut self,
        plan: &DomainPlan,
        index: usize,
        frame: &Frame,
        kept: &mut Kept,
        detached: bool,
        at: Instant,
        cx: &mut Ctx<'_>,
        nacked: &mut [bool],
        logs: &mut Vec<String>,
    ) -> bool {
        let processor = &plan.processors[index];
        match (&processor.work, &mut self.work[index]) {
            // A generator has no input: its rows come from `generator`, never through here.
            (NodeWork::Pass | NodeWork::Generate { .. }, _) => false,
            (
                NodeWork::Dedup {
                    keys, max_time_ns, ..
                },
                WorkState::Dedup(dedup),
            ) => {
                let input = super::dedup::DedupInput {
                    keys,
                    max_time_ns: *max_time_ns,
                    frame,
                    detached,
                    at,
                };
                let tally = dedup.admit(input, kept, cx, nacked, logs);
                self.work_changed = true;
                if tally.duplicates > 0 {
                    tracing::debug!(
                        processor = %processor.name,
                        duplicates = tally.duplicates,
                        "deduplicator dropped duplicates"
                    );
                }
                let counters = &mut self.processors[index].counters;
                counters.message_errors += tally.refused as u64;
                counters.filtered_rows += tally.duplicates as u64;
                false
            }
            (
                NodeWork::Reorder {
                    by, max_time_ns, ..
                },
                WorkState::Reorder { buffers },
            ) => {
                // A row without ordering values cannot be placed: it fails like a filter
                // error, and its batch-mates are held.
                let (mut keys, failed) = kept.evaluate(by.iter(), at.snapshot_ns, "BY", logs);
                refuse_rows(
                    &mut self.processors[index].counters,
                    frame,
                    kept,
                    &failed,
                    nacked,
                );
                kept.drop_rows(&failed, &mut keys, frame.acks.len() > 1);
                let held_acks = keep_units(frame, kept, detached, nacked, cx);
                self.work_changed = true;
                let buffer = buffers.entry(frame.key.clone()).or_default();
                // Held rows keep the relay's columns only: a release goes through
                // `process` again, which adds the branch scope's anew.
                let mut columns = std::mem::take(&mut kept.columns).into_owned();
                columns.truncate(frame.batch.num_columns());
                buffer.hold(
                    (columns, kept.times.take()),
                    keys.into_vec(),
                    kept.rows,
                    at.snapshot_ns,
                    held_acks.into_vec(),
                );
                if let Some(due) = buffer.due_ns(*max_time_ns) {
                    self.note_deadline(Some(nervix_shards::flush::Deadline::Logical(due)), at);
                }
                true
            }
            (NodeWork::Window(window), WorkState::Window { .. }) => {
                if frame.groups.is_some() {
                    self.admit_window_grouped(
                        processor, index, window, frame, kept, detached, at, cx, nacked, logs,
                    );
                } else {
                    self.admit_window(
                        processor, index, window, frame, kept, detached, at, cx, nacked, logs,
                    );
                }
                true
            }
            (NodeWork::Correlate(plan), WorkState::Correlate { .. }) => {
                self.correlate(index, plan, frame, kept, detached, at, cx, nacked, logs);
                true
            }
            _ => unreachable!("a processor's work state is built from its plan"),
        }
    }

    /// Processor `index`'s window arguments over the kept rows of `frame`, every call's in
    /// call order, and the kept rows they failed on (ascending, in kept-row numbers before
    /// the drop): a row whose argument fails is refused (marked in `nacked`, counted) and
    /// dropped from `kept` and from the values returned.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn window_arguments(
        &mut self,
        index: usize,
        window: &crate::runtime::plan::WindowPlan,
        frame: &Frame,
        kept: &mut Kept,
        at: Instant,
        nacked: &mut [bool],
        logs: &mut Vec<String>,
    ) -> (RunArgs, Vec<u32>) {
        let programs = window.calls.iter().flat_map(|call| &call.args);
        let (mut values, failed) =
            kept.evaluate(programs, at.snapshot_ns, "aggregate argument", logs);
        refuse_rows(
            &mut self.processors[index].counters,
            frame,
            kept,
            &failed,
            nacked,
        );
        kept.drop_rows(&failed, &mut values, frame.acks.len() > 1);
        (values, failed)
    }

    /// Admits the kept rows of `frame` into processor `index`'s window for the frame's branch,
    /// after emitting the windows that are due by now.
    #[allow(clippy::too_many_arguments)]
    fn admit_window(
        &mut self,
        processor: &ProcessorPlan,
        index: usize,
        window: &crate::runtime::plan::WindowPlan,
        frame: &Frame,
        kept: &mut Kept,
        detached: bool,
        at: Instant,
        cx: &mut Ctx<'_>,
        nacked: &mut [bool],
        logs: &mut Vec<String>,
    ) {
        // Every call's arguments in call order: the window keeps them as one list.
        let (args, _) = self.window_arguments(index, window, frame, kept, at, nacked, logs);
        let WorkState::Window {
            watermark_ns,
            due: due_index,
            ..
        } = &self.work[index]
        else {
            return;
        };
        // A window a capped pass left due closes before its branch takes more rows, so its
        // record holds exactly the rows it held when it became due.
        let reached_ns = watermark_ns.map_or(at.snapshot_ns, |w| w.max(at.snapshot_ns));
        if due_index.first().is_some_and(|(due, _)| *due <= reached_ns) {
            self.emit_windows(
                processor,
                index,
                Some(&frame.key),
                at.snapshot_ns,
                false,
                at,
                cx,
            );
        }
        let WorkState::Window {
            windows,
            watermark_ns,
            due: due_index,
        } = &mut self.work[index]
        else {
            return;
        };
        let node_watermark = watermark_ns;
        // One lookup: a key clone copies inline bytes or counts a reference, never allocates.
        // A branch without a window opens one here, built aside and moved into the map once
        // it holds rows: nothing admitted, nothing inserted, and the slot is only stored to.
        let mut opened = WindowState::default();
        let (state, vacant) = match windows.entry(frame.key.clone()) {
            Entry::Occupied(entry) => (entry.into_mut(), None),
            Entry::Vacant(entry) => (&mut opened, Some(entry)),
        };
        // Every open window's (due, branch) is in the index already.
        let indexed_due = state.due_ns(window);
        let bytes = crate::runtime::exec::window::args_bytes(&args);
        if kept.rows > 0 && state.would_exceed(window, bytes) {
            // Refused before it changes the window (spec): logged, not acknowledged.
            logs.push(format!(
                "{} rows refused: the branch's window state would exceed its cap ({} bytes held, {} more needed)",
                kept.rows,
                state.bytes(),
                bytes
            ));
            mark_nacked(
                &frame.acks,
                kept.frame_rows().values().iter().copied(),
                nacked,
            );
            self.processors[index].counters.message_errors += kept.rows as u64;
            for (run, failed) in frame.acks.iter().zip(nacked.iter()) {
                if !*failed {
                    cx.transfer(run.root, run.rows as u64, 0);
                }
            }
            if vacant.is_none() {
                self.forget_empty_window(index, &frame.key);
            }
            return;
        }
        let retained_acks = keep_units(frame, kept, detached, nacked, cx);
        // A row's time is its event time, or this execution's snapshot.
        let times = kept
            .event_times()
            .unwrap_or_else(|| Int64Array::from_value(at.snapshot_ns, kept.rows));
        if let Err((error, refused)) = state.admit(times, args, kept.rows, retained_acks) {
            logs.push(format!("rows could not enter the window: {error}"));
            for run in refused {
                cx.nack(run.root);
            }
        }
        // An emission pass drops the windows it empties; one left empty here (no row
        // admitted) is dropped below.
        let holds_rows = !state.is_empty();
        let before = *node_watermark;
        *node_watermark = match (before, state.watermark_ns()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let advanced = *node_watermark > before;
        let due = state.due_ns(window);
        let reached_ns = node_watermark.map_or(at.snapshot_ns, |w| w.max(at.snapshot_ns));
        let branch_due = due.is_some_and(|due| due <= reached_ns);
        if let Some(due) = due.filter(|due| Some(*due) != indexed_due) {
            due_index.insert((due, frame.key.clone()));
        }
        match vacant {
            Some(entry) if holds_rows => {
                entry.insert(opened);
            }
            // Nothing admitted: the window is not opened.
            Some(_) => {}
            None if !holds_rows => self.forget_empty_window(index, &frame.key),
            None => {}
        }
        self.work_changed = true;
        if let Some(due) = due {
            self.note_deadline(Some(nervix_shards::flush::Deadline::Logical(due)), at);
        }
        // The rows may have moved the watermark past a window's end: this branch's, or, when
        // the input watermark advanced, any branch's. A pass for this branch alone when its
        // window is not due would find nothing (most admissions leave their window open).
        if advanced || branch_due {
            let only = (!advanced).then_some(&frame.key);
            self.emit_windows(processor, index, only, at.snapshot_ns, false, at, cx);
        }
    }

    /// Drops branch `key`'s window of processor `index` if it holds nothing (every row of a
    /// batch refused, or an empty batch): only windows with rows are kept.
    fn forget_empty_window(&mut self, index: usize, key: &BranchKey) {
        if let WorkState::Window { windows, .. } = &mut self.work[index] {
            if windows.get(key).is_some_and(WindowState::is_empty) {
                let stored = windows.remove(key).is_some_and(|state| state.is_stored());
                if stored {
                    self.forgotten.push((index, key.clone()));
                }
            }
        }
    }

    /// Emits processor `index`'s windows due at `now_ns` (all of them, or `only` one
    /// branch's); `force` closes every open window now (stop, eviction). `processor` is
    /// processor `index`'s plan.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_windows(
        &mut self,
        processor: &ProcessorPlan,
        index: usize,
        only: Option<&BranchKey>,
        now_ns: i64,
        force: bool,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let NodeWork::Window(window) = &processor.work else {
            return;
        };
        let WorkState::Window {
            windows,
            watermark_ns,
            due,
        } = &mut self.work[index]
        else {
            return;
        };
        let reached_ns = watermark_ns.map_or(now_ns, |w| w.max(now_ns));
        let mut records = Vec::new();
        let forgotten = &mut self.forgotten;
        // The next deadlines of the windows this pass stepped, indexed once it is done: a
        // window it left due (capped at MAX_RECORDS_PER_PASS) waits for the next pass.
        let mut next_due = Vec::new();
        let mut branches = 0usize;
        if only.is_none() {
            // The windows this pass closes are read once before any is closed: each is a
            // cache miss on a large map (Nexmark q5 keeps tens of thousands open), and the
            // closing work between them (reference counts dropped, a locked instruction)
            // would wait for every miss in turn; read back to back, they overlap.
            let warmed = due
                .iter()
                .take_while(|(at_ns, _)| *at_ns <= reached_ns)
                .take(MAX_WINDOW_BRANCHES_PER_PASS)
                .filter_map(|(_, key)| windows.get(key))
                .fold(0usize, |acc, state| acc.wrapping_add(state.warm()));
            std::hint::black_box(warmed);
        }
        let mut asked = only;
        loop {
            // The branch to look at: the one asked for, or the next the index says is due.
            let (key, indexed_ns) = match (only, asked.take()) {
                (Some(_), Some(key)) => (key.clone(), None),
                (Some(_), None) => break,
                (None, _) => {
                    let Some(first) = due.first() else { break };
                    if first.0 > reached_ns || branches >= MAX_WINDOW_BRANCHES_PER_PASS {
                        break;
                    }
                    let (at_ns, key) = due.pop_first().expect("first exists");
                    (key, Some(at_ns))
                }
            };
            let Entry::Occupied(mut entry) = windows.entry(key) else {
                continue;
            };
            // Stale index entries (the window moved on) are dropped here.
            if indexed_ns.is_some() && entry.get().due_ns(window) != indexed_ns {
                continue;
            }
            branches += 1;
            let key = entry.key().clone();
            let state = entry.get_mut();
            let mut emitted = 0usize;
            while state.due_ns(window).is_some() {
                let due_now = state.is_due(window, reached_ns);
                if !force && (!due_now || emitted >= MAX_RECORDS_PER_PASS) {
                    break;
                }
                emitted += 1;
                // The record keeps the minimum input low watermark (spec): the window's start.
                let time_ns = state.start_ns().unwrap_or(reached_ns);
                let result = state.finish(window);
                // Forced (the branch leaves): windows already due close as they would, each
                // with its own record, then the open one closes early with every row left.
                let closes_early = force && !due_now;
                let leaving = if closes_early {
                    state.drain()
                } else {
                    state.step(window)
                };
                records.push(WindowRecord {
                    key: key.clone(),
                    time_ns,
                    result: result.map_err(|error| error.to_string()),
                    leaving,
                });
                if closes_early {
                    break;
                }
            }
            if state.is_empty() {
                // A window that leaves before its first snapshot has nothing stored.
                if entry.remove().is_stored() {
                    forgotten.push((index, key));
                }
            } else if let Some(next) = state.due_ns(window) {
                next_due.push((next, key));
            }
        }
        due.extend(next_due);
        if records.is_empty() {
            return;
        }
        self.release_window_records(index, processor, window, records, at, cx);
    }

    /// Releases held rows into their routes: those due, or one branch's (`force`
    /// Some(Some(key)), a leaving branch). Also expires deduplication keys. A stop (`force`
    /// Some(None)) releases nothing early: reorder buffers, windows and pending correlations
    /// are snapshotted and continue after the restart (see `snapshot`).
    pub(super) fn release_work(
        &mut self,
        force: Option<Option<&BranchKey>>,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        self.release_held(force, false, at, cx);
    }

    /// Flushes everything for a model change's entity pause: as [`Graph::flush_all`], and the
    /// reorderers' ordering buffers are force-released too (spec: "the old ordering buffers
    /// are force-flushed while the input relays are gated").
    pub fn flush_for_pause(&mut self, at: Instant, cx: &mut Ctx<'_>) {
        self.holding = true;
        let at = at.in_domain(&self.plan.pace);
        self.release_collected(Some(None), at, cx);
        self.release_held(Some(None), true, at, cx);
        self.flush_routes(super::flush_order::RouteFlush::Forced(None), at, cx);
    }

    /// [`Graph::release_work`]; `release_reorderers` makes `force` Some(None) force-release
    /// every ordering buffer.
    fn release_held(
        &mut self,
        force: Option<Option<&BranchKey>>,
        release_reorderers: bool,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let plan = self.plan.clone();
        for (index, processor) in plan.processors.iter().enumerate() {
            let mut released: Vec<(BranchKey, crate::runtime::exec::reorder::Released)> =
                Vec::new();
            match (&processor.work, &mut self.work[index]) {
                (
                    NodeWork::Dedup { max_time_ns, .. },
                    WorkState::Dedup(super::dedup::DedupState { spaces, .. }),
                ) => {
                    for space in spaces.values_mut() {
                        space.expire(at.now.logical_ns, *max_time_ns);
                    }
                    let forgotten = &mut self.forgotten;
                    spaces.retain(|key, space| {
                        if space.is_empty() {
                            forgotten.push((index, key.clone()));
                        }
                        !space.is_empty()
                    });
                }
                (NodeWork::Reorder { max_time_ns, .. }, WorkState::Reorder { buffers }) => {
                    for (key, buffer) in buffers.iter_mut() {
                        let forced = match force {
                            Some(None) => release_reorderers,
                            Some(Some(only)) => only == key,
                            None => false,
                        };
                        match buffer.release(at.now.logical_ns, *max_time_ns, forced) {
                            Ok(pieces) => {
                                // Rows left: the next snapshot rewrites what is stored.
                                self.work_changed |= !pieces.is_empty();
                                released.extend(pieces.into_iter().map(|p| (key.clone(), p)))
                            }
                            Err(error) => tracing::error!(
                                processor = %processor.name,
                                %error,
                                "reorderer could not release its rows"
                            ),
                        }
                    }
                    let forgotten = &mut self.forgotten;
                    buffers.retain(|key, buffer| {
                        let held = buffer.held_rows() > 0;
                        if !held {
                            forgotten.push((index, key.clone()));
                        }
                        held
                    });
                }
                (NodeWork::Window(_), WorkState::Window { .. }) => {
                    match force {
                        // A leaving branch closes its window early: it emits what it holds.
                        Some(Some(key)) => self.emit_windows(
                            processor,
                            index,
                            Some(key),
                            at.now.logical_ns,
                            true,
                            at,
                            cx,
                        ),
                        // A stop or an entity pause keeps windows open: their state is
                        // snapshotted (see `snapshot`) and continues after the restart.
                        Some(None) => {}
                        None => self.emit_windows(
                            processor,
                            index,
                            None,
                            at.now.logical_ns,
                            false,
                            at,
                            cx,
                        ),
                    }
                    continue;
                }
                (NodeWork::Correlate(_), WorkState::Correlate { .. }) => {
                    self.release_correlations(index, force, at, cx);
                    continue;
                }
                _ => {}
            }
            let Some(input) = processor.inputs.first() else {
                continue;
            };
            let schema = plan.relays[input.relay].schema.clone();
            for (key, rows) in released {
                let batch = match RecordBatch::try_new(schema.clone(), rows.columns) {
                    Ok(batch) => batch,
                    Err(error) => {
                        tracing::error!(processor = %processor.name, %error, "released rows do not form a batch");
                        for run in &rows.acks {
                            cx.nack(run.root);
                        }
                        continue;
                    }
                };
                let frame = Frame {
                    groups: None,
                    batch,
                    key,
                    acks: rows.acks.into(),
                    times: rows.times,
                };
                self.route_released(index, &frame, at, cx);
            }
        }
    }

    /// Runs processor `index`'s routes on rows its node work released.
    pub(super) fn route_released(
        &mut self,
        index: usize,
        frame: &Frame,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let plan = self.plan.clone();
        let processor = &plan.processors[index];
        match self.resolve_state(&processor.state, &frame.key) {
            super::Resolution::Bound(columns) => self.bound_state = columns,
            // The rows passed the state gate when they arrived; state that left since then
            // reads as absent (routes reading it fail per row under their error policy).
            super::Resolution::Skip | super::Resolution::Wait => self.bound_state.clear(),
        }
        self.releasing = true;
        self.process(
            &plan,
            NodeRef::Processor(index),
            frame,
            None,
            None,
            &processor.routes,
            None,
            processor.detached,
            at,
            cx,
        );
        self.releasing = false;
        self.bound_state.clear();
    }

    /// The `fields` (positions in the key) of branch `key` as one-row columns.
    /// The key fields `scope` reads, each broadcast over `rows` rows (`plan::branch_scope`).
    pub(super) fn branch_scope_columns(
        &mut self,
        scope: &crate::runtime::plan::BranchScope,
        key: &BranchKey,
        rows: usize,
    ) -> Result<Vec<ArrayRef>, String> {
        let values = self.branch_columns(Some(scope.branch), &scope.key_positions, key)?;
        if values.len() != scope.key_positions.len() {
            return Err(format!(
                "the frame's branch key is not one of '{}'",
                self.plan.branches[scope.branch].name
            ));
        }
        if rows == 1 {
            return Ok(values);
        }
        let first = arrow_array::UInt32Array::from(vec![0u32; rows]);
        values
            .iter()
            .map(|value| {
                arrow_select::take::take(value.as_ref(), &first, None).map_err(|e| e.to_string())
            })
            .collect()
    }

    pub(super) fn branch_columns(
        &mut self,
        branch: Option<usize>,
        fields: &[usize],
        key: &BranchKey,
    ) -> Result<Vec<ArrayRef>, String> {
        let (Some(branch), BranchKey::Key(bytes)) = (branch, key) else {
            return Ok(Vec::new());
        };
        if fields.is_empty() {
            return Ok(Vec::new());
        }
        if let Some((decoded_branch, decoded_key, values)) = &self.last_decoded {
            if *decoded_branch == branch && decoded_key == key {
                return Ok(fields.iter().map(|field| values[*field].clone()).collect());
            }
        }
        let values = self
            .key_encoder(branch)?
            .decode(bytes)
            .map_err(|error| error.to_string())?;
        let picked = fields.iter().map(|field| values[*field].clone()).collect();
        self.last_decoded = Some((branch, key.clone(), values));
        Ok(picked)
    }

    /// The shard's key encoder of branch declaration `branch`, made on first use.
    pub(super) fn key_encoder(&mut self, branch: usize) -> Result<&mut BranchKeyEncoder, String> {
        Ok(match self.encoders.entry(branch) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(
                BranchKeyEncoder::new(&self.plan.branches[branch].key_fields)
                    .map_err(|error| error.to_string())?,
            ),
        })
    }

    /// The earliest instant held rows become due, domain ns.
    pub(super) fn work_deadline(&self) -> Option<i64> {
        self.plan
            .processors
            .iter()
            .zip(&self.work)
            .enumerate()
            .filter_map(
                |(index, (processor, state))| match (&processor.work, state) {
                    (NodeWork::Reorder { max_time_ns, .. }, WorkState::Reorder { buffers }) => {
                        buffers
                            .values()
                            .filter_map(|b| b.due_ns(*max_time_ns))
                            .min()
                    }
                    (
                        NodeWork::Window(_),
                        WorkState::Window {
                            due, watermark_ns, ..
                        },
                    ) => window_deadline(due.first().map(|(at_ns, _)| *at_ns), *watermark_ns),
                    (NodeWork::Correlate(_), WorkState::Correlate { due, .. }) => {
                        due.first().map(|(at_ns, _)| *at_ns)
                    }
                    (NodeWork::Generate { source, .. }, WorkState::Generate(_)) => {
                        self.generator_deadline(index, *source)
                    }
                    _ => None,
                },
            )
            .min()
    }

    /// A branch left: its deduplication keys go (its reorder buffers were force-released and
    /// its pending correlations ended), and so do their stored snapshots.
    pub(super) fn drop_work_state(&mut self, key: &BranchKey) {
        for (index, state) in self.work.iter_mut().enumerate() {
            let stored = match state {
                WorkState::Dedup(super::dedup::DedupState { spaces, .. }) => {
                    spaces.remove(key).is_some()
                }
                WorkState::Reorder { buffers } => buffers.remove(key).is_some(),
                // A window that leaves before its first snapshot has nothing stored.
                WorkState::Window { windows, .. } => {
                    windows.remove(key).is_some_and(|state| state.is_stored())
                }
                WorkState::Correlate { branches, .. } => branches.remove(key).is_some(),
                // A generator skips branches whose state left when their turn comes.
                WorkState::Pass | WorkState::Generate(_) => false,
            };
            if stored {
                self.forgotten.push((index, key.clone()));
            }
        }
    }

    /// Rows the reorderers and windows hold on this shard.
    pub fn held_rows(&self) -> usize {
        self.work
            .iter()
            .map(|state| match state {
                WorkState::Reorder { buffers } => buffers.values().map(|b| b.held_rows()).sum(),
                WorkState::Window { windows, .. } => {
                    windows.values().map(|w| w.retained_rows()).sum()
                }
                WorkState::Correlate { branches, .. } => {
                    branches.values().map(|b| b.pending_rows()).sum()
                }
                _ => 0,
            })
            .sum()
    }

    /// Per deduplicator on this shard: (processor index, keys kept, keys held for a payload
    /// not yet resolved).
    pub fn dedup_keys(&self) -> Vec<(usize, usize, usize)> {
        self.work
            .iter()
            .enumerate()
            .filter_map(|(index, state)| match state {
                WorkState::Dedup(super::dedup::DedupState { spaces, .. }) => {
                    let (live, held) = spaces
                        .values()
                        .fold((0, 0), |(live, held), s| (live + s.len(), held + s.held()));
                    Some((index, live - held, held))
                }
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::window_deadline;

    #[test]
    fn a_window_the_watermark_passed_is_due_at_once_whatever_the_clock() {
        assert_eq!(window_deadline(None, Some(50)), None);
        // Not reached by the watermark: due at its end, on the domain clock.
        assert_eq!(window_deadline(Some(100), None), Some(100));
        assert_eq!(window_deadline(Some(100), Some(99)), Some(100));
        // Reached (exactly or beyond): a pass is due now.
        assert_eq!(window_deadline(Some(100), Some(100)), Some(i64::MIN));
        assert_eq!(window_deadline(Some(100), Some(30_000)), Some(i64::MIN));
    }
}
