//! GENERATOR runtime on a shard (spec processors.md "Generator"): on a domain-clock cadence,
//! the generator's routes run once per concrete branch whose materialized relay holds state
//! on this shard, each time over that branch's last row (`relay_state.<relay>.*`).
//!
//! Schedule ([`occurrence`]): occurrences lie at `anchor + k × EACH` of domain time, the
//! anchor being the instant the generator first ran here (when its domain started on this
//! shard), so the first occurrence is immediate. A branch whose state first appears between
//! two occurrences generates at once (its first occurrence), then with the others on the
//! schedule. A generation that comes late — the shard was busy, the node waited for room in
//! a full relay — generates once for the newest due occurrence and continues at the first
//! future boundary, never once per missed period.
//!
//! Why it is bounded and lossless: an occurrence lists the branches it owes a generation in
//! `pending` and works through them only while the generator's node has no frame waiting for
//! a full relay (the graph's backpressure rule, module doc of `graph`), so a slow consumer
//! delays generation instead of growing queues; occurrences that come due meanwhile coalesce.
//! Generated rows belong to no source payload, so they carry no acknowledgement units.
//! Each generation reads the branch's state first and then evaluates with the step's
//! execution snapshot, which every entry point takes from the domain clock.

use std::collections::VecDeque;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::Schema;
use nervix_shards::branch_key::BranchKey;

use super::{Graph, Instant, NodeRef};
use crate::runtime::frame::{AckRuns, Frame};
use crate::runtime::plan::{NodeWork, RelayId};
use crate::runtime::shard::mesh::Ctx;

/// The newest occurrence due at `now_ns` and the first boundary after `now_ns`, for
/// occurrences at `anchor_ns + k × each_ns` (integer `k`; `each_ns` > 0).
pub(super) fn occurrence(anchor_ns: i64, each_ns: u64, now_ns: i64) -> (i64, i64) {
    let each = i128::from(each_ns.max(1));
    let periods = (i128::from(now_ns) - i128::from(anchor_ns)).div_euclid(each);
    let due = i128::from(anchor_ns) + periods * each;
    let clamp = |v: i128| i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX });
    (clamp(due), clamp(due + each))
}

/// One generator's schedule and owed work on this shard.
#[derive(Debug, Default)]
pub(super) struct GeneratorState {
    /// The next occurrence not yet generated (domain ns); `None` before the first run.
    next_ns: Option<i64>,
    /// Branches whose state appeared since they last generated: they generate at once.
    births: Vec<BranchKey>,
    /// Branches the current occurrence still owes a generation, in order.
    pending: VecDeque<BranchKey>,
    /// The schedule reached the last representable instant: no later occurrence exists
    /// (without this, an occurrence saturated at that instant would be due again at once,
    /// forever).
    ended: bool,
}

impl GeneratorState {
    /// Decides what is owed at domain time `now_ns`: when the previous occurrence is worked
    /// through and the next one is due (however late), one generation for every branch with
    /// state (`branches`, which includes every new one) and the next boundary after `now_ns`;
    /// otherwise the branches whose state is new. The first call anchors the schedule at
    /// `now_ns`, so the first occurrence is immediate.
    fn advance<I: Iterator<Item = BranchKey>>(
        &mut self,
        now_ns: i64,
        each_ns: u64,
        branches: impl FnOnce() -> I,
    ) {
        let next_ns = *self.next_ns.get_or_insert(now_ns);
        if !self.pending.is_empty() {
            // Still working through an occurrence: what comes due meanwhile coalesces.
            return;
        }
        if next_ns <= now_ns && !self.ended {
            self.births.clear();
            self.pending.extend(branches());
            let following_ns = occurrence(next_ns, each_ns, now_ns).1;
            self.next_ns = Some(following_ns);
            self.ended = following_ns <= now_ns;
        } else {
            self.pending.extend(self.births.drain(..));
        }
    }

    /// When the ticker must next wake for this generator (domain ns): its next occurrence,
    /// while there is state to generate from and the node is free to publish.
    pub(super) fn deadline_ns(&self, has_state: bool, blocked: bool) -> Option<i64> {
        if blocked || !has_state || self.ended {
            return None;
        }
        self.next_ns
    }
}

