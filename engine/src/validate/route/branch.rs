//! A route's outgoing branch against its target relay: a constructed branch (ingestors,
//! reingestors) must be the relay's exact branch and initialize the branch key, or keep the
//! incoming branch without SET; a node-wide contract must equal the relay's declaration.

use std::collections::BTreeMap;

use nervix_nspl::ast::catalog::CreateRelay;
use nervix_nspl::ast::{Assignment, Branching, Ident, Route, RouteBranching};

use super::construct::Initialized;
use super::reads::{check_value, context, Position, Reads};
use super::{
    at, describe_branching, same_branching, schema_fields, BranchRule, Field, RouteInputs,
};
use crate::catalog::{CatalogError, DomainScope};

/// Checks the route's branch against `relay` and returns the branch its output runs in (what
/// an error relay must match).
pub(crate) fn check(
    scope: &DomainScope<'_>,
    inputs: &RouteInputs<'_>,
    rule: BranchRule<'_>,
    route: &Route,
    relay: &CreateRelay,
    target_fields: &[Field],
    built: &Initialized,
) -> Result<Branching, CatalogError> {
    let target = &route.target;
    match rule {
        BranchRule::Contract(contract) => {
            if let Some(declared) = &route.branching {
                let span = match declared {
                    RouteBranching::BranchedBy { branch, .. } => branch.span,
                    RouteBranching::Unbranched => target.span,
                };
                return Err(CatalogError::new(
                    span,
                    format!(
                        "{} is {} node-wide, so the route to '{}' declares no branch of its own",
                        inputs.node,
                        describe_branching(contract),
                        target.name
                    ),
                ));
            }
            if !same_branching(&relay.branching, contract) {
                return Err(CatalogError::new(
                    target.span,
                    format!(
                        "relay '{}' is {}, but {} is {}",
                        target.name,
                        describe_branching(&relay.branching),
                        inputs.node,
                        describe_branching(contract)
                    ),
                ));
            }
            Ok(contract.clone())
        }
        BranchRule::Construct { incoming } => match &route.branching {
            None => Err(CatalogError::new(
                target.span,
                format!(
                    "the route to '{}' must declare BRANCHED BY <branch> or UNBRANCHED",
                    target.name
                ),
            )),
            Some(RouteBranching::Unbranched) => {
                if relay.branching != Branching::Unbranched {
                    return Err(CatalogError::new(
                        target.span,
                        format!(
                            "relay '{}' is {}, but the route to '{}' is UNBRANCHED",
                            target.name,
                            describe_branching(&relay.branching),
                            target.name
                        ),
                    ));
                }
                Ok(Branching::Unbranched)
            }
            Some(RouteBranching::BranchedBy { branch, set }) => {
                let declaration = scope.branch(branch)?;
                let outgoing = Branching::BranchedBy(branch.clone());
                if !same_branching(&relay.branching, &outgoing) {
                    return Err(CatalogError::new(
                        branch.span,
                        format!(
                            "relay '{}' is {}, but the route to '{}' is BRANCHED BY {}",
                            target.name,
                            describe_branching(&relay.branching),
                            target.name,
                            branch.name
                        ),
                    ));
                }
                let keeps_incoming = incoming.is_some_and(|b| same_branching(b, &outgoing));
                if keeps_incoming {
                    if let Some(first) = set.first() {
                        return Err(CatalogError::new(
                            first.target.span,
                            format!(
                                "the route to '{}' keeps the incoming branch {}, so it takes no \
                                 SET: the key is preserved",
                                target.name, branch.name
                            ),
                        ));
                    }
                } else {
                    let key_schema = scope.schema(&at(&declaration.schema, branch.span))?;
                    let key = schema_fields(key_schema);
                    let route_target = (format!("relay '{}'", target.name), target_fields);
                    check_key(inputs, branch, &key, set, route_target, built)?;
                }
                Ok(outgoing)
            }
        },
    }
}

/// `BRANCHED BY <branch> SET …`: each key field at most once, typed exactly, every required
/// key field set.
fn check_key(
    inputs: &RouteInputs<'_>,
    branch: &Ident,
    key: &[Field],
    set: &[Assignment],
    (owner, target_fields): (String, &[Field]),
    built: &Initialized,
) -> Result<(), CatalogError> {
    let branch_owner = format!("branch '{}'", branch.name);
    let what = format!("BRANCHED BY {} SET", branch.name);
    let ctx = context(inputs, false);
    let reads = Reads::new(
        inputs,
        Position::BranchSet,
        Some((&owner, target_fields)),
        built,
    );
    let mut keyed = BTreeMap::new();
    for assignment in set {
        let name = &assignment.target;
        let Some(field) = key.iter().find(|f| f.name == name.name) else {
            return Err(CatalogError::new(
                name.span,
                format!("branch '{}' has no key field '{}'", branch.name, name.name),
            ));
        };
        if keyed.insert(name.name.clone(), ()).is_some() {
            return Err(CatalogError::new(
                name.span,
                format!("{what} sets key field '{}' twice", name.name),
            ));
        }
        check_value(&reads, &ctx, &assignment.value, field, &branch_owner, &what)?;
    }
    match key
        .iter()
        .find(|f| !f.ty.nullable && !keyed.contains_key(&f.name))
    {
        Some(missing) => Err(CatalogError::new(
            branch.span,
            format!(
                "BRANCHED BY {} leaves required key field '{}' uninitialized",
                branch.name, missing.name
            ),
        )),
        None => Ok(()),
    }
}
