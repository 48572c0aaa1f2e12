//! Console subscriptions as the data plane keeps them: which relay, the type-checked WHERE,
//! the sample rate and the session's line queue. The data plane re-attaches every
//! subscription of a domain each time the domain's graph is (re)deployed, so a subscription
//! made before START, or kept across an ALTER, streams as soon as rows flow.

use nervix_nspl::ast::Expr;
use nervix_nspl::ast::Ident;

use crate::types::{
    check_expecting, DataType, ExprContext, FieldType, Scope, TypeError, TypedExpr,
};
use crate::validate::route::Field;

/// One registered subscription.
#[derive(Clone)]
pub struct SubscriptionSpec {
    /// The subscription's name, prefixed to its lines.
    pub name: String,
    pub domain: String,
    pub relay: String,
    pub relay_fields: Vec<Field>,
    pub filter: Option<TypedExpr>,
    pub sample_rate: f64,
    pub sink: tokio::sync::mpsc::Sender<String>,
}

struct RelayScope<'f>(&'f [Field]);

impl Scope for RelayScope<'_> {
    fn field(&self, path: &[Ident]) -> Result<FieldType, String> {
        let name = match path {
            [name] => name,
            [scope, name] if scope.name == "message" || scope.name == "input" => name,
            _ => {
                let written: Vec<&str> = path.iter().map(|p| p.name.as_str()).collect();
                return Err(format!(
                    "`{}` cannot be read in a subscription: it reads the relay's fields",
                    written.join(".")
                ));
            }
        };
        self.0
            .iter()
            .find(|f| f.name == name.name)
            .map(|f| f.ty.clone())
            .ok_or_else(|| format!("unknown field `{}`: the relay has no such field", name.name))
    }
}

/// Type-checks a subscription's WHERE over the relay's fields.
pub fn check_filter(fields: &[Field], expr: &Expr) -> Result<TypedExpr, TypeError> {
    check_expecting(
        expr,
        &RelayScope(fields),
        &ExprContext::default(),
        &DataType::Bool,
    )
}

/// Compiles a checked filter against the relay's columns.
pub fn compile_filter(spec: &SubscriptionSpec) -> Result<Option<crate::vm::Program>, String> {
    let Some(filter) = &spec.filter else {
        return Ok(None);
    };
    let fields = &spec.relay_fields;
    let resolve = |path: &[String]| {
        let name = path.last()?;
        fields
            .iter()
            .position(|f| &f.name == name)
            .map(|column| crate::vm::ColumnSlot { source: 0, column })
    };
    crate::vm::Program::compile(filter, &resolve)
        .map(Some)
        .map_err(|e| e.to_string())
}
