//! What moves on a relay (DESIGN §4 "Frames"): one Arrow batch in the relay's schema, the
//! concrete branch it belongs to, and the acknowledgement runs of its rows.
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

/// One immutable frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub batch: RecordBatch,
    pub key: BranchKey,
    /// Empty for rows that carry no acknowledgement (NO ACK, detached boundaries).
    pub acks: Vec<AckRun>,
    /// Per row, its event time (low watermark, ns since the epoch) as an I64 array, when its
    /// ingestor declared `TIMESTAMP AT <field>`; None otherwise (nodes then use their
    /// execution snapshot).
    pub times: Option<ArrayRef>,
}

impl Frame {
    pub fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }
}

/// For rows `input_rows` (ascending indices into a batch whose runs are `runs`), the runs of
/// the derived rows and, added into `per_run`, how many derived rows each input run produced.
pub fn derive_runs(runs: &[AckRun], input_rows: &UInt32Array, per_run: &mut [u64]) -> Vec<AckRun> {
    let mut derived: Vec<AckRun> = Vec::new();
    if runs.is_empty() {
        return derived;
    }
    let mut run = 0usize;
    let mut run_end = runs[0].rows as u64;
    // Walking ascending row indices against run boundaries is a merge, not a kernel: one
    // comparison per derived row, and one entry per run touched.
    for &row in input_rows.values().iter() {
        let row = row as u64;
        while row >= run_end && run + 1 < runs.len() {
            run += 1;
            run_end += runs[run].rows as u64;
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
pub fn permuted_runs(runs: &[AckRun], order: &UInt32Array) -> Vec<AckRun> {
    if runs.is_empty() {
        return Vec::new();
    }
    let mut run_of_row: Vec<u32> = Vec::with_capacity(runs.iter().map(|r| r.rows as usize).sum());
    for (index, run) in runs.iter().enumerate() {
        run_of_row.extend(std::iter::repeat_n(index as u32, run.rows as usize));
    }
    let mut out: Vec<AckRun> = Vec::new();
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
pub fn split_runs(runs: &[AckRun], rows: usize) -> (Vec<AckRun>, Vec<AckRun>) {
    let mut head = Vec::new();
    let mut tail = Vec::new();
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

/// `times` restricted to the rows `rows` selects (ascending row indices), if any.
pub fn take_times(times: Option<&ArrayRef>, rows: &UInt32Array) -> Option<ArrayRef> {
    times.and_then(|t| arrow_select::take::take(t.as_ref(), rows, None).ok())
}

/// Concatenates run lists in order, merging neighbours on the same root.
pub fn append_runs(into: &mut Vec<AckRun>, more: &[AckRun]) {
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

    fn handle(index: u32) -> AckHandle {
        AckHandle {
            index,
            generation: 0,
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
            derived,
            vec![
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

    #[test]
    fn appended_runs_merge_neighbours() {
        let mut runs = vec![AckRun {
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
}
