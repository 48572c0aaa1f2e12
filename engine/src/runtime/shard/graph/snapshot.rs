//! Snapshots of the branch-local processor state that must survive a restart (DESIGN §6
//! "Runtime state"): deduplication keyspaces, windows, reorder buffers and correlators'
//! pending rows.
//!
//! A snapshot round encodes every branch state changed when it began (in passes of a bounded
//! number of states, see `shard::snapshots`) under `proc/<domain>/<processor>/<branch key>`
//! (a branch key too long for the store is stored under its digest: [`HASHED`])
//! and takes the acknowledgement runs of the rows it holds (window rows, held reorder rows,
//! pending correlator rows); the shard acknowledges them only once the store says the snapshot
//! is durable. So such a row is acknowledged exactly when a restart would find it (or, if it
//! leaves first, when it leaves), and a restored state never counts a row its source delivers
//! again. A state that fails to encode is logged and keeps its rows' units (a rewrite round
//! that met one does not release the rows it carries, `shard::snapshots`). A branch that
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
use sha2::{Digest, Sha256};

use super::work::WorkState;
use super::Graph;
use crate::runtime::exec::correlate_snapshot::{restore_branch, snapshot_branch};
use crate::runtime::exec::dedup::Keyspace;
use crate::runtime::exec::reorder_snapshot::{restore_buffer, snapshot_buffer};
use crate::runtime::exec::window::WindowState;
use crate::runtime::frame::AckRun;
use crate::runtime::plan::{DomainPlan, NodeWork};
use crate::runtime::state_store::{
    processor_key, ProcessorEntry, RuntimeState, MAX_STORED_KEY_BYTES,
};

/// Stored branch keys start with this byte for a keyed branch; an unbranched state is stored
/// under the bare prefix.
const KEYED: u8 = b'k';
/// A keyed branch whose key would make the stored key longer than LMDB stores
/// ([`MAX_STORED_KEY_BYTES`]) is stored under this byte and the SHA-256 digest of its key, and
/// its value starts with the key itself (4 bytes of length, little-endian, then the bytes), so
/// a restore knows the branch (and checks it against the digest).
const HASHED: u8 = b'h';

/// The store entry of processor state `state` (empty: delete the entry) of branch `branch`,
/// under `prefix` (module docs of `state_store` and [`HASHED`]).
fn stored_entry(prefix: &str, branch: &BranchKey, state: Vec<u8>) -> ProcessorEntry {
    let BranchKey::Key(bytes) = branch else {
        return (prefix.as_bytes().to_vec(), state);
    };
    // Room for the marker and the key or its digest, so the key is allocated once.
    let mut key = Vec::with_capacity(prefix.len() + 1 + bytes.len().min(MAX_STORED_KEY_BYTES));
    key.extend_from_slice(prefix.as_bytes());
    if key.len() + 1 + bytes.len() <= MAX_STORED_KEY_BYTES {
        key.push(KEYED);
        key.extend_from_slice(bytes);
        return (key, state);
    }
    key.push(HASHED);
    key.extend_from_slice(&Sha256::digest(bytes.as_ref()));
    if state.is_empty() {
        return (key, state);
    }
    let mut value = Vec::with_capacity(4 + bytes.len() + state.len());
    value.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    value.extend_from_slice(bytes);
    value.extend_from_slice(&state);
    (key, value)
}

/// The branch and state of a stored entry: `suffix` is its key after the processor's prefix.
/// None for an entry this build does not read (or a hashed entry whose key does not match its
/// digest).
fn read_entry<'a>(suffix: &[u8], value: &'a [u8]) -> Option<(BranchKey, &'a [u8])> {
    match suffix.split_first() {
        None => Some((BranchKey::Unbranched, value)),
        Some((&KEYED, bytes)) => Some((BranchKey::Key(KeyBytes::new(bytes)), value)),
        Some((&HASHED, digest)) => {
            let length = u32::from_le_bytes(value.get(..4)?.try_into().ok()?) as usize;
            let bytes = value.get(4..4usize.checked_add(length)?)?;
            if Sha256::digest(bytes).as_slice() != digest {
                return None;
            }
            Some((BranchKey::Key(KeyBytes::new(bytes)), &value[4 + length..]))
        }
        Some(_) => None,
    }
}

/// Which changed states a [`Graph::snapshot_work`] pass encodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotScope {
    /// Every state, in one pass (a stop after a snapshot that was not written).
    Every,
    /// Every state changed since its last snapshot, in one pass (a stop).
    Changed,
    /// The next states of the current round, within a budget (a periodic pass).
    RoundSlice(PassBudget),
}

/// How much one [`SnapshotScope::RoundSlice`] pass encodes at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassBudget {
    pub states: usize,
    /// Encoded bytes: the pass ends once it has encoded this many (a state larger than the
    /// whole budget is still encoded, alone or last in its pass).
    pub bytes: usize,
}

