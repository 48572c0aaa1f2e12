//! Folding ALTER statements of the emitter family.
//!
//! The ALTER's head must be the stored emitter's, so an alteration never changes what an
//! emitter writes. Operations rewrite the stored CREATE in written order: ADD FROM and ADD
//! MATERIALIZED STATE append; DROP FROM, ALTER FROM, DROP and ALTER MATERIALIZED STATE name an
//! existing input or dependency (ALTER keeps its position); SET TO replaces the whole sink;
//! REPLACE CONSTRUCTION replaces INHERIT, SET, WHERE and INVOKE together, and DROP
//! CONSTRUCTION clears them. An emitter must retain at least one input. Dropping a COLLECT
//! that is not there is accepted as a no-op. Rules that need the rest of the graph (a
//! duplicate input or dependency, types) are validation's, on the folded result.
//!
//! The folded definition carries the ALTER's name (same name, the ALTER's span), so refusals
//! validation gives about the emitter as a whole point into the statement being applied.

use nervix_nspl::ast::emitter::{
    AlterEmitter, AlterEmitterOp, Construction, CreateEmitter, EmitterStmt,
};
use nervix_nspl::ast::Ident;
use nervix_nspl::Statement;

use crate::catalog::{CatalogError, Entity};

pub fn fold(stored: &Entity, alteration: &AlterEmitter) -> Result<Statement, CatalogError> {
    let Statement::Emitter(EmitterStmt::Create(create)) = &stored.definition else {
        unreachable!("an emitter entity holds a CREATE … EMITTER")
    };
    let mut definition: CreateEmitter = (**create).clone();
    if definition.head != alteration.head {
        return Err(CatalogError::new(
            alteration.name.span,
            format!(
                "the stored emitter writes {}, so ALTER {} cannot alter it",
                definition.head.keywords().join(" "),
                alteration.head.phrase()
            ),
        ));
    }
    definition.name = alteration.name.clone();
    for operation in &alteration.operations {
        apply(&mut definition, operation)?;
    }
    Ok(Statement::Emitter(EmitterStmt::Create(Box::new(
        definition,
    ))))
}

fn apply(definition: &mut CreateEmitter, operation: &AlterEmitterOp) -> Result<(), CatalogError> {
    let node = format!("emitter '{}'", definition.name.name);
    match operation {
        AlterEmitterOp::AddFrom(input) => definition.inputs.push(input.clone()),
        AlterEmitterOp::DropFrom(relay) => {
            let index = input_index(definition, relay, &node)?;
            if definition.inputs.len() == 1 {
                return Err(CatalogError::new(
                    relay.span,
                    "an emitter must retain at least one input",
                ));
            }
            definition.inputs.remove(index);
        }
        AlterEmitterOp::SetFromWhere { relay, filter } => {
            let index = input_index(definition, relay, &node)?;
            definition.inputs[index].filter = Some(filter.clone());
        }
        AlterEmitterOp::DropFromWhere(relay) => {
            let index = input_index(definition, relay, &node)?;
            definition.inputs[index].filter = None;
        }
        AlterEmitterOp::SetCollect(collect) => definition.collect = Some(collect.clone()),
        AlterEmitterOp::DropCollect => definition.collect = None,
        AlterEmitterOp::AddState(dependency) => definition.state.push(dependency.clone()),
        AlterEmitterOp::DropState(relay) => {
            let index = state_index(definition, relay, &node)?;
            definition.state.remove(index);
        }
        AlterEmitterOp::AlterState(dependency) => {
            let index = state_index(definition, &dependency.relay, &node)?;
            definition.state[index].policy = dependency.policy.clone();
        }
        AlterEmitterOp::SetAttachment(attachment) => definition.attachment = Some(*attachment),
        AlterEmitterOp::SetSink(sink) => definition.sink = sink.clone(),
        AlterEmitterOp::ReplaceConstruction(construction) => {
            definition.construction = construction.clone()
        }
        AlterEmitterOp::DropConstruction => definition.construction = Construction::default(),
        AlterEmitterOp::SetFlush(flush) => definition.flush = flush.clone(),
        AlterEmitterOp::SetMessageError(policy) => definition.on_message_error = policy.clone(),
        AlterEmitterOp::SetGeneralError(policy) => definition.on_general_error = *policy,
    }
    Ok(())
}

/// The one input reading `relay`.
fn input_index(
    definition: &CreateEmitter,
    relay: &Ident,
    node: &str,
) -> Result<usize, CatalogError> {
    unique(
        definition.inputs.iter().map(|i| &i.relay),
        relay,
        || format!("{node} does not read relay '{}'", relay.name),
        |n| {
            format!(
                "{node} reads relay '{}' {n} times, so FROM {} is ambiguous",
                relay.name, relay.name
            )
        },
    )
}

/// The one materialized dependency on `relay`.
fn state_index(
    definition: &CreateEmitter,
    relay: &Ident,
    node: &str,
) -> Result<usize, CatalogError> {
    unique(
        definition.state.iter().map(|s| &s.relay),
        relay,
        || format!("{node} has no materialized dependency '{}'", relay.name),
        |n| {
            format!(
                "MATERIALIZED STATE {} is ambiguous: {node} declares it {n} times",
                relay.name
            )
        },
    )
}

/// The index of the one name in `names` equal to `wanted`, or the refusal `missing` /
/// `ambiguous` (given the count).
fn unique<'n>(
    names: impl Iterator<Item = &'n Ident>,
    wanted: &Ident,
    missing: impl FnOnce() -> String,
    ambiguous: impl FnOnce(usize) -> String,
) -> Result<usize, CatalogError> {
    let matching: Vec<usize> = names
        .enumerate()
        .filter(|(_, n)| n.name == wanted.name)
        .map(|(i, _)| i)
        .collect();
    match matching.as_slice() {
        [index] => Ok(*index),
        [] => Err(CatalogError::new(wanted.span, missing())),
        several => Err(CatalogError::new(wanted.span, ambiguous(several.len()))),
    }
}
