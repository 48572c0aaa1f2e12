//! The retained rows of one WINDOW PROCESSOR branch and the window over them (spec "Window
//! processor").
//!
//! Timing: a row's time is its event time (`TIMESTAMP AT`, carried by its frame) or else the
//! execution snapshot of the batch that delivered it. A window begins at the time of the first
//! row it retains and is due `WIDTH` later, once the input watermark (the latest row time
//! admitted) or the domain clock reaches that instant. When due, the retained rows before the
//! window's end are folded into fresh accumulators, one per aggregate call, run by run, and the
//! window emits one record. Stepping then removes the rows strictly before `start + STEP`
//! (rows exactly at the cutoff remain) and the next window starts there (or at the first later
//! step whose window holds a retained row: a window of no rows emits nothing), or at the next
//! row when nothing remains. Each retained run is kept sorted by time, so both cuts are binary
//! searches and folds read contiguous slices. Because emission always refolds what is
//! retained, no aggregate has to support removal, and a window's result is the same however
//! its rows were batched (exact for counts and integer sums; float sums are compensated per
//! run, spec "Admission").
//!
//! Acknowledgements: a retained row keeps its unit until it steps out of the last window that
//! contains it, which happens right after that window emitted; emitted records carry no
//! acknowledgement of their own (documented in docs/decisions.md).
//!
//! Memory: the state of a branch is the retained argument arrays (their logical Arrow bytes:
//! a slice counts its own rows, not the buffer it shares with other branches) plus the fixed
//! reservation of its sketches; MAX STATE SIZE refuses a batch that would exceed it, and
//! a window without one is capped at
//! [`UNDECLARED_STATE_CAP_BYTES`](crate::runtime::plan::UNDECLARED_STATE_CAP_BYTES).

use arrow_array::{downcast_primitive_array, make_array, Array, ArrayRef, Int64Array, RecordBatch};
use arrow_buffer::{Buffer, ScalarBuffer};
use arrow_data::ArrayData;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use smallvec::SmallVec;

use super::state_codec::put_u32;
use crate::runtime::aggregate::{Accumulator, AggregateError, Finished};
use crate::runtime::frame::{permuted_runs, split_runs, AckRun, AckRuns};
use crate::runtime::plan::WindowPlan;

/// Every call's value-argument arrays of one run, in call order (call `i`'s are its
/// `args.len()` after those of the calls before it): inline for windows of up to two
/// arguments in all, the common case, so a run costs no allocation of its own for them.
pub type RunArgs = SmallVec<[ArrayRef; 2]>;

/// One argument's rows in a retained run. A column of `I64` values without a validity buffer
/// (a key or a count's argument, the common case) is kept as its values alone, as the run's
/// times are: the array that carried it was allocated per frame by the route's grouping, and
/// keeping that array for the window's life (about a second of Nexmark q5) left long-lived
/// arrays among the per-frame ones in the allocator's pages, so new per-frame arrays landed on
/// free slots long out of the cache. Folding and snapshots see an array either way.
#[derive(Clone)]
enum RunArg {
    Array(ArrayRef),
    Int64(ScalarBuffer<i64>),
}

/// The type of [`RunArg::Int64`]'s values.
static INT64: DataType = DataType::Int64;

impl RunArg {
    /// How a run keeps `array` (module docs of [`RunArg`]).
    fn kept(array: ArrayRef) -> RunArg {
        match array.as_any().downcast_ref::<Int64Array>() {
            Some(values) if values.nulls().is_none() => RunArg::Int64(values.values().clone()),
            _ => RunArg::Array(array),
        }
    }

    /// How a run keeps rows `offset..offset + len` of `array`: [`RunArg::kept`] of that
    /// slice, without building the slice's array when the values are kept alone.
    fn kept_range(array: &ArrayRef, offset: usize, len: usize) -> RunArg {
        match array.as_any().downcast_ref::<Int64Array>() {
            Some(values) if values.nulls().is_none() => {
                RunArg::Int64(values.values().slice(offset, len))
            }
            _ => RunArg::Array(array.slice(offset, len)),
        }
    }

    fn len(&self) -> usize {
        match self {
            RunArg::Array(array) => array.len(),
            RunArg::Int64(values) => values.len(),
        }
    }

    fn data_type(&self) -> &DataType {
        match self {
            RunArg::Array(array) => array.data_type(),
            RunArg::Int64(_) => &INT64,
        }
    }

    fn null_count(&self) -> usize {
        match self {
            RunArg::Array(array) => array.null_count(),
            RunArg::Int64(_) => 0,
        }
    }

    fn slice(&self, offset: usize, len: usize) -> RunArg {
        match self {
            RunArg::Array(array) => RunArg::Array(array.slice(offset, len)),
            RunArg::Int64(values) => RunArg::Int64(values.slice(offset, len)),
        }
    }

    /// The rows as an array (one is built for `Int64`: short-lived, for a fold or a snapshot).
    fn to_array(&self) -> ArrayRef {
        match self {
            RunArg::Array(array) => array.clone(),
            RunArg::Int64(values) => std::sync::Arc::new(Int64Array::new(values.clone(), None)),
        }
    }

