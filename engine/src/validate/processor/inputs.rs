//! A processor's inputs: every FROM relay exists, is listed once, and — because a node's
//! expressions read `input.` (or `left.` / `right.`) without naming a relay — every relay of
//! one input list carries the same declared schema (by name: "Merely having structurally
//! equal schemas is not enough") and the same exact branch, or all are unbranched.
//!
//! The per-input WHERE predicates are checked by the caller once the node's branch key is
//! known, since they may read `branch.`.

use nervix_nspl::ast::{Branching, Input};
use nervix_nspl::Span;

use super::model::{resolve_relay, ResolvedRelay};
use crate::catalog::{CatalogError, DomainScope};
use crate::validate::route::{describe_branching as describe, same_branching};

/// One checked input list: its relays in written order, all of one schema and one branching.
pub(super) struct InputList<'c> {
    pub relays: Vec<ResolvedRelay<'c>>,
}

impl<'c> InputList<'c> {
    /// The relay every other one was compared with.
    pub fn first(&self) -> &ResolvedRelay<'c> {
        &self.relays[0]
    }
}

/// Resolves and checks one input list. `side` is `""`, or `"LEFT "` / `"RIGHT "` for a
/// correlator side.
pub(super) fn check_input_list<'c>(
    scope: &DomainScope<'c>,
    node: &str,
    side: &str,
    inputs: &[Input],
) -> Result<InputList<'c>, CatalogError> {
    let which = format!("the {side}inputs");
    let mut relays: Vec<ResolvedRelay<'c>> = Vec::with_capacity(inputs.len());
    for input in inputs {
        if relays.iter().any(|r| r.name.name == input.relay.name) {
            return Err(CatalogError::new(
                input.relay.span,
                format!(
                    "relay '{}' is already an input of {node}: list each relay once",
                    input.relay.name
                ),
            ));
        }
        let relay = resolve_relay(scope, &input.relay)?;
        if let Some(first) = relays.first() {
            if relay.schema_name() != first.schema_name() {
                return Err(CatalogError::new(
                    input.relay.span,
                    format!(
                        "relay '{}' uses schema '{}', but relay '{}' uses schema '{}': {which} of \
                         {node} must use the same declared schema (structurally equal schemas \
                         are not enough)",
                        relay.name.name,
                        relay.schema_name(),
                        first.name.name,
                        first.schema_name()
                    ),
                ));
            }
            if !same_branching(relay.branching(), first.branching()) {
                return Err(CatalogError::new(
                    input.relay.span,
                    format!(
                        "relay '{}' is {}, but relay '{}' is {}: {which} of {node} must use the \
                         same exact branch or all be unbranched",
                        relay.name.name,
                        describe(relay.branching()),
                        first.name.name,
                        describe(first.branching())
                    ),
                ));
            }
        }
        relays.push(relay);
    }
    if relays.is_empty() {
        return Err(CatalogError::new(
            Span::default(),
            format!("{node} must retain at least one {side}input"),
        ));
    }
    Ok(InputList { relays })
}

/// Refuses an input relay whose branching differs from the node's contract.
pub(super) fn check_contract(
    node: &str,
    contract: &Branching,
    list: &InputList<'_>,
) -> Result<(), CatalogError> {
    for relay in &list.relays {
        if !same_branching(relay.branching(), contract) {
            return Err(CatalogError::new(
                relay.name.span,
                format!(
                    "relay '{}' is {}, but {node} is {}",
                    relay.name.name,
                    describe(relay.branching()),
                    describe(contract)
                ),
            ));
        }
    }
    Ok(())
}
