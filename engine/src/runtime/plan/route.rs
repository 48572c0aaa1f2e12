//! Compiling one route (or an emitter's construction) into a [`RoutePlan`]: which input column
//! each inherited output column takes, the ordered SET programs, the route WHERE, the outgoing
//! branch and the message error policy.
//!
//! Field reads are resolved at compile time to fixed columns, following the construction
//! timeline validation checks (`validate/route/reads.rs`): a SET at position *i* reads
//! `output.x` — and bare `x` / `message.x` once `x` was initialized before *i* — from the
//! output columns, and everything else from the input row. So the VM never looks a name up
//! while rows flow. Evaluation passes the sources in this order:
//!
//! | source | construction | error SET |
//! |---|---|---|
//! | 0 | input row | input row |
//! | 1 | output being built | failing route's partial output |
//! | 2 | — | `error.reference, code, operation, message` |
//! | 3 | — | the error record being built |
//! | 4 | `relay_state.*` of every materialized dependency | same |
//! | 5 | `metadata.*` of the source envelope (`runtime::envelope::METADATA_FIELDS`) | same |
//!
//! FILTER WHERE reads sources 0 (the input row) and 5. `read_header` / `read_headers` read the
//! envelope itself, which evaluation passes beside the sources.

use std::collections::HashSet;

use nervix_nspl::ast::{
    Assignment, Branching, Flush, Inherit, InheritFields, MessageErrorPolicy, Route, RouteBranching,
};
use nervix_shards::flush::FlushPolicy;

use super::{arrow_schema, Builder, PlanError, RelayId, TypedIndex};
use crate::validate::route::Field;
use crate::vm::{ColumnSlot, Program};
use arrow_schema::SchemaRef;

/// Source indices of evaluation (see the module table).
pub const SOURCE_INPUT: usize = 0;
pub const SOURCE_OUTPUT: usize = 1;
pub const SOURCE_ERROR: usize = 2;
pub const SOURCE_RECORD: usize = 3;
/// `relay_state.<relay>.<field>`: every dependency's columns, one after another.
pub const SOURCE_STATE: usize = 4;
/// `metadata.<field>`: the source envelope's metadata columns.
pub const SOURCE_METADATA: usize = 5;

/// `metadata.<field>` → its column of the envelope view (validation admits only the fields
/// the ingestor's source provides).
fn metadata_slot(path: &[String]) -> Option<ColumnSlot> {
    match path {
        [scope, name] if scope == "metadata" => crate::runtime::envelope::METADATA_FIELDS
            .iter()
            .position(|f| f == name)
            .map(|column| ColumnSlot {
                source: SOURCE_METADATA,
                column,
            }),
        _ => None,
    }
}

/// Whether an ingestor's programs read its source envelope (headers or `metadata.`): only
/// then does its intake capture one.
pub(crate) fn reads_envelope(filter: Option<&Program>, routes: &[RoutePlan]) -> bool {
    let reads = |p: &Program| p.reads_headers() || p.reads_source(SOURCE_METADATA);
    filter.is_some_and(reads)
        || routes.iter().any(|route| {
            route.sets.iter().any(|(_, p)| reads(p))
                || route.filter.as_ref().is_some_and(reads)
                || matches!(&route.branch, BranchOut::Construct { keys, .. }
                    if keys.iter().flatten().any(reads))
                || matches!(&route.on_error, ErrorPlan::SendTo(error)
                    if error.sets.iter().any(|(_, p)| reads(p)))
        })
}

/// The materialized dependencies a node's expressions may read, in declaration order, with
/// their relay's fields; dependency `i`'s columns start at the sum of the widths before it.
#[derive(Debug, Clone, Default)]
pub struct StateLayout {
    pub deps: Vec<(String, Vec<Field>)>,
}