/// What one [`Graph::snapshot_work`] pass encoded.
pub struct SnapshotPass {
    pub entries: Vec<ProcessorEntry>,
    /// The acknowledgement runs the entries cover (acknowledged once they are durable).
    pub acks: Vec<AckRun>,
    /// The round has states left for the next pass.
    pub unfinished: bool,
    /// States that failed to encode (logged; each keeps its rows' units and stays changed).
    pub unencoded: usize,
}

impl Graph {
    /// Whether processor state changed since the last snapshot.
    pub fn work_changed(&self) -> bool {
        self.work_changed || !self.forgotten.is_empty()
    }

    /// Encodes processor branch states, with the acknowledgement runs the snapshot covers, and
    /// the deletions of states that left. `scope` says which states ([`SnapshotScope`]); a
    /// round slice takes the next entries of the current round (a branch whose state left
    /// meanwhile, or fails to encode, still counts: a window that failed stays changed for
    /// the next round, a reorder buffer or correlator branch is tried again once it changes). A
    /// round is the states changed when it began, in a list; a pass takes from its front, so
    /// each changed state is written within the round however often its neighbours change
    /// meanwhile, and states that change during a round wait for the next one. The other
    /// scopes end the round. `unfinished` says the round has states left.
    pub fn snapshot_work(&mut self, scope: SnapshotScope) -> SnapshotPass {
        let plan = self.plan.clone();
        let mut pass = SnapshotPass {
            entries: Vec::new(),
            acks: Vec::new(),
            unfinished: false,
            unencoded: 0,
        };
        let prefixes: Vec<String> = plan
            .processors
            .iter()
            .map(|processor| processor_key(&plan.name, &processor.name))
            .collect();
        for (index, gone) in std::mem::take(&mut self.forgotten) {
            pass.entries
                .push(stored_entry(&prefixes[index], &gone, Vec::new()));
        }
        let mut schema = None;
        if let SnapshotScope::RoundSlice(budget) = scope {
            let mut bytes = 0usize;
            if self.snapshot_round.is_empty() {
                for index in 0..plan.processors.len() {
                    let keys = self.work[index].keys(true);
                    self.snapshot_round
                        .extend(keys.into_iter().map(|key| (index, key)));
                }
            }
            for _ in 0..budget.states {
                if bytes >= budget.bytes {
                    break;
                }
                let Some((index, key)) = self.snapshot_round.pop_front() else {
                    break;
                };
                let before = pass.entries.len();
                self.snapshot_state(&plan, index, &key, &prefixes[index], &mut schema, &mut pass);
                bytes += pass.entries[before..]
                    .iter()
                    .map(|(_, state)| state.len())
                    .sum::<usize>();
            }
            pass.unfinished = !self.snapshot_round.is_empty();
        } else {
            // Every state the round still lists is changed, so the changed states cover it.
            self.snapshot_round.clear();
            let changed_only = scope == SnapshotScope::Changed;
            for (index, prefix) in prefixes.iter().enumerate() {
                for key in self.work[index].keys(changed_only) {
                    self.snapshot_state(&plan, index, &key, prefix, &mut schema, &mut pass);
                }
            }
        }
        // States changed during the round are still dirty: the next interval's round takes
        // them.
        self.work_changed = pass.unfinished || self.work.iter().any(WorkState::has_dirty);
        pass
    }

    /// Starts a round over every state, changed or not: a snapshot that was not written
    /// marked its states clean when it encoded them, so they are written again. The
    /// [`SnapshotScope::RoundSlice`] passes that follow take the round in slices, as they do
    /// a round of changed states. Returns the store keys of the round's states (the shard
    /// drops carried deletions of these: the round writes their states again).
    pub fn start_rewrite_round(&mut self) -> Vec<Vec<u8>> {
        self.snapshot_round.clear();
        let mut stored_keys = Vec::new();
        for (index, processor) in self.plan.processors.iter().enumerate() {
            let prefix = processor_key(&self.plan.name, &processor.name);
            for key in self.work[index].keys(false) {
                stored_keys.push(stored_entry(&prefix, &key, Vec::new()).0);
                self.snapshot_round.push_back((index, key));
            }
        }
        self.work_changed |= !self.snapshot_round.is_empty();
        stored_keys
    }

