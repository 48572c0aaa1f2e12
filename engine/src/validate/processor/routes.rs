//! A processor's output routes: what each kind lets its routes read, handed to the shared route
//! validator ([`validate_route`]) with the node's branch rule, plus the node-level route rules
//! the shared validator cannot know from [`RouteInputs`] alone:
//!
//! * the kind's route shape, with the parser's messages (re-checked for definitions not typed
//!   as text): set-only kinds (window, inferencer, WASM, correlator, generator) refuse INHERIT
//!   and need a SET clause; windows and WASM processors take no FLUSH, every other kind needs
//!   one; only reingestor routes declare (and must declare) their branching;
//! * correlator routes refuse bare field reads and `input.` ("Correlators reject FILTER WHERE,
//!   INHERIT, bare RHS field reads, input") in SET and WHERE; their error records may still read
//!   earlier error-record assignments by bare name, so ON MESSAGE ERROR SET is left to the
//!   shared validator.

use nervix_nspl::ast::{ExprKind, ObjectKind, Route};

use super::model::find_in;
use crate::catalog::{CatalogError, DomainScope};
use crate::validate::route::{schema_fields, validate_route, BranchRule, Field, RouteInputs};

/// The state routes read: `(relay, fields)` in declaration order.
pub(super) type RelayState = Vec<(String, Vec<Field>)>;

/// What one kind's routes read as bare generated values.
pub(super) enum Generated<'a> {
    /// Nothing: the working message and the node's inputs only.
    None,
    /// The same immutable values for every route (inferencer outputs).
    Fixed(&'a [Field]),
    /// WASM guest values: the module's output is known only once it is inspected, so a route
    /// may read a guest value named like one of its target relay's fields, typed as that field
    /// (see the module docs of `validate::processor`).
    TargetFields,
}

/// Everything a kind's routes may read.
pub(super) struct RouteScope<'a> {
    pub node: &'a str,
    pub kind: ObjectKind,
    pub input: Option<&'a [Field]>,
    pub left: Option<&'a [Field]>,
    pub right: Option<&'a [Field]>,
    pub relay_state: &'a RelayState,
    pub branch: Option<&'a [Field]>,
    pub generated: Generated<'a>,
    pub headers_refusal: &'a str,
    pub window: bool,
    pub rule: BranchRule<'a>,
}

/// The kind's noun as the parser writes it in route refusals.
fn noun(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::WindowProcessor => "window processor",
        ObjectKind::Inferencer => "inferencer",
        ObjectKind::WasmProcessor => "WASM processor",
        ObjectKind::Correlator => "correlator",
        ObjectKind::Generator => "generator",
        ObjectKind::Junction => "junction",
        ObjectKind::Deduplicator => "deduplicator",
        ObjectKind::Reorderer => "reorderer",
        ObjectKind::Reingestor => "reingestor",
        _ => "processor",
    }
}

fn is_set_only(kind: ObjectKind) -> bool {
    matches!(
        kind,
        ObjectKind::WindowProcessor
            | ObjectKind::Inferencer
            | ObjectKind::WasmProcessor
            | ObjectKind::Correlator
            | ObjectKind::Generator
    )
}

/// Checks every route of the node, in order.
pub(super) fn check_routes(
    scope: &DomainScope<'_>,
    routes: &[Route],
    reads: &RouteScope<'_>,
) -> Result<(), CatalogError> {
    if routes.is_empty() {
        return Err(CatalogError::new(
            nervix_nspl::Span::default(),
            format!("{} must retain at least one route", reads.node),
        ));
    }
    for route in routes {
        check_route_shape(route, reads)?;
        let target_fields;
        let generated: &[Field] = match &reads.generated {
            Generated::None => &[],
            Generated::Fixed(fields) => fields,
            Generated::TargetFields => {
                target_fields = guest_values(scope, route);
                &target_fields
            }
        };
        let inputs = RouteInputs {
            node: reads.node.to_string(),
            input: reads.input,
            left: reads.left,
            right: reads.right,
            relay_state: reads.relay_state.clone(),
            branch: reads.branch,
            metadata: &[],
            generated,
            headers: Err(reads.headers_refusal.to_string()),
            window: reads.window,
            metadata_source: None,
        };
        validate_route(scope, &inputs, reads.rule, route)?;
    }
    Ok(())
}

/// The guest values a WASM route may read: its target relay's fields. A missing target is
/// left for the shared validator to refuse.
fn guest_values(scope: &DomainScope<'_>, route: &Route) -> Vec<Field> {
    let Some(relay) = scope.relay(&route.target).ok() else {
        return Vec::new();
    };
    scope
        .schema(&relay.schema)
        .map(schema_fields)
        .unwrap_or_default()
}

/// The kind-level rules of one route's clauses, with the parser's messages (a definition
/// built by ALTER or decoded from storage gets the same refusals as typed text).
fn check_route_shape(route: &Route, reads: &RouteScope<'_>) -> Result<(), CatalogError> {
    let noun = noun(reads.kind);
    let refuse = |message: String| Err(CatalogError::new(route.target.span, message));
    if is_set_only(reads.kind) {
        if route.inherit.is_some() {
            return refuse(format!(
                "{noun} routes are set-only and do not accept INHERIT"
            ));
        }
        if route.set.is_empty() {
            return refuse(format!("{noun} routes are set-only and need a SET clause"));
        }
    }
    let flushless = matches!(
        reads.kind,
        ObjectKind::WindowProcessor | ObjectKind::WasmProcessor
    );
    match (flushless, &route.flush) {
        (true, Some(_)) => return refuse(format!("{noun} routes take no FLUSH")),
        (false, None) => {
            return refuse(format!(
                "route to `{}` needs FLUSH EACH <duration> MAX BATCH SIZE <bytes> or FLUSH \
                 IMMEDIATE",
                route.target.name
            ))
        }
        _ => {}
    }
    match (reads.kind == ObjectKind::Reingestor, &route.branching) {
        (true, None) => {
            return refuse(format!(
                "route to `{}` needs BRANCHED BY <branch> or UNBRANCHED",
                route.target.name
            ))
        }
        (false, Some(_)) => {
            return refuse(format!(
                "{noun} routes do not construct branches: declare BRANCHED BY or UNBRANCHED \
                 once for the whole node"
            ))
        }
        _ => {}
    }
    if reads.kind == ObjectKind::Correlator {
        let expressions = route
            .set
            .iter()
            .map(|a| &a.value)
            .chain(route.filter.as_ref());
        for expr in expressions {
            let refused = find_in(expr, |node| match &node.kind {
                ExprKind::Field(path) => correlator_read_refusal(path).map(|m| (node.span, m)),
                _ => None,
            });
            if let Some((span, message)) = refused {
                return Err(CatalogError::new(span, message));
            }
        }
    }
    Ok(())
}

/// Why a correlator route may not read `path`, if it may not.
fn correlator_read_refusal(path: &[nervix_nspl::ast::Ident]) -> Option<String> {
    match path {
        [bare] => Some(format!(
            "correlator routes reject bare field reads: write left.{0}, right.{0} or output.{0}",
            bare.name
        )),
        [scope, field] if scope.name == "input" => Some(format!(
            "correlators have no input: write left.{0} or right.{0}",
            field.name
        )),
        [scope, field] if scope.name == "message" => Some(format!(
            "correlator routes reject message.{0}: write left.{0}, right.{0} or output.{0}",
            field.name
        )),
        _ => None,
    }
}
