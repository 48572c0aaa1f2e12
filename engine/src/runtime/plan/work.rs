//! The node-specific work of a processor (spec "Processing order", step 3): what runs between
//! the filters and the routes. Junctions and reingestors do none; a deduplicator drops rows
//! whose key it saw within MAX TIME; a reorderer holds rows and releases them in BY order; a
//! generator has no input and runs its routes on a cadence instead; windows and correlators
//! plan in their own modules (`window`, `correlate`).
//!
//! Key and ordering expressions read the input row (`input.x`, bare names) like a node filter,
//! compiled here once for every branch and shard.

use nervix_nspl::ast::processor::ProcessorDef;

use super::{route, Builder, PlanError, TypedIndex};
use crate::validate::route::Field;
use crate::vm::Program;

/// What a processor does to its filtered input before the routes.
#[derive(Debug)]
pub enum NodeWork {
    /// Junctions and reingestors: rows go straight to the routes.
    Pass,
    /// DEDUPLICATOR: a row whose `DEDUPLICATE ON` values were first seen less than
    /// `max_time_ns` ago in its branch is dropped (and acknowledged).
    Dedup {
        keys: Vec<Program>,
        max_time_ns: u64,
        /// Identifies the key expressions: a keyspace stored under others is purged (spec:
        /// changing DEDUPLICATE ON purges the keyspace).
        key_model: u64,
    },
    /// REORDERER: rows are held per branch and released in `BY` order after at most
    /// `max_time_ns` (see `exec::reorder`).
    Reorder {
        by: Vec<Program>,
        max_time_ns: u64,
        /// Identifies the input schema and BY expressions a stored buffer was taken under
        /// (see `exec::reorder_snapshot`).
        model: u64,
    },
    /// WINDOW PROCESSOR: rows are retained per branch and aggregated when a window is due
    /// (see `shard::graph::window`).
    Window(Box<super::WindowPlan>),
    /// CORRELATOR: rows wait per branch and side for a partner on the other side, for at
    /// most MAX TIME (see `exec::correlate`).
    Correlate(Box<super::CorrelatePlan>),
    /// GENERATOR: no input; every `each_ns` of domain time (and at once for a branch whose
    /// state is new) the routes run once per branch over `source`'s materialized row (see
    /// `shard::graph::generator`).
    Generate {
        source: super::RelayId,
        each_ns: u64,
    },
}

impl<'d> Builder<'d> {
    /// The node work of `def`, whose filtered input has `fields`.
    pub(super) fn node_work(
        &self,
        typed: &TypedIndex<'_>,
        def: &ProcessorDef,
        fields: &[Field],
        owner: &str,
    ) -> Result<NodeWork, PlanError> {
        let compile_all = |exprs: &[nervix_nspl::ast::Expr]| {
            exprs
                .iter()
                .map(|expr| typed.compile(expr, &route::input_resolver(fields)))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(match def {
            ProcessorDef::Junction { .. } | ProcessorDef::Reingestor { .. } => NodeWork::Pass,
            ProcessorDef::Deduplicator { on, max_time, .. } => NodeWork::Dedup {
                keys: compile_all(on)?,
                max_time_ns: max_time.nanos,
                key_model: xxhash_rust::xxh3::xxh3_64(
                    on.iter()
                        .map(nervix_nspl::render::fmt_expr)
                        .collect::<Vec<_>>()
                        .join(", ")
                        .as_bytes(),
                ),
            },
            ProcessorDef::Reorderer { by, max_time, .. } => NodeWork::Reorder {
                by: compile_all(by)?,
                max_time_ns: max_time.nanos,
                model: state_model(
                    fields,
                    &by.iter()
                        .map(nervix_nspl::render::fmt_expr)
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
            },
            other => {
                return Err(PlanError::Unsupported {
                    entity: owner.to_string(),
                    what: format!("the {} processor", crate::catalog::kind_name(other.kind())),
                })
            }
        })
    }
}

/// A tag for the model a snapshot of held rows was taken under: the held rows' fields (name
/// and type, in order) and `rules` (the rendered expressions that gave the held rows their
/// derived values). A stored state whose tag differs is not restored.
pub(super) fn state_model(fields: &[Field], rules: &str) -> u64 {
    let mut text = String::new();
    for field in fields {
        text.push_str(&format!("{}:{:?};", field.name, field.ty));
    }
    text.push('|');
    text.push_str(rules);
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}
