//! The source body of an ingestor: the client or endpoint it names has the head's connector or
//! TYPE, and the delivery and quiesce modes are ones the entity honors (spec "Delivery Modes",
//! "Quiesce Modes", "Instancing" and the per-head bodies of "Supported Ingestor Types").
//!
//! The parser enforces the mode tables on CREATE and SET FROM already; they are enforced here
//! again because `ALTER … SET QUIESCE` parses every quiesce body, and because a stored model
//! must be valid whatever produced it.

use nervix_nspl::ast::catalog::{ClientType, EndpointType};
use nervix_nspl::ast::ingestor::{IngestorHead, ModeKind, MqttSession, QuiesceKind, SourceBody};
use nervix_nspl::ast::{DeliveryMode, Ident, QuiesceMode};
use nervix_nspl::Span;

use crate::catalog::{CatalogError, DomainScope};

/// The client or endpoint a transport body names (`None` under CLIENT PRODUCER).
pub(crate) fn source_reference(body: &SourceBody) -> Option<&Ident> {
    match body {
        SourceBody::HttpEndpoint(e) | SourceBody::WebsocketsEndpoint(e) => Some(&e.endpoint),
        SourceBody::HttpRequest { client, .. }
        | SourceBody::KafkaTopic { client, .. }
        | SourceBody::PulsarTopic { client, .. }
        | SourceBody::RabbitmqQueue { client, .. }
        | SourceBody::RedisPubsub { client, .. }
        | SourceBody::MqttTopic { client, .. }
        | SourceBody::NatsSubject { client, .. }
        | SourceBody::ZeromqPull { client, .. }
        | SourceBody::SyslogListener { client, .. }
        | SourceBody::SqsQueue { client, .. }
        | SourceBody::PrometheusQuery { client, .. }
        | SourceBody::WebsocketsConnection { client, .. } => Some(client),
        SourceBody::ClientProducer { .. } => None,
    }
}

/// The client type a head's connector needs; `None` for endpoint heads and CLIENT PRODUCER.
fn required_client(head: IngestorHead) -> Option<ClientType> {
    if head.is_endpoint() || head == IngestorHead::ClientProducer {
        return None;
    }
    let [connector, _] = head.keywords();
    ClientType::ALL
        .into_iter()
        .find(|t| t.keyword() == connector)
}

/// The client or endpoint the body names exists and has the head's connector or TYPE; a
/// CLIENT PRODUCER's schema exists.
pub(crate) fn check_reference(
    scope: &DomainScope<'_>,
    body: &SourceBody,
) -> Result<(), CatalogError> {
    let head = body.head();
    match body {
        SourceBody::HttpEndpoint(e) | SourceBody::WebsocketsEndpoint(e) => {
            let wanted = if head == IngestorHead::HttpEndpoint {
                EndpointType::Http
            } else {
                EndpointType::Websockets
            };
            let endpoint = scope.endpoint(&e.endpoint)?;
            if endpoint.endpoint_type != wanted {
                return Err(CatalogError::new(
                    e.endpoint.span,
                    format!(
                        "requires a TYPE {} endpoint, but endpoint '{}' is TYPE {}",
                        wanted.keyword(),
                        e.endpoint.name,
                        endpoint.endpoint_type.keyword()
                    ),
                ));
            }
        }
        SourceBody::ClientProducer { schema, .. } => {
            scope.schema(schema)?;
        }
        _ => {
            if let (Some(name), Some(wanted)) = (source_reference(body), required_client(head)) {
                check_client_type(scope, name, wanted)?;
            }
        }
    }
    Ok(())
}

/// The article a TYPE keyword takes in prose: `an HTTP client`, `a KAFKA client`.
fn article(keyword: &str) -> &'static str {
    match keyword {
        "HTTP" | "MQTT" | "SQS" => "an",
        _ => "a",
    }
}

/// The client `name` exists and is a `wanted` client; the refusal is the spec's: `requires a
/// KAFKA client, but client 'cache' is a REDIS client`.
pub(crate) fn check_client_type(
    scope: &DomainScope<'_>,
    name: &Ident,
    wanted: ClientType,
) -> Result<(), CatalogError> {
    let client = scope.client(name)?;
    if client.client_type != wanted {
        let (want, have) = (wanted.keyword(), client.client_type.keyword());
        return Err(CatalogError::new(
            name.span,
            format!(
                "requires {} {want} client, but client '{}' is {} {have} client",
                article(want),
                name.name,
                article(have)
            ),
        ));
    }
    Ok(())
}

