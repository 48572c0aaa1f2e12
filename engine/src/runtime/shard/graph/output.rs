//! A route's output on its way out of a node: each branch group into its route buffer (with
//! the acknowledgement runs and event times of the rows it came from), and the rows that
//! failed into their route's ON MESSAGE ERROR policy (IGNORE, LOG, or SEND TO error records).

use arrow_array::{Array, ArrayRef, UInt32Array};

use super::{mark_nacked, Graph, Instant, NodeRef};
use crate::runtime::exec::error_record;
use crate::runtime::exec::route::RouteOutput;
use crate::runtime::frame::{append_runs, derive_runs, AckRun, AckRuns, BranchRows, Frame};
use crate::runtime::plan::{ErrorPlan, RelayId, RoutePlan};

impl Graph {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn route_output(
        &mut self,
        node: NodeRef,
        route_index: usize,
        route: &RoutePlan,
        frame: &Frame,
        columns: &[ArrayRef],
        envelope: Option<&crate::vm::EnvelopeView>,
        (kept_rows, times): (Option<&UInt32Array>, Option<&ArrayRef>),
        mut output: RouteOutput,
        detached: bool,
        at: Instant,
        per_run: &mut [u64],
        nacked: &mut [bool],
        logs: &mut Vec<String>,
        out_frames: &mut Vec<(RelayId, Frame)>,
    ) {
        let to_frame_rows = |rows: &UInt32Array| -> UInt32Array {
            match kept_rows {
                Some(kept) => arrow_select::take::take(kept, rows, None)
                    .ok()
                    .and_then(|a| a.as_any().downcast_ref::<UInt32Array>().cloned())
                    .unwrap_or_else(|| rows.clone()),
                None => rows.clone(),
            }
        };
        let mut flushed = Vec::new();
        // Groups sliced from one batch in group order take their event times in one go too.
        // (Not `take_times`: these rows are in group order, not ascending.)
        let grouped_times = output.grouped_rows.as_ref().and_then(|rows| {
            times.and_then(|t| arrow_select::take::take(t.as_ref(), rows, None).ok())
        });
        // Every group's branch is touched first, in one pass: a touch on a large branch table
        // writes lines that miss the cache, and the reference counting below (each group's
        // slices) is a locked instruction that waits for every earlier store. Touched
        // together, the misses overlap and the first count waits once, not once per group.
        let target_branch = self.plan.relays.get(route.target).and_then(|r| r.branch);
        if let Some(branch) = target_branch {
            let keys = output.groups.iter().filter_map(|group| group.key.bytes());
            self.touch_branches(branch, keys, at.now.physical_ns);
        }
        // The groups have distinct branches: one pass of the route's buffers.
        self.node_mut(node).routes[route_index].begin_pass();
        let groups = std::mem::take(&mut output.groups);
        // A fan-out bound for a node that takes grouped frames stays one batch (`Frame::groups`).
        // Its event times must be at hand in group order too (a window's records, cut per
        // branch, have none: they take no FLUSH, so they never open a fresh pass anyway).
        let grouped = groups.len() > 1
            && (grouped_times.is_some() || times.is_none())
            && !matches!(node, NodeRef::Emitter(_))
            && self.takes_grouped_relay(route.target)
            && self.node_mut(node).routes[route_index].takes_grouped_pass();
        let mut grouped_runs = AckRuns::new();
        let mut branch_rows: Vec<BranchRows> =
            Vec::with_capacity(if grouped { groups.len() } else { 0 });
        let mut grouped_offset = 0usize;
        for group in groups {
            let runs = match frame.acks.as_slice() {
                _ if detached => AckRuns::new(),
                // One payload: every derived row is its, no row indices needed.
                [only] => {
                    per_run[0] += group.rows as u64;
                    smallvec::smallvec![AckRun {
                        root: only.root,
                        rows: group.rows as u32,
                    }]
                }
                _ => derive_runs(&frame.acks, &to_frame_rows(&group.input_rows), per_run),
            };
            self.node_mut(node).counters.rows_out += group.rows as u64;
            if grouped {
                append_runs(&mut grouped_runs, &runs);
                branch_rows.push(BranchRows {
                    key: group.key,
                    rows: group.rows as u32,
                });
                continue;
            }
            let group_times = match &grouped_times {
                Some(all) => Some(all.slice(grouped_offset, group.input_rows.len())),
                None => crate::runtime::frame::take_times(times, &group.input_rows),
            };
            grouped_offset += group.input_rows.len();
            let batch = output.group_batch(&group);
            let (buffers, openings) = self.route_buffers_mut(node, route_index);
            let deadline = buffers.append(
                group.key,
                batch,
                runs,
                group_times,
                at.now,
                openings,
                &mut flushed,
            );
            self.note_route_deadline(deadline);
            self.note_deadline(deadline, at);
        }
        if grouped {
            // Every row, in group order, with the event times taken in that order.
            let batch = output
                .batch
                .take()
                .expect("an output with groups has a batch");
            let (buffers, openings) = self.route_buffers_mut(node, route_index);
            let deadline = buffers.append_grouped(
                batch,
                branch_rows,
                grouped_runs,
                grouped_times,
                at.now,
                openings,
                &mut flushed,
            );
            self.note_route_deadline(deadline);
            self.note_deadline(deadline, at);
        }
        match node {
            // An emitter's one route feeds its sink queue, not a relay.
            NodeRef::Emitter(index) => self.emitter_queues[index].ready.extend(flushed),
            _ => out_frames.extend(flushed.into_iter().map(|f| (route.target, f))),
        }
        if output.failed.is_empty() {
            return;
        }
        self.node_mut(node).counters.message_errors += output.failed.len() as u64;
        let failed_frame_rows: Vec<u32> = output
            .failed
            .iter()
            .map(|(row, _)| match kept_rows {
                Some(kept) => kept.value(*row as usize),
                None => *row,
            })
            .collect();
        match &route.on_error {
            ErrorPlan::Ignore => {}
            ErrorPlan::Log => {
                if let Some((row, message)) = output.failed.first() {
                    logs.push(format!("{}: row {row}: {message}", route.label));
                }
                mark_nacked(&frame.acks, failed_frame_rows.into_iter(), nacked);
            }
            ErrorPlan::SendTo(error) => {
                let records = error_record::build(
                    &self.plan.clone(),
                    route,
                    error,
                    &error_record::Failed {
                        input: columns,
                        partial: &output.partial,
                        rows: &output.failed,
                        incoming: &frame.key,
                        state: &self.broadcast_state.clone(),
                        envelope,
                        now_ns: at.snapshot_ns,
                        code: error_record::EXPRESSION_ERROR_CODE,
                    },
                );
                for (key, batch, rows) in records.groups {
                    let runs = if detached {
                        AckRuns::new()
                    } else {
                        derive_runs(&frame.acks, &to_frame_rows(&rows), per_run)
                    };
                    out_frames.push((
                        error.relay,
                        Frame {
                            groups: None,
                            times: crate::runtime::frame::take_times(times, &rows),
                            batch,
                            key,
                            acks: runs,
                        },
                    ));
                }
                if let Some((row, message)) = records.failed.first() {
                    logs.push(format!(
                        "{}: error record for row {row}: {message}",
                        route.label
                    ));
                }
                let bad: Vec<u32> = records
                    .failed
                    .iter()
                    .map(|(row, _)| match kept_rows {
                        Some(kept) => kept.value(*row as usize),
                        None => *row,
                    })
                    .collect();
                mark_nacked(&frame.acks, bad.into_iter(), nacked);
            }
        }
    }
}