    /// Their logical Arrow bytes, as [`args_bytes`] counts the array they came from (a
    /// window's MAX STATE SIZE is checked against that before it admits them).
    fn logical_bytes(&self) -> u64 {
        match self {
            RunArg::Array(array) => {
                crate::runtime::logical_bytes::column_logical_bytes(array.as_ref())
            }
            RunArg::Int64(values) => (values.len() * std::mem::size_of::<i64>()) as u64,
        }
    }

    /// The values of a primitive argument without nulls, exactly its rows.
    fn plain_values(&self) -> Option<&[u8]> {
        match self {
            RunArg::Array(array) => plain_values(array.as_ref()),
            RunArg::Int64(values) => Some(values.inner().as_slice()),
        }
    }
}

/// Rows of one admitted batch: their argument values per call, as evaluated on admission.
///
/// Kept small and inline (times as a bare buffer, arguments and acknowledgement runs inline
/// when few): a branch's first run lives in its window's own slot, so closing a window that
/// holds one run — most windows of a wide fan-out such as Nexmark q5's — reads the window's
/// slot and its rows, not a run list, an argument list and a run list of acknowledgements
/// each allocated apart.
struct Retained {
    /// Per row, its time (ns), ascending.
    times: ScalarBuffer<i64>,
    /// Every call's value arguments in call order, each `rows` long.
    args: SmallVec<[RunArg; 2]>,
    rows: usize,
    bytes: u64,
    acks: AckRuns,
}

impl Retained {
    /// How many leading rows are before `instant`. `i64::MAX` stands for past the end of
    /// time (a window end or step cutoff that saturated), before which every row is: a row
    /// timed at `i64::MAX` would otherwise never leave its window, and the window would emit
    /// again and again without moving.
    fn rows_before(&self, instant: i64) -> usize {
        if instant == i64::MAX {
            return self.rows;
        }
        let times = &self.times;
        // Most runs lie wholly before the cut (every run of a tumbling window): no search.
        if times.last().is_some_and(|last| *last < instant) {
            return times.len();
        }
        times.partition_point(|t| *t < instant)
    }
}

/// Each call's value arguments in a run's flat list ([`Retained::args`]): call `i` of `plan`
/// reads `args[ranges[i]]`.
fn call_ranges(plan: &WindowPlan) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    plan.calls.iter().scan(0usize, |offset, call| {
        let range = *offset..*offset + call.args.len();
        *offset = range.end;
        Some(range)
    })
}

/// One branch's window.
#[derive(Default)]
pub struct WindowState {
    /// Oldest first; the first run inline (see [`Retained`]).
    runs: SmallVec<[Retained; 1]>,
    start_ns: Option<i64>,
    /// The latest row time admitted.
    watermark_ns: Option<i64>,
    bytes: u64,
    /// Changed since its last snapshot.
    dirty: bool,
    /// A snapshot encoded it (or it was restored from one): only then does its leaving have
    /// a stored entry to delete.
    stored: bool,
}

/// The snapshot format version (first byte of an encoded window): the run lengths, then the
/// runs' rows, either as their plain values or as one Arrow IPC stream holding each run as a
/// batch (see [`RowsEncoding`]).
const SNAPSHOT_VERSION: u8 = 4;
/// The previous version, read back: the run lengths, then one IPC stream (no encoding byte).
const SNAPSHOT_VERSION_IPC_ONLY: u8 = 3;

/// How a version-4 snapshot holds its retained rows (the byte after the run lengths).
#[repr(u8)]
enum RowsEncoding {
    /// One Arrow IPC stream, one batch per run: any column type, nulls included.
    Ipc = 0,
    /// Per run, per column (the times, then each call's arguments), the rows' little-endian
    /// values back to back. Used when every column is a fixed-width primitive of the type the
    /// window model expects and holds no null: the types come from the model, so nothing but
    /// the values is written. A window of a few small runs (thousands of branches of a few
    /// rows, as Nexmark q5 keeps) otherwise pays the IPC writer's schema and message framing
    /// on every snapshot — most of its snapshot cost.
    Values = 1,
}

/// Runs preallocated when reading a snapshot's run lengths (more still read; a corrupt count
/// cannot reserve unbounded memory up front).
const MAX_RESTORED_RUNS: usize = 4096;

/// Why a window snapshot cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(
        "the snapshot was taken under another window model (width, step or aggregates changed)"
    )]
    OtherModel,
    #[error("the snapshot is truncated or not a window snapshot")]
    Malformed,
    #[error(
        "the snapshot has format version {found}; this build reads versions {SNAPSHOT_VERSION_IPC_ONLY} and {SNAPSHOT_VERSION}"
    )]
    Version { found: u8 },
    #[error("the snapshot's retained rows cannot be decoded: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("the snapshot's rows are damaged: {0}")]
    Rows(#[from] nervix_net::batch::BatchDefect),
    #[error(
        "the snapshot was taken under another processor model (input schema or expressions changed)"
    )]
    OtherStateModel,
    #[error("the state takes {bytes} bytes encoded, over the {limit}-byte snapshot limit")]
    TooLarge { bytes: usize, limit: usize },
}

/// The logical Arrow bytes `args` hold (values, offsets and validity of their own rows).
pub fn args_bytes(args: &[ArrayRef]) -> u64 {
    // Logical bytes: an argument may be a slice of a buffer other branches' rows share (a
    // reingestor's fan-out), and the branch holds only its rows of it.
    args.iter()
        .map(|a| crate::runtime::logical_bytes::column_logical_bytes(a.as_ref()))
        .sum()
}

