//! A CORRELATOR's plan (spec "Correlator"): which relays feed its LEFT and RIGHT sides, each
//! input's WHERE over its side, the CORRELATE WHERE program over a (left row, right row) pair,
//! MATCH mode, MAX TIME and the per-side ON CORRELATION TIMEOUT actions.
//!
//! A correlator has no input row of its own: its routes, and CORRELATE WHERE, read a *pair*.
//! The plan gives the pair one flat layout — every left field, then every right field — whose
//! columns are named `left.<field>` and `right.<field>` ([`route::pair_field_name`]; NSPL
//! identifiers hold no dot, so these names never meet a real field). The shared resolvers read
//! `left.x` / `right.x` through those names, so routes, route WHERE and `ON MESSAGE ERROR SEND
//! TO` compile with the ordinary route compiler over the pair as their input, and a side's input
//! WHERE compiles over that side's columns alone (a side batch has exactly that side's fields in
//! the same order).
//!
//! Each side's COLLECT FOR gathers each of that side's relays on its own per branch (spec: the
//! collection is independent for each source relay and concrete branch), so the plan lists a
//! collection group per collected relay ([`CorrelatePlan::collect`]).
//!
//! Refused here, naming the entity: the same relay on both sides (a frame would not say which
//! side it feeds).

use arrow_schema::SchemaRef;
use nervix_nspl::ast::expr::BinaryOp;
use nervix_nspl::ast::processor::{CorrelatorSide, MatchMode, ProcessorDef, TimeoutAction};
use nervix_shards::flush::FlushPolicy;

use super::{arrow_schema, route, Builder, InputPlan, PlanError, RelayId, TypedIndex};
use crate::types::{DataType, TypedExpr, TypedKind};
use crate::validate::route::Field;
use crate::vm::Program;

/// Which side of a correlator a relay feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Left,
    Right,
}

impl Side {
    /// The other side: the one a new row is matched against.
    pub fn other(self) -> Side {
        match self {
            Side::Left => Side::Right,
            Side::Right => Side::Left,
        }
    }

    /// `0` for LEFT, `1` for RIGHT (index of per-side arrays).
    pub fn index(self) -> usize {
        match self {
            Side::Left => 0,
            Side::Right => 1,
        }
    }

    /// The scope name expressions read the side through.
    pub fn scope(self) -> &'static str {
        match self {
            Side::Left => "left",
            Side::Right => "right",
        }
    }

    /// As written in statements and logs.
    pub fn keyword(self) -> &'static str {
        match self {
            Side::Left => "LEFT",
            Side::Right => "RIGHT",
        }
    }
}

/// How a correlator runs.
pub struct CorrelatePlan {
    /// Per relay the correlator consumes, the side it feeds.
    pub sides: Vec<(RelayId, Side)>,
    /// Per side (see [`Side::index`]): the side's fields as a side batch holds them.
    pub side_schemas: [SchemaRef; 2],
    /// Left columns then right columns, named `left.<f>` / `right.<f>`.
    pub pair_schema: SchemaRef,
    /// CORRELATE WHERE over the pair (source 0).
    pub condition: Program,
    /// The equality conjuncts of CORRELATE WHERE split per side ([`equality_keys`]): left
    /// programs over left columns, right programs over right columns, pairwise.
    pub keys: [Vec<Program>; 2],
    pub matching: MatchMode,
    pub max_time_ns: u64,
    /// ON CORRELATION TIMEOUT, per side.
    pub on_timeout: [TimeoutAction; 2],
    /// COLLECT FOR: one collection group per relay of a side that declares it.
    pub collect: Vec<(Vec<RelayId>, FlushPolicy)>,
    /// Identifies the side schemas, CORRELATE WHERE and MATCH a stored branch was taken
    /// under (see `exec::correlate_snapshot`).
    pub model: u64,
}

impl CorrelatePlan {
    /// The side `relay` feeds, if the correlator consumes it.
    pub fn side_of(&self, relay: RelayId) -> Option<Side> {
        self.sides
            .iter()
            .find(|(id, _)| *id == relay)
            .map(|(_, side)| *side)
    }
}

impl std::fmt::Debug for CorrelatePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorrelatePlan")
            .field("sides", &self.sides)
            .field("matching", &self.matching)
            .field("max_time_ns", &self.max_time_ns)
            .field("on_timeout", &self.on_timeout)
            .finish_non_exhaustive()
    }
}

/// The side an expression reads: `Some` when it reads at least one field, every field is of
/// that side, and nothing in it depends on more than the row (no nondeterministic, header or
/// side-effect call, no aggregate). Such an expression gives the same value whether evaluated
/// on the row alone or on any pair holding it.
fn reads_only(expr: &TypedExpr) -> Option<Side> {
    let mut side = None;
    let mut pure = true;
    expr.any(|node| {
        match &node.kind {
            TypedKind::Field(path) => {
                let this = match path.first().map(String::as_str) {
                    Some("left") if path.len() == 2 => Some(Side::Left),
                    Some("right") if path.len() == 2 => Some(Side::Right),
                    _ => None,
                };
                match (this, side) {
                    (None, _) => pure = false,
                    (Some(this), Some(seen)) if this != seen => pure = false,
                    (Some(this), _) => side = Some(this),
                }
            }
            TypedKind::Call { function, .. } => {
                pure &= !function.is_nondeterministic()
                    && !function.has_side_effects()
                    && !function.reads_headers();
            }
            TypedKind::Aggregate { .. } => pure = false,
            _ => {}
        }
        false
    });
    side.filter(|_| pure)
}

