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
//! Why a batch costs its candidates, not everything pending: each row gets an arrival sequence
//! number, so (time, sequence) orders the rows exactly as they are stored and names a row for
//! as long as it is held, wherever inserts and removals move it. Rows with an equality key are
//! listed under it ([`PendingRows::keyed`]) by (time, sequence), each with a hint of where it
//! stands counted from the first row ever held: rows leave the front without moving the
//! others' hints, so in a stream held in time order a hint stays right and a lookup is one
//! check. A hint a late row's insert or a purge made stale is found again by a binary search
//! and corrected. A row taken from the middle (a pair under MATCH EARLIEST / LATEST) is only
//! marked gone; gone rows are dropped from the ends at once and from the middle when they
//! outnumber the live rows by [`COMPACT_SLACK_ROWS`], so positions, which count gone rows,
//! stay valid within one batch's matching.
//!
//! Why it is correct: every address points into a live segment (a segment is dropped or
//! renumbered only when no address points into it, or together with every address in
//! [`PendingRows::compact`]), and each segment's `live` count equals the addresses of live
//! rows into it, kept by the two places rows leave ([`PendingRows::remove`],
//! [`PendingRows::pop_due`]), which also unlist the row from its key.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use arrow_array::{new_empty_array, Array, ArrayRef, UInt32Array};
use arrow_schema::{ArrowError, SchemaRef};
use arrow_select::interleave::interleave;
use arrow_select::take::take;
use nervix_shards::ack::AckHandle;

/// Segments one side keeps before its live rows are rewritten into one.
pub const MAX_SEGMENTS: usize = 1_024;
/// Dead rows a side tolerates in live segments beyond its live rows before compacting; also
/// the gone rows it keeps in place beyond its live rows.
pub const COMPACT_SLACK_ROWS: usize = 65_536;

/// Key hashes are xxh3 output already: the map uses them as they are.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// A map keyed by equality-key hashes.
pub type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// One waiting row.
#[derive(Debug, Clone, Copy)]
pub struct PendingRow {
    segment: u32,
    row: u32,
    /// Arrival order on this side: with `time_ns`, the row's place and name.
    seq: u64,
    /// Taken from the middle; dropped at the next purge.
    gone: bool,
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

impl PendingRow {
    fn place(&self) -> (i64, u64) {
        (self.time_ns, self.seq)
    }
}

/// A keyed row's name, (time, seq), and where it stood when last found (`popped` + position).
#[derive(Debug, Clone, Copy)]
struct Place {
    at: (i64, u64),
    hint: u64,
}

/// The places of one key's live rows, ascending; most keys hold one row, kept inline.
enum Places {
    One(Place),
    Many(VecDeque<Place>),
}

impl Places {
    fn insert(&mut self, place: Place) {
        if let Places::One(first) = *self {
            *self = Places::Many(VecDeque::from([first]));
        }
        let Places::Many(places) = self else {
            unreachable!("a key of two rows or more is Many")
        };
        if places.back().is_none_or(|last| last.at < place.at) {
            places.push_back(place);
        } else {
            let at = places.partition_point(|held| held.at < place.at);
            places.insert(at, place);
        }
    }