/// One branch's rows of a grouped frame's arguments, kept as a run keeps them ([`RunArg`]),
/// with their logical bytes (as [`args_bytes`] counts a slice of their own): built once, so
/// the MAX STATE SIZE check and the run that is kept read the same values.
pub struct RangeArgs {
    args: SmallVec<[RunArg; 2]>,
    bytes: u64,
}

impl RangeArgs {
    /// Rows `offset..offset + len` of every one of `args`; None when one is shorter.
    pub fn new(args: &[ArrayRef], offset: usize, len: usize) -> Option<RangeArgs> {
        if args.iter().any(|a| offset + len > a.len()) {
            return None;
        }
        let args: SmallVec<[RunArg; 2]> = args
            .iter()
            .map(|a| RunArg::kept_range(a, offset, len))
            .collect();
        let bytes = args.iter().map(RunArg::logical_bytes).sum();
        Some(RangeArgs { args, bytes })
    }

    pub fn logical_bytes(&self) -> u64 {
        self.bytes
    }
}

/// `times` and `args` in time order (stable: rows of one instant keep their admission order,
/// which FIRST, LAST and ties go by), with the order taken.
fn by_time(
    times: &Int64Array,
    args: &[ArrayRef],
) -> Result<(Int64Array, RunArgs, arrow_array::UInt32Array), arrow_schema::ArrowError> {
    let mut positions: Vec<u32> = (0..times.len() as u32).collect();
    positions.sort_by_key(|row| times.value(*row as usize));
    let order = arrow_array::UInt32Array::from(positions);
    let times = arrow_select::take::take(times, &order, None)?
        .as_any()
        .downcast_ref::<Int64Array>()
        .cloned()
        .ok_or_else(|| arrow_schema::ArrowError::CastError("times".into()))?;
    let args = args
        .iter()
        .map(|array| arrow_select::take::take(array.as_ref(), &order, None))
        .collect::<Result<RunArgs, _>>()?;
    Ok((times, args, order))
}

/// Where the window after a step begins: at the step `cutoff`, or, when the earliest retained
/// row is at or past that window's end, at the first later step that holds it. A window of
/// the step grid that holds no row would emit a record of nothing (a branch whose next row
/// came more than a width after its window, admitted before that window closed).
fn next_start(plan: &WindowPlan, cutoff: i64, earliest_ns: i64) -> i64 {
    let width = plan.width_ns.min(i64::MAX as u64) as i128;
    let step = plan.step_ns.min(i64::MAX as u64) as i128;
    let past_end = earliest_ns as i128 - (cutoff as i128 + width);
    if past_end < 0 || step <= 0 {
        return cutoff;
    }
    let steps = past_end / step + 1;
    (cutoff as i128 + steps * step).min(i64::MAX as i128) as i64
}

