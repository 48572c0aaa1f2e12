//! A DEDUPLICATOR's node work on one frame, and what it does when the payloads whose first
//! rows it passed resolve.
//!
//! A row whose key is new in its branch passes; its key is held (`exec/dedup.rs`) and the
//! shard watches its payload's root (`shard/watch.rs`): once every row derived from that
//! payload is acknowledged downstream the key is kept and snapshots carry it, and if the
//! payload is refused (a sink refused a row, ACK TIMEOUT passed) the key is forgotten so the
//! source's redelivery passes. A crash forgets held keys with the payloads: their sources
//! redeliver, and the keys pass again. Rows that carry no acknowledgement (NO ACK, after a
//! detached boundary) have no payload to wait for: their keys are kept at once.
//!
//! A dropped duplicate gives its unit up like a filtered row; a row whose key cannot be
//! evaluated, or that the keyspace has no room for, is refused with its payload.

use std::collections::HashMap;

use arrow_array::BooleanArray;
use arrow_row::RowConverter;
use nervix_shards::ack::AckHandle;
use nervix_shards::branch_key::{BranchKey, BranchMap};

use super::work::Kept;
use super::{mark_nacked, Graph, Instant};
use crate::runtime::exec::dedup::{
    key_converter, key_hashes, Keyspace, Sighting, MAX_KEYS_PER_BRANCH,
};
use crate::runtime::frame::Frame;
use crate::runtime::shard::mesh::Ctx;
use crate::runtime::shard::watch::{WatchOutcome, MAX_WATCHED_ENTRIES};
use crate::vm::Program;

/// One deduplicator's state on a shard.
#[derive(Default)]
pub(super) struct DedupState {
    pub spaces: BranchMap<Keyspace>,
    /// Built on the first batch (key types are the programs' result types).
    converter: Option<RowConverter>,
    hashes: Vec<u128>,
    /// Per unanswered watch entry: the branch and the keys it holds.
    watched: HashMap<u64, (BranchKey, Vec<u128>)>,
}

/// What one frame's deduplication decided, for the processor's counters.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct DedupTally {
    pub duplicates: usize,
    pub refused: usize,
}

/// What [`DedupState::admit`] works with besides the state.
pub(super) struct DedupInput<'a> {
    pub keys: &'a [Program],
    pub max_time_ns: u64,
    pub frame: &'a Frame,
    /// The rows carry no acknowledgement to wait for.
    pub detached: bool,
    pub at: Instant,
}

impl DedupState {
    /// Keeps the rows of `kept` whose key is new in the frame's branch; marks refused rows'
    /// payloads in `nacked`.
    pub fn admit(
        &mut self,
        input: DedupInput<'_>,
        kept: &mut Kept,
        cx: &mut Ctx<'_>,
        nacked: &mut [bool],
        logs: &mut Vec<String>,
    ) -> DedupTally {
        let DedupInput {
            keys,
            max_time_ns,
            frame,
            detached,
            at,
        } = input;
        let mut tally = DedupTally::default();
        if kept.rows == 0 {
            return tally;
        }
        let watching = !detached && !frame.acks.is_empty();
        if watching && self.watched.len() >= MAX_WATCHED_ENTRIES {
            logs.push(format!(
                "{} rows refused: the deduplicator waits for the outcome of {MAX_WATCHED_ENTRIES} payloads' first rows, its limit",
                kept.rows
            ));
            mark_nacked(
                &frame.acks,
                (0..kept.rows as u32).map(|row| kept.frame_row(row)),
                nacked,
            );
            tally.refused = kept.rows;
            kept.keep(
                &BooleanArray::from(vec![false; kept.rows]),
                frame.acks.len() > 1,
            );
            return tally;
        }
        let (values, failed) = kept.evaluate(keys.iter(), at.snapshot_ns, "DEDUPLICATE ON", logs);
        if self.converter.is_none() {
            match key_converter(&values) {
                Ok(built) => self.converter = Some(built),
                Err(error) => {
                    logs.push(format!("deduplication keys cannot be encoded: {error}"));
                    return tally;
                }
            }
        }
        let Some(converter) = self.converter.as_mut() else {
            return tally;
        };
        if let Err(error) = key_hashes(converter, &values, 0..kept.rows, &mut self.hashes) {
            logs.push(format!("deduplication keys cannot be encoded: {error}"));
            return tally;
        }
        let space = self.spaces.entry(frame.key.clone()).or_default();
        space.expire(at.snapshot_ns, max_time_ns);
        let mut mask = Vec::with_capacity(kept.rows);
        let mut full: Vec<u32> = Vec::new();
        // (frame row, key) of each first sighting, in row order.
        let mut firsts: Vec<(u32, u128)> = Vec::new();
        let mut next_failed = failed.iter().peekable();
        for (row, hash) in self.hashes.iter().enumerate() {
            if next_failed.peek() == Some(&&(row as u32)) {
                next_failed.next();
                mask.push(false);
                continue;
            }
            match space.admit(*hash, at.snapshot_ns) {
                Sighting::First => {
                    if watching {
                        firsts.push((kept.frame_row(row as u32), *hash));
                    }
                    mask.push(true);
                }
                Sighting::Duplicate => {
                    tally.duplicates += 1;
                    mask.push(false);
                }
                Sighting::Full => {
                    full.push(row as u32);
                    mask.push(false);
                }
            }
        }
        for (root, held) in by_root(&frame.acks, &firsts) {
            let entry = cx.watch(root);
            for key in &held {
                space.hold(*key, entry);
            }
            self.watched.insert(entry, (frame.key.clone(), held));
        }
        if !full.is_empty() {
            logs.push(format!(
                "{} rows refused: the branch's deduplication keyspace holds its limit of {MAX_KEYS_PER_BRANCH} keys",
                full.len(),
            ));
        }
        let refused: Vec<u32> = failed
            .iter()
            .chain(&full)
            .map(|row| kept.frame_row(*row))
            .collect();
        if !refused.is_empty() {
            mark_nacked(&frame.acks, refused.into_iter(), nacked);
        }
        tally.refused = failed.len() + full.len();
        kept.keep(&BooleanArray::from(mask), frame.acks.len() > 1);
        tally
    }

