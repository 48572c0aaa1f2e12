//! Snapshots of the branch-local processor state that must survive a restart: deduplication
//! keyspaces and windows (DESIGN §6 "Runtime state"; reorder buffers are not snapshotted —
//! their rows are unacknowledged, so the sources deliver them again).
//!
//! A snapshot encodes every changed branch state under `proc/<domain>/<processor>/<branch key>`
//! and takes the acknowledgement runs of the window rows it covers; the shard acknowledges them
//! only once the store says the snapshot is durable. So a window row is acknowledged exactly
//! when a restart would find it (or, if it steps out of every window first, when it leaves),
//! and a restored window never counts a row its source delivers again.
//!
//! Restore runs when a domain is deployed on a shard: each stored branch goes to the shard
//! that owns its key now (shard counts may change between runs); a window stored under another
//! model (WIDTH, STEP or aggregates changed) starts empty with a warning, and a keyspace stored
//! under other DEDUPLICATE ON expressions is purged (spec). A model change (ALTER) swaps the
//! graph through the same stop-then-deploy path, so processor state carries over it.

use nervix_shards::branch_key::{shard_of_key_bytes, BranchKey};

use super::work::WorkState;
use super::Graph;
use crate::runtime::exec::dedup::Keyspace;
use crate::runtime::exec::window::WindowState;
use crate::runtime::frame::AckRun;
use crate::runtime::plan::NodeWork;
use crate::runtime::state_store::{processor_key, ProcessorEntry, RuntimeState};

/// Stored branch keys start with this byte for a keyed branch; an unbranched state is stored
/// under the bare prefix.
const KEYED: u8 = b'k';

fn entry_key(prefix: &str, branch: &BranchKey) -> Vec<u8> {
    let mut key = prefix.as_bytes().to_vec();
    if let BranchKey::Key(bytes) = branch {
        key.push(KEYED);
        key.extend_from_slice(bytes);
    }
    key
}

impl Graph {
    /// Whether processor state changed since the last snapshot.
    pub fn work_changed(&self) -> bool {
        self.work_changed || !self.forgotten.is_empty()
    }

    /// Encodes every changed processor branch state (all of them when `all`), with the
    /// acknowledgement runs the snapshot covers.
    pub fn snapshot_work(&mut self, all: bool) -> (Vec<ProcessorEntry>, Vec<AckRun>) {
        self.work_changed = false;
        let plan = self.plan.clone();
        let mut entries = Vec::new();
        let mut acks = Vec::new();
        for (index, gone) in std::mem::take(&mut self.forgotten) {
            let prefix = processor_key(&plan.name, &plan.processors[index].name);
            entries.push((entry_key(&prefix, &gone), Vec::new()));
        }
        for (index, processor) in plan.processors.iter().enumerate() {
            let prefix = processor_key(&plan.name, &processor.name);
            match (&processor.work, &mut self.work[index]) {
                (NodeWork::Dedup { key_model, .. }, WorkState::Dedup { spaces, .. }) => {
                    for (key, space) in spaces.iter_mut() {
                        if all || space.is_dirty() {
                            entries.push((entry_key(&prefix, key), space.snapshot(*key_model)));
                        }
                    }
                }
                (NodeWork::Window(window), WorkState::Window { windows, .. }) => {
                    for (key, state) in windows.iter_mut() {
                        if !(all || state.is_dirty()) {
                            continue;
                        }
                        match state.snapshot(window) {
                            Ok((bytes, covered)) => {
                                entries.push((entry_key(&prefix, key), bytes));
                                acks.extend(covered);
                            }
                            Err(error) => tracing::error!(
                                processor = %processor.name,
                                %error,
                                "cannot snapshot a window; its rows stay unacknowledged"
                            ),
                        }
                    }
                }
                _ => {}
            }
        }
        (entries, acks)
    }

    /// Installs the stored states of the branches this shard owns.
    pub fn restore_work(&mut self, store: &RuntimeState, shard: usize, shards: usize) {
        let plan = self.plan.clone();
        let Some(count) = std::num::NonZeroUsize::new(shards) else {
            return;
        };
        for (index, processor) in plan.processors.iter().enumerate() {
            if matches!(processor.work, NodeWork::Pass | NodeWork::Reorder { .. }) {
                continue;
            }
            let prefix = processor_key(&plan.name, &processor.name);
            let stored = match store.processor_state(&prefix) {
                Ok(stored) => stored,
                Err(error) => {
                    tracing::error!(processor = %processor.name, %error, "cannot read processor state");
                    continue;
                }
            };
            for (suffix, bytes) in stored {
                let key = match suffix.split_first() {
                    None => BranchKey::<Box<[u8]>>::Unbranched,
                    Some((&KEYED, bytes)) => BranchKey::Key(Box::<[u8]>::from(bytes)),
                    Some(_) => continue,
                };
                let owner = match &key {
                    BranchKey::Key(bytes) => shard_of_key_bytes(bytes, count),
                    BranchKey::Unbranched => crate::runtime::shard::mesh::ROOT_SHARD,
                };
                if owner != shard {
                    continue;
                }
                match (&processor.work, &mut self.work[index]) {
                    (NodeWork::Dedup { key_model, .. }, WorkState::Dedup { spaces, .. }) => {
                        match Keyspace::from_snapshot(&bytes, *key_model) {
                            Some(space) => {
                                spaces.insert(key, space);
                            }
                            None => tracing::info!(
                                processor = %processor.name,
                                "a stored deduplication keyspace was taken under other keys (or is unreadable); the branch starts empty"
                            ),
                        }
                    }
                    (
                        NodeWork::Window(window),
                        WorkState::Window {
                            windows,
                            watermark_ns,
                            due,
                        },
                    ) => match WindowState::restore(window, &bytes) {
                        Ok(state) => {
                            if let Some(restored) = state.watermark_ns() {
                                *watermark_ns =
                                    Some(watermark_ns.map_or(restored, |w| w.max(restored)));
                            }
                            if let Some(at_ns) = state.due_ns(window) {
                                due.insert((at_ns, key.clone()));
                            }
                            windows.insert(key, state);
                        }
                        Err(error) => tracing::warn!(
                            processor = %processor.name,
                            %error,
                            "a stored window is not restored; the branch starts empty"
                        ),
                    },
                    _ => {}
                }
            }
        }
    }
}
