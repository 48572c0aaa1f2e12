//! Rendering of the clauses shared by ingestors, processors and emitters.

use super::{fmt_duration, fmt_expr, fmt_size, Writer};
use crate::ast::{
    Assignment, Branching, Collect, DeliveryMode, Flush, GeneralErrorPolicy, Inherit,
    InheritFields, Input, MessageErrorPolicy, OverflowPolicy, QuiesceMode, RetryPolicy, Route,
    RouteBranching, StateDependency, StatePolicy,
};

pub fn fmt_assignment(a: &Assignment) -> String {
    format!("{} = {}", a.target, fmt_expr(&a.value))
}

/// `SET a = x,` with later assignments aligned on following lines.
pub fn write_set(w: &mut Writer, indent: usize, keyword: &str, set: &[Assignment]) {
    let items: Vec<String> = set.iter().map(fmt_assignment).collect();
    w.list_lines(indent, keyword, &items);
}

pub fn fmt_input(input: &Input) -> String {
    match &input.filter {
        Some(filter) => format!("{} WHERE {}", input.relay, fmt_expr(filter)),
        None => input.relay.to_string(),
    }
}

/// `FROM a [WHERE …], b [WHERE …]` on one line.
pub fn write_inputs(w: &mut Writer, indent: usize, keyword: &str, inputs: &[Input]) {
    let items: Vec<String> = inputs.iter().map(fmt_input).collect();
    w.line(indent, format!("{keyword} {}", items.join(", ")));
}

/// The text after `COLLECT FOR`.
pub fn fmt_collect(c: &Collect) -> String {
    match c.max_batch_size {
        Some(size) => format!(
            "{} MAX BATCH SIZE {}",
            fmt_duration(c.interval),
            fmt_size(size)
        ),
        None => fmt_duration(c.interval),
    }
}

pub fn write_collect(w: &mut Writer, indent: usize, collect: &Option<Collect>) {
    if let Some(c) = collect {
        w.line(indent, format!("COLLECT FOR {}", fmt_collect(c)));
    }
}

pub fn fmt_branching(b: &Branching) -> String {
    match b {
        Branching::BranchedBy(branch) => format!("BRANCHED BY {branch}"),
        Branching::Unbranched => "UNBRANCHED".into(),
    }
}

pub fn fmt_state_policy(p: &StatePolicy) -> String {
    match p {
        StatePolicy::RequiredSkip => "REQUIRED SKIP".into(),
        StatePolicy::RequiredWait => "REQUIRED WAIT".into(),
        StatePolicy::Default(fields) => {
            let fields: Vec<String> = fields.iter().map(fmt_assignment).collect();
            format!("DEFAULT {{{}}}", fields.join(", "))
        }
    }
}

pub fn fmt_state_dependency(d: &StateDependency) -> String {
    format!("{} {}", d.relay, fmt_state_policy(&d.policy))
}

pub fn write_state_dependencies(w: &mut Writer, indent: usize, deps: &[StateDependency]) {
    for d in deps {
        w.line(
            indent,
            format!("USING MATERIALIZED STATE {}", fmt_state_dependency(d)),
        );
    }
}

fn fmt_inherit(i: &Inherit) -> String {
    let mut out = match &i.fields {
        InheritFields::All { except } if except.is_empty() => "INHERIT ALL".to_string(),
        InheritFields::All { except } => format!("INHERIT ALL EXCEPT {}", join(except)),
        InheritFields::Only(fields) => format!("INHERIT {}", join(fields)),
    };
    if i.leak_sensitive {
        out.push_str(" LEAK SENSITIVE");
    }
    out
}

