//! Client producers and the admission of their batches into CLIENT PRODUCER ingestors (spec:
//! Client Ingestors — "Submitted Batches", "Outcomes", "Producers").
//!
//! A submitted batch is charged to its producer's credit, validated whole (canonical Arrow IPC
//! against the input schema) and queued on its ingestor. The ingestor's one ACK window
//! (SEQUENTIAL = 1, PARALLEL MAX n) is shared by every producer; queued batches take it in
//! arrival order whenever the ingestor is not blocked by a full relay. An admitted batch gets
//! one root in the shard's slab and exactly one terminal outcome: completed, rejected (a row was
//! negatively acknowledged), failed (ack_timeout) or unknown (its producer ended first).

use std::collections::{HashMap, VecDeque};

use arrow_array::RecordBatch;
use nervix_net::batch::{validate_batch, BatchLimits};
use nervix_net::session::credit::ProducerCredit;
use nervix_net::session::frame::{
    ExpectedField, FailureCause, Frame as SessionFrame, OpenRefusal, Outcome, ProducerEndReason,
    UnknownCause, MAX_SESSION_FRAME_BYTES,
};

use super::graph::{Instant, PayloadToken};
use super::{Outbound, ShardState};
use crate::runtime::frame::AckRun;
use crate::runtime::plan::AckWindow;
use crate::validate::route::Field;

/// Rounds of admit → pump → dispatch → answer one step may run before yielding.
pub const MAX_STEP_ROUNDS: usize = 64;
/// Batches one step admits at most; the rest wait for the next step, so one task poll never
/// holds the shard for a whole queue of batches (FLUSH IMMEDIATE deadlines wait behind it).
pub const MAX_ADMITS_PER_STEP: usize = 2;
/// The most batches one producer may ask to have outstanding.
pub const MAX_PRODUCER_CREDIT_BATCHES: u32 = 1_024;
/// The most bytes one producer may ask to have outstanding (256 MiB).
pub const MAX_PRODUCER_CREDIT_BYTES: u64 = 256 << 20;
/// Producers one shard serves at once.
pub const MAX_PRODUCERS_PER_SHARD: usize = 4_096;

/// One ingestor's admission window and queue.
pub struct Admission {
    pub window: AckWindow,
    pub queue: VecDeque<Queued>,
    pub admitted: u32,
    pub open: bool,
    pub admitted_batches_total: u64,
}

impl Admission {
    pub fn new(window: AckWindow) -> Admission {
        Admission {
            window,
            queue: VecDeque::new(),
            admitted: 0,
            open: true,
            admitted_batches_total: 0,
        }
    }
}

/// A validated batch waiting for the window.
pub struct Queued {
    pub producer: u64,
    pub batch_seq: u64,
    pub batch: RecordBatch,
    pub bytes: u64,
}

/// An admitted batch awaiting its acknowledgement.
pub struct Admitted {
    pub domain: String,
    pub ingestor: usize,
    /// The last acknowledgement progress of its root (admission counts as the first).
    pub progress_physical_ns: u64,
    /// Answered already (ack_timeout): the later resolution is not reported again.
    pub answered: bool,
}

/// One attached producer.
pub struct ProducerState {
    pub domain: String,
    pub ingestor: usize,
    pub outbound: Outbound,
    pub credit: ProducerCredit,
    pub connection: u64,
}

/// The NSPL field declarations a producer must send for `fields`.
pub fn expected_fields(fields: &[Field]) -> Vec<ExpectedField> {
    fields
        .iter()
        .map(|f| ExpectedField {
            name: f.name.clone(),
            type_text: f.ty.data_type.to_string(),
            optional: f.ty.nullable,
            sensitive: f.ty.sensitive,
        })
        .collect()
}

fn send(outbound: &Outbound, frame: SessionFrame) {
    // A closed connection has nobody left to tell.
    outbound.try_send(frame);
}

