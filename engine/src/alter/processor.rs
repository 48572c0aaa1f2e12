//! Folding `ALTER <processor kind> <name> <op>, …` into the stored CREATE statement.
//!
//! Operations apply in written order to a copy of the stored definition, so each one sees the
//! effect of the ones before it, and input, materialized-dependency and route order is kept:
//!
//! * inputs — `ADD [LEFT|RIGHT] FROM` appends; `DROP … FROM` removes the input with its WHERE;
//!   `ALTER … FROM … SET WHERE | DROP WHERE` changes only that input's predicate;
//! * collection, node filter, attachment and node branching — `SET` replaces, `DROP` clears
//!   (dropping a clause that is absent is a no-op: the result is the same definition);
//! * materialized state — `ADD` appends, `ALTER … SET <policy>` keeps the position, `DROP`
//!   removes; both of the latter name a declared dependency;
//! * routes — `ADD ROUTE TO` appends, `REPLACE ROUTE TO` keeps the route's index, and `DROP` /
//!   `REPLACE` "require that their target identify exactly one route";
//! * kind clauses — each operation exists only on the kinds that have that clause.
//!
//! Retention is checked once every operation has applied — a processor keeps at least one input
//! (one per correlator side) and at least one route — so an ALTER may drop the only input and
//! add its replacement. Duplicate inputs or dependencies an operation introduces, and every rule
//! that needs the rest of the graph, are validation's (`validate::processor`), which checks the
//! folded definition next.

use nervix_nspl::ast::processor::{
    AlterOp, AlterProcessor, CreateProcessor, ProcessorDef, ProcessorStmt, RelayFeed, Side,
};
use nervix_nspl::ast::{Collect, Ident, Input, StateDependency};
use nervix_nspl::{Span, Statement};

use crate::catalog::{kind_name, CatalogError, Entity};

pub fn fold(stored: &Entity, alteration: &AlterProcessor) -> Result<Statement, CatalogError> {
    let Statement::Processor(ProcessorStmt::Create(create)) = &stored.definition else {
        unreachable!("a processor entity holds a CREATE statement of its kind");
    };
    if create.def.kind() != alteration.kind {
        return Err(CatalogError::new(
            alteration.name.span,
            format!("{} is not a {}", stored.key, kind_name(alteration.kind)),
        ));
    }
    let mut folder = Folder {
        node: stored.key.to_string(),
        definition: (**create).clone(),
        name_span: alteration.name.span,
        emptied_inputs: Vec::new(),
        emptied_routes: None,
    };
    for op in &alteration.ops {
        folder.apply(op)?;
    }
    folder.finish()
}

/// One ALTER being folded.
struct Folder {
    /// `junction 'route_notifications'`.
    node: String,
    definition: CreateProcessor,
    name_span: Span,
    /// Every DROP FROM in order, with its side, to point a retention refusal at the last one
    /// that dropped from the list left empty.
    emptied_inputs: Vec<(Option<Side>, Span)>,
    /// The span of the DROP ROUTE that left the node without routes, if one did.
    emptied_routes: Option<Span>,
}

/// `""`, `"LEFT "` or `"RIGHT "`.
fn side_word(side: Option<Side>) -> &'static str {
    match side {
        None => "",
        Some(Side::Left) => "LEFT ",
        Some(Side::Right) => "RIGHT ",
    }
}

