//! Replacing a running domain's graph after an ALTER (or any model change) without losing a
//! row (DESIGN §6 "ALTER"; spec: client producers stay attached while their endpoint contract
//! holds).
//!
//! The swap is an entity pause of the whole domain: [`ShardState::begin_hold`] suspends
//! admission (producers hear `AdmissionChanged { open: false }`; batches still queued are
//! refused `suspended`, which the client resends after the hold) and force-flushes every route
//! buffer and reorder buffer; the caller waits until [`ShardState::hold_drained`] — nothing
//! held in relays, queues or sinks and no admitted batch unresolved — or the hold's bound
//! passes; then [`ShardState::swap`] installs the new graph. A producer whose ingestor keeps
//! its contract (same contract identity) stays attached and hears admission reopen; others
//! end with `contract_changed`. A consumer stays attached when its CLIENT CONSUMER emitter still exists.
//! Rows still held when the bound passes stay unresolved and their batches answer
//! `failed: ack_timeout` on their ingestor's ACK TIMEOUT, as any stuck batch does.
//!
//! A dynamic change (`runtime::change`) skips all of that: [`ShardState::adopt`] hands the new
//! plan to the running graph (`graph::adopt`), and admission never closes.

use std::sync::Arc;

use nervix_net::session::frame::{
    ConsumerEndReason, Frame as SessionFrame, Outcome, ProducerEndReason,
};

use super::ShardState;
use crate::runtime::plan::{DomainPlan, SinkPlan};

/// The longest a model change holds a domain's admission while its rows drain.
pub const MAX_HOLD_MS: u64 = 10_000;

impl ShardState {
    /// Suspends admission of every ingestor of `domain` and flushes its buffers.
    pub fn begin_hold(&mut self, domain: &str) {
        // Rows endpoints already accepted drain with the rest; SUSPEND pollers stop polling.
        self.close_all_groups(domain);
        self.close_kafka_groups(domain);
        self.suspend_polls(domain, true);
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let mut suspended = Vec::new();
        for admission in &mut run.admission {
            admission.open = false;
            suspended.extend(admission.queue.drain(..).map(|q| (q.producer, q.batch_seq)));
        }
        let at = self.instant();
        if let Some(run) = self.runs.get_mut(domain) {
            run.graph.flush_for_pause(at, super::cx!(self));
        }
        for (producer, seq) in suspended {
            self.answer_outcome(producer, seq, Outcome::Suspended);
        }
        for (id, producer) in &self.producers {
            if producer.domain == domain {
                producer.outbound.try_send(SessionFrame::AdmissionChanged {
                    producer_id: *id,
                    open: false,
                });
            }
        }
        self.step();
    }

    /// Whether `domain` holds nothing any more: every row delivered and every admitted batch
    /// answered.
    pub fn hold_drained(&self, domain: &str) -> bool {
        let Some(run) = self.runs.get(domain) else {
            return true;
        };
        run.graph.held_frames() == 0
            && run.graph.buffered_route_branches() == 0
            && run.graph.held_reorder_rows() == 0
            && self.kafka_domain_settled(domain)
            && !self
                .admitted
                .values()
                .any(|a| a.domain == domain && !a.answered)
    }

    /// Applies a dynamic change hot: the running graph of `plan`'s domain takes it in place.
    /// Hands the plan back when the domain does not run here or the graph's shape differs.
    pub fn adopt(&mut self, plan: Arc<DomainPlan>) -> Result<(), Arc<DomainPlan>> {
        let at = self.instant();
        let Some(run) = self.runs.get_mut(&plan.name) else {
            return Err(plan);
        };
        run.graph.adopt(plan, at, super::cx!(self))?;
        self.step();
        Ok(())
    }

    /// Installs `plan` in place of the running graph, keeping attachments whose contract holds.
    pub fn swap(&mut self, plan: Arc<DomainPlan>) {
        let name = plan.name.clone();
        let Some(old) = self.runs.get(&name).map(|run| run.graph.plan.clone()) else {
            self.deploy(plan);
            return;
        };
        // Who stays: producers by ingestor name and contract, consumers by emitter name.
        let mut keep_producers = Vec::new();
        let mut end_producers = Vec::new();
        for (id, producer) in &self.producers {
            if producer.domain != name {
                continue;
            }
            let old_ingestor = &old.ingestors[producer.ingestor];
            match plan.ingestor(&old_ingestor.name) {
                Some(index) if plan.ingestors[index].contract_id == old_ingestor.contract_id => {
                    keep_producers.push((*id, index))
                }
                _ => end_producers.push(*id),
            }
        }
        let mut keep_consumers = Vec::new();
        let mut end_consumers = Vec::new();
        for (id, consumer) in &self.consumers {
            if consumer.domain != name {
                continue;
            }
            let old_emitter = &old.emitters[consumer.emitter];
            match plan.emitter(&old_emitter.name) {
                Some(index) if matches!(plan.emitters[index].sink, SinkPlan::ClientConsumer) => {
                    keep_consumers.push((*id, index))
                }
                _ => end_consumers.push(*id),
            }
        }
        for id in end_producers {
            self.close_producer(id, Some(ProducerEndReason::ContractChanged));
        }
        for id in end_consumers {
            self.close_consumer(id, Some(ConsumerEndReason::EmitterStopped));
        }
        // Deploying replaces the run; keep the survivors out of its undeploy.
        let producers: Vec<_> = keep_producers
            .iter()
            .filter_map(|(id, index)| self.producers.remove(id).map(|p| (*id, *index, p)))
            .collect();
        let consumers: Vec<_> = keep_consumers
            .iter()
            .filter_map(|(id, index)| self.consumers.remove(id).map(|c| (*id, *index, c)))
            .collect();
        // Bodies endpoints retained during the hold drain into the new graph, in order.
        let retained: Vec<_> = self
            .runs
            .get_mut(&name)
            .map(|run| {
                run.intakes
                    .iter_mut()
                    .zip(&old.ingestors)
                    .filter_map(|(intake, ingestor)| {
                        let (bodies, bytes) = intake.as_mut()?.take_retained();
                        (!bodies.is_empty()).then(|| (ingestor.name.clone(), bodies, bytes))
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.deploy(plan);
        if let Some(run) = self.runs.get_mut(&name) {
            for (ingestor, bodies, bytes) in retained {
                let index = run.graph.plan.ingestor(&ingestor);
                match index
                    .and_then(|i| run.intakes.get_mut(i))
                    .and_then(Option::as_mut)
                {
                    Some(intake) => intake.restore_retained(bodies, bytes),
                    None => tracing::warn!(
                        "domain '{name}': {} bodies retained for ingestor '{ingestor}' were \
                         dropped: the new model has no such endpoint ingestor",
                        bodies.len()
                    ),
                }
            }
        }
        for (id, index, mut producer) in producers {
            producer.ingestor = index;
            producer.outbound.try_send(SessionFrame::AdmissionChanged {
                producer_id: id,
                open: true,
            });
            self.producers.insert(id, producer);
        }
        for (id, index, mut consumer) in consumers {
            consumer.emitter = index;
            consumer.in_flight.clear();
            self.consumers.insert(id, consumer);
        }
        self.step();
    }
}
