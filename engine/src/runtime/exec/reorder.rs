//! The ordering buffer of one REORDERER branch (spec: "Reorderer").
//!
//! Rows are held with the values of their `BY` expressions and the domain instant they
//! arrived. A row may wait at most MAX TIME: when the oldest held row's time is up, the buffer
//! releases, in (`BY`, arrival, hold) order, every row up to and including the last due one.
//! So a row never leaves before a row that sorts ahead of it and arrived in time, and the
//! output is in `BY` order whenever rows are at most MAX TIME late; a row later than that
//! leaves behind rows it should have preceded (documented; it is never dropped).
//!
//! Why a release costs what it lets out, not what the buffer holds: each held chunk is put in
//! (`BY`, arrival) order when it arrives, with those values encoded as comparable bytes
//! (arrow-row). The last due row of a chunk is then its greatest due row, the cut is the
//! greatest of those, and each chunk lets out the prefix up to the cut — one binary search per
//! chunk, no copy of what stays. Only the released rows are sorted together. Past
//! [`MAX_CHUNKS_PER_BRANCH`] chunks the buffer merges the adjacent half holding the fewest
//! rows into one (so small holds merge tier by tier); a chunk that could not be ordered makes
//! a release sort everything, the rule this replaced (`cutting_sorted_chunks_releases_what_sorting_everything_releases`
//! checks the two agree).
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
use arrow_row::{RowConverter, Rows, SortField};
use arrow_schema::ArrowError;
use arrow_select::concat::concat;
use arrow_select::take::take;

use nervix_shards::ack::AckHandle;

use crate::runtime::frame::{split_runs, AckRun};

/// Rows one branch may hold before it releases early.
pub const MAX_HELD_ROWS_PER_BRANCH: usize = 1_048_576;

/// Marks rows that carry no acknowledgement (a DETACHED reorderer).
const NO_RUN: u32 = u32::MAX;

/// The root of a held run whose rows carry no unit: a chunk's runs cover every row or none,
/// so a merged chunk of rows with and without units marks the latter with it.
const NO_UNIT: AckHandle = AckHandle {
    index: u32::MAX,
    generation: u32::MAX,
};

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

/// Held chunks one branch keeps before it merges them into one (so a release, which looks at
/// every chunk, costs at most this many binary searches besides the rows it lets out).
pub const MAX_CHUNKS_PER_BRANCH: usize = 256;

/// A held chunk: its rows in (BY, arrival) order with their sort keys encoded, of which the
/// first `start` already left. `chunk.acks` cover the rows still held.
struct Held {
    chunk: Chunk,
    /// Per row, the encoded (BY…, arrival) values; None when the chunk could not be put in
    /// order (a release then sorts everything held, as it always did before).
    order: Option<Rows>,
    start: usize,
    /// The arrival every row shares, when they share one (every chunk but a merged one).
    arrival_of_all: Option<i64>,
}

impl Held {
    fn len(&self) -> usize {
        self.chunk.arrival.len()
    }

    /// Its rows `start..end` (those not yet released from `start` on) as a chunk of their own,
    /// with `acks` as their runs; the columns are sliced, not copied.
    fn view(&self, end: usize, acks: Vec<AckRun>) -> Chunk {
        let (start, len) = (self.start, end - self.start);
        let slice = |array: &ArrayRef| array.slice(start, len);
        Chunk {
            columns: self.chunk.columns.iter().map(slice).collect(),
            keys: self.chunk.keys.iter().map(slice).collect(),
            arrival: slice(&self.chunk.arrival),
            acks,
            times: self.chunk.times.as_ref().map(slice),
        }
    }

    fn arrivals(&self) -> &[i64] {
        let all = self
            .chunk
            .arrival
            .as_any()
            .downcast_ref::<Int64Array>()
            .map_or(&[][..], |a| a.values().as_ref());
        &all[self.start.min(all.len())..]
    }

    /// The last held row due at `cutoff` (arrived at or before it), if any.
    fn last_due(&self, cutoff: i64) -> Option<usize> {
        match self.arrival_of_all {
            Some(arrival) => (arrival <= cutoff).then(|| self.len() - 1),
            None => self
                .arrivals()
                .iter()
                .rposition(|arrived| *arrived <= cutoff)
                .map(|offset| self.start + offset),
        }
    }
}