    /// Watches answered: the keys they held are kept or forgotten. Returns whether any was
    /// this deduplicator's.
    pub fn resolve(&mut self, outcomes: &[WatchOutcome]) -> bool {
        if self.watched.is_empty() {
            return false;
        }
        let mut changed = false;
        for (entry, acknowledged) in outcomes {
            let Some((branch, keys)) = self.watched.remove(entry) else {
                continue;
            };
            // A branch that left took its keys along.
            if let Some(space) = self.spaces.get_mut(&branch) {
                for key in keys {
                    space.resolve(key, *entry, *acknowledged);
                }
                changed = true;
            }
        }
        changed
    }
}

/// `firsts` (ascending frame rows) grouped by the root of the run each row is in.
fn by_root(
    runs: &[crate::runtime::frame::AckRun],
    firsts: &[(u32, u128)],
) -> Vec<(AckHandle, Vec<u128>)> {
    let mut groups: Vec<(AckHandle, Vec<u128>)> = Vec::new();
    let mut runs = runs.iter();
    let mut current: Option<(AckHandle, u64)> = None;
    let mut run_start = 0u64;
    for (row, key) in firsts {
        let row = *row as u64;
        while current.is_none_or(|(_, end)| row >= end) {
            let Some(run) = runs.next() else {
                // A row past the last run's end counts towards the last run (`derive_runs`).
                break;
            };
            let end = run_start + run.rows as u64;
            run_start = end;
            current = Some((run.root, end));
            groups.push((run.root, Vec::new()));
        }
        if let Some(group) = groups.last_mut() {
            group.1.push(*key);
        }
    }
    groups.retain(|(_, keys)| !keys.is_empty());
    groups
}

impl Graph {
    /// Answers to this shard's watches (`watch.rs`); entries of other graphs are ignored.
    pub fn watch_outcomes(&mut self, outcomes: &[WatchOutcome]) {
        for state in &mut self.work {
            if let super::work::WorkState::Dedup(dedup) = state {
                if dedup.resolve(outcomes) {
                    self.work_changed = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::frame::AckRun;

    fn root(index: u32) -> AckHandle {
        AckHandle {
            index,
            generation: 0,
        }
    }

    #[test]
    fn first_sightings_are_grouped_by_their_rows_payload() {
        let runs = [
            AckRun {
                root: root(1),
                rows: 2,
            },
            AckRun {
                root: root(2),
                rows: 3,
            },
            AckRun {
                root: root(3),
                rows: 1,
            },
        ];
        let groups = by_root(&runs, &[(0, 10), (1, 11), (4, 12), (5, 13)]);
        assert_eq!(
            groups,
            vec![
                (root(1), vec![10, 11]),
                (root(2), vec![12]),
                (root(3), vec![13])
            ]
        );
        assert!(by_root(&runs, &[]).is_empty());
    }
}
