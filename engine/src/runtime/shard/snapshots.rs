//! The shard's side of processor snapshots (see `graph::snapshot`): every
//! [`SNAPSHOT_INTERVAL_NS`] the changed branch states of every domain go to the runtime-state
//! writer with a ticket, and the rows they hold (window rows, held reorder rows, pending
//! correlator rows) are acknowledged when the ticket comes back (the snapshot is durable). A
//! domain stopping hands its states to the writer behind every snapshot offered before them
//! and waits until they are durable, then acknowledges, so a graceful stop never leaves
//! covered rows unacknowledged and no older queued state lands over its last one.
//!
//! A snapshot that was not written — the writer's queue was full, or its commit failed and its
//! ticket came back marked so — leaves its rows and deletions carried: the next pass writes
//! them with every state again (its states were marked clean when encoded, and a later
//! snapshot may not cover them). A stop writes its domain's changed states; when a carried
//! snapshot shows that an earlier one was not written, it writes every state of the domain
//! and its carried deletions as well.
//!
//! Bounded: at most [`MAX_PENDING_SNAPSHOTS`] tickets in flight; past it the shard skips an
//! interval (the states stay dirty and the next snapshot covers them). A pass encodes at most
//! [`MAX_ENTRIES_PER_PASS`] branch states; when more changed, the next tick continues the
//! pass (without waiting for the interval), so a shard with many changed branches snapshots
//! them in slices between its other work instead of holding it for the whole pass.
//!
//! Counted (`SnapshotCounters`, in `/metrics`): states and bytes encoded, deletions, passes, the
//! shard time spent encoding them, intervals put off because the writer was behind, and
//! snapshots the writer could not commit.

use std::collections::HashMap;
use std::time::Instant;

use super::graph::SnapshotScope;
use super::{cx, ShardState};
use crate::runtime::frame::AckRun;
use crate::runtime::state_store::{ProcessorEntry, TicketOutcome};

/// How often changed processor state is snapshotted, physical ns.
pub const SNAPSHOT_INTERVAL_NS: u64 = 1_000_000_000;
/// Snapshots handed to the writer and not yet durable, at most.
pub const MAX_PENDING_SNAPSHOTS: usize = 64;
/// Branch states one periodic pass encodes at most (a few µs each; in Nexmark q5, whose
/// shard changes about 20,000 windows a second, snapshots took 12 % of the shard's time,
/// roughly 0.1 s per one-second pass before passes were bounded). A rewrite of everything
/// (after the writer refused a snapshot) and a stop's snapshot are not sliced.
pub const MAX_ENTRIES_PER_PASS: usize = 1024;

/// What a snapshot holds besides its states: the rows it covers and the entries it deletes.
#[derive(Default)]
struct Covered {
    acks: Vec<AckRun>,
    deletions: Vec<Vec<u8>>,
}

impl Covered {
    fn of(entries: &[ProcessorEntry], acks: Vec<AckRun>) -> Covered {
        let deletions = entries
            .iter()
            .filter(|(_, state)| state.is_empty())
            .map(|(key, _)| key.clone())
            .collect();
        Covered { acks, deletions }
    }

    fn is_empty(&self) -> bool {
        self.acks.is_empty() && self.deletions.is_empty()
    }

    fn append(&mut self, other: Covered) {
        self.acks.extend(other.acks);
        self.deletions.extend(other.deletions);
    }
}

/// Tickets in flight and what each covers.
pub struct Snapshots {
    done_tx: async_channel::Sender<TicketOutcome>,
    done_rx: async_channel::Receiver<TicketOutcome>,
    pending: HashMap<u64, Covered>,
    /// What snapshots that were not written covered: it rides with the next one, which
    /// writes every state again (module docs).
    carried: Covered,
    next_ticket: u64,
    last_ns: u64,
    /// The last pass stopped at its budget: the next tick continues it.
    resume: bool,
    /// A due pass waits for tickets in flight to come back (counted once per wait).
    waiting_for_tickets: bool,
}

impl Default for Snapshots {
    fn default() -> Snapshots {
        let (done_tx, done_rx) = async_channel::bounded(MAX_PENDING_SNAPSHOTS);
        Snapshots {
            done_tx,
            done_rx,
            pending: HashMap::new(),
            carried: Covered::default(),
            next_ticket: 1,
            last_ns: 0,
            resume: false,
            waiting_for_tickets: false,
        }
    }
}

impl Snapshots {
    /// When the next snapshot may run, physical ns: at once when a pass is unfinished and the
    /// writer has room for another ticket.
    pub fn next_due_ns(&self) -> u64 {
        if self.resume && self.pending.len() < MAX_PENDING_SNAPSHOTS {
            self.last_ns
        } else {
            self.last_ns.saturating_add(SNAPSHOT_INTERVAL_NS)
        }
    }
}

