//! Source bodies: what follows `FROM` under each ingestor head (`spec/ingestors.md`,
//! "Supported Ingestor Types"), with the delivery and quiesce modes each entity honors.
//!
//! The per-entity mode tables are enforced here rather than in validation because they depend
//! on the head alone; completion reads the same tables through the expectations noted below,
//! so it offers only the modes the head accepts.

use crate::ast::ingestor::{
    EndpointBody, IngestorHead, KafkaOffset, ModeKind, MqttSession, QuiesceKind, SourceBody,
};
use crate::ast::{DeliveryMode, Duration, Ident, ObjectKind, QuiesceMode};
use crate::error::{Expected, NameKind, ParseError};
use crate::parse::route::Presence;
use crate::parse::{PResult, Parser};

/// INSTANCES per entity (spec "Instancing"): NATS requires it, five more accept it.
fn instances_rule(head: IngestorHead) -> Presence {
    use IngestorHead as H;
    match head {
        H::NatsSubject => Presence::Required,
        H::KafkaTopic | H::PulsarTopic | H::MqttTopic | H::RabbitmqQueue | H::SqsQueue => {
            Presence::Optional
        }
        _ => Presence::Forbidden,
    }
}

/// The body after `FROM` under `head`, complete through its `ON QUIESCE` clause.
pub fn source_body(p: &mut Parser, head: IngestorHead) -> PResult<SourceBody> {
    use IngestorHead as H;
    let body = match head {
        H::HttpRequest => {
            let client = client(p, head)?;
            let every = every(p)?;
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            SourceBody::HttpRequest {
                client,
                every,
                mode,
                quiesce,
            }
        }
        H::KafkaTopic => {
            let client = client(p, head)?;
            let topic = external_name(p, "TOPIC")?;
            p.expect_keywords(&["OFFSET", "BY"])?;
            let offset = if p.eat_keyword("DOMAIN") {
                KafkaOffset::Domain
            } else {
                p.expect_keywords(&["CONSUMER", "GROUP"])?;
                KafkaOffset::ConsumerGroup(p.string()?)
            };
            let instances = optional_instances(p)?;
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            SourceBody::KafkaTopic {
                client,
                topic,
                offset,
                instances,
                mode,
                quiesce,
            }
        }
        H::PulsarTopic => {
            let client = client(p, head)?;
            let topic = external_name(p, "TOPIC")?;
            let subscription = external_name(p, "SUBSCRIPTION")?;
            let instances = optional_instances(p)?;
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            SourceBody::PulsarTopic {
                client,
                topic,
                subscription,
                instances,
                mode,
                quiesce,
            }
        }
        H::RabbitmqQueue | H::SqsQueue => {
            let client = client(p, head)?;
            let queue = external_name(p, "QUEUE")?;
            let instances = optional_instances(p)?;
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            if head == H::RabbitmqQueue {
                SourceBody::RabbitmqQueue {
                    client,
                    queue,
                    instances,
                    mode,
                    quiesce,
                }
            } else {
                SourceBody::SqsQueue {
                    client,
                    queue,
                    instances,
                    mode,
                    quiesce,
                }
            }
        }
        H::RedisPubsub => {
            let client = client(p, head)?;
            let channel = external_name(p, "CHANNEL")?;
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            SourceBody::RedisPubsub {
                client,
                channel,
                mode,
                quiesce,
            }
        }
        H::MqttTopic => mqtt_body(p)?,
        H::NatsSubject => {
            let client = client(p, head)?;
            let subject = external_name(p, "SUBJECT")?;
            if !p.eat_keyword("QUEUE") {
                return Err(prefixed(
                    p,
                    "NATS SUBJECT ingestors require QUEUE GROUP '<group>' and INSTANCES <count>",
                ));
            }
            p.expect_keyword("GROUP")?;
            let queue_group = p.string()?;
            if !p.at_keyword("INSTANCES") {
                return Err(prefixed(
                    p,
                    "NATS SUBJECT ingestors require INSTANCES <count> (INSTANCES 1 for a single queue member)",
                ));
            }
            let instances = optional_instances(p)?.unwrap_or(1);
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            SourceBody::NatsSubject {
                client,
                subject,
                queue_group,
                instances,
                mode,
                quiesce,
            }
        }
        H::ZeromqPull | H::SyslogListener | H::WebsocketsConnection => {
            let client = client(p, head)?;
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            match head {
                H::ZeromqPull => SourceBody::ZeromqPull {
                    client,
                    mode,
                    quiesce,
                },
                H::SyslogListener => SourceBody::SyslogListener {
                    client,
                    mode,
                    quiesce,
                },
                _ => SourceBody::WebsocketsConnection {
                    client,
                    mode,
                    quiesce,
                },
            }
        }
        H::PrometheusQuery => {
            let client = client(p, head)?;
            let query = external_name(p, "QUERY")?;
            let every = every(p)?;
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            SourceBody::PrometheusQuery {
                client,
                query,
                every,
                mode,
                quiesce,
            }
        }
        H::HttpEndpoint | H::WebsocketsEndpoint => {
            let endpoint = client(p, head)?;
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            let body = EndpointBody {
                endpoint,
                mode,
                quiesce,
            };
            if head == H::HttpEndpoint {
                SourceBody::HttpEndpoint(body)
            } else {
                SourceBody::WebsocketsEndpoint(body)
            }
        }
        H::ClientProducer => {
            p.expect_keyword("SCHEMA")?;
            let schema = p.ident(NameKind::Existing(ObjectKind::Schema))?;
            let (mode, quiesce) = mode_and_quiesce(p, head)?;
            SourceBody::ClientProducer {
                schema,
                mode,
                quiesce,
            }
        }
    };
    Ok(body)
}

