//! Validation of emitters (DESIGN §7 "emitters", spec `processors.md` for the shared input,
//! materialized-state, construction and message-error rules).
//!
//! An emitter is checked in the order its runtime works: its FROM relays (they exist, share
//! one declared schema model and one exact branch, each named once; each `FROM … WHERE` is a
//! BOOL over the input row), its materialized dependencies
//! ([`validate_state_dependencies`]), the sink's client (of the head's connector) or CLIENT
//! CONSUMER schema and its codec, the construction of the record the sink writes, the sink's
//! own expressions and header writes ([`sink`]), then ON MESSAGE ERROR.
//!
//! # The record an emitter writes
//!
//! * CLIENT CONSUMER: the TO SCHEMA;
//! * with `ENCODE USING <codec>`: the codec's TO SCHEMA;
//! * otherwise (WITHOUT BODY, POSTGRES TABLE, FILE APPEND … FORMAT ARROW, no encoding): a
//!   projection of the input relays' schema.
//!
//! INHERIT and SET build a declared record (the first two) exactly as a route builds its
//! relay's: every required field initialized, types exact, SENSITIVE only promoted. A
//! projection is typed the same way against the input schema, but the fields it leaves out
//! are simply not part of it — nothing downstream declares them (decision: the spec names no
//! output schema for these sinks, and a body-less request or a VALUES row needs no complete
//! record). An emitter with neither INHERIT nor SET writes its input row unchanged, which for
//! a declared record needs the record's schema to be the input's schema model.
//!
//! Decision where the spec is silent: an emitter's WHERE reads the finalized record (bare,
//! `message.`, `output.`) and also `input.` — an emitter has one construction and no FILTER
//! WHERE of its own, so its WHERE is where the input row is consulted.

mod sink;

use std::collections::BTreeSet;

use nervix_nspl::ast::catalog::CreateRelay;
use nervix_nspl::ast::emitter::{CreateEmitter, Encoding, SinkBody};
use nervix_nspl::ast::{Branching, Ident, Inherit, InheritFields, Input, MessageErrorPolicy};
use nervix_nspl::ObjectKind;

use super::route::{
    at, check_filter, check_message_error, construct, describe_branching, same_branching,
    schema_fields, validate_state_dependencies, ErrorSource, Field, RouteInputs, Target,
};
use crate::catalog::{CatalogError, DomainScope, EntityKey};

/// What emitters answer to `read_header`/`read_headers`.
const NO_HEADERS: &str =
    "emitters do not support read_header or read_headers: relay rows carry no transport headers";

/// The FROM relays' shared schema and branch.
struct InputContract<'s> {
    schema: &'s Ident,
    branching: &'s Branching,
}

fn check_inputs<'s>(
    scope: &DomainScope<'s>,
    node: &str,
    name: &Ident,
    inputs: &[Input],
) -> Result<InputContract<'s>, CatalogError> {
    let mut seen = BTreeSet::new();
    let mut first: Option<(&Ident, &'s CreateRelay)> = None;
    for input in inputs {
        let relay_name = &input.relay;
        if !seen.insert(relay_name.name.as_str()) {
            return Err(CatalogError::new(
                relay_name.span,
                format!("relay '{}' is listed twice in FROM", relay_name.name),
            ));
        }
        let relay = scope.relay(relay_name)?;
        let Some((first_name, first_relay)) = first else {
            first = Some((relay_name, relay));
            continue;
        };
        if relay.schema.name != first_relay.schema.name {
            return Err(CatalogError::new(
                relay_name.span,
                format!(
                    "relay '{}' carries schema '{}', but relay '{}' carries schema '{}': every \
                     FROM relay of {node} must reference the same declared schema",
                    relay_name.name, relay.schema.name, first_name.name, first_relay.schema.name
                ),
            ));
        }
        if !same_branching(&relay.branching, &first_relay.branching) {
            return Err(CatalogError::new(
                relay_name.span,
                format!(
                    "relay '{}' is {}, but relay '{}' is {}: every FROM relay of {node} must use \
                     the same exact named branch, or all be unbranched",
                    relay_name.name,
                    describe_branching(&relay.branching),
                    first_name.name,
                    describe_branching(&first_relay.branching)
                ),
            ));
        }
    }
    match first {
        Some((_, relay)) => Ok(InputContract {
            schema: &relay.schema,
            branching: &relay.branching,
        }),
        None => Err(CatalogError::new(
            name.span,
            "an emitter needs at least one FROM relay",
        )),
    }
}

/// The record the sink writes: what owns its fields (for messages), the schema's name, the
/// fields, and whether they are a declared schema (else a projection of the input's).
struct Record {
    owner: String,
    schema: String,
    fields: Vec<Field>,
    declared: bool,
}