/// The operation as written, for refusals: `SET MAX TIME`, `ADD LEFT FROM`.
fn op_text(op: &AlterOp) -> String {
    let text = match op {
        AlterOp::AddFrom { side, .. } => return format!("ADD {}FROM", side_word(*side)),
        AlterOp::DropFrom { side, .. } => return format!("DROP {}FROM", side_word(*side)),
        AlterOp::AlterFrom { side, .. } => return format!("ALTER {}FROM", side_word(*side)),
        AlterOp::SetCollect { side, .. } => return format!("SET {}COLLECT FOR", side_word(*side)),
        AlterOp::DropCollect { side } => return format!("DROP {}COLLECT", side_word(*side)),
        AlterOp::SetFilter(_) => "SET FILTER WHERE",
        AlterOp::DropFilter => "DROP FILTER WHERE",
        AlterOp::SetAttachment(_) => "SET ATTACHED | DETACHED",
        AlterOp::SetBranching(_) => "SET BRANCHED BY | UNBRANCHED",
        AlterOp::AddState(_) => "ADD MATERIALIZED STATE",
        AlterOp::DropState(_) => "DROP MATERIALIZED STATE",
        AlterOp::AlterState(_) => "ALTER MATERIALIZED STATE",
        AlterOp::AddRoute(_) => "ADD ROUTE TO",
        AlterOp::DropRoute(_) => "DROP ROUTE TO",
        AlterOp::ReplaceRoute(_) => "REPLACE ROUTE TO",
        AlterOp::SetDeduplicateOn(_) => "SET DEDUPLICATE ON",
        AlterOp::SetMaxTime(_) => "SET MAX TIME",
        AlterOp::SetBy(_) => "SET BY",
        AlterOp::SetWidth(_) => "SET WIDTH",
        AlterOp::SetStep(_) => "SET STEP",
        AlterOp::SetMaxStateSize(_) => "SET MAX STATE SIZE",
        AlterOp::DropMaxStateSize => "DROP MAX STATE SIZE",
        AlterOp::SetResource { .. } => "SET RESOURCE",
        AlterOp::SetInputs(_) => "SET INPUTS",
        AlterOp::SetOutputSchema(_) => "SET OUTPUT SCHEMA",
        AlterOp::SetMaxFuel(_) => "SET MAX FUEL",
        AlterOp::SetMaxMemory(_) => "SET MAX MEMORY",
        AlterOp::SetOnRejectedState(_) => "SET ON REJECTED STATE",
        AlterOp::SetOnGlobalError(_) => "SET ON GLOBAL ERROR",
        AlterOp::SetCorrelateWhere(_) => "SET CORRELATE WHERE",
        AlterOp::SetMatch(_) => "SET MATCH",
        AlterOp::SetCorrelationTimeout(_) => "SET ON CORRELATION TIMEOUT",
        AlterOp::SetSource(_) => "SET MATERIALIZED STATE",
        AlterOp::SetEach(_) => "SET EACH",
    };
    text.to_string()
}

/// The index of the input reading `relay`, or a refusal naming the side.
fn input_index(
    node: &str,
    inputs: &[Input],
    side: Option<Side>,
    relay: &Ident,
) -> Result<usize, CatalogError> {
    inputs
        .iter()
        .position(|i| i.relay.name == relay.name)
        .ok_or_else(|| {
            CatalogError::new(
                relay.span,
                format!(
                    "{node} has no {}input relay '{}'",
                    side_word(side),
                    relay.name
                ),
            )
        })
}

/// The relay-fed part of a kind that reads `FROM <relay>, …`.
fn feed_of(def: &mut ProcessorDef) -> Option<&mut RelayFeed> {
    match def {
        ProcessorDef::Junction { feed }
        | ProcessorDef::Deduplicator { feed, .. }
        | ProcessorDef::Reorderer { feed, .. }
        | ProcessorDef::Window { feed, .. }
        | ProcessorDef::Inferencer { feed, .. }
        | ProcessorDef::Wasm { feed, .. }
        | ProcessorDef::Reingestor { feed } => Some(feed),
        ProcessorDef::Correlator { .. } | ProcessorDef::Generator { .. } => None,
    }
}

impl Folder {
    fn not_applicable(&self, op: &AlterOp, span: Span) -> CatalogError {
        CatalogError::new(
            span,
            format!("{} does not apply to {}", op_text(op), self.node),
        )
    }

    /// The input list and collection an input operation addresses.
    fn input_list(
        &mut self,
        side: Option<Side>,
        op: &AlterOp,
        span: Span,
    ) -> Result<(&mut Vec<Input>, &mut Option<Collect>), CatalogError> {
        let refusal = self.not_applicable(op, span);
        match (&mut self.definition.def, side) {
            (ProcessorDef::Correlator { left, .. }, Some(Side::Left)) => {
                Ok((&mut left.inputs, &mut left.collect))
            }
            (ProcessorDef::Correlator { right, .. }, Some(Side::Right)) => {
                Ok((&mut right.inputs, &mut right.collect))
            }
            (def, None) => match feed_of(def) {
                Some(feed) => Ok((&mut feed.inputs, &mut feed.collect)),
                None => Err(refusal),
            },
            _ => Err(refusal),
        }
    }

    fn state_index(&self, relay: &Ident) -> Result<usize, CatalogError> {
        self.definition
            .state
            .iter()
            .position(|d| d.relay.name == relay.name)
            .ok_or_else(|| {
                CatalogError::new(
                    relay.span,
                    format!(
                        "{} has no materialized state dependency on relay '{}'",
                        self.node, relay.name
                    ),
                )
            })
    }

