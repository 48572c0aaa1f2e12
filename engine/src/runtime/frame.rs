//! What moves on a relay (DESIGN §4 "Frames"): one Arrow batch in the relay's schema, the
//! concrete branch it belongs to, and the acknowledgement runs of its rows.
//!
//! A frame may instead hold several branches' rows, branch after branch ([`Frame::groups`]):
//! a route's fan-out over thousands of branches of one input batch, flushed together, bound
//! for a node that takes such frames whole (a window processor, `Graph::takes_grouped`). Every
//! other reader gets one frame per branch from [`Frame::ungroup`], so what it sees is what the
//! route would have sent without grouping.
//!
//! Rows of one source payload stay contiguous through every node (routes keep input order and
//! groups take rows in ascending order), so a frame's acknowledgement handles are kept
//! run-length encoded — `(root, rows)` pairs in row order — instead of one handle per row. A
//! run's rows each hold one pending unit on their root.

use arrow_array::{ArrayRef, RecordBatch, UInt32Array};
use nervix_shards::ack::AckHandle;
use nervix_shards::branch_key::BranchKey;

/// `rows` consecutive rows that each hold one pending unit on `root`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckRun {
    pub root: AckHandle,
    pub rows: u32,
}

/// The acknowledgement runs state keeps for a stretch of rows: inline when one payload's rows,
/// the common case, so holding them costs no allocation of its own.
pub type AckRuns = smallvec::SmallVec<[AckRun; 1]>;

/// One branch's rows in a grouped frame: the next `rows` rows after the groups before it.
#[derive(Debug, Clone)]
pub struct BranchRows {
    pub key: BranchKey,
    pub rows: u32,
}

/// One immutable frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub batch: RecordBatch,
    /// The rows' branch; of a grouped frame, its first group's.
    pub key: BranchKey,
    /// Set when the rows belong to several branches, group after group (module docs); the
    /// acknowledgement runs and event times then span every group in row order.
    pub groups: Option<std::sync::Arc<[BranchRows]>>,
    /// Empty for rows that carry no acknowledgement (NO ACK, detached boundaries); inline
    /// when one payload's rows (most frames), so a frame costs no allocation for them.
    pub acks: AckRuns,
    /// Per row, its event time (low watermark, ns since the epoch) as an I64 array, when its
    /// ingestor declared `TIMESTAMP AT <field>`; None otherwise (nodes then use their
    /// execution snapshot).
    pub times: Option<ArrayRef>,
}

impl Frame {
    pub fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// Reads the reference counts of its arrays and returns a value depending on them. A node
    /// takes frames one by one, and each frame's first step counts new references to its
    /// arrays — a locked instruction that waits for its line, likely gone from the cache since
    /// the frame was built a flush earlier. The frames waiting in a relay are read this way
    /// back to back before any is taken, so those misses overlap instead of coming in turn.
    ///
    /// A column's length is read too: an array's fields can lie on the line after its
    /// reference count, and the node's first evaluation reads them.
    pub fn warm(&self) -> usize {
        let columns = self
            .batch
            .columns()
            .iter()
            .map(|column| std::sync::Arc::strong_count(column) ^ column.len());
        let times = self.times.iter().map(std::sync::Arc::strong_count);
        // Event times are cloned as an `Int64Array` (their buffer counted) and read on admission.
        let time_values = self
            .times
            .as_ref()
            .and_then(|t| t.as_any().downcast_ref::<arrow_array::Int64Array>())
            .map(|t| {
                t.values().inner().strong_count()
                    ^ t.values().first().copied().unwrap_or(0) as usize
            });
        columns
            .chain(times)
            .chain(time_values)
            .fold(self.acks.len(), usize::wrapping_add)
    }

    /// One frame per branch: a grouped frame's groups, each with its rows' columns (sliced),
    /// acknowledgement runs and event times; any other frame as it is.
    pub fn ungroup(&self) -> Vec<Frame> {
        let Some(groups) = &self.groups else {
            return vec![self.clone()];
        };
        let mut frames = Vec::with_capacity(groups.len());
        let mut runs = RunCursor::new(&self.acks);
        let mut offset = 0usize;
        for group in groups.iter() {
            let len = group.rows as usize;
            let acks = runs.take(len);
            frames.push(Frame {
                batch: self.batch.slice(offset, len),
                key: group.key.clone(),
                groups: None,
                acks,
                times: self.times.as_ref().map(|t| t.slice(offset, len)),
            });
            offset += len;
        }
        debug_assert_eq!(
            offset,
            self.num_rows(),
            "a grouped frame's groups cover its rows"
        );
        frames
    }

