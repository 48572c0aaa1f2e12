//! Validation of output routes shared by ingestors, processors and emitters: the
//! working-message model of the spec (INHERIT, ordered SET, WHERE, branch construction,
//! ON MESSAGE ERROR) checked against the target relay's schema and branch contract.
//!
//! # What it owns
//!
//! [`validate_route`] checks one `TO <relay> …` route; the pieces it is built from are shared
//! with the nodes whose output is not a relay (an emitter's sink record) and with node-level
//! clauses:
//!
//! * `reads` — the [`crate::types::Scope`] that says what a field path means at each position
//!   of the construction timeline (SET, WHERE, branch SET, error SET, node filter, sink);
//! * `construct` — INHERIT, ordered SET, the required-field check and WHERE against any list of
//!   target fields;
//! * `branch` — the route's outgoing branch against the target relay ([`BranchRule`]);
//! * `error_route` — `ON MESSAGE ERROR SEND TO <relay> SET …`;
//! * `state` — `USING MATERIALIZED STATE` dependencies ([`validate_state_dependencies`]).
//!
//! # Why it is correct
//!
//! Every rule is checked in the order the runtime executes the construction: the output starts
//! empty, INHERIT initializes the fields it copies, each SET initializes its target *after* its
//! value was checked against the fields initialized before it (so `output.x` and a bare `x`
//! can never read a later assignment), WHERE sees exactly the finalized output, the branch key
//! is built last, and an error record sees only what exists when a message fails. A field's
//! type after initialization is always the declared type of its target field, which is what the
//! output column holds, so later reads are typed exactly as the runtime stores them. Every
//! expression goes through the type checker with the scope of its position, so no implicit
//! cast, nullable-into-required or sensitive-into-non-sensitive flow can pass unnoticed.
//!
//! # Decisions where the spec is silent
//!
//! * `INHERIT ALL [EXCEPT …]` copies every input field the target also declares; input fields
//!   the target lacks are skipped, and a same-named field whose type or nullability differs is
//!   refused (exclude it with EXCEPT or SET it explicitly).
//! * A bare field in SET reads the working message: the latest output value, else the input
//!   field, else a generated value. `message.x` reads the latest output value, else the input
//!   field. In a window route neither falls back to the input rows (they exist only inside
//!   aggregates). Correlator routes (with `left`/`right`) refuse bare reads in SET.
//! * A branch SET reads `message.`/bare (the working message after finalization), `output.`
//!   and `input.`; a key field may be set only once and a SENSITIVE value needs
//!   `leak_sensitive(…)`.
//! * Error records offer `error.reference`, `error.code`, `error.operation` and
//!   `error.message`, each a required STRING, plus `partial_output.<f>` for every field of the
//!   failed route's target (all nullable). `output.x`, `message.x` and a bare `x` in an error
//!   SET read earlier assignments of the same error record. Window error records cannot read
//!   `input.` (an emission has no single input row).
//! * Route WHERE does not read generated values (it sees the finalized output only).
//! * Node filters (FILTER WHERE, FROM … WHERE) read the input row through `input.`,
//!   `message.` and bare names, plus `metadata.`, `branch.` and headers, but no
//!   `relay_state.` (state resolves after the filters) and no output.
//! * `metadata.` exists only in ingestors; a read the source does not provide is refused
//!   naming the source's phrase.
//! * Materialized dependencies must declare the node's exact branch (branched nodes cannot use
//!   unbranched state, nor the reverse); a DEFAULT record sets each field at most once.

mod branch;
mod construct;
mod error_route;
mod reads;
mod state;

use std::collections::BTreeMap;

use nervix_nspl::ast::catalog::{CreateRelay, CreateSchema};
use nervix_nspl::ast::{Branching, Expr, Ident, Route};
use nervix_nspl::Span;

use crate::catalog::{CatalogError, DomainScope};
use crate::types::{DataType, FieldType, TypeError, TypedExpr};

pub(crate) use construct::{construct, Initialized, Target};
pub(crate) use error_route::{check_message_error, ErrorSource};
pub(crate) use reads::{check_bool, Position, Reads};
pub use state::validate_state_dependencies;

/// A schema field as validation sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub ty: FieldType,
}

/// What a route's expressions may read besides its own output.
#[derive(Debug, Clone)]
pub struct RouteInputs<'a> {
    /// The node, for messages: `ingestor 'orders_in'`.
    pub node: String,
    /// Source rows, read as `input.x`, `message.x` and bare `x`; `None` when the node has no
    /// input rows of its own (generators, correlators).
    pub input: Option<&'a [Field]>,
    /// Correlator sides, read as `left.x` / `right.x`.
    pub left: Option<&'a [Field]>,
    pub right: Option<&'a [Field]>,
    /// `relay_state.<relay>.<field>` for the node's materialized dependencies.
    pub relay_state: Vec<(String, Vec<Field>)>,
    /// `branch.<field>`: the incoming branch key, when the node runs inside a branch.
    pub branch: Option<&'a [Field]>,
    /// `metadata.<field>` the source provides (Kafka topic/partition/offset, syslog peer_addr).
    pub metadata: &'a [Field],
    /// Values a node generates for its routes (inferencer outputs, WASM guest values), read as
    /// bare names; immutable.
    pub generated: &'a [Field],
    /// Header functions: allowed, or the exact refusal to give.
    pub headers: Result<(), String>,
    /// A window route: aggregates in SET, `input.` only inside aggregate arguments.
    pub window: bool,
    /// The ingestor source's phrase (`KAFKA TOPIC`), for refusing a `metadata.` read the source
    /// does not provide; `None` outside ingestors, where no `metadata.` scope exists.
    pub metadata_source: Option<&'a str>,
}