    /// The index of the one route to `target`; `verb` is `DROP` or `REPLACE`.
    fn route_index(&self, target: &Ident, verb: &str) -> Result<usize, CatalogError> {
        let matching: Vec<usize> = self
            .definition
            .routes
            .iter()
            .enumerate()
            .filter(|(_, r)| r.target.name == target.name)
            .map(|(i, _)| i)
            .collect();
        match matching.as_slice() {
            [index] => Ok(*index),
            [] => Err(CatalogError::new(
                target.span,
                format!("{} has no route to relay '{}'", self.node, target.name),
            )),
            many => Err(CatalogError::new(
                target.span,
                format!(
                    "{} has {} routes to relay '{}': {verb} ROUTE TO must identify exactly one \
                     route",
                    self.node,
                    many.len(),
                    target.name
                ),
            )),
        }
    }

    fn apply(&mut self, op: &AlterOp) -> Result<(), CatalogError> {
        let span = self.name_span;
        match op {
            AlterOp::AddFrom { side, input } => {
                self.input_list(*side, op, input.relay.span)?
                    .0
                    .push(input.clone());
            }
            AlterOp::DropFrom { side, relay } => {
                let node = self.node.clone();
                let (list, _) = self.input_list(*side, op, relay.span)?;
                let index = input_index(&node, list, *side, relay)?;
                list.remove(index);
                self.emptied_inputs.push((*side, relay.span));
            }
            AlterOp::AlterFrom {
                side,
                relay,
                filter,
            } => {
                let node = self.node.clone();
                let (list, _) = self.input_list(*side, op, relay.span)?;
                let index = input_index(&node, list, *side, relay)?;
                list[index].filter = filter.clone();
            }
            AlterOp::SetCollect { side, collect } => {
                *self.input_list(*side, op, span)?.1 = Some(collect.clone());
            }
            AlterOp::DropCollect { side } => {
                *self.input_list(*side, op, span)?.1 = None;
            }
            AlterOp::SetFilter(filter) => self.feed(op, filter.span)?.filter = Some(filter.clone()),
            AlterOp::DropFilter => self.feed(op, span)?.filter = None,
            AlterOp::SetAttachment(attachment) => {
                if matches!(self.definition.def, ProcessorDef::Generator { .. }) {
                    return Err(CatalogError::new(
                        span,
                        "generators have no inputs to acknowledge and take no ATTACHED or DETACHED",
                    ));
                }
                self.definition.attachment = Some(*attachment);
            }
            AlterOp::SetBranching(branching) => {
                if matches!(self.definition.def, ProcessorDef::Reingestor { .. }) {
                    return Err(CatalogError::new(
                        span,
                        "reingestors have no node-wide branching: change a route's BRANCHED BY or \
                         UNBRANCHED with REPLACE ROUTE TO",
                    ));
                }
                self.definition.branching = Some(branching.clone());
            }
            AlterOp::AddState(dependency) => {
                self.state_applies(dependency.relay.span)?;
                self.definition.state.push(dependency.clone());
            }
            AlterOp::DropState(relay) => {
                self.state_applies(relay.span)?;
                let index = self.state_index(relay)?;
                self.definition.state.remove(index);
            }
            AlterOp::AlterState(StateDependency { relay, policy }) => {
                self.state_applies(relay.span)?;
                let index = self.state_index(relay)?;
                self.definition.state[index].policy = policy.clone();
            }
            AlterOp::AddRoute(route) => self.definition.routes.push(route.clone()),
            AlterOp::DropRoute(target) => {
                let index = self.route_index(target, "DROP")?;
                self.definition.routes.remove(index);
                if self.definition.routes.is_empty() {
                    self.emptied_routes = Some(target.span);
                }
            }
            AlterOp::ReplaceRoute(route) => {
                let index = self.route_index(&route.target, "REPLACE")?;
                self.definition.routes[index] = route.clone();
            }
            _ => self.apply_kind_op(op)?,
        }
        Ok(())
    }

    fn feed(&mut self, op: &AlterOp, span: Span) -> Result<&mut RelayFeed, CatalogError> {
        let refusal = self.not_applicable(op, span);
        feed_of(&mut self.definition.def).ok_or(refusal)
    }

    fn state_applies(&self, span: Span) -> Result<(), CatalogError> {
        if matches!(self.definition.def, ProcessorDef::Generator { .. }) {
            return Err(CatalogError::new(
                span,
                "a generator reads one materialized relay: change it with SET MATERIALIZED STATE",
            ));
        }
        Ok(())
    }

