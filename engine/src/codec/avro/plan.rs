//! [`AvroCodecPlan`]: what a WIRE AVRO codec does, resolved once per ingestor from the catalog
//! entities and shared (`Arc`) by every shard's decoder.
//!
//! Building re-checks the decode table of `validate::catalog_entities::codec` (a plan is never
//! built for a codec the catalog would refuse, but a plan must not trust that): every schema
//! field is fed by the wire field of its exact name through one [`Rule`], or is OPTIONAL and
//! always null; wire fields no schema field names get [`Rule::Skip`] (read, then dropped, as
//! Avro has no other way past them).

use arrow_schema::SchemaRef;
use nervix_nspl::ast::catalog::{
    AvroType, CodecSource, CreateCodec, CreateWireSchema, WireDefinition, WireField, WireFormat,
};

use crate::codec::wire_plan::{self, check_wire_schema, resolve_columns};
use crate::runtime::plan::arrow_schema;
use crate::types::DataType;
use crate::validate::route::Field;

use super::error::CodecError;

/// How one wire field's values become column values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// No schema field: the value is read and dropped.
    Skip,
    /// `string` into DATETIME with `ENCODE f AS RFC3339`.
    Rfc3339,
    /// Every other entry of the table: decoded by the wire type into the column's type.
    Value,
}

/// One declared wire field, in datum order; an OPTIONAL one is encoded as the union
/// `["null", T]`.
pub(crate) type WireSlot = wire_plan::WireSlot<AvroType, Rule>;

/// An immutable WIRE AVRO decoding and encoding plan.
#[derive(Debug)]
pub struct AvroCodecPlan {
    pub(crate) schema: SchemaRef,
    pub(crate) name: String,
    pub(crate) wire: Vec<WireSlot>,
    /// The wire schema's fields as declared, for writer-schema checks.
    pub(crate) fields: Vec<WireField<AvroType>>,
    /// Per schema column: the wire field feeding it.
    pub(crate) columns: Vec<(DataType, Option<usize>)>,
}

impl AvroCodecPlan {
    /// Resolves `codec` (which must read WIRE AVRO schema `wire`) into `target`, the fields of
    /// the codec's `TO SCHEMA` in order.
    pub fn build(
        codec: &CreateCodec,
        wire: &CreateWireSchema,
        target: &[Field],
    ) -> Result<AvroCodecPlan, CodecError> {
        let CodecSource::Wire {
            format: WireFormat::Avro,
            wire_schema,
            encodings,
        } = &codec.source
        else {
            return Err(CodecError::NotWireAvro {
                codec: codec.name.name.clone(),
            });
        };
        check_wire_schema(codec, wire_schema, wire)?;
        let WireDefinition::Avro { fields } = &wire.definition else {
            return Err(CodecError::WireNotAvro {
                wire: wire.name.name.clone(),
            });
        };
        let mut slots: Vec<WireSlot> = Vec::with_capacity(fields.len());
        for f in fields {
            if slots.iter().any(|s| s.name == f.name) {
                return Err(CodecError::DuplicateWireField {
                    wire: wire.name.name.clone(),
                    field: f.name.clone(),
                });
            }
            if f.optional && f.ty == AvroType::Null {
                return Err(CodecError::NullOptional {
                    field: f.name.clone(),
                });
            }
            slots.push(WireSlot::declared(f, Rule::Skip));
        }
        let decode_rule = |slot: &WireSlot, field: &Field, encoded: bool| {
            let ty = &field.ty.data_type;
            let always_null = slot.ty == AvroType::Null;
            if always_null && !field.ty.nullable {
                return Err(CodecError::Unproducible {
                    field: field.name.clone(),
                });
            }
            if *ty == DataType::Datetime && slot.ty == AvroType::String && encoded {
                Ok(Rule::Rfc3339)
            } else if always_null || decodes(&slot.ty, ty) {
                Ok(Rule::Value)
            } else {
                Err(CodecError::Undecodable {
                    field: field.name.clone(),
                    wire_type: avro_name(&slot.ty),
                    target: ty.clone(),
                })
            }
        };
        let columns =
            resolve_columns(target, encodings, &mut slots, AvroType::String, decode_rule)?;
        Ok(AvroCodecPlan {
            schema: arrow_schema(target),
            name: wire.name.name.clone(),
            wire: slots,
            fields: fields.clone(),
            columns,
        })
    }

    /// The Arrow schema of decoded batches: `runtime::plan::arrow_schema(target)`.
    pub fn schema(&self) -> SchemaRef {
        SchemaRef::clone(&self.schema)
    }
}

/// Whether a value of `wire` decodes into `target` by the table of
/// `validate::catalog_entities::codec` (DATETIME aside, which only a top-level `string` with
/// ENCODE reaches).
pub(crate) fn decodes(wire: &AvroType, target: &DataType) -> bool {
    match wire {
        AvroType::Null => false,
        AvroType::Boolean => *target == DataType::Bool,
        AvroType::Int | AvroType::Long => target.is_integer(),
        AvroType::Float | AvroType::Double => target.is_float(),
        AvroType::Bytes | AvroType::Fixed(_) => *target == DataType::Bytes,
        AvroType::String | AvroType::Enum(_) | AvroType::Record(_) | AvroType::Map(_) => {
            *target == DataType::String
        }
        AvroType::Array(item) => match target {
            DataType::Vec(inner) | DataType::List(inner) => decodes(item, inner),
            DataType::Array(inner, dims) => {
                if dims.is_empty() || dims.iter().any(|&d| i32::try_from(d).is_err()) {
                    return false;
                }
                // ARRAY<E, d1, …, dn> reads n nested Avro arrays.
                let mut wire = item.as_ref();
                for _ in 1..dims.len() {
                    match wire {
                        AvroType::Array(next) => wire = next,
                        _ => return false,
                    }
                }
                decodes(wire, inner)
            }
            _ => false,
        },
    }
}

/// How DESIGN §7 writes an Avro type, with composites abbreviated.
pub(crate) fn avro_name(ty: &AvroType) -> String {
    match ty {
        AvroType::Null => "null".to_string(),
        AvroType::Boolean => "boolean".to_string(),
        AvroType::Int => "int".to_string(),
        AvroType::Long => "long".to_string(),
        AvroType::Float => "float".to_string(),
        AvroType::Double => "double".to_string(),
        AvroType::Bytes => "bytes".to_string(),
        AvroType::String => "string".to_string(),
        AvroType::Record(_) => "record".to_string(),
        AvroType::Enum(_) => "enum".to_string(),
        AvroType::Array(element) => format!("array<{}>", avro_name(element)),
        AvroType::Map(element) => format!("map<{}>", avro_name(element)),
        AvroType::Fixed(n) => format!("fixed({n})"),
    }
}
