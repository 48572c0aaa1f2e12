//! The expressions a sink evaluates per row — HTTP REQUEST's METHOD / PATH, KAFKA TOPIC's KEY
//! and every sink's `INVOKE write_header(name, value)` — compiled against the finalized
//! record, which is what reaches an emitter's queue.
//!
//! They read the sink's fields (`output.x`, `message.x` or bare `x`). `input.x` is the same
//! value only when the record is the input row unchanged (no SET, and no construction or an
//! INHERIT ALL without exceptions), so only then is it allowed; any other read is refused here,
//! because the queue no longer holds the input row.

use nervix_nspl::ast::emitter::CreateEmitter;
use nervix_nspl::ast::Expr;

use super::{PlanError, TypedIndex};
use crate::validate::route::Field;
use crate::vm::{ColumnSlot, Program};

/// Compiles sink expressions of one emitter.
pub(super) struct SinkExprs<'a, 't> {
    typed: &'a TypedIndex<'t>,
    create: &'a CreateEmitter,
    sink: &'a [Field],
    owner: &'a str,
}

impl<'a, 't> SinkExprs<'a, 't> {
    pub(super) fn new(
        typed: &'a TypedIndex<'t>,
        create: &'a CreateEmitter,
        sink: &'a [Field],
        owner: &'a str,
    ) -> SinkExprs<'a, 't> {
        SinkExprs {
            typed,
            create,
            sink,
            owner,
        }
    }

    fn resolve(&self, path: &[String]) -> Option<ColumnSlot> {
        let construction = &self.create.construction;
        let unchanged = construction.set.is_empty()
            && construction.inherit.as_ref().is_none_or(|inherit| {
                matches!(&inherit.fields, nervix_nspl::ast::InheritFields::All { except } if except.is_empty())
            });
        let name = match path {
            [name] => name,
            [scope, name] if scope == "output" || scope == "message" => name,
            [scope, name] if scope == "input" && unchanged => name,
            _ => return None,
        };
        self.sink
            .iter()
            .position(|f| &f.name == name)
            .map(|column| ColumnSlot {
                source: super::route::SOURCE_OUTPUT,
                column,
            })
    }

    fn refused(what: &str, error: PlanError) -> PlanError {
        match error {
            PlanError::Compile { entity, message } => PlanError::Unsupported {
                entity,
                what: format!(
                    "{what} reading something other than the finalized record ({message})"
                ),
            },
            other => other,
        }
    }

    /// One written expression (`what` names it in refusals: "METHOD", "KEY").
    pub(super) fn compile(&self, expr: &Expr, what: &str) -> Result<Program, PlanError> {
        self.typed
            .compile(expr, &|path: &[String]| self.resolve(path))
            .map_err(|error| Self::refused(what, error))
    }

    /// Every `INVOKE write_header(name, value)`, in written order.
    pub(super) fn headers(&self) -> Result<Vec<(Program, Program)>, PlanError> {
        let mut headers = Vec::with_capacity(self.create.construction.headers.len());
        for write in &self.create.construction.headers {
            // Validation types each write as one `write_header(name, value)` call.
            let call = self.typed.get_span(write.name.span.to(write.value.span))?;
            let crate::types::TypedKind::Call { args, .. } = &call.kind else {
                return Err(PlanError::Missing {
                    entity: self.owner.to_string(),
                    what: "the typed write_header call".to_string(),
                });
            };
            let [name, value] = args.as_slice() else {
                return Err(PlanError::Missing {
                    entity: self.owner.to_string(),
                    what: "write_header's two arguments".to_string(),
                });
            };
            let resolve = |path: &[String]| self.resolve(path);
            headers.push((
                self.typed
                    .compile_typed(name, &resolve)
                    .map_err(|e| Self::refused("a write_header name", e))?,
                self.typed
                    .compile_typed(value, &resolve)
                    .map_err(|e| Self::refused("a write_header value", e))?,
            ));
        }
        Ok(headers)
    }
}
