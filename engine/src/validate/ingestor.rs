//! Validation of ingestors and signaling protocols (spec `ingestors.md`).
//!
//! An ingestor is checked in the order its runtime works: the source body (its client or
//! endpoint has the head's connector or TYPE; the delivery, quiesce and INSTANCES settings are
//! ones the entity honors — [`source`]), the input schema (the DECODE USING codec's TO SCHEMA,
//! or a CLIENT PRODUCER's FROM SCHEMA), TIMESTAMP AT (a DATETIME input field), FILTER WHERE (a
//! BOOL over the input row), then every route through [`validate_route`], each constructing
//! its own branch. What an expression may read besides the input row is the source's: header
//! functions only where spec "Header Context" lists the source, `metadata.` only where the
//! source provides it (KAFKA TOPIC: `topic STRING`, `partition I32`, `offset I64`; SYSLOG
//! LISTENER: `peer_addr STRING OPTIONAL`). Refusals name the head's phrase, as the spec's
//! messages do.
//!
//! Decisions where the spec is silent: TIMESTAMP AT accepts an OPTIONAL DATETIME field (a
//! missing timestamp follows the route's ON MESSAGE ERROR policy, as the spec says of rejected
//! or missing event timestamps); the client-type refusal is the spec's sentence verbatim
//! (`requires a KAFKA client, but client 'cache' is a REDIS client`), pointing at the client
//! name, with `an` before HTTP, MQTT and SQS. INSTANCES is accepted only by the six heads the
//! spec lists and required by NATS SUBJECT through the tree's shape itself (only those bodies
//! hold the field); a count of 0 is refused.

mod source;

pub(crate) use source::{check_client_type, check_quiesce};

use nervix_nspl::ast::ingestor::{
    CreateIngestor, CreateSignalingProtocol, IngestorHead, SignalingFormat, SourceBody,
    TimestampSource,
};
use nervix_nspl::ast::{MessageErrorPolicy, ResourceVersion, RouteBranching};
use nervix_nspl::ObjectKind;

use super::route::{
    at, check_filter, schema_fields, validate_route, BranchRule, Field, RouteInputs,
};
use crate::catalog::{CatalogError, DomainScope, EntityKey};
use crate::types::{DataType, FieldType};

/// The sources whose transport headers `read_header`/`read_headers` read (spec "Header
/// Context").
fn reads_headers(head: IngestorHead) -> bool {
    use IngestorHead as H;
    matches!(
        head,
        H::HttpEndpoint
            | H::HttpRequest
            | H::WebsocketsEndpoint
            | H::KafkaTopic
            | H::NatsSubject
            | H::PulsarTopic
            | H::RabbitmqQueue
            | H::SqsQueue
    )
}

/// The header rule of a source: allowed, or the spec's refusal naming the head.
fn header_rule(head: IngestorHead) -> Result<(), String> {
    if reads_headers(head) {
        Ok(())
    } else {
        Err(format!(
            "{} ingestors do not support read_header or read_headers",
            head.phrase()
        ))
    }
}

/// The `metadata.` fields a source provides.
fn metadata_fields(head: IngestorHead) -> Vec<Field> {
    let field = |name: &str, ty: FieldType| Field {
        name: name.to_string(),
        ty,
    };
    match head {
        IngestorHead::KafkaTopic => vec![
            field("topic", FieldType::required(DataType::String)),
            field("partition", FieldType::required(DataType::I32)),
            field("offset", FieldType::required(DataType::I64)),
        ],
        IngestorHead::SyslogListener => {
            vec![field("peer_addr", FieldType::optional(DataType::String))]
        }
        _ => Vec::new(),
    }
}

/// The input schema's name and fields: a CLIENT PRODUCER's FROM SCHEMA, else the TO SCHEMA of
/// the DECODE USING codec.
fn input_schema(
    scope: &DomainScope<'_>,
    definition: &CreateIngestor,
) -> Result<(String, Vec<Field>), CatalogError> {
    let head = definition.source.head();
    if let SourceBody::ClientProducer { schema, .. } = &definition.source {
        if let Some(codec) = &definition.decode {
            return Err(CatalogError::new(
                codec.span,
                "CLIENT PRODUCER ingestors decode nothing and take no DECODE USING: a submitted \
                 batch already carries the input schema",
            ));
        }
        let schema = scope.schema(schema)?;
        return Ok((schema.name.name.clone(), schema_fields(schema)));
    }
    let Some(codec_name) = &definition.decode else {
        return Err(CatalogError::new(
            definition.name.span,
            format!("{} ingestors require DECODE USING <codec>", head.phrase()),
        ));
    };
    let codec = scope.codec(codec_name)?;
    let schema = scope.schema(&at(&codec.schema, codec_name.span))?;
    Ok((schema.name.name.clone(), schema_fields(schema)))
}

