//! A dynamic model change applied hot (`runtime::change`): the running graph takes the new
//! plan in place, keeping relays, route buffers, collectors, branch tables and processor
//! state (spec: "Existing input collectors, buffered route output, pending materialized-state
//! work, subscriptions, and branch-local processor state remain in place").
//!
//! Correct because the new plan has the same shape — relays, nodes, routes and their targets,
//! kinds of node work — which [`Graph::adopt`] checks before touching anything: every index
//! the running state holds (relay ids, route indexes, processor indexes) means the same thing
//! under both plans. Programs are read from the plan on every batch, so the next batch runs
//! the new filters, constructions and MAX TIMEs. Buffers and collections opened under the old
//! FLUSH / COLLECT FOR are evaluated against the new policies at once (the spec's
//! "convergence pass"), from the instant each opened.

use std::sync::Arc;

use super::flush_order::RouteFlush;
use super::{Graph, Instant, NodeRef};
use crate::runtime::plan::{DomainPlan, NodeWork, RoutePlan};
use crate::runtime::shard::mesh::Ctx;

/// Whether two route lists keep their count and targets.
fn same_routes(old: &[RoutePlan], new: &[RoutePlan]) -> bool {
    old.len() == new.len() && old.iter().zip(new).all(|(a, b)| a.target == b.target)
}

/// Whether `new` can replace `old` in a running graph without moving any state.
fn same_shape(old: &DomainPlan, new: &DomainPlan) -> bool {
    let relays = old.relays.len() == new.relays.len()
        && old.relays.iter().zip(&new.relays).all(|(a, b)| {
            a.name == b.name && a.schema == b.schema && a.capacity_frames == b.capacity_frames
        });
    let ingestors = old.ingestors.len() == new.ingestors.len()
        && old.ingestors.iter().zip(&new.ingestors).all(|(a, b)| {
            a.name == b.name && a.contract_id == b.contract_id && same_routes(&a.routes, &b.routes)
        });
    let emitters = old.emitters.len() == new.emitters.len()
        && old.emitters.iter().zip(&new.emitters).all(|(a, b)| {
            a.name == b.name
                && a.collect.is_some() == b.collect.is_some()
                && a.route.target == b.route.target
        });
    let processors = old.processors.len() == new.processors.len()
        && old.processors.iter().zip(&new.processors).all(|(a, b)| {
            a.name == b.name
                && a.kind == b.kind
                && a.detached == b.detached
                && a.collect.is_some() == b.collect.is_some()
                && a.inputs.len() == b.inputs.len()
                && a.inputs
                    .iter()
                    .zip(&b.inputs)
                    .all(|(x, y)| x.relay == y.relay)
                && a.state.len() == b.state.len()
                && same_routes(&a.routes, &b.routes)
                && std::mem::discriminant(&a.work) == std::mem::discriminant(&b.work)
                && !matches!(a.work, NodeWork::Correlate(_))
        });
    old.pace == new.pace && relays && ingestors && emitters && processors
}

impl Graph {
    /// Takes `plan` in place of the running one when it has the same shape; otherwise hands
    /// it back untouched (the caller pauses the domain instead).
    pub fn adopt(
        &mut self,
        plan: Arc<DomainPlan>,
        at: Instant,
        cx: &mut Ctx<'_>,
    ) -> Result<(), Arc<DomainPlan>> {
        if !same_shape(&self.plan, &plan) {
            return Err(plan);
        }
        self.plan = plan;
        let at = at.in_domain(&self.plan.pace);
        let plan = self.plan.clone();
        let collections = plan
            .processors
            .iter()
            .map(|p| p.collect)
            .enumerate()
            .map(|(i, c)| (NodeRef::Processor(i), c))
            .chain(
                plan.emitters
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (NodeRef::Emitter(i), e.collect)),
            );
        for (node, policy) in collections {
            let Some(policy) = policy else { continue };
            let mut released = Vec::new();
            if let Some(collector) = self.node_mut(node).collect.as_mut() {
                let adopted =
                    collector.set_policies(&[(Vec::new(), policy)], at.now, &mut released);
                debug_assert!(adopted, "same shape: the collection's relays are unchanged");
            }
            for (relay, frame) in released {
                self.work(&plan, node, relay, &frame, at, cx);
            }
        }
        self.flush_routes(RouteFlush::NewPolicies, at, cx);
        self.pump(at, cx);
        Ok(())
    }
}
