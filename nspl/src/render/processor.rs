//! Rendering of processor statements: CREATE in the spec's clause order, ALTER with one
//! operation per line (in [`alter`]), and RESET WASM PROCESSOR on one line.

mod alter;

use super::route::{
    fmt_assignment, fmt_branching, write_collect, write_inputs, write_routes,
    write_state_dependencies,
};
use super::{fmt_duration, fmt_expr, fmt_size, fmt_type, fmt_version, quote, Writer};
use crate::ast::processor::{
    CorrelationTimeout, CreateProcessor, MatchMode, ProcessorDef, ProcessorStmt,
    RejectedStatePolicy, RelayFeed, ResetScope, ResetWasm, ResourceFile, Tensor, TensorInput,
    TimeoutAction, WindowExtent,
};
use crate::ast::{Attachment, Collect, Input};

pub fn render(w: &mut Writer, s: &ProcessorStmt) {
    match s {
        ProcessorStmt::Create(c) => render_create(w, c),
        ProcessorStmt::Alter(a) => alter::render(w, a),
        ProcessorStmt::ResetWasm(r) => render_reset(w, r),
    }
}

fn render_create(w: &mut Writer, c: &CreateProcessor) {
    let mut head = String::from("CREATE ");
    if c.if_not_exists {
        head.push_str("IF NOT EXISTS ");
    }
    match c.attachment {
        Some(Attachment::Attached) => head.push_str("ATTACHED "),
        Some(Attachment::Detached) => head.push_str("DETACHED "),
        None => {}
    }
    head.push_str(&c.def.kind().keywords().join(" "));
    w.line(0, format!("{head} {}", c.name));
    match &c.def {
        ProcessorDef::Junction { feed } | ProcessorDef::Reingestor { feed } => {
            write_feed(w, feed);
        }
        ProcessorDef::Deduplicator { feed, on, max_time } => {
            write_feed(w, feed);
            w.line(1, format!("DEDUPLICATE ON {}", fmt_exprs(on)));
            w.line(1, format!("MAX TIME {}", fmt_duration(*max_time)));
        }
        ProcessorDef::Reorderer { feed, by, max_time } => {
            write_feed(w, feed);
            w.line(1, format!("BY {}", fmt_exprs(by)));
            w.line(1, format!("MAX TIME {}", fmt_duration(*max_time)));
        }
        ProcessorDef::Window {
            feed,
            width,
            step,
            max_state_size,
        } => {
            write_feed(w, feed);
            w.line(1, format!("WIDTH {}", fmt_extent(*width)));
            w.line(1, format!("STEP {}", fmt_extent(*step)));
            if let Some(size) = max_state_size {
                w.line(1, format!("MAX STATE SIZE {}", fmt_size(*size)));
            }
        }
        ProcessorDef::Inferencer {
            feed,
            model,
            inputs,
            outputs,
        } => {
            write_feed(w, feed);
            write_resource_file(w, model);
            write_tensor_inputs(w, 1, "INPUTS", inputs);
            write_tensor_outputs(w, 1, "OUTPUT SCHEMA", outputs);
        }
        ProcessorDef::Wasm {
            feed,
            module,
            max_fuel,
            max_memory,
            ..
        } => {
            write_feed(w, feed);
            write_resource_file(w, module);
            w.line(1, format!("MAX FUEL {max_fuel}"));
            w.line(1, format!("MAX MEMORY {}", fmt_size(*max_memory)));
        }
        ProcessorDef::Correlator {
            left,
            right,
            condition,
            matching,
            max_time,
            on_timeout,
        } => {
            write_side(w, "LEFT FROM", &left.inputs, &left.collect);
            write_side(w, "RIGHT FROM", &right.inputs, &right.collect);
            w.line(1, format!("CORRELATE WHERE {}", fmt_expr(condition)));
            w.line(1, format!("MATCH {}", fmt_match(*matching)));
            w.line(1, format!("MAX TIME {}", fmt_duration(*max_time)));
            w.line(
                1,
                format!("ON CORRELATION TIMEOUT {}", fmt_timeout(*on_timeout)),
            );
        }
        ProcessorDef::Generator { source, each } => {
            w.line(1, format!("USING MATERIALIZED STATE {source}"));
            w.line(1, format!("EACH {}", fmt_duration(*each)));
        }
    }
    if let Some(branching) = &c.branching {
        w.line(1, fmt_branching(branching));
    }
    write_state_dependencies(w, 1, &c.state);
    write_routes(w, 1, &c.routes);
    if let ProcessorDef::Wasm {
        on_rejected_state,
        on_global_error,
        ..
    } = &c.def
    {
        if let Some(policy) = on_rejected_state {
            w.line(1, format!("ON REJECTED STATE {}", fmt_rejected(*policy)));
        }
        if let Some(policy) = on_global_error {
            w.line(
                1,
                format!(
                    "ON GLOBAL ERROR {}",
                    super::route::fmt_general_error(*policy)
                ),
            );
        }
    }
}