    /// A grouped frame's groups parted by `part_of` (each group's part number), as one grouped
    /// frame per part, parts in order of first appearance, each part's groups in their order;
    /// the frame itself when every group is in one part. Rows are gathered with one `take`
    /// per part. None when the columns cannot be taken (a broken invariant: the caller then
    /// ungroups).
    pub fn part_groups(&self, part_of: impl Fn(&BranchKey) -> usize) -> Option<Vec<Frame>> {
        let Some(groups) = &self.groups else {
            return Some(vec![self.clone()]);
        };
        let parts: Vec<usize> = groups.iter().map(|group| part_of(&group.key)).collect();
        if parts.iter().all(|part| *part == parts[0]) {
            return Some(vec![self.clone()]);
        }
        let mut order: Vec<usize> = Vec::new();
        for part in &parts {
            if !order.contains(part) {
                order.push(*part);
            }
        }
        // Each group's rows and acknowledgement runs, in frame order.
        let mut runs = RunCursor::new(&self.acks);
        let mut offset = 0u32;
        let spans: Vec<(u32, u32, AckRuns)> = groups
            .iter()
            .map(|group| {
                let span = (offset, group.rows, runs.take(group.rows as usize));
                offset += group.rows;
                span
            })
            .collect();
        let mut frames = Vec::with_capacity(order.len());
        for part in order {
            let members: Vec<usize> = (0..groups.len()).filter(|g| parts[*g] == part).collect();
            let rows = UInt32Array::from_iter_values(members.iter().flat_map(|g| {
                let (start, len, _) = &spans[*g];
                *start..*start + *len
            }));
            let batch = arrow_select::take::take_record_batch(&self.batch, &rows).ok()?;
            let times = match &self.times {
                Some(times) => Some(arrow_select::take::take(times.as_ref(), &rows, None).ok()?),
                None => None,
            };
            let mut acks = AckRuns::new();
            for g in &members {
                append_runs(&mut acks, &spans[*g].2);
            }
            let part_groups: std::sync::Arc<[BranchRows]> =
                members.iter().map(|g| groups[*g].clone()).collect();
            frames.push(Frame {
                batch,
                key: part_groups[0].key.clone(),
                groups: Some(part_groups),
                acks,
                times,
            });
        }
        Some(frames)
    }

    /// Its first `rows` rows and the rest (`rows` < its length), each with the branch, the
    /// acknowledgement runs and the event times of its rows; the columns are sliced, not copied.
    pub fn split_at(&self, rows: usize) -> (Frame, Frame) {
        assert!(rows < self.num_rows(), "a split inside the frame");
        debug_assert!(self.groups.is_none(), "a grouped frame is split by ungroup");
        let rest = self.num_rows() - rows;
        let (head_acks, tail_acks) = split_runs(&self.acks, rows);
        let part = |offset: usize, len: usize, acks: AckRuns| Frame {
            groups: None,
            batch: self.batch.slice(offset, len),
            key: self.key.clone(),
            acks,
            times: self.times.as_ref().map(|t| t.slice(offset, len)),
        };
        (part(0, rows, head_acks), part(rows, rest, tail_acks))
    }
}