    /// Drops the place of `at`; true when none is left.
    fn remove(&mut self, at: (i64, u64)) -> bool {
        match self {
            Places::One(only) => only.at == at,
            Places::Many(places) => {
                if places.front().is_some_and(|first| first.at == at) {
                    places.pop_front();
                } else if let Ok(index) = places.binary_search_by(|held| held.at.cmp(&at)) {
                    places.remove(index);
                }
                places.is_empty()
            }
        }
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Place> + '_ {
        let (one, many) = match self {
            Places::One(only) => (Some(only), None),
            Places::Many(places) => (None, Some(places.iter_mut())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

/// The held rows of one batch.
struct Segment {
    columns: Vec<ArrayRef>,
    /// Live rows addressed into this segment.
    live: u32,
}

/// One side's waiting rows, sorted by time.
pub struct PendingRows {
    empty: Vec<ArrayRef>,
    segments: VecDeque<Segment>,
    /// The id of `segments[0]`; ids grow by one per segment (wrapping).
    base_id: u32,
    /// Live and gone rows, sorted by (time, seq); never gone at either end.
    rows: VecDeque<PendingRow>,
    /// Gone rows still in `rows`.
    gone_rows: usize,
    next_seq: u64,
    /// Rows ever dropped from the front: position + `popped` is where a row stands counted
    /// from the first row ever held, which rows leaving the front do not change.
    popped: u64,
    /// Per key hash: the places of the live rows with that key, ascending.
    by_key: KeyMap<Places>,
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
            gone_rows: 0,
            next_seq: 0,
            popped: 0,
            by_key: KeyMap::default(),
            retained_rows: 0,
        }
    }

    /// Live rows.
    pub fn len(&self) -> usize {
        self.rows.len() - self.gone_rows
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The row at `position` (time order, gone rows counted; positions stay valid until the
    /// next [`PendingRows::remove`], [`PendingRows::pop_due`] or [`PendingRows::append`]).
    pub fn get(&self, position: usize) -> &PendingRow {
        &self.rows[position]
    }

    /// The live rows in time order.
    pub fn rows(&self) -> impl Iterator<Item = &PendingRow> + '_ {
        self.rows.iter().filter(|row| !row.gone)
    }

    /// The positions of the live rows, in time order.
    pub fn live_positions(&self) -> Vec<u32> {
        (0..self.rows.len() as u32)
            .filter(|position| !self.rows[*position as usize].gone)
            .collect()
    }

    /// The positions of the live rows whose key hash is `key`, in time order, into `out`.
    pub fn keyed(&mut self, key: u64, out: &mut Vec<u32>) {
        let Some(places) = self.by_key.get_mut(&key) else {
            return;
        };
        for place in places.iter_mut() {
            let guess = place.hint.wrapping_sub(self.popped) as usize;
            let position = match self.rows.get(guess) {
                Some(row) if row.place() == place.at => guess,
                _ => {
                    let found = self.rows.partition_point(|row| row.place() < place.at);
                    place.hint = self.popped + found as u64;
                    found
                }
            };
            debug_assert!(
                self.rows
                    .get(position)
                    .is_some_and(|row| row.place() == place.at && !row.gone),
                "a listed key names a live row"
            );
            out.push(position as u32);
        }
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
            .filter(|row| !row.gone)
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
                seq: self.next_seq,
                gone: false,
                time_ns,
                key,
                root,
                matched,
            };
            self.next_seq += 1;
            let position = if self.rows.back().is_none_or(|last| last.time_ns <= time_ns) {
                self.rows.push_back(pending);
                self.rows.len() - 1
            } else {
                let at = self.rows.partition_point(|held| held.time_ns <= time_ns);
                self.rows.insert(at, pending);
                at
            };
            if let Some(key) = key {
                let place = Place {
                    at: pending.place(),
                    hint: self.popped + position as u64,
                };
                match self.by_key.entry(key) {
                    Entry::Occupied(mut places) => places.get_mut().insert(place),
                    Entry::Vacant(vacant) => {
                        vacant.insert(Places::One(place));
                    }
                }
            }
        }
        self.compact_if_needed()
    }

    /// Takes the rows at `positions` (ascending, live) out into `leaving`, in that order.
    pub fn remove(&mut self, positions: &[u32], leaving: &mut Vec<PendingRow>) {
        for position in positions {
            let held = &mut self.rows[*position as usize];
            assert!(!held.gone, "a removed position names a live row");
            let row = *held;
            // Its unit leaves with it: a gone row holds none (a snapshot must not take it).
            held.gone = true;
            held.root = None;
            self.gone_rows += 1;
            self.unlist(&row);
            self.release(row.segment);
            leaving.push(row);
        }
        self.trim_gone_ends();
        if self.gone_rows > self.len() + COMPACT_SLACK_ROWS {
            self.purge_gone();
        }
        self.compact_after_leaving();
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
            self.popped += 1;
            self.unlist(&row);
            self.release(row.segment);
            leaving.push(row);
            self.trim_gone_ends();
        }
        self.compact_after_leaving();
        Ok(())
    }

    /// Drops `row`'s place from its key's list.
    fn unlist(&mut self, row: &PendingRow) {
        let Some(key) = row.key else {
            return;
        };
        if let Entry::Occupied(mut places) = self.by_key.entry(key) {
            if places.get_mut().remove(row.place()) {
                places.remove();
            }
        }
    }

    /// Drops gone rows from both ends (so the front is the earliest live row).
    fn trim_gone_ends(&mut self) {
        while self.rows.front().is_some_and(|row| row.gone) {
            self.rows.pop_front();
            self.popped += 1;
            self.gone_rows -= 1;
        }
        while self.rows.back().is_some_and(|row| row.gone) {
            self.rows.pop_back();
            self.gone_rows -= 1;
        }
    }

    /// Drops every gone row (positions change).
    fn purge_gone(&mut self) {
        if self.gone_rows > 0 {
            self.rows.retain(|row| !row.gone);
            self.gone_rows = 0;
        }
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
            "a segment's live count matches its live addresses"
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
            && self.retained_rows <= 2 * self.len() + COMPACT_SLACK_ROWS
        {
            return Ok(());
        }
        self.compact()
    }