/// One branch's held rows.
#[derive(Default)]
pub struct OrderBuffer {
    held: Vec<Held>,
    rows: usize,
    /// The earliest arrival held.
    earliest_ns: Option<i64>,
    /// Encodes (BY…, arrival) for ordering; built on the first chunk (the BY types).
    converter: Option<RowConverter>,
    /// Chunks held when a merge last failed (0: none failed since one succeeded).
    merge_failed_at: usize,
    /// Changed since its last snapshot.
    dirty: bool,
}

/// Where a release cuts the held rows, in (BY, arrival, hold) order.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Everything leaves.
    Everything,
    /// Up to the last row that arrived at or before the instant.
    DueAt(i64),
    /// Nothing leaves: the rows are put back as few sorted chunks.
    Nothing,
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
        });
        if self.held.len() > MAX_CHUNKS_PER_BRANCH.max(self.merge_failed_at) {
            self.merge();
        }
    }

    /// Holds `chunk` (its arrival array must be I64 and as long as its rows), put in order.
    pub(super) fn push_chunk(&mut self, chunk: Chunk) {
        let arrival = chunk.arrival.as_any().downcast_ref::<Int64Array>();
        let Some(earliest) = arrival.and_then(arrow_arith::aggregate::min) else {
            return;
        };
        self.rows += chunk.arrival.len();
        self.earliest_ns = Some(self.earliest_ns.map_or(earliest, |e| e.min(earliest)));
        let held = self.ordered(chunk);
        self.held.push(held);
        self.dirty = true;
    }

    /// `chunk` put in order as a held chunk.
    fn ordered(&mut self, chunk: Chunk) -> Held {
        let arrivals = chunk.arrival.as_any().downcast_ref::<Int64Array>();
        let arrival_of_all = arrivals.and_then(|a| {
            let first = *a.values().first()?;
            a.values()
                .iter()
                .all(|arrival| *arrival == first)
                .then_some(first)
        });
        let (chunk, order) = self.in_order(chunk);
        Held {
            chunk,
            order,
            start: 0,
            arrival_of_all,
        }
    }

    /// `chunk` in (BY, arrival) order (stable) with its encoded order, or as it is without
    /// one when it cannot be encoded or sorted (a release then sorts everything held).
    fn in_order(&mut self, chunk: Chunk) -> (Chunk, Option<Rows>) {
        let Ok(order) = self.encode(&chunk) else {
            return (chunk, None);
        };
        if (1..order.num_rows()).all(|row| order.row(row - 1) <= order.row(row)) {
            return (chunk, Some(order));
        }
        match sorted(&chunk, &order).and_then(|sorted| {
            let order = self.encode(&sorted)?;
            Ok((sorted, order))
        }) {
            Ok((sorted, order)) => (sorted, Some(order)),
            Err(_) => (chunk, None),
        }
    }

    /// The (BY…, arrival) values of `chunk`'s rows, encoded so bytes order as the values do.
    fn encode(&mut self, chunk: &Chunk) -> Result<Rows, ArrowError> {
        let columns: Vec<ArrayRef> = chunk
            .keys
            .iter()
            .chain(std::iter::once(&chunk.arrival))
            .cloned()
            .collect();
        if self.converter.is_none() {
            let fields = columns
                .iter()
                .map(|column| SortField::new(column.data_type().clone()))
                .collect();
            self.converter = Some(RowConverter::new(fields)?);
        }
        match &self.converter {
            Some(converter) => converter.convert_columns(&columns),
            None => Err(ArrowError::InvalidArgumentError("no row converter".into())),
        }
    }

    /// The held rows as chunks, in hold order (snapshots); the columns are sliced, not copied.
    pub(super) fn chunks(&self) -> Vec<Chunk> {
        self.held
            .iter()
            .map(|held| held.view(held.len(), held.chunk.acks.clone()))
            .collect()
    }

    /// Takes every held run and clears the dirty mark (a snapshot now holds the rows).
    pub(super) fn take_acks(&mut self) -> Vec<AckRun> {
        self.dirty = false;
        self.held
            .iter_mut()
            .flat_map(|held| std::mem::take(&mut held.chunk.acks))
            .filter(|run| run.root != NO_UNIT)
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
        let cutoff = now_ns.saturating_sub(max_time_ns.min(i64::MAX as u64) as i64);
        if force || overfull || self.held.iter().any(|held| held.order.is_none()) {
            let cut = if force {
                Cut::Everything
            } else {
                Cut::DueAt(cutoff)
            };
            return self.release_sorting_all(cut);
        }
        self.release_due(cutoff)
    }

    /// Releases by sorting every held row (a forced release, an overfull buffer, a chunk not
    /// in order) and puts the rest back as sorted chunks. A failure leaves the buffer as it was.
    fn release_sorting_all(&mut self, cut: Cut) -> Result<Vec<Released>, ArrowError> {
        let (released, kept) = cut_release(&self.chunks(), self.rows, cut)?;
        self.held.clear();
        self.rows = 0;
        self.earliest_ns = None;
        for chunk in kept {
            self.push_chunk(chunk);
        }
        self.dirty = true;
        Ok(released)
    }

    /// Too many chunks held: merges the adjacent half of them that holds the fewest rows
    /// into one (adjacent, so ties keep hold order; the fewest rows, so a merge costs what
    /// recent small holds brought, not what the branch holds — small chunks merge into
    /// larger ones, tier by tier). A merge that fails (a column past Arrow's offsets) is
    /// tried again only once the chunks doubled; releases still work chunk by chunk.
    fn merge(&mut self) {
        let width = self.held.len() / 2;
        let sizes: Vec<usize> = self.held.iter().map(|h| h.len() - h.start).collect();
        let mut window: usize = sizes[..width].iter().sum();
        let (mut best, mut best_rows) = (0, window);
        for first in 1..=sizes.len() - width {
            window = window + sizes[first + width - 1] - sizes[first - 1];
            if window < best_rows {
                (best, best_rows) = (first, window);
            }
        }
        let range = best..best + width;
        let views: Vec<Chunk> = self.held[range.clone()]
            .iter()
            .map(|held| held.view(held.len(), held.chunk.acks.clone()))
            .collect();
        match cut_release(&views, best_rows, Cut::Nothing) {
            Ok((_, mut merged)) if merged.len() == 1 => {
                let chunk = merged.pop().expect("one chunk");
                let held = self.ordered(chunk);
                self.held.splice(range, std::iter::once(held));
                self.merge_failed_at = 0;
            }
            _ => self.merge_failed_at = 2 * self.held.len(),
        }
    }

    /// Releases every row up to the last one due at `cutoff`, in (BY, arrival, hold) order,
    /// when every chunk is in order: the cut is the greatest due row (the last due row of
    /// each chunk is its greatest), each chunk lets out the prefix up to the cut (a binary
    /// search), and only the released rows are sorted. A failure leaves the buffer as it was.
    fn release_due(&mut self, cutoff: i64) -> Result<Vec<Released>, ArrowError> {
        let position = |chunk: usize, row: usize| {
            let order = self.held[chunk]
                .order
                .as_ref()
                .expect("every chunk is in order");
            (order.row(row), chunk, row)
        };
        let cut = self
            .held
            .iter()
            .enumerate()
            .filter_map(|(chunk, held)| held.last_due(cutoff).map(|row| position(chunk, row)))
            .max();
        let Some(cut) = cut else {
            return Ok(Vec::new());
        };
        // Per chunk, the end of its rows at or before the cut (they form a prefix).
        let ends: Vec<usize> = (0..self.held.len())
            .map(|chunk| {
                let (mut low, mut high) = (self.held[chunk].start, self.held[chunk].len());
                while low < high {
                    let middle = low + (high - low) / 2;
                    if position(chunk, middle) <= cut {
                        low = middle + 1;
                    } else {
                        high = middle;
                    }
                }
                low
            })
            .collect();
        let mut prefixes = Vec::new();
        let mut tails = Vec::with_capacity(self.held.len());
        let mut released_rows = 0;
        for (held, end) in self.held.iter().zip(&ends) {
            if *end == held.start {
                tails.push(None);
                continue;
            }
            let (head, tail) = split_runs(&held.chunk.acks, end - held.start);
            tails.push(Some(tail));
            released_rows += end - held.start;
            prefixes.push(held.view(*end, head.into_vec()));
        }
        let (released, _) = cut_release(&prefixes, released_rows, Cut::Everything)?;
        for ((held, end), tail) in self.held.iter_mut().zip(ends).zip(tails) {
            if let Some(tail) = tail {
                held.start = end;
                held.chunk.acks = tail.into_vec();
            }
        }
        self.held.retain(|held| held.start < held.len());
        self.rows -= released_rows;
        self.earliest_ns = self
            .held
            .iter()
            .filter_map(|held| match held.arrival_of_all {
                Some(arrival) => Some(arrival),
                None => held.arrivals().iter().copied().min(),
            })
            .min();
        self.dirty = true;
        Ok(released)
    }

    /// Every held acknowledgement run (a branch leaving drops its held rows with these).
    pub fn held_acks(&self) -> impl Iterator<Item = &AckRun> {
        self.held
            .iter()
            .flat_map(|held| held.chunk.acks.iter())
            .filter(|run| run.root != NO_UNIT)
    }
}