impl StateLayout {
    fn slot(&self, relay: &str, field: &str) -> Option<ColumnSlot> {
        let mut offset = 0;
        for (name, fields) in &self.deps {
            if name == relay {
                return position(fields, field).map(|column| ColumnSlot {
                    source: SOURCE_STATE,
                    column: offset + column,
                });
            }
            offset += fields.len();
        }
        None
    }
}

/// The outgoing branch of a route's rows.
pub enum BranchOut {
    Unbranched,
    /// The node runs inside a branch and its output keeps it (node-wide contract, or a
    /// reingestor route that keeps its incoming branch).
    Keep {
        branch: super::BranchId,
    },
    /// `BRANCHED BY b SET …`: one program per key field (None: an optional key field not set,
    /// which is null).
    Construct {
        branch: super::BranchId,
        keys: Vec<Option<Program>>,
    },
}

/// An error record's construction for `ON MESSAGE ERROR SEND TO`.
pub struct ErrorSetPlan {
    pub relay: RelayId,
    pub schema: SchemaRef,
    pub sets: Vec<(usize, Program)>,
}

pub enum ErrorPlan {
    Ignore,
    Log,
    SendTo(ErrorSetPlan),
}

/// One compiled route.
pub struct RoutePlan {
    /// `ingestor 'orders_in' route to 'orders'`, for logs and errors.
    pub label: String,
    pub target: RelayId,
    pub schema: SchemaRef,
    /// Which output columns are required (non-nullable).
    pub inherit: Vec<(usize, usize)>,
    pub sets: Vec<(usize, Program)>,
    pub filter: Option<Program>,
    pub branch: BranchOut,
    pub flush: FlushPolicy,
    pub on_error: ErrorPlan,
}

fn position(fields: &[Field], name: &str) -> Option<usize> {
    fields.iter().position(|f| f.name == name)
}

/// The input column name a correlator's `left.<field>` / `right.<field>` is read through: a
/// correlator's input is the matched pair, its left columns then its right columns under these
/// names (`plan::correlate`). NSPL identifiers hold no dot, so no other input has such a name.
pub(crate) fn pair_field_name(side: &str, field: &str) -> String {
    format!("{side}.{field}")
}

/// `left.x` / `right.x`: the pair column it names, when the input is a correlator's pair.
fn side_slot(input: &[Field], path: &[String]) -> Option<ColumnSlot> {
    match path {
        [side, name] if side == "left" || side == "right" => {
            position(input, &pair_field_name(side, name)).map(|column| ColumnSlot {
                source: SOURCE_INPUT,
                column,
            })
        }
        _ => None,
    }
}

/// `branch.x`: the key column the shard appended after the input's (`branch_scope`).
fn branch_slot(input: &[Field], path: &[String]) -> Option<ColumnSlot> {
    match path {
        [scope, name] if scope == "branch" => {
            position(input, &super::branch_scope::branch_field_name(name)).map(|column| {
                ColumnSlot {
                    source: SOURCE_INPUT,
                    column,
                }
            })
        }
        _ => None,
    }
}

/// Node filters: every scope reads the input row.
pub(crate) fn input_resolver(fields: &[Field]) -> impl Fn(&[String]) -> Option<ColumnSlot> + '_ {
    move |path: &[String]| {
        if let Some(slot) = metadata_slot(path)
            .or_else(|| side_slot(fields, path))
            .or_else(|| branch_slot(fields, path))
        {
            return Some(slot);
        }
        let name = match path {
            [name] => name,
            [scope, name] if scope == "input" || scope == "message" => name,
            _ => return None,
        };
        position(fields, name).map(|column| ColumnSlot {
            source: SOURCE_INPUT,
            column,
        })
    }
}