/// The client (or endpoint) a transport body reads, of the head's connector or TYPE.
fn client(p: &mut Parser, head: IngestorHead) -> PResult<Ident> {
    let [connector, _] = head.keywords();
    let kind = if head.is_endpoint() {
        NameKind::EndpointOf(connector)
    } else {
        NameKind::ClientOf(connector)
    };
    p.ident(kind)
}

/// `<KEYWORD> '<external name>'`.
fn external_name(p: &mut Parser, keyword: &'static str) -> PResult<String> {
    p.expect_keyword(keyword)?;
    p.string()
}

/// `EVERY <duration>`: a polling cadence, which must be positive.
fn every(p: &mut Parser) -> PResult<Duration> {
    p.expect_keyword("EVERY")?;
    positive_duration(p, "EVERY")
}

/// A duration that must be above zero; `what` names the clause in the message.
pub(super) fn positive_duration(p: &mut Parser, what: &str) -> PResult<Duration> {
    let span = p.span();
    let d = p.duration()?;
    if d.nanos == 0 {
        return Err(p.error_at(span, format!("{what} must be positive")));
    }
    Ok(d)
}

/// `[INSTANCES <count>]` at the position the spec shows it; the count is at least 1.
fn optional_instances(p: &mut Parser) -> PResult<Option<u64>> {
    if !p.eat_keyword("INSTANCES") {
        return Ok(None);
    }
    let span = p.span();
    let n = p.integer()?;
    if n == 0 {
        return Err(p.error_at(span, "INSTANCES must be at least 1"));
    }
    Ok(Some(n))
}

/// `<message>; expected …, found …` at the current token, keeping the expectation set.
fn prefixed(p: &mut Parser, message: &str) -> ParseError {
    let mut err = p.unexpected();
    err.message = format!("{message}; {}", err.message);
    err
}