/// A batch of one row and no columns: what a generator's routes run over (they read only
/// `relay_state.*`, bound beside it).
fn one_row() -> Option<RecordBatch> {
    let options = RecordBatchOptions::new().with_row_count(Some(1));
    RecordBatch::try_new_with_options(Arc::new(Schema::empty()), Vec::new(), &options).ok()
}

impl Graph {
    /// A materialized relay took state for a branch it had none for: every generator reading
    /// it owes that branch a generation now.
    pub(super) fn note_state_birth(&mut self, relay: RelayId, key: &BranchKey) {
        let plan = self.plan.clone();
        for (index, processor) in plan.processors.iter().enumerate() {
            if let (NodeWork::Generate { source, .. }, super::WorkState::Generate(state)) =
                (&processor.work, &mut self.work[index])
            {
                if *source == relay {
                    state.births.push(key.clone());
                }
            }
        }
    }

    /// The deadline of generator `index` (domain ns), see [`GeneratorState::deadline_ns`].
    pub(super) fn generator_deadline(&self, index: usize, source: RelayId) -> Option<i64> {
        let super::WorkState::Generate(state) = &self.work[index] else {
            return None;
        };
        let blocked = !self.processors[index].blocked.is_empty();
        state.deadline_ns(!self.states[source].is_empty(), blocked)
    }

    /// Runs every generator whose occurrence is due or whose branches have new state.
    /// Returns whether anything was generated.
    pub(super) fn generate(&mut self, at: Instant, cx: &mut Ctx<'_>) -> bool {
        let plan = self.plan.clone();
        let mut moved = false;
        for (index, processor) in plan.processors.iter().enumerate() {
            let NodeWork::Generate { source, each_ns } = &processor.work else {
                continue;
            };
            let now_ns = at.now.logical_ns;
            let super::WorkState::Generate(state) = &mut self.work[index] else {
                continue;
            };
            let branches = &self.states[*source];
            state.advance(now_ns, *each_ns, || branches.keys().cloned());
            moved |= self.generate_pending(index, *source, at, cx);
        }
        moved
    }