/// A construction position: `initialized` lists the output fields set before it;
/// `finalized` positions read bare names from the output only.
fn construction_resolver<'a>(
    input: &'a [Field],
    output: &'a [Field],
    initialized: &'a HashSet<String>,
    finalized: bool,
    state: &'a StateLayout,
) -> impl Fn(&[String]) -> Option<ColumnSlot> + 'a {
    move |path: &[String]| {
        if let [scope, relay, field] = path {
            if scope == "relay_state" {
                return state.slot(relay, field);
            }
        }
        if let Some(slot) = metadata_slot(path)
            .or_else(|| side_slot(input, path))
            .or_else(|| branch_slot(input, path))
        {
            return Some(slot);
        }
        let from_output = |name: &str| {
            position(output, name).map(|column| ColumnSlot {
                source: SOURCE_OUTPUT,
                column,
            })
        };
        let from_input = |name: &str| {
            position(input, name).map(|column| ColumnSlot {
                source: SOURCE_INPUT,
                column,
            })
        };
        match path {
            [scope, name] if scope == "input" => from_input(name),
            [scope, name] if scope == "output" => from_output(name),
            [name] | [_, name] if path.len() == 1 || path[0] == "message" => {
                if finalized || initialized.contains(name.as_str()) {
                    from_output(name)
                } else {
                    from_input(name)
                }
            }
            _ => None,
        }
    }
}

const ERROR_FIELDS: [&str; 4] = ["reference", "code", "operation", "message"];

fn error_resolver<'a>(
    input: &'a [Field],
    partial: &'a [Field],
    record: &'a [Field],
    state: &'a StateLayout,
) -> impl Fn(&[String]) -> Option<ColumnSlot> + 'a {
    move |path: &[String]| match path {
        [scope, relay, field] if scope == "relay_state" => state.slot(relay, field),
        [scope, _] if scope == "metadata" => metadata_slot(path),
        [scope, _] if scope == "left" || scope == "right" => side_slot(input, path),
        [scope, name] if scope == "input" => position(input, name).map(|column| ColumnSlot {
            source: SOURCE_INPUT,
            column,
        }),
        [scope, name] if scope == "partial_output" => {
            position(partial, name).map(|column| ColumnSlot {
                source: SOURCE_OUTPUT,
                column,
            })
        }
        [scope, name] if scope == "error" => {
            ERROR_FIELDS
                .iter()
                .position(|f| f == name)
                .map(|column| ColumnSlot {
                    source: SOURCE_ERROR,
                    column,
                })
        }
        [name] | [_, name] if path.len() == 1 || path[0] == "message" || path[0] == "output" => {
            position(record, name).map(|column| ColumnSlot {
                source: SOURCE_RECORD,
                column,
            })
        }
        _ => None,
    }
}

fn inherit_columns(
    inherit: Option<&Inherit>,
    input: &[Field],
    output: &[Field],
) -> Vec<(usize, usize)> {
    let Some(inherit) = inherit else {
        return Vec::new();
    };
    let names: Vec<&str> = match &inherit.fields {
        InheritFields::All { except } => input
            .iter()
            .map(|f| f.name.as_str())
            .filter(|name| !except.iter().any(|e| e.name == *name))
            .collect(),
        InheritFields::Only(list) => list.iter().map(|i| i.name.as_str()).collect(),
    };
    names
        .into_iter()
        .filter_map(|name| Some((position(output, name)?, position(input, name)?)))
        .collect()
}

fn compile_sets(
    typed: &TypedIndex<'_>,
    input: &[Field],
    output: &[Field],
    initialized: &mut HashSet<String>,
    set: &[Assignment],
    state: &StateLayout,
) -> Result<Vec<(usize, Program)>, PlanError> {
    let mut sets = Vec::with_capacity(set.len());
    for assignment in set {
        let program = {
            let resolve = construction_resolver(input, output, initialized, false, state);
            typed.compile(&assignment.value, &resolve)?
        };
        let column =
            position(output, &assignment.target.name).ok_or_else(|| PlanError::Missing {
                entity: typed.entity().to_string(),
                what: format!("output field '{}'", assignment.target.name),
            })?;
        sets.push((column, program));
        initialized.insert(assignment.target.name.clone());
    }
    Ok(sets)
}

