//! The shard's side of processor snapshots (see `graph::snapshot`): every
//! [`SNAPSHOT_INTERVAL_NS`] the changed branch states of every domain go to the runtime-state
//! writer with a ticket, and the rows they hold (window rows, held reorder rows, pending
//! correlator rows) are acknowledged when the ticket comes back (the snapshot is durable). A
//! domain stopping hands its states to the writer behind every snapshot offered before them
//! and waits until they are durable, then acknowledges, so a graceful stop never leaves
//! covered rows unacknowledged and no older queued state lands over its last one.
//!
//! A snapshot that was not written — the writer's queue was full, or its commit failed and its
//! ticket came back marked so — leaves its rows and deletions carried. At the next interval
//! a rewrite round begins: its first pass writes the carried deletions, and its passes write
//! every state again in slices (the states were marked clean when encoded, and a later
//! snapshot may not cover them). The carried rows are acknowledged with the round's last
//! pass: the writer commits tickets in order, so when that one is durable every state of the
//! round is. A failure during the round starts another one at the next interval. A stop
//! writes its domain's changed states; when a snapshot was not written and no round has
//! rewritten everything since, it writes the carried deletions and every state of every
//! domain on the shard, and acknowledges the carried rows once that is durable. Carried rows
//! are tagged with their domain: a domain that leaves the shard while some of its rows are in
//! no durable snapshot (that write failed too) drops them unacknowledged, and its source
//! delivers them again to the state it finds stored.
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
use std::sync::Arc;
use std::time::Instant;

use super::graph::{PassBudget, SnapshotScope};
use super::{cx, ShardState};
use crate::runtime::frame::AckRun;

/// Acknowledgement runs, each with the domain whose state holds its rows: when a domain leaves
/// the shard with rows a snapshot could not make durable, only its rows are dropped
/// ([`Snapshots::forget_domain`]).
type DomainAcks = Vec<(Arc<str>, AckRun)>;
use crate::runtime::state_store::{ProcessorEntry, TicketOutcome};

/// How often changed processor state is snapshotted, physical ns.
pub const SNAPSHOT_INTERVAL_NS: u64 = 1_000_000_000;
/// Snapshots handed to the writer and not yet durable, at most.
pub const MAX_PENDING_SNAPSHOTS: usize = 64;
/// With [`MAX_PENDING_SNAPSHOTS`] in flight, how long the shard waits before it looks for a
/// returned ticket again, physical ns (it would otherwise wake at once, again and again, until
/// the writer's commit ends).
pub const TICKETS_FULL_RECHECK_NS: u64 = 1_000_000;
/// Branch states (and deletions) one periodic pass encodes at most (a few µs each; in
/// Nexmark q5, whose shard changes about 20,000 windows a second, snapshots took 12 % of the
/// shard's time, roughly 0.1 s per one-second pass before passes were bounded). A rewrite
/// round is sliced the same way; a stop's snapshot is one pass.
pub const MAX_ENTRIES_PER_PASS: usize = 1024;
/// Encoded bytes one periodic pass writes at most: large states (a window retaining millions
/// of rows) end a pass early, so encoding them holds the shard about 10 ms at a time rather
/// than for every large state of the round at once. A single state over it is written alone.
pub const MAX_BYTES_PER_PASS: usize = 16 << 20;

/// What a snapshot holds besides its states: the rows it covers and the entries it deletes.
#[derive(Default)]
struct Covered {
    acks: DomainAcks,
    deletions: Vec<Vec<u8>>,
    /// The rows a finished rewrite round covers: safe once this snapshot is durable unless
    /// one not written was reported after the round began ([`RoundAcks`]).
    round: Option<RoundAcks>,
}

/// The carried rows of a rewrite round and the failure count when it began.
struct RoundAcks {
    acks: DomainAcks,
    failures_at_start: u64,
}

