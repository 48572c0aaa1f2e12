//! HTTP REQUEST sinks and sources resolved for the shards: the `TYPE HTTP` client's settings,
//! the METHOD / PATH / write_header programs, the body encoding, and a poll's cadence and
//! codec.
//!
//! The sink's expressions read the finalized record, which is what reaches an emitter's queue:
//! they compile against the sink's fields (`output.x`, `message.x` or bare `x`). A sink
//! expression that reads `input.` is refused here, because the queue no longer holds the input
//! row. A client CONFIG value is taken as text; `{{ resource }}` placeholders are refused until
//! mount templating runs in the data plane.

use nervix_connectors::http::HttpClientConfig;
use nervix_nspl::ast::catalog::{CodecSource, WireFormat};
use nervix_nspl::ast::emitter::CreateEmitter;
use nervix_nspl::ast::{CatalogStmt, Expr};
use nervix_nspl::{ObjectKind, Statement};

use super::{Builder, PlanError, RowBody, TypedIndex};
use crate::codec::JsonCodecPlan;
use crate::validate::route::Field;
use crate::vm::Program;

/// What an HTTP REQUEST emitter sends for each row.
pub struct HttpSinkPlan {
    pub client: HttpClientConfig,
    pub method: Program,
    pub path: Program,
    /// `INVOKE write_header(name, value)`, in written order.
    pub headers: Vec<(Program, Program)>,
    pub body: RowBody,
}

impl std::fmt::Debug for HttpSinkPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSinkPlan")
            .field("endpoint", &self.client.endpoint)
            .field("headers", &self.headers.len())
            .finish_non_exhaustive()
    }
}

/// An HTTP REQUEST ingestor's polls (spec: "HTTP REQUEST"): the client's method on its
/// endpoint, first immediately, then every `every_ns` on an anchored cadence.
#[derive(Debug)]
pub struct PollPlan {
    pub client: HttpClientConfig,
    pub every_ns: u64,
    pub codec: super::IntakeCodec,
    pub quiesce: super::IntakeQuiesce,
}

impl<'d> Builder<'d> {
    /// The settings of `TYPE HTTP` client `name`, values as text.
    pub(super) fn http_client(
        &self,
        name: &str,
        owner: &str,
    ) -> Result<HttpClientConfig, PlanError> {
        let entries = self.client_entries(name, owner)?;
        HttpClientConfig::from_entries(&entries).map_err(|error| PlanError::Compile {
            entity: owner.to_string(),
            message: format!("client '{name}': {error}"),
        })
    }

    /// The request construction of an HTTP REQUEST emitter writing `sink` fields.
    pub(super) fn http_sink(
        &self,
        typed: &TypedIndex<'_>,
        create: &CreateEmitter,
        client: &str,
        (method, path): (&Expr, &Expr),
        sink: &[Field],
        owner: &str,
    ) -> Result<HttpSinkPlan, PlanError> {
        let exprs = super::sink_expr::SinkExprs::new(typed, create, sink, owner);
        let headers = exprs.headers()?;
        let body = self.row_body(create, sink, owner)?;
        Ok(HttpSinkPlan {
            client: self.http_client(client, owner)?,
            method: exprs.compile(method, "METHOD")?,
            path: exprs.compile(path, "PATH")?,
            headers,
            body,
        })
    }

    /// An HTTP REQUEST ingestor's source.
    pub(super) fn poll_source(
        &self,
        client: &str,
        every: &nervix_nspl::ast::Duration,
        quiesce: &nervix_nspl::ast::QuiesceMode,
        codec: Option<&nervix_nspl::ast::Ident>,
        fields: &[Field],
        owner: &str,
    ) -> Result<PollPlan, PlanError> {
        use nervix_nspl::ast::QuiesceMode;
        let codec = codec.ok_or_else(|| PlanError::Missing {
            entity: owner.to_string(),
            what: "DECODE USING".to_string(),
        })?;
        let quiesce = match quiesce {
            QuiesceMode::Suspend => super::IntakeQuiesce::Suspend,
            QuiesceMode::Buffer { max_size, overflow } => super::IntakeQuiesce::Buffer {
                max_bytes: max_size.bytes,
                overflow: *overflow,
            },
            other => {
                return Err(PlanError::Unsupported {
                    entity: owner.to_string(),
                    what: format!("{other:?} on an HTTP REQUEST ingestor"),
                })
            }
        };
        Ok(PollPlan {
            client: self.http_client(client, owner)?,
            every_ns: every.nanos.max(1),
            codec: self.intake_codec(&codec.name, fields, owner)?,
            quiesce,
        })
    }

    /// A WIRE JSON codec over `fields` (other formats arrive with their codecs).
    pub(super) fn json_codec(
        &self,
        name: &str,
        fields: &[Field],
        owner: &str,
    ) -> Result<JsonCodecPlan, PlanError> {
        let missing = |what: String| PlanError::Missing {
            entity: owner.to_string(),
            what,
        };
        let codec = match self.entity(ObjectKind::Codec, name).map(|e| &e.definition) {
            Some(Statement::Catalog(CatalogStmt::CreateCodec(codec))) => codec,
            _ => return Err(missing(format!("codec '{name}'"))),
        };
        let wire_name = match &codec.source {
            CodecSource::Wire {
                format: WireFormat::Json,
                wire_schema,
                ..
            } => wire_schema,
            CodecSource::Wire { format, .. } => {
                return Err(PlanError::Unsupported {
                    entity: owner.to_string(),
                    what: format!("the WIRE {} codec '{name}'", format.keyword()),
                })
            }
            CodecSource::Jaq { .. } => {
                return Err(PlanError::Unsupported {
                    entity: owner.to_string(),
                    what: format!("the JAQ codec '{name}'"),
                })
            }
        };
        let wire = match self
            .entity(ObjectKind::WireSchema, &wire_name.name)
            .map(|e| &e.definition)
        {
            Some(Statement::Catalog(CatalogStmt::CreateWireSchema(wire))) => wire,
            _ => return Err(missing(format!("wire schema '{}'", wire_name.name))),
        };
        JsonCodecPlan::build(codec, wire, fields).map_err(|error| PlanError::Compile {
            entity: owner.to_string(),
            message: format!("codec '{name}': {error}"),
        })
    }
}