/// Whether `=` on values of this type is equality of their arrow-row encodings: exact scalar
/// types only (floats have `-0.0 = 0.0` with different bits, and NaN; lists may hold floats).
fn hashable(ty: &DataType) -> bool {
    !matches!(
        ty,
        DataType::F32 | DataType::F64 | DataType::Array(..) | DataType::Vec(_) | DataType::List(_)
    )
}

/// The `left.<expr> = right.<expr>` conjuncts of `condition` (either operand order), as
/// (left operand, right operand): the equality keys a correlator matches on before it
/// evaluates the whole condition (`exec::correlate`). Only top-level AND conjuncts count: the
/// condition can hold only when each of them does.
pub(crate) fn equality_keys(condition: &TypedExpr) -> Vec<(&TypedExpr, &TypedExpr)> {
    let mut keys = Vec::new();
    let mut conjuncts = vec![condition];
    while let Some(node) = conjuncts.pop() {
        let TypedKind::Binary { op, left, right } = &node.kind else {
            continue;
        };
        match op {
            BinaryOp::And => {
                conjuncts.push(right);
                conjuncts.push(left);
            }
            BinaryOp::Eq if hashable(&left.ty.data_type) => {
                match (reads_only(left), reads_only(right)) {
                    (Some(Side::Left), Some(Side::Right)) => keys.push((&**left, &**right)),
                    (Some(Side::Right), Some(Side::Left)) => keys.push((&**right, &**left)),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    keys
}

/// `fields` renamed into the pair layout of `side`.
fn pair_fields(side: Side, fields: &[Field]) -> Vec<Field> {
    fields
        .iter()
        .map(|f| Field {
            name: route::pair_field_name(side.scope(), &f.name),
            ty: f.ty.clone(),
        })
        .collect()
}

/// What a correlator definition plans into: the plan, its inputs (left ones first) and the
/// fields its routes read (the pair).
pub(super) struct Planned {
    pub plan: CorrelatePlan,
    pub inputs: Vec<InputPlan>,
    pub route_fields: Vec<Field>,
}

impl Builder<'_> {
    /// Plans `def`, a correlator.
    pub(super) fn correlator(
        &self,
        typed: &TypedIndex<'_>,
        def: &ProcessorDef,
        owner: &str,
    ) -> Result<Planned, PlanError> {
        let ProcessorDef::Correlator {
            left,
            right,
            condition,
            matching,
            max_time,
            on_timeout,
        } = def
        else {
            return Err(PlanError::Missing {
                entity: owner.to_string(),
                what: "the correlator definition".to_string(),
            });
        };
        let unsupported = |what: String| PlanError::Unsupported {
            entity: owner.to_string(),
            what,
        };
        let mut inputs = Vec::new();
        let mut sides = Vec::new();
        let mut side_fields: [Vec<Field>; 2] = [Vec::new(), Vec::new()];
        let mut collect = Vec::new();
        for (side, written) in [(Side::Left, left), (Side::Right, right)] {
            let fields = self.side_inputs(typed, side, written, &mut inputs, owner)?;
            for input in &inputs[sides.len()..] {
                if let Some(clause) = &written.collect {
                    collect.push((vec![input.relay], super::collect_policy(clause)));
                }
                if sides.iter().any(|(relay, _)| *relay == input.relay) {
                    return Err(unsupported(format!(
                        "relay '{}' on both the LEFT and RIGHT sides",
                        self.plan.relays[input.relay].name
                    )));
                }
                sides.push((input.relay, side));
            }
            side_fields[side.index()] = fields;
        }
        let mut route_fields = pair_fields(Side::Left, &side_fields[0]);
        route_fields.extend(pair_fields(Side::Right, &side_fields[1]));
        let model = super::work::state_model(
            &route_fields,
            &format!(
                "{} MATCH {matching:?}",
                nervix_nspl::render::fmt_expr(condition)
            ),
        );
        let condition_typed = typed.get(condition)?;
        let condition =
            typed.compile_typed(condition_typed, &route::input_resolver(&route_fields))?;
        let mut keys = [Vec::new(), Vec::new()];
        for (left_expr, right_expr) in equality_keys(condition_typed) {
            for (side, expr) in [(Side::Left, left_expr), (Side::Right, right_expr)] {
                let scoped = pair_fields(side, &side_fields[side.index()]);
                let program = typed.compile_typed(expr, &route::input_resolver(&scoped))?;
                keys[side.index()].push(program);
            }
        }
        Ok(Planned {
            plan: CorrelatePlan {
                sides,
                side_schemas: [arrow_schema(&side_fields[0]), arrow_schema(&side_fields[1])],
                pair_schema: arrow_schema(&route_fields),
                condition,
                keys,
                matching: *matching,
                max_time_ns: max_time.nanos,
                on_timeout: [on_timeout.left, on_timeout.right],
                collect,
                model,
            },
            inputs,
            route_fields,
        })
    }

    /// One side's inputs, appended to `inputs` with their WHERE compiled over the side's
    /// columns; returns the side's fields (validation gives every relay of a side one schema).
    fn side_inputs(
        &self,
        typed: &TypedIndex<'_>,
        side: Side,
        written: &CorrelatorSide,
        inputs: &mut Vec<InputPlan>,
        owner: &str,
    ) -> Result<Vec<Field>, PlanError> {
        let mut fields = Vec::new();
        for input in &written.inputs {
            let relay = self.relay_id(&input.relay.name, owner)?;
            fields = route::relay_fields_of(self, relay, owner)?;
            let filter = match &input.filter {
                Some(expr) => {
                    let scoped = pair_fields(side, &fields);
                    let program = typed.compile(expr, &route::input_resolver(&scoped))?;
                    Some(program)
                }
                None => None,
            };
            inputs.push(InputPlan { relay, filter });
        }
        Ok(fields)
    }
}
