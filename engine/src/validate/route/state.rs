//! `USING MATERIALIZED STATE <relay> <policy>` dependencies, shared by every node that
//! declares them: each relay exists in the node's domain, is WITH MATERIALIZED STATE, has the
//! node's exact branch declaration and is named once; a DEFAULT record is constant, typed
//! exactly and initializes every required field.

use std::collections::BTreeSet;

use nervix_nspl::ast::{Branching, Ident, StateDependency, StatePolicy};

use super::construct::{require_all, Initialized, Target};
use super::reads::check_value;
use super::{describe_branching, relay_fields, same_branching, Field};
use crate::catalog::{CatalogError, DomainScope};
use crate::types::{ExprContext, FieldType, Scope};

/// A constant position reads nothing; the checker refuses field reads before asking.
struct NoFields;

impl Scope for NoFields {
    fn field(&self, path: &[Ident]) -> Result<FieldType, String> {
        let written: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        Err(format!(
            "a constant expression cannot read fields, found `{}`",
            written.join(".")
        ))
    }
}

/// Checks `deps` of `node` (`emitter 'orders_out'`), which runs `branching`; returns each
/// dependency's relay and fields in written order, as [`super::RouteInputs::relay_state`]
/// wants them.
pub fn validate_state_dependencies(
    scope: &DomainScope<'_>,
    node: &str,
    branching: &Branching,
    deps: &[StateDependency],
) -> Result<Vec<(String, Vec<Field>)>, CatalogError> {
    let mut seen = BTreeSet::new();
    let mut state = Vec::with_capacity(deps.len());
    for dep in deps {
        let name = &dep.relay;
        if !seen.insert(name.name.as_str()) {
            return Err(CatalogError::new(
                name.span,
                format!(
                    "duplicate materialized dependency '{}': USING MATERIALIZED STATE names each \
                     relay once",
                    name.name
                ),
            ));
        }
        let (relay, fields) = relay_fields(scope, name)?;
        if !relay.materialized {
            return Err(CatalogError::new(
                name.span,
                format!(
                    "relay '{}' is not WITH MATERIALIZED STATE, so {node} cannot use it as a \
                     materialized dependency",
                    name.name
                ),
            ));
        }
        if !same_branching(&relay.branching, branching) {
            return Err(CatalogError::new(
                name.span,
                format!(
                    "relay '{}' is {}, but {node} is {}: a materialized dependency must be \
                     exactly branch-compatible",
                    name.name,
                    describe_branching(&relay.branching),
                    describe_branching(branching)
                ),
            ));
        }
        if let StatePolicy::Default(record) = &dep.policy {
            check_default(name, &fields, record)?;
        }
        state.push((name.name.clone(), fields));
    }
    Ok(state)
}

/// `DEFAULT { field = constant, … }` for the relay `name`.
fn check_default(
    name: &Ident,
    fields: &[Field],
    record: &[nervix_nspl::ast::Assignment],
) -> Result<(), CatalogError> {
    let owner = format!("relay '{}'", name.name);
    let target = Target {
        owner: owner.clone(),
        builder: format!("DEFAULT for '{}'", name.name),
        fields,
        anchor: name.span,
        complete: true,
    };
    let ctx = ExprContext {
        constant_only: true,
        ..ExprContext::default()
    };
    let mut initialized = Initialized::new();
    for assignment in record {
        let target_name = &assignment.target;
        let Some(field) = fields.iter().find(|f| f.name == target_name.name) else {
            return Err(CatalogError::new(
                target_name.span,
                format!(
                    "{owner} has no field '{}' for its DEFAULT",
                    target_name.name
                ),
            ));
        };
        if initialized.contains_key(&field.name) {
            return Err(CatalogError::new(
                target_name.span,
                format!(
                    "DEFAULT for '{}' sets field '{}' twice",
                    name.name, field.name
                ),
            ));
        }
        check_value(&NoFields, &ctx, &assignment.value, field, &owner, "DEFAULT")?;
        initialized.insert(field.name.clone(), field.ty.clone());
    }
    require_all(&target, &initialized)
}
