//! HTTP REQUEST sinks and sources resolved for the shards: the `TYPE HTTP` client's settings,
//! the METHOD / PATH / write_header programs, the body encoding, and a poll's cadence and
//! codec.
//!
//! The sink's expressions read the finalized record, which is what reaches an emitter's queue:
//! they compile against the sink's fields (`output.x`, `message.x` or bare `x`). A sink
//! expression that reads `input.` is refused here, because the queue no longer holds the input
//! row. A client CONFIG value is taken as text; `{{ resource }}` placeholders are refused until
//! mount templating runs in the data plane.

use std::sync::Arc;

use nervix_connectors::http::HttpClientConfig;
use nervix_nspl::ast::catalog::{CodecSource, CreateClient, WireFormat};
use nervix_nspl::ast::emitter::{CreateEmitter, Encoding};
use nervix_nspl::ast::{CatalogStmt, Expr};
use nervix_nspl::{ObjectKind, Statement};

use super::{Builder, PlanError, TypedIndex};
use crate::codec::JsonCodecPlan;
use crate::validate::route::Field;
use crate::vm::{ColumnSlot, Program};

/// What an HTTP REQUEST emitter sends for each row.
pub struct HttpSinkPlan {
    pub client: HttpClientConfig,
    pub method: Program,
    pub path: Program,
    /// `INVOKE write_header(name, value)`, in written order.
    pub headers: Vec<(Program, Program)>,
    pub body: HttpBody,
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

/// How a row becomes a request body.
pub enum HttpBody {
    /// `ENCODE USING <WIRE JSON codec>`: the row in wire terms.
    Codec(Arc<JsonCodecPlan>),
    /// No ENCODE clause: the row as a JSON object of the sink's fields.
    Json,
    /// `WITHOUT BODY`.
    None,
}

impl<'d> Builder<'d> {
    /// The settings of `TYPE HTTP` client `name`, values as text.
    pub(super) fn http_client(
        &self,
        name: &str,
        owner: &str,
    ) -> Result<HttpClientConfig, PlanError> {
        let Some(Statement::Catalog(CatalogStmt::CreateClient(CreateClient {
            config,
            mounts,
            ..
        }))) = self.entity(ObjectKind::Client, name).map(|e| &e.definition)
        else {
            return Err(PlanError::Missing {
                entity: owner.to_string(),
                what: format!("client '{name}'"),
            });
        };
        // `{{ resource }}` placeholders become the mounted version's directory on this node.
        let entries = crate::control::mounts::resolve_config(
            config,
            mounts,
            self.resources,
            &self.data_dir.join("resources"),
        )
        .map_err(|error| PlanError::Compile {
            entity: owner.to_string(),
            message: format!("client '{name}': {error}"),
        })?;
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
        // The queue holds the finalized record; `input.x` is the same value only when the
        // record is the input row unchanged (no SET, INHERIT ALL or no construction).
        let unchanged = create.construction.set.is_empty()
            && create.construction.inherit.as_ref().is_none_or(|inherit| {
                matches!(&inherit.fields, nervix_nspl::ast::InheritFields::All { except } if except.is_empty())
            });
        let resolve = |path: &[String]| -> Option<ColumnSlot> {
            let name = match path {
                [name] => name,
                [scope, name] if scope == "output" || scope == "message" => name,
                [scope, name] if scope == "input" && unchanged => name,
                _ => return None,
            };
            sink.iter()
                .position(|f| &f.name == name)
                .map(|column| ColumnSlot {
                    source: super::route::SOURCE_OUTPUT,
                    column,
                })
        };
        let refused = |what: &str| {
            let what = what.to_string();
            move |error: PlanError| match error {
                PlanError::Compile { entity, message } => PlanError::Unsupported {
                    entity,
                    what: format!(
                        "{what} reading something other than the finalized record ({message})"
                    ),
                },
                other => other,
            }
        };
        let compile =
            |expr: &Expr, what: &str| typed.compile(expr, &resolve).map_err(refused(what));
        let mut headers = Vec::with_capacity(create.construction.headers.len());
        for write in &create.construction.headers {
            // Validation types each write as one `write_header(name, value)` call.
            let call = typed.get_span(write.name.span.to(write.value.span))?;
            let crate::types::TypedKind::Call { args, .. } = &call.kind else {
                return Err(PlanError::Missing {
                    entity: owner.to_string(),
                    what: "the typed write_header call".to_string(),
                });
            };
            let [name, value] = args.as_slice() else {
                return Err(PlanError::Missing {
                    entity: owner.to_string(),
                    what: "write_header's two arguments".to_string(),
                });
            };
            headers.push((
                typed
                    .compile_typed(name, &resolve)
                    .map_err(refused("a write_header name"))?,
                typed
                    .compile_typed(value, &resolve)
                    .map_err(refused("a write_header value"))?,
            ));
        }
        let body = match &create.sink.encoding {
            None => HttpBody::Json,
            Some(Encoding::WithoutBody) => HttpBody::None,
            Some(Encoding::Codec(codec)) => {
                HttpBody::Codec(Arc::new(self.json_codec(&codec.name, sink, owner)?))
            }
        };
        Ok(HttpSinkPlan {
            client: self.http_client(client, owner)?,
            method: compile(method, "METHOD")?,
            path: compile(path, "PATH")?,
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