/// MQTT's body and its delivery constraints: ACK modes and SUSPEND need SESSION PERSISTENT
/// QOS 1, written out (NO ACK's defaults are SESSION CLEAN QOS 0).
fn mqtt_body(p: &mut Parser) -> PResult<SourceBody> {
    let head = IngestorHead::MqttTopic;
    let client = client(p, head)?;
    let topic = external_name(p, "TOPIC")?;
    let instances = optional_instances(p)?;
    let session = if p.eat_keyword("SESSION") {
        match p.expect_one_of(&["CLEAN", "PERSISTENT"])? {
            "CLEAN" => Some(MqttSession::Clean),
            _ => Some(MqttSession::Persistent),
        }
    } else {
        None
    };
    let qos = if p.eat_keyword("QOS") {
        let span = p.span();
        match p.integer()? {
            0 => Some(0),
            1 => Some(1),
            _ => return Err(p.error_at(span, "MQTT QOS must be 0 or 1")),
        }
    } else {
        None
    };
    let durable = session == Some(MqttSession::Persistent) && qos == Some(1);
    let mode_span = p.span();
    let mode = delivery_mode(p, head)?;
    if mode != DeliveryMode::NoAck && !durable {
        return Err(p.error_at(
            mode_span,
            "MQTT TOPIC ACK modes require SESSION PERSISTENT QOS 1",
        ));
    }
    let quiesce_span = quiesce_intro(p)?;
    let quiesce = quiesce_body(p, head)?;
    if quiesce == QuiesceMode::Suspend && !durable {
        return Err(p.error_at(
            quiesce_span,
            "MQTT TOPIC ingestors support ON QUIESCE SUSPEND only with SESSION PERSISTENT QOS 1",
        ));
    }
    Ok(SourceBody::MqttTopic {
        client,
        topic,
        instances,
        session,
        qos,
        mode,
        quiesce,
    })
}

/// `MODE …` then `ON QUIESCE …`, each checked against the head's table. A head that takes no
/// INSTANCES refuses one written where its body would end.
fn mode_and_quiesce(p: &mut Parser, head: IngestorHead) -> PResult<(DeliveryMode, QuiesceMode)> {
    if instances_rule(head) == Presence::Forbidden && p.is_keyword_at(0, "INSTANCES") {
        return Err(p.error_at(
            p.span(),
            format!(
                "{} ingestors take no INSTANCES: only KAFKA TOPIC, PULSAR TOPIC, MQTT TOPIC, RABBITMQ QUEUE, SQS QUEUE and NATS SUBJECT scale through instances",
                head.phrase()
            ),
        ));
    }
    let mode = delivery_mode(p, head)?;
    quiesce_intro(p)?;
    let quiesce = quiesce_body(p, head)?;
    Ok((mode, quiesce))
}

/// `ON QUIESCE`, which every source body requires; returns the span of the body after it.
fn quiesce_intro(p: &mut Parser) -> PResult<crate::span::Span> {
    if !p.eat_keyword("ON") {
        return Err(prefixed(
            p,
            "a source body ends with ON QUIESCE <mode>, which has no default",
        ));
    }
    p.expect_keyword("QUIESCE")?;
    Ok(p.span())
}