impl WindowState {
    /// Bytes the retained rows hold (without the sketches' reservation).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn retained_rows(&self) -> usize {
        self.runs.iter().map(|r| r.rows).sum()
    }

    /// Whether it retains no row, read without visiting its runs (a run always holds rows:
    /// admission keeps none of zero rows, a step drops the runs it empties).
    pub fn is_empty(&self) -> bool {
        debug_assert!(
            self.runs.iter().all(|run| run.rows > 0),
            "an empty run kept"
        );
        self.runs.is_empty()
    }

    /// Reads what closing the window reads first — its runs, their last times and argument
    /// arrays — and returns a value depending on all of it. An emission pass reads the
    /// windows it is about to close this way, one after another with nothing between them
    /// that waits for memory, so their cache misses overlap instead of each holding up the
    /// closing work.
    pub fn warm(&self) -> usize {
        self.runs
            .iter()
            .map(|run| {
                let last = run.times.last().copied().unwrap_or_default() as usize;
                run.args.iter().map(RunArg::len).sum::<usize>() ^ last
            })
            .fold(self.runs.len(), usize::wrapping_add)
    }

    /// When the open window began (its first retained row's time), domain ns.
    pub fn start_ns(&self) -> Option<i64> {
        self.start_ns
    }

    /// When the open window is due, domain ns.
    pub fn due_ns(&self, plan: &WindowPlan) -> Option<i64> {
        self.start_ns
            .map(|start| start.saturating_add(plan.width_ns.min(i64::MAX as u64) as i64))
    }

    /// The latest row time this branch admitted.
    pub fn watermark_ns(&self) -> Option<i64> {
        self.watermark_ns
    }

    /// Whether the open window is due when the domain clock (or the processor's input
    /// watermark, whichever is later) reads `clock_ns`.
    pub fn is_due(&self, plan: &WindowPlan, clock_ns: i64) -> bool {
        let reached = self.watermark_ns.map_or(clock_ns, |w| w.max(clock_ns));
        self.due_ns(plan).is_some_and(|due| due <= reached)
    }

    /// Whether adding `bytes` would take the branch over MAX STATE SIZE.
    pub fn would_exceed(&self, plan: &WindowPlan, bytes: u64) -> bool {
        plan.reserved_bytes + self.bytes + bytes > plan.branch_cap_bytes()
    }

    /// Retains `rows` rows with their `times` and evaluated arguments (every call's, in call
    /// order, as [`Retained::args`] keeps them). Rows it cannot take
    /// (their arrays disagree on length) come back as an error with their acknowledgement
    /// runs, for the caller to refuse.
    pub fn admit(
        &mut self,
        times: Int64Array,
        args: RunArgs,
        rows: usize,
        acks: AckRuns,
    ) -> Result<(), (arrow_schema::ArrowError, AckRuns)> {
        if rows == 0 {
            return Ok(());
        }
        let lengths_agree = times.len() == rows && args.iter().all(|a| a.len() == rows);
        if !lengths_agree {
            let error = arrow_schema::ArrowError::InvalidArgumentError(format!(
                "{rows} rows with arrays of other lengths"
            ));
            return Err((error, acks));
        }
        let (times, args, acks) = if times.values().is_sorted() {
            (times, args, acks)
        } else {
            match by_time(&times, &args) {
                Ok((times, args, order)) => (
                    times,
                    args,
                    permuted_runs(&acks, &order).into_iter().collect(),
                ),
                Err(error) => return Err((error, acks)),
            }
        };
        let args: SmallVec<[RunArg; 2]> = args.into_iter().map(RunArg::kept).collect();
        // Counted as a step counts the rows it keeps.
        let bytes = args.iter().map(RunArg::logical_bytes).sum();
        self.retain(times, args, bytes, acks);
        Ok(())
    }

    /// [`WindowState::admit`] of rows `offset..offset + len` of a grouped frame, whose times
    /// are `times` (as long as the frame) and whose arguments `args` took those rows: the rows
    /// of one branch. A run in time order keeps slices of the frame's buffers without building
    /// an array per branch.
    pub fn admit_range(
        &mut self,
        times: &Int64Array,
        args: RangeArgs,
        (offset, len): (usize, usize),
        acks: AckRuns,
    ) -> Result<(), (arrow_schema::ArrowError, AckRuns)> {
        if len == 0 {
            return Ok(());
        }
        if offset + len > times.len() {
            let error = arrow_schema::ArrowError::InvalidArgumentError(format!(
                "rows {offset}..{} past the frame's times",
                offset + len
            ));
            return Err((error, acks));
        }
        let run_times = times.slice(offset, len);
        if !run_times.values().is_sorted() {
            let run_args = args.args.iter().map(RunArg::to_array).collect();
            return self.admit(run_times, run_args, len, acks);
        }
        self.retain(run_times, args.args, args.bytes, acks);
        Ok(())
    }

    /// Keeps one run of rows in time order (at least one row) whose arguments hold `bytes`.
    fn retain(
        &mut self,
        times: Int64Array,
        args: SmallVec<[RunArg; 2]>,
        bytes: u64,
        acks: AckRuns,
    ) {
        let rows = times.len();
        self.bytes += bytes;
        self.dirty = true;
        let (first, last) = (times.value(0), times.value(rows - 1));
        self.start_ns.get_or_insert(first);
        self.watermark_ns = Some(self.watermark_ns.map_or(last, |w| w.max(last)));
        self.runs.push(Retained {
            times: times.into_parts().1,
            args,
            rows,
            bytes,
            acks,
        });
    }

    /// The open window's result: one one-row array per call, or the first call that failed.
    pub fn finish(&self, plan: &WindowPlan) -> Result<Vec<Finished>, AggregateError> {
        let end = self.due_ns(plan).unwrap_or(i64::MIN);
        plan.calls
            .iter()
            .zip(call_ranges(plan))
            .map(|(call, args)| {
                let mut accumulator = Accumulator::new(&call.call);
                for run in &self.runs {
                    let within = run.rows_before(end);
                    if within > 0 {
                        // A run short of arguments folds what it has: the accumulator then
                        // reports the count that disagrees.
                        let values: RunArgs = run
                            .args
                            .get(args.clone())
                            .map(|values| values.iter().map(RunArg::to_array).collect())
                            .unwrap_or_default();
                        accumulator.fold(&values, &run.times, 0..within);
                    }
                }
                accumulator.finish()
            })
            .collect()
    }

    /// Steps past the emitted window: the rows before `start + STEP` leave (their
    /// acknowledgement runs are returned), the next window starts at the cutoff, or at the
    /// next row when nothing remains.
    pub fn step(&mut self, plan: &WindowPlan) -> Vec<AckRun> {
        let Some(start) = self.start_ns else {
            return Vec::new();
        };
        let cutoff = start.saturating_add(plan.step_ns.min(i64::MAX as u64) as i64);
        let mut leaving = Vec::new();
        for run in &mut self.runs {
            let gone = run.rows_before(cutoff);
            if gone == 0 {
                continue;
            }
            if gone == run.rows {
                // The whole run leaves (every run, in a tumbling window): no slicing, the
                // run is dropped below.
                leaving.extend(run.acks.drain(..));
                self.bytes -= run.bytes;
                run.rows = 0;
                continue;
            }
            let (left, rest) = split_runs(&run.acks, gone);
            leaving.extend(left);
            run.acks = rest;
            let kept = run.rows - gone;
            run.times = run.times.slice(gone, kept);
            for arg in &mut run.args {
                *arg = arg.slice(gone, kept);
            }
            // The kept rows' own bytes: rows differ in size (strings), so a share by row
            // count would drift from what the rows hold.
            let kept_bytes: u64 = run.args.iter().map(RunArg::logical_bytes).sum();
            self.bytes -= run.bytes.saturating_sub(kept_bytes);
            run.bytes = kept_bytes.min(run.bytes);
            run.rows = kept;
        }
        self.runs.retain(|run| run.rows > 0);
        self.dirty = true;
        self.start_ns = if self.runs.is_empty() {
            self.watermark_ns = None;
            None
        } else {
            let earliest = self.runs.iter().map(|run| run.times[0]).min();
            Some(next_start(plan, cutoff, earliest.unwrap_or(cutoff)))
        };
        leaving
    }

    /// Closes the window early (stop, branch eviction): every retained row leaves.
    pub fn drain(&mut self) -> Vec<AckRun> {
        self.start_ns = None;
        self.watermark_ns = None;
        self.bytes = 0;
        self.dirty = true;
        self.runs.drain(..).flat_map(|run| run.acks).collect()
    }

    /// Whether the window changed since its last snapshot.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Whether a snapshot may have stored the window (one encoded it, or it was restored):
    /// a window that leaves before its first snapshot has no stored entry to delete.
    pub fn is_stored(&self) -> bool {
        self.stored
    }

    /// Encodes the window for a snapshot (empty when it holds nothing, which deletes the
    /// stored entry) and moves the acknowledgement runs of every retained row into `acks`:
    /// once the snapshot is durable, those rows are safe and the caller acknowledges them. A
    /// window that cannot be encoded keeps its runs (and stays changed) for the next snapshot.
    /// `schema` carries the snapshot schema from one window to the next of a snapshot pass
    /// (a processor's windows retain the same argument types, so it is built once).
    pub fn snapshot(
        &mut self,
        plan: &WindowPlan,
        schema: &mut Option<SchemaRef>,
        acks: &mut Vec<AckRun>,
    ) -> Result<Vec<u8>, SnapshotError> {
        let bytes = self.encode(plan, schema)?;
        self.dirty = false;
        self.stored = true;
        for run in &mut self.runs {
            acks.extend(run.acks.drain(..));
        }
        Ok(bytes)
    }

    /// The snapshot encoding (format [`SNAPSHOT_VERSION`]).
    fn encode(
        &self,
        plan: &WindowPlan,
        schema: &mut Option<SchemaRef>,
    ) -> Result<Vec<u8>, SnapshotError> {
        let Some(start) = self.start_ns else {
            return Ok(Vec::new());
        };
        // Room for the header, the run lengths and the stream's schema message besides the rows.
        let mut out = Vec::with_capacity(512 + 4 * self.runs.len() + self.bytes as usize);
        out.push(SNAPSHOT_VERSION);
        out.extend_from_slice(&plan.model.to_le_bytes());
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&(self.runs.len() as u32).to_le_bytes());
        for run in &self.runs {
            out.extend_from_slice(&(run.rows as u32).to_le_bytes());
        }
        let length_at = out.len() + 1;
        if self.runs.iter().all(|run| writes_plain(plan, run)) {
            out.push(RowsEncoding::Values as u8);
            out.extend_from_slice(&[0; 4]);
            for values in self.runs.iter().flat_map(run_values) {
                out.extend_from_slice(values);
            }
        } else {
            out.push(RowsEncoding::Ipc as u8);
            out.extend_from_slice(&[0; 4]);
            self.write_ipc(&mut out, schema)?;
        }
        // The rows' length, patched in once they are written.
        let mut length = Vec::with_capacity(4);
        put_u32(&mut length, out.len() - length_at - 4)?;
        out[length_at..length_at + 4].copy_from_slice(&length);
        Ok(out)
    }

    /// Appends the runs as one IPC stream, one batch per run: the schema is written once per
    /// window, not once per run (a window retaining many admitted batches carries many runs).
    fn write_ipc(
        &self,
        out: &mut Vec<u8>,
        schema: &mut Option<SchemaRef>,
    ) -> Result<(), SnapshotError> {
        let runs: Vec<Vec<ArrayRef>> = self
            .runs
            .iter()
            .map(|run| {
                let times: ArrayRef = std::sync::Arc::new(Int64Array::new(run.times.clone(), None));
                std::iter::once(times)
                    .chain(run.args.iter().map(RunArg::to_array))
                    .collect()
            })
            .collect();
        let Some(first) = runs.first() else {
            return Ok(());
        };
        let schema = match schema {
            Some(schema) if same_types(schema, first) => schema.clone(),
            _ => schema.insert(snapshot_schema(first)).clone(),
        };
        let mut writer = StreamWriter::try_new(out, &schema)?;
        for columns in runs {
            writer.write(&RecordBatch::try_new(schema.clone(), columns)?)?;
        }
        writer.finish()?;
        Ok(())
    }

    /// A window restored from `bytes` (a [`WindowState::snapshot`] under the same `plan`);
    /// its rows carry no acknowledgement (they were acknowledged when it was taken).
    pub fn restore(plan: &WindowPlan, bytes: &[u8]) -> Result<WindowState, SnapshotError> {
        let mut at = 0usize;
        let mut take = |n: usize| -> Result<&[u8], SnapshotError> {
            let slice = bytes.get(at..at + n).ok_or(SnapshotError::Malformed)?;
            at += n;
            Ok(slice)
        };
        let word = |b: &[u8]| -> [u8; 8] { b.try_into().unwrap_or([0; 8]) };
        let version = take(1)?[0];
        if version != SNAPSHOT_VERSION && version != SNAPSHOT_VERSION_IPC_ONLY {
            return Err(SnapshotError::Version { found: version });
        }
        if u64::from_le_bytes(word(take(8)?)) != plan.model {
            return Err(SnapshotError::OtherModel);
        }
        let start = i64::from_le_bytes(word(take(8)?));
        let count = u32::from_le_bytes(take(4)?.try_into().unwrap_or([0; 4])) as usize;
        let mut state = WindowState {
            start_ns: Some(start),
            ..WindowState::default()
        };
        let mut rows = Vec::with_capacity(count.min(MAX_RESTORED_RUNS));
        for _ in 0..count {
            rows.push(u32::from_le_bytes(take(4)?.try_into().unwrap_or([0; 4])) as usize);
        }
        let encoding = if version == SNAPSHOT_VERSION_IPC_ONLY {
            RowsEncoding::Ipc as u8
        } else {
            take(1)?[0]
        };
        let len = u32::from_le_bytes(take(4)?.try_into().unwrap_or([0; 4])) as usize;
        let body = take(len)?;
        if at != bytes.len() {
            // Bytes after the rows: not a snapshot this build wrote.
            return Err(SnapshotError::Malformed);
        }
        if encoding == RowsEncoding::Values as u8 {
            let mut values = body;
            for rows in rows {
                let mut columns = Vec::with_capacity(1 + plan.calls.len());
                for ty in column_types(plan) {
                    let width = ty.primitive_width().ok_or(SnapshotError::Malformed)?;
                    let bytes = rows.checked_mul(width).ok_or(SnapshotError::Malformed)?;
                    let (column, rest) = values
                        .split_at_checked(bytes)
                        .ok_or(SnapshotError::Malformed)?;
                    columns.push(plain_array(ty, column, rows)?);
                    values = rest;
                }
                state.admit_restored_columns(plan, columns, rows)?;
            }
            if !values.is_empty() {
                return Err(SnapshotError::Malformed);
            }
        } else if encoding == RowsEncoding::Ipc as u8 {
            let batches = read_runs(body)?;
            if batches.len() != rows.len() {
                return Err(SnapshotError::Malformed);
            }
            for (batch, rows) in batches.into_iter().zip(rows) {
                if batch.num_rows() != rows {
                    return Err(SnapshotError::Malformed);
                }
                state.admit_restored_columns(plan, batch.columns().to_vec(), rows)?;
            }
        } else {
            return Err(SnapshotError::Malformed);
        }
        state.start_ns = if state.runs.is_empty() {
            None
        } else {
            Some(start)
        };
        state.dirty = false;
        state.stored = true;
        Ok(state)
    }

    /// Admits one restored run of `rows` rows: its first column the row times, then each
    /// call's arguments.
    fn admit_restored_columns(
        &mut self,
        plan: &WindowPlan,
        columns: Vec<ArrayRef>,
        rows: usize,
    ) -> Result<(), SnapshotError> {
        if columns.iter().any(|column| column.len() != rows) {
            return Err(SnapshotError::Malformed);
        }
        let mut columns = columns.into_iter();
        let times = columns
            .next()
            .and_then(|t| t.as_any().downcast_ref::<Int64Array>().cloned())
            .ok_or(SnapshotError::Malformed)?;
        let arguments: usize = plan.calls.iter().map(|call| call.args.len()).sum();
        let args: Vec<ArrayRef> = columns.collect();
        if args.len() != arguments {
            return Err(SnapshotError::Malformed);
        }
        self.admit(times, args.into(), rows, AckRuns::new())
            .map_err(|(error, _)| SnapshotError::Arrow(error))?;
        Ok(())
    }
}

