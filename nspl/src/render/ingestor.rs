//! Rendering of ingestor statements and signaling protocols.
//!
//! A CREATE puts `FROM <source>` and each clause of the source body on its own line at
//! indent 1, then DECODE USING, TIMESTAMP, FILTER WHERE, the routes and ON GENERAL ERROR. An
//! ALTER puts each operation at indent 1 with a comma ending its last line; a `SET FROM`
//! body and a route's clauses sit one level deeper.

use super::route::{fmt_general_error, fmt_mode, fmt_quiesce, write_route_with, write_routes};
use super::{fmt_config, fmt_duration, fmt_expr, fmt_version, quote, Writer};
use crate::ast::ingestor::{
    AlterIngestor, AlterIngestorOp, CreateIngestor, CreateSignalingProtocol, KafkaOffset,
    MqttSession, SignalingFormat, SignalingStep, SourceBody, TimestampSource,
};
use crate::ast::IngestorStmt;

pub fn render(w: &mut Writer, s: &IngestorStmt) {
    match s {
        IngestorStmt::Create(c) => render_create(w, c),
        IngestorStmt::Alter(a) => render_alter(w, a),
        IngestorStmt::CreateSignalingProtocol(sp) => render_signaling(w, sp),
    }
}

fn render_create(w: &mut Writer, c: &CreateIngestor) {
    let ine = if c.if_not_exists {
        " IF NOT EXISTS"
    } else {
        ""
    };
    w.line(
        0,
        format!(
            "CREATE{ine} {} INGESTOR {}",
            c.source.head().phrase(),
            c.name
        ),
    );
    write_body(w, 1, 1, &c.source);
    if let Some(codec) = &c.decode {
        w.line(1, format!("DECODE USING {codec}"));
    }
    if let Some(ts) = &c.timestamp {
        w.line(1, fmt_timestamp(ts));
    }
    if let Some(filter) = &c.filter {
        w.line(1, format!("FILTER WHERE {}", fmt_expr(filter)));
    }
    write_routes(w, 1, &c.routes);
    w.line(
        1,
        format!("ON GENERAL ERROR {}", fmt_general_error(c.on_general_error)),
    );
}

fn fmt_timestamp(ts: &TimestampSource) -> String {
    match ts {
        TimestampSource::Now => "TIMESTAMP NOW".into(),
        TimestampSource::At(field) => format!("TIMESTAMP AT {field}"),
    }
}

/// `<keyword> <source>` at `indent`, the body's other clauses at `rest_indent`.
fn write_body_with(
    w: &mut Writer,
    keyword: &str,
    indent: usize,
    rest_indent: usize,
    b: &SourceBody,
) {
    let (source, clauses) = body_clauses(b);
    w.line(indent, format!("{keyword} {source}"));
    for clause in clauses {
        w.line(rest_indent, clause);
    }
}

fn write_body(w: &mut Writer, indent: usize, rest_indent: usize, b: &SourceBody) {
    write_body_with(w, "FROM", indent, rest_indent, b);
}

/// The text after `FROM` and the body's clauses in the spec's order, one per line.
fn body_clauses(b: &SourceBody) -> (String, Vec<String>) {
    let mut clauses = Vec::new();
    let source = match b {
        SourceBody::HttpRequest { client, every, .. } => {
            clauses.push(format!("EVERY {}", fmt_duration(*every)));
            client.to_string()
        }
        SourceBody::KafkaTopic {
            client,
            topic,
            offset,
            instances,
            ..
        } => {
            clauses.push(format!("TOPIC {}", quote(topic)));
            clauses.push(match offset {
                KafkaOffset::ConsumerGroup(g) => format!("OFFSET BY CONSUMER GROUP {}", quote(g)),
                KafkaOffset::Domain => "OFFSET BY DOMAIN".into(),
            });
            push_instances(&mut clauses, *instances);
            client.to_string()
        }
        SourceBody::PulsarTopic {
            client,
            topic,
            subscription,
            instances,
            ..
        } => {
            clauses.push(format!("TOPIC {}", quote(topic)));
            clauses.push(format!("SUBSCRIPTION {}", quote(subscription)));
            push_instances(&mut clauses, *instances);
            client.to_string()
        }
        SourceBody::RabbitmqQueue {
            client,
            queue,
            instances,
            ..
        }
        | SourceBody::SqsQueue {
            client,
            queue,
            instances,
            ..
        } => {
            clauses.push(format!("QUEUE {}", quote(queue)));
            push_instances(&mut clauses, *instances);
            client.to_string()
        }
        SourceBody::RedisPubsub {
            client, channel, ..
        } => {
            clauses.push(format!("CHANNEL {}", quote(channel)));
            client.to_string()
        }
        SourceBody::MqttTopic {
            client,
            topic,
            instances,
            session,
            qos,
            ..
        } => {
            clauses.push(format!("TOPIC {}", quote(topic)));
            push_instances(&mut clauses, *instances);
            match session {
                Some(MqttSession::Clean) => clauses.push("SESSION CLEAN".into()),
                Some(MqttSession::Persistent) => clauses.push("SESSION PERSISTENT".into()),
                None => {}
            }
            if let Some(qos) = qos {
                clauses.push(format!("QOS {qos}"));
            }
            client.to_string()
        }
        SourceBody::NatsSubject {
            client,
            subject,
            queue_group,
            instances,
            ..
        } => {
            clauses.push(format!("SUBJECT {}", quote(subject)));
            clauses.push(format!("QUEUE GROUP {}", quote(queue_group)));
            push_instances(&mut clauses, Some(*instances));
            client.to_string()
        }
        SourceBody::ZeromqPull { client, .. }
        | SourceBody::SyslogListener { client, .. }
        | SourceBody::WebsocketsConnection { client, .. } => client.to_string(),
        SourceBody::PrometheusQuery {
            client,
            query,
            every,
            ..
        } => {
            clauses.push(format!("QUERY {}", quote(query)));
            clauses.push(format!("EVERY {}", fmt_duration(*every)));
            client.to_string()
        }
        SourceBody::HttpEndpoint(e) | SourceBody::WebsocketsEndpoint(e) => e.endpoint.to_string(),
        SourceBody::ClientProducer { schema, .. } => format!("SCHEMA {schema}"),
    };
    clauses.push(fmt_mode(b.mode()));
    clauses.push(format!("ON QUIESCE {}", fmt_quiesce(b.quiesce())));
    (source, clauses)
}

