//! Window records on their way out: the records one emission pass closed, into the window's
//! routes.
//!
//! One pass can close hundreds of windows, one per branch (a watermark passing the end of
//! many branches' windows at once: Nexmark q5 keeps a branch per auction and hop). Routed one
//! at a time, each record pays a whole node pass — its own batch, its key decoded alone, every
//! route's construction and WHERE evaluated for one row. Here the pass's records form one
//! batch (their keys decoded in one conversion), each route runs once over it, and its output
//! is cut back into one group per branch.
//!
//! Why that is the same as routing them one by one: a window's routes keep the branch or drop
//! it (UNBRANCHED), a route's output rows keep their input order, and the records of one
//! branch are adjacent in the pass; so cutting the output where the record's key changes
//! gives each branch's route buffer the same rows, in the same order. When the target relay's
//! consumer takes frames merged (`merged_delivery`: it never reads the incoming branch), the
//! output is cut only where the owner shard changes: the records it would have merged on
//! publish leave as one frame in the first place (a window route takes no FLUSH, so no
//! branch's buffering is skipped), and each record's branch is touched as before. Routes
//! whose effect depends on the record's branch in other ways — materialized state bound per
//! branch, error records that keep the failing branch (ON MESSAGE ERROR SEND TO) — take the
//! one-by-one path.
//!
//! Acknowledgements: records carry none (module doc of `exec::window`); the rows a record's
//! window releases are acknowledged once the record was routed, or negatively acknowledged
//! when the record itself failed.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, UInt32Array};
use nervix_shards::branch_key::BranchKey;

use super::{Graph, Instant, NodeRef};
use crate::runtime::aggregate::{column, Finished};
use crate::runtime::exec::route::{run_route, RouteGroup, RouteOutput};
use crate::runtime::frame::{AckRun, AckRuns, Frame};
use crate::runtime::plan::{BranchOut, ErrorPlan, ProcessorPlan, WindowPlan};
use crate::runtime::shard::mesh::Ctx;

/// One closed window: its branch, its time (the window's start), its result columns (one row
/// each) or why they failed, and the retained rows it releases.
pub(super) struct WindowRecord {
    pub key: BranchKey,
    pub time_ns: i64,
    pub result: Result<Vec<Finished>, String>,
    pub leaving: Vec<AckRun>,
}

/// Whether processor `processor`'s routes give the same output for a batch of many branches'
/// records as for each record alone (module doc).
fn routes_together(processor: &ProcessorPlan) -> bool {
    processor.state.is_empty()
        && processor.branch_scope.is_none()
        && processor.routes.iter().all(|route| {
            matches!(route.branch, BranchOut::Keep { .. } | BranchOut::Unbranched)
                && !matches!(route.on_error, ErrorPlan::SendTo(_))
        })
}

/// Cuts the one group a branch-keeping route made of the records into one group per run of
/// records that `together` keeps together (same branch, or same owner shard): output row `j`
/// came from record `input_rows[j]`, whose branch is `keys[input_rows[j]]`. Each group takes
/// the branch of its first record.
fn split_by_record(
    group: RouteGroup,
    keys: &[BranchKey],
    together: impl Fn(usize, usize) -> bool,
) -> Vec<RouteGroup> {
    let rows: &[u32] = group.input_rows.values();
    let mut groups = Vec::new();
    let mut start = 0usize;
    for end in 1..=rows.len() {
        let cut = end == rows.len() || !together(rows[start] as usize, rows[end] as usize);
        if !cut {
            continue;
        }
        groups.push(RouteGroup {
            key: keys[rows[start] as usize].clone(),
            offset: group.offset + start,
            rows: end - start,
            input_rows: group.input_rows.slice(start, end - start),
        });
        start = end;
    }
    groups
}

