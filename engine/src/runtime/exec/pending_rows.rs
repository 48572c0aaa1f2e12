//! The rows one side of one CORRELATOR branch holds while they wait for a partner.
//!
//! Rows arrive as whole batches, so they are stored as *segments* — each the held rows of one
//! batch, taken once — and addressed per row as (segment, row). Leaving rows (matched, timed
//! out) only drop their address: no column is copied when a row leaves or arrives, so the cost
//! of a batch is its own size, not the number of rows already waiting. A segment's arrays are
//! released when its last row leaves; when segments pile up or dead rows outweigh live ones
//! ([`MAX_SEGMENTS`], [`COMPACT_SLACK_ROWS`]) the live rows are rewritten into one segment, so
//! memory stays within a constant factor of the live rows.
//!
//! Rows are kept **sorted by time** (event time, or arrival when the source has none; ties in
//! arrival order): the earliest row is at the front, so timing out is popping the front and
//! MATCH EARLIEST / LATEST mean earliest / latest in time. A row arriving earlier than the
//! back is inserted at its place (rare in ordered streams; a binary search and a shift).
//!
//! Why it is correct: every address points into a live segment (a segment is dropped or
//! renumbered only when no address points into it, or together with every address in
//! [`PendingRows::compact`]), and each segment's `live` count equals the addresses into it,
//! kept by the two places rows leave ([`PendingRows::retain`], [`PendingRows::pop_due`]).

use std::collections::VecDeque;

use arrow_array::{new_empty_array, Array, ArrayRef, UInt32Array};
use arrow_schema::{ArrowError, SchemaRef};
use arrow_select::interleave::interleave;
use arrow_select::take::take;
use nervix_shards::ack::AckHandle;

/// Segments one side keeps before its live rows are rewritten into one.
pub const MAX_SEGMENTS: usize = 1_024;
/// Dead rows a side tolerates in live segments beyond its live rows before compacting.
pub const COMPACT_SLACK_ROWS: usize = 65_536;

/// One waiting row.
#[derive(Debug, Clone, Copy)]
pub struct PendingRow {
    segment: u32,
    row: u32,
    /// Event time, or arrival (domain ns).
    pub time_ns: i64,
    /// The row's equality-key hash; None when a key value is null (never matches a keyed
    /// condition). Unused when the correlator has no equality keys.
    pub key: Option<u64>,
    /// Its root, holding one unit (None when the correlator is DETACHED).
    pub root: Option<AckHandle>,
    /// Whether it has matched (MATCH ALL keeps matched rows).
    pub matched: bool,
}

/// The held rows of one batch.
struct Segment {
    columns: Vec<ArrayRef>,
    /// Rows addressed into this segment.
    live: u32,
}

/// One side's waiting rows, sorted by time.
pub struct PendingRows {
    empty: Vec<ArrayRef>,
    segments: VecDeque<Segment>,
    /// The id of `segments[0]`; ids grow by one per segment (wrapping).
    base_id: u32,
    rows: VecDeque<PendingRow>,
    /// Rows in segments still held (live and dead).
    retained_rows: usize,
}

