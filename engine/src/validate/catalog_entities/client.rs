//! `CREATE CLIENT` (and the client an `ALTER CLIENT` leaves).
//!
//! Rules:
//!
//! * `WITH SIGNALING PROTOCOL p` names an existing signaling protocol, on TYPE WEBSOCKETS only;
//! * every `MOUNT r VERSION n` names an existing resource that has version `n`, and
//!   `VERSION LATEST` a resource with at least one version (see `resources`);
//! * `POOL SIZE` only on TYPE REDIS and POSTGRES, at least 1;
//! * every `{{ r }}` template in a CONFIG string value names a resource the client MOUNTs
//!   (`CONFIG 'ssl.ca.location' uses {{ dev_tls }}, but the client does not MOUNT dev_tls`);
//!   a `{{` must be closed by `}}` around a resource name, so a typo cannot reach the
//!   connector as literal text;
//! * each TYPE's required CONFIG keys are present, with a non-empty string value:
//!
//! | TYPE | required CONFIG | from |
//! |---|---|---|
//! | KAFKA | `'bootstrap.servers'` | spec's Kafka TLS example; librdkafka has no default broker |
//! | HTTP | `'endpoint'` | spec: "HTTP: use an https://... endpoint" |
//! | PROMETHEUS | `'addr'` | spec: "PROMETHEUS: use an https://... addr" |
//! | WEBSOCKETS | `'endpoint'` | spec: "WEBSOCKETS: use a wss://... endpoint" |
//! | MQTT, NATS, PULSAR, RABBITMQ, REDIS | `'addr'` | spec: "use mqtts://... in addr" (and likewise); Pulsar lists `'addr'` |
//! | SQS | `'endpoint'` | spec: the source "resolves the host of its client's endpoint" |
//! | SYSLOG | `'protocol'`, one of `'udp'`, `'tcp'`, `'tls'` | spec: "SYSLOG: select 'protocol' = 'tls'"; "binds a UDP, TCP, or TLS listener" |
//! | ZEROMQ | `'endpoint'` | decision: a ZeroMQ socket connects to an endpoint (`tcp://host:port`) |
//! | POSTGRES | `'url'` | decision: a connection URL is the one key every Postgres client needs |
//! | FILE | none | decision: paths belong to the emitter (`PATH '<relative path>'`) |
//!
//! Connector-specific settings beyond these (TLS files an ingestor requires, such as SYSLOG's
//! `tls_cert_file`, or MQTT's `tls_ca_file` for `mqtts://`) are the ingestor's or the
//! connector's to check: the spec states them per use, not per client.

use std::collections::BTreeSet;

use nervix_nspl::ast::catalog::{ClientType, CreateClient};
use nervix_nspl::ast::ConfigValue;

use super::resources::resolve_version;
use crate::catalog::{CatalogError, DomainScope};

pub(super) fn validate_client(
    scope: &DomainScope<'_>,
    client: &CreateClient,
) -> Result<(), CatalogError> {
    let refuse = |message: String| Err(CatalogError::new(client.name.span, message));
    if let Some(protocol) = &client.signaling_protocol {
        if client.client_type != ClientType::Websockets {
            return Err(CatalogError::new(
                protocol.span,
                format!(
                    "WITH SIGNALING PROTOCOL is only for TYPE WEBSOCKETS clients, not TYPE {}",
                    client.client_type.keyword()
                ),
            ));
        }
        scope.signaling_protocol(protocol)?;
    }
    let mut mounted = BTreeSet::new();
    for mount in &client.mounts {
        if !mounted.insert(mount.resource.name.as_str()) {
            return Err(CatalogError::new(
                mount.resource.span,
                format!("resource '{}' is mounted twice", mount.resource),
            ));
        }
        resolve_version(scope.catalog, &mount.resource, mount.version)?;
    }
    match client.pool_size {
        Some(_) if !client.client_type.has_pool() => {
            return refuse(format!(
                "POOL SIZE is only for TYPE REDIS and TYPE POSTGRES clients, but client '{}' is \
                 TYPE {}",
                client.name,
                client.client_type.keyword()
            ))
        }
        Some(0) => {
            return refuse(format!(
                "client '{}' has POOL SIZE 0: it is at least 1",
                client.name
            ))
        }
        _ => {}
    }
    for (key, value) in &client.config.entries {
        if let ConfigValue::String(text) = value {
            for template in
                templates(key, text).map_err(|m| CatalogError::new(client.name.span, m))?
            {
                if !mounted.contains(template) {
                    return refuse(format!(
                        "CONFIG '{key}' uses {{{{ {template} }}}}, but the client does not \
                         MOUNT {template}"
                    ));
                }
            }
        }
    }
    required_config(client).map_err(|m| CatalogError::new(client.name.span, m))
}

/// The CONFIG keys a client of `client_type` must set.
pub(super) fn required_keys(client_type: ClientType) -> &'static [&'static str] {
    match client_type {
        ClientType::Kafka => &["bootstrap.servers"],
        ClientType::Http | ClientType::Websockets | ClientType::Sqs | ClientType::Zeromq => {
            &["endpoint"]
        }
        ClientType::Prometheus
        | ClientType::Mqtt
        | ClientType::Nats
        | ClientType::Pulsar
        | ClientType::Rabbitmq
        | ClientType::Redis => &["addr"],
        ClientType::Syslog => &["protocol"],
        ClientType::Postgres => &["url"],
        ClientType::File => &[],
    }
}

/// The SYSLOG listener protocols.
const SYSLOG_PROTOCOLS: [&str; 3] = ["udp", "tcp", "tls"];

fn required_config(client: &CreateClient) -> Result<(), String> {
    let type_name = client.client_type.keyword();
    for key in required_keys(client.client_type) {
        let value = client
            .config
            .entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v);
        let text = match value {
            None => {
                return Err(format!(
                    "{} {type_name} client requires CONFIG '{key}'",
                    article(type_name)
                ))
            }
            Some(ConfigValue::String(text)) if !text.trim().is_empty() => text,
            Some(_) => {
                return Err(format!(
                    "CONFIG '{key}' of {} {type_name} client must be a non-empty string",
                    article(type_name)
                ))
            }
        };
        if client.client_type == ClientType::Syslog && !SYSLOG_PROTOCOLS.contains(&text.as_str()) {
            return Err(format!(
                "CONFIG 'protocol' of a SYSLOG client is '{text}': use 'udp', 'tcp' or 'tls'"
            ));
        }
    }
    Ok(())
}

/// `a` or `an` before a TYPE keyword, as it is read aloud (`an HTTP client`, `a KAFKA
/// client`).
fn article(type_name: &str) -> &'static str {
    match type_name {
        "HTTP" | "MQTT" | "SQS" => "an",
        _ => "a",
    }
}

/// The resource names `{{ name }}` templates in `value` use, in order; a refusal for a `{{`
/// that is not closed around a resource name.
pub(super) fn templates<'v>(key: &str, value: &'v str) -> Result<Vec<&'v str>, String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(format!(
                "CONFIG '{key}' opens {{{{ without closing it: write {{{{ <resource> }}}}"
            ));
        };
        let name = after[..close].trim();
        if !is_resource_name(name) {
            return Err(format!(
                "CONFIG '{key}' uses {{{{ {name} }}}}, which is not a resource name"
            ));
        }
        names.push(name);
        rest = &after[close + 2..];
    }
    Ok(names)
}

/// An NSPL identifier: `[a-z_][a-z0-9_]*`.
fn is_resource_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_lowercase() || b == b'_')
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}
