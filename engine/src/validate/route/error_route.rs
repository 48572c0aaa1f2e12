//! `ON MESSAGE ERROR SEND TO <relay> [SET …]`: the error relay exists, runs in the failing
//! route's exact branch, and its record is fully constructed from what exists when a message
//! fails (`error.`, `partial_output.`, `input.`, state, branch, metadata, headers).

use nervix_nspl::ast::{Branching, MessageErrorPolicy};

use super::construct::{require_all, Initialized, Target};
use super::reads::{check_value, context, Position, Reads};
use super::{describe_branching, relay_fields, same_branching, Field, RouteInputs};
use crate::catalog::{CatalogError, DomainScope};

/// The route whose message errors a policy handles.
pub(crate) struct ErrorSource<'s> {
    /// The failing route, for messages: `ingestor 'orders_in' route to 'orders'`.
    pub route: String,
    /// The branch the failing operation runs in.
    pub branch: Branching,
    /// The failing route's output fields, read as `partial_output.<field>` (all nullable).
    pub partial_output: &'s [Field],
}

/// Checks a message error policy; IGNORE and LOG need nothing.
pub(crate) fn check_message_error(
    scope: &DomainScope<'_>,
    inputs: &RouteInputs<'_>,
    source: &ErrorSource<'_>,
    policy: &MessageErrorPolicy,
) -> Result<(), CatalogError> {
    let MessageErrorPolicy::SendTo { relay, set } = policy else {
        return Ok(());
    };
    let (error_relay, fields) = relay_fields(scope, relay)?;
    if !same_branching(&error_relay.branching, &source.branch) {
        return Err(CatalogError::new(
            relay.span,
            format!(
                "{} is {}, but its error relay '{}' is {}: the error relay must declare the same \
                 exact named branch as the source route, or be unbranched when the source is \
                 unbranched",
                source.route,
                describe_branching(&source.branch),
                relay.name,
                describe_branching(&error_relay.branching)
            ),
        ));
    }
    let target = Target {
        owner: format!("error relay '{}'", relay.name),
        builder: format!("ON MESSAGE ERROR SEND TO {}", relay.name),
        fields: &fields,
        anchor: relay.span,
        complete: true,
    };
    let ctx = context(inputs, false);
    let mut initialized = Initialized::new();
    for assignment in set {
        let name = &assignment.target;
        let Some(field) = fields.iter().find(|f| f.name == name.name) else {
            return Err(CatalogError::new(
                name.span,
                format!("{} has no field '{}' to SET", target.owner, name.name),
            ));
        };
        {
            let reads = Reads::new(
                inputs,
                Position::ErrorSet {
                    partial_output: source.partial_output,
                },
                Some((&target.owner, &fields)),
                &initialized,
            );
            check_value(&reads, &ctx, &assignment.value, field, &target.owner, "SET")?;
        }
        initialized.insert(field.name.clone(), field.ty.clone());
    }
    require_all(&target, &initialized)
}