/// `chunk`'s rows in the order of their encoded values `order` (stable), with their runs
/// following them.
fn sorted(chunk: &Chunk, order: &Rows) -> Result<Chunk, ArrowError> {
    let rows = chunk.arrival.len();
    let mut permutation: Vec<u32> = (0..rows as u32).collect();
    permutation.sort_by(|a, b| order.row(*a as usize).cmp(&order.row(*b as usize)));
    let permutation = UInt32Array::from(permutation);
    let pick = |array: &ArrayRef| take(array.as_ref(), &permutation, None);
    let acks = if chunk.acks.is_empty() {
        Vec::new()
    } else {
        let mut run_of_row: Vec<u32> = Vec::with_capacity(rows);
        for (index, run) in chunk.acks.iter().enumerate() {
            run_of_row.extend(std::iter::repeat_n(index as u32, run.rows as usize));
        }
        let run_of_row: ArrayRef = Arc::new(UInt32Array::from(run_of_row));
        runs_in_order(&pick(&run_of_row)?, &chunk.acks)?
    };
    Ok(Chunk {
        columns: chunk.columns.iter().map(pick).collect::<Result<_, _>>()?,
        keys: chunk.keys.iter().map(pick).collect::<Result<_, _>>()?,
        arrival: pick(&chunk.arrival)?,
        acks,
        times: chunk.times.as_ref().map(pick).transpose()?,
    })
}

