//! Snapshots of the branch-local processor state that must survive a restart (DESIGN §6
//! "Runtime state"): deduplication keyspaces, windows, reorder buffers and correlators'
//! pending rows.
//!
//! A snapshot encodes every changed branch state under `proc/<domain>/<processor>/<branch key>`
//! and takes the acknowledgement runs of the rows it holds (window rows, held reorder rows,
//! pending correlator rows); the shard acknowledges them only once the store says the snapshot
//! is durable. So such a row is acknowledged exactly when a restart would find it (or, if it
//! leaves first, when it leaves), and a restored state never counts a row its source delivers
//! again. A state that fails to encode is logged and keeps its rows' units. A branch that
//! leaves (or empties) is deleted from the store by the next snapshot.
//!
//! Restore runs when a domain is deployed on a shard: each stored branch goes to the shard
//! that owns its key now (shard counts may change between runs); a window stored under another
//! model (WIDTH, STEP or aggregates changed), a reorder buffer under another input schema or
//! BY, and a correlator branch under other side schemas, CORRELATE WHERE or MATCH start empty
//! with a warning (the last two are deleted from the store), and a keyspace stored under
//! other DEDUPLICATE ON expressions is purged (spec). A model change (ALTER) swaps the graph
//! through the same stop-then-deploy path, so processor state carries over it; only reorder
//! buffers are force-released by its pause first (spec "Altering Reorderers").

use nervix_shards::branch_key::{shard_of_key_bytes, BranchKey};

use super::work::WorkState;
use super::Graph;
use crate::runtime::exec::correlate_snapshot::{restore_branch, snapshot_branch};
use crate::runtime::exec::dedup::Keyspace;
use crate::runtime::exec::reorder_snapshot::{restore_buffer, snapshot_buffer};
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
                (NodeWork::Reorder { model, .. }, WorkState::Reorder { buffers }) => {
                    for (key, buffer) in buffers.iter_mut() {
                        if !(all || buffer.is_dirty()) {
                            continue;
                        }
                        match snapshot_buffer(buffer, *model) {
                            Ok((bytes, covered)) => {
                                entries.push((entry_key(&prefix, key), bytes));
                                acks.extend(covered);
                            }
                            Err(error) => tracing::error!(
                                processor = %processor.name,
                                %error,
                                "cannot snapshot a reorder buffer; its rows stay unacknowledged"
                            ),
                        }
                    }
                }
                (
                    NodeWork::Correlate(correlate),
                    WorkState::Correlate {
                        branches,
                        watermarks_ns,
                        ..
                    },
                ) => {
                    for (key, state) in branches.iter_mut() {
                        if !(all || state.is_dirty()) {
                            continue;
                        }
                        match snapshot_branch(state, correlate.model, *watermarks_ns) {
                            Ok((bytes, covered)) => {
                                entries.push((entry_key(&prefix, key), bytes));
                                acks.extend(covered);
                            }
                            Err(error) => tracing::error!(
                                processor = %processor.name,
                                %error,
                                "cannot snapshot pending correlator rows; they stay unacknowledged"
                            ),
                        }
                    }
                }
                (NodeWork::Window(window), WorkState::Window { windows, .. }) => {
                    let mut schema = None;
                    for (key, state) in windows.iter_mut() {
                        if !(all || state.is_dirty()) {
                            continue;
                        }
                        match state.snapshot(window, &mut schema, &mut acks) {
                            Ok(bytes) => entries.push((entry_key(&prefix, key), bytes)),
                            Err(error) => tracing::error!(
                                processor = %processor.name,
                                %error,
                                "cannot snapshot a window; its rows stay unacknowledged until a snapshot holds them or the window emits them"
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
            if matches!(processor.work, NodeWork::Pass | NodeWork::Generate { .. }) {
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
                    (NodeWork::Reorder { model, by, .. }, WorkState::Reorder { buffers }) => {
                        let schema = processor
                            .inputs
                            .first()
                            .map(|input| plan.relays[input.relay].schema.clone());
                        let restored = schema
                            .ok_or(crate::runtime::exec::window::SnapshotError::Malformed)
                            .and_then(|schema| restore_buffer(&bytes, *model, &schema, by.len()));
                        match restored {
                            Ok(buffer) => {
                                buffers.insert(key, buffer);
                            }
                            Err(error) => {
                                tracing::warn!(
                                    processor = %processor.name,
                                    %error,
                                    "a stored reorder buffer is not restored; the branch starts empty"
                                );
                                self.forgotten.push((index, key));
                            }
                        }
                    }
                    (
                        NodeWork::Correlate(correlate),
                        WorkState::Correlate {
                            branches,
                            watermarks_ns,
                            due,
                        },
                    ) => match restore_branch(&bytes, correlate.model, &correlate.side_schemas) {
                        Ok(restored) => {
                            for (now, stored) in
                                watermarks_ns.iter_mut().zip(restored.watermarks_ns)
                            {
                                *now = (*now).max(stored);
                            }
                            if let Some(at_ns) = restored.state.due_ns(correlate.max_time_ns) {
                                due.insert((at_ns, key.clone()));
                            }
                            branches.insert(key, restored.state);
                        }
                        Err(error) => {
                            tracing::warn!(
                                processor = %processor.name,
                                %error,
                                "stored pending correlator rows are not restored; the branch starts empty"
                            );
                            self.forgotten.push((index, key));
                        }
                    },
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