/// `MODE …` limited to the modes `head` accepts. The first one or two keywords are checked
/// here, noting only the accepted alternatives; the core then parses the whole mode.
fn delivery_mode(p: &mut Parser, head: IngestorHead) -> PResult<DeliveryMode> {
    let allowed = head.delivery_modes();
    let mark = p.mark();
    p.expect_keyword("MODE")?;
    let at = p.span();
    let refuse = |p: &Parser, written: &str| {
        let alternatives: Vec<String> = allowed
            .iter()
            .map(|m| format!("MODE {}", m.words()))
            .collect();
        p.error_at(
            at,
            format!(
                "{} ingestors do not support MODE {written}: use {}",
                head.phrase(),
                alternatives.join(" or ")
            ),
        )
    };
    let acks = allowed.iter().any(|m| *m != ModeKind::NoAck);
    if allowed.contains(&ModeKind::NoAck) {
        p.note(Expected::Keyword("NO"));
    }
    if acks {
        p.note(Expected::Keyword("ACK"));
    }
    if p.is_keyword_at(0, "NO") {
        if !allowed.contains(&ModeKind::NoAck) {
            return Err(refuse(p, "NO ACK"));
        }
    } else if p.is_keyword_at(0, "ACK") {
        let written = if p.is_keyword_at(1, "SEQUENTIAL") {
            Some(ModeKind::AckSequential)
        } else if p.is_keyword_at(1, "PARALLEL") {
            Some(ModeKind::AckParallel)
        } else {
            None
        };
        match written {
            Some(kind) if !allowed.contains(&kind) => return Err(refuse(p, kind.words())),
            None if !acks => return Err(refuse(p, "ACK")),
            Some(_) => {}
            None => {
                p.advance();
                for kind in [ModeKind::AckSequential, ModeKind::AckParallel] {
                    if allowed.contains(&kind) {
                        p.note(Expected::Keyword(&kind.words()["ACK ".len()..]));
                    }
                }
                return Err(p.unexpected());
            }
        }
    } else {
        return Err(p.unexpected());
    }
    p.reset(mark);
    // A client producer's ACK PARALLEL has no partial-batch wait: a batch is submitted whole.
    let batch_timeout = if head == IngestorHead::ClientProducer {
        Presence::Forbidden
    } else {
        Presence::Required
    };
    p.delivery_mode(batch_timeout)
}

/// The body after `ON QUIESCE`, limited to the modes `head` accepts, with the endpoint and
/// transport forms of BUFFER told apart.
fn quiesce_body(p: &mut Parser, head: IngestorHead) -> PResult<QuiesceMode> {
    let allowed = head.quiesce_modes();
    let at = p.span();
    for kind in allowed {
        p.note(Expected::Keyword(kind.keyword()));
    }
    match QuiesceKind::ALL
        .into_iter()
        .find(|k| p.is_keyword_at(0, k.keyword()))
    {
        Some(kind) if !allowed.contains(&kind) => {
            return Err(p.error_at(
                at,
                format!(
                    "{} ingestors do not support ON QUIESCE {}",
                    head.phrase(),
                    kind.keyword()
                ),
            ));
        }
        Some(_) => {}
        None => return Err(p.unexpected()),
    }
    if head.is_endpoint() && p.is_keyword_at(0, "BUFFER") {
        return endpoint_buffer(p, head);
    }
    let quiesce = p.quiesce_body()?;
    if let QuiesceMode::Buffer { overflow, .. } = &quiesce {
        if overflow.is_none() {
            return Err(prefixed(
                p,
                &format!(
                    "{} ingestors buffer with ON OVERFLOW DROP OLDEST or ON OVERFLOW DROP NEWEST",
                    head.phrase()
                ),
            ));
        }
    }
    Ok(quiesce)
}

/// An endpoint's `BUFFER MAX SIZE <bytes>`, read here rather than by the core so that
/// neither errors nor completion offer the ON OVERFLOW an endpoint never takes.
fn endpoint_buffer(p: &mut Parser, head: IngestorHead) -> PResult<QuiesceMode> {
    p.expect_keywords(&["BUFFER", "MAX", "SIZE"])?;
    let size_span = p.span();
    let max_size = p.byte_size()?;
    if max_size.bytes == 0 {
        return Err(p.error_at(size_span, "BUFFER MAX SIZE must be positive"));
    }
    if p.is_keyword_at(0, "ON") && p.is_keyword_at(1, "OVERFLOW") {
        return Err(p.error_at(
            p.span(),
            format!(
                "{} ingestors buffer without ON OVERFLOW: a full endpoint buffer rejects new requests instead of dropping any",
                head.phrase()
            ),
        ));
    }
    Ok(QuiesceMode::Buffer {
        max_size,
        overflow: None,
    })
}
