//! Event-time admission at an ingestor (spec "Timestamp selection and admission"): under
//! `TIMESTAMP AT <field>`, a row whose field is null has no event time, so it is not admitted.
//! It follows each of the ingestor's routes' ON MESSAGE ERROR policy with code `validation` and
//! operation `admit` (SEND TO builds an error record from the input row, LOG logs it and
//! negatively acknowledges its payload, IGNORE drops it acknowledged), keeping its
//! acknowledgement and source metadata, while its batch-mates go on as one smaller frame.
//!
//! Why the acknowledgements balance: each payload's units are transferred once, to the rows
//! derived from it here — the admitted rows (the frame handed back) plus the error records —
//! after any negative acknowledgement (LOG), exactly as a node's processing hands a frame on.

use arrow_array::{new_null_array, Array, ArrayRef, BooleanArray, Int64Array, UInt32Array};
use arrow_select::filter::{filter_record_batch, FilterBuilder};

use super::{mark_nacked, Graph, Instant, NodeRef};
use crate::runtime::envelope::{metadata_topic, Envelope};
use crate::runtime::exec::error_record::{self, ADMISSION_ERROR_CODE};
use crate::runtime::frame::{derive_runs, Frame};
use crate::runtime::plan::ErrorPlan;
use crate::runtime::shard::mesh::Ctx;

/// The rows of `frame` whose event time is null (ascending), if it carries event times.
pub(super) fn missing_times(frame: &Frame) -> Vec<u32> {
    let Some(times) = frame.times.as_ref() else {
        return Vec::new();
    };
    if times.null_count() == 0 {
        return Vec::new();
    }
    (0..times.len() as u32)
        .filter(|row| times.is_null(*row as usize))
        .collect()
}

impl Graph {
    /// Refuses `missing` rows (no event time) of ingestor `index`'s `frame` through its routes'
    /// error policies; returns the admitted rows as a frame (with their envelope), or None when
    /// no row was admitted.
    pub(super) fn refuse_missing_times(
        &mut self,
        index: usize,
        frame: Frame,
        missing: &[u32],
        envelope: Option<Envelope>,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) -> Option<(Frame, Option<Envelope>)> {
        let plan = self.plan.clone();
        let ingestor = &plan.ingestors[index];
        let field = ingestor
            .event_time
            .and_then(|column| frame.batch.schema().fields().get(column).cloned())
            .map_or_else(String::new, |f| f.name().clone());
        let message = format!("admit: the event time field '{field}' is null");
        let failed: Vec<(u32, String)> = missing.iter().map(|r| (*r, message.clone())).collect();
        let rows = frame.num_rows();
        let mut per_run = vec![0u64; frame.acks.len()];
        let mut nacked = vec![false; frame.acks.len()];
        let mut logs = Vec::new();
        let mut error_frames = Vec::new();
        let view = envelope
            .as_ref()
            .map(|e| e.view(metadata_topic(&ingestor.source)));
        for route in &ingestor.routes {
            match &route.on_error {
                ErrorPlan::Ignore => {}
                ErrorPlan::Log => {
                    logs.push(format!("{}: row {}: {message}", route.label, missing[0]));
                    mark_nacked(&frame.acks, missing.iter().copied(), &mut nacked);
                }
                ErrorPlan::SendTo(error) => {
                    // Nothing was constructed: every output field reads as null.
                    let partial: Vec<ArrayRef> = route
                        .schema
                        .fields()
                        .iter()
                        .map(|f| new_null_array(f.data_type(), rows))
                        .collect();
                    let records = error_record::build(
                        &plan,
                        route,
                        error,
                        &error_record::Failed {
                            input: frame.batch.columns(),
                            partial: &partial,
                            rows: &failed,
                            incoming: &frame.key,
                            state: &[],
                            envelope: view.as_ref(),
                            now_ns: at.snapshot_ns,
                            code: ADMISSION_ERROR_CODE,
                        },
                    );
                    for (key, batch, rows) in records.groups {
                        let acks = derive_runs(&frame.acks, &rows, &mut per_run);
                        error_frames.push((
                            error.relay,
                            Frame {
                                groups: None,
                                batch,
                                key,
                                acks,
                                times: None,
                            },
                        ));
                    }
                    if let Some((row, failure)) = records.failed.first() {
                        logs.push(format!(
                            "{}: error record for row {row}: {failure}",
                            route.label
                        ));
                    }
                    mark_nacked(
                        &frame.acks,
                        records.failed.iter().map(|(row, _)| *row),
                        &mut nacked,
                    );
                }
            }
        }
        let admitted = BooleanArray::from_iter(
            (0..rows).map(|row| Some(missing.binary_search(&(row as u32)).is_err())),
        );
        let admitted_rows: UInt32Array = (0..rows as u32)
            .filter(|row| missing.binary_search(row).is_err())
            .collect();
        let acks = derive_runs(&frame.acks, &admitted_rows, &mut per_run);
        for (run, failed) in frame.acks.iter().zip(&nacked) {
            if *failed {
                cx.nack(run.root);
            }
        }
        for (run, derived) in frame.acks.iter().zip(&per_run) {
            cx.transfer(run.root, run.rows as u64, *derived);
        }
        self.node_mut(NodeRef::Ingestor(index))
            .counters
            .message_errors += missing.len() as u64;
        self.log(NodeRef::Ingestor(index), logs);
        for (relay, error_frame) in error_frames {
            self.publish(NodeRef::Ingestor(index), relay, error_frame, at, cx);
        }
        if admitted_rows.is_empty() {
            return None;
        }
        let predicate = FilterBuilder::new(&admitted).optimize().build();
        let batch = filter_record_batch(&frame.batch, &admitted).ok()?;
        let times = frame
            .times
            .as_ref()
            .and_then(|t| predicate.filter(t.as_ref()).ok())
            .filter(|t| t.as_any().downcast_ref::<Int64Array>().is_some());
        let envelope = envelope.map(|e| e.filter(&predicate));
        Some((
            Frame {
                groups: None,
                batch,
                key: frame.key,
                acks,
                times,
            },
            envelope,
        ))
    }
}
