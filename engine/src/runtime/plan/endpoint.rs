//! HTTP ENDPOINT and WEBSOCKETS ENDPOINT sources resolved for the shards: which listener, which
//! hosts and path serve them, the codec that decodes their bodies, and what a quiesce does to
//! their senders (spec: "HTTP ENDPOINT And WEBSOCKETS ENDPOINT").
//!
//! The endpoint, its VHOST and the codec's wire schema are separate catalog entities; the plan
//! copies what the listener needs so a shard never looks at the catalog. Host names compare
//! case-insensitively (DNS), so they are kept in lower case. A TLS VHOST's certificate is not
//! part of the plan: the data plane installs the bound bundle in the listeners' certificate
//! store, so REBIND RESOURCE rotates it without redeploying (or pausing) the graph.
//!
//! A TYPE WEBSOCKETS endpoint WITH SIGNALING PROTOCOL carries the protocol compiled into a
//! [`SignalingPlan`] (as WEBSOCKETS clients do, `plan/connection.rs`), so an invalid program
//! never reaches a connection.

use nervix_nspl::ast::catalog::{CreateEndpoint, CreateVhost, EndpointType};
use nervix_nspl::ast::ingestor::{EndpointBody, IngestorHead};
use nervix_nspl::ast::{CatalogStmt, QuiesceMode};
use nervix_nspl::{ObjectKind, Statement};

use std::sync::Arc;

use super::{Builder, PlanError};
use crate::catalog::EntityKey;
use crate::runtime::signaling::SignalingPlan;
use crate::validate::route::Field;

/// What a source's senders experience while its ingestor is quiesced (spec: "Quiesce Modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntakeQuiesce {
    /// Endpoints: 503 with `Retry-After` (whole seconds, rounded up); WebSockets close 1013.
    Reject { retry_after_s: u64 },
    /// Payloads are held up to `max_bytes` and drain in order after the hold. Endpoints have
    /// no overflow policy (a full buffer refuses); polling sources drop the oldest or newest.
    Buffer {
        max_bytes: u64,
        overflow: Option<nervix_nspl::ast::OverflowPolicy>,
    },
    /// Polling sources skip polls (a sampling gap); nothing is retained.
    Suspend,
}

/// One endpoint ingestor's source.
#[derive(Debug)]
pub struct EndpointPlan {
    pub kind: EndpointType,
    pub endpoint: String,
    pub vhost: String,
    /// Lower case.
    pub hosts: Vec<String>,
    pub path: String,
    /// A TLS VHOST's endpoints are served on the HTTPS listener only, the others on the
    /// plain one.
    pub tls: bool,
    pub codec: super::IntakeCodec,
    pub quiesce: IntakeQuiesce,
    /// TYPE WEBSOCKETS … WITH SIGNALING PROTOCOL: the handshake every accepted connection runs
    /// before (or, per ACCEPT DATA, while) its messages reach the ingestor.
    pub signaling: Option<Arc<SignalingPlan>>,
}

impl EndpointPlan {
    /// Whether a request for `host` (lower case, port stripped) and `path` on the plain
    /// (`tls == false`) or HTTPS listener reaches this endpoint.
    pub fn serves(&self, host: Option<&str>, path: &str, tls: bool) -> bool {
        self.tls == tls
            && self.path == path
            && host.is_some_and(|host| self.hosts.iter().any(|h| h == host))
    }
}

impl<'d> Builder<'d> {
    /// Resolves an endpoint ingestor's endpoint, VHOST and codec.
    pub(super) fn endpoint_source(
        &self,
        owner: &str,
        head: IngestorHead,
        body: &EndpointBody,
        codec: Option<&nervix_nspl::ast::Ident>,
        fields: &[Field],
    ) -> Result<EndpointPlan, PlanError> {
        let missing = |what: String| PlanError::Missing {
            entity: owner.to_string(),
            what,
        };
        let endpoint: &CreateEndpoint = match self
            .entity(ObjectKind::Endpoint, &body.endpoint.name)
            .map(|e| &e.definition)
        {
            Some(Statement::Catalog(CatalogStmt::CreateEndpoint(endpoint))) => endpoint,
            _ => return Err(missing(format!("endpoint '{}'", body.endpoint.name))),
        };
        // VHOSTs are cluster-wide entities.
        let vhost: &CreateVhost = match self
            .global
            .get(&EntityKey::new(ObjectKind::Vhost, &endpoint.vhost.name))
            .map(|e| &e.definition)
        {
            Some(Statement::Catalog(CatalogStmt::CreateVhost(vhost))) => vhost,
            _ => return Err(missing(format!("vhost '{}'", endpoint.vhost.name))),
        };
        // Validation admits the clause on TYPE WEBSOCKETS endpoints only.
        let signaling = match (&endpoint.signaling_protocol, endpoint.endpoint_type) {
            (None, _) => None,
            (Some(name), EndpointType::Websockets) => Some(
                self.signaling_plan(name, owner)
                    .map_err(|error| match error {
                        PlanError::Compile { entity, message } => PlanError::Compile {
                            entity,
                            message: format!("endpoint '{}': {message}", endpoint.name.name),
                        },
                        other => other,
                    })?,
            ),
            (Some(_), other) => {
                return Err(PlanError::Unsupported {
                    entity: owner.to_string(),
                    what: format!(
                        "WITH SIGNALING PROTOCOL on a TYPE {} endpoint",
                        other.keyword()
                    ),
                })
            }
        };
        let codec_name = codec.ok_or_else(|| missing("DECODE USING".to_string()))?;
        let codec = self.intake_codec(&codec_name.name, fields, owner)?;
        let quiesce = match &body.quiesce {
            QuiesceMode::RejectRetryAfter(after) => IntakeQuiesce::Reject {
                retry_after_s: after.nanos.div_ceil(1_000_000_000),
            },
            QuiesceMode::Buffer { max_size, .. } => IntakeQuiesce::Buffer {
                max_bytes: max_size.bytes,
                overflow: None,
            },
            // Validation admits only REJECT and BUFFER for endpoints.
            other => {
                return Err(PlanError::Unsupported {
                    entity: owner.to_string(),
                    what: format!("{other:?} on an {}", head.phrase()),
                })
            }
        };
        Ok(EndpointPlan {
            kind: endpoint.endpoint_type,
            endpoint: endpoint.name.name.clone(),
            vhost: vhost.name.name.clone(),
            hosts: vhost.hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            path: endpoint.path.clone(),
            tls: vhost.tls.is_some(),
            codec,
            quiesce,
            signaling,
        })
    }
}
