//! `CREATE ENDPOINT` (domain) and `CREATE VHOST` (cluster-wide).
//!
//! Endpoints: the vhost exists; `WITH SIGNALING PROTOCOL p` (TYPE WEBSOCKETS only) names an
//! existing protocol; no other endpoint of the domain serves the same PATH on the same vhost,
//! since a request could not tell them apart. PATHs compare exactly, as HTTP paths do.
//! Another *domain* may serve the same vhost and PATH: the spec has "another domain serving
//! the same host and path continues receiving requests" when one domain stops.
//!
//! Vhosts: `WITH TLS r VERSION n | LATEST` names a resource that has that version (LATEST: any
//! version), and that version holds `tls.crt`, `tls.key` and `ca.crt` at its root (spec: "The
//! referenced resource bundle must contain"); no host is served by another vhost, since a
//! request's Host header could not choose between them. Hosts compare case-insensitively, as
//! DNS names do.

use nervix_nspl::ast::catalog::{CatalogStmt, CreateEndpoint, CreateVhost, EndpointType};
use nervix_nspl::{ObjectKind, Statement};

use super::resources::resolve_version;
use crate::catalog::{Catalog, CatalogError, DomainScope};

/// The files a VHOST's TLS bundle must hold, in the spec's order.
pub(super) const TLS_BUNDLE_FILES: [&str; 3] = ["tls.crt", "tls.key", "ca.crt"];

pub(super) fn validate_endpoint(
    scope: &DomainScope<'_>,
    endpoint: &CreateEndpoint,
) -> Result<(), CatalogError> {
    scope.vhost(&endpoint.vhost)?;
    if let Some(protocol) = &endpoint.signaling_protocol {
        if endpoint.endpoint_type != EndpointType::Websockets {
            return Err(CatalogError::new(
                protocol.span,
                format!(
                    "WITH SIGNALING PROTOCOL is only for TYPE WEBSOCKETS endpoints, not TYPE {}",
                    endpoint.endpoint_type.keyword()
                ),
            ));
        }
        scope.signaling_protocol(protocol)?;
    }
    if !endpoint.path.starts_with('/') {
        return Err(CatalogError::new(
            endpoint.name.span,
            format!(
                "endpoint '{}' has PATH '{}': a PATH starts with /",
                endpoint.name, endpoint.path
            ),
        ));
    }
    for entity in scope.domain.entities.values() {
        if entity.key.kind != ObjectKind::Endpoint || entity.key.name == endpoint.name.name {
            continue;
        }
        let Statement::Catalog(CatalogStmt::CreateEndpoint(other)) = &entity.definition else {
            continue;
        };
        if other.vhost.name == endpoint.vhost.name && other.path == endpoint.path {
            return Err(CatalogError::new(
                endpoint.vhost.span,
                format!(
                    "vhost '{}' already serves PATH '{}' through endpoint '{}' in domain '{}'",
                    endpoint.vhost,
                    endpoint.path,
                    other.name,
                    scope.domain.name()
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn validate_vhost(catalog: &Catalog, vhost: &CreateVhost) -> Result<(), CatalogError> {
    let refuse = |message: String| Err(CatalogError::new(vhost.name.span, message));
    if vhost.hosts.is_empty() {
        return refuse(format!("vhost '{}' serves no host", vhost.name));
    }
    for (i, host) in vhost.hosts.iter().enumerate() {
        if vhost.hosts[..i]
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
        {
            return refuse(format!("host '{host}' is listed twice"));
        }
    }
    for (key, entity) in &catalog.global {
        if key.kind != ObjectKind::Vhost || key.name == vhost.name.name {
            continue;
        }
        let Statement::Catalog(CatalogStmt::CreateVhost(other)) = &entity.definition else {
            continue;
        };
        for host in &vhost.hosts {
            if other.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
                return refuse(format!(
                    "host '{host}' is already served by vhost '{}'",
                    other.name
                ));
            }
        }
    }
    if let Some(tls) = &vhost.tls {
        let (resource, number) = resolve_version(catalog, &tls.resource, tls.version)?;
        let files = resource
            .versions
            .iter()
            .find(|v| v.number == number)
            .map(|v| v.files.as_slice())
            .unwrap_or_default();
        let missing: Vec<&str> = TLS_BUNDLE_FILES
            .into_iter()
            .filter(|needed| !files.iter().any(|(path, _)| path == needed))
            .collect();
        if !missing.is_empty() {
            return Err(CatalogError::new(
                tls.resource.span,
                format!(
                    "resource '{}' version {number} lacks {}: a VHOST's TLS bundle must contain \
                     tls.crt, tls.key and ca.crt",
                    tls.resource,
                    and_list(&missing)
                ),
            ));
        }
    }
    Ok(())
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