/// For rows `input_rows` (ascending indices into a batch whose runs are `runs`), the runs of
/// the derived rows and, added into `per_run`, how many derived rows each input run produced.
pub fn derive_runs(runs: &[AckRun], input_rows: &UInt32Array, per_run: &mut [u64]) -> AckRuns {
    let mut derived = AckRuns::new();
    let mut rows = input_rows.values().as_ref();
    let mut run_end = 0u64;
    // The rows ascend, so each run's derived rows are the prefix below its end, found by a
    // galloping search: O(log k) for a run of k derived rows, so a frame of many one-row
    // payloads (Kafka records) costs what a walk would and a frame of few large payloads far
    // less. A row past the last run's end counts towards the last run.
    for (index, run) in runs.iter().enumerate() {
        run_end += run.rows as u64;
        let count = if index + 1 == runs.len() {
            rows.len()
        } else {
            prefix_below(rows, run_end)
        };
        rows = &rows[count..];
        if count == 0 {
            continue;
        }
        per_run[index] += count as u64;
        match derived.last_mut() {
            Some(last) if last.root == run.root => last.rows += count as u32,
            _ => derived.push(AckRun {
                root: run.root,
                rows: count as u32,
            }),
        }
    }
    derived
}

/// How many of the ascending `rows` are below `end`: a galloping search (steps 1, 2, 4, …
/// while below, then a binary search inside the last step).
fn prefix_below(rows: &[u32], end: u64) -> usize {
    let (mut below, mut step) = (0usize, 1usize);
    while below + step <= rows.len() && (rows[below + step - 1] as u64) < end {
        below += step;
        step *= 2;
    }
    let window = &rows[below..rows.len().min(below + step)];
    below + window.partition_point(|&row| (row as u64) < end)
}

/// Which run each of `rows` (ascending) belongs to, counted into `per_run`.
pub fn count_rows_per_run(runs: &[AckRun], rows: impl Iterator<Item = u32>, per_run: &mut [u64]) {
    if runs.is_empty() {
        return;
    }
    let mut run = 0usize;
    let mut run_end = runs[0].rows as u64;
    for row in rows {
        let row = row as u64;
        while row >= run_end && run + 1 < runs.len() {
            run += 1;
            run_end += runs[run].rows as u64;
        }
        per_run[run] += 1;
    }
}

/// The runs of rows taken from a batch with runs `runs` in the order `order` (indices into
/// the batch): one run per consecutive stretch of one root, so a payload's rows may be split.
pub fn permuted_runs(runs: &[AckRun], order: &UInt32Array) -> AckRuns {
    if runs.is_empty() {
        return AckRuns::new();
    }
    let mut run_of_row: Vec<u32> = Vec::with_capacity(runs.iter().map(|r| r.rows as usize).sum());
    for (index, run) in runs.iter().enumerate() {
        run_of_row.extend(std::iter::repeat_n(index as u32, run.rows as usize));
    }
    let mut out = AckRuns::new();
    for row in order.values().iter() {
        let Some(index) = run_of_row.get(*row as usize) else {
            continue;
        };
        let root = runs[*index as usize].root;
        match out.last_mut() {
            Some(last) if last.root == root => last.rows += 1,
            _ => out.push(AckRun { root, rows: 1 }),
        }
    }
    out
}

/// Splits runs after their first `rows` rows: (the runs of those rows, the rest).
pub fn split_runs(runs: &[AckRun], rows: usize) -> (AckRuns, AckRuns) {
    let mut head = AckRuns::new();
    let mut tail = AckRuns::new();
    let mut left = rows as u64;
    for run in runs {
        let take = (run.rows as u64).min(left);
        if take > 0 {
            head.push(AckRun {
                root: run.root,
                rows: take as u32,
            });
        }
        if (run.rows as u64) > take {
            tail.push(AckRun {
                root: run.root,
                rows: run.rows - take as u32,
            });
        }
        left -= take;
    }
    (head, tail)
}

/// Takes rows off the front of a run list, run by run, without copying what is left: a
/// grouped frame's groups take their runs in turn (thousands of groups over a few runs).
pub struct RunCursor<'r> {
    runs: &'r [AckRun],
    /// Rows of `runs[0]` already taken.
    taken_of_first: u32,
}

