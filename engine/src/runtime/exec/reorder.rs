//! The ordering buffer of one REORDERER branch (spec: "Reorderer").
//!
//! Rows are held with the values of their `BY` expressions and the domain instant they
//! arrived. A row may wait at most MAX TIME: when the oldest held row's time is up, the buffer
//! sorts everything it holds by `BY` (arrival order breaking ties) and releases, in that order,
//! every row up to and including the last due one. So a row never leaves before a row that
//! sorts ahead of it and arrived in time, and the output is in `BY` order whenever rows are at
//! most MAX TIME late; a row later than that leaves behind rows it should have preceded
//! (documented; it is never dropped).
//!
//! Acknowledgements stay with their rows: each held chunk keeps its run-length runs, and a
//! release hands back the released rows' runs in output order (a run per consecutive stretch of
//! one root, so a payload's rows may now be split into several runs).
//!
//! Rows a snapshot holds (`reorder_snapshot`) gave their units up when it became durable, so
//! a buffer may hold rows with and without units; a release hands them out as consecutive
//! pieces that each either all carry units or carry none, in output order.
//!
//! Bounded: at most [`MAX_HELD_ROWS_PER_BRANCH`] rows; past it the buffer releases its first
//! rows in order as if they were due, so memory stays bounded and nothing is lost.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, UInt32Array};
use arrow_ord::sort::{lexsort_to_indices, SortColumn};
use arrow_schema::ArrowError;
use arrow_select::concat::concat;
use arrow_select::take::take;

use crate::runtime::frame::AckRun;

/// Rows one branch may hold before it releases early.
pub const MAX_HELD_ROWS_PER_BRANCH: usize = 1_048_576;

/// Marks rows that carry no acknowledgement (a DETACHED reorderer).
const NO_RUN: u32 = u32::MAX;

/// Held rows of one batch (or what a release kept).
pub(super) struct Chunk {
    pub(super) columns: Vec<ArrayRef>,
    pub(super) keys: Vec<ArrayRef>,
    /// Per row: arrival instant, domain ns.
    pub(super) arrival: ArrayRef,
    /// Empty when the rows carry no unit (detached, or given up to a snapshot).
    pub(super) acks: Vec<AckRun>,
    /// Per row: event time, when the rows carry one.
    pub(super) times: Option<ArrayRef>,
}

/// Rows released in order, with the runs of their acknowledgements.
pub struct Released {
    pub columns: Vec<ArrayRef>,
    pub num_rows: usize,
    pub acks: Vec<AckRun>,
    pub times: Option<ArrayRef>,
}

/// One branch's held rows.
#[derive(Default)]
pub struct OrderBuffer {
    chunks: Vec<Chunk>,
    rows: usize,
    /// The earliest arrival held.
    earliest_ns: Option<i64>,
    /// Changed since its last snapshot.
    dirty: bool,
}

impl OrderBuffer {
    pub fn held_rows(&self) -> usize {
        self.rows
    }

    /// Holds `columns` (the filtered input) with their `keys` (one array per BY expression),
    /// arrived at `arrival_ns`; `acks` cover the rows, or are empty (detached); `times` are
    /// their event times, if they carry them.
    pub fn hold(
        &mut self,
        (columns, times): (Vec<ArrayRef>, Option<ArrayRef>),
        keys: Vec<ArrayRef>,
        rows: usize,
        arrival_ns: i64,
        acks: Vec<AckRun>,
    ) {
        if rows == 0 {
            return;
        }
        self.push_chunk(Chunk {
            columns,
            keys,
            arrival: Arc::new(Int64Array::from_value(arrival_ns, rows)),
            acks,
            times,
        })
    }

    /// Holds `chunk` (its arrival array must be I64 and as long as its rows).
    pub(super) fn push_chunk(&mut self, chunk: Chunk) {
        let arrival = chunk.arrival.as_any().downcast_ref::<Int64Array>();
        let Some(earliest) = arrival.and_then(arrow_arith::aggregate::min) else {
            return;
        };
        self.rows += chunk.arrival.len();
        self.earliest_ns = Some(self.earliest_ns.map_or(earliest, |e| e.min(earliest)));
        self.chunks.push(chunk);
        self.dirty = true;
    }