    /// Rewrites every live row into one segment (addresses renumbered with it; gone rows
    /// dropped, so positions change).
    fn compact(&mut self) -> Result<(), ArrowError> {
        let columns = self.columns_at(&self.live_positions())?;
        self.purge_gone();
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
        let columns = rows.columns_at(&rows.live_positions()).expect("columns");
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

    /// A row taken from the middle hands its unit to the caller once: a snapshot taking the
    /// side's roots afterwards gets only the rows still held (a gone row's unit twice would
    /// acknowledge another row's payload early).
    #[test]
    fn a_row_taken_from_the_middle_gives_its_unit_once() {
        let mut rows = PendingRows::new(&schema());
        let column: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        rows.append(&[column], &[0, 1, 2], |row| {
            let root = AckHandle {
                index: row,
                generation: 0,
            };
            (i64::from(row), None, Some(root), false)
        })
        .expect("append");
        let mut leaving = Vec::new();
        rows.remove(&[1], &mut leaving);
        assert_eq!(leaving.len(), 1);
        assert_eq!(leaving[0].root.map(|r| r.index), Some(1));
        assert_eq!(rows.len(), 2);
        let roots: Vec<u32> = rows.take_roots().iter().map(|r| r.index).collect();
        assert_eq!(roots, vec![0, 2]);
    }

    /// Random holds (late rows included), middle removals and expiries against a plain list:
    /// the live rows, their order and each key's listed rows always agree with it.
    #[test]
    fn keyed_lookups_agree_with_a_plain_list_under_random_work() {
        let mut next = crate::runtime::exec::test_random(0x2545_f491_4f6c_dd1d);
        let mut rows = PendingRows::new(&schema());
        // (time, value, key) of the live rows, in hold order.
        let mut model: Vec<(i64, i64, Option<u64>)> = Vec::new();
        let mut value = 0i64;
        let mut clock = 0i64;
        // Then one-row holds without expiry past MAX_SEGMENTS, so compaction drops gone rows
        // from the middle and every later hint is stale.
        for step in 0..3_000 + 2 * MAX_SEGMENTS + 100 {
            let late_phase = step >= 3_000;
            match if late_phase {
                6 + 4 * (step % 2) as u64
            } else {
                next(10)
            } {
                0..=5 | 10 => {
                    let n = if late_phase { 1 } else { 1 + next(40) as usize };
                    let mut batch = Vec::new();
                    for _ in 0..n {
                        // Mostly in order, sometimes up to 50 behind.
                        let time = clock - if next(4) == 0 { next(50) as i64 } else { 0 };
                        clock += next(3) as i64;
                        let key = (next(8) != 0).then(|| next(16));
                        batch.push((time, value, key));
                        value += 1;
                    }
                    let column: ArrayRef =
                        Arc::new(Int64Array::from_iter_values(batch.iter().map(|r| r.1)));
                    let picked: Vec<u32> = (0..n as u32).collect();
                    rows.append(&[column], &picked, |row| {
                        let (time, _, key) = batch[row as usize];
                        (time, key, None, false)
                    })
                    .expect("append");
                    model.extend(batch);
                }
                6..=8 => {
                    let live = rows.live_positions();
                    let mut picked: Vec<u32> = if late_phase {
                        // One row at most, anywhere, so the side keeps growing.
                        let take = step % 4 == 0 && !live.is_empty();
                        let any = next(live.len().max(1) as u64) as usize;
                        live.get(any)
                            .copied()
                            .filter(|_| take)
                            .into_iter()
                            .collect()
                    } else {
                        live.iter().copied().filter(|_| next(5) == 0).collect()
                    };
                    picked.dedup();
                    let gone: Vec<i64> = {
                        let columns = rows.columns_at(&picked).expect("columns");
                        let values = columns[0].as_any().downcast_ref::<Int64Array>().unwrap();
                        values.values().to_vec()
                    };
                    let mut leaving = Vec::new();
                    rows.remove(&picked, &mut leaving);
                    assert_eq!(leaving.len(), picked.len());
                    model.retain(|r| !gone.contains(&r.1));
                }
                _ => {
                    let reached = clock - 30 + next(20) as i64;
                    assert!(!late_phase, "no expiry in the last phase");
                    let mut leaving = Vec::new();
                    rows.pop_due(reached, 0, false, &mut leaving).expect("pop");
                    let before = model.len();
                    model.retain(|r| r.0 > reached);
                    assert_eq!(leaving.len(), before - model.len());
                }
            }
            // Time order, ties in hold order: a stable sort of the hold order.
            let mut expected = model.clone();
            expected.sort_by_key(|r| r.0);
            assert_eq!(rows.len(), expected.len());
            assert_eq!(
                values(&rows),
                expected.iter().map(|r| r.1).collect::<Vec<_>>()
            );
            for key in 0..16u64 {
                let mut positions = Vec::new();
                rows.keyed(key, &mut positions);
                let columns = rows.columns_at(&positions).expect("columns");
                let got = columns[0].as_any().downcast_ref::<Int64Array>().unwrap();
                let want: Vec<i64> = expected
                    .iter()
                    .filter(|r| r.2 == Some(key))
                    .map(|r| r.1)
                    .collect();
                assert_eq!(got.values().to_vec(), want, "key {key}");
            }
        }
    }

    #[test]
    fn emptied_segments_are_released_and_compaction_keeps_values() {
        let mut rows = PendingRows::new(&schema());
        for i in 0..(MAX_SEGMENTS as i64 + 10) {
            add(&mut rows, &[i], &[i]);
        }
        assert!(rows.segments.len() <= MAX_SEGMENTS);
        let mut leaving = Vec::new();
        let odd: Vec<u32> = (0..rows.len() as u32).filter(|p| p % 2 == 1).collect();
        rows.remove(&odd, &mut leaving);
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