impl<'r> RunCursor<'r> {
    pub fn new(runs: &'r [AckRun]) -> RunCursor<'r> {
        RunCursor {
            runs,
            taken_of_first: 0,
        }
    }

    /// The runs of the next `rows` rows (fewer when the list ends first).
    pub fn take(&mut self, rows: usize) -> AckRuns {
        let mut taken = AckRuns::new();
        let mut left = rows as u64;
        while left > 0 {
            let Some(first) = self.runs.first() else {
                break;
            };
            let available = first.rows - self.taken_of_first;
            let take = (available as u64).min(left) as u32;
            taken.push(AckRun {
                root: first.root,
                rows: take,
            });
            left -= take as u64;
            self.taken_of_first += take;
            if self.taken_of_first == first.rows {
                self.runs = &self.runs[1..];
                self.taken_of_first = 0;
            }
        }
        taken
    }
}

/// `times` restricted to the rows `rows` selects (ascending, distinct row indices), if any.
pub fn take_times(times: Option<&ArrayRef>, rows: &UInt32Array) -> Option<ArrayRef> {
    times.and_then(|t| {
        if rows.len() == t.len() {
            // Ascending and distinct, as many as there are times: every row, in order (a one-
            // group output of a batch, such as every window record), so no copy.
            return Some(t.clone());
        }
        arrow_select::take::take(t.as_ref(), rows, None).ok()
    })
}

/// Concatenates run lists in order, merging neighbours on the same root.
pub fn append_runs(into: &mut AckRuns, more: &[AckRun]) {
    for run in more {
        match into.last_mut() {
            Some(last) if last.root == run.root => last.rows += run.rows,
            _ => into.push(*run),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rows` rows of root `index`.
    fn run(index: u32, rows: u32) -> AckRun {
        AckRun {
            root: handle(index),
            rows,
        }
    }

    fn handle(index: u32) -> AckHandle {
        AckHandle {
            index,
            generation: 0,
        }
    }

    #[test]
    fn a_grouped_frames_parts_keep_each_groups_rows_runs_and_times() {
        use arrow_array::{Array, Int64Array};
        let key = |name: &str| BranchKey::Key(name.as_bytes().into());
        let schema =
            std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                "v",
                arrow_schema::DataType::Int64,
                false,
            )]));
        // Groups a (rows 0–1), b (row 2), c (rows 3–4); payload 1 holds rows 0–2, payload 2
        // rows 3–4. a and c go to part 0, b to part 1.
        let values: ArrayRef = std::sync::Arc::new(Int64Array::from(vec![10, 11, 20, 30, 31]));
        let frame = Frame {
            batch: RecordBatch::try_new(schema, vec![values]).expect("a batch"),
            key: key("a"),
            groups: Some(
                [("a", 2), ("b", 1), ("c", 2)]
                    .iter()
                    .map(|(name, rows)| BranchRows {
                        key: key(name),
                        rows: *rows,
                    })
                    .collect(),
            ),
            acks: smallvec::smallvec![run(1, 3), run(2, 2)],
            times: Some(std::sync::Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5]))),
        };
        let parts = frame
            .part_groups(|k| usize::from(*k == key("b")))
            .expect("parts");
        // Per part: its groups' keys, values, (root, rows) runs and times.
        type Seen = (Vec<BranchKey>, Vec<i64>, Vec<(u32, u32)>, Vec<i64>);
        let seen: Vec<Seen> = parts
            .iter()
            .map(|part| {
                let ints = |a: &dyn Array| {
                    a.as_any()
                        .downcast_ref::<Int64Array>()
                        .expect("i64")
                        .values()
                        .to_vec()
                };
                (
                    part.groups
                        .iter()
                        .flat_map(|g| g.iter())
                        .map(|g| g.key.clone())
                        .collect(),
                    ints(part.batch.column(0).as_ref()),
                    part.acks.iter().map(|r| (r.root.index, r.rows)).collect(),
                    ints(part.times.as_deref().expect("times")),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (
                    vec![key("a"), key("c")],
                    vec![10, 11, 30, 31],
                    vec![(1, 2), (2, 2)],
                    vec![1, 2, 4, 5]
                ),
                (vec![key("b")], vec![20], vec![(1, 1)], vec![3]),
            ]
        );
        assert_eq!(parts[0].key, key("a"), "a part's key is its first group's");
        let whole = frame.part_groups(|_| 0).expect("one part");
        assert_eq!(whole.len(), 1, "one part leaves the frame as it is");
    }

    #[test]
    fn a_run_cursor_takes_what_successive_splits_take() {
        let runs = [run(1, 3), run(2, 1), run(3, 4)];
        for sizes in [
            vec![1, 1, 1, 1, 1, 1, 1, 1],
            vec![2, 3, 3],
            vec![8],
            vec![3, 1, 4],
            vec![5, 0, 2, 1],
            vec![6, 4],
        ] {
            let mut cursor = RunCursor::new(&runs);
            let mut rest = AckRuns::from_slice(&runs);
            for size in sizes.iter().copied() {
                let (head, tail) = split_runs(&rest, size);
                rest = tail;
                assert_eq!(cursor.take(size), head, "sizes {sizes:?}, size {size}");
            }
        }
    }

    #[test]
    fn derived_runs_follow_input_rows_across_run_boundaries() {
        let runs = [
            AckRun {
                root: handle(1),
                rows: 3,
            },
            AckRun {
                root: handle(2),
                rows: 2,
            },
        ];
        let mut per_run = [0u64; 2];
        let derived = derive_runs(&runs, &UInt32Array::from(vec![0, 2, 3, 4]), &mut per_run);
        assert_eq!(per_run, [2, 2]);
        assert_eq!(
            derived.as_slice(),
            [
                AckRun {
                    root: handle(1),
                    rows: 2
                },
                AckRun {
                    root: handle(2),
                    rows: 2
                }
            ]
        );
    }

    /// The per-row walk `derive_runs` replaces: each row belongs to the run it falls in (the
    /// last run takes rows past the end), neighbours on one root merge.
    fn derive_runs_row_by_row(runs: &[AckRun], rows: &[u32], per_run: &mut [u64]) -> Vec<AckRun> {
        let mut derived: Vec<AckRun> = Vec::new();
        for &row in rows {
            let mut end = 0u64;
            let mut run = runs.len() - 1;
            for (index, r) in runs.iter().enumerate() {
                end += r.rows as u64;
                if (row as u64) < end {
                    run = index;
                    break;
                }
            }
            per_run[run] += 1;
            match derived.last_mut() {
                Some(last) if last.root == runs[run].root => last.rows += 1,
                _ => derived.push(AckRun {
                    root: runs[run].root,
                    rows: 1,
                }),
            }
        }
        derived
    }

    #[test]
    fn derived_runs_agree_with_a_row_by_row_walk() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for _ in 0..200 {
            // Roots repeat (a payload's rows can come back after another's), runs can be empty.
            let runs: Vec<AckRun> = (0..1 + next(6))
                .map(|_| AckRun {
                    root: handle(next(3) as u32),
                    rows: next(5) as u32,
                })
                .collect();
            let total: u64 = runs.iter().map(|r| r.rows as u64).sum::<u64>() + 2;
            let rows: Vec<u32> = (0..total as u32).filter(|_| next(2) == 0).collect();
            let (mut fast, mut slow) = (vec![0u64; runs.len()], vec![0u64; runs.len()]);
            let derived = derive_runs(&runs, &UInt32Array::from(rows.clone()), &mut fast);
            assert_eq!(
                derived.as_slice(),
                derive_runs_row_by_row(&runs, &rows, &mut slow)
            );
            assert_eq!(fast, slow, "runs {runs:?}, rows {rows:?}");
        }
    }

    #[test]
    fn appended_runs_merge_neighbours() {
        let mut runs: AckRuns = smallvec::smallvec![AckRun {
            root: handle(1),
            rows: 1,
        }];
        append_runs(
            &mut runs,
            &[
                AckRun {
                    root: handle(1),
                    rows: 2,
                },
                AckRun {
                    root: handle(3),
                    rows: 1,
                },
            ],
        );
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].rows, 3);
    }

    #[test]
    fn times_of_every_row_are_shared_and_of_some_rows_taken() {
        let times: ArrayRef = std::sync::Arc::new(arrow_array::Int64Array::from(vec![10, 20, 30]));
        let every = take_times(Some(&times), &UInt32Array::from(vec![0, 1, 2])).unwrap();
        assert!(std::sync::Arc::ptr_eq(&every, &times));
        let some = take_times(Some(&times), &UInt32Array::from(vec![0, 2])).unwrap();
        assert_eq!(
            some.as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .unwrap()
                .values(),
            &[10, 30]
        );
        assert!(take_times(None, &UInt32Array::from(vec![0])).is_none());
    }
}
