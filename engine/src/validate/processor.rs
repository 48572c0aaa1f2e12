//! Validation of processors (spec: Processors): junctions, deduplicators, reorderers, window
//! processors, inferencers, WASM processors, correlators, reingestors and generators.
//!
//! This module owns the node-level rules and decides, per kind, what the shared route
//! validator ([`crate::validate::route`]) lets routes read and which branch rule they follow;
//! the route-level rules (INHERIT, SET, WHERE, required fields, branch construction, error
//! relays) are the route validator's. A definition is checked in a fixed order, so the first
//! refusal is deterministic: node shape, node branch, inputs and their branch contract,
//! per-input WHERE and FILTER WHERE, materialized state, kind clauses, routes.
//!
//! * **Inputs** ([`inputs`]): every FROM relay exists and is listed once; the relays of one
//!   list share one declared schema (by name) and one exact branching.
//! * **Node contract**: `BRANCHED BY b` (b exists) or `UNBRANCHED`; every input relay, every
//!   materialized-state relay and (through [`BranchRule::Contract`]) every output relay matches
//!   it exactly. Reingestors have no contract: they run in their inputs' branch, and each route
//!   constructs its own ([`BranchRule::Construct`]). A generator's source relay is WITH
//!   MATERIALIZED STATE and matches the contract.
//! * **Node-level expressions** stand at the shared node-filter position: they read the input
//!   row (`input.x`, `message.x`, bare `x`; a correlator's `left.` / `right.` instead) and
//!   `branch.<field>`, never state or output. Per-input WHERE and FILTER WHERE are BOOL (null
//!   does not pass), DEDUPLICATE ON keys have any type, BY keys are orderable, INPUTS values
//!   match their tensor, CORRELATE WHERE is BOOL over both sides. No header functions: relay
//!   records carry no transport headers.
//! * **Materialized state**: `USING MATERIALIZED STATE` goes through the shared
//!   [`validate_state_dependencies`] (exists, WITH MATERIALIZED STATE, exact branch of the node
//!   — a reingestor's incoming branch —, named once, DEFAULT constant, typed and complete); a
//!   generator's own relay is checked in [`state`]. Routes read `relay_state.<relay>.<field>`
//!   with the schema's own nullability: every policy binds a whole record before routes run —
//!   real state, the DEFAULT record (which initializes every required field), or no run at
//!   all (REQUIRED SKIP drops the input, REQUIRED WAIT holds it; a generator runs only from
//!   existing state) — so a required field is never null there.
//! * **Kind clauses** ([`kinds`]): MAX TIME / EACH / MAX FUEL / MAX MEMORY positive; window
//!   WIDTH and STEP in one unit with STEP ≤ WIDTH and bounded sketches; inferencer and WASM
//!   resources with their version and file; tensor maps.
//! * **Routes** ([`routes`]). What each kind's routes read:
//!   - junction, deduplicator, reorderer, reingestor: the input (`input.`, `message.`, bare),
//!     state, branch;
//!   - window processor: the same with `window = true` (aggregates in SET, `input.` only inside
//!     aggregate arguments);
//!   - inferencer: the model outputs as immutable bare values (one-element tensors as their
//!     element type, others as `ARRAY<T, dims…>`), state, branch — never the input;
//!   - WASM processor: guest values, state, branch — never the input, since guest output is not
//!     tied to one input row (timeouts and quiesce flushes emit without one). The guest's output
//!     schema lives inside the module and is known only once the module is inspected (a later
//!     issue); until then a route may read a guest value named like a field of its target
//!     relay, typed as that field, and the module's real output is not checked here;
//!   - correlator: `left.` and `right.`, state, branch — no input, no bare or `message.` reads;
//!   - generator: `relay_state.<its relay>.` and the branch — no input.

mod inputs;
mod kinds;
mod model;
mod routes;
mod state;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use nervix_nspl::ast::processor::{CreateProcessor, ProcessorDef, RelayFeed};
use nervix_nspl::ast::{Branching, MessageErrorPolicy, ObjectKind, RouteBranching};

use self::inputs::{check_contract, check_input_list};
use self::model::{branch_fields, NodeReads};
use self::routes::{check_routes, Generated, RouteScope};
use self::state::check_generator_source;
use crate::catalog::{kind_name, CatalogError, DomainScope, EntityKey};
use crate::validate::route::{validate_state_dependencies, BranchRule, Field};