fn flush_policy(flush: Option<&Flush>) -> FlushPolicy {
    match flush {
        Some(Flush::Each {
            interval,
            max_batch_size,
        }) => FlushPolicy::Each {
            interval_ns: interval.nanos,
            max_batch_bytes: max_batch_size.bytes,
        },
        Some(Flush::Immediate) => FlushPolicy::Immediate,
        // Routes that take no FLUSH (window processors: the window decides when a record
        // exists) publish what they build at once.
        None => FlushPolicy::AT_ONCE,
    }
}

fn error_plan(
    builder: &Builder<'_>,
    typed: &TypedIndex<'_>,
    input: &[Field],
    partial: &[Field],
    policy: &MessageErrorPolicy,
    state: &StateLayout,
) -> Result<ErrorPlan, PlanError> {
    Ok(match policy {
        MessageErrorPolicy::Ignore => ErrorPlan::Ignore,
        MessageErrorPolicy::Log => ErrorPlan::Log,
        MessageErrorPolicy::SendTo { relay, set } => {
            let owner = typed.entity().to_string();
            let relay_id = builder.relay_id(&relay.name, &owner)?;
            let schema = builder.plan.relays[relay_id].schema.clone();
            let record: Vec<Field> = relay_fields_of(builder, relay_id, &owner)?;
            let resolve = error_resolver(input, partial, &record, state);
            let mut sets = Vec::with_capacity(set.len());
            for assignment in set {
                let column = position(&record, &assignment.target.name).ok_or_else(|| {
                    PlanError::Missing {
                        entity: owner.clone(),
                        what: format!("error relay field '{}'", assignment.target.name),
                    }
                })?;
                sets.push((column, typed.compile(&assignment.value, &resolve)?));
            }
            ErrorPlan::SendTo(ErrorSetPlan {
                relay: relay_id,
                schema,
                sets,
            })
        }
    })
}

pub(super) fn relay_fields_of(
    builder: &Builder<'_>,
    relay: RelayId,
    owner: &str,
) -> Result<Vec<Field>, PlanError> {
    let name = builder.plan.relays[relay].name.clone();
    let schema = match builder
        .domain
        .entities
        .get(&crate::catalog::EntityKey::new(
            nervix_nspl::ObjectKind::Relay,
            name.clone(),
        ))
        .map(|e| &e.definition)
    {
        Some(nervix_nspl::Statement::Catalog(nervix_nspl::ast::CatalogStmt::CreateRelay(r))) => {
            r.schema.name.clone()
        }
        _ => {
            return Err(PlanError::Missing {
                entity: owner.to_string(),
                what: format!("relay '{name}'"),
            })
        }
    };
    builder.schema_fields(&schema, owner)
}

/// Compiles a processor's or ingestor's route. `incoming` is the node-wide contract (None for
/// ingestors, and for reingestors whose routes construct their branch).
pub(crate) fn compile(
    builder: &Builder<'_>,
    typed: &TypedIndex<'_>,
    input: &[Field],
    route: &Route,
    incoming: Option<&Branching>,
    state: &StateLayout,
) -> Result<RoutePlan, PlanError> {
    let owner = typed.entity().to_string();
    let target = builder.relay_id(&route.target.name, &owner)?;
    let output = relay_fields_of(builder, target, &owner)?;
    let inherit = inherit_columns(route.inherit.as_ref(), input, &output);
    let mut initialized: HashSet<String> = inherit
        .iter()
        .map(|(out, _)| output[*out].name.clone())
        .collect();
    let sets = compile_sets(typed, input, &output, &mut initialized, &route.set, state)?;
    let filter = match &route.filter {
        Some(expr) => {
            let resolve = construction_resolver(input, &output, &initialized, true, state);
            Some(typed.compile(expr, &resolve)?)
        }
        None => None,
    };
    let relay_branch = builder.plan.relays[target].branch;
    let branch = match (&route.branching, incoming) {
        (Some(RouteBranching::BranchedBy { branch, set }), _) if !set.is_empty() => {
            let id = builder.branch_id(&branch.name, &owner)?;
            let keys = builder.plan.branches[id]
                .key_fields
                .iter()
                .map(|key| {
                    set.iter()
                        .find(|a| a.target.name == *key.name())
                        .map(|a| {
                            // The working message after construction: fields the route set
                            // read the output, the others the input row (as validation types
                            // them).
                            let resolve =
                                construction_resolver(input, &output, &initialized, false, state);
                            typed.compile(&a.value, &resolve)
                        })
                        .transpose()
                })
                .collect::<Result<Vec<_>, _>>()?;
            BranchOut::Construct { branch: id, keys }
        }
        (Some(RouteBranching::Unbranched), _) | (None, Some(Branching::Unbranched)) => {
            BranchOut::Unbranched
        }
        _ => match relay_branch {
            Some(id) => BranchOut::Keep { branch: id },
            None => BranchOut::Unbranched,
        },
    };
    let on_error = error_plan(builder, typed, input, &output, &route.on_error, state)?;
    Ok(RoutePlan {
        label: format!("{owner} route to '{}'", route.target.name),
        target,
        schema: arrow_schema(&output),
        inherit,
        sets,
        filter,
        branch,
        flush: flush_policy(route.flush.as_ref()),
        on_error,
    })
}

