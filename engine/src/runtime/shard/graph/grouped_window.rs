//! Grouped frames into a window processor: a route's fan-out over many branches of one input
//! batch travels as one frame (`Frame::groups`) to a window that admits each branch's rows
//! from it, so the fan-out costs no batch, route buffer, relay slot and delivery per branch.
//!
//! Which nodes take them ([`Graph::takes_grouped`]): a window processor that reads nothing
//! per branch before its window (no FROM … WHERE, FILTER WHERE, COLLECT FOR, materialized
//! state or `branch.` field), on a relay it is the only consumer of, with no materialized
//! state. A grouped frame is cut by owner shard where it is published (`merged_delivery`),
//! so every shard's window receives its own branches' groups. Everyone else
//! gets one frame per branch (`Frame::ungroup`) at delivery, so grouping never changes what
//! another node sees.
//!
//! Why admission is the same: the window evaluates its arguments over the whole frame (row
//! by row, so each branch's values are those its own frame would give), refuses failed rows
//! and MAX STATE SIZE overruns per branch as its own frame would, and keeps each branch's
//! rows as a run of its own. One difference, in the window's favour: the input watermark
//! moves once per grouped frame, after every branch took its rows, so no branch's rows in
//! the frame arrive after another branch's later rows closed its window (per branch, rows
//! past a window's end wait in the window for the next one, as the fold stops at the end).

use arrow_array::{ArrayRef, Int64Array};
use nervix_shards::branch_key::BranchKey;
use nervix_shards::slab_map::Entry;

use super::work::{keep_units, Kept, WorkState};
use super::{Graph, Instant, NodeRef};
use crate::runtime::exec::window::{RangeArgs, WindowState};
use crate::runtime::frame::{Frame, RunCursor};
use crate::runtime::plan::{NodeWork, ProcessorPlan, RelayId, WindowPlan};
use crate::runtime::shard::mesh::Ctx;

impl Graph {
    /// Whether `consumer` takes grouped frames from `relay` (module docs).
    pub(super) fn takes_grouped(&self, consumer: NodeRef, relay: RelayId) -> bool {
        let NodeRef::Processor(index) = consumer else {
            return false;
        };
        let processor = &self.plan.processors[index];
        matches!(processor.work, NodeWork::Window(_))
            && !self.releasing
            && self.processors[index].collect.is_none()
            && processor.state.is_empty()
            && processor.filter.is_none()
            && processor.branch_scope.is_none()
            && processor
                .inputs
                .iter()
                .filter(|input| input.relay == relay)
                .all(|input| input.filter.is_none())
    }

    /// Whether a route may publish grouped frames into `relay` (module docs).
    pub(super) fn takes_grouped_relay(&self, relay: RelayId) -> bool {
        let plan = &self.plan.relays[relay];
        plan.branch.is_some()
            && !plan.materialized
            && match self.relays[relay].consumers[..] {
                [only] => self.takes_grouped(only, relay),
                _ => false,
            }
    }