fn output_record(
    scope: &DomainScope<'_>,
    definition: &CreateEmitter,
    input_schema: &Ident,
    input_fields: &[Field],
) -> Result<Record, CatalogError> {
    if let SinkBody::ClientConsumer { schema } = &definition.sink.body {
        let declared = scope.schema(schema)?;
        return Ok(Record {
            owner: format!("output schema '{}'", schema.name),
            schema: schema.name.clone(),
            fields: schema_fields(declared),
            declared: true,
        });
    }
    if let Some(Encoding::Codec(codec_name)) = &definition.sink.encoding {
        let codec = scope.codec(codec_name)?;
        let declared = scope.schema(&at(&codec.schema, codec_name.span))?;
        return Ok(Record {
            owner: format!(
                "schema '{}' of codec '{}'",
                codec.schema.name, codec_name.name
            ),
            schema: codec.schema.name.clone(),
            fields: schema_fields(declared),
            declared: true,
        });
    }
    Ok(Record {
        owner: format!("input schema '{}'", input_schema.name),
        schema: input_schema.name.clone(),
        fields: input_fields.to_vec(),
        declared: false,
    })
}

pub fn validate(scope: &DomainScope<'_>, definition: &CreateEmitter) -> Result<(), CatalogError> {
    let node = format!("emitter '{}'", definition.name.name);
    let contract = check_inputs(scope, &node, &definition.name, &definition.inputs)?;
    let input_schema = scope.schema(&at(contract.schema, definition.name.span))?;
    let input_fields = schema_fields(input_schema);
    let branch_key = match contract.branching {
        Branching::BranchedBy(branch) => {
            let declaration = scope.branch(&at(branch, definition.name.span))?;
            Some(schema_fields(
                scope.schema(&at(&declaration.schema, definition.name.span))?,
            ))
        }
        Branching::Unbranched => None,
    };
    let relay_state =
        validate_state_dependencies(scope, &node, contract.branching, &definition.state)?;
    sink::check_client(scope, &definition.sink.body)?;
    let record = output_record(scope, definition, contract.schema, &input_fields)?;
    let inputs = RouteInputs {
        node: node.clone(),
        input: Some(&input_fields),
        left: None,
        right: None,
        relay_state,
        branch: branch_key.as_deref(),
        metadata: &[],
        generated: &[],
        headers: Err(NO_HEADERS.to_string()),
        window: false,
        metadata_source: None,
    };
    for input in &definition.inputs {
        if let Some(filter) = &input.filter {
            check_filter(&inputs, filter, "FROM … WHERE")?;
        }
    }
    let construction = &definition.construction;
    let passthrough = Inherit {
        fields: InheritFields::All { except: Vec::new() },
        leak_sensitive: false,
    };
    let inherit = match &construction.inherit {
        Some(inherit) => Some(inherit),
        None if construction.set.is_empty() => {
            if record.declared && record.schema != contract.schema.name {
                return Err(CatalogError::new(
                    definition.name.span,
                    format!(
                        "{node} writes its input row unchanged, but its input schema '{}' is not \
                         the {}: construct the record with INHERIT or SET",
                        contract.schema.name, record.owner
                    ),
                ));
            }
            Some(&passthrough)
        }
        None => None,
    };
    let target = Target {
        owner: record.owner.clone(),
        builder: node.clone(),
        fields: &record.fields,
        anchor: definition.name.span,
        complete: record.declared,
    };
    let built = construct(
        &inputs,
        &target,
        inherit,
        &construction.set,
        construction.filter.as_ref(),
        true,
    )?;
    sink::check_expressions(definition, &inputs, &target, &built)?;
    let source = ErrorSource {
        route: node,
        branch: contract.branching.clone(),
        partial_output: &record.fields,
    };
    check_message_error(scope, &inputs, &source, &definition.on_message_error)
}

/// The domain entities an emitter names: its input and state relays, its client or CLIENT
/// CONSUMER schema, its codec and its error relay.
pub fn references(definition: &CreateEmitter) -> Vec<EntityKey> {
    let mut keys: Vec<EntityKey> = definition
        .inputs
        .iter()
        .map(|i| &i.relay)
        .chain(definition.state.iter().map(|s| &s.relay))
        .map(|r| EntityKey::new(ObjectKind::Relay, r.name.as_str()))
        .collect();
    match &definition.sink.body {
        SinkBody::ClientConsumer { schema } => {
            keys.push(EntityKey::new(ObjectKind::Schema, schema.name.as_str()))
        }
        body => {
            if let Some(client) = sink::sink_client(body) {
                keys.push(EntityKey::new(ObjectKind::Client, client.name.as_str()));
            }
        }
    }
    if let Some(Encoding::Codec(codec)) = &definition.sink.encoding {
        keys.push(EntityKey::new(ObjectKind::Codec, codec.name.as_str()));
    }
    if let MessageErrorPolicy::SendTo { relay, .. } = &definition.on_message_error {
        keys.push(EntityKey::new(ObjectKind::Relay, relay.name.as_str()));
    }
    keys.sort();
    keys.dedup();
    keys
}