    /// The held chunks, in arrival order.
    pub(super) fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// Takes every held run and clears the dirty mark (a snapshot now holds the rows).
    pub(super) fn take_acks(&mut self) -> Vec<AckRun> {
        self.dirty = false;
        self.chunks
            .iter_mut()
            .flat_map(|chunk| std::mem::take(&mut chunk.acks))
            .collect()
    }

    /// Whether the buffer changed since the last snapshot.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Clears the dirty mark without taking the runs (a snapshot that failed to encode).
    pub(super) fn mark_clean(&mut self) {
        self.dirty = false;
    }

    /// When the oldest held row is due, domain ns.
    pub fn due_ns(&self, max_time_ns: u64) -> Option<i64> {
        self.earliest_ns
            .map(|earliest| earliest.saturating_add(max_time_ns.min(i64::MAX as u64) as i64))
    }

    /// Releases what is due at `now_ns` (everything when `force`), in BY order, as pieces
    /// that each carry units for all their rows or for none (empty: nothing released).
    pub fn release(
        &mut self,
        now_ns: i64,
        max_time_ns: u64,
        force: bool,
    ) -> Result<Vec<Released>, ArrowError> {
        let overfull = self.rows > MAX_HELD_ROWS_PER_BRANCH;
        let due = self.due_ns(max_time_ns).is_some_and(|due| due <= now_ns);
        if self.rows == 0 || !(force || due || overfull) {
            return Ok(Vec::new());
        }
        self.dirty = true;
        let chunks = std::mem::take(&mut self.chunks);
        let rows = std::mem::take(&mut self.rows);
        let earliest_ns = self.earliest_ns.take();
        match cut_release(&chunks, rows, now_ns, max_time_ns, force) {
            Ok((released, kept)) => {
                for chunk in kept {
                    self.push_chunk(chunk);
                }
                Ok(released)
            }
            Err(error) => {
                // Nothing leaves: the held rows stay as they were, units and all, and the
                // next release tries again (the caller logs why).
                self.chunks = chunks;
                self.rows = rows;
                self.earliest_ns = earliest_ns;
                Err(error)
            }
        }
    }

    /// Every held acknowledgement run (a branch leaving drops its held rows with these).
    pub fn held_acks(&self) -> impl Iterator<Item = &AckRun> {
        self.chunks.iter().flat_map(|c| c.acks.iter())
    }
}

