//! Rendering of `ALTER <processor kind>`: the head on line 0, then each operation at indent 1
//! in written order, a comma closing every operation but the last (on its last line).

use super::{
    fmt_exprs, fmt_extent, fmt_match, fmt_rejected, fmt_resource, fmt_timeout, write_tensor_inputs,
    write_tensor_outputs,
};
use crate::ast::processor::{AlterOp, AlterProcessor, Side};
use crate::ast::Attachment;
use crate::render::route::{
    fmt_branching, fmt_collect, fmt_general_error, fmt_input, fmt_state_dependency,
    fmt_state_policy, write_route_with,
};
use crate::render::{fmt_duration, fmt_expr, fmt_size, quote, Writer};

pub(super) fn render(w: &mut Writer, a: &AlterProcessor) {
    w.line(
        0,
        format!("ALTER {} {}", a.kind.keywords().join(" "), a.name),
    );
    for (i, op) in a.ops.iter().enumerate() {
        write_op(w, op);
        if i + 1 < a.ops.len() {
            w.append(",");
        }
    }
}

/// `LEFT ` / `RIGHT ` before a correlator side's keyword, nothing otherwise.
fn side(s: &Option<Side>) -> &'static str {
    match s {
        Some(Side::Left) => "LEFT ",
        Some(Side::Right) => "RIGHT ",
        None => "",
    }
}

fn write_op(w: &mut Writer, op: &AlterOp) {
    let text = match op {
        AlterOp::AddFrom { side: s, input } => format!("ADD {}FROM {}", side(s), fmt_input(input)),
        AlterOp::DropFrom { side: s, relay } => format!("DROP {}FROM {relay}", side(s)),
        AlterOp::AlterFrom {
            side: s,
            relay,
            filter,
        } => match filter {
            Some(e) => format!("ALTER {}FROM {relay} SET WHERE {}", side(s), fmt_expr(e)),
            None => format!("ALTER {}FROM {relay} DROP WHERE", side(s)),
        },
        AlterOp::SetCollect { side: s, collect } => {
            format!("SET {}COLLECT FOR {}", side(s), fmt_collect(collect))
        }
        AlterOp::DropCollect { side: s } => format!("DROP {}COLLECT", side(s)),
        AlterOp::SetFilter(e) => format!("SET FILTER WHERE {}", fmt_expr(e)),
        AlterOp::DropFilter => "DROP FILTER WHERE".into(),
        AlterOp::SetAttachment(Attachment::Attached) => "SET ATTACHED".into(),
        AlterOp::SetAttachment(Attachment::Detached) => "SET DETACHED".into(),
        AlterOp::SetBranching(b) => format!("SET {}", fmt_branching(b)),
        AlterOp::AddState(d) => format!("ADD MATERIALIZED STATE {}", fmt_state_dependency(d)),
        AlterOp::DropState(relay) => format!("DROP MATERIALIZED STATE {relay}"),
        AlterOp::AlterState(d) => format!(
            "ALTER MATERIALIZED STATE {} SET {}",
            d.relay,
            fmt_state_policy(&d.policy)
        ),
        AlterOp::AddRoute(route) => return write_route_with(w, 1, "ADD ROUTE TO", route),
        AlterOp::ReplaceRoute(route) => return write_route_with(w, 1, "REPLACE ROUTE TO", route),
        AlterOp::DropRoute(relay) => format!("DROP ROUTE TO {relay}"),
        AlterOp::SetDeduplicateOn(exprs) => format!("SET DEDUPLICATE ON {}", fmt_exprs(exprs)),
        AlterOp::SetMaxTime(d) => format!("SET MAX TIME {}", fmt_duration(*d)),
        AlterOp::SetBy(exprs) => format!("SET BY {}", fmt_exprs(exprs)),
        AlterOp::SetWidth(e) => format!("SET WIDTH {}", fmt_extent(*e)),
        AlterOp::SetStep(e) => format!("SET STEP {}", fmt_extent(*e)),
        AlterOp::SetMaxStateSize(s) => format!("SET MAX STATE SIZE {}", fmt_size(*s)),
        AlterOp::DropMaxStateSize => "DROP MAX STATE SIZE".into(),
        AlterOp::SetResource {
            resource,
            version,
            file,
        } => {
            let file = file
                .as_ref()
                .map(|f| format!(" FILE {}", quote(f)))
                .unwrap_or_default();
            format!("SET {}{file}", fmt_resource(resource, *version))
        }
        AlterOp::SetInputs(inputs) => return write_tensor_inputs(w, 1, "SET INPUTS", inputs),
        AlterOp::SetOutputSchema(outputs) => {
            return write_tensor_outputs(w, 1, "SET OUTPUT SCHEMA", outputs)
        }
        AlterOp::SetMaxFuel(n) => format!("SET MAX FUEL {n}"),
        AlterOp::SetMaxMemory(s) => format!("SET MAX MEMORY {}", fmt_size(*s)),
        AlterOp::SetOnRejectedState(p) => format!("SET ON REJECTED STATE {}", fmt_rejected(*p)),
        AlterOp::SetOnGlobalError(p) => format!("SET ON GLOBAL ERROR {}", fmt_general_error(*p)),
        AlterOp::SetCorrelateWhere(e) => format!("SET CORRELATE WHERE {}", fmt_expr(e)),
        AlterOp::SetMatch(m) => format!("SET MATCH {}", fmt_match(*m)),
        AlterOp::SetCorrelationTimeout(t) => {
            format!("SET ON CORRELATION TIMEOUT {}", fmt_timeout(*t))
        }
        AlterOp::SetSource(relay) => format!("SET MATERIALIZED STATE {relay}"),
        AlterOp::SetEach(d) => format!("SET EACH {}", fmt_duration(*d)),
    };
    w.line(1, text);
}
