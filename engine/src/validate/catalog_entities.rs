//! Validation of schemas, wire schemas, codecs, branches, relays, clients and endpoints
//! (domain entities) and of virtual hosts (cluster-wide), and the references each makes.
//!
//! One submodule per concern, each documenting its rules and the decisions it takes where
//! DESIGN §7 and the spec are silent:
//!
//! * `schema` — field types of `CREATE SCHEMA` (`ARRAY` dimensions, `LIST<STRING>`) and the
//!   consistency of `CREATE WIRE … SCHEMA` (Avro names, Avro unions);
//! * `codec` — `CREATE CODEC`: the wire schema's format, `TO SCHEMA`, `ENCODE … AS RFC3339`
//!   and the table of which wire type decodes into which schema type;
//! * `graph` — `CREATE BRANCH` (branch key fields) and `CREATE RELAY`;
//! * `client` — `CREATE CLIENT`: mounts, signaling protocol, `{{ resource }}` templates and
//!   the CONFIG keys each TYPE requires;
//! * `network` — `CREATE ENDPOINT` and `CREATE VHOST`;
//! * `resources` — resolving `<resource> VERSION n | LATEST` against the catalog, and
//!   [`bind_latest`], which rewrites `VERSION LATEST` to the number it binds when a statement
//!   is applied.
//!
//! # Why it is correct
//!
//! Validation only reads: every rule is a pure function of the definition and the candidate
//! catalog, so the planner may run it on the changed entity and again on every dependent. An
//! entity's validity depends only on the entities [`references`] and [`global_references`]
//! list — each rule looks up nothing else — which is what makes the planner's incremental
//! revalidation equivalent to revalidating the whole domain. The one rule that reads
//! siblings rather than references (an endpoint's PATH is unique per vhost, a vhost's hosts
//! are unique across vhosts) only refuses a *new* clash, and neither endpoints nor vhosts can
//! be altered, so no change to another entity can make an accepted one invalid.

mod client;
mod codec;
mod graph;
mod network;
mod resources;
mod schema;
#[cfg(test)]
mod tests;

pub use resources::{bind_latest, bind_version, resolve_version};

use nervix_nspl::ast::catalog::{CatalogStmt, CodecSource};
use nervix_nspl::ast::Branching;
use nervix_nspl::ObjectKind;

use crate::catalog::{Catalog, CatalogError, DomainScope, EntityKey};

/// Checks one domain entity (schema, wire schema, codec, branch, relay, client, endpoint)
/// against the candidate domain in `scope`.
pub fn validate(scope: &DomainScope<'_>, definition: &CatalogStmt) -> Result<(), CatalogError> {
    match definition {
        CatalogStmt::CreateSchema(s) => schema::validate_schema(s),
        CatalogStmt::CreateWireSchema(w) => schema::validate_wire_schema(w),
        CatalogStmt::CreateCodec(c) => codec::validate_codec(scope, c),
        CatalogStmt::CreateBranch(b) => graph::validate_branch(scope, b),
        CatalogStmt::CreateRelay(r) => graph::validate_relay(scope, r),
        CatalogStmt::CreateClient(c) => client::validate_client(scope, c),
        CatalogStmt::CreateEndpoint(e) => network::validate_endpoint(scope, e),
        // Not domain entities: the planner never hands these to domain validation.
        _ => Ok(()),
    }
}

/// Checks a cluster-wide entity (a virtual host) against the catalog.
pub fn validate_global(catalog: &Catalog, definition: &CatalogStmt) -> Result<(), CatalogError> {
    match definition {
        CatalogStmt::CreateVhost(v) => network::validate_vhost(catalog, v),
        _ => Ok(()),
    }
}

/// The domain entities a definition names: a codec its wire schema and schema, a branch its
/// schema, a relay its schema and branch, a client or endpoint its signaling protocol.
pub fn references(definition: &CatalogStmt) -> Vec<EntityKey> {
    let key = |kind, name: &nervix_nspl::ast::Ident| EntityKey::new(kind, name.name.as_str());
    match definition {
        CatalogStmt::CreateCodec(c) => {
            let mut keys = Vec::with_capacity(2);
            if let CodecSource::Wire { wire_schema, .. } = &c.source {
                keys.push(key(ObjectKind::WireSchema, wire_schema));
            }
            keys.push(key(ObjectKind::Schema, &c.schema));
            keys
        }
        CatalogStmt::CreateBranch(b) => vec![key(ObjectKind::Schema, &b.schema)],
        CatalogStmt::CreateRelay(r) => {
            let mut keys = vec![key(ObjectKind::Schema, &r.schema)];
            if let Branching::BranchedBy(branch) = &r.branching {
                keys.push(key(ObjectKind::Branch, branch));
            }
            keys
        }
        CatalogStmt::CreateClient(c) => c
            .signaling_protocol
            .iter()
            .map(|p| key(ObjectKind::SignalingProtocol, p))
            .collect(),
        CatalogStmt::CreateEndpoint(e) => e
            .signaling_protocol
            .iter()
            .map(|p| key(ObjectKind::SignalingProtocol, p))
            .collect(),
        _ => Vec::new(),
    }
}

/// The cluster-wide entities a definition names: a client the resources it mounts, an
/// endpoint its vhost, a vhost its TLS resource.
pub fn global_references(definition: &CatalogStmt) -> Vec<EntityKey> {
    match definition {
        CatalogStmt::CreateClient(c) => c
            .mounts
            .iter()
            .map(|m| EntityKey::new(ObjectKind::Resource, m.resource.name.as_str()))
            .collect(),
        CatalogStmt::CreateEndpoint(e) => {
            vec![EntityKey::new(ObjectKind::Vhost, e.vhost.name.as_str())]
        }
        CatalogStmt::CreateVhost(v) => v
            .tls
            .iter()
            .map(|m| EntityKey::new(ObjectKind::Resource, m.resource.name.as_str()))
            .collect(),
        _ => Vec::new(),
    }
}
