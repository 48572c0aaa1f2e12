//! How an HTTP REQUEST or KAFKA TOPIC emitter writes each row's message body: `ENCODE USING`
//! any codec kind, `WITHOUT BODY`, or (no clause) the row as a JSON object of the sink's
//! fields.
//!
//! Per codec kind, one row is one message:
//! - WIRE JSON: one JSON object in wire terms (no trailing newline);
//! - WIRE CBOR: one CBOR map keyed by wire names;
//! - WIRE AVRO: one bare binary datum of the wire schema — no object container, no schema and
//!   no single-object header, so the reader must know the writer's schema (it is the codec's);
//! - JAQ: the ON EMITTING program's one output for the row, written in the codec's format. Its
//!   cost is unbounded, so it runs on the extension workers ([`RowBody::encodes_on_workers`]);
//!   a JAQ codec without ON EMITTING is refused here, naming the emitter and the codec.
//!
//! [`RowBody::encode`] writes a frame into one buffer and records each row's range or refusal
//! (an Avro enum value without a symbol, a failed program); the sinks send a refused row to
//! ON MESSAGE ERROR, never as an empty body.

use std::sync::Arc;

use arrow_array::RecordBatch;
use nervix_nspl::ast::emitter::{CreateEmitter, Encoding};

use super::{Builder, IntakeCodec, PlanError};
use crate::codec::{
    encode_avro_rows, encode_cbor_rows, encode_json_rows, encode_plain_json_rows, jaq_emit_rows,
    AvroCodecPlan, CborCodecPlan, EncodedRows, JaqCodecPlan, JsonCodecPlan,
};
use crate::validate::route::Field;

/// How a row becomes a message body.
pub enum RowBody {
    /// `ENCODE USING <WIRE JSON codec>`.
    WireJson(Arc<JsonCodecPlan>),
    /// `ENCODE USING <WIRE CBOR codec>`.
    Cbor(Arc<CborCodecPlan>),
    /// `ENCODE USING <WIRE AVRO codec>`: one bare datum per row.
    Avro(Arc<AvroCodecPlan>),
    /// `ENCODE USING <JAQ codec>` with ON EMITTING.
    Jaq(Arc<JaqCodecPlan>),
    /// No ENCODE clause: the row as a JSON object of the sink's fields.
    Json,
    /// `WITHOUT BODY`.
    None,
}

impl RowBody {
    /// Whether a frame's bodies are written on the extension workers (JAQ ON EMITTING).
    pub fn encodes_on_workers(&self) -> bool {
        matches!(self, RowBody::Jaq(_))
    }

    /// `batch`'s rows encoded into one buffer; `None` for WITHOUT BODY. Callers run a
    /// [`RowBody::encodes_on_workers`] body on the extension workers.
    pub fn encode(&self, batch: &RecordBatch) -> Option<EncodedRows> {
        let mut out = EncodedRows::with_rows(batch.num_rows());
        match self {
            RowBody::None => return None,
            RowBody::WireJson(plan) => encode_json_rows(batch, plan, &mut out),
            RowBody::Cbor(plan) => encode_cbor_rows(batch, plan, &mut out),
            RowBody::Avro(plan) => encode_avro_rows(batch, plan, &mut out),
            RowBody::Jaq(plan) => jaq_emit_rows(plan, batch, &mut out),
            RowBody::Json => encode_plain_json_rows(batch, &mut out),
        }
        Some(out)
    }
}

impl<'d> Builder<'d> {
    /// The body of an emitter writing `sink` fields.
    pub(super) fn row_body(
        &self,
        create: &CreateEmitter,
        sink: &[Field],
        owner: &str,
    ) -> Result<RowBody, PlanError> {
        let codec = match &create.sink.encoding {
            None => return Ok(RowBody::Json),
            Some(Encoding::WithoutBody) => return Ok(RowBody::None),
            Some(Encoding::Codec(codec)) => codec,
        };
        // A codec resolves over the sink's fields the same way for either direction.
        Ok(match self.intake_codec(&codec.name, sink, owner)? {
            IntakeCodec::Json(plan) => RowBody::WireJson(plan),
            IntakeCodec::Cbor(plan) => RowBody::Cbor(plan),
            IntakeCodec::Avro(plan) => RowBody::Avro(plan),
            IntakeCodec::Jaq(plan) if plan.has_emitting() => RowBody::Jaq(plan),
            IntakeCodec::Jaq(_) => {
                return Err(PlanError::Compile {
                    entity: owner.to_string(),
                    message: format!(
                        "codec '{}' has no ON EMITTING program, which ENCODE USING needs to \
                         write a row",
                        codec.name
                    ),
                })
            }
        })
    }
}
