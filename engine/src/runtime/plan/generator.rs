//! Planning a GENERATOR (spec processors.md "Generator"): a processor without inputs whose
//! set-only routes run on a domain-clock cadence over the last row its materialized relay
//! holds for each branch.
//!
//! The routes compile with no input fields and one materialized dependency, the source relay,
//! so `relay_state.<relay>.<field>` reads resolve to evaluation source 4 exactly as they do
//! for a junction's `USING MATERIALIZED STATE` (see `route`); validation already refused
//! anything else a generator route could read. Nothing feeds the node, so it acknowledges
//! nothing (it runs DETACHED), and the schedule lives in its node work
//! ([`NodeWork::Generate`]), run by `shard::graph::generator`.

use nervix_nspl::ast::processor::CreateProcessor;
use nervix_nspl::ast::{Duration, Ident};
use nervix_nspl::ObjectKind;

use super::route::{self, relay_fields_of, StateLayout};
use super::{Builder, NodeWork, PlanError, ProcessorPlan, TypedIndex};
use crate::catalog::Entity;

impl<'d> Builder<'d> {
    /// Adds the generator `create` reading relay `source` `EACH` `each`.
    pub(super) fn generator(
        &mut self,
        entity: &'d Entity,
        create: &CreateProcessor,
        source: &Ident,
        each: &Duration,
    ) -> Result<(), PlanError> {
        let owner = entity.key.to_string();
        let typed = TypedIndex::new(entity);
        let relay = self.relay_id(&source.name, &owner)?;
        let layout = StateLayout {
            deps: vec![(source.name.clone(), relay_fields_of(self, relay, &owner)?)],
        };
        let incoming = create.branching.as_ref();
        let routes = create
            .routes
            .iter()
            .map(|written| route::compile(self, &typed, &[], written, incoming, &layout))
            .collect::<Result<Vec<_>, _>>()?;
        self.plan.processors.push(ProcessorPlan {
            name: create.name.name.clone(),
            kind: ObjectKind::Generator,
            inputs: Vec::new(),
            collect: None,
            state: Vec::new(),
            filter: None,
            routes,
            work: NodeWork::Generate {
                source: relay,
                each_ns: each.nanos,
            },
            branch_scope: None,
            detached: true,
        });
        Ok(())
    }
}