    /// Operations on clauses only some kinds have.
    fn apply_kind_op(&mut self, op: &AlterOp) -> Result<(), CatalogError> {
        let span = self.name_span;
        let refusal = self.not_applicable(op, span);
        match (op, &mut self.definition.def) {
            (AlterOp::SetDeduplicateOn(keys), ProcessorDef::Deduplicator { on, .. }) => {
                *on = keys.clone();
            }
            (
                AlterOp::SetMaxTime(time),
                ProcessorDef::Deduplicator { max_time, .. }
                | ProcessorDef::Reorderer { max_time, .. }
                | ProcessorDef::Correlator { max_time, .. },
            ) => *max_time = *time,
            (AlterOp::SetBy(keys), ProcessorDef::Reorderer { by, .. }) => *by = keys.clone(),
            (AlterOp::SetWidth(extent), ProcessorDef::Window { width, .. }) => *width = *extent,
            (AlterOp::SetStep(extent), ProcessorDef::Window { step, .. }) => *step = *extent,
            (AlterOp::SetMaxStateSize(size), ProcessorDef::Window { max_state_size, .. }) => {
                *max_state_size = Some(*size);
            }
            (AlterOp::DropMaxStateSize, ProcessorDef::Window { max_state_size, .. }) => {
                *max_state_size = None;
            }
            (
                AlterOp::SetResource {
                    resource,
                    version,
                    file,
                },
                ProcessorDef::Inferencer { model: bound, .. }
                | ProcessorDef::Wasm { module: bound, .. },
            ) => {
                bound.resource = resource.clone();
                bound.version = *version;
                if let Some(file) = file {
                    bound.file = file.clone();
                }
            }
            (AlterOp::SetInputs(tensors), ProcessorDef::Inferencer { inputs, .. }) => {
                *inputs = tensors.clone();
            }
            (AlterOp::SetOutputSchema(tensors), ProcessorDef::Inferencer { outputs, .. }) => {
                *outputs = tensors.clone();
            }
            (AlterOp::SetMaxFuel(fuel), ProcessorDef::Wasm { max_fuel, .. }) => *max_fuel = *fuel,
            (AlterOp::SetMaxMemory(size), ProcessorDef::Wasm { max_memory, .. }) => {
                *max_memory = *size;
            }
            (
                AlterOp::SetOnRejectedState(policy),
                ProcessorDef::Wasm {
                    on_rejected_state, ..
                },
            ) => *on_rejected_state = Some(*policy),
            (
                AlterOp::SetOnGlobalError(policy),
                ProcessorDef::Wasm {
                    on_global_error, ..
                },
            ) => {
                *on_global_error = Some(*policy);
            }
            (AlterOp::SetCorrelateWhere(expr), ProcessorDef::Correlator { condition, .. }) => {
                *condition = expr.clone();
            }
            (AlterOp::SetMatch(mode), ProcessorDef::Correlator { matching, .. }) => {
                *matching = *mode;
            }
            (
                AlterOp::SetCorrelationTimeout(timeout),
                ProcessorDef::Correlator { on_timeout, .. },
            ) => *on_timeout = *timeout,
            (AlterOp::SetSource(relay), ProcessorDef::Generator { source, .. }) => {
                *source = relay.clone();
            }
            (AlterOp::SetEach(period), ProcessorDef::Generator { each, .. }) => *each = *period,
            _ => return Err(refusal),
        }
        Ok(())
    }

    /// Retention rules over the folded definition.
    fn finish(self) -> Result<Statement, CatalogError> {
        let empty_side = match &self.definition.def {
            ProcessorDef::Correlator { left, .. } if left.inputs.is_empty() => {
                Some(Some(Side::Left))
            }
            ProcessorDef::Correlator { right, .. } if right.inputs.is_empty() => {
                Some(Some(Side::Right))
            }
            ProcessorDef::Correlator { .. } | ProcessorDef::Generator { .. } => None,
            ProcessorDef::Junction { feed }
            | ProcessorDef::Deduplicator { feed, .. }
            | ProcessorDef::Reorderer { feed, .. }
            | ProcessorDef::Window { feed, .. }
            | ProcessorDef::Inferencer { feed, .. }
            | ProcessorDef::Wasm { feed, .. }
            | ProcessorDef::Reingestor { feed } => feed.inputs.is_empty().then_some(None),
        };
        if let Some(side) = empty_side {
            let span = self
                .emptied_inputs
                .iter()
                .rev()
                .find(|(dropped, _)| *dropped == side)
                .map_or(self.name_span, |(_, span)| *span);
            return Err(CatalogError::new(
                span,
                format!(
                    "{} must retain at least one {}input",
                    self.node,
                    side_word(side)
                ),
            ));
        }
        if self.definition.routes.is_empty() {
            return Err(CatalogError::new(
                self.emptied_routes.unwrap_or(self.name_span),
                format!("{} must retain at least one route", self.node),
            ));
        }
        Ok(Statement::Processor(ProcessorStmt::Create(Box::new(
            self.definition,
        ))))
    }
}

#[cfg(test)]
mod tests;
