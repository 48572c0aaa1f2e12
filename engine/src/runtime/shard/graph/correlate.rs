//! A CORRELATOR on a shard: each concrete branch's pending rows (`exec::correlate`), fed by the
//! frames its LEFT and RIGHT relays deliver, with matched pairs run through the routes and
//! unmatched rows timed out at MAX TIME.
//!
//! Acknowledgements (the graph's rules, module doc of `graph`). A new row holds one unit on its
//! root. Matching hands that unit on: into one unit per pair it made (the pair rows carry the
//! *new* row's root through the routes, like any derived row) plus one while it stays pending;
//! a refused or failed row is negatively acknowledged. A pending row's unit stays with it:
//!
//! - paired under EARLIEST / LATEST, it is acknowledged right after the pair was handed to the
//!   routes (never before, so a crash in between redelivers it). The pair's fate downstream is
//!   then carried by the newer row's root alone: a pair that fails later negatively
//!   acknowledges the newer payload, not the older one (the AckRun model gives a row one root);
//! - at MAX TIME it is acknowledged (ON CORRELATION TIMEOUT DROP), and logged too (LOG) when it
//!   never matched — under MATCH ALL a matched row also leaves at MAX TIME, silently;
//! - once a snapshot holding it is durable (`snapshot`, `exec::correlate_snapshot`), its unit
//!   is acknowledged and it waits on without one: a restart restores it, so the source must
//!   not send it again. A stop and a model change keep pending rows (the stop's snapshot holds
//!   them; a restored branch under another CORRELATE WHERE, schema or MATCH starts empty with
//!   a warning);
//! - when its correlation ends early — the branch is evicted — it is negatively acknowledged
//!   (when it still holds its unit): it never found its partner here, and a redelivering
//!   source gets to try again.
//!
//! A DETACHED correlator acknowledges rows on arrival and pending rows carry no root.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use nervix_nspl::ast::processor::TimeoutAction;
use nervix_shards::ack::AckHandle;
use nervix_shards::branch_key::{BranchKey, BranchMap};

use super::work::{Kept, WorkState};
use super::{mark_nacked, Graph, Instant, NodeRef};
use crate::runtime::exec::correlate::{BranchState, Incoming, Matcher, MAX_PENDING_ROWS_PER_SIDE};
use crate::runtime::frame::{count_rows_per_run, derive_runs, AckRun, AckRuns, Frame};
use crate::runtime::plan::{CorrelatePlan, NodeWork, Side};
use crate::runtime::shard::mesh::Ctx;

/// Per branch, a correlator's pending rows.
pub(super) type Correlations = BranchMap<BranchState>;

/// The root of each of `rows` (ascending frame rows) under `runs`.
fn roots_of(runs: &[AckRun], rows: &[u32]) -> Vec<Option<AckHandle>> {
    let mut roots = Vec::with_capacity(rows.len());
    let (mut run, mut run_end) = (0usize, runs.first().map_or(0, |r| r.rows as u64));
    // A merge of ascending rows against run boundaries, as `derive_runs` walks them.
    for row in rows {
        while u64::from(*row) >= run_end && run + 1 < runs.len() {
            run += 1;
            run_end += runs[run].rows as u64;
        }
        roots.push(runs.get(run).map(|r| r.root));
    }
    roots
}

/// Acknowledges one unit of each root (neighbours on one root in one call).
fn ack_each(cx: &mut Ctx<'_>, roots: &[AckHandle]) {
    let mut start = 0;
    while start < roots.len() {
        let end = roots[start..]
            .iter()
            .position(|r| *r != roots[start])
            .map_or(roots.len(), |len| start + len);
        cx.ack(roots[start], (end - start) as u64);
        start = end;
    }
}

/// What timing out pending rows produced: log lines, roots to acknowledge (one unit each) and
/// roots whose correlation ended early.
#[derive(Default)]
struct Settled {
    logs: Vec<String>,
    acked: Vec<AckHandle>,
    ended: Vec<AckHandle>,
}

/// Times out one branch's due rows (all of them when `force`) into `out`. A branch with
/// nothing due is left untouched, so a tick costs one comparison per idle branch.
fn settle_branch(
    state: &mut BranchState,
    correlate: &CorrelatePlan,
    now_ns: i64,
    force: bool,
    out: &mut Settled,
) {
    let due = state
        .due_ns(correlate.max_time_ns)
        .is_some_and(|due| due <= now_ns);
    if !force && !due {
        return;
    }
    let sides = match state.expire(now_ns, correlate.max_time_ns, force) {
        Ok(sides) => sides,
        Err(error) => {
            out.logs
                .push(format!("pending rows could not be timed out: {error}"));
            return;
        }
    };
    for (side, expired) in [Side::Left, Side::Right].into_iter().zip(sides) {
        if force {
            if !expired.roots.is_empty() {
                out.logs.push(format!(
                    "{} pending {} rows negatively acknowledged: their correlation ended before MAX TIME",
                    expired.roots.len(),
                    side.keyword()
                ));
            }
            let acknowledged = expired.rows - expired.roots.len();
            if acknowledged > 0 {
                out.logs.push(format!(
                    "{acknowledged} pending {} rows dropped, already acknowledged: their correlation ended before MAX TIME",
                    side.keyword()
                ));
            }
            out.ended.extend(expired.roots);
            continue;
        }
        if expired.unmatched > 0 && correlate.on_timeout[side.index()] == TimeoutAction::Log {
            out.logs.push(format!(
                "{} {} rows found no match within MAX TIME",
                expired.unmatched,
                side.keyword()
            ));
        }
        out.acked.extend(expired.roots);
    }
}