/// Compiles an emitter's construction into the sink's fields.
pub(crate) fn compile_emitter(
    builder: &Builder<'_>,
    typed: &TypedIndex<'_>,
    input: &[Field],
    sink: &[Field],
    create: &nervix_nspl::ast::emitter::CreateEmitter,
    state: &StateLayout,
) -> Result<RoutePlan, PlanError> {
    let construction = &create.construction;
    let inherit = if construction.inherit.is_none() && construction.set.is_empty() {
        // No construction: the rows are written as the relay holds them.
        (0..sink.len())
            .filter_map(|out| Some((out, position(input, &sink[out].name)?)))
            .collect()
    } else {
        inherit_columns(construction.inherit.as_ref(), input, sink)
    };
    let mut initialized: HashSet<String> = inherit
        .iter()
        .map(|(out, _)| sink[*out].name.clone())
        .collect();
    let sets = compile_sets(
        typed,
        input,
        sink,
        &mut initialized,
        &construction.set,
        state,
    )?;
    let filter = match &construction.filter {
        Some(expr) => {
            let resolve = construction_resolver(input, sink, &initialized, true, state);
            Some(typed.compile(expr, &resolve)?)
        }
        None => None,
    };
    let on_error = error_plan(builder, typed, input, sink, &create.on_message_error, state)?;
    // An emitter consumes per concrete branch: a frame it writes holds one branch.
    let incoming = create
        .inputs
        .first()
        .and_then(|i| builder.plan.relay_id(&i.relay.name))
        .and_then(|relay| builder.plan.relays[relay].branch);
    let branch = match incoming {
        Some(branch) => BranchOut::Keep { branch },
        None => BranchOut::Unbranched,
    };
    Ok(RoutePlan {
        label: format!("{} sink", typed.entity()),
        target: usize::MAX,
        schema: arrow_schema(sink),
        inherit,
        sets,
        filter,
        branch,
        flush: flush_policy(Some(&create.flush)),
        on_error,
    })
}

#[cfg(test)]
mod tests {
    use nervix_shards::flush::{Chunk, Now, RouteFlusher};

    use super::*;

    #[test]
    fn a_route_without_flush_publishes_every_append_at_once() {
        let mut buffer = RouteFlusher::new(flush_policy(None));
        for (bytes, rows) in [(8, 1), (1, 1), (4_096, 512)] {
            let actions = buffer.append(Chunk::new(bytes, rows), Now::new(0, 0));
            assert!(!actions.before.is_flush(), "nothing was waiting");
            assert!(actions.after.is_flush(), "{rows} rows left at once");
            assert_eq!(buffer.next_deadline(), None, "nothing stays buffered");
        }
    }
}
