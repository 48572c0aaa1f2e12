//! What a field path means at each position of the construction timeline, as a
//! [`Scope`] for the type checker, and the checks every assigned or predicate value gets.
//!
//! | position | bare `x`, `message.x` | `output.x` | `input.x` |
//! |---|---|---|---|
//! | node filter | the input row | — | the input row |
//! | SET | working message: latest output value, else input field (bare: else generated) | initialized fields | yes |
//! | route WHERE | finalized output, no fallback | finalized output | no |
//! | emitter WHERE, sink | finalized output, no fallback | finalized output | yes |
//! | branch SET | working message after finalization | finalized output | yes |
//! | error SET | earlier fields of the error record | same | yes (not in windows) |
//!
//! `metadata.`, `relay_state.<relay>.`, `branch.`, `left.` and `right.` read what
//! [`RouteInputs`] offers at every position except that node filters read no `relay_state`
//! (state resolves after them); `error.` and `partial_output.` exist only in error SETs.

use std::collections::BTreeMap;

use nervix_nspl::ast::{Expr, Ident};

use super::{type_error, Field, RouteInputs};
use crate::catalog::CatalogError;
use crate::types::{check_expecting, DataType, ExprContext, FieldType, Scope, TypedExpr};

/// The structured error fields an error record reads as `error.<field>`.
pub(crate) const ERROR_FIELDS: [&str; 4] = ["reference", "code", "operation", "message"];

/// Where in the construction timeline an expression stands.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Position<'r> {
    /// A node-level predicate over the input row (FILTER WHERE, FROM … WHERE).
    Filter,
    /// A SET assignment of a route or an emitter's construction.
    Set,
    /// After finalization: a route WHERE (`input: false`), an emitter's WHERE or sink
    /// expression (`input: true`).
    Finalized { input: bool },
    /// `BRANCHED BY <branch> SET …`.
    BranchSet,
    /// `ON MESSAGE ERROR SEND TO <relay> SET …`; `partial_output` is the failed route's target.
    ErrorSet { partial_output: &'r [Field] },
}

/// The scope of one expression position.
pub(crate) struct Reads<'r> {
    inputs: &'r RouteInputs<'r>,
    position: Position<'r>,
    /// What the output fields belong to and their declarations (absent for node filters).
    target: Option<(&'r str, &'r [Field])>,
    /// Output fields initialized so far (for an error SET: the error record's), with the
    /// declared type of each.
    initialized: &'r BTreeMap<String, FieldType>,
}

fn find<'f>(fields: &'f [Field], name: &str) -> Option<&'f Field> {
    fields.iter().find(|f| f.name == name)
}

