//! Rendering of emitter statements: the head on line 0, the node clauses at indent 1, and the
//! sink's MODE, RETRY POLICY and encoding at indent 2 under its `TO` line, as DESIGN §7 lays
//! them out. ALTER puts one operation per line (multi-line operations indent their parts one
//! level deeper) and separates operations with a trailing comma.

use super::route::{
    fmt_collect, fmt_flush, fmt_general_error, fmt_input, fmt_retry, fmt_state_dependency,
    fmt_state_policy, write_collect, write_inputs, write_set, write_state_dependencies,
};
use super::{fmt_duration, fmt_expr, quote, Writer};
use crate::ast::emitter::{
    AlterEmitter, AlterEmitterOp, Construction, CreateEmitter, EmitterMode, Encoding, FileFormat,
    Sink, SinkBody,
};
use crate::ast::{Attachment, EmitterStmt, Ident, Inherit, InheritFields, MessageErrorPolicy};

pub fn render(w: &mut Writer, s: &EmitterStmt) {
    match s {
        EmitterStmt::Create(c) => render_create(w, c),
        EmitterStmt::Alter(a) => render_alter(w, a),
    }
}

fn render_create(w: &mut Writer, c: &CreateEmitter) {
    let mut head = String::from("CREATE");
    if c.if_not_exists {
        head.push_str(" IF NOT EXISTS");
    }
    if let Some(a) = c.attachment {
        head.push(' ');
        head.push_str(fmt_attachment(a));
    }
    w.line(0, format!("{head} {} {}", c.head.phrase(), c.name));
    write_inputs(w, 1, "FROM", &c.inputs);
    write_collect(w, 1, &c.collect);
    write_state_dependencies(w, 1, &c.state);
    write_sink(w, 1, "TO", &c.sink);
    write_construction(w, 1, &c.construction);
    w.line(1, fmt_flush(&c.flush));
    write_message_error(w, 1, "ON MESSAGE ERROR", &c.on_message_error);
    w.line(
        1,
        format!("ON GENERAL ERROR {}", fmt_general_error(c.on_general_error)),
    );
}

fn fmt_attachment(a: Attachment) -> &'static str {
    match a {
        Attachment::Attached => "ATTACHED",
        Attachment::Detached => "DETACHED",
    }
}

/// `<keyword> <sink body>` at `indent`, then the delivery clauses one level deeper.
fn write_sink(w: &mut Writer, indent: usize, keyword: &str, sink: &Sink) {
    let inner = indent + 1;
    match &sink.body {
        SinkBody::KafkaTopic { client, topic, key }
        | SinkBody::PulsarTopic { client, topic, key } => {
            let key = key
                .as_ref()
                .map(|k| format!(" KEY {}", fmt_expr(k)))
                .unwrap_or_default();
            w.line(
                indent,
                format!("{keyword} {client} TOPIC {}{key}", quote(topic)),
            );
        }
        SinkBody::HttpRequest {
            client,
            method,
            path,
        } => w.line(
            indent,
            format!(
                "{keyword} {client} METHOD {} PATH {}",
                fmt_expr(method),
                fmt_expr(path)
            ),
        ),
        SinkBody::ClientConsumer { schema } => w.line(indent, format!("{keyword} SCHEMA {schema}")),
        SinkBody::FileAppend {
            client,
            path,
            format,
        } => {
            let format = match format {
                FileFormat::Ndjson => "NDJSON",
                FileFormat::Arrow => "ARROW",
            };
            w.line(
                indent,
                format!("{keyword} {client} PATH {} FORMAT {format}", quote(path)),
            );
        }
        SinkBody::MqttTopic { client, topic, qos } => {
            let qos = qos.map(|q| format!(" QOS {q}")).unwrap_or_default();
            w.line(
                indent,
                format!("{keyword} {client} TOPIC {}{qos}", quote(topic)),
            );
        }
        SinkBody::NatsSubject { client, subject } => w.line(
            indent,
            format!("{keyword} {client} SUBJECT {}", quote(subject)),
        ),
        SinkBody::RabbitmqQueue { client, queue } | SinkBody::SqsQueue { client, queue } => {
            w.line(indent, format!("{keyword} {client} QUEUE {}", quote(queue)))
        }
        SinkBody::RedisPubsub { client, channel } => w.line(
            indent,
            format!("{keyword} {client} CHANNEL {}", quote(channel)),
        ),
        SinkBody::ZeromqPush { client } => w.line(indent, format!("{keyword} {client}")),
        SinkBody::PostgresTable {
            client,
            table,
            values,
        } => {
            w.line(
                indent,
                format!("{keyword} {client} INSERT TO TABLE {}", quote(table)),
            );
            w.line(inner, "VALUES {");
            for (i, (column, value)) in values.iter().enumerate() {
                let sep = if i + 1 < values.len() { "," } else { "" };
                w.line(
                    inner + 1,
                    format!("{} = {}{sep}", dquote(column), fmt_expr(value)),
                );
            }
            w.line(inner, "}");
        }
    }
    w.line(inner, fmt_mode(&sink.mode));
    w.line(inner, fmt_retry(&sink.retry));
    match &sink.encoding {
        Some(Encoding::Codec(codec)) => w.line(inner, format!("ENCODE USING {codec}")),
        Some(Encoding::WithoutBody) => w.line(inner, "WITHOUT BODY"),
        None => {}
    }
}

