//! A generator's source relay: `USING MATERIALIZED STATE <relay>` before EACH names the one
//! relay whose materialized state the generator runs from. It must exist, be WITH
//! MATERIALIZED STATE, and be exactly branch-compatible with the generator's contract.
//! Routes read it as `relay_state.<relay>.<field>` with the schema's own nullability: the
//! generator runs only from state that exists.
//!
//! Every other kind's `USING MATERIALIZED STATE <relay> <policy>` dependencies are checked by
//! the shared [`crate::validate::route::validate_state_dependencies`], so a dependency means
//! the same in processors and emitters.

use nervix_nspl::ast::{Branching, Ident};

use super::model::{resolve_relay, ResolvedRelay};
use crate::catalog::{CatalogError, DomainScope};
use crate::validate::route::{describe_branching, same_branching};

/// Checks a generator's source relay and returns it with its fields.
pub(super) fn check_generator_source<'c>(
    scope: &DomainScope<'c>,
    node: &str,
    contract: &Branching,
    source: &Ident,
) -> Result<ResolvedRelay<'c>, CatalogError> {
    let relay = resolve_relay(scope, source)?;
    if !relay.relay.materialized {
        return Err(CatalogError::new(
            source.span,
            format!(
                "relay '{}' is not WITH MATERIALIZED STATE, so {node} cannot generate from it",
                source.name
            ),
        ));
    }
    if !same_branching(relay.branching(), contract) {
        return Err(CatalogError::new(
            source.span,
            format!(
                "relay '{}' is {}, but {node} is {}: a generator's materialized relay must be \
                 exactly branch-compatible",
                source.name,
                describe_branching(relay.branching()),
                describe_branching(contract)
            ),
        ));
    }
    Ok(relay)
}