impl ShardState {
    /// Opens a producer; answers ProducerOpened or OpenRefused.
    #[allow(clippy::too_many_arguments)]
    pub fn open_producer(
        &mut self,
        connection: u64,
        outbound: &Outbound,
        request_id: u64,
        domain: &str,
        ingestor: &str,
        fields: &[ExpectedField],
        credit_batches: u32,
        credit_bytes: u64,
    ) {
        let refuse = |reason| send(outbound, SessionFrame::OpenRefused { request_id, reason });
        let Some(started) = self.known.get(domain).copied() else {
            return refuse(OpenRefusal::DomainNotFound);
        };
        let Some(run) = self.runs.get(domain).filter(|_| started) else {
            return refuse(OpenRefusal::DomainStopped);
        };
        let Some(index) = run.graph.plan.ingestor(ingestor) else {
            let is_other_node = run.graph.plan.processors.iter().any(|p| p.name == ingestor);
            return refuse(if is_other_node {
                OpenRefusal::NotClientIngestor
            } else {
                OpenRefusal::IngestorNotFound
            });
        };
        let plan = &run.graph.plan.ingestors[index];
        if expected_fields(&plan.fields) != fields {
            return refuse(OpenRefusal::FieldsDiffer);
        }
        if credit_batches == 0
            || credit_batches > MAX_PRODUCER_CREDIT_BATCHES
            || credit_bytes == 0
            || credit_bytes > MAX_PRODUCER_CREDIT_BYTES
        {
            return refuse(OpenRefusal::CreditTooLarge);
        }
        if self.producers.len() >= MAX_PRODUCERS_PER_SHARD {
            return refuse(OpenRefusal::NoRoom);
        }
        let window = plan.window;
        let contract_id = plan.contract_id;
        let generation = run.generation;
        let admission_open = run.admission[index].open;
        let producer_id = self.next_id();
        self.producers.insert(
            producer_id,
            ProducerState {
                domain: domain.to_string(),
                ingestor: index,
                outbound: outbound.clone(),
                credit: ProducerCredit::new(credit_batches, credit_bytes),
                connection,
            },
        );
        send(
            outbound,
            SessionFrame::ProducerOpened {
                request_id,
                producer_id,
                start_generation: generation,
                contract_id,
                granted_batches: credit_batches,
                granted_bytes: credit_bytes,
                admission_open,
                retry_backoff_ms: window.retry_backoff_ms,
                retry_max_ms: window.retry_max_ms,
            },
        );
    }

    /// Answers one batch of `producer` (crate-internal entry for holds and swaps).
    pub(super) fn answer_outcome(&mut self, producer: u64, batch_seq: u64, outcome: Outcome) {
        self.answer(producer, batch_seq, outcome);
    }

    fn answer(&mut self, producer: u64, batch_seq: u64, outcome: Outcome) {
        let Some(state) = self.producers.get_mut(&producer) else {
            return;
        };
        let _ = state.credit.on_outcome(batch_seq);
        match &outcome {
            Outcome::Completed => self.counters.batches_completed += 1,
            Outcome::Rejected => self.counters.batches_rejected += 1,
            Outcome::Failed(_) | Outcome::Unknown(_) => self.counters.batches_failed += 1,
            Outcome::Invalid { .. } => self.counters.batches_invalid += 1,
            Outcome::Busy | Outcome::Suspended => self.counters.batches_busy += 1,
            _ => {}
        }
        send(
            &state.outbound,
            SessionFrame::BatchOutcome {
                producer_id: producer,
                batch_seq,
                outcome,
            },
        );
    }

    fn end_producer(&mut self, producer: u64, reason: ProducerEndReason) {
        let Some(state) = self.producers.get_mut(&producer) else {
            return;
        };
        state.credit.end();
        send(
            &state.outbound,
            SessionFrame::ProducerEnded {
                producer_id: producer,
                reason,
            },
        );
    }

    /// Charges a submission to its producer's credit; on refusal answers (and ends the producer
    /// when the rules say so) and returns None, else the producer's domain and ingestor.
    fn charge(&mut self, producer: u64, batch_seq: u64, bytes: u64) -> Option<(String, usize)> {
        let state = self.producers.get_mut(&producer)?;
        if let Err(error) = state.credit.on_submit(batch_seq, bytes) {
            let action = error.action();
            let outbound = state.outbound.clone();
            if let Some(outcome) = action.answer {
                send(
                    &outbound,
                    SessionFrame::BatchOutcome {
                        producer_id: producer,
                        batch_seq,
                        outcome,
                    },
                );
            }
            if let Some(reason) = action.end_producer {
                self.end_producer(producer, reason);
            }
            return None;
        }
        Some((state.domain.clone(), state.ingestor))
    }

    /// One submitted batch: credit, validation, then the ingestor's queue.
    pub fn submit(&mut self, producer: u64, batch_seq: u64, ipc: &[u8]) {
        let Some((domain, ingestor)) = self.charge(producer, batch_seq, ipc.len() as u64) else {
            return;
        };
        let granted = self
            .producers
            .get(&producer)
            .map_or(0, |p| p.credit.granted_bytes());
        let max_bytes = (granted as usize).min(MAX_SESSION_FRAME_BYTES);
        let Some(run) = self.runs.get(&domain) else {
            return self.answer(producer, batch_seq, Outcome::ProducerEnded);
        };
        let schema = run.graph.plan.ingestors[ingestor].schema.clone();
        let batch = match validate_batch(ipc, &schema, BatchLimits::new(max_bytes)) {
            Ok(batch) => batch,
            Err(defect) => return self.answer(producer, batch_seq, Outcome::invalid(&defect)),
        };
        self.enqueue(producer, batch_seq, batch, ipc.len() as u64);
    }