impl<'r> Reads<'r> {
    pub(crate) fn new(
        inputs: &'r RouteInputs<'r>,
        position: Position<'r>,
        target: Option<(&'r str, &'r [Field])>,
        initialized: &'r BTreeMap<String, FieldType>,
    ) -> Reads<'r> {
        Reads {
            inputs,
            position,
            target,
            initialized,
        }
    }

    fn node(&self) -> &str {
        &self.inputs.node
    }

    fn input_row(&self, name: &str, written: &str) -> Result<FieldType, String> {
        let Some(input) = self.inputs.input else {
            return Err(format!(
                "`{written}` cannot be read: {} has no input row",
                self.node()
            ));
        };
        find(input, name)
            .map(|f| f.ty.clone())
            .ok_or_else(|| format!("unknown field `{written}`: the input has no field '{name}'"))
    }

    /// An output field that is not initialized at this point.
    fn uninitialized(&self, name: &str, written: &str) -> String {
        match self.target {
            Some((_, fields)) if find(fields, name).is_some() => format!(
                "`{written}` reads '{name}' before it is initialized: INHERIT it or SET it earlier"
            ),
            Some((owner, _)) => format!("unknown field `{written}`: {owner} has no field '{name}'"),
            None => format!("`{written}` cannot be read here: no output exists yet"),
        }
    }

    /// The working message: the latest output value, else the input field, else (bare reads
    /// only) a generated value.
    fn working(&self, name: &str, written: &str, generated: bool) -> Result<FieldType, String> {
        if let Some(ty) = self.initialized.get(name) {
            return Ok(ty.clone());
        }
        if !self.inputs.window {
            if let Some(field) = self.inputs.input.and_then(|i| find(i, name)) {
                return Ok(field.ty.clone());
            }
        }
        if generated {
            if let Some(field) = find(self.inputs.generated, name) {
                return Ok(field.ty.clone());
            }
        }
        if self.inputs.window && self.inputs.input.is_some_and(|i| find(i, name).is_some()) {
            return Err(format!(
                "`{written}` would read the window's input rows, which exist only inside window \
                 aggregates: write input.{name} inside an aggregate, such as COUNT(input.{name})"
            ));
        }
        match self.target {
            Some((_, fields)) if find(fields, name).is_some() => Err(format!(
                "`{written}` reads '{name}' before it is initialized: it is not an input field, \
                 so INHERIT it or SET it earlier"
            )),
            Some((owner, _)) => Err(format!(
                "unknown field `{written}`: neither the input nor {owner} has a field '{name}'"
            )),
            None => self.input_row(name, written),
        }
    }

    fn finalized(&self, name: &str, written: &str) -> Result<FieldType, String> {
        self.initialized
            .get(name)
            .cloned()
            .ok_or_else(|| self.uninitialized(name, written))
    }

    fn error_record(&self, name: &str, written: &str) -> Result<FieldType, String> {
        self.initialized.get(name).cloned().ok_or_else(|| {
            format!(
                "`{written}` reads '{name}', which this error record has not set yet; \
                 read error.<field>, partial_output.<field> or input.<field>"
            )
        })
    }

    fn bare(&self, name: &str) -> Result<FieldType, String> {
        match self.position {
            Position::Filter => self.input_row(name, name),
            Position::Set => {
                if self.inputs.left.is_some() || self.inputs.right.is_some() {
                    return Err(format!(
                        "{} has no default input scope: read left.{name}, right.{name} or \
                         output.{name}",
                        self.node()
                    ));
                }
                self.working(name, name, true)
            }
            Position::BranchSet => self.working(name, name, true),
            Position::Finalized { .. } => self.finalized(name, name),
            Position::ErrorSet { .. } => self.error_record(name, name),
        }
    }

    fn message(&self, name: &str, written: &str) -> Result<FieldType, String> {
        match self.position {
            Position::Filter => self.input_row(name, written),
            Position::Set | Position::BranchSet => self.working(name, written, false),
            Position::Finalized { .. } => self.finalized(name, written),
            Position::ErrorSet { .. } => self.error_record(name, written),
        }
    }

    fn output(&self, name: &str, written: &str) -> Result<FieldType, String> {
        match self.position {
            Position::Filter => Err(format!(
                "`{written}` cannot be read in a node filter: it runs before any output is \
                 constructed"
            )),
            Position::ErrorSet { .. } => self.error_record(name, written),
            _ => self.finalized(name, written),
        }
    }

    fn input(&self, name: &str, written: &str) -> Result<FieldType, String> {
        match self.position {
            Position::Finalized { input: false } => Err(format!(
                "`{written}` cannot be read in a route WHERE: it reads the finalized output \
                 through bare fields, message. or output."
            )),
            Position::ErrorSet { .. } if self.inputs.window => Err(format!(
                "`{written}` cannot be read in a window's error record: an emission has no \
                 single input row"
            )),
            _ => self.input_row(name, written),
        }
    }

    fn metadata(&self, name: &str, written: &str) -> Result<FieldType, String> {
        if let Some(field) = find(self.inputs.metadata, name) {
            return Ok(field.ty.clone());
        }
        match self.inputs.metadata_source {
            Some(source) if self.inputs.metadata.is_empty() => Err(format!(
                "{source} ingestors provide no metadata, so `{written}` cannot be read"
            )),
            Some(source) => {
                let offered: Vec<String> = self
                    .inputs
                    .metadata
                    .iter()
                    .map(|f| format!("metadata.{}", f.name))
                    .collect();
                Err(format!(
                    "{source} ingestors provide {}, not `{written}`",
                    join_and(&offered)
                ))
            }
            None => Err(format!(
                "`{written}` cannot be read: metadata. exists only in ingestors whose source \
                 provides it"
            )),
        }
    }

    fn relay_state(&self, relay: &str, name: &str, written: &str) -> Result<FieldType, String> {
        if matches!(self.position, Position::Filter) {
            return Err(format!(
                "`{written}` cannot be read in a node filter: materialized state resolves after \
                 the node's filters"
            ));
        }
        let Some((_, fields)) = self.inputs.relay_state.iter().find(|(r, _)| r == relay) else {
            return Err(format!(
                "`{written}`: relay '{relay}' is not a materialized dependency of {}; declare \
                 USING MATERIALIZED STATE {relay}",
                self.node()
            ));
        };
        find(fields, name).map(|f| f.ty.clone()).ok_or_else(|| {
            format!("unknown field `{written}`: relay '{relay}' has no field '{name}'")
        })
    }

    fn branch(&self, name: &str, written: &str) -> Result<FieldType, String> {
        let Some(key) = self.inputs.branch else {
            return Err(format!(
                "`{written}` cannot be read: {} does not run inside a branch",
                self.node()
            ));
        };
        find(key, name).map(|f| f.ty.clone()).ok_or_else(|| {
            format!("unknown field `{written}`: the incoming branch has no key field '{name}'")
        })
    }

    fn side(&self, side: &str, name: &str, written: &str) -> Result<FieldType, String> {
        let fields = if side == "left" {
            self.inputs.left
        } else {
            self.inputs.right
        };
        let Some(fields) = fields else {
            return Err(format!(
                "`{written}` cannot be read: {side}. exists only in correlators"
            ));
        };
        find(fields, name).map(|f| f.ty.clone()).ok_or_else(|| {
            format!("unknown field `{written}`: the {side} input has no field '{name}'")
        })
    }

    fn error(&self, name: &str, written: &str) -> Result<FieldType, String> {
        if !matches!(self.position, Position::ErrorSet { .. }) {
            return Err(format!(
                "`{written}` can only be read in ON MESSAGE ERROR SEND TO … SET"
            ));
        }
        if ERROR_FIELDS.contains(&name) {
            return Ok(FieldType::required(DataType::String));
        }
        let offered: Vec<String> = ERROR_FIELDS.iter().map(|f| format!("error.{f}")).collect();
        Err(format!(
            "unknown error field `{written}`: error records offer {}",
            join_and(&offered)
        ))
    }

    fn partial_output(&self, name: &str, written: &str) -> Result<FieldType, String> {
        let Position::ErrorSet { partial_output } = self.position else {
            return Err(format!(
                "`{written}` can only be read in ON MESSAGE ERROR SEND TO … SET"
            ));
        };
        let field = find(partial_output, name).ok_or_else(|| {
            format!("unknown field `{written}`: the failed route's output has no field '{name}'")
        })?;
        Ok(FieldType {
            nullable: true,
            ..field.ty.clone()
        })
    }
}