/// How a route's outgoing branch is decided.
#[derive(Debug, Clone, Copy)]
pub enum BranchRule<'a> {
    /// The route constructs its own (ingestors, reingestors); `incoming` is the branch the
    /// node runs in (a reingestor's), which a route may keep without SET.
    Construct { incoming: Option<&'a Branching> },
    /// The node's contract: every output relay must match it exactly.
    Contract(&'a Branching),
}

/// Checks one route against the candidate domain: the target relay, INHERIT and SET against
/// its schema, every required field initialized, WHERE, the outgoing branch, and the message
/// error policy.
pub fn validate_route(
    scope: &DomainScope<'_>,
    inputs: &RouteInputs<'_>,
    rule: BranchRule<'_>,
    route: &Route,
) -> Result<(), CatalogError> {
    let (relay, fields) = relay_fields(scope, &route.target)?;
    let target = Target {
        owner: format!("relay '{}'", route.target.name),
        builder: format!("route to '{}'", route.target.name),
        fields: &fields,
        anchor: route.target.span,
        complete: true,
    };
    let built = construct(
        inputs,
        &target,
        route.inherit.as_ref(),
        &route.set,
        route.filter.as_ref(),
        false,
    )?;
    let source_branch = branch::check(scope, inputs, rule, route, relay, &fields, &built)?;
    let source = ErrorSource {
        route: format!("{} route to '{}'", inputs.node, route.target.name),
        branch: source_branch,
        partial_output: &fields,
    };
    check_message_error(scope, inputs, &source, &route.on_error)
}

/// The fields of a schema: `OPTIONAL` is nullable, `SENSITIVE` sensitive.
pub fn schema_fields(schema: &CreateSchema) -> Vec<Field> {
    schema
        .fields
        .iter()
        .map(|f| Field {
            name: f.name.name.clone(),
            ty: FieldType {
                data_type: DataType::from_type_name(&f.ty),
                nullable: f.optional,
                sensitive: f.sensitive,
            },
        })
        .collect()
}

/// The relay `name` and the fields of its schema; refusals point at `name`.
pub fn relay_fields<'s>(
    scope: &DomainScope<'s>,
    name: &Ident,
) -> Result<(&'s CreateRelay, Vec<Field>), CatalogError> {
    let relay = scope.relay(name)?;
    let schema = scope.schema(&at(&relay.schema, name.span))?;
    Ok((relay, schema_fields(schema)))
}

/// `ident` as if written at `span`: a name another entity stores, looked up on behalf of the
/// statement being checked, so a refusal points into that statement.
pub fn at(ident: &Ident, span: Span) -> Ident {
    Ident {
        name: ident.name.clone(),
        span,
    }
}

/// A type checker refusal as the catalog's.
pub fn type_error(error: TypeError) -> CatalogError {
    CatalogError::new(error.span, error.message)
}

/// `BRANCHED BY b` or `UNBRANCHED`, as messages print a branch declaration.
pub fn describe_branching(branching: &Branching) -> String {
    match branching {
        Branching::BranchedBy(branch) => format!("BRANCHED BY {}", branch.name),
        Branching::Unbranched => "UNBRANCHED".to_string(),
    }
}

/// Whether two branch declarations name the same exact branch (or are both unbranched).
pub fn same_branching(a: &Branching, b: &Branching) -> bool {
    match (a, b) {
        (Branching::BranchedBy(x), Branching::BranchedBy(y)) => x.name == y.name,
        (Branching::Unbranched, Branching::Unbranched) => true,
        _ => false,
    }
}

/// Checks a node-level predicate over the input row — an ingestor's `FILTER WHERE`, a
/// processor's or emitter's `FROM <relay> WHERE` and `FILTER WHERE`: a BOOL reading `input.x`,
/// `message.x` or a bare `x` (all the input row), `metadata.`, `branch.` and the headers the
/// node offers. `what` names the clause in messages (`FILTER WHERE`).
pub fn check_filter(
    inputs: &RouteInputs<'_>,
    expr: &Expr,
    what: &str,
) -> Result<TypedExpr, CatalogError> {
    let none = BTreeMap::new();
    let reads = Reads::new(inputs, Position::Filter, None, &none);
    check_bool(&reads, inputs, expr, what)
}