impl Graph {
    /// Correlates the kept rows of `frame`, delivered from the relay the node is working on,
    /// with its branch's pending rows; pairs run through processor `index`'s routes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn correlate(
        &mut self,
        index: usize,
        plan: &CorrelatePlan,
        frame: &Frame,
        kept: &Kept,
        detached: bool,
        at: Instant,
        cx: &mut Ctx<'_>,
        nacked: &mut [bool],
        logs: &mut Vec<String>,
    ) {
        let Some(side) = self.input_relay.and_then(|relay| plan.side_of(relay)) else {
            logs.push("a frame from a relay that feeds neither side was refused".to_string());
            nacked.iter_mut().for_each(|flag| *flag = true);
            return;
        };
        // Rows whose MAX TIME is up leave first: a row matches partners younger than that.
        self.settle_correlations(index, Some(&frame.key), at.snapshot_ns, false, cx);
        let times = kept.event_times();
        let kept_frame_rows = kept.frame_rows();
        let frame_rows: &[u32] = kept_frame_rows.values();
        let roots = if detached {
            for run in &frame.acks {
                cx.ack(run.root, run.rows as u64);
            }
            vec![None; kept.rows]
        } else {
            roots_of(&frame.acks, frame_rows)
        };
        let WorkState::Correlate {
            branches,
            watermarks_ns,
            due: due_index,
        } = &mut self.work[index]
        else {
            return;
        };
        let latest = times
            .as_ref()
            .and_then(|t| t.values().iter().max().copied())
            .unwrap_or(at.snapshot_ns);
        let side_watermark = &mut watermarks_ns[side.index()];
        *side_watermark = Some(side_watermark.map_or(latest, |w| w.max(latest)));
        self.work_changed = true;
        let state = branches
            .entry(frame.key.clone())
            .or_insert_with(|| BranchState::new(&plan.side_schemas));
        let incoming = Incoming {
            side,
            columns: &kept.columns,
            rows: kept.rows,
            roots: &roots,
            times: times.as_ref().map(|t| &t.values()[..]),
        };
        let matcher = Matcher {
            condition: &plan.condition,
            keys: &plan.keys,
            matching: plan.matching,
        };
        let correlation = match state.correlate(&matcher, &incoming, at.snapshot_ns) {
            Ok(correlation) => correlation,
            Err(error) => {
                logs.push(format!(
                    "{} rows could not be correlated: {error}",
                    kept.rows
                ));
                mark_nacked(&frame.acks, frame_rows.iter().copied(), nacked);
                return;
            }
        };
        let due = state.due_ns(plan.max_time_ns);
        if let Some(due) = due {
            due_index.insert((due, frame.key.clone()));
        }
        let to_frame = |rows: &[u32]| -> Vec<u32> {
            rows.iter().map(|row| frame_rows[*row as usize]).collect()
        };
        if let Some((row, message)) = correlation.failed.first() {
            logs.push(format!("row {}: {message}", frame_rows[*row as usize]));
        }
        if !correlation.refused.is_empty() {
            logs.push(format!(
                "{} rows refused: the branch's correlator holds its limit of {} pending {} rows",
                correlation.refused.len(),
                MAX_PENDING_ROWS_PER_SIDE,
                side.keyword()
            ));
        }
        let mut refused: Vec<u32> = correlation
            .failed
            .iter()
            .map(|(row, _)| *row)
            .chain(correlation.refused.iter().copied())
            .map(|row| frame_rows[row as usize])
            .collect();
        refused.sort_unstable();
        mark_nacked(&frame.acks, refused.iter().copied(), nacked);
        self.processors[index].counters.message_errors += refused.len() as u64;
        // Nacked before any transfer: a transfer leaving a root nothing would resolve it acked.
        for (run, failed) in frame.acks.iter().zip(nacked.iter()) {
            if *failed {
                cx.nack(run.root);
            }
        }
        // Each new row's unit becomes one per pair it made plus one while it waits.
        let pair_frame_rows = arrow_array::UInt32Array::from(to_frame(&correlation.pair_rows));
        let mut per_run = vec![0u64; frame.acks.len()];
        let pair_acks = if detached {
            AckRuns::new()
        } else {
            let acks = derive_runs(&frame.acks, &pair_frame_rows, &mut per_run);
            count_rows_per_run(
                &frame.acks,
                to_frame(&correlation.held).into_iter(),
                &mut per_run,
            );
            for (run, derived) in frame.acks.iter().zip(&per_run) {
                cx.transfer(run.root, run.rows as u64, *derived);
            }
            acks
        };
        if !correlation.pair_rows.is_empty() {
            match RecordBatch::try_new(plan.pair_schema.clone(), correlation.pairs) {
                Ok(batch) => {
                    // A pair's time is the earlier of its rows' (its low watermark); rows
                    // without event time give pairs none, as before the correlator.
                    let pair_times = times
                        .is_some()
                        .then(|| Arc::new(Int64Array::from(correlation.pair_times)) as ArrayRef);
                    let pairs = Frame {
                        groups: None,
                        batch,
                        key: frame.key.clone(),
                        acks: pair_acks,
                        times: pair_times,
                    };
                    self.route_released(index, &pairs, at, cx);
                }
                Err(error) => {
                    logs.push(format!("matched pairs do not form a batch: {error}"));
                    for run in &pair_acks {
                        cx.nack(run.root);
                    }
                    for root in &correlation.consumed {
                        cx.nack(*root);
                    }
                    return;
                }
            }
        }
        // The older rows of the pairs leave only now that their pairs are in the routes.
        ack_each(cx, &correlation.consumed);
        if let Some(due) = due {
            self.note_deadline(Some(nervix_shards::flush::Deadline::Logical(due)), at);
        }
    }

    /// Times out processor `index`'s pending rows (as `release_work` asks: due ones, or every
    /// branch's / one branch's ended early).
    pub(super) fn release_correlations(
        &mut self,
        index: usize,
        force: Option<Option<&BranchKey>>,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        match force {
            None => self.settle_correlations(index, None, at.now.logical_ns, false, cx),
            Some(Some(key)) => {
                self.settle_correlations(index, Some(key), at.now.logical_ns, true, cx)
            }
            // A stop or a model change keeps them: they are snapshotted (see `snapshot`) and
            // wait on after the restart.
            Some(None) => {}
        }
    }

    /// Removes the pending rows of processor `index` (every branch's, or `only` one's) whose
    /// MAX TIME is up at `now_ns` and applies ON CORRELATION TIMEOUT; `force` ends `only`'s
    /// pending correlations now (negatively acknowledged, see the module doc).
    fn settle_correlations(
        &mut self,
        index: usize,
        only: Option<&BranchKey>,
        now_ns: i64,
        force: bool,
        cx: &mut Ctx<'_>,
    ) {
        let plan = self.plan.clone();
        let NodeWork::Correlate(correlate) = &plan.processors[index].work else {
            return;
        };
        let WorkState::Correlate {
            branches,
            watermarks_ns,
            due,
        } = &mut self.work[index]
        else {
            return;
        };
        // MAX TIME is up once the input watermark — the earlier side's; none while a side has
        // sent nothing, as its first rows may pair with anything pending — or the domain
        // clock reaches it.
        let watermark = match *watermarks_ns {
            [Some(left), Some(right)] => Some(left.min(right)),
            _ => None,
        };
        let now_ns = watermark.map_or(now_ns, |w| w.max(now_ns));
        let mut out = Settled::default();
        // The branches to look at: the one asked for, or those the index says have rows due —
        // so a tick costs the due branches, not every branch.
        let keys: Vec<BranchKey> = match only {
            Some(key) => vec![key.clone()],
            None => {
                let mut keys = Vec::new();
                while due.first().is_some_and(|(at_ns, _)| *at_ns <= now_ns) {
                    let (_, key) = due.pop_first().expect("first exists");
                    keys.push(key);
                }
                keys
            }
        };
        for key in keys {
            let Some(state) = branches.get_mut(&key) else {
                continue;
            };
            settle_branch(state, correlate, now_ns, force, &mut out);
            // Rows left: the next snapshot rewrites (or deletes) what is stored.
            self.work_changed |= state.is_dirty();
            match state.due_ns(correlate.max_time_ns) {
                Some(next) => {
                    due.insert((next, key));
                }
                None => {
                    branches.remove(&key);
                    self.forgotten.push((index, key));
                }
            }
        }
        let Settled { logs, acked, ended } = out;
        ack_each(cx, &acked);
        for root in ended {
            cx.nack(root);
        }
        self.log(NodeRef::Processor(index), logs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_follow_rows_across_runs() {
        let handle = |index| AckHandle {
            index,
            generation: 0,
        };
        let runs = [
            AckRun {
                root: handle(1),
                rows: 2,
            },
            AckRun {
                root: handle(2),
                rows: 3,
            },
        ];
        assert_eq!(
            roots_of(&runs, &[0, 2, 4]),
            vec![Some(handle(1)), Some(handle(2)), Some(handle(2))]
        );
        assert_eq!(roots_of(&[], &[0]), vec![None]);
    }
}
