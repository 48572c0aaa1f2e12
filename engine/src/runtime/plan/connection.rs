//! WEBSOCKETS CONNECTION sources resolved for the shards (spec: "WEBSOCKETS CONNECTION"): the
//! `TYPE WEBSOCKETS` client's settings (mounts resolved), its signaling protocol compiled into
//! a [`SignalingPlan`], the codec that decodes data frames, and what a quiesce does.
//!
//! Quiesce: the session keeps reading in every mode (a stop-reading mode would starve
//! keepalives), so `BUFFER MAX SIZE … ON OVERFLOW DROP OLDEST|NEWEST` retains frames in the
//! intake as polls do, and `DROP` is a buffer of zero bytes that drops the newest frame, so
//! nothing is retained. SUSPEND and REJECT are refused (validation already refuses them).

use std::sync::Arc;

use nervix_connectors::websocket::WsClientConfig;
use nervix_nspl::ast::catalog::CreateClient;
use nervix_nspl::ast::ingestor::IngestorStmt;
use nervix_nspl::ast::{CatalogStmt, Ident, OverflowPolicy, QuiesceMode};
use nervix_nspl::{ObjectKind, Statement};

use super::{Builder, PlanError};
use crate::runtime::signaling::SignalingPlan;
use crate::validate::route::Field;

/// One WEBSOCKETS CONNECTION ingestor's source.
#[derive(Debug)]
pub struct ConnectionPlan {
    pub client: WsClientConfig,
    /// `None`: no signaling protocol, data flows from the first frame.
    pub signaling: Option<Arc<SignalingPlan>>,
    pub codec: super::IntakeCodec,
    pub quiesce: super::IntakeQuiesce,
}

impl<'d> Builder<'d> {
    /// A WEBSOCKETS CONNECTION ingestor's source.
    pub(super) fn connection_source(
        &self,
        client: &str,
        quiesce: &QuiesceMode,
        codec: Option<&Ident>,
        fields: &[Field],
        owner: &str,
    ) -> Result<ConnectionPlan, PlanError> {
        let codec = codec.ok_or_else(|| PlanError::Missing {
            entity: owner.to_string(),
            what: "DECODE USING".to_string(),
        })?;
        let quiesce = match quiesce {
            QuiesceMode::Buffer { max_size, overflow } => super::IntakeQuiesce::Buffer {
                max_bytes: max_size.bytes,
                // Validation requires a policy here; a connection never refuses a frame.
                overflow: Some(overflow.unwrap_or(OverflowPolicy::DropNewest)),
            },
            QuiesceMode::Drop => super::IntakeQuiesce::Buffer {
                max_bytes: 0,
                overflow: Some(OverflowPolicy::DropNewest),
            },
            other => {
                return Err(PlanError::Unsupported {
                    entity: owner.to_string(),
                    what: format!("{other:?} on a WEBSOCKETS CONNECTION ingestor"),
                })
            }
        };
        let Some(Statement::Catalog(CatalogStmt::CreateClient(CreateClient {
            config,
            mounts,
            signaling_protocol,
            ..
        }))) = self
            .entity(ObjectKind::Client, client)
            .map(|e| &e.definition)
        else {
            return Err(PlanError::Missing {
                entity: owner.to_string(),
                what: format!("client '{client}'"),
            });
        };
        let compile_error = |message: String| PlanError::Compile {
            entity: owner.to_string(),
            message: format!("client '{client}': {message}"),
        };
        let entries = crate::control::mounts::resolve_config(
            config,
            mounts,
            self.resources,
            &self.data_dir.join("resources"),
        )
        .map_err(|error| compile_error(error.to_string()))?;
        let settings = WsClientConfig::from_entries(&entries)
            .map_err(|error| compile_error(error.to_string()))?;
        let signaling = signaling_protocol
            .as_ref()
            .map(|name| self.signaling_plan(name, owner))
            .transpose()
            .map_err(|error| match error {
                PlanError::Compile { message, .. } => compile_error(message),
                other => other,
            })?;
        Ok(ConnectionPlan {
            client: settings,
            signaling,
            codec: self.intake_codec(&codec.name, fields, owner)?,
            quiesce,
        })
    }

    /// Compiles the signaling protocol `name` for `owner` (a WEBSOCKETS client's ingestor, or
    /// a WEBSOCKETS ENDPOINT ingestor); a compile error is a [`PlanError::Compile`] whose
    /// message names the protocol, the clause and the step.
    pub(super) fn signaling_plan(
        &self,
        name: &Ident,
        owner: &str,
    ) -> Result<Arc<SignalingPlan>, PlanError> {
        let Some(Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(create))) = self
            .entity(ObjectKind::SignalingProtocol, &name.name)
            .map(|e| &e.definition)
        else {
            return Err(PlanError::Missing {
                entity: owner.to_string(),
                what: format!("signaling protocol '{}'", name.name),
            });
        };
        SignalingPlan::compile(create)
            .map(Arc::new)
            .map_err(|message| PlanError::Compile {
                entity: owner.to_string(),
                message,
            })
    }
}