pub fn validate(scope: &DomainScope<'_>, definition: &CreateIngestor) -> Result<(), CatalogError> {
    let head = definition.source.head();
    source::check_reference(scope, &definition.source)?;
    source::check_modes(&definition.source, definition.name.span)?;
    let (schema_name, input) = input_schema(scope, definition)?;
    if let Some(TimestampSource::At(field)) = &definition.timestamp {
        match input.iter().find(|f| f.name == field.name) {
            None => {
                return Err(CatalogError::new(
                    field.span,
                    format!(
                        "TIMESTAMP AT names '{}', which is not a field of the input schema '{}'",
                        field.name, schema_name
                    ),
                ))
            }
            Some(f) if f.ty.data_type != DataType::Datetime => {
                return Err(CatalogError::new(
                    field.span,
                    format!(
                        "TIMESTAMP AT needs a DATETIME field, but '{}' of schema '{}' is {}",
                        field.name, schema_name, f.ty.data_type
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    let metadata = metadata_fields(head);
    let inputs = RouteInputs {
        node: format!("ingestor '{}'", definition.name.name),
        input: Some(&input),
        left: None,
        right: None,
        relay_state: Vec::new(),
        branch: None,
        metadata: &metadata,
        generated: &[],
        headers: header_rule(head),
        window: false,
        metadata_source: Some(head.phrase()),
    };
    if let Some(filter) = &definition.filter {
        check_filter(&inputs, filter, "FILTER WHERE")?;
    }
    if definition.routes.is_empty() {
        return Err(CatalogError::new(
            definition.name.span,
            "an ingestor needs at least one TO <relay> route",
        ));
    }
    for route in &definition.routes {
        validate_route(
            scope,
            &inputs,
            BranchRule::Construct { incoming: None },
            route,
        )?;
    }
    Ok(())
}

/// A PROTOBUF signaling protocol compiles a resource version, which must exist.
pub fn validate_signaling(
    scope: &DomainScope<'_>,
    definition: &CreateSignalingProtocol,
) -> Result<(), CatalogError> {
    let SignalingFormat::Protobuf(protobuf) = &definition.format else {
        return Ok(());
    };
    let resource = scope.resource(&protobuf.resource)?;
    match protobuf.version {
        ResourceVersion::Number(number) if !resource.has_version(number) => Err(CatalogError::new(
            protobuf.resource.span,
            format!(
                "resource '{}' has no version {number}",
                protobuf.resource.name
            ),
        )),
        ResourceVersion::Latest if resource.latest().is_none() => Err(CatalogError::new(
            protobuf.resource.span,
            format!(
                "resource '{}' has no completed version for VERSION LATEST to bind",
                protobuf.resource.name
            ),
        )),
        _ => Ok(()),
    }
}

/// The domain entities an ingestor names: its client, endpoint or schema, its codec, and the
/// relays and branches of its routes and error routes.
pub fn references(definition: &CreateIngestor) -> Vec<EntityKey> {
    let mut keys = Vec::new();
    match &definition.source {
        SourceBody::ClientProducer { schema, .. } => {
            keys.push(EntityKey::new(ObjectKind::Schema, schema.name.as_str()))
        }
        body => {
            if let Some(name) = source::source_reference(body) {
                let kind = if body.head().is_endpoint() {
                    ObjectKind::Endpoint
                } else {
                    ObjectKind::Client
                };
                keys.push(EntityKey::new(kind, name.name.as_str()));
            }
        }
    }
    if let Some(codec) = &definition.decode {
        keys.push(EntityKey::new(ObjectKind::Codec, codec.name.as_str()));
    }
    for route in &definition.routes {
        keys.push(EntityKey::new(
            ObjectKind::Relay,
            route.target.name.as_str(),
        ));
        if let Some(RouteBranching::BranchedBy { branch, .. }) = &route.branching {
            keys.push(EntityKey::new(ObjectKind::Branch, branch.name.as_str()));
        }
        if let MessageErrorPolicy::SendTo { relay, .. } = &route.on_error {
            keys.push(EntityKey::new(ObjectKind::Relay, relay.name.as_str()));
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The cluster-wide entities a signaling protocol names: a PROTOBUF format's resource.
pub fn signaling_global_references(definition: &CreateSignalingProtocol) -> Vec<EntityKey> {
    match &definition.format {
        SignalingFormat::Protobuf(protobuf) => vec![EntityKey::new(
            ObjectKind::Resource,
            protobuf.resource.name.as_str(),
        )],
        _ => Vec::new(),
    }
}
