//! The sink of an emitter: its client has the head's connector, its own expressions (KEY,
//! METHOD, PATH, VALUES) and header writes (INVOKE write_header) are typed against the
//! finalized record, the input row and the materialized state.
//!
//! Decisions where the spec is silent:
//! * KEY (KAFKA TOPIC, PULSAR TOPIC) takes any scalar type (a non-STRING key is written as its
//!   canonical text); it may be null (no key) but not SENSITIVE, since a key leaves the system
//!   beside the body and appears in broker tooling — wrap it in `leak_sensitive(…)`.
//! * METHOD and PATH are non-null, non-SENSITIVE STRINGs: a request needs both, and they
//!   travel in the request line.
//! * VALUES take any type, SENSITIVE included (a column is like a body field); a column is
//!   named once.
//! * write_header takes `(name STRING, value STRING)`; a null name or value writes no header.
//!   SENSITIVE arguments are refused by the checker (leak_sensitive allows them). Only sinks
//!   with transport headers accept INVOKE: KAFKA TOPIC, HTTP REQUEST, NATS SUBJECT, PULSAR
//!   TOPIC, RABBITMQ QUEUE and SQS QUEUE.

use std::collections::BTreeSet;

use nervix_nspl::ast::catalog::ClientType;
use nervix_nspl::ast::emitter::{CreateEmitter, EmitterHead, SinkBody};
use nervix_nspl::ast::{Expr, ExprKind, Ident};

use crate::catalog::{CatalogError, DomainScope};
use crate::types::{check, check_expecting, DataType, ExprContext};
use crate::validate::ingestor::check_client_type;
use crate::validate::route::{type_error, Position, Reads, RouteInputs, Target};

/// `KAFKA TOPIC`: the head without `EMITTER`.
fn head_words(head: EmitterHead) -> String {
    head.keywords().join(" ")
}

/// The client a sink body names (`None` under CLIENT CONSUMER).
pub(crate) fn sink_client(body: &SinkBody) -> Option<&Ident> {
    match body {
        SinkBody::KafkaTopic { client, .. }
        | SinkBody::HttpRequest { client, .. }
        | SinkBody::FileAppend { client, .. }
        | SinkBody::MqttTopic { client, .. }
        | SinkBody::NatsSubject { client, .. }
        | SinkBody::RabbitmqQueue { client, .. }
        | SinkBody::RedisPubsub { client, .. }
        | SinkBody::ZeromqPush { client }
        | SinkBody::SqsQueue { client, .. }
        | SinkBody::PulsarTopic { client, .. }
        | SinkBody::PostgresTable { client, .. } => Some(client),
        SinkBody::ClientConsumer { .. } => None,
    }
}

/// The client the sink names exists and has the head's connector.
pub(crate) fn check_client(scope: &DomainScope<'_>, body: &SinkBody) -> Result<(), CatalogError> {
    let Some(name) = sink_client(body) else {
        return Ok(());
    };
    let [connector, _] = body.head().keywords();
    let Some(wanted) = ClientType::ALL
        .into_iter()
        .find(|t| t.keyword() == connector)
    else {
        return Ok(());
    };
    check_client_type(scope, name, wanted)
}

/// Whether the sink carries transport headers that INVOKE write_header can set.
fn writes_headers(head: EmitterHead) -> bool {
    use EmitterHead as H;
    matches!(
        head,
        H::KafkaTopic
            | H::HttpRequest
            | H::NatsSubject
            | H::PulsarTopic
            | H::RabbitmqQueue
            | H::SqsQueue
    )
}

/// The sink's expressions and INVOKE, read after the record is finalized.
pub(crate) fn check_expressions(
    definition: &CreateEmitter,
    inputs: &RouteInputs<'_>,
    target: &Target<'_>,
    built: &crate::validate::route::Initialized,
) -> Result<(), CatalogError> {
    let reads = Reads::new(
        inputs,
        Position::Finalized { input: true },
        Some((&target.owner, target.fields)),
        built,
    );
    let ctx = ExprContext {
        headers: inputs.headers.clone(),
        ..ExprContext::default()
    };
    match &definition.sink.body {
        SinkBody::KafkaTopic { key: Some(key), .. }
        | SinkBody::PulsarTopic { key: Some(key), .. } => {
            let typed = check(key, &reads, &ctx).map_err(type_error)?;
            if !typed.ty.data_type.is_scalar() {
                return Err(CatalogError::new(
                    key.span,
                    format!("KEY must be a scalar value, found {}", typed.ty.data_type),
                ));
            }
            refuse_sensitive(key, typed.ty.sensitive, "KEY")?;
        }
        SinkBody::HttpRequest { method, path, .. } => {
            for (expr, what) in [(method, "METHOD"), (path, "PATH")] {
                let typed =
                    check_expecting(expr, &reads, &ctx, &DataType::String).map_err(|e| {
                        if e.span == expr.span && e.message.starts_with("expected STRING, found ") {
                            let found = e.message["expected STRING, found ".len()..]
                                .split(':')
                                .next()
                                .unwrap_or("another type");
                            CatalogError::new(
                                e.span,
                                format!("{what} must be STRING, found {found}"),
                            )
                        } else {
                            type_error(e)
                        }
                    })?;
                if typed.ty.nullable {
                    return Err(CatalogError::new(
                        expr.span,
                        format!("{what} may be null, but every request needs one; use coalesce(…)"),
                    ));
                }
                refuse_sensitive(expr, typed.ty.sensitive, what)?;
            }
        }
        SinkBody::PostgresTable { values, .. } => {
            let mut columns = BTreeSet::new();
            for (column, expr) in values {
                if !columns.insert(column.as_str()) {
                    return Err(CatalogError::new(
                        expr.span,
                        format!("VALUES names column \"{column}\" twice"),
                    ));
                }
                check(expr, &reads, &ctx).map_err(type_error)?;
            }
        }
        _ => {}
    }
    let headers = &definition.construction.headers;
    if let Some(first) = headers.first() {
        let head = definition.sink.body.head();
        if !writes_headers(head) {
            return Err(CatalogError::new(
                first.name.span,
                format!("{} emitters do not support write_header", head_words(head)),
            ));
        }
    }
    let invoke = ExprContext {
        write_header: true,
        ..ctx
    };
    for header in headers {
        let span = header.name.span.to(header.value.span);
        let call = Expr::new(
            ExprKind::Call {
                name: Ident {
                    name: "write_header".to_string(),
                    span,
                },
                args: vec![header.name.clone(), header.value.clone()],
            },
            span,
        );
        check(&call, &reads, &invoke).map_err(type_error)?;
    }
    Ok(())
}

fn refuse_sensitive(expr: &Expr, sensitive: bool, what: &str) -> Result<(), CatalogError> {
    if sensitive {
        return Err(CatalogError::new(
            expr.span,
            format!(
                "{what} would send a SENSITIVE value out of the system; wrap it in \
                 leak_sensitive(…) to allow it"
            ),
        ));
    }
    Ok(())
}
