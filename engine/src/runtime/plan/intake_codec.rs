//! The codec a payload-decoding ingestor (endpoints, polls) runs: `DECODE USING c` resolved to
//! a WIRE JSON, CBOR or AVRO codec or a JAQ codec, and the per-shard decoder over it.
//!
//! A JAQ codec with an ON INGESTION program is CPU work of unbounded size, so the data listeners
//! unfold its payloads on the node's extension workers ([`IntakeCodec::unfolds_on_workers`]);
//! every other decode is one bounded pass on the shard. Emitters resolve their ENCODE USING
//! codec through `Builder::intake_codec` too (over the sink's fields; see `row_body`).

use std::sync::Arc;

use arrow_array::RecordBatch;
use nervix_nspl::ast::catalog::{CodecSource, WireFormat};
use nervix_nspl::ast::CatalogStmt;
use nervix_nspl::{ObjectKind, Statement};

use super::{Builder, PlanError};
use crate::codec::{
    AvroCodecPlan, AvroDecoder, CborCodecPlan, CborDecoder, JaqCodecPlan, JaqDecoder,
    JsonCodecPlan, JsonDecoder, Unfolded,
};
use crate::validate::route::Field;

/// A resolved ingestion codec.
#[derive(Debug, Clone)]
pub enum IntakeCodec {
    Json(Arc<JsonCodecPlan>),
    Cbor(Arc<CborCodecPlan>),
    Avro(Arc<AvroCodecPlan>),
    Jaq(Arc<JaqCodecPlan>),
}

impl IntakeCodec {
    /// Whether payloads must be unfolded on the extension workers (JAQ ON INGESTION).
    pub fn unfolds_on_workers(&self) -> bool {
        matches!(self, IntakeCodec::Jaq(plan) if plan.has_ingestion())
    }

    pub fn decoder(&self) -> IntakeDecoder {
        match self {
            IntakeCodec::Json(plan) => IntakeDecoder::Json(JsonDecoder::new(plan.clone())),
            IntakeCodec::Cbor(plan) => IntakeDecoder::Cbor(CborDecoder::new(plan.clone())),
            IntakeCodec::Avro(plan) => IntakeDecoder::Avro(AvroDecoder::new(plan.clone())),
            IntakeCodec::Jaq(plan) => IntakeDecoder::Jaq(JaqDecoder::new(plan.clone())),
        }
    }
}

/// One shard's decoder of one ingestor: payloads in, ingest groups out.
pub enum IntakeDecoder {
    Json(JsonDecoder),
    Cbor(CborDecoder),
    Avro(AvroDecoder),
    Jaq(JaqDecoder),
}

impl IntakeDecoder {
    /// Decodes one payload on the shard; atomic (a refused payload leaves nothing buffered).
    pub fn decode_payload(&mut self, payload: &[u8]) -> Result<u32, String> {
        match self {
            IntakeDecoder::Json(decoder) => {
                decoder.decode_payload(payload).map_err(|e| e.to_string())
            }
            IntakeDecoder::Cbor(decoder) => {
                decoder.decode_payload(payload).map_err(|e| e.to_string())
            }
            IntakeDecoder::Avro(decoder) => {
                decoder.decode_payload(payload).map_err(|e| e.to_string())
            }
            IntakeDecoder::Jaq(decoder) => {
                decoder.decode_payload(payload).map_err(|e| e.to_string())
            }
        }
    }

    /// Adds records a worker already unfolded.
    pub fn append(&mut self, unfolded: Unfolded) -> Result<u32, String> {
        match self {
            IntakeDecoder::Jaq(decoder) => decoder.append(unfolded).map_err(|e| e.to_string()),
            _ => Err("only a JAQ codec unfolds".to_string()),
        }
    }

    pub fn buffered_rows(&self) -> usize {
        match self {
            IntakeDecoder::Json(decoder) => decoder.buffered_rows(),
            IntakeDecoder::Cbor(decoder) => decoder.buffered_rows(),
            IntakeDecoder::Avro(decoder) => decoder.buffered_rows(),
            IntakeDecoder::Jaq(decoder) => decoder.buffered_rows(),
        }
    }

    pub fn finish(&mut self) -> RecordBatch {
        match self {
            IntakeDecoder::Json(decoder) => decoder.finish(),
            IntakeDecoder::Cbor(decoder) => decoder.finish(),
            IntakeDecoder::Avro(decoder) => decoder.finish(),
            IntakeDecoder::Jaq(decoder) => decoder.finish(),
        }
    }
}

impl<'d> Builder<'d> {
    /// `DECODE USING name` over `fields`.
    pub(super) fn intake_codec(
        &self,
        name: &str,
        fields: &[Field],
        owner: &str,
    ) -> Result<IntakeCodec, PlanError> {
        let codec = match self.entity(ObjectKind::Codec, name).map(|e| &e.definition) {
            Some(Statement::Catalog(CatalogStmt::CreateCodec(codec))) => codec,
            _ => {
                return Err(PlanError::Missing {
                    entity: owner.to_string(),
                    what: format!("codec '{name}'"),
                })
            }
        };
        match &codec.source {
            CodecSource::Jaq { .. } => JaqCodecPlan::build(codec, fields)
                .map(|plan| IntakeCodec::Jaq(Arc::new(plan)))
                .map_err(|error| PlanError::Compile {
                    entity: owner.to_string(),
                    message: format!("codec '{name}': {error}"),
                }),
            CodecSource::Wire {
                format: WireFormat::Json,
                ..
            } => Ok(IntakeCodec::Json(Arc::new(
                self.json_codec(name, fields, owner)?,
            ))),
            CodecSource::Wire {
                format,
                wire_schema,
                ..
            } => {
                let wire = match self
                    .entity(ObjectKind::WireSchema, &wire_schema.name)
                    .map(|e| &e.definition)
                {
                    Some(Statement::Catalog(CatalogStmt::CreateWireSchema(wire))) => wire,
                    _ => {
                        return Err(PlanError::Missing {
                            entity: owner.to_string(),
                            what: format!("wire schema '{}'", wire_schema.name),
                        })
                    }
                };
                let refused = |error: String| PlanError::Compile {
                    entity: owner.to_string(),
                    message: format!("codec '{name}': {error}"),
                };
                match format {
                    WireFormat::Cbor => CborCodecPlan::build(codec, wire, fields)
                        .map(|plan| IntakeCodec::Cbor(Arc::new(plan)))
                        .map_err(|e| refused(e.to_string())),
                    WireFormat::Avro => AvroCodecPlan::build(codec, wire, fields)
                        .map(|plan| IntakeCodec::Avro(Arc::new(plan)))
                        .map_err(|e| refused(e.to_string())),
                    WireFormat::Json => Ok(IntakeCodec::Json(Arc::new(
                        self.json_codec(name, fields, owner)?,
                    ))),
                }
            }
        }
    }
}