/// What a release lets out of `chunks` (`rows` rows) under `cut_rule`: the released pieces in
/// BY order, and the kept rows as chunks in sorted order. Reads `chunks` only, so a failure
/// leaves the buffer as it was.
fn cut_release(
    chunks: &[Chunk],
    rows: usize,
    cut_rule: Cut,
) -> Result<(Vec<Released>, Vec<Chunk>), ArrowError> {
    if rows == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
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
            if run.root == NO_UNIT {
                run_of_row.extend(std::iter::repeat_n(NO_RUN, run.rows as usize));
                continue;
            }
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
    let mut cut = match cut_rule {
        Cut::Everything => rows,
        Cut::Nothing => 0,
        Cut::DueAt(cutoff) => sorted_arrival
            .values()
            .iter()
            .rposition(|arrived| *arrived <= cutoff)
            .map_or(0, |last_due| last_due + 1),
    };
    if rows - cut > MAX_HELD_ROWS_PER_BRANCH && !matches!(cut_rule, Cut::Nothing) {
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
        // Kept rows stay in sorted order, as one chunk whose rows without a unit are marked
        // by `NO_UNIT` runs.
        let kept_runs = pick(&run_of_row, &kept_order)?;
        let kept_runs = kept_runs
            .as_any()
            .downcast_ref::<UInt32Array>()
            .ok_or_else(|| ArrowError::CastError("run index is not U32".into()))?;
        let mut acks: Vec<AckRun> = Vec::new();
        for index in kept_runs.values().iter() {
            let root = if *index == NO_RUN {
                NO_UNIT
            } else {
                runs[*index as usize].root
            };
            match acks.last_mut() {
                Some(last) if last.root == root => last.rows += 1,
                _ => acks.push(AckRun { root, rows: 1 }),
            }
        }
        if acks.iter().all(|run| run.root == NO_UNIT) {
            acks.clear();
        }
        kept.push(Chunk {
            columns: columns
                .iter()
                .map(|c| pick(c, &kept_order))
                .collect::<Result<_, _>>()?,
            keys: keys
                .iter()
                .map(|c| pick(c, &kept_order))
                .collect::<Result<_, _>>()?,
            arrival: pick(&arrival, &kept_order)?,
            acks,
            times: times.as_ref().map(|t| pick(t, &kept_order)).transpose()?,
        });
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

    /// Flattened released rows: (value, root of its unit or None).
    fn flat(pieces: &[Released]) -> Vec<(i64, Option<u32>)> {
        let mut out = Vec::new();
        for piece in pieces {
            assert!(piece.acks.iter().all(|run| run.root != NO_UNIT));
            let mut roots = piece
                .acks
                .iter()
                .flat_map(|run| std::iter::repeat_n(Some(run.root.index), run.rows as usize));
            for value in values(&piece.columns[0]) {
                out.push((
                    value,
                    if piece.acks.is_empty() {
                        None
                    } else {
                        roots.next().flatten()
                    },
                ));
            }
        }
        out
    }

    /// The release that cuts each chunk with a binary search gives exactly what sorting every
    /// held row gives (the rule before it), over many steps of jittered keys with ties, some
    /// chunks without units, and more chunks than a branch keeps unmerged.
    #[test]
    fn cutting_sorted_chunks_releases_what_sorting_everything_releases() {
        // 40 holds wait at most; 400 outnumber the chunks a branch keeps, so merged chunks
        // (rows of many arrivals) are cut too.
        for max_time_ns in [40, 400] {
            compare_release_rules(max_time_ns);
        }
    }

    fn compare_release_rules(max_time_ns: u64) {
        let mut merged_once = false;
        let mut fast = OrderBuffer::default();
        let mut reference = OrderBuffer::default();
        let mut next = crate::runtime::exec::test_random(0x2545_f491_4f6c_dd1d);
        for step in 0..2_000i64 {
            let rows = 1 + next(6) as usize;
            let keys: Vec<i64> = (0..rows).map(|_| step / 4 + next(12) as i64 - 6).collect();
            let payload: Vec<i64> = keys.iter().map(|k| k * 10_000 + step).collect();
            let acks = if next(5) == 0 {
                Vec::new()
            } else {
                vec![
                    AckRun {
                        root: root(step as u32),
                        rows: (rows / 2) as u32,
                    },
                    AckRun {
                        root: root(step as u32 + 100_000),
                        rows: (rows - rows / 2) as u32,
                    },
                ]
                .into_iter()
                .filter(|run| run.rows > 0)
                .collect()
            };
            for buffer in [&mut fast, &mut reference] {
                buffer.hold(
                    (vec![ints(&payload)], None),
                    vec![ints(&keys)],
                    rows,
                    step,
                    acks.clone(),
                );
            }
            let got = fast.release(step, max_time_ns, false).unwrap();
            let due = reference.due_ns(max_time_ns).is_some_and(|due| due <= step);
            let want = if due {
                reference
                    .release_sorting_all(Cut::DueAt(step - max_time_ns as i64))
                    .unwrap()
            } else {
                Vec::new()
            };
            assert_eq!(flat(&got), flat(&want), "step {step}");
            assert_eq!(fast.held_rows(), reference.held_rows(), "step {step}");
            assert!(fast.held.len() <= MAX_CHUNKS_PER_BRANCH);
            merged_once |= fast.held.iter().any(|held| held.arrival_of_all.is_none());
        }
        assert_eq!(merged_once, max_time_ns > MAX_CHUNKS_PER_BRANCH as u64);
        let got = fast.release(0, 0, true).unwrap();
        let want = reference.release(0, 0, true).unwrap();
        assert_eq!(flat(&got), flat(&want));
        assert_eq!(fast.held_rows(), 0);
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