/// A column name as DESIGN writes it: double-quoted, embedded quotes doubled.
fn dquote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn fmt_mode(m: &EmitterMode) -> String {
    match m {
        EmitterMode::NoAck => "MODE NO ACK".into(),
        EmitterMode::AckSequential { ack_timeout } => format!(
            "MODE ACK SEQUENTIAL ACK TIMEOUT {}",
            fmt_duration(*ack_timeout)
        ),
        EmitterMode::AckParallel { max, ack_timeout } => format!(
            "MODE ACK PARALLEL MAX {max} ACK TIMEOUT {}",
            fmt_duration(*ack_timeout)
        ),
    }
}

/// INHERIT, SET, WHERE and INVOKE, each on its own line(s) at `indent`, when present.
fn write_construction(w: &mut Writer, indent: usize, c: &Construction) {
    if let Some(inherit) = &c.inherit {
        w.line(indent, fmt_inherit(inherit));
    }
    if !c.set.is_empty() {
        write_set(w, indent, "SET", &c.set);
    }
    if let Some(filter) = &c.filter {
        w.line(indent, format!("WHERE {}", fmt_expr(filter)));
    }
    if !c.headers.is_empty() {
        let items: Vec<String> = c
            .headers
            .iter()
            .map(|h| {
                format!(
                    "write_header({}, {})",
                    fmt_expr(&h.name),
                    fmt_expr(&h.value)
                )
            })
            .collect();
        w.list_lines(indent, "INVOKE", &items);
    }
}

fn fmt_inherit(i: &Inherit) -> String {
    let join = |names: &[Ident]| {
        names
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
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

/// `<keyword> IGNORE | LOG | SEND TO <relay>`, a SEND TO's assignments one level deeper.
fn write_message_error(w: &mut Writer, indent: usize, keyword: &str, p: &MessageErrorPolicy) {
    match p {
        MessageErrorPolicy::Ignore => w.line(indent, format!("{keyword} IGNORE")),
        MessageErrorPolicy::Log => w.line(indent, format!("{keyword} LOG")),
        MessageErrorPolicy::SendTo { relay, set } => {
            w.line(indent, format!("{keyword} SEND TO {relay}"));
            if !set.is_empty() {
                write_set(w, indent + 1, "SET", set);
            }
        }
    }
}

fn render_alter(w: &mut Writer, a: &AlterEmitter) {
    w.line(0, format!("ALTER {} {}", a.head.phrase(), a.name));
    for (i, op) in a.operations.iter().enumerate() {
        if i > 0 {
            w.append(",");
        }
        write_operation(w, 1, op);
    }
}

fn write_operation(w: &mut Writer, indent: usize, op: &AlterEmitterOp) {
    match op {
        AlterEmitterOp::AddFrom(input) => w.line(indent, format!("ADD FROM {}", fmt_input(input))),
        AlterEmitterOp::DropFrom(relay) => w.line(indent, format!("DROP FROM {relay}")),
        AlterEmitterOp::SetFromWhere { relay, filter } => w.line(
            indent,
            format!("ALTER FROM {relay} SET WHERE {}", fmt_expr(filter)),
        ),
        AlterEmitterOp::DropFromWhere(relay) => {
            w.line(indent, format!("ALTER FROM {relay} DROP WHERE"))
        }
        AlterEmitterOp::SetCollect(c) => {
            w.line(indent, format!("SET COLLECT FOR {}", fmt_collect(c)))
        }
        AlterEmitterOp::DropCollect => w.line(indent, "DROP COLLECT"),
        AlterEmitterOp::AddState(d) => w.line(
            indent,
            format!("ADD MATERIALIZED STATE {}", fmt_state_dependency(d)),
        ),
        AlterEmitterOp::DropState(relay) => {
            w.line(indent, format!("DROP MATERIALIZED STATE {relay}"))
        }
        AlterEmitterOp::AlterState(d) => w.line(
            indent,
            format!(
                "ALTER MATERIALIZED STATE {} SET {}",
                d.relay,
                fmt_state_policy(&d.policy)
            ),
        ),
        AlterEmitterOp::SetAttachment(a) => w.line(indent, format!("SET {}", fmt_attachment(*a))),
        AlterEmitterOp::SetSink(sink) => write_sink(w, indent, "SET TO", sink),
        AlterEmitterOp::ReplaceConstruction(c) => {
            w.line(indent, "REPLACE CONSTRUCTION");
            write_construction(w, indent + 1, c);
        }
        AlterEmitterOp::DropConstruction => w.line(indent, "DROP CONSTRUCTION"),
        AlterEmitterOp::SetFlush(f) => w.line(indent, format!("SET {}", fmt_flush(f))),
        AlterEmitterOp::SetMessageError(p) => {
            write_message_error(w, indent, "SET MESSAGE ERROR", p)
        }
        AlterEmitterOp::SetGeneralError(p) => w.line(
            indent,
            format!("SET GENERAL ERROR {}", fmt_general_error(*p)),
        ),
    }
}
