//! Snapshots of the branch-local processor state that must survive a restart (DESIGN §6
//! "Runtime state"): deduplication keyspaces, windows, reorder buffers and correlators'
//! pending rows.
//!
//! A snapshot round encodes every branch state changed when it began (in passes of a bounded
//! number of states, see `shard::snapshots`) under `proc/<domain>/<processor>/<branch key>`
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

use arrow_schema::SchemaRef;
use nervix_shards::branch_key::{shard_of_key_bytes, BranchKey, KeyBytes};

use super::work::WorkState;
use super::Graph;
use crate::runtime::exec::correlate_snapshot::{restore_branch, snapshot_branch};
use crate::runtime::exec::dedup::Keyspace;
use crate::runtime::exec::reorder_snapshot::{restore_buffer, snapshot_buffer};
use crate::runtime::exec::window::WindowState;
use crate::runtime::frame::AckRun;
use crate::runtime::plan::{DomainPlan, NodeWork};
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

/// What one [`Graph::snapshot_work`] pass encoded.
pub struct SnapshotPass {
    pub entries: Vec<ProcessorEntry>,
    /// The acknowledgement runs the entries cover (acknowledged once they are durable).
    pub acks: Vec<AckRun>,
    /// The round has states left for the next pass.
    pub unfinished: bool,
}

impl Graph {
    /// Whether processor state changed since the last snapshot.
    pub fn work_changed(&self) -> bool {
        self.work_changed || !self.forgotten.is_empty()
    }

    /// Encodes changed processor branch states, with the acknowledgement runs the snapshot
    /// covers: every state when `all` (a rewrite, or a stop), else the next `budget` entries
    /// of the current round (a branch whose state left meanwhile, or fails to encode and stays
    /// changed for the next round, still counts). A round is the states changed when it began, in a list; a pass
    /// takes from its front, so each changed state is written within the round however
    /// often its neighbours change meanwhile, and states that change during a round wait
    /// for the next one. `unfinished` says the round has states left.
    pub fn snapshot_work(&mut self, all: bool, budget: usize) -> SnapshotPass {
        let plan = self.plan.clone();
        let mut pass = SnapshotPass {
            entries: Vec::new(),
            acks: Vec::new(),
            unfinished: false,
        };
        let prefixes: Vec<String> = plan
            .processors
            .iter()
            .map(|processor| processor_key(&plan.name, &processor.name))
            .collect();
        for (index, gone) in std::mem::take(&mut self.forgotten) {
            pass.entries
                .push((entry_key(&prefixes[index], &gone), Vec::new()));
        }
        let mut schema = None;
        if all {
            self.snapshot_round.clear();
            for (index, prefix) in prefixes.iter().enumerate() {
                for key in self.work[index].keys(false) {
                    let entry = entry_key(prefix, &key);
                    self.snapshot_state(&plan, index, &key, entry, &mut schema, &mut pass);
                }
            }
        } else {
            if self.snapshot_round.is_empty() {
                for index in 0..plan.processors.len() {
                    let keys = self.work[index].keys(true);
                    self.snapshot_round
                        .extend(keys.into_iter().map(|key| (index, key)));
                }
            }
            for _ in 0..budget {
                let Some((index, key)) = self.snapshot_round.pop_front() else {
                    break;
                };
                let entry = entry_key(&prefixes[index], &key);
                self.snapshot_state(&plan, index, &key, entry, &mut schema, &mut pass);
            }
            pass.unfinished = !self.snapshot_round.is_empty();
        }
        // States changed during the round are still dirty: the next interval's round takes
        // them.
        self.work_changed = pass.unfinished || self.work.iter().any(WorkState::has_dirty);
        pass
    }

    /// Encodes processor `index`'s state of branch `key` into `pass` under `entry`, when it
    /// is still there.
    fn snapshot_state(
        &mut self,
        plan: &DomainPlan,
        index: usize,
        key: &BranchKey,
        entry: Vec<u8>,
        schema: &mut Option<SchemaRef>,
        pass: &mut SnapshotPass,
    ) {
        let processor = &plan.processors[index];
        // The state's bytes and the acknowledgement runs they cover, or what failed.
        let encoded = match (&processor.work, &mut self.work[index]) {
            (NodeWork::Dedup { key_model, .. }, WorkState::Dedup { spaces, .. }) => {
                let Some(space) = spaces.get_mut(key) else {
                    return;
                };
                Ok((space.snapshot(*key_model), Vec::new()))
            }
            (NodeWork::Reorder { model, .. }, WorkState::Reorder { buffers }) => {
                let Some(buffer) = buffers.get_mut(key) else {
                    return;
                };
                snapshot_buffer(buffer, *model).map_err(|error| {
                    (
                        error.to_string(),
                        "cannot snapshot a reorder buffer; its rows stay unacknowledged",
                    )
                })
            }
            (
                NodeWork::Correlate(correlate),
                WorkState::Correlate {
                    branches,
                    watermarks_ns,
                    ..
                },
            ) => {
                let Some(state) = branches.get_mut(key) else {
                    return;
                };
                snapshot_branch(state, correlate.model, *watermarks_ns).map_err(|error| {
                    (
                        error.to_string(),
                        "cannot snapshot pending correlator rows; they stay unacknowledged",
                    )
                })
            }
            (NodeWork::Window(window), WorkState::Window { windows, .. }) => {
                let Some(state) = windows.get_mut(key) else {
                    return;
                };
                let mut covered = Vec::new();
                state
                    .snapshot(window, schema, &mut covered)
                    .map(|bytes| (bytes, covered))
                    .map_err(|error| (error.to_string(), "cannot snapshot a window; its rows stay unacknowledged until a snapshot holds them or the window emits them"))
            }
            _ => return,
        };
        match encoded {
            Ok((bytes, covered)) => {
                pass.acks.extend(covered);
                pass.entries.push((entry, bytes));
            }
            Err((error, what)) => tracing::error!(processor = %processor.name, %error, "{what}"),
        }
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
                    None => BranchKey::Unbranched,
                    Some((&KEYED, bytes)) => BranchKey::Key(KeyBytes::new(bytes)),
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