/// The types of a snapshot's columns under `plan`: the row times, then each call's arguments.
fn column_types(plan: &WindowPlan) -> impl Iterator<Item = &DataType> {
    std::iter::once(&DataType::Int64)
        .chain(plan.calls.iter().flat_map(|call| call.call.arg_types()))
}

/// Whether `run` can be written as plain values ([`RowsEncoding::Values`]): every argument a
/// fixed-width primitive of the model's type, without nulls (the row times always are: a bare
/// `I64` buffer).
fn writes_plain(plan: &WindowPlan, run: &Retained) -> bool {
    let mut types = column_types(plan).skip(1);
    run.args.iter().all(|column| {
        types.next().is_some_and(|ty| {
            column.data_type() == ty && column.null_count() == 0 && column.plain_values().is_some()
        })
    }) && types.next().is_none()
}

/// A run's plain values in snapshot column order: the row times, then each call's arguments
/// (a run [`writes_plain`] accepts).
fn run_values(run: &Retained) -> impl Iterator<Item = &[u8]> + '_ {
    let times: &[u8] = run.times.inner().as_slice();
    let args = run
        .args
        .iter()
        .map(|column| column.plain_values().unwrap_or_default());
    std::iter::once(times).chain(args)
}

/// The values of a primitive array without nulls, exactly its rows (a slice's own range).
fn plain_values(array: &dyn Array) -> Option<&[u8]> {
    downcast_primitive_array!(
        array => Some(array.values().inner().as_slice()),
        _ => None
    )
}