/// Checks one processor against the candidate domain in `scope`.
pub fn validate(scope: &DomainScope<'_>, definition: &CreateProcessor) -> Result<(), CatalogError> {
    let kind = definition.def.kind();
    let node = EntityKey::new(kind, definition.name.name.as_str()).to_string();
    let headers = model::headers_refusal(&format!("{}s", kind_name(kind)));
    let check = Check {
        scope,
        definition,
        kind,
        node: &node,
        headers: &headers,
    };
    check.shape()?;
    match &definition.def {
        ProcessorDef::Correlator { .. } => check.correlator(),
        ProcessorDef::Generator { .. } => check.generator(),
        ProcessorDef::Junction { feed }
        | ProcessorDef::Deduplicator { feed, .. }
        | ProcessorDef::Reorderer { feed, .. }
        | ProcessorDef::Window { feed, .. }
        | ProcessorDef::Inferencer { feed, .. }
        | ProcessorDef::Wasm { feed, .. }
        | ProcessorDef::Reingestor { feed } => check.relay_fed(feed),
    }
}
/// The domain entities a processor names: input, state and generator source relays, its
/// branch, route targets, route branches and error relays, each once.
pub fn references(definition: &CreateProcessor) -> Vec<EntityKey> {
    let mut keys = BTreeSet::new();
    let mut relay = |name: &str| keys.insert(EntityKey::new(ObjectKind::Relay, name));
    match &definition.def {
        ProcessorDef::Junction { feed }
        | ProcessorDef::Deduplicator { feed, .. }
        | ProcessorDef::Reorderer { feed, .. }
        | ProcessorDef::Window { feed, .. }
        | ProcessorDef::Inferencer { feed, .. }
        | ProcessorDef::Wasm { feed, .. }
        | ProcessorDef::Reingestor { feed } => {
            for input in &feed.inputs {
                relay(&input.relay.name);
            }
        }
        ProcessorDef::Correlator { left, right, .. } => {
            for input in left.inputs.iter().chain(&right.inputs) {
                relay(&input.relay.name);
            }
        }
        ProcessorDef::Generator { source, .. } => {
            relay(&source.name);
        }
    }
    for dependency in &definition.state {
        relay(&dependency.relay.name);
    }
    for route in &definition.routes {
        relay(&route.target.name);
        if let MessageErrorPolicy::SendTo { relay: errors, .. } = &route.on_error {
            relay(&errors.name);
        }
    }
    let mut branches: Vec<&str> = Vec::new();
    if let Some(Branching::BranchedBy(branch)) = &definition.branching {
        branches.push(&branch.name);
    }
    for route in &definition.routes {
        if let Some(RouteBranching::BranchedBy { branch, .. }) = &route.branching {
            branches.push(&branch.name);
        }
    }
    for branch in branches {
        keys.insert(EntityKey::new(ObjectKind::Branch, branch));
    }
    keys.into_iter().collect()
}

/// The cluster-wide entities a processor names: the resource of an inferencer's model or a
/// WASM processor's module.
pub fn global_references(definition: &CreateProcessor) -> Vec<EntityKey> {
    match &definition.def {
        ProcessorDef::Inferencer { model, .. } => {
            vec![EntityKey::new(
                ObjectKind::Resource,
                model.resource.name.as_str(),
            )]
        }
        ProcessorDef::Wasm { module, .. } => {
            vec![EntityKey::new(
                ObjectKind::Resource,
                module.resource.name.as_str(),
            )]
        }
        _ => Vec::new(),
    }
}

/// One validation run over one definition.
struct Check<'s, 'c> {
    scope: &'s DomainScope<'c>,
    definition: &'s CreateProcessor,
    kind: ObjectKind,
    /// `junction 'route_notifications'`.
    node: &'s str,
    /// The refusal of header functions, which relay records cannot serve.
    headers: &'s str,
}