/// Whether an MQTT body is durable: SESSION PERSISTENT QOS 1, written out.
fn mqtt_durable(body: &SourceBody) -> bool {
    matches!(
        body,
        SourceBody::MqttTopic {
            session: Some(MqttSession::Persistent),
            qos: Some(1),
            ..
        }
    )
}

/// `quiesce` is one the source `body` honors; refusals point at `span`.
pub(crate) fn check_quiesce(
    body: &SourceBody,
    quiesce: &QuiesceMode,
    span: Span,
) -> Result<(), CatalogError> {
    let head = body.head();
    let kind = QuiesceKind::of(quiesce);
    if !head.quiesce_modes().contains(&kind) {
        return Err(CatalogError::new(
            span,
            format!(
                "{} ingestors do not support ON QUIESCE {}",
                head.phrase(),
                kind.keyword()
            ),
        ));
    }
    if let QuiesceMode::Buffer { max_size, overflow } = quiesce {
        if max_size.bytes == 0 {
            return Err(CatalogError::new(span, "BUFFER MAX SIZE must be positive"));
        }
        if head.is_endpoint() && overflow.is_some() {
            return Err(CatalogError::new(
                span,
                format!(
                    "{} ingestors buffer without ON OVERFLOW: a full endpoint buffer rejects new \
                     requests instead of dropping any",
                    head.phrase()
                ),
            ));
        }
        if !head.is_endpoint() && overflow.is_none() {
            return Err(CatalogError::new(
                span,
                format!(
                    "{} ingestors buffer with ON OVERFLOW DROP OLDEST or ON OVERFLOW DROP NEWEST",
                    head.phrase()
                ),
            ));
        }
    }
    if head == IngestorHead::MqttTopic && kind == QuiesceKind::Suspend && !mqtt_durable(body) {
        return Err(CatalogError::new(
            span,
            "MQTT TOPIC ingestors support ON QUIESCE SUSPEND only with SESSION PERSISTENT QOS 1",
        ));
    }
    Ok(())
}

/// The body's delivery mode, quiesce mode and INSTANCES are ones its entity honors.
pub(crate) fn check_modes(body: &SourceBody, span: Span) -> Result<(), CatalogError> {
    let head = body.head();
    let mode = body.mode();
    let kind = ModeKind::of(mode);
    let allowed = head.delivery_modes();
    if !allowed.contains(&kind) {
        let alternatives: Vec<String> = allowed
            .iter()
            .map(|m| format!("MODE {}", m.words()))
            .collect();
        return Err(CatalogError::new(
            span,
            format!(
                "{} ingestors do not support MODE {}: use {}",
                head.phrase(),
                kind.words(),
                alternatives.join(" or ")
            ),
        ));
    }
    if let DeliveryMode::AckParallel { batch_timeout, .. } = mode {
        match (head == IngestorHead::ClientProducer, batch_timeout) {
            (true, Some(_)) => {
                return Err(CatalogError::new(
                    span,
                    "CLIENT PRODUCER ingestors take no BATCH TIMEOUT: a batch is submitted whole",
                ))
            }
            (false, None) => {
                return Err(CatalogError::new(
                    span,
                    format!(
                        "{} ingestors need BATCH TIMEOUT in MODE ACK PARALLEL",
                        head.phrase()
                    ),
                ))
            }
            _ => {}
        }
    }
    if head == IngestorHead::MqttTopic && kind != ModeKind::NoAck && !mqtt_durable(body) {
        return Err(CatalogError::new(
            span,
            "MQTT TOPIC ACK modes require SESSION PERSISTENT QOS 1",
        ));
    }
    let instances = match body {
        SourceBody::KafkaTopic { instances, .. }
        | SourceBody::PulsarTopic { instances, .. }
        | SourceBody::RabbitmqQueue { instances, .. }
        | SourceBody::MqttTopic { instances, .. }
        | SourceBody::SqsQueue { instances, .. } => *instances,
        SourceBody::NatsSubject { instances, .. } => Some(*instances),
        _ => None,
    };
    if instances == Some(0) {
        return Err(CatalogError::new(span, "INSTANCES must be at least 1"));
    }
    check_quiesce(body, body.quiesce(), span)
}