impl PendingRows {
    pub fn new(schema: &SchemaRef) -> PendingRows {
        PendingRows {
            empty: schema
                .fields()
                .iter()
                .map(|f| new_empty_array(f.data_type()))
                .collect(),
            segments: VecDeque::new(),
            base_id: 0,
            rows: VecDeque::new(),
            retained_rows: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The row at `position` (time order).
    pub fn get(&self, position: usize) -> &PendingRow {
        &self.rows[position]
    }

    pub fn rows(&self) -> impl ExactSizeIterator<Item = &PendingRow> + '_ {
        self.rows.iter()
    }

    /// The earliest row's time.
    pub fn earliest_ns(&self) -> Option<i64> {
        self.rows.front().map(|row| row.time_ns)
    }

    /// Takes every row's acknowledgement root, in time order (a snapshot now holds the rows,
    /// so their units are given up once it is durable; see `correlate_snapshot`).
    pub fn take_roots(&mut self) -> Vec<AckHandle> {
        self.rows
            .iter_mut()
            .filter_map(|row| row.root.take())
            .collect()
    }

    /// Marks the rows at `positions` matched.
    pub fn mark_matched(&mut self, positions: impl Iterator<Item = usize>) {
        for position in positions {
            self.rows[position].matched = true;
        }
    }

    /// Holds `rows` of `columns` (a batch of this side) with their per-row details, given in
    /// the same order as `rows`.
    pub fn append(
        &mut self,
        columns: &[ArrayRef],
        rows: &[u32],
        mut detail: impl FnMut(u32) -> (i64, Option<u64>, Option<AckHandle>, bool),
    ) -> Result<(), ArrowError> {
        if rows.is_empty() {
            return Ok(());
        }
        let indices = UInt32Array::from(rows.to_vec());
        let taken = columns
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<Result<Vec<_>, _>>()?;
        let id = self.base_id.wrapping_add(self.segments.len() as u32);
        self.segments.push_back(Segment {
            columns: taken,
            live: rows.len() as u32,
        });
        self.retained_rows += rows.len();
        for (index, row) in rows.iter().enumerate() {
            let (time_ns, key, root, matched) = detail(*row);
            let pending = PendingRow {
                segment: id,
                row: index as u32,
                time_ns,
                key,
                root,
                matched,
            };
            if self.rows.back().is_none_or(|last| last.time_ns <= time_ns) {
                self.rows.push_back(pending);
            } else {
                let at = self.rows.partition_point(|held| held.time_ns <= time_ns);
                self.rows.insert(at, pending);
            }
        }
        self.compact_if_needed()
    }

    /// Keeps the rows `keep(position, row)` selects; the others go to `leaving`.
    pub fn retain(
        &mut self,
        mut keep: impl FnMut(usize, &PendingRow) -> bool,
        leaving: &mut Vec<PendingRow>,
    ) -> Result<(), ArrowError> {
        let mut position = 0;
        let mut gone = Vec::new();
        self.rows.retain(|row| {
            let kept = keep(position, row);
            position += 1;
            if !kept {
                gone.push(*row);
            }
            kept
        });
        for row in &gone {
            self.release(row.segment);
        }
        leaving.extend(gone);
        self.compact_after_leaving();
        Ok(())
    }

    /// Removes the rows whose `time_ns + max_time_ns <= reached_ns` (all when `force`) into
    /// `leaving`, earliest first.
    pub fn pop_due(
        &mut self,
        reached_ns: i64,
        max_time_ns: i64,
        force: bool,
        leaving: &mut Vec<PendingRow>,
    ) -> Result<(), ArrowError> {
        while let Some(front) = self.rows.front() {
            if !force && front.time_ns.saturating_add(max_time_ns) > reached_ns {
                break;
            }
            let row = self.rows.pop_front().expect("front exists");
            self.release(row.segment);
            leaving.push(row);
        }
        self.compact_after_leaving();
        Ok(())
    }

    /// Compacts after rows left, when due. The rows in `leaving` are gone either way: a
    /// compaction that fails (its columns cannot be gathered, past 2 GiB of one STRING
    /// column) leaves the segments as they were, to try again later, rather than fail the
    /// removal — the caller would otherwise drop rows that left and their units with them.
    fn compact_after_leaving(&mut self) {
        if let Err(error) = self.compact_if_needed() {
            tracing::warn!(%error, "pending rows could not be compacted; their memory is kept");
        }
    }

    /// The columns of the rows at `positions`, in that order.
    pub fn columns_at(&self, positions: &[u32]) -> Result<Vec<ArrayRef>, ArrowError> {
        let indices: Vec<(usize, usize)> = positions
            .iter()
            .map(|p| {
                let row = &self.rows[*p as usize];
                (self.slot(row.segment), row.row as usize)
            })
            .collect();
        (0..self.empty.len())
            .map(|column| {
                if indices.is_empty() {
                    return Ok(self.empty[column].clone());
                }
                let arrays: Vec<&dyn Array> = self
                    .segments
                    .iter()
                    .map(|s| s.columns[column].as_ref())
                    .collect();
                interleave(&arrays, &indices)
            })
            .collect()
    }

    fn slot(&self, segment: u32) -> usize {
        segment.wrapping_sub(self.base_id) as usize
    }

    /// One address into `segment` went away.
    fn release(&mut self, segment: u32) {
        let slot = self.slot(segment);
        let held = &mut self.segments[slot];
        assert!(
            held.live > 0,
            "a segment's live count matches its addresses"
        );
        held.live -= 1;
        if held.live == 0 {
            self.retained_rows -= held.columns.first().map_or(0, |c| c.len());
            held.columns = self.empty.clone();
        }
        while self.segments.front().is_some_and(|s| s.live == 0) {
            self.segments.pop_front();
            self.base_id = self.base_id.wrapping_add(1);
        }
    }

    fn compact_if_needed(&mut self) -> Result<(), ArrowError> {
        if self.segments.len() <= MAX_SEGMENTS
            && self.retained_rows <= 2 * self.rows.len() + COMPACT_SLACK_ROWS
        {
            return Ok(());
        }
        self.compact()
    }

    /// Rewrites every live row into one segment (addresses renumbered with it).
    fn compact(&mut self) -> Result<(), ArrowError> {
        let all: Vec<u32> = (0..self.rows.len() as u32).collect();
        let columns = self.columns_at(&all)?;
        self.base_id = self.base_id.wrapping_add(self.segments.len() as u32);
        self.segments.clear();
        self.retained_rows = self.rows.len();
        if self.rows.is_empty() {
            return Ok(());
        }
        self.segments.push_back(Segment {
            columns,
            live: self.rows.len() as u32,
        });
        for (index, row) in self.rows.iter_mut().enumerate() {
            row.segment = self.base_id;
            row.row = index as u32;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]))
    }

    fn values(rows: &PendingRows) -> Vec<i64> {
        let all: Vec<u32> = (0..rows.len() as u32).collect();
        let columns = rows.columns_at(&all).expect("columns");
        columns[0]
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("I64")
            .values()
            .to_vec()
    }

    fn add(rows: &mut PendingRows, values: &[i64], times: &[i64]) {
        let column: ArrayRef = Arc::new(Int64Array::from(values.to_vec()));
        let picked: Vec<u32> = (0..values.len() as u32).collect();
        rows.append(&[column], &picked, |row| {
            (times[row as usize], None, None, false)
        })
        .expect("append");
    }

    #[test]
    fn rows_stay_in_time_order_and_leave_from_the_front() {
        let mut rows = PendingRows::new(&schema());
        add(&mut rows, &[1, 2], &[10, 20]);
        add(&mut rows, &[3, 4], &[15, 30]);
        assert_eq!(values(&rows), vec![1, 3, 2, 4]);
        let mut leaving = Vec::new();
        rows.pop_due(25, 10, false, &mut leaving).expect("pop");
        assert_eq!(leaving.len(), 2);
        assert_eq!(values(&rows), vec![2, 4]);
        assert_eq!(rows.earliest_ns(), Some(20));
    }

    #[test]
    fn emptied_segments_are_released_and_compaction_keeps_values() {
        let mut rows = PendingRows::new(&schema());
        for i in 0..(MAX_SEGMENTS as i64 + 10) {
            add(&mut rows, &[i], &[i]);
        }
        assert!(rows.segments.len() <= MAX_SEGMENTS);
        let mut leaving = Vec::new();
        rows.retain(|_, row| row.time_ns % 2 == 0, &mut leaving)
            .expect("retain");
        let expected: Vec<i64> = (0..(MAX_SEGMENTS as i64 + 10))
            .filter(|i| i % 2 == 0)
            .collect();
        assert_eq!(values(&rows), expected);
        rows.pop_due(i64::MAX, 0, true, &mut Vec::new())
            .expect("drain");
        assert!(rows.is_empty());
        assert!(rows.segments.is_empty());
        assert_eq!(rows.retained_rows, 0);
    }
}