    /// Encodes processor `index`'s state of branch `key` into `pass` under `prefix`, when it
    /// is still there.
    fn snapshot_state(
        &mut self,
        plan: &DomainPlan,
        index: usize,
        key: &BranchKey,
        prefix: &str,
        schema: &mut Option<SchemaRef>,
        pass: &mut SnapshotPass,
    ) {
        let processor = &plan.processors[index];
        // The state's bytes and the acknowledgement runs they cover, or what failed.
        let encoded = match (&processor.work, &mut self.work[index]) {
            (
                NodeWork::Dedup { key_model, .. },
                WorkState::Dedup(super::dedup::DedupState { spaces, .. }),
            ) => {
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
                pass.entries.push(stored_entry(prefix, key, bytes));
            }
            Err((error, what)) => {
                pass.unencoded += 1;
                tracing::error!(processor = %processor.name, %error, "{what}")
            }
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
            for (suffix, value) in stored {
                let Some((key, bytes)) = read_entry(&suffix, &value) else {
                    tracing::warn!(
                        processor = %processor.name,
                        "a stored branch entry is not readable; it is skipped"
                    );
                    continue;
                };
                let owner = match &key {
                    BranchKey::Key(bytes) => shard_of_key_bytes(bytes, count),
                    BranchKey::Unbranched => crate::runtime::shard::mesh::ROOT_SHARD,
                };
                if owner != shard {
                    continue;
                }
                match (&processor.work, &mut self.work[index]) {
                    (
                        NodeWork::Dedup { key_model, .. },
                        WorkState::Dedup(super::dedup::DedupState { spaces, .. }),
                    ) => match Keyspace::from_snapshot(bytes, *key_model) {
                        Some(space) => {
                            spaces.insert(key, space);
                        }
                        None => tracing::info!(
                            processor = %processor.name,
                            "a stored deduplication keyspace was taken under other keys (or is unreadable); the branch starts empty"
                        ),
                    },
                    (NodeWork::Reorder { model, by, .. }, WorkState::Reorder { buffers }) => {
                        let schema = processor
                            .inputs
                            .first()
                            .map(|input| plan.relays[input.relay].schema.clone());
                        let restored = schema
                            .ok_or(crate::runtime::exec::window::SnapshotError::Malformed)
                            .and_then(|schema| restore_buffer(bytes, *model, &schema, by.len()));
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
                    ) => match restore_branch(bytes, correlate.model, &correlate.side_schemas) {
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
                    ) => match WindowState::restore(window, bytes) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "proc/shop/sums/";

    fn stored_and_read(branch: &BranchKey, state: &[u8]) -> (Vec<u8>, BranchKey, Vec<u8>) {
        let (key, value) = stored_entry(PREFIX, branch, state.to_vec());
        assert!(key.len() <= MAX_STORED_KEY_BYTES, "{} bytes", key.len());
        let (read, bytes) = read_entry(&key[PREFIX.len()..], &value).expect("readable");
        (key, read, bytes.to_vec())
    }

    #[test]
    fn every_branch_key_is_stored_within_the_store_key_bound_and_read_back() {
        let fits = MAX_STORED_KEY_BYTES - PREFIX.len() - 1;
        for length in [0, 1, fits, fits + 1, 4_096] {
            let branch = BranchKey::Key(KeyBytes::new(&vec![0xA5; length]));
            let (key, read, state) = stored_and_read(&branch, b"window state");
            assert_eq!(read, branch, "key of {length} bytes");
            assert_eq!(state, b"window state");
            let marker = if length <= fits { KEYED } else { HASHED };
            assert_eq!(key[PREFIX.len()], marker, "key of {length} bytes");
        }
        let (_, read, state) = stored_and_read(&BranchKey::Unbranched, b"s");
        assert_eq!((read, state), (BranchKey::Unbranched, b"s".to_vec()));
    }

    #[test]
    fn a_long_keys_deletion_hits_its_stored_entry_and_a_mismatched_entry_is_refused() {
        let branch = BranchKey::Key(KeyBytes::new(&[7; 1_000]));
        let (put, value) = stored_entry(PREFIX, &branch, b"state".to_vec());
        let (delete, nothing) = stored_entry(PREFIX, &branch, Vec::new());
        assert_eq!(put, delete);
        assert!(nothing.is_empty(), "an empty value deletes");
        // Another branch's key inside the value (a corrupt or colliding entry) is not read.
        let other = BranchKey::Key(KeyBytes::new(&[8; 1_000]));
        let (_, other_value) = stored_entry(PREFIX, &other, b"state".to_vec());
        assert!(read_entry(&put[PREFIX.len()..], &other_value).is_none());
        assert!(read_entry(&put[PREFIX.len()..], &value[..10]).is_none());
        assert!(read_entry(b"?unknown", b"").is_none());
    }

    /// The keys of the window states one pass encoded (deletions excluded).
    fn encoded(pass: &SnapshotPass) -> Vec<Vec<u8>> {
        pass.entries
            .iter()
            .filter(|(_, state)| !state.is_empty())
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// A rewrite round (after a snapshot that was not written) takes every state again,
    /// changed or not, each once, in slices of the pass budget.
    #[test]
    fn a_rewrite_round_takes_every_state_once_in_slices() {
        use super::super::test_driver::Driver;
        use nervix_shards::flush::IMMEDIATE_WINDOW_NS;

        const SENSORS: usize = 2_500;
        const BUDGET: usize = 1_024;
        let mut driver = Driver::new();
        let names: Vec<String> = (0..SENSORS).map(|i| format!("s{i}")).collect();
        let rows: Vec<(&str, i64)> = names.iter().map(|name| (name.as_str(), 1)).collect();
        driver.send(&rows, 0);
        // The reingestor's buffers flush, then the window admits every sensor's row.
        for hop in 1..=2 {
            driver.tick(2 * hop * IMMEDIATE_WINDOW_NS);
        }
        let round = |graph: &mut Graph| {
            let mut passes = Vec::new();
            loop {
                let budget = PassBudget {
                    states: BUDGET,
                    bytes: usize::MAX,
                };
                let pass = graph.snapshot_work(SnapshotScope::RoundSlice(budget));
                let unfinished = pass.unfinished;
                passes.push(encoded(&pass));
                if !unfinished {
                    return passes;
                }
            }
        };
        let graph = &mut driver.graph;
        let sizes = |passes: &[Vec<Vec<u8>>]| passes.iter().map(Vec::len).collect::<Vec<_>>();
        let changed = round(graph);
        assert_eq!(sizes(&changed), [BUDGET, BUDGET, SENSORS - 2 * BUDGET]);
        assert!(
            sizes(&round(graph)).iter().all(|n| *n == 0),
            "nothing changed since"
        );
        graph.start_rewrite_round();
        let rewritten = round(graph);
        assert_eq!(sizes(&rewritten), sizes(&changed));
        let mut every: Vec<Vec<u8>> = rewritten.into_iter().flatten().collect();
        every.sort();
        every.dedup();
        assert_eq!(every.len(), SENSORS, "each state once");
    }

    /// A pass ends once its encoded bytes reach the byte budget: each state here is larger
    /// than a one-byte budget, so every pass encodes one state and the round takes them all.
    #[test]
    fn a_pass_ends_at_its_byte_budget() {
        use super::super::test_driver::Driver;
        use nervix_shards::flush::IMMEDIATE_WINDOW_NS;

        let mut driver = Driver::new();
        let rows: Vec<(&str, i64)> = ["a", "b", "c", "d", "e"].iter().map(|s| (*s, 1)).collect();
        driver.send(&rows, 0);
        for hop in 1..=2 {
            driver.tick(2 * hop * IMMEDIATE_WINDOW_NS);
        }
        let budget = PassBudget {
            states: 1_024,
            bytes: 1,
        };
        let mut passes = Vec::new();
        loop {
            let pass = driver
                .graph
                .snapshot_work(SnapshotScope::RoundSlice(budget));
            passes.push(encoded(&pass).len());
            if !pass.unfinished {
                break;
            }
        }
        assert_eq!(passes, [1, 1, 1, 1, 1]);
    }

    /// The store keys a rewrite round reports are the keys its states are written under.
    #[test]
    fn a_rewrite_rounds_stored_keys_are_the_keys_states_are_written_under() {
        use super::super::test_driver::Driver;
        use nervix_shards::flush::IMMEDIATE_WINDOW_NS;

        let mut driver = Driver::new();
        driver.send(&[("a", 1), ("b", 1)], 0);
        for hop in 1..=2 {
            driver.tick(2 * hop * IMMEDIATE_WINDOW_NS);
        }
        let mut live = driver.graph.start_rewrite_round();
        live.sort();
        let pass = driver.graph.snapshot_work(SnapshotScope::Changed);
        let mut written = encoded(&pass);
        written.sort();
        assert_eq!(live, written);
        assert_eq!(live.len(), 2);
    }

    /// The window model a snapshot is taken under covers the aggregate arguments: their
    /// retained values are read back in call order, so swapping two calls' arguments (or
    /// changing one) makes a stored window start empty; moving text around does not.
    #[test]
    fn a_window_model_changes_with_its_argument_expressions_not_their_positions() {
        use super::super::test_driver::{plan_of, SCRIPT};

        let model = |script: &str| {
            let plan = plan_of(script);
            plan.processors
                .iter()
                .find_map(|processor| match &processor.work {
                    NodeWork::Window(window) => Some(window.model),
                    _ => None,
                })
                .expect("a window processor")
        };
        let original = "n = COUNT(input.sensor)";
        assert!(SCRIPT.contains(original));
        let base = model(SCRIPT);
        let moved = SCRIPT.replace(original, "n   =   COUNT( input.sensor )");
        assert_eq!(model(&moved), base, "only positions moved");
        let other = SCRIPT.replace(original, "n = COUNT(lower(input.sensor))");
        assert_ne!(model(&other), base, "another argument");
    }
}
