//! `CREATE BRANCH` and `CREATE RELAY`.
//!
//! A branch key is the tuple of its schema's fields (DESIGN §4), so every field of a branch's
//! schema is a key field, and each must be a required scalar — a decision where the spec is
//! silent:
//!
//! * **required**: a route constructs a concrete key; a null key part would be a second way
//!   of saying "no key" beside UNBRANCHED, which the spec keeps distinct ("UNBRANCHED produces
//!   an absent branch key");
//! * **scalar**: keys are compared, hashed and written as literals (`RESET … FOR BRANCH
//!   VALUES`), which `ARRAY`, `VEC` and `LIST` values are not.
//!
//! Because ALTER SCHEMA revalidates every branch over the schema, a change that makes a key
//! field OPTIONAL or a list is refused as breaking the branch.

use nervix_nspl::ast::catalog::{CreateBranch, CreateRelay};
use nervix_nspl::ast::Branching;

use crate::catalog::{CatalogError, DomainScope};
use crate::types::DataType;

pub(super) fn validate_branch(
    scope: &DomainScope<'_>,
    branch: &CreateBranch,
) -> Result<(), CatalogError> {
    let schema = scope.schema(&branch.schema)?;
    if branch.ttl.nanos == 0 {
        return Err(CatalogError::new(
            branch.name.span,
            format!("branch '{}' has TTL 0s: a TTL is above 0s", branch.name),
        ));
    }
    if branch.max_instances == Some(0) {
        return Err(CatalogError::new(
            branch.name.span,
            format!(
                "branch '{}' has MAX INSTANCES 0: it is at least 1",
                branch.name
            ),
        ));
    }
    for field in &schema.fields {
        let ty = DataType::from_type_name(&field.ty);
        let problem = if field.optional {
            "OPTIONAL: a branch key field must be required".to_string()
        } else if !ty.is_scalar() {
            format!("{ty}: a branch key field must be a scalar type")
        } else {
            continue;
        };
        return Err(CatalogError::new(
            branch.schema.span,
            format!(
                "branch '{}' keys on field '{}' of schema '{}', which is {problem}",
                branch.name, field.name, schema.name
            ),
        ));
    }
    Ok(())
}

pub(super) fn validate_relay(
    scope: &DomainScope<'_>,
    relay: &CreateRelay,
) -> Result<(), CatalogError> {
    scope.schema(&relay.schema)?;
    if let Branching::BranchedBy(branch) = &relay.branching {
        scope.branch(branch)?;
    }
    if relay.capacity == Some(0) {
        return Err(CatalogError::new(
            relay.name.span,
            format!("relay '{}' has CAPACITY 0: it is at least 1", relay.name),
        ));
    }
    Ok(())
}