impl ShardState {
    /// Acknowledges what durable snapshots cover, then snapshots changed state when the
    /// interval has passed.
    pub(super) fn snapshot_tick(&mut self, physical_ns: u64) {
        self.settle_tickets();
        let Some(store) = self.runtime_state.clone() else {
            return;
        };
        let interval_passed =
            physical_ns.saturating_sub(self.snapshots.last_ns) >= SNAPSHOT_INTERVAL_NS;
        if !(interval_passed || self.snapshots.resume) {
            return;
        }
        if self.snapshots.pending.len() >= MAX_PENDING_SNAPSHOTS {
            // Counted once per wait, not on every tick that finds the tickets full.
            if !self.snapshots.waiting_for_tickets {
                self.snapshots.waiting_for_tickets = true;
                self.counters.snapshot.deferred += 1;
            }
            return;
        }
        self.snapshots.waiting_for_tickets = false;
        if !self.snapshots.resume {
            self.snapshots.last_ns = physical_ns;
        }
        let encoding = Instant::now();
        let carried = std::mem::take(&mut self.snapshots.carried);
        let rewrite = !carried.is_empty();
        // Carried deletions go first: a state written again in the same pass lands after them.
        let mut entries: Vec<ProcessorEntry> = carried
            .deletions
            .into_iter()
            .map(|key| (key, Vec::new()))
            .collect();
        let mut acks = carried.acks;
        let mut unfinished = false;
        for run in self.runs.values_mut() {
            let scope = if rewrite {
                SnapshotScope::Every
            } else {
                SnapshotScope::RoundSlice(MAX_ENTRIES_PER_PASS.saturating_sub(entries.len()))
            };
            let pass = run.graph.snapshot_work(scope);
            entries.extend(pass.entries);
            acks.extend(pass.acks);
            unfinished |= pass.unfinished;
        }
        self.snapshots.resume = unfinished;
        if entries.is_empty() {
            // No state is left to hold carried rows (their windows emitted, their branches
            // left): nothing stands between them and their acknowledgement.
            self.ack_runs(acks);
            return;
        }
        self.count_pass(&entries, encoding);
        let ticket = self.snapshots.next_ticket;
        self.snapshots.next_ticket += 1;
        let covered = Covered::of(&entries, acks);
        if store.save_processor_state(entries, Some((self.snapshots.done_tx.clone(), ticket))) {
            self.snapshots.pending.insert(ticket, covered);
        } else {
            // The writer is behind: keep what it covers, rewrite everything next time.
            self.snapshots.carried = covered;
            self.counters.snapshot.deferred += 1;
        }
    }

    /// Takes the tickets the writer handed back: a durable snapshot's rows are acknowledged,
    /// a failed one's rows and deletions are carried into the next pass (module docs).
    fn settle_tickets(&mut self) {
        while let Ok(outcome) = self.snapshots.done_rx.try_recv() {
            let Some(covered) = self.snapshots.pending.remove(&outcome.ticket) else {
                continue;
            };
            if outcome.durable {
                self.ack_runs(covered.acks);
            } else {
                self.counters.snapshot.failed += 1;
                self.snapshots.carried.append(covered);
            }
        }
    }

    fn ack_runs(&mut self, runs: Vec<AckRun>) {
        for run in runs {
            cx!(self).ack(run.root, run.rows as u64);
        }
    }

    /// Counts a pass that encoded `entries`, begun at `encoding`.
    fn count_pass(&mut self, entries: &[ProcessorEntry], encoding: Instant) {
        let counters = &mut self.counters.snapshot;
        counters.passes += 1;
        // An empty value is a deletion (`ProcessorEntry`).
        let deletions = entries.iter().filter(|(_, bytes)| bytes.is_empty()).count();
        counters.deletions += deletions as u64;
        counters.states += (entries.len() - deletions) as u64;
        counters.bytes += entries
            .iter()
            .map(|(_, bytes)| bytes.len() as u64)
            .sum::<u64>();
        counters.encode_us += u64::try_from(encoding.elapsed().as_micros()).unwrap_or(u64::MAX);
    }

    /// Writes `domain`'s changed processor state now and acknowledges what it covers (a
    /// stop); every state of it when an earlier snapshot was not written (module docs).
    pub(super) fn snapshot_domain_now(&mut self, domain: &str) {
        self.write_domain_state(domain, SnapshotScope::Changed, Vec::new());
        // The write waited for every snapshot queued before it, so their tickets are back.
        self.settle_tickets();
        if self.snapshots.carried.is_empty() {
            return;
        }
        let Some(run) = self.runs.get(domain) else {
            return;
        };
        // This domain's carried deletions are written now, before its states; the others'
        // stay carried for the next pass, which rewrites their states after them.
        let deletions: Vec<Vec<u8>>;
        (deletions, self.snapshots.carried.deletions) =
            std::mem::take(&mut self.snapshots.carried.deletions)
                .into_iter()
                .partition(|key| run.graph.owns_stored_entry(key));
        self.write_domain_state(domain, SnapshotScope::Every, deletions);
    }

    /// Writes `deletions`, then `domain`'s states in `scope`, waiting until they are durable,
    /// and acknowledges the rows they cover.
    fn write_domain_state(&mut self, domain: &str, scope: SnapshotScope, deletions: Vec<Vec<u8>>) {
        let Some(store) = self.runtime_state.clone() else {
            return;
        };
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let encoding = Instant::now();
        let pass = run.graph.snapshot_work(scope);
        let mut entries: Vec<ProcessorEntry> =
            deletions.into_iter().map(|key| (key, Vec::new())).collect();
        entries.extend(pass.entries);
        if entries.is_empty() {
            return;
        }
        self.count_pass(&entries, encoding);
        match store.write_processor_state_in_order(entries) {
            Ok(()) => self.ack_runs(pass.acks),
            Err(error) => {
                tracing::error!(%domain, %error, "cannot persist processor state at stop")
            }
        }
    }

    /// Installs `domain`'s stored processor state on this shard (a deploy).
    pub(super) fn restore_domain(&mut self, domain: &str) {
        let Some(store) = self.runtime_state.clone() else {
            return;
        };
        let (shard, shards) = (self.shard, self.shards);
        if let Some(run) = self.runs.get_mut(domain) {
            run.graph.restore_work(&store, shard, shards);
        }
    }
}