impl Graph {
    /// Routes the records window processor `index` (`processor`, its window `window`) closed
    /// in one pass, in order; a record that failed is logged and its rows negatively
    /// acknowledged.
    pub(super) fn release_window_records(
        &mut self,
        index: usize,
        processor: &ProcessorPlan,
        window: &WindowPlan,
        records: Vec<WindowRecord>,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        let branch = processor
            .inputs
            .first()
            .and_then(|input| self.plan.relays[input.relay].branch);
        // The records that were built, as columns: branch, time, result columns, rows leaving.
        let mut keys = Vec::with_capacity(records.len());
        let mut times = Vec::with_capacity(records.len());
        let mut results = Vec::with_capacity(records.len());
        let mut leaving = Vec::with_capacity(records.len());
        for record in records {
            match record.result {
                Ok(columns) => {
                    keys.push(record.key);
                    times.push(record.time_ns);
                    results.push(columns);
                    leaving.push(record.leaving);
                }
                Err(error) => self.record_failed(index, &error, &record.leaving, cx),
            }
        }
        if keys.len() > 1 && routes_together(processor) {
            if let Ok(batch) = self.records_batch(window, branch, &keys, &results) {
                let times: ArrayRef = Arc::new(Int64Array::from(times));
                self.route_records(index, processor, batch, &keys, times, at, cx);
                for run in leaving.iter().flatten() {
                    cx.ack(run.root, run.rows as u64);
                }
                return;
            }
            // A batch that cannot be built (a key that does not decode): each record alone
            // finds which one fails.
        }
        let built = keys.into_iter().zip(times).zip(results).zip(leaving);
        for (((key, time_ns), results), leaving) in built {
            let mut columns: Vec<ArrayRef> =
                results.into_iter().map(Finished::into_array).collect();
            let record = self
                .branch_columns(branch, &window.branch_fields, &key)
                .and_then(|fields| {
                    columns.extend(fields);
                    RecordBatch::try_new(window.results.clone(), columns)
                        .map_err(|error| error.to_string())
                });
            match record {
                Ok(batch) => {
                    let frame = Frame {
                        groups: None,
                        batch,
                        key,
                        acks: AckRuns::new(),
                        times: Some(Arc::new(Int64Array::from_value(time_ns, 1))),
                    };
                    self.route_released(index, &frame, at, cx);
                    for run in &leaving {
                        cx.ack(run.root, run.rows as u64);
                    }
                }
                Err(error) => self.record_failed(index, &error, &leaving, cx),
            }
        }
    }

    /// A record that cannot be built fails like a row under ON MESSAGE ERROR LOG: counted,
    /// logged, and the rows it came from are not acknowledged.
    fn record_failed(&mut self, index: usize, error: &str, leaving: &[AckRun], cx: &mut Ctx<'_>) {
        self.processors[index].counters.message_errors += 1;
        self.log(
            NodeRef::Processor(index),
            vec![format!("window record failed: {error}")],
        );
        for run in leaving {
            cx.nack(run.root);
        }
    }

    /// The records as one batch in the window's record schema: each call's column, then the
    /// branch key fields the routes read, decoded from all the records' keys at once.
    fn records_batch(
        &mut self,
        window: &WindowPlan,
        branch: Option<usize>,
        keys: &[BranchKey],
        results: &[Vec<Finished>],
    ) -> Result<RecordBatch, String> {
        let calls = results.first().map_or(0, Vec::len);
        let mut columns = Vec::with_capacity(window.results.fields().len());
        let mut values: Vec<&Finished> = Vec::with_capacity(results.len());
        for call in 0..calls {
            values.clear();
            for result in results {
                values.push(result.get(call).ok_or("a record lacks a result column")?);
            }
            columns.push(column(&values).map_err(|e| e.to_string())?);
        }
        if let (Some(branch), false) = (branch, window.branch_fields.is_empty()) {
            let mut key_bytes = Vec::with_capacity(keys.len());
            for key in keys {
                match key {
                    BranchKey::Key(bytes) => key_bytes.push(bytes.as_ref()),
                    BranchKey::Unbranched => return Err("an unbranched record".to_string()),
                }
            }
            let values = self
                .key_encoder(branch)?
                .decode_many(key_bytes)
                .map_err(|error| error.to_string())?;
            for field in &window.branch_fields {
                columns.push(values.get(*field).ok_or("a key field is missing")?.clone());
            }
        }
        RecordBatch::try_new(window.results.clone(), columns).map_err(|error| error.to_string())
    }