fn push_instances(clauses: &mut Vec<String>, instances: Option<u64>) {
    if let Some(n) = instances {
        clauses.push(format!("INSTANCES {n}"));
    }
}

fn render_alter(w: &mut Writer, a: &AlterIngestor) {
    w.line(0, format!("ALTER {} INGESTOR {}", a.head.phrase(), a.name));
    for (i, op) in a.operations.iter().enumerate() {
        if i > 0 {
            w.append(",");
        }
        write_operation(w, op);
    }
}

fn write_operation(w: &mut Writer, op: &AlterIngestorOp) {
    match op {
        AlterIngestorOp::SetFrom(body) => write_body_with(w, "SET FROM", 1, 2, body),
        AlterIngestorOp::SetQuiesce(q) => w.line(1, format!("SET QUIESCE {}", fmt_quiesce(q))),
        AlterIngestorOp::SetDecode(codec) => w.line(1, format!("SET DECODE USING {codec}")),
        AlterIngestorOp::SetTimestamp(ts) => w.line(1, format!("SET {}", fmt_timestamp(ts))),
        AlterIngestorOp::DropTimestamp => w.line(1, "DROP TIMESTAMP"),
        AlterIngestorOp::SetFilter(e) => w.line(1, format!("SET FILTER WHERE {}", fmt_expr(e))),
        AlterIngestorOp::DropFilter => w.line(1, "DROP FILTER WHERE"),
        AlterIngestorOp::AddRoute(route) => write_route_with(w, 1, "ADD ROUTE TO", route),
        AlterIngestorOp::DropRoute(relay) => w.line(1, format!("DROP ROUTE TO {relay}")),
        AlterIngestorOp::ReplaceRoute(route) => write_route_with(w, 1, "REPLACE ROUTE TO", route),
        AlterIngestorOp::SetGeneralError(p) => {
            w.line(1, format!("SET GENERAL ERROR {}", fmt_general_error(*p)))
        }
    }
}

fn render_signaling(w: &mut Writer, sp: &CreateSignalingProtocol) {
    let ine = if sp.if_not_exists {
        " IF NOT EXISTS"
    } else {
        ""
    };
    w.line(0, format!("CREATE{ine} SIGNALING PROTOCOL {}", sp.name));
    match &sp.format {
        SignalingFormat::Json => w.line(1, "FORMAT JSON"),
        SignalingFormat::Yaml => w.line(1, "FORMAT YAML"),
        SignalingFormat::Toml => w.line(1, "FORMAT TOML"),
        SignalingFormat::Xml => w.line(1, "FORMAT XML"),
        SignalingFormat::Cbor => w.line(1, "FORMAT CBOR"),
        SignalingFormat::Raw => w.line(1, "FORMAT RAW"),
        SignalingFormat::Protobuf(pb) => {
            w.line(
                1,
                format!(
                    "FORMAT PROTOBUF USING RESOURCE {} {}",
                    pb.resource,
                    fmt_version(pb.version)
                ),
            );
            w.line(2, format!("CONFIG {}", fmt_config(&pb.config)));
            w.line(2, format!("SEND MESSAGE {}", quote(&pb.send_message)));
            w.line(2, format!("WAIT MESSAGE {}", quote(&pb.wait_message)));
        }
    }
    if let Some(fail) = &sp.fail {
        w.line(1, format!("FAIL JAQ {}", quote(fail)));
    }
    if sp.accept_data_on_connect {
        w.line(1, "ON CONNECT ACCEPT DATA");
    } else {
        w.line(1, "ON CONNECT");
    }
    for step in &sp.steps {
        match step {
            SignalingStep::Send(programs) => w.list_lines(1, "SEND JAQ", &quoted(programs)),
            SignalingStep::Wait(wait) => {
                w.list_lines(1, "WAIT JAQ", &quoted(&wait.matchers));
                if let Some(fail) = &wait.fail {
                    w.line(2, format!("FAIL JAQ {}", quote(fail)));
                }
                if let Some(capture) = &wait.capture {
                    w.line(2, format!("CAPTURE {}", quote(capture)));
                }
                if wait.accept_data {
                    w.line(2, "ACCEPT DATA");
                }
            }
        }
    }
    w.line(1, format!("TIMEOUT {}", fmt_duration(sp.timeout)));
}

fn quoted(items: &[String]) -> Vec<String> {
    items.iter().map(|s| quote(s)).collect()
}