    /// One batch from an in-process producer: credit, then the schema must be the input
    /// schema exactly (the batch is already decoded, so there is nothing else to validate).
    pub fn submit_in_process(&mut self, producer: u64, batch_seq: u64, batch: RecordBatch) {
        let bytes = crate::runtime::logical_bytes::logical_bytes(&batch);
        let Some((domain, ingestor)) = self.charge(producer, batch_seq, bytes) else {
            return;
        };
        let Some(run) = self.runs.get(&domain) else {
            return self.answer(producer, batch_seq, Outcome::ProducerEnded);
        };
        let schema = &run.graph.plan.ingestors[ingestor].schema;
        if batch.schema().fields() != schema.fields()
            || batch.num_rows() > nervix_net::batch::MAX_BATCH_ROWS
        {
            let defect = nervix_net::batch::BatchDefect::SchemaMismatch(
                "the batch's schema is not the ingestor's input schema".to_string(),
            );
            return self.answer(producer, batch_seq, Outcome::invalid(&defect));
        }
        self.enqueue(producer, batch_seq, batch, bytes);
    }

    fn enqueue(&mut self, producer: u64, batch_seq: u64, batch: RecordBatch, bytes: u64) {
        let Some(state) = self.producers.get(&producer) else {
            return;
        };
        let (domain, ingestor) = (state.domain.clone(), state.ingestor);
        let Some(run) = self.runs.get_mut(&domain) else {
            return self.answer(producer, batch_seq, Outcome::ProducerEnded);
        };
        let admission = &mut run.admission[ingestor];
        if !admission.open {
            return self.answer(producer, batch_seq, Outcome::Suspended);
        }
        admission.queue.push_back(Queued {
            producer,
            batch_seq,
            batch,
            bytes,
        });
        self.step();
    }

    /// Admits queued batches while windows have room and ingestors are not blocked.
    /// Admits at most `budget` batches; returns whether any moved and how many were admitted.
    pub(super) fn admit(&mut self, at: Instant, budget: usize) -> (bool, usize) {
        let mut moved = false;
        let mut admitted_now = 0usize;
        let mut answers: Vec<(u64, u64, Outcome)> = Vec::new();
        for (domain, run) in self.runs.iter_mut() {
            for (index, admission) in run.admission.iter_mut().enumerate() {
                while admission.admitted < admission.window.max_outstanding
                    && run.graph.ingestor_ready(index)
                    && admitted_now < budget
                {
                    let Some(queued) = admission.queue.pop_front() else {
                        break;
                    };
                    moved = true;
                    let token = PayloadToken {
                        producer: queued.producer,
                        batch_seq: queued.batch_seq,
                    };
                    let Ok(root) = self.slab.open(token) else {
                        answers.push((queued.producer, queued.batch_seq, Outcome::Busy));
                        continue;
                    };
                    let rows = queued.batch.num_rows() as u64;
                    let _ = self.slab.add_pending(root, rows);
                    let _ = self.slab.close_intake(root);
                    admission.admitted += 1;
                    admission.admitted_batches_total += 1;
                    admitted_now += 1;
                    self.counters.rows_admitted += rows;
                    self.counters.bytes_admitted += queued.bytes;
                    self.admitted.insert(
                        token,
                        Admitted {
                            domain: domain.clone(),
                            ingestor: index,
                            progress_physical_ns: at.now.physical_ns,
                            answered: false,
                        },
                    );
                    if rows > 0 {
                        run.graph.ingest(
                            index,
                            &queued.batch,
                            vec![AckRun {
                                root,
                                rows: rows as u32,
                            }],
                            // Client producers submit Arrow batches: no transport envelope.
                            None,
                            at,
                            super::cx!(self),
                        );
                    }
                }
            }
        }
        for (producer, seq, outcome) in answers {
            self.answer(producer, seq, outcome);
        }
        (moved, admitted_now)
    }

    /// Whether batches wait in a queue while their ingestor's window has room.
    pub(super) fn admissible_waiting(&self) -> bool {
        self.runs.values().any(|run| {
            run.admission.iter().enumerate().any(|(index, a)| {
                !a.queue.is_empty()
                    && a.admitted < a.window.max_outstanding
                    && run.graph.ingestor_ready(index)
            })
        })
    }