    /// Runs processor `index`'s routes once over `batch`, whose row `i` is the record of
    /// branch `keys[i]` with time `times[i]`, as [`Graph::route_released`] would run them on
    /// each record alone.
    #[allow(clippy::too_many_arguments)]
    fn route_records(
        &mut self,
        index: usize,
        processor: &ProcessorPlan,
        batch: RecordBatch,
        keys: &[BranchKey],
        times: ArrayRef,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) {
        // Older rows in buffers past their deadline leave first (`flush_order`).
        self.flush_overdue_routes(at, cx);
        let plan = self.plan.clone();
        let node = NodeRef::Processor(index);
        let rows = batch.num_rows();
        let columns: Vec<ArrayRef> = batch.columns().to_vec();
        // The frame the routes read: no acknowledgement runs (records carry none); its key
        // is only read by error records, which take the one-by-one path.
        let frame = Frame {
            groups: None,
            batch,
            key: keys[0].clone(),
            acks: AckRuns::new(),
            times: Some(times.clone()),
        };
        let mut logs = Vec::new();
        let mut out_frames = Vec::new();
        for (route_index, route) in processor.routes.iter().enumerate() {
            let mut output: RouteOutput = run_route(
                &plan,
                route,
                &columns,
                &[],
                None,
                rows,
                &frame.key,
                at.snapshot_ns,
                &mut self.encoders,
                true,
            );
            if matches!(route.branch, BranchOut::Keep { .. }) {
                let groups = std::mem::take(&mut output.groups);
                output.groups = if self.merges_on_publish(route.target) {
                    // Its consumer takes frames merged, never reading their branch: the
                    // records need not part by branch, only by owner shard (a frame goes to
                    // one shard), so no route buffer and frame per record. Each record's
                    // branch is still touched, as its own frame would have.
                    let shards: Vec<usize> = keys
                        .iter()
                        .map(|key| self.key_owner_shard(route.target, key, cx.shards))
                        .collect();
                    if let Some(branch) = self.plan.relays[route.target].branch {
                        let touched = groups
                            .iter()
                            .flat_map(|group| group.input_rows.values().iter())
                            .filter_map(|row| keys[*row as usize].bytes());
                        self.touch_branches(branch, touched, at.now.physical_ns);
                    }
                    groups
                        .into_iter()
                        .flat_map(|group| {
                            split_by_record(group, keys, |a, b| shards[a] == shards[b])
                        })
                        .collect()
                } else {
                    groups
                        .into_iter()
                        .flat_map(|group| split_by_record(group, keys, |a, b| keys[a] == keys[b]))
                        .collect()
                };
                output.grouped_rows = None;
            }
            self.route_output(
                node,
                route_index,
                route,
                &frame,
                &columns,
                None,
                (None::<&UInt32Array>, Some(&times)),
                output,
                processor.detached,
                at,
                &mut [],
                &mut [],
                &mut logs,
                &mut out_frames,
            );
        }
        self.log(node, logs);
        self.publish_all(node, out_frames, at, cx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Schema};

    fn key(byte: u8) -> BranchKey {
        BranchKey::Key([byte].into())
    }

    #[test]
    fn a_routes_output_is_cut_where_the_records_branch_changes() {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        // Records 0..5 of branches a a b c c; the route's WHERE dropped record 3.
        let keys = [key(b'a'), key(b'a'), key(b'b'), key(b'c'), key(b'c')];
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from(vec![10, 11, 12, 14]))],
        )
        .unwrap();
        let group = RouteGroup {
            key: key(b'a'),
            offset: 0,
            rows: batch.num_rows(),
            input_rows: UInt32Array::from(vec![0, 1, 2, 4]),
        };
        let groups = split_by_record(group, &keys, |a, b| keys[a] == keys[b]);
        let cut: Vec<(BranchKey, Vec<u32>, Vec<i64>)> = groups
            .iter()
            .map(|g| {
                let values = batch
                    .slice(g.offset, g.rows)
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec();
                (g.key.clone(), g.input_rows.values().to_vec(), values)
            })
            .collect();
        assert_eq!(
            cut,
            vec![
                (key(b'a'), vec![0, 1], vec![10, 11]),
                (key(b'b'), vec![2], vec![12]),
                (key(b'c'), vec![4], vec![14]),
            ]
        );
    }
}