/// What [`OrderBuffer::release`] lets out of `chunks` (`rows` rows): the released pieces in
/// BY order, and the kept rows as chunks in sorted order. Reads `chunks` only, so a failure
/// leaves the buffer as it was.
fn cut_release(
    chunks: &[Chunk],
    rows: usize,
    now_ns: i64,
    max_time_ns: u64,
    force: bool,
) -> Result<(Vec<Released>, Vec<Chunk>), ArrowError> {
    let width = chunks[0].columns.len();
    let key_width = chunks[0].keys.len();
    let gather = |pick: &dyn Fn(&Chunk) -> &ArrayRef| -> Result<ArrayRef, ArrowError> {
        let parts: Vec<&dyn Array> = chunks.iter().map(|c| pick(c).as_ref()).collect();
        concat(&parts)
    };
    let columns = (0..width)
        .map(|i| gather(&|c: &Chunk| &c.columns[i]))
        .collect::<Result<Vec<_>, _>>()?;
    let keys = (0..key_width)
        .map(|i| gather(&|c: &Chunk| &c.keys[i]))
        .collect::<Result<Vec<_>, _>>()?;
    let arrival = gather(&|c: &Chunk| &c.arrival)?;
    let times = if chunks.iter().all(|c| c.times.is_some()) {
        let parts: Vec<&dyn Array> = chunks.iter().filter_map(|c| c.times.as_deref()).collect();
        Some(concat(&parts)?)
    } else {
        None
    };
    // Per row: the index of its run in `runs`, so acknowledgements follow the sort.
    let mut runs: Vec<AckRun> = Vec::new();
    let mut run_of_row: Vec<u32> = Vec::with_capacity(rows);
    for chunk in chunks {
        if chunk.acks.is_empty() {
            let n = chunk.arrival.len();
            run_of_row.extend(std::iter::repeat_n(NO_RUN, n));
            continue;
        }
        for run in &chunk.acks {
            run_of_row.extend(std::iter::repeat_n(runs.len() as u32, run.rows as usize));
            runs.push(*run);
        }
    }
    let run_of_row: ArrayRef = Arc::new(UInt32Array::from(run_of_row));
    // Arrival, then position, break ties: the sort is stable in arrival order.
    let position: ArrayRef = Arc::new(UInt32Array::from_iter_values(0..rows as u32));
    let mut sort: Vec<SortColumn> = keys
        .iter()
        .map(|values| SortColumn {
            values: values.clone(),
            options: None,
        })
        .collect();
    for tiebreak in [&arrival, &position] {
        sort.push(SortColumn {
            values: tiebreak.clone(),
            options: None,
        });
    }
    let order = lexsort_to_indices(&sort, None)?;
    let sorted_arrival = take(arrival.as_ref(), &order, None)?;
    let sorted_arrival = sorted_arrival
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| ArrowError::CastError("arrival is not I64".into()))?;
    let cutoff = now_ns.saturating_sub(max_time_ns.min(i64::MAX as u64) as i64);
    let mut cut = if force {
        rows
    } else {
        sorted_arrival
            .values()
            .iter()
            .rposition(|arrived| *arrived <= cutoff)
            .map_or(0, |last_due| last_due + 1)
    };
    if rows - cut > MAX_HELD_ROWS_PER_BRANCH {
        cut = rows - MAX_HELD_ROWS_PER_BRANCH;
    }
    let released_order = order.slice(0, cut);
    let kept_order = order.slice(cut, rows - cut);
    let pick = |array: &ArrayRef, which: &UInt32Array| take(array.as_ref(), which, None);

    let released = pieces(
        columns
            .iter()
            .map(|c| pick(c, &released_order))
            .collect::<Result<_, _>>()?,
        times
            .as_ref()
            .map(|t| pick(t, &released_order))
            .transpose()?,
        &pick(&run_of_row, &released_order)?,
        &runs,
    )?;

    let mut kept = Vec::new();
    if cut < rows {
        // Kept rows stay in sorted order, as consecutive chunks that each carry units for
        // all their rows or none (so a later release maps rows to runs correctly).
        let kept_columns: Vec<ArrayRef> = columns
            .iter()
            .chain(&keys)
            .chain(std::iter::once(&arrival))
            .map(|c| pick(c, &kept_order))
            .collect::<Result<_, _>>()?;
        let kept_times = times.as_ref().map(|t| pick(t, &kept_order)).transpose()?;
        let kept_runs = pick(&run_of_row, &kept_order)?;
        for piece in pieces(kept_columns, kept_times, &kept_runs, &runs)? {
            let mut all = piece.columns;
            let arrival = all.pop().expect("the arrival column was added");
            let keys = all.split_off(width);
            kept.push(Chunk {
                columns: all,
                keys,
                arrival,
                acks: piece.acks,
                times: piece.times,
            });
        }
    }
    Ok((released, kept))
}

/// Released rows (`columns`, `times`, each row's run index in `run_of_row`) cut into
/// consecutive pieces that either all carry a run or none do.
fn pieces(
    columns: Vec<ArrayRef>,
    times: Option<ArrayRef>,
    run_of_row: &ArrayRef,
    runs: &[AckRun],
) -> Result<Vec<Released>, ArrowError> {
    let indices = run_of_row
        .as_any()
        .downcast_ref::<UInt32Array>()
        .ok_or_else(|| ArrowError::CastError("run index is not U32".into()))?;
    let flags: Vec<bool> = indices.values().iter().map(|i| *i != NO_RUN).collect();
    let mut out = Vec::new();
    let mut start = 0;
    while start < flags.len() {
        let len = flags[start..]
            .iter()
            .position(|flag| *flag != flags[start])
            .unwrap_or(flags.len() - start);
        let whole = start == 0 && len == flags.len();
        let slice = |array: &ArrayRef| {
            if whole {
                array.clone()
            } else {
                array.slice(start, len)
            }
        };
        out.push(Released {
            columns: columns.iter().map(slice).collect(),
            num_rows: len,
            acks: runs_in_order(&slice(run_of_row), runs)?,
            times: times.as_ref().map(slice),
        });
        start += len;
    }
    Ok(out)
}