impl Covered {
    fn of(entries: &[ProcessorEntry], acks: DomainAcks) -> Covered {
        let deletions = entries
            .iter()
            .filter(|(_, state)| state.is_empty())
            .map(|(key, _)| key.clone())
            .collect();
        Covered {
            acks,
            deletions,
            round: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.acks.is_empty() && self.deletions.is_empty() && self.round.is_none()
    }

    fn append(&mut self, other: Covered) {
        self.acks.extend(other.acks);
        self.deletions.extend(other.deletions);
        if let Some(round) = other.round {
            self.acks.extend(round.acks);
        }
    }
}

/// `acks` tagged with `domain`.
fn of_domain(domain: &str, acks: Vec<AckRun>) -> DomainAcks {
    let domain: Arc<str> = Arc::from(domain);
    acks.into_iter().map(|run| (domain.clone(), run)).collect()
}

/// Tickets in flight and what each covers.
pub struct Snapshots {
    done_tx: async_channel::Sender<TicketOutcome>,
    done_rx: async_channel::Receiver<TicketOutcome>,
    pending: HashMap<u64, Covered>,
    /// What snapshots that were not written covered: its deletions go with the next pass,
    /// which begins a rewrite round (module docs).
    carried: Covered,
    /// While a rewrite round runs: the rows of the snapshots that were not written, which
    /// its last pass covers.
    rewrite: Option<RoundAcks>,
    /// Snapshots not written so far (a round's rows wait for another round when one was
    /// reported after it began).
    failures: u64,
    next_ticket: u64,
    /// Periodic passes begun: which domain goes first in the next one.
    periodic_passes: usize,
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
            rewrite: None,
            failures: 0,
            next_ticket: 1,
            periodic_passes: 0,
            last_ns: 0,
            resume: false,
            waiting_for_tickets: false,
        }
    }
}

impl Snapshots {
    /// Whether a pass is owed whatever changed: a snapshot was not written, or a rewrite
    /// round is under way.
    pub fn owes_pass(&self) -> bool {
        !self.carried.is_empty() || self.rewrite.is_some()
    }

    /// Begins a periodic pass: the entries it starts with (carried deletions, which go
    /// before any state it writes) and whether a rewrite round begins with it.
    fn begin_pass(&mut self) -> (Vec<ProcessorEntry>, bool) {
        let carried = std::mem::take(&mut self.carried);
        let rewrite = !carried.is_empty();
        if rewrite {
            let round = self.rewrite.get_or_insert_with(|| RoundAcks {
                acks: Vec::new(),
                failures_at_start: 0,
            });
            round.acks.extend(carried.acks);
            round.failures_at_start = self.failures;
        }
        let deletions = carried
            .deletions
            .into_iter()
            .map(|key| (key, Vec::new()))
            .collect();
        (deletions, rewrite)
    }

    /// Ends a periodic pass: the rows of the rewrite round it finishes, if it does.
    fn end_pass(&mut self, unfinished: bool) -> Option<RoundAcks> {
        self.resume = unfinished;
        if unfinished {
            return None;
        }
        self.rewrite.take()
    }

    /// Hands a finished round's rows to the newest snapshot in flight (tickets come back in
    /// the order they were offered, so when it is durable so is every pass of the round);
    /// with none in flight, they are returned to be acknowledged now, or carried again
    /// when a snapshot was not written since the round began.
    fn hand_round_on(&mut self, round: RoundAcks) -> DomainAcks {
        let newest = self.pending.keys().max().copied();
        if let Some(covered) = newest.and_then(|ticket| self.pending.get_mut(&ticket)) {
            match &mut covered.round {
                // An earlier round's rows ride on the same snapshot: the older start rules.
                Some(held) => {
                    held.acks.extend(round.acks);
                    held.failures_at_start = held.failures_at_start.min(round.failures_at_start);
                }
                None => covered.round = Some(round),
            }
            return Vec::new();
        }
        self.release_round(round)
    }

    /// A finished round's rows once its passes are back: acknowledged when every snapshot
    /// reported since it began was written, else carried into the next round.
    fn release_round(&mut self, round: RoundAcks) -> DomainAcks {
        if self.failures == round.failures_at_start {
            return round.acks;
        }
        self.carried.acks.extend(round.acks);
        Vec::new()
    }

    /// A snapshot was not written (refused or failed): what it covered is carried, and the
    /// pass under way stops (the next interval begins a rewrite round).
    fn not_written(&mut self, covered: Covered) {
        self.failures += 1;
        self.carried.append(covered);
        self.resume = false;
    }