impl<'s, 'c> Check<'s, 'c> {
    /// Rules the parser enforces, re-checked for definitions ALTER built.
    fn shape(&self) -> Result<(), CatalogError> {
        let name = &self.definition.name;
        let generator = self.kind == ObjectKind::Generator;
        let refusal = match (self.kind, &self.definition.branching) {
            (ObjectKind::Reingestor, Some(_)) => Some(
                "reingestors have no node-wide branching: each route declares BRANCHED BY \
                 <branch> or UNBRANCHED"
                    .to_string(),
            ),
            (ObjectKind::Reingestor, None) => None,
            (_, None) => Some(format!(
                "{} needs BRANCHED BY <branch> or UNBRANCHED before its routes",
                self.node
            )),
            _ if generator && self.definition.attachment.is_some() => Some(
                "generators have no inputs to acknowledge and take no ATTACHED or DETACHED"
                    .to_string(),
            ),
            _ if generator && !self.definition.state.is_empty() => Some(
                "a generator reads only the one materialized relay it names before EACH"
                    .to_string(),
            ),
            _ => None,
        };
        match refusal {
            Some(message) => Err(CatalogError::new(name.span, message)),
            None => Ok(()),
        }
    }

    /// The node's contract, present for every kind but reingestors (checked by `shape`).
    fn contract(&self) -> &'s Branching {
        self.definition
            .branching
            .as_ref()
            .unwrap_or(&Branching::Unbranched)
    }

    /// Kinds that read `FROM <relay>, …`.
    fn relay_fed(&self, feed: &RelayFeed) -> Result<(), CatalogError> {
        let reingestor = self.kind == ObjectKind::Reingestor;
        let contract_fields = if reingestor {
            None
        } else {
            branch_fields(self.scope, self.contract())?
        };
        let inputs = check_input_list(self.scope, self.node, "", &feed.inputs)?;
        // The branch the node runs in: its contract, or a reingestor's incoming branch.
        let (branching, branch, state_node) = if reingestor {
            let incoming = inputs.first().branching();
            let state_node = format!("{} (which runs in its inputs' branch)", self.node);
            (incoming, branch_fields(self.scope, incoming)?, state_node)
        } else {
            check_contract(self.node, self.contract(), &inputs)?;
            (self.contract(), contract_fields, self.node.to_string())
        };
        let input_fields: &[Field] = &inputs.first().fields;
        let reads = NodeReads::new(
            self.node,
            self.headers,
            Some(input_fields),
            (None, None),
            branch.as_deref(),
        );
        for input in &feed.inputs {
            if let Some(filter) = &input.filter {
                reads.check_predicate(filter, &format!("FROM {} WHERE", input.relay.name))?;
            }
        }
        if let Some(filter) = &feed.filter {
            reads.check_predicate(filter, "FILTER WHERE")?;
        }
        let relay_state = validate_state_dependencies(
            self.scope,
            &state_node,
            branching,
            &self.definition.state,
        )?;
        let generated = self.kind_clauses(&reads, branch.is_some())?;
        let (input, generated) = match self.kind {
            ObjectKind::Inferencer => (None, Generated::Fixed(&generated)),
            ObjectKind::WasmProcessor => (None, Generated::TargetFields),
            _ => (Some(input_fields), Generated::None),
        };
        let rule = if reingestor {
            BranchRule::Construct {
                incoming: Some(branching),
            }
        } else {
            BranchRule::Contract(branching)
        };
        let route_reads = RouteScope {
            node: self.node,
            kind: self.kind,
            input,
            left: None,
            right: None,
            relay_state: &relay_state,
            branch: branch.as_deref(),
            generated,
            headers_refusal: self.headers,
            window: self.kind == ObjectKind::WindowProcessor,
            rule,
        };
        check_routes(self.scope, &self.definition.routes, &route_reads)
    }

    /// The clauses of relay-fed kinds; returns the values the kind generates for its routes.
    fn kind_clauses(
        &self,
        reads: &NodeReads<'_>,
        branched: bool,
    ) -> Result<Vec<Field>, CatalogError> {
        let name = &self.definition.name;
        match &self.definition.def {
            ProcessorDef::Deduplicator { on, max_time, .. } => {
                kinds::check_deduplicate_on(on, reads)?;
                kinds::check_max_time(*max_time, name.span)?;
            }
            ProcessorDef::Reorderer { by, max_time, .. } => {
                kinds::check_order_by(by, reads)?;
                kinds::check_max_time(*max_time, name.span)?;
            }
            ProcessorDef::Window {
                width,
                step,
                max_state_size,
                ..
            } => {
                let branch = match (self.contract(), branched) {
                    (Branching::BranchedBy(branch), true) => {
                        Some((branch, self.scope.branch(branch)?))
                    }
                    _ => None,
                };
                let shape = kinds::WindowShape {
                    node: self.node,
                    name,
                    width: *width,
                    step: *step,
                    max_state_size: *max_state_size,
                    branch,
                };
                kinds::check_window(&shape, &self.definition.routes)?;
            }
            ProcessorDef::Inferencer {
                model,
                inputs,
                outputs,
                ..
            } => {
                kinds::check_resource_file(self.scope, model)?;
                kinds::check_tensor_inputs(inputs, reads)?;
                return kinds::model_outputs(outputs, name.span);
            }
            ProcessorDef::Wasm {
                module,
                max_fuel,
                max_memory,
                ..
            } => {
                kinds::check_resource_file(self.scope, module)?;
                kinds::check_positive(*max_fuel, "MAX FUEL", name.span)?;
                kinds::check_positive(max_memory.bytes, "MAX MEMORY", name.span)?;
            }
            _ => {}
        }
        Ok(Vec::new())
    }

    fn correlator(&self) -> Result<(), CatalogError> {
        let ProcessorDef::Correlator {
            left,
            right,
            condition,
            max_time,
            ..
        } = &self.definition.def
        else {
            unreachable!("correlator() is called for correlators only");
        };
        let contract = self.contract();
        let branch = branch_fields(self.scope, contract)?;
        let lefts = check_input_list(self.scope, self.node, "LEFT ", &left.inputs)?;
        let rights = check_input_list(self.scope, self.node, "RIGHT ", &right.inputs)?;
        check_contract(self.node, contract, &lefts)?;
        check_contract(self.node, contract, &rights)?;
        let left_fields: &[Field] = &lefts.first().fields;
        let right_fields: &[Field] = &rights.first().fields;
        let side_reads =
            |sides| NodeReads::new(self.node, self.headers, None, sides, branch.as_deref());
        for (side, inputs, reads) in [
            ("LEFT", &left.inputs, side_reads((Some(left_fields), None))),
            (
                "RIGHT",
                &right.inputs,
                side_reads((None, Some(right_fields))),
            ),
        ] {
            for input in inputs {
                if let Some(filter) = &input.filter {
                    reads.check_predicate(
                        filter,
                        &format!("{side} FROM {} WHERE", input.relay.name),
                    )?;
                }
            }
        }
        side_reads((Some(left_fields), Some(right_fields)))
            .check_predicate(condition, "CORRELATE WHERE")?;
        kinds::check_max_time(*max_time, self.definition.name.span)?;
        let relay_state =
            validate_state_dependencies(self.scope, self.node, contract, &self.definition.state)?;
        let reads = RouteScope {
            node: self.node,
            kind: self.kind,
            input: None,
            left: Some(left_fields),
            right: Some(right_fields),
            relay_state: &relay_state,
            branch: branch.as_deref(),
            generated: Generated::None,
            headers_refusal: self.headers,
            window: false,
            rule: BranchRule::Contract(contract),
        };
        check_routes(self.scope, &self.definition.routes, &reads)
    }

    fn generator(&self) -> Result<(), CatalogError> {
        let ProcessorDef::Generator { source, each } = &self.definition.def else {
            unreachable!("generator() is called for generators only");
        };
        let contract = self.contract();
        let branch = branch_fields(self.scope, contract)?;
        kinds::check_positive(each.nanos, "EACH", self.definition.name.span)?;
        let source_relay = check_generator_source(self.scope, self.node, contract, source)?;
        let relay_state = vec![(source.name.clone(), source_relay.fields)];
        let reads = RouteScope {
            node: self.node,
            kind: self.kind,
            input: None,
            left: None,
            right: None,
            relay_state: &relay_state,
            branch: branch.as_deref(),
            generated: Generated::None,
            headers_refusal: self.headers,
            window: false,
            rule: BranchRule::Contract(contract),
        };
        check_routes(self.scope, &self.definition.routes, &reads)
    }
}