/// The acknowledgement runs of rows whose run indices (into `runs`) are `run_of_row`, in that
/// order: one run per consecutive stretch of one root.
fn runs_in_order(run_of_row: &ArrayRef, runs: &[AckRun]) -> Result<Vec<AckRun>, ArrowError> {
    let run_of_row = run_of_row
        .as_any()
        .downcast_ref::<UInt32Array>()
        .ok_or_else(|| ArrowError::CastError("run index is not U32".into()))?;
    let mut acks: Vec<AckRun> = Vec::new();
    for index in run_of_row.values().iter().filter(|i| **i != NO_RUN) {
        let root = runs[*index as usize].root;
        match acks.last_mut() {
            Some(last) if last.root == root => last.rows += 1,
            _ => acks.push(AckRun { root, rows: 1 }),
        }
    }
    Ok(acks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nervix_shards::ack::AckHandle;

    fn ints(values: &[i64]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    fn values(array: &ArrayRef) -> Vec<i64> {
        array
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .values()
            .to_vec()
    }

    fn one(mut pieces: Vec<Released>) -> Released {
        assert_eq!(pieces.len(), 1, "one piece");
        pieces.pop().unwrap()
    }

    fn root(index: u32) -> AckHandle {
        AckHandle {
            index,
            generation: 0,
        }
    }

    /// A release that fails (here: two chunks whose columns cannot be concatenated; in
    /// practice, over 2 GiB of one STRING column) lets nothing out and loses nothing: the
    /// rows stay held with their units.
    #[test]
    fn a_release_that_fails_keeps_every_held_row() {
        let mut buffer = OrderBuffer::default();
        let run = vec![AckRun {
            root: root(1),
            rows: 1,
        }];
        let text: ArrayRef = Arc::new(arrow_array::StringArray::from(vec!["x"]));
        buffer.hold(
            (vec![ints(&[1])], None),
            vec![ints(&[1])],
            1,
            0,
            run.clone(),
        );
        buffer.hold((vec![text], None), vec![ints(&[2])], 1, 0, run);
        assert!(buffer.release(0, 100, true).is_err());
        assert_eq!(buffer.held_rows(), 2);
        assert_eq!(buffer.held_acks().count(), 2);
        assert_eq!(buffer.due_ns(100), Some(100));
    }

    #[test]
    fn releases_in_order_everything_up_to_the_last_due_row() {
        let mut buffer = OrderBuffer::default();
        let run = |r, rows| {
            vec![AckRun {
                root: root(r),
                rows,
            }]
        };
        buffer.hold(
            (vec![ints(&[5, 3])], None),
            vec![ints(&[5, 3])],
            2,
            0,
            run(1, 2),
        );
        buffer.hold(
            (vec![ints(&[4, 9])], None),
            vec![ints(&[4, 9])],
            2,
            50,
            run(2, 2),
        );
        assert!(buffer.release(99, 100, false).unwrap().is_empty());
        assert_eq!(buffer.due_ns(100), Some(100));
        let out = one(buffer.release(100, 100, false).unwrap());
        // Rows 3 and 5 are due; 4 sorts between them, so it leaves too; 9 stays.
        assert_eq!(values(&out.columns[0]), vec![3, 4, 5]);
        assert_eq!(
            out.acks,
            vec![
                AckRun {
                    root: root(1),
                    rows: 1
                },
                AckRun {
                    root: root(2),
                    rows: 1
                },
                AckRun {
                    root: root(1),
                    rows: 1
                },
            ]
        );
        assert_eq!(buffer.held_rows(), 1);
        assert_eq!(buffer.due_ns(100), Some(150));
        let rest = one(buffer.release(0, 100, true).unwrap());
        assert_eq!(values(&rest.columns[0]), vec![9]);
        assert_eq!(buffer.held_rows(), 0);
    }

    #[test]
    fn equal_keys_keep_arrival_order() {
        let mut buffer = OrderBuffer::default();
        buffer.hold(
            (vec![ints(&[1, 2])], None),
            vec![ints(&[7, 7])],
            2,
            0,
            Vec::new(),
        );
        buffer.hold(
            (vec![ints(&[3])], Some(ints(&[30]))),
            vec![ints(&[7])],
            1,
            1,
            Vec::new(),
        );
        let out = one(buffer.release(0, 0, true).unwrap());
        assert_eq!(values(&out.columns[0]), vec![1, 2, 3]);
        assert!(out.acks.is_empty());
    }
}