    /// Takes a ticket the writer handed back: the rows to acknowledge now (those of a
    /// durable snapshot), or None when it was not written.
    fn settle(&mut self, outcome: TicketOutcome) -> Option<DomainAcks> {
        let mut covered = self.pending.remove(&outcome.ticket)?;
        if !outcome.durable {
            self.not_written(covered);
            return None;
        }
        let mut acks = covered.acks;
        if let Some(round) = covered.round.take() {
            acks.extend(self.release_round(round));
        }
        Some(acks)
    }

    /// A state failed to encode: a rewrite round under way does not cover the rows carried
    /// into it (that state's stored entry may be older than they are), so they wait for the
    /// next round.
    fn note_unencoded(&mut self) {
        self.failures += 1;
    }

    /// Drops the rows `domain` holds in snapshots not written (carried, or waiting for a
    /// rewrite round): the domain left the shard, so no later snapshot will hold its state.
    /// They stay unacknowledged, and their source delivers them again.
    pub fn forget_domain(&mut self, domain: &str) {
        let other = |(of, _): &(Arc<str>, AckRun)| &**of != domain;
        self.carried.acks.retain(other);
        if let Some(round) = &mut self.rewrite {
            round.acks.retain(other);
        }
        for covered in self.pending.values_mut() {
            covered.acks.retain(other);
            if let Some(round) = &mut covered.round {
                round.acks.retain(other);
            }
        }
    }