/// A `rows`-row array of type `ty` (fixed-width) read from its little-endian `values`.
fn plain_array(ty: &DataType, values: &[u8], rows: usize) -> Result<ArrayRef, SnapshotError> {
    // `from_slice_ref` copies into an aligned buffer, which typed access requires.
    let data = ArrayData::builder(ty.clone())
        .len(rows)
        .add_buffer(Buffer::from_slice_ref(values))
        .build()?;
    Ok(make_array(data))
}

/// The schema a window snapshot's stream has for `columns` (the times, then the arguments).
fn snapshot_schema(columns: &[ArrayRef]) -> SchemaRef {
    let fields: Vec<Field> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| Field::new(format!("a{i}"), c.data_type().clone(), true))
        .collect();
    std::sync::Arc::new(Schema::new(fields))
}

/// Whether `schema` is [`snapshot_schema`] of `columns`.
fn same_types(schema: &Schema, columns: &[ArrayRef]) -> bool {
    schema.fields().len() == columns.len()
        && schema
            .fields()
            .iter()
            .zip(columns)
            .all(|(field, column)| field.data_type() == column.data_type())
}

/// The batches of one snapshot IPC stream (none when it is empty).
fn read_runs(ipc: &[u8]) -> Result<Vec<RecordBatch>, SnapshotError> {
    if ipc.is_empty() {
        return Ok(Vec::new());
    }
    Ok(nervix_net::batch::decode_stream(ipc)?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::Int64Array;
    use arrow_schema::Schema;

    use super::*;

    #[test]
    fn a_branch_is_charged_its_rows_of_a_shared_buffer_not_the_buffer() {
        // A fan-out route hands each branch a slice of one batch put in branch order.
        let shared: ArrayRef = Arc::new(Int64Array::from_iter_values(0..10_000));
        let two_rows = vec![shared.slice(4_000, 2)];
        assert_eq!(args_bytes(&two_rows), 16);
    }

    /// A window without aggregate calls: its snapshot columns are the row times alone.
    fn times_only_plan() -> WindowPlan {
        WindowPlan {
            width_ns: 10,
            step_ns: 10,
            max_state_bytes: None,
            calls: Vec::new(),
            results: Arc::new(Schema::empty()),
            branch_fields: Vec::new(),
            reserved_bytes: 0,
            model: 7,
        }
    }

    /// A window holding two runs, the second a slice (its values start inside its buffer).
    fn two_runs(plan: &WindowPlan) -> WindowState {
        let mut state = WindowState::default();
        state
            .admit(
                Int64Array::from(vec![3, 5]),
                RunArgs::new(),
                2,
                AckRuns::new(),
            )
            .unwrap();
        let sliced = Int64Array::from(vec![1, 6, 8, 9]).slice(1, 2);
        state
            .admit(sliced, RunArgs::new(), 2, AckRuns::new())
            .unwrap();
        assert_eq!(state.due_ns(plan), Some(13));
        state
    }

    #[test]
    fn a_step_skips_the_windows_that_hold_no_row() {
        // (step, row times, where the window after the first step starts); width 10, the
        // first window [3, 13).
        let cases = [
            // Tumbling: [13, 23) and [23, 33) hold nothing, so the next is [33, 43).
            (10, [3, 37], 33),
            // A row inside the next grid window keeps the window at the cutoff.
            (10, [3, 22], 13),
            // Hopping: the grid goes on at 7, 11, …; the first window holding 30 is [23, 33).
            (4, [3, 30], 23),
        ];
        for (step_ns, times, next_start_ns) in cases {
            let plan = WindowPlan {
                step_ns,
                ..times_only_plan()
            };
            let mut state = WindowState::default();
            state
                .admit(
                    Int64Array::from(times.to_vec()),
                    RunArgs::new(),
                    2,
                    AckRuns::new(),
                )
                .unwrap();
            state.step(&plan);
            assert_eq!(
                state.start_ns(),
                Some(next_start_ns),
                "step {step_ns}, rows {times:?}"
            );
        }
    }

    /// Where the rows' encoding byte sits: version, model, start, run count, two run lengths.
    const ENCODING_AT: usize = 1 + 8 + 8 + 4 + 2 * 4;

    #[test]
    fn fixed_width_columns_round_trip_as_plain_values() {
        let plan = times_only_plan();
        let bytes = two_runs(&plan).encode(&plan, &mut None).unwrap();
        assert_eq!(bytes[0], SNAPSHOT_VERSION);
        assert_eq!(bytes[ENCODING_AT], RowsEncoding::Values as u8);
        // The four times, 8 bytes each, follow the rows' length: nothing else is written.
        assert_eq!(bytes.len(), ENCODING_AT + 1 + 4 + 4 * 8);
        let restored = WindowState::restore(&plan, &bytes).unwrap();
        assert_eq!(restored.retained_rows(), 4);
        assert_eq!(restored.start_ns(), Some(3));
        assert_eq!(restored.watermark_ns(), Some(8));
        assert_eq!(restored.encode(&plan, &mut None).unwrap(), bytes);
    }

    #[test]
    fn a_window_is_stored_once_a_snapshot_encoded_it_or_it_was_restored() {
        let plan = times_only_plan();
        let mut state = two_runs(&plan);
        assert!(
            !state.is_stored(),
            "a new window has no stored entry to delete"
        );
        let bytes = state.snapshot(&plan, &mut None, &mut Vec::new()).unwrap();
        assert!(state.is_stored());
        assert!(WindowState::restore(&plan, &bytes).unwrap().is_stored());
    }

    /// `state`'s snapshot in version 3: the same header and run lengths, then the IPC stream
    /// without an encoding byte.
    fn version_3(plan: &WindowPlan, state: &WindowState) -> Vec<u8> {
        let current = state.encode(plan, &mut None).unwrap();
        let mut stream = Vec::new();
        state.write_ipc(&mut stream, &mut None).unwrap();
        let mut old = current[..ENCODING_AT].to_vec();
        old[0] = SNAPSHOT_VERSION_IPC_ONLY;
        old.extend_from_slice(&(stream.len() as u32).to_le_bytes());
        old.extend_from_slice(&stream);
        old
    }

    #[test]
    fn a_version_3_snapshot_is_read_back() {
        let plan = times_only_plan();
        let state = two_runs(&plan);
        let restored = WindowState::restore(&plan, &version_3(&plan, &state)).unwrap();
        assert_eq!(
            restored.encode(&plan, &mut None).unwrap(),
            state.encode(&plan, &mut None).unwrap()
        );
    }

    #[test]
    fn a_damaged_snapshot_is_refused_or_read_never_a_panic() {
        let plan = times_only_plan();
        let state = two_runs(&plan);
        let plain = state.encode(&plan, &mut None).unwrap();
        for bytes in [plain, version_3(&plan, &state)] {
            for (torn, damaged) in super::super::state_codec::damaged_copies(&bytes) {
                let Ok(restored) = WindowState::restore(&plan, &damaged) else {
                    continue;
                };
                assert!(!torn, "a torn snapshot of {} bytes was read", damaged.len());
                // What was read is a window the runtime can go on with: it encodes to a
                // snapshot that reads back the same.
                let again = restored.encode(&plan, &mut None).unwrap();
                let reread = WindowState::restore(&plan, &again).unwrap();
                assert_eq!(reread.encode(&plan, &mut None).unwrap(), again);
            }
        }
    }

    #[test]
    fn damaged_plain_values_are_refused() {
        let plan = times_only_plan();
        let bytes = two_runs(&plan).encode(&plan, &mut None).unwrap();
        let mut short = bytes.clone();
        short.truncate(bytes.len() - 8);
        assert!(matches!(
            WindowState::restore(&plan, &short),
            Err(SnapshotError::Malformed)
        ));
        // The rows' length says one value less than the run lengths need.
        let mut inconsistent = short.clone();
        inconsistent[ENCODING_AT + 1..ENCODING_AT + 5].copy_from_slice(&24u32.to_le_bytes());
        assert!(matches!(
            WindowState::restore(&plan, &inconsistent),
            Err(SnapshotError::Malformed)
        ));
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(
            WindowState::restore(&plan, &trailing),
            Err(SnapshotError::Malformed)
        ));
        let mut unknown = bytes;
        unknown[ENCODING_AT] = 9;
        assert!(matches!(
            WindowState::restore(&plan, &unknown),
            Err(SnapshotError::Malformed)
        ));
    }

    /// A row timed at the largest instant: its window's end saturates, so the row counts as
    /// before it and leaves with it. Before, the window emitted again and again without
    /// moving (its end never passed the row), holding the shard in one emission pass.
    #[test]
    fn a_row_at_the_last_instant_closes_its_window_and_leaves() {
        let plan = times_only_plan();
        let mut state = WindowState::default();
        state
            .admit(
                Int64Array::from(vec![5, i64::MAX]),
                RunArgs::new(),
                2,
                AckRuns::new(),
            )
            .unwrap();
        let mut records = 0;
        while state.is_due(&plan, 0) {
            records += 1;
            assert!(records <= 2, "the window moves on");
            state.finish(&plan).unwrap();
            state.step(&plan);
        }
        assert_eq!(
            records, 2,
            "the window of 5, then the one holding the last instant"
        );
        assert_eq!(state.retained_rows(), 0);
    }

    /// A step that keeps part of a run charges exactly the bytes of the rows kept: rows of
    /// different sizes must not be charged a share by row count.
    #[test]
    fn a_partial_step_charges_the_kept_rows_their_own_bytes() {
        use arrow_array::StringArray;

        let plan = WindowPlan {
            step_ns: 5,
            ..times_only_plan()
        };
        let big = "x".repeat(1_000);
        let values: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", big.as_str()]));
        let args = vec![values.clone()];
        let mut state = WindowState::default();
        state
            .admit(
                Int64Array::from(vec![0, 1, 7]),
                args.into(),
                3,
                AckRuns::new(),
            )
            .unwrap();
        let kept = args_bytes(&[values.slice(2, 1)]);
        state.step(&plan);
        assert_eq!(state.retained_rows(), 1);
        assert_eq!(state.bytes(), kept);
    }

    /// Rows whose arrays disagree on length are refused with their acknowledgement runs
    /// handed back (the caller refuses them), never kept nor silently dropped.
    #[test]
    fn rows_a_window_cannot_take_come_back_with_their_acknowledgements() {
        use nervix_shards::ack::AckHandle;

        let run = AckRun {
            root: AckHandle {
                index: 3,
                generation: 1,
            },
            rows: 2,
        };
        let mut state = WindowState::default();
        let (_, refused) = state
            .admit(
                Int64Array::from(vec![1, 2, 3]),
                RunArgs::new(),
                2,
                AckRuns::from_slice(&[run]),
            )
            .expect_err("three times for two rows");
        assert_eq!(refused.as_slice(), &[run]);
        assert_eq!(state.retained_rows(), 0);
    }
}