    /// A payload root resolved: its window slot frees and its producer hears the outcome.
    pub(super) fn resolve_payload(
        &mut self,
        token: PayloadToken,
        outcome: nervix_shards::ack::Outcome,
    ) {
        let Some(admitted) = self.admitted.remove(&token) else {
            return;
        };
        if !admitted.answered {
            if let Some(run) = self.runs.get_mut(&admitted.domain) {
                let admission = &mut run.admission[admitted.ingestor];
                admission.admitted = admission.admitted.saturating_sub(1);
            }
            let outcome = match outcome {
                nervix_shards::ack::Outcome::Acked => Outcome::Completed,
                nervix_shards::ack::Outcome::Nacked => Outcome::Rejected,
            };
            self.answer(token.producer, token.batch_seq, outcome);
        }
    }

    /// Stamps the admitted batches whose roots made progress this step.
    pub(super) fn note_progress(&mut self, now_ns: u64) {
        for root in std::mem::take(&mut self.progressed) {
            if let Some(token) = self.slab.token(root) {
                if let Some(admitted) = self.admitted.get_mut(&token) {
                    admitted.progress_physical_ns = now_ns;
                }
            }
        }
    }

    /// Answers `failed: ack_timeout` for admitted batches that made no progress for ACK TIMEOUT;
    /// their work is not cancelled, and their window slot frees so the ingestor goes on.
    pub(super) fn time_out(&mut self, at: Instant) {
        let mut timed_out = Vec::new();
        for (token, admitted) in self.admitted.iter_mut() {
            if admitted.answered {
                continue;
            }
            let Some(run) = self.runs.get_mut(&admitted.domain) else {
                continue;
            };
            let admission = &mut run.admission[admitted.ingestor];
            let timeout = admission.window.ack_timeout_ns;
            if at
                .now
                .physical_ns
                .saturating_sub(admitted.progress_physical_ns)
                >= timeout
            {
                admitted.answered = true;
                admission.admitted = admission.admitted.saturating_sub(1);
                timed_out.push(*token);
            }
        }
        for token in timed_out {
            self.watches.given_up(&mut self.outbox, token);
            self.answer(
                token.producer,
                token.batch_seq,
                Outcome::Failed(FailureCause::AckTimeout),
            );
        }
    }

    /// Producer `id` closed or its connection went away: queued batches are refused as
    /// producer ended (if anyone listens) and admitted ones become unknown.
    pub fn close_producer(&mut self, producer: u64, reason: Option<ProducerEndReason>) {
        let Some(state) = self.producers.get(&producer) else {
            return;
        };
        let domain = state.domain.clone();
        let ingestor = state.ingestor;
        let mut refused = Vec::new();
        if let Some(run) = self.runs.get_mut(&domain) {
            run.admission[ingestor].queue.retain(|q| {
                if q.producer == producer {
                    refused.push(q.batch_seq);
                    false
                } else {
                    true
                }
            });
        }
        for seq in refused {
            self.answer(producer, seq, Outcome::ProducerEnded);
        }
        let unresolved: Vec<PayloadToken> = self
            .admitted
            .iter_mut()
            .filter(|(t, a)| t.producer == producer && !a.answered)
            .map(|(t, a)| {
                a.answered = true;
                *t
            })
            .collect();
        for token in unresolved {
            if let Some(admitted) = self.admitted.get(&token) {
                if let Some(run) = self.runs.get_mut(&admitted.domain) {
                    let admission = &mut run.admission[admitted.ingestor];
                    admission.admitted = admission.admitted.saturating_sub(1);
                }
            }
            self.answer(
                token.producer,
                token.batch_seq,
                Outcome::Unknown(UnknownCause::ProducerEnded),
            );
        }
        if let Some(reason) = reason {
            self.end_producer(producer, reason);
        }
        self.producers.remove(&producer);
    }

    /// Ends every producer and consumer attached to `domain`.
    pub(super) fn end_attachments(&mut self, domain: &str, reason: ProducerEndReason) {
        let producers: Vec<u64> = self
            .producers
            .iter()
            .filter(|(_, p)| p.domain == domain)
            .map(|(id, _)| *id)
            .collect();
        for producer in producers {
            self.close_producer(producer, Some(reason));
        }
        self.end_consumers(domain);
    }

    /// Admitted batches per producer's ingestor, for DESCRIBE figures.
    pub fn producer_counts(&self, domain: &str, ingestor: usize) -> (usize, u32, u64) {
        let mut producers = 0;
        let mut batches = 0;
        let mut bytes = 0;
        for state in self.producers.values() {
            if state.domain == domain && state.ingestor == ingestor {
                producers += 1;
                batches += state.credit.outstanding_batches();
                bytes += state.credit.outstanding_bytes();
            }
        }
        (producers, batches, bytes)
    }
}

/// Admitted batches by payload.
pub type AdmittedMap = HashMap<PayloadToken, Admitted>;