    /// When the next snapshot may run, physical ns, `now_ns` being now: at once when a pass
    /// is unfinished and the writer has room for another ticket; with every ticket in flight,
    /// not before one can have come back.
    pub fn next_due_ns(&self, now_ns: u64) -> u64 {
        let interval_ends_ns = self.last_ns.saturating_add(SNAPSHOT_INTERVAL_NS);
        if self.pending.len() >= MAX_PENDING_SNAPSHOTS {
            interval_ends_ns.max(now_ns.saturating_add(TICKETS_FULL_RECHECK_NS))
        } else if self.resume {
            self.last_ns
        } else {
            interval_ends_ns
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
        // Carried deletions go first: a state written again in the round lands after them.
        let (mut entries, rewrite) = self.snapshots.begin_pass();
        if rewrite {
            // A carried deletion of a key that holds state now is dropped: the round writes
            // that state again, and a deletion written in an earlier pass than the state
            // would leave the key without it in between (a crash there would lose rows a
            // later durable snapshot of that key had acknowledged).
            let live: std::collections::HashSet<Vec<u8>> = self
                .runs
                .values_mut()
                .flat_map(|run| run.graph.start_rewrite_round())
                .collect();
            entries.retain(|(key, _)| !live.contains(key));
        }
        let mut acks: DomainAcks = Vec::new();
        let mut unfinished = false;
        let mut written = 0usize;
        let mut unencoded = 0usize;
        // Each pass lets the next domain go first: a domain that changes more states than a
        // pass takes between passes would otherwise take every pass, and the others' rounds
        // (and a rewrite round's carried rows) would never finish.
        let mut runs: Vec<_> = self.runs.iter_mut().collect();
        if !runs.is_empty() {
            let first = self.snapshots.periodic_passes % runs.len();
            runs.rotate_left(first);
        }
        self.snapshots.periodic_passes = self.snapshots.periodic_passes.wrapping_add(1);
        for (domain, run) in runs {
            let budget = PassBudget {
                states: MAX_ENTRIES_PER_PASS.saturating_sub(entries.len()),
                bytes: MAX_BYTES_PER_PASS.saturating_sub(written),
            };
            let pass = run.graph.snapshot_work(SnapshotScope::RoundSlice(budget));
            unencoded += pass.unencoded;
            written += pass
                .entries
                .iter()
                .map(|(_, state)| state.len())
                .sum::<usize>();
            entries.extend(pass.entries);
            acks.extend(of_domain(domain, pass.acks));
            unfinished |= pass.unfinished;
        }
        if unencoded > 0 {
            self.snapshots.note_unencoded();
        }
        let round = self.snapshots.end_pass(unfinished);
        if entries.is_empty() {
            // Nothing to write (a pass covers rows only with the states it writes); a
            // finished round's rows wait for the passes in flight, if any.
            if let Some(round) = round {
                let now = self.snapshots.hand_round_on(round);
                self.ack_runs(now);
            }
            return;
        }
        self.count_pass(&entries, encoding);
        let ticket = self.snapshots.next_ticket;
        self.snapshots.next_ticket += 1;
        let mut covered = Covered::of(&entries, acks);
        covered.round = round;
        if store.save_processor_state(entries, Some((self.snapshots.done_tx.clone(), ticket))) {
            self.snapshots.pending.insert(ticket, covered);
        } else {
            // The writer is behind: keep what it covers, rewrite everything next interval.
            self.snapshots.not_written(covered);
            self.counters.snapshot.deferred += 1;
        }
    }

    /// Takes the tickets the writer handed back: a durable snapshot's rows are acknowledged,
    /// a failed one's rows and deletions are carried into the next pass (module docs).
    fn settle_tickets(&mut self) {
        while let Ok(outcome) = self.snapshots.done_rx.try_recv() {
            let durable = outcome.durable;
            match self.snapshots.settle(outcome) {
                Some(acks) => self.ack_runs(acks),
                None if !durable => self.counters.snapshot.failed += 1,
                None => {}
            }
        }
    }

    fn ack_runs(&mut self, runs: DomainAcks) {
        for (_, run) in runs {
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
    /// stop); every state on the shard when a snapshot was not written (module docs).
    pub(super) fn snapshot_domain_now(&mut self, domain: &str) {
        self.write_domain_state(domain);
        // The write waited for every snapshot queued before it, so their tickets are back.
        self.settle_tickets();
        if self.snapshots.owes_pass() {
            self.rewrite_everything_now();
        }
    }

    /// Writes `domain`'s changed states, waiting until they are durable, and acknowledges the
    /// rows they cover.
    fn write_domain_state(&mut self, domain: &str) {
        let Some(store) = self.runtime_state.clone() else {
            return;
        };
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let encoding = Instant::now();
        let pass = run.graph.snapshot_work(SnapshotScope::Changed);
        if pass.entries.is_empty() && self.snapshots.pending.is_empty() {
            return;
        }
        if !pass.entries.is_empty() {
            self.count_pass(&pass.entries, encoding);
        }
        // Written even when empty while snapshots are in flight: the write commits after
        // them, so their tickets are back when it returns (a redeploy restores the domain
        // from the store right after, and a stopping node exits).
        match store.write_processor_state_in_order(pass.entries) {
            Ok(()) => self.ack_runs(of_domain(domain, pass.acks)),
            // Its rows stay unacknowledged: the domain leaves, and its source delivers them
            // again to the state it finds stored.
            Err(error) => {
                self.counters.snapshot.failed += 1;
                tracing::error!(%domain, %error, "cannot persist processor state at stop")
            }
        }
    }

    /// Writes the carried deletions and then every state of every domain on the shard,
    /// waiting until they are durable, and acknowledges what they cover with the rows of the
    /// snapshots that were not written: a stop that left those rows unacknowledged would have
    /// them delivered again after a restart, into restored states that already hold them.
    /// Every domain, because carried deletions are not attributed to one. When the write
    /// fails, all of it is carried, and the leaving domain's rows are dropped with it
    /// ([`Snapshots::forget_domain`]).
    fn rewrite_everything_now(&mut self) {
        let Some(store) = self.runtime_state.clone() else {
            return;
        };
        let encoding = Instant::now();
        let (mut entries, _) = self.snapshots.begin_pass();
        let mut acks = Vec::new();
        let mut unencoded = 0usize;
        for (domain, run) in self.runs.iter_mut() {
            let pass = run.graph.snapshot_work(SnapshotScope::Every);
            entries.extend(pass.entries);
            acks.extend(of_domain(domain, pass.acks));
            unencoded += pass.unencoded;
        }
        if unencoded > 0 {
            self.snapshots.note_unencoded();
        }
        // Every ticket is back and no failure is carried since `begin_pass`: the round's rows
        // are covered once this write is durable — unless a state did not encode.
        if let Some(round) = self.snapshots.end_pass(false) {
            if unencoded == 0 {
                acks.extend(round.acks);
            } else {
                self.snapshots.carried.acks.extend(round.acks);
            }
        }
        if entries.is_empty() {
            self.ack_runs(acks);
            return;
        }
        self.count_pass(&entries, encoding);
        let covered = Covered::of(&entries, acks);
        match store.write_processor_state_in_order(entries) {
            Ok(()) => self.ack_runs(covered.acks),
            Err(error) => {
                tracing::error!(%error, "cannot persist processor state at stop");
                self.snapshots.not_written(covered);
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

#[cfg(test)]
mod tests {
    use nervix_shards::ack::AckHandle;

    use super::*;

    /// The rows of payload `index` (one run of one row), held by domain `d`.
    fn rows(index: u32) -> DomainAcks {
        rows_of("d", index)
    }

    fn rows_of(domain: &str, index: u32) -> DomainAcks {
        let run = AckRun {
            root: AckHandle {
                index,
                generation: 1,
            },
            rows: 1,
        };
        of_domain(domain, vec![run])
    }

    /// A snapshot offered to the writer covering `acks` (and the deletion of `deleted`).
    fn offer(snapshots: &mut Snapshots, acks: DomainAcks, deleted: &[u8]) -> u64 {
        let ticket = snapshots.next_ticket;
        snapshots.next_ticket += 1;
        let entries = vec![(deleted.to_vec(), Vec::new())];
        snapshots
            .pending
            .insert(ticket, Covered::of(&entries, acks));
        ticket
    }

    fn back(snapshots: &mut Snapshots, ticket: u64, durable: bool) -> Option<DomainAcks> {
        snapshots.settle(TicketOutcome { ticket, durable })
    }

    /// A snapshot fails; the rewrite round that follows takes two passes. Its first pass
    /// starts with the failed snapshot's deletion; the failed snapshot's rows are
    /// acknowledged only when the round's last pass is durable, never with an earlier one.
    #[test]
    fn a_rewrite_rounds_carried_rows_wait_for_its_last_pass() {
        let mut snapshots = Snapshots::default();
        let failed = offer(&mut snapshots, rows(1), b"gone");
        assert_eq!(back(&mut snapshots, failed, false), None);
        assert!(snapshots.owes_pass());
        let (entries, rewrite) = snapshots.begin_pass();
        assert!(rewrite);
        assert_eq!(entries, vec![(b"gone".to_vec(), Vec::new())]);
        assert!(snapshots.end_pass(true).is_none(), "the round goes on");
        let first = offer(&mut snapshots, rows(2), b"a");
        assert!(!snapshots.begin_pass().1, "no new round while one runs");
        let round = snapshots.end_pass(false).expect("the round ends");
        let last = offer(&mut snapshots, rows(3), b"b");
        snapshots.pending.get_mut(&last).unwrap().round = Some(round);
        assert_eq!(back(&mut snapshots, first, true), Some(rows(2)));
        let mut acked = back(&mut snapshots, last, true).unwrap();
        acked.sort_by_key(|(_, run)| run.root.index);
        assert_eq!(acked, [rows(1), rows(3)].concat());
        assert!(!snapshots.owes_pass());
    }

    /// A pass of the round is not written: the round's rows are not acknowledged with its
    /// last pass but carried into the next round, with the failed pass's rows.
    #[test]
    fn a_round_with_a_pass_not_written_carries_its_rows_into_the_next() {
        let mut snapshots = Snapshots::default();
        let failed = offer(&mut snapshots, rows(1), b"gone");
        back(&mut snapshots, failed, false);
        snapshots.begin_pass();
        assert!(snapshots.end_pass(true).is_none());
        let first = offer(&mut snapshots, rows(2), b"a");
        let round = snapshots.end_pass(false).expect("the round ends");
        let last = offer(&mut snapshots, rows(3), b"b");
        snapshots.pending.get_mut(&last).unwrap().round = Some(round);
        assert_eq!(back(&mut snapshots, first, false), None);
        assert_eq!(back(&mut snapshots, last, true), Some(rows(3)));
        assert!(snapshots.owes_pass());
        let (entries, rewrite) = snapshots.begin_pass();
        assert!(rewrite, "another round begins");
        assert_eq!(entries, vec![(b"a".to_vec(), Vec::new())]);
        let mut carried = snapshots.end_pass(false).expect("it ends in one pass").acks;
        carried.sort_by_key(|(_, run)| run.root.index);
        assert_eq!(carried, [rows(1), rows(2)].concat());
    }

    /// A round whose last pass writes nothing: its rows wait for the newest snapshot in
    /// flight, or are acknowledged at once when none is.
    #[test]
    fn a_round_that_ends_with_nothing_to_write_waits_for_the_passes_in_flight() {
        let mut snapshots = Snapshots::default();
        let failed = offer(&mut snapshots, rows(1), b"gone");
        back(&mut snapshots, failed, false);
        snapshots.begin_pass();
        let in_flight = offer(&mut snapshots, rows(2), b"a");
        let round = snapshots.end_pass(false).expect("the round ends");
        assert!(snapshots.hand_round_on(round).is_empty());
        let mut acked = back(&mut snapshots, in_flight, true).unwrap();
        acked.sort_by_key(|(_, run)| run.root.index);
        assert_eq!(acked, [rows(1), rows(2)].concat());

        let failed = offer(&mut snapshots, rows(4), b"gone");
        back(&mut snapshots, failed, false);
        snapshots.begin_pass();
        let round = snapshots.end_pass(false).expect("the round ends");
        assert_eq!(snapshots.hand_round_on(round), rows(4));
    }

    /// A state of the round that did not encode: the round's rows are not acknowledged with
    /// its last pass (that state's stored entry may be older than they are) but carried.
    #[test]
    fn a_round_with_a_state_that_did_not_encode_carries_its_rows() {
        let mut snapshots = Snapshots::default();
        let failed = offer(&mut snapshots, rows(1), b"gone");
        back(&mut snapshots, failed, false);
        snapshots.begin_pass();
        snapshots.note_unencoded();
        let round = snapshots.end_pass(false).expect("the round ends");
        assert!(snapshots.hand_round_on(round).is_empty());
        assert!(snapshots.owes_pass(), "another round is owed");
        assert_eq!(snapshots.carried.acks, rows(1));
    }

    /// With every ticket in flight nothing can be offered: the next pass is not due before a
    /// ticket can have come back, even when the interval or an unfinished round says now.
    #[test]
    fn with_every_ticket_in_flight_the_next_pass_waits() {
        let mut snapshots = Snapshots::default();
        let now_ns = 10 * SNAPSHOT_INTERVAL_NS;
        snapshots.resume = true;
        assert_eq!(
            snapshots.next_due_ns(now_ns),
            0,
            "an unfinished round goes on at once"
        );
        for index in 0..MAX_PENDING_SNAPSHOTS as u32 {
            offer(&mut snapshots, rows(index), b"k");
        }
        assert_eq!(
            snapshots.next_due_ns(now_ns),
            now_ns + TICKETS_FULL_RECHECK_NS
        );
    }

    /// A domain leaves with rows in snapshots that were not written: its rows are dropped
    /// (they stay unacknowledged), the other domain's stay carried for the next round.
    #[test]
    fn a_leaving_domains_carried_rows_are_dropped_and_the_others_kept() {
        let mut snapshots = Snapshots::default();
        let failed = offer(
            &mut snapshots,
            [rows_of("a", 1), rows_of("b", 2)].concat(),
            b"k",
        );
        back(&mut snapshots, failed, false);
        snapshots.forget_domain("a");
        assert_eq!(snapshots.carried.acks, rows_of("b", 2));
        snapshots.begin_pass();
        let in_flight = offer(&mut snapshots, rows_of("a", 3), b"k2");
        snapshots.forget_domain("b");
        let round = snapshots.end_pass(false).expect("the round ends");
        assert!(round.acks.is_empty(), "b's held rows are dropped");
        assert!(
            snapshots.pending[&in_flight].acks.len() == 1,
            "a's pass in flight is kept"
        );
    }
}