    /// Admits a grouped frame's rows into processor `index`'s windows, branch by branch, then
    /// emits the windows due by the watermark they moved (module docs). `kept` holds every
    /// row of the frame (no filter ran).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn admit_window_grouped(
        &mut self,
        processor: &ProcessorPlan,
        index: usize,
        window: &WindowPlan,
        frame: &Frame,
        kept: &mut Kept,
        detached: bool,
        at: Instant,
        cx: &mut Ctx<'_>,
        nacked: &mut [bool],
        logs: &mut Vec<String>,
    ) {
        let groups = frame.groups.as_deref().unwrap_or_default();
        debug_assert_eq!(
            kept.rows,
            frame.num_rows(),
            "no filter runs before a grouped window"
        );
        let (values, failed) = self.window_arguments(index, window, frame, kept, at, nacked, logs);
        // Each branch's rows left after the refusals (`failed` ascends, in frame rows).
        let mut failed_rows = failed.iter().peekable();
        let mut start = 0u32;
        let kept_per_group: Vec<usize> = groups
            .iter()
            .map(|group| {
                let end = start + group.rows;
                let mut dropped = 0usize;
                while failed_rows.next_if(|row| **row < end).is_some() {
                    dropped += 1;
                }
                start = end;
                group.rows as usize - dropped
            })
            .collect();
        // A window a capped pass left due closes before its branch takes more rows.
        let reached_before = self.window_reached_ns(index, at);
        let due_first: Vec<BranchKey> = match &self.work[index] {
            WorkState::Window { windows, due, .. }
                if due.first().is_some_and(|(d, _)| *d <= reached_before) =>
            {
                groups
                    .iter()
                    .filter(|group| {
                        windows
                            .get(&group.key)
                            .is_some_and(|state| state.is_due(window, reached_before))
                    })
                    .map(|group| group.key.clone())
                    .collect()
            }
            _ => Vec::new(),
        };
        for key in &due_first {
            self.emit_windows(processor, index, Some(key), at.snapshot_ns, false, at, cx);
        }
        let runs = keep_units(frame, kept, detached, nacked, cx);
        let mut runs = RunCursor::new(&runs);
        let times = kept
            .event_times()
            .unwrap_or_else(|| Int64Array::from_value(at.snapshot_ns, kept.rows));
        let args: &[ArrayRef] = &values;
        let WorkState::Window {
            windows,
            watermark_ns,
            due: due_index,
        } = &mut self.work[index]
        else {
            return;
        };
        let before = *watermark_ns;
        let mut earliest_due: Option<i64> = None;
        let mut refused_rows = 0u64;
        let mut offset = 0usize;
        for (group, &rows) in groups.iter().zip(&kept_per_group) {
            let acks = runs.take(rows);
            let start = offset;
            offset += rows;
            if rows == 0 {
                continue;
            }
            let mut opened = WindowState::default();
            let (state, vacant) = match windows.entry(group.key.clone()) {
                Entry::Occupied(entry) => (entry.into_mut(), None),
                Entry::Vacant(entry) => (&mut opened, Some(entry)),
            };
            let indexed_due = state.due_ns(window);
            let Some(range_args) = RangeArgs::new(args, start, rows) else {
                logs.push(format!(
                    "rows could not enter the window: rows {start}..{} past the arguments",
                    start + rows
                ));
                for run in &acks {
                    cx.nack(run.root);
                }
                continue;
            };
            let bytes = range_args.logical_bytes();
            if state.would_exceed(window, bytes) {
                // Refused before it changes the window (spec): logged, not acknowledged.
                logs.push(format!(
                    "{rows} rows refused: the branch's window state would exceed its cap ({} bytes held, {bytes} more needed)",
                    state.bytes(),
                ));
                refused_rows += rows as u64;
                for run in &acks {
                    cx.nack(run.root);
                }
                continue;
            }
            if let Err((error, refused)) =
                state.admit_range(&times, range_args, (start, rows), acks)
            {
                logs.push(format!("rows could not enter the window: {error}"));
                for run in refused {
                    cx.nack(run.root);
                }
            }
            *watermark_ns = match (*watermark_ns, state.watermark_ns()) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            let due = state.due_ns(window);
            if let Some(due) = due.filter(|due| Some(*due) != indexed_due) {
                due_index.insert((due, group.key.clone()));
            }
            if let Some(due) = due {
                earliest_due = Some(earliest_due.map_or(due, |e| e.min(due)));
            }
            // Only windows holding rows are kept (a refused run leaves a new one empty).
            if let Some(entry) = vacant.filter(|_| !opened.is_empty()) {
                entry.insert(opened);
            }
        }
        let advanced = *watermark_ns > before;
        self.processors[index].counters.message_errors += refused_rows;
        self.work_changed = true;
        if let Some(due) = earliest_due {
            self.note_deadline(Some(nervix_shards::flush::Deadline::Logical(due)), at);
        }
        let reached = self.window_reached_ns(index, at);
        if advanced || earliest_due.is_some_and(|due| due <= reached) {
            self.emit_windows(processor, index, None, at.snapshot_ns, false, at, cx);
        }
    }

    /// How far processor `index`'s windows have come: its input watermark or the execution
    /// snapshot, whichever is later.
    fn window_reached_ns(&self, index: usize, at: Instant) -> i64 {
        match &self.work[index] {
            WorkState::Window { watermark_ns, .. } => {
                watermark_ns.map_or(at.snapshot_ns, |w| w.max(at.snapshot_ns))
            }
            _ => at.snapshot_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use nervix_shards::flush::IMMEDIATE_WINDOW_NS;

    use super::super::test_driver::{Driver, SCRIPT};

    /// [`SCRIPT`] with the regrouping split over two routes (and, in `window_clause`, what the
    /// window adds), so one batch leaves as two grouped frames.
    fn two_route_script(window_clause: &str) -> String {
        let one_route = "
        FLUSH IMMEDIATE
        ON MESSAGE ERROR LOG;";
        let two_routes = "
        WHERE message.sensor = 'p' OR message.sensor = 'p2'
        FLUSH IMMEDIATE
        ON MESSAGE ERROR LOG
      TO keyed
        INHERIT ALL
        BRANCHED BY by_sensor SET sensor = message.sensor
        WHERE NOT (message.sensor = 'p' OR message.sensor = 'p2')
        FLUSH IMMEDIATE
        ON MESSAGE ERROR LOG;";
        assert!(SCRIPT.matches(one_route).count() == 1, "the driver's route");
        SCRIPT.replacen(one_route, two_routes, 1).replace(
            "STEP 10s DURATION\n",
            &format!("STEP 10s DURATION\n      {window_clause}\n"),
        )
    }

    /// Sends a far-ahead row and ticks until every window before it closed.
    fn close_windows(driver: &mut Driver, from_ns: u64) {
        driver.send(&[("z", 100)], from_ns);
        for hop in 1..=3 {
            driver.tick(from_ns + 2 * hop * IMMEDIATE_WINDOW_NS);
        }
    }

    fn sorted(tallies: &[(String, i64)]) -> Vec<(String, i64)> {
        let mut tallies = tallies.to_vec();
        tallies.sort();
        tallies
    }

    fn tally(rows: &[(&str, i64)]) -> Vec<(String, i64)> {
        rows.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    }

    #[test]
    fn one_flush_reaches_the_window_as_one_frame_before_its_watermark_moves() {
        let mut driver = Driver::with_script(&two_route_script(""));
        let window = IMMEDIATE_WINDOW_NS;
        let regroup = (driver.graph.plan.processors.iter())
            .position(|p| p.name == "regroup")
            .expect("the reingestor");
        // q and q2 open their windows at 0 s (due at 10 s).
        driver.send(&[("q", 0), ("q2", 0)], 0);
        driver.tick(window);
        let frames_before = driver.graph.processors[regroup].counters.frames_out;
        // One batch over both routes: the first route's rows reach 12 s, which is past the
        // end of q's window, and the second route's q and q2 rows are at 9 s. Per route, the
        // first frame's earliest row (8 s) leaves first; had its 12 s row moved the window's
        // watermark before the second route's rows arrived, q and q2 would have closed with
        // one row each.
        driver.send(&[("p", 8), ("p2", 12), ("q", 9), ("q2", 9)], 2 * window);
        driver.tick(4 * window);
        assert_eq!(
            driver.graph.processors[regroup].counters.frames_out - frames_before,
            1,
            "the batch's four branches over two routes left as one frame"
        );
        close_windows(&mut driver, 6 * window);
        assert_eq!(
            sorted(&driver.tallies),
            tally(&[("p", 1), ("p2", 1), ("q", 2), ("q2", 2)])
        );
    }

    #[test]
    fn a_branch_over_its_state_cap_is_refused_alone() {
        // A run's argument (the sensor names) takes their bytes and 4-byte offsets, one more
        // than its rows, and COUNT reserves a little: 40 "big" rows (284 bytes) exceed 256
        // bytes, one "a" or "b" row (9 bytes) does not.
        let mut driver = Driver::with_script(&two_route_script("MAX STATE SIZE 256B"));
        let window = IMMEDIATE_WINDOW_NS;
        let tally_by_sensor = (driver.graph.plan.processors.iter())
            .position(|p| p.name == "tally_by_sensor")
            .expect("the window");
        let mut rows = vec![("a", 1), ("b", 1)];
        rows.extend(std::iter::repeat_n(("big", 2), 40));
        driver.send(&rows, 0);
        driver.tick(window);
        assert_eq!(
            driver.graph.processors[tally_by_sensor]
                .counters
                .message_errors,
            40,
            "the 40 rows of the branch over its cap are refused"
        );
        close_windows(&mut driver, 2 * window);
        assert_eq!(sorted(&driver.tallies), tally(&[("a", 1), ("b", 1)]));
    }

    #[test]
    fn a_row_whose_argument_fails_is_refused_alone() {
        // The argument divides by zero for "fail" (four letters) only.
        let script = two_route_script("").replace(
            "COUNT(input.sensor)",
            "COUNT(100 / (length(input.sensor) - 4))",
        );
        let mut driver = Driver::with_script(&script);
        let window = IMMEDIATE_WINDOW_NS;
        let tally_by_sensor = (driver.graph.plan.processors.iter())
            .position(|p| p.name == "tally_by_sensor")
            .expect("the window");
        // In group order the frame holds a, a, fail, b: the failed row sits between branches,
        // and b's row must still be b's.
        driver.send(&[("a", 1), ("fail", 1), ("a", 2), ("b", 3)], 0);
        driver.tick(window);
        let counters = &driver.graph.processors[tally_by_sensor].counters;
        assert_eq!(counters.message_errors, 1, "the failed row is refused");
        close_windows(&mut driver, 2 * window);
        assert_eq!(sorted(&driver.tallies), tally(&[("a", 2), ("b", 1)]));
    }

    #[test]
    fn a_pass_kept_whole_is_cut_per_branch_when_the_next_pass_appends_first() {
        let mut driver = Driver::with_script(&two_route_script(""));
        let window = IMMEDIATE_WINDOW_NS;
        // Two batches inside one FLUSH IMMEDIATE window: the second appends to a, which the
        // first pass kept in its grouped batch, so that pass becomes a buffer per branch.
        driver.send(&[("a", 1), ("b", 1)], 0);
        driver.send(&[("a", 2), ("c", 2)], window / 2);
        driver.tick(2 * window);
        close_windows(&mut driver, 3 * window);
        assert_eq!(
            sorted(&driver.tallies),
            tally(&[("a", 2), ("b", 1), ("c", 1)])
        );
    }

    #[test]
    fn a_windows_records_reach_the_next_window_with_their_times() {
        // A second window over the first one's records: one emission pass closes a and b,
        // whose records go on each timed at its window's start (a window's route takes no
        // FLUSH, so its records leave per branch as they are built, not grouped).
        let script = two_route_script("").replace(
            "TO tallies\n        SET sensor = branch.sensor, n = COUNT(input.sensor)",
            "TO counted\n        SET sensor = branch.sensor, n = COUNT(input.sensor)",
        ) + "
            CREATE WINDOW PROCESSOR sum_by_sensor
              FROM counted
              WIDTH 20s DURATION
              STEP 20s DURATION
              BRANCHED BY by_sensor
              TO tallies
                SET sensor = branch.sensor, n = coalesce(SUM(input.n), 0)
                ON MESSAGE ERROR LOG;
            ";
        let script = script.replace(
            "CREATE RELAY tallies",
            "CREATE RELAY counted SCHEMA tally BRANCHED BY by_sensor;\n            CREATE RELAY tallies",
        );
        let mut driver = Driver::with_script(&script);
        let window = IMMEDIATE_WINDOW_NS;
        // Counts of [1 s, 11 s) (a 2, b 1) and [12 s, 22 s) (a 1, b 1) are summed by the
        // 20 s window that opens at 1 s, once a record timed 25 s moves its watermark.
        driver.send(&[("a", 1), ("b", 1), ("a", 5)], 0);
        driver.send(&[("a", 12), ("b", 12)], 2 * window);
        driver.send(&[("a", 25), ("b", 25)], 4 * window);
        driver.send(&[("z", 100)], 6 * window);
        for hop in 1..=6 {
            driver.tick((6 + 2 * hop) * window);
        }
        assert_eq!(sorted(&driver.tallies), tally(&[("a", 3), ("b", 2)]));
    }

    #[test]
    fn a_window_with_a_filter_takes_one_frame_per_branch() {
        // FILTER WHERE reads rows before the window: the grouped frame is cut per branch on
        // delivery, and every branch is counted as its own frame would be.
        let script = two_route_script("").replace(
            "FROM keyed\n",
            "FROM keyed\n              FILTER WHERE input.sensor <> 'skip'\n",
        );
        let mut driver = Driver::with_script(&script);
        let window = IMMEDIATE_WINDOW_NS;
        driver.send(&[("a", 1), ("skip", 1), ("b", 2), ("a", 3)], 0);
        driver.tick(window);
        close_windows(&mut driver, 2 * window);
        assert_eq!(sorted(&driver.tallies), tally(&[("a", 2), ("b", 1)]));
    }
}