/// `a`, `a and b`, `a, b and c`.
pub(crate) fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

const SCOPES: [&str; 10] = [
    "input",
    "message",
    "output",
    "metadata",
    "relay_state",
    "branch",
    "left",
    "right",
    "error",
    "partial_output",
];

impl Scope for Reads<'_> {
    fn field(&self, path: &[Ident]) -> Result<FieldType, String> {
        let names: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        let written = names.join(".");
        match names.as_slice() {
            [name] => self.bare(name),
            ["input", name] => self.input(name, &written),
            ["message", name] => self.message(name, &written),
            ["output", name] => self.output(name, &written),
            ["metadata", name] => self.metadata(name, &written),
            ["relay_state", relay, name] => self.relay_state(relay, name, &written),
            ["branch", name] => self.branch(name, &written),
            [side @ ("left" | "right"), name] => self.side(side, name, &written),
            ["error", name] => self.error(name, &written),
            ["partial_output", name] => self.partial_output(name, &written),
            ["relay_state", ..] => Err(format!(
                "`{written}` is not a field path: write relay_state.<relay>.<field>"
            )),
            [scope, ..] if SCOPES.contains(scope) => Err(format!(
                "`{written}` is not a field path: write {scope}.<field>"
            )),
            _ => Err(format!(
                "unknown field `{written}`: relay-qualified fields are invalid; read input., \
                 message., output., relay_state.<relay>., branch. or metadata. fields"
            )),
        }
    }
}

