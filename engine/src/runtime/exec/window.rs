//! The retained rows of one WINDOW PROCESSOR branch and the window over them (spec "Window
//! processor").
//!
//! Timing: a row's time is its event time (`TIMESTAMP AT`, carried by its frame) or else the
//! execution snapshot of the batch that delivered it. A window begins at the time of the first
//! row it retains and is due `WIDTH` later, once the input watermark (the latest row time
//! admitted) or the domain clock reaches that instant. When due, the retained rows before the
//! window's end are folded into fresh accumulators, one per aggregate call, run by run, and the
//! window emits one record. Stepping then removes the rows strictly before `start + STEP`
//! (rows exactly at the cutoff remain) and the next window starts there, or at the next row
//! when nothing remains. Each retained run is kept sorted by time, so both cuts are binary
//! searches and folds read contiguous slices. Because emission always refolds what is
//! retained, no aggregate has to support removal, and a window's result is the same however
//! its rows were batched (exact for counts and integer sums; float sums are compensated per
//! run, spec "Admission").
//!
//! Acknowledgements: a retained row keeps its unit until it steps out of the last window that
//! contains it, which happens right after that window emitted; emitted records carry no
//! acknowledgement of their own (documented in docs/decisions.md).
//!
//! Memory: the state of a branch is the retained argument arrays (Arrow buffer bytes) plus the
//! fixed reservation of its sketches; MAX STATE SIZE refuses a batch that would exceed it, and
//! a window without one is capped at [`UNDECLARED_STATE_CAP_BYTES`].

use std::collections::VecDeque;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{Field, Schema, SchemaRef};

use super::state_codec::put_u32;
use crate::runtime::aggregate::{Accumulator, AggregateError};
use crate::runtime::frame::{permuted_runs, split_runs, AckRun};
use crate::runtime::plan::WindowPlan;

/// The per-branch state cap of a window that declares no MAX STATE SIZE.
pub const UNDECLARED_STATE_CAP_BYTES: u64 = 256 * 1024 * 1024;

/// Rows of one admitted batch: their argument values per call, as evaluated on admission.
struct Retained {
    /// Per row, its time (ns), ascending.
    times: Int64Array,
    /// Per aggregate call, its value-argument arrays (each `rows` long).
    args: Vec<Vec<ArrayRef>>,
    rows: usize,
    bytes: u64,
    acks: Vec<AckRun>,
}

impl Retained {
    /// How many leading rows are before `instant`.
    fn rows_before(&self, instant: i64) -> usize {
        self.times.values().partition_point(|t| *t < instant)
    }
}

/// One branch's window.
#[derive(Default)]
pub struct WindowState {
    runs: VecDeque<Retained>,
    start_ns: Option<i64>,
    /// The latest row time admitted.
    watermark_ns: Option<i64>,
    bytes: u64,
    /// Changed since its last snapshot.
    dirty: bool,
}

/// The snapshot format version (first byte of an encoded window): the run lengths, then one
/// Arrow IPC stream holding each run as a batch.
const SNAPSHOT_VERSION: u8 = 3;

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
        "the snapshot has format version {found}; this build reads version {SNAPSHOT_VERSION}"
    )]
    Version { found: u8 },
    #[error("the snapshot's retained rows cannot be decoded: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error(
        "the snapshot was taken under another processor model (input schema or expressions changed)"
    )]
    OtherStateModel,
    #[error("the state takes {bytes} bytes encoded, over the {limit}-byte snapshot limit")]
    TooLarge { bytes: usize, limit: usize },
}

/// The Arrow buffer bytes `args` hold.
pub fn args_bytes(args: &[Vec<ArrayRef>]) -> u64 {
    args.iter()
        .flatten()
        .map(|a| a.get_array_memory_size() as u64)
        .sum()
}