    /// Generates for the branches generator `index` owes, until none is left or its node
    /// waits for room in a relay.
    fn generate_pending(
        &mut self,
        index: usize,
        source: RelayId,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) -> bool {
        let Some(batch) = one_row() else {
            return false;
        };
        let plan = self.plan.clone();
        let processor = &plan.processors[index];
        let mut moved = false;
        while self.processors[index].blocked.is_empty() {
            let super::WorkState::Generate(state) = &mut self.work[index] else {
                break;
            };
            let Some(key) = state.pending.pop_front() else {
                break;
            };
            // A branch that left since it was listed has no state to generate from.
            let Some(row) = self.states[source].get(&key) else {
                continue;
            };
            self.bound_state = row.clone();
            let frame = Frame {
                groups: None,
                batch: batch.clone(),
                key,
                acks: AckRuns::new(),
                times: None,
            };
            // Released work: no input to count, no node work to run.
            self.releasing = true;
            self.process(
                &plan,
                NodeRef::Processor(index),
                &frame,
                None,
                None,
                &processor.routes,
                None,
                true,
                at,
                cx,
            );
            self.releasing = false;
            self.bound_state.clear();
            self.processors[index].counters.rows_in += 1;
            moved = true;
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::{occurrence, GeneratorState};
    use nervix_shards::branch_key::BranchKey;

    fn key(name: &str) -> BranchKey {
        BranchKey::Key(name.as_bytes().into())
    }

    /// Runs `advance` and takes what it left owed.
    fn owed(state: &mut GeneratorState, now_ns: i64, branches: &[&str]) -> Vec<BranchKey> {
        state.advance(now_ns, 200, || branches.iter().map(|b| key(b)));
        state.pending.drain(..).collect()
    }

    #[test]
    fn the_first_occurrence_is_immediate_and_later_ones_follow_the_schedule() {
        let mut state = GeneratorState::default();
        assert_eq!(owed(&mut state, 1_000, &["a"]), vec![key("a")]);
        assert_eq!(owed(&mut state, 1_199, &["a"]), Vec::<BranchKey>::new());
        assert_eq!(owed(&mut state, 1_200, &["a"]), vec![key("a")]);
        assert_eq!(state.next_ns, Some(1_400));
    }

    /// At the last representable instant the schedule generates once more and then ends:
    /// its next boundary cannot come after now, and it is not due again and again.
    #[test]
    fn a_schedule_at_the_end_of_time_generates_once_and_ends() {
        let mut state = GeneratorState::default();
        owed(&mut state, i64::MAX - 300, &["a"]);
        assert_eq!(owed(&mut state, i64::MAX, &["a"]), vec![key("a")]);
        assert_eq!(owed(&mut state, i64::MAX, &["a"]), Vec::<BranchKey>::new());
        assert_eq!(state.deadline_ns(true, false), None);
    }

    #[test]
    fn a_late_run_generates_once_and_continues_at_the_next_boundary() {
        let mut state = GeneratorState::default();
        owed(&mut state, 0, &["a", "b"]);
        // Five periods missed: each branch once, then the boundary after now.
        assert_eq!(
            owed(&mut state, 1_050, &["a", "b"]),
            vec![key("a"), key("b")]
        );
        assert_eq!(state.next_ns, Some(1_200));
        assert_eq!(
            owed(&mut state, 1_100, &["a", "b"]),
            Vec::<BranchKey>::new()
        );
    }

    #[test]
    fn new_branches_generate_at_once_and_join_the_next_occurrence() {
        let mut state = GeneratorState::default();
        owed(&mut state, 0, &[]);
        state.births.push(key("new"));
        assert_eq!(owed(&mut state, 50, &["new"]), vec![key("new")]);
        assert_eq!(owed(&mut state, 100, &["new"]), Vec::<BranchKey>::new());
        // A birth listed when the occurrence comes is covered by it, once.
        state.births.push(key("late"));
        assert_eq!(
            owed(&mut state, 200, &["new", "late"]),
            vec![key("new"), key("late")]
        );
    }

    #[test]
    fn occurrences_due_while_one_is_worked_through_coalesce() {
        let mut state = GeneratorState::default();
        state.advance(0, 200, || ["a", "b"].into_iter().map(key));
        assert_eq!(state.pending.len(), 2);
        // Blocked: one branch still owed at 700 — nothing new is listed …
        state.pending.pop_front();
        state.advance(700, 200, || ["a", "b"].into_iter().map(key));
        assert_eq!(state.pending, vec![key("b")]);
        // … and once it is done, the newest due occurrence (600) generates once.
        state.pending.clear();
        assert_eq!(owed(&mut state, 700, &["a", "b"]), vec![key("a"), key("b")]);
        assert_eq!(state.next_ns, Some(800));
    }

    const MS: i64 = 1_000_000;

    #[test]
    fn on_a_boundary_the_occurrence_is_due_now() {
        assert_eq!(occurrence(1_000, 200, 1_000), (1_000, 1_200));
        assert_eq!(occurrence(1_000, 200, 1_400), (1_400, 1_600));
    }

    #[test]
    fn between_boundaries_the_last_one_is_due() {
        assert_eq!(
            occurrence(0, 200 * MS as u64, 250 * MS),
            (200 * MS, 400 * MS)
        );
    }

    #[test]
    fn missed_periods_coalesce_into_the_newest_occurrence() {
        // Five periods late: one generation, for the occurrence at 1 s, then 1.2 s.
        let (due, next) = occurrence(0, 200 * MS as u64, 1_050 * MS);
        assert_eq!((due, next), (1_000 * MS, 1_200 * MS));
        // The schedule stays anchored: no drift from the late run.
        assert_eq!(
            occurrence(0, 200 * MS as u64, next),
            (1_200 * MS, 1_400 * MS)
        );
    }

    #[test]
    fn instants_before_the_anchor_count_backwards() {
        assert_eq!(occurrence(1_000, 300, 900), (700, 1_000));
    }

    #[test]
    fn far_instants_saturate() {
        assert_eq!(occurrence(0, 1, i64::MAX), (i64::MAX, i64::MAX));
    }
}