/// The expression context of a route position: the node's header rule, and window
/// aggregates where `aggregates` (a window route's SET).
pub(crate) fn context(inputs: &RouteInputs<'_>, aggregates: bool) -> ExprContext {
    ExprContext {
        aggregates,
        aggregate_arguments_read_input: aggregates,
        headers: inputs.headers.clone(),
        ..ExprContext::default()
    }
}

/// Checks a value assigned to `field` of `owner` (`what` names the clause: `SET`,
/// `DEFAULT`): exactly the field's type, not null into a required field, not SENSITIVE into a
/// non-sensitive one.
pub(crate) fn check_value(
    reads: &dyn Scope,
    ctx: &ExprContext,
    expr: &Expr,
    field: &Field,
    owner: &str,
    what: &str,
) -> Result<TypedExpr, CatalogError> {
    let expected = &field.ty.data_type;
    let typed = check_expecting(expr, reads, ctx, expected).map_err(|e| {
        if e.span == expr.span && e.message.starts_with("expected ") {
            let found = e
                .message
                .split("found ")
                .nth(1)
                .and_then(|rest| rest.split(':').next())
                .unwrap_or("another type");
            CatalogError::new(
                e.span,
                format!(
                    "{what} '{}': field '{}' of {owner} is {expected}, but the value is {found}: \
                     no implicit casts; cast with AS",
                    field.name, field.name
                ),
            )
        } else {
            type_error(e)
        }
    })?;
    if typed.ty.nullable && !field.ty.nullable {
        return Err(CatalogError::new(
            expr.span,
            format!(
                "{what} '{}': the value may be null, but field '{}' of {owner} is required \
                 (not OPTIONAL); use coalesce(…) or declare the field OPTIONAL",
                field.name, field.name
            ),
        ));
    }
    if typed.ty.sensitive && !field.ty.sensitive {
        return Err(CatalogError::new(
            expr.span,
            format!(
                "{what} '{}' would write a SENSITIVE value into non-sensitive field '{}' of \
                 {owner}; wrap it in leak_sensitive(…) to allow it",
                field.name, field.name
            ),
        ));
    }
    Ok(typed)
}

/// Checks a predicate (`what`: `WHERE`, `FILTER WHERE`): a BOOL, which may be null (a null
/// predicate drops the row).
pub(crate) fn check_bool(
    reads: &dyn Scope,
    inputs: &RouteInputs<'_>,
    expr: &Expr,
    what: &str,
) -> Result<TypedExpr, CatalogError> {
    let ctx = context(inputs, false);
    check_expecting(expr, reads, &ctx, &DataType::Bool).map_err(|e| {
        if e.span == expr.span && e.message.starts_with("expected BOOL, found ") {
            let found = e.message["expected BOOL, found ".len()..]
                .split(':')
                .next()
                .unwrap_or("another type");
            CatalogError::new(e.span, format!("{what} must be BOOL, found {found}"))
        } else {
            type_error(e)
        }
    })
}