fn join(names: &[crate::ast::Ident]) -> String {
    names
        .iter()
        .map(|n| n.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn fmt_flush(f: &Flush) -> String {
    match f {
        Flush::Immediate => "FLUSH IMMEDIATE".into(),
        Flush::Each {
            interval,
            max_batch_size,
        } => format!(
            "FLUSH EACH {} MAX BATCH SIZE {}",
            fmt_duration(*interval),
            fmt_size(*max_batch_size)
        ),
    }
}

/// `ON MESSAGE ERROR …`, with a SEND TO's assignments on following lines.
pub fn write_message_error(w: &mut Writer, indent: usize, policy: &MessageErrorPolicy) {
    match policy {
        MessageErrorPolicy::Ignore => w.line(indent, "ON MESSAGE ERROR IGNORE"),
        MessageErrorPolicy::Log => w.line(indent, "ON MESSAGE ERROR LOG"),
        MessageErrorPolicy::SendTo { relay, set } => {
            w.line(indent, format!("ON MESSAGE ERROR SEND TO {relay}"));
            if !set.is_empty() {
                write_set(w, indent + 1, "SET", set);
            }
        }
    }
}

pub fn fmt_general_error(p: GeneralErrorPolicy) -> &'static str {
    match p {
        GeneralErrorPolicy::Ignore => "IGNORE",
        GeneralErrorPolicy::Log => "LOG",
    }
}

/// The clauses of a route after its `TO <relay>` line.
pub fn write_route_clauses(w: &mut Writer, indent: usize, route: &Route) {
    if let Some(inherit) = &route.inherit {
        w.line(indent, fmt_inherit(inherit));
    }
    if !route.set.is_empty() {
        write_set(w, indent, "SET", &route.set);
    }
    if let Some(filter) = &route.filter {
        w.line(indent, format!("WHERE {}", fmt_expr(filter)));
    }
    match &route.branching {
        Some(RouteBranching::Unbranched) => w.line(indent, "UNBRANCHED"),
        Some(RouteBranching::BranchedBy { branch, set }) if set.is_empty() => {
            w.line(indent, format!("BRANCHED BY {branch}"))
        }
        Some(RouteBranching::BranchedBy { branch, set }) => {
            write_set(w, indent, &format!("BRANCHED BY {branch} SET"), set)
        }
        None => {}
    }
    if let Some(flush) = &route.flush {
        w.line(indent, fmt_flush(flush));
    }
    write_message_error(w, indent, &route.on_error);
}

/// `TO <relay>` at `indent` and its clauses one level deeper.
pub fn write_route(w: &mut Writer, indent: usize, route: &Route) {
    write_route_with(w, indent, "TO", route);
}

/// A route introduced by `keyword` (`TO`, `ADD ROUTE TO`, `REPLACE ROUTE TO`).
pub fn write_route_with(w: &mut Writer, indent: usize, keyword: &str, route: &Route) {
    w.line(indent, format!("{keyword} {}", route.target));
    write_route_clauses(w, indent + 1, route);
}

pub fn write_routes(w: &mut Writer, indent: usize, routes: &[Route]) {
    for route in routes {
        write_route(w, indent, route);
    }
}

pub fn fmt_retry(r: &RetryPolicy) -> String {
    format!(
        "RETRY POLICY BACKOFF {} MAX {}",
        fmt_duration(r.backoff),
        fmt_duration(r.max)
    )
}

/// `MODE …` including the ACK modes' timeouts and retry policy.
pub fn fmt_mode(m: &DeliveryMode) -> String {
    match m {
        DeliveryMode::NoAck => "MODE NO ACK".into(),
        DeliveryMode::AckSequential { ack_timeout, retry } => format!(
            "MODE ACK SEQUENTIAL ACK TIMEOUT {} {}",
            fmt_duration(*ack_timeout),
            fmt_retry(retry)
        ),
        DeliveryMode::AckParallel {
            max,
            batch_timeout,
            ack_timeout,
            retry,
        } => {
            let batch = batch_timeout
                .map(|d| format!(" BATCH TIMEOUT {}", fmt_duration(d)))
                .unwrap_or_default();
            format!(
                "MODE ACK PARALLEL MAX {max}{batch} ACK TIMEOUT {} {}",
                fmt_duration(*ack_timeout),
                fmt_retry(retry)
            )
        }
    }
}

/// The body after `ON QUIESCE`.
pub fn fmt_quiesce(q: &QuiesceMode) -> String {
    match q {
        QuiesceMode::Suspend => "SUSPEND".into(),
        QuiesceMode::Drop => "DROP".into(),
        QuiesceMode::RejectRetryAfter(d) => format!("REJECT RETRY AFTER {}", fmt_duration(*d)),
        QuiesceMode::Buffer { max_size, overflow } => {
            let overflow = match overflow {
                Some(OverflowPolicy::DropOldest) => " ON OVERFLOW DROP OLDEST",
                Some(OverflowPolicy::DropNewest) => " ON OVERFLOW DROP NEWEST",
                None => "",
            };
            format!("BUFFER MAX SIZE {}{overflow}", fmt_size(*max_size))
        }
    }
}