fn write_feed(w: &mut Writer, feed: &RelayFeed) {
    write_side(w, "FROM", &feed.inputs, &feed.collect);
    if let Some(filter) = &feed.filter {
        w.line(1, format!("FILTER WHERE {}", fmt_expr(filter)));
    }
}

fn write_side(w: &mut Writer, keyword: &str, inputs: &[Input], collect: &Option<Collect>) {
    write_inputs(w, 1, keyword, inputs);
    write_collect(w, 1, collect);
}

fn fmt_exprs(exprs: &[crate::ast::Expr]) -> String {
    exprs.iter().map(fmt_expr).collect::<Vec<_>>().join(", ")
}

fn fmt_extent(e: WindowExtent) -> String {
    match e {
        WindowExtent::Duration(d) => format!("{} DURATION", fmt_duration(d)),
        WindowExtent::Rows(n) => format!("{n} ROWS"),
    }
}

fn fmt_resource(resource: &crate::ast::Ident, version: crate::ast::ResourceVersion) -> String {
    format!("RESOURCE {resource} {}", fmt_version(version))
}

fn write_resource_file(w: &mut Writer, r: &ResourceFile) {
    w.line(1, format!("USING {}", fmt_resource(&r.resource, r.version)));
    w.line(1, format!("FILE {}", quote(&r.file)));
}

fn fmt_tensor(t: &Tensor) -> String {
    let dims: Vec<String> = t.dims.iter().map(u64::to_string).collect();
    format!(
        "{} DENSE TENSOR<{}>[{}]",
        quote(&t.name),
        fmt_type(&t.element),
        dims.join(", ")
    )
}

/// `<keyword> {`, one tensor per line one level deeper, `}`.
fn write_block(w: &mut Writer, indent: usize, keyword: &str, items: Vec<String>) {
    w.line(indent, format!("{keyword} {{"));
    let last = items.len().saturating_sub(1);
    for (i, item) in items.into_iter().enumerate() {
        let sep = if i < last { "," } else { "" };
        w.line(indent + 1, format!("{item}{sep}"));
    }
    w.line(indent, "}");
}

fn write_tensor_inputs(w: &mut Writer, indent: usize, keyword: &str, inputs: &[TensorInput]) {
    let items = inputs
        .iter()
        .map(|i| format!("{} = {}", fmt_tensor(&i.tensor), fmt_expr(&i.value)))
        .collect();
    write_block(w, indent, keyword, items);
}

fn write_tensor_outputs(w: &mut Writer, indent: usize, keyword: &str, outputs: &[Tensor]) {
    write_block(w, indent, keyword, outputs.iter().map(fmt_tensor).collect());
}

fn fmt_match(m: MatchMode) -> &'static str {
    match m {
        MatchMode::Earliest => "EARLIEST",
        MatchMode::Latest => "LATEST",
        MatchMode::All => "ALL",
    }
}

fn fmt_timeout(t: CorrelationTimeout) -> String {
    let action = |a: TimeoutAction| match a {
        TimeoutAction::Drop => "DROP",
        TimeoutAction::Log => "LOG",
    };
    format!("{}, {}", action(t.left), action(t.right))
}

fn fmt_rejected(p: RejectedStatePolicy) -> &'static str {
    match p {
        RejectedStatePolicy::Preserve => "PRESERVE",
        RejectedStatePolicy::Reset => "RESET",
    }
}

fn render_reset(w: &mut Writer, r: &ResetWasm) {
    let scope = match &r.scope {
        ResetScope::Unbranched => "UNBRANCHED".to_string(),
        ResetScope::AllBranches => "ALL BRANCHES".to_string(),
        ResetScope::BranchValues(values) => {
            let values: Vec<String> = values.iter().map(fmt_assignment).collect();
            format!("BRANCH VALUES {{{}}}", values.join(", "))
        }
    };
    w.line(
        0,
        format!(
            "RESET WASM PROCESSOR {} STATE IN DOMAIN {} FOR {scope}",
            r.processor, r.domain
        ),
    );
}
