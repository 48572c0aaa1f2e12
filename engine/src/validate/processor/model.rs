//! What a processor's checks read from the graph, resolved once — relays with their schemas
//! turned into [`Field`]s and the node's branch key — and how node-level expressions are
//! checked.
//!
//! Node-level expressions (per-input WHERE, FILTER WHERE, DEDUPLICATE ON, BY, INPUTS,
//! CORRELATE WHERE) stand at the shared route validator's node-filter position
//! ([`Position::Filter`]): they read the input row (`input.x`, `message.x`, bare `x`; a
//! correlator's `left.` / `right.` instead) and the branch key, never materialized state (which
//! resolves after the node's filters) or an output. Using the same scope as ingestor filters
//! keeps one meaning for every field path across node families.
//!
//! Every look-up goes through [`DomainScope`], so a missing relay, schema or branch is refused
//! with the catalog's own "does not exist" message at the span where this statement names it.

use nervix_nspl::ast::catalog::CreateRelay;
use nervix_nspl::ast::{Branching, Expr, Ident};

use crate::catalog::{CatalogError, DomainScope};
use crate::types::{self, TypedExpr};
use crate::validate::route::{
    at, check_bool, relay_fields, schema_fields, type_error, Field, Position, Reads, RouteInputs,
};

/// A relay this statement names, with its schema resolved.
pub(super) struct ResolvedRelay<'c> {
    /// The name as written here, with its span in this statement.
    pub name: Ident,
    pub relay: &'c CreateRelay,
    pub fields: Vec<Field>,
}

impl ResolvedRelay<'_> {
    pub fn schema_name(&self) -> &str {
        &self.relay.schema.name
    }

    pub fn branching(&self) -> &Branching {
        &self.relay.branching
    }
}

/// Resolves `name` to a relay of the domain and its schema's fields.
pub(super) fn resolve_relay<'c>(
    scope: &DomainScope<'c>,
    name: &Ident,
) -> Result<ResolvedRelay<'c>, CatalogError> {
    let (relay, fields) = relay_fields(scope, name)?;
    Ok(ResolvedRelay {
        name: name.clone(),
        relay,
        fields,
    })
}

/// The key fields of a branching, `None` when unbranched. A missing branch is refused at the
/// span where this statement names it.
pub(super) fn branch_fields(
    scope: &DomainScope<'_>,
    branching: &Branching,
) -> Result<Option<Vec<Field>>, CatalogError> {
    let Branching::BranchedBy(name) = branching else {
        return Ok(None);
    };
    let branch = scope.branch(name)?;
    let schema = scope.schema(&at(&branch.schema, name.span))?;
    Ok(Some(schema_fields(schema)))
}

/// The refusal of header functions in processors: relay records carry no transport headers.
pub(super) fn headers_refusal(plural_kind: &str) -> String {
    format!("{plural_kind} do not support read_header or read_headers")
}

/// What a node-level expression reads: the input row (or a correlator's sides) and the branch
/// key.
pub(super) struct NodeReads<'a> {
    inputs: RouteInputs<'a>,
}

impl<'a> NodeReads<'a> {
    pub fn new(
        node: &str,
        headers_refusal: &str,
        input: Option<&'a [Field]>,
        sides: (Option<&'a [Field]>, Option<&'a [Field]>),
        branch: Option<&'a [Field]>,
    ) -> NodeReads<'a> {
        NodeReads {
            inputs: RouteInputs {
                node: node.to_string(),
                input,
                left: sides.0,
                right: sides.1,
                relay_state: Vec::new(),
                branch,
                metadata: &[],
                generated: &[],
                headers: Err(headers_refusal.to_string()),
                window: false,
                metadata_source: None,
            },
        }
    }

    /// Checks a predicate: a BOOL (null does not pass). `what` names the clause.
    pub fn check_predicate(&self, expr: &Expr, what: &str) -> Result<TypedExpr, CatalogError> {
        let initialized = Default::default();
        let reads = Reads::new(&self.inputs, Position::Filter, None, &initialized);
        check_bool(&reads, &self.inputs, expr, what)
    }

    /// Checks a value of any type; `what` prefixes a refusal.
    pub fn check_value(&self, expr: &Expr, what: &str) -> Result<TypedExpr, CatalogError> {
        self.check_with(expr, None)
            .map_err(|e| CatalogError::new(e.span, format!("{what}: {}", e.message)))
    }

    /// Checks a value, where a value of `expected` is wanted if given (literals adapt to it).
    pub fn check_with(
        &self,
        expr: &Expr,
        expected: Option<&types::DataType>,
    ) -> Result<TypedExpr, CatalogError> {
        let initialized = Default::default();
        let reads = Reads::new(&self.inputs, Position::Filter, None, &initialized);
        let ctx = types::ExprContext {
            headers: self.inputs.headers.clone(),
            ..types::ExprContext::default()
        };
        match expected {
            Some(expected) => types::check_expecting(expr, &reads, &ctx, expected),
            None => types::check(expr, &reads, &ctx),
        }
        .map_err(type_error)
    }
}

/// The first node of `expr` (in pre-order) for which `found` returns a value. Iterative, so
/// it is safe on any tree.
pub(super) fn find_in<'e, T>(
    expr: &'e Expr,
    mut found: impl FnMut(&'e Expr) -> Option<T>,
) -> Option<T> {
    let mut stack = vec![expr];
    while let Some(node) = stack.pop() {
        if let Some(hit) = found(node) {
            return Some(hit);
        }
        node.push_children(&mut stack);
    }
    None
}
