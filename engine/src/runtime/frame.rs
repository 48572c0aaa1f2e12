//! What moves on a relay (DESIGN §4 "Frames"): one Arrow batch in the relay's schema, the
//! concrete branch it belongs to, and the acknowledgement runs of its rows.
//!
//! Rows of one source payload stay contiguous through every node (routes keep input order and
//! groups take rows in ascending order), so a frame's acknowledgement handles are kept
//! run-length encoded — `(root, rows)` pairs in row order — instead of one handle per row. A
//! run's rows each hold one pending unit on their root.

use arrow_array::{RecordBatch, UInt32Array};
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