impl WindowState {
    /// Bytes the retained rows hold (without the sketches' reservation).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn retained_rows(&self) -> usize {
        self.runs.iter().map(|r| r.rows).sum()
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
        let cap = plan.max_state_bytes.unwrap_or(UNDECLARED_STATE_CAP_BYTES);
        plan.reserved_bytes + self.bytes + bytes > cap
    }

    /// Retains `rows` rows with their `times` and evaluated arguments.
    pub fn admit(
        &mut self,
        times: Int64Array,
        mut args: Vec<Vec<ArrayRef>>,
        rows: usize,
        mut acks: Vec<AckRun>,
    ) -> Result<(), arrow_schema::ArrowError> {
        if rows == 0 || times.len() != rows {
            return Ok(());
        }
        let mut times = times;
        if !times.values().is_sorted() {
            let order = arrow_ord::sort::sort_to_indices(&times, None, None)?;
            times = arrow_select::take::take(&times, &order, None)?
                .as_any()
                .downcast_ref::<Int64Array>()
                .cloned()
                .ok_or_else(|| arrow_schema::ArrowError::CastError("times".into()))?;
            for values in &mut args {
                for array in values.iter_mut() {
                    *array = arrow_select::take::take(array.as_ref(), &order, None)?;
                }
            }
            acks = permuted_runs(&acks, &order);
        }
        let bytes = args_bytes(&args);
        self.bytes += bytes;
        self.dirty = true;
        let (first, last) = (times.value(0), times.value(rows - 1));
        self.start_ns.get_or_insert(first);
        self.watermark_ns = Some(self.watermark_ns.map_or(last, |w| w.max(last)));
        self.runs.push_back(Retained {
            times,
            args,
            rows,
            bytes,
            acks,
        });
        Ok(())
    }

    /// The open window's result: one one-row array per call, or the first call that failed.
    pub fn finish(&self, plan: &WindowPlan) -> Result<Vec<ArrayRef>, AggregateError> {
        let end = self.due_ns(plan).unwrap_or(i64::MIN);
        plan.calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                let mut accumulator = Accumulator::new(&call.call);
                for run in &self.runs {
                    let within = run.rows_before(end);
                    if within > 0 {
                        accumulator.fold(&run.args[index], 0..within);
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
                leaving.append(&mut run.acks);
                self.bytes -= run.bytes;
                run.rows = 0;
                continue;
            }
            let (left, rest) = split_runs(&run.acks, gone);
            leaving.extend(left);
            run.acks = rest;
            let freed = run.bytes * gone as u64 / run.rows as u64;
            self.bytes -= freed;
            run.bytes -= freed;
            let kept = run.rows - gone;
            run.times = run.times.slice(gone, kept);
            for values in &mut run.args {
                for array in values.iter_mut() {
                    *array = array.slice(gone, kept);
                }
            }
            run.rows = kept;
        }
        self.runs.retain(|run| run.rows > 0);
        self.dirty = true;
        self.start_ns = if self.runs.is_empty() {
            self.watermark_ns = None;
            None
        } else {
            Some(cutoff)
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
        for run in &mut self.runs {
            acks.append(&mut run.acks);
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
        // One IPC stream, one batch per run: the schema is written once per window, not once
        // per run (a window retaining many admitted batches carries many runs). The stream
        // goes straight into `out` behind its length, patched in once written.
        let length_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let runs: Vec<Vec<ArrayRef>> = self
            .runs
            .iter()
            .map(|run| {
                let times: ArrayRef = std::sync::Arc::new(run.times.clone());
                std::iter::once(times)
                    .chain(run.args.iter().flatten().cloned())
                    .collect()
            })
            .collect();
        if let Some(first) = runs.first() {
            let schema = match schema {
                Some(schema) if same_types(schema, first) => schema.clone(),
                _ => schema.insert(snapshot_schema(first)).clone(),
            };
            let mut writer = StreamWriter::try_new(&mut out, &schema)?;
            for columns in runs {
                writer.write(&RecordBatch::try_new(schema.clone(), columns)?)?;
            }
            writer.finish()?;
        }
        let mut length = Vec::with_capacity(4);
        put_u32(&mut length, out.len() - length_at - 4)?;
        out[length_at..length_at + 4].copy_from_slice(&length);
        Ok(out)
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
        if version != SNAPSHOT_VERSION {
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
        let len = u32::from_le_bytes(take(4)?.try_into().unwrap_or([0; 4])) as usize;
        let batches = read_runs(take(len)?)?;
        if batches.len() != rows.len() {
            return Err(SnapshotError::Malformed);
        }
        for (batch, rows) in batches.into_iter().zip(rows) {
            state.admit_restored(plan, batch, rows)?;
        }
        state.start_ns = if state.runs.is_empty() {
            None
        } else {
            Some(start)
        };
        state.dirty = false;
        Ok(state)
    }

    /// Admits one restored run: its first column the row times, then each call's arguments.
    fn admit_restored(
        &mut self,
        plan: &WindowPlan,
        batch: RecordBatch,
        rows: usize,
    ) -> Result<(), SnapshotError> {
        if batch.num_rows() != rows {
            return Err(SnapshotError::Malformed);
        }
        let mut columns = batch.columns().iter().cloned();
        let times = columns
            .next()
            .and_then(|t| t.as_any().downcast_ref::<Int64Array>().cloned())
            .ok_or(SnapshotError::Malformed)?;
        let mut args = Vec::with_capacity(plan.calls.len());
        for call in &plan.calls {
            let values: Vec<ArrayRef> = columns.by_ref().take(call.args.len()).collect();
            if values.len() != call.args.len() {
                return Err(SnapshotError::Malformed);
            }
            args.push(values);
        }
        self.admit(times, args, rows, Vec::new())?;
        Ok(())
    }
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
    let reader = arrow_ipc::reader::StreamReader::try_new(ipc, None)?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}
