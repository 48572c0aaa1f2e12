//! [`DocumentPlan`]: what a codec of a document wire format (WIRE JSON, WIRE CBOR) does,
//! resolved once per ingestor from the catalog entities and shared (`Arc`) by every shard's
//! decoder.
//!
//! Both formats declare their wire schemas in the same document types (`WireField<DocType>`),
//! so one plan serves both. Its format marker ([`Json`], [`Cbor`]) keeps a plan of one format
//! from reaching the other's decoder, names the format in errors, and carries the decode
//! table's one difference: a CBOR byte string lets a wire `string` feed BYTES.
//!
//! Building re-checks the decode table of `validate::catalog_entities::codec` (a plan is never
//! built for a codec the catalog would refuse, but a plan must not trust that): every schema
//! field is fed by the wire field of its exact name through one `Rule`, or is OPTIONAL and
//! always null; wire fields no schema field names get `Rule::Skip` (checked, then dropped).

use std::collections::HashMap;
use std::marker::PhantomData;

use arrow_array::{Array, RecordBatch};
use arrow_schema::SchemaRef;
use nervix_nspl::ast::catalog::{
    CodecSource, CreateCodec, CreateWireSchema, DocType, WireDefinition, WireField, WireFormat,
    WireMode,
};

use super::wire_plan::{self, check_wire_schema, from_plan_refusal, resolve_columns};
use crate::runtime::plan::arrow_schema;
use crate::types::DataType;
use crate::validate::route::Field;

/// A document wire format: what its plans differ in.
pub trait DocumentFormat {
    const FORMAT: WireFormat;
    /// Whether a wire `string` may feed a BYTES field (a CBOR byte string, or a text string's
    /// UTF-8); JSON has no byte strings.
    const STRING_INTO_BYTES: bool;
}

/// The WIRE JSON format.
#[derive(Debug)]
pub enum Json {}

impl DocumentFormat for Json {
    const FORMAT: WireFormat = WireFormat::Json;
    const STRING_INTO_BYTES: bool = false;
}

/// The WIRE CBOR format.
#[derive(Debug)]
pub enum Cbor {}

impl DocumentFormat for Cbor {
    const FORMAT: WireFormat = WireFormat::Cbor;
    const STRING_INTO_BYTES: bool = true;
}

/// Why a [`DocumentPlan`] cannot be built; `format` is the format's keyword (`JSON`, `CBOR`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("codec '{codec}' is not a WIRE {format} codec")]
    NotThisFormat { codec: String, format: &'static str },
    #[error("codec '{codec}' reads wire schema '{expected}', not '{given}'")]
    WrongWireSchema {
        codec: String,
        expected: String,
        given: String,
    },
    #[error("wire schema '{wire}' is not a WIRE {format} schema")]
    WireNotThisFormat { wire: String, format: &'static str },
    #[error("wire schema '{wire}' declares field '{field}' twice")]
    DuplicateWireField { wire: String, field: String },
    #[error("schema field '{field}' appears twice")]
    DuplicateField { field: String },
    #[error("required field '{field}' has no required wire field of the same name")]
    Unproducible { field: String },
    #[error("wire field '{field}' ({wire_type}) does not decode into {target}")]
    Undecodable {
        field: String,
        wire_type: &'static str,
        target: DataType,
    },
    #[error("ENCODE {field} AS RFC3339 needs a DATETIME field fed by a wire string")]
    BadEncoding { field: String },
}

from_plan_refusal!(CodecError);

/// How one wire field's values become column values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// No schema field: the value is checked against the wire type and dropped.
    Skip,
    /// `null` wire type: the value must be `null`; the field is always null.
    Null,
    /// `string` into STRING, or (CBOR) into BYTES: the column's type decides. In CBOR a text
    /// string or a byte string holding UTF-8 feeds STRING, either kind feeds BYTES.
    Text,
    /// `object` into STRING, as the object's exact JSON text (a CBOR map's JSON text).
    ObjectText,
    /// `string` into DATETIME with `ENCODE f AS RFC3339` (in CBOR also tags 0 and 1).
    Rfc3339,
    /// `integer`, `number`, `boolean` and `array`: decoded by the column's type.
    Typed,
}

/// One declared wire field.
pub(crate) type WireSlot = wire_plan::WireSlot<DocType, Rule>;

/// An immutable decoding and encoding plan of document format `F`.
#[derive(Debug)]
pub struct DocumentPlan<F> {
    pub(crate) schema: SchemaRef,
    pub(crate) mode: WireMode,
    pub(crate) wire: Vec<WireSlot>,
    /// Wire name → index into `wire`, built once; see [`DocumentPlan::lookup`].
    by_name: HashMap<Box<[u8]>, usize>,
    /// Per schema column: its type and the wire field feeding it.
    pub(crate) columns: Vec<(DataType, Option<usize>)>,
    /// The wire fields a record must hold.
    pub(crate) required: Vec<usize>,
    format: PhantomData<F>,
}

impl<F: DocumentFormat> DocumentPlan<F> {
    /// Resolves `codec` (which must read a wire schema `wire` of format `F`) into `target`, the
    /// fields of the codec's `TO SCHEMA` in order.
    pub fn build(
        codec: &CreateCodec,
        wire: &CreateWireSchema,
        target: &[Field],
    ) -> Result<DocumentPlan<F>, CodecError> {
        let format = F::FORMAT.keyword();
        let CodecSource::Wire {
            format: codec_format,
            wire_schema,
            encodings,
        } = &codec.source
        else {
            return Err(CodecError::NotThisFormat {
                codec: codec.name.name.clone(),
                format,
            });
        };
        if *codec_format != F::FORMAT {
            return Err(CodecError::NotThisFormat {
                codec: codec.name.name.clone(),
                format,
            });
        }
        check_wire_schema(codec, wire_schema, wire)?;
        let Some((mode, fields)) = document_fields::<F>(&wire.definition) else {
            return Err(CodecError::WireNotThisFormat {
                wire: wire.name.name.clone(),
                format,
            });
        };
        let mut by_name = HashMap::with_capacity(fields.len());
        let mut slots = Vec::with_capacity(fields.len());
        for (i, f) in fields.iter().enumerate() {
            if by_name
                .insert(f.name.as_bytes().to_vec().into_boxed_slice(), i)
                .is_some()
            {
                return Err(CodecError::DuplicateWireField {
                    wire: wire.name.name.clone(),
                    field: f.name.clone(),
                });
            }
            slots.push(WireSlot::declared(f, Rule::Skip));
        }
        let decode_rule = |slot: &WireSlot, field: &Field, encoded: bool| {
            let ty = &field.ty.data_type;
            rule::<F>(slot.ty, ty, encoded, field.ty.nullable).ok_or(CodecError::Undecodable {
                field: field.name.clone(),
                wire_type: slot.ty.word(),
                target: ty.clone(),
            })
        };
        let columns = resolve_columns(target, encodings, &mut slots, DocType::String, decode_rule)?;
        let required = (0..slots.len()).filter(|&w| !slots[w].optional).collect();
        Ok(DocumentPlan {
            schema: arrow_schema(target),
            mode: *mode,
            wire: slots,
            by_name,
            columns,
            required,
            format: PhantomData,
        })
    }

    /// The Arrow schema of decoded batches: `runtime::plan::arrow_schema(target)`.
    pub fn schema(&self) -> SchemaRef {
        SchemaRef::clone(&self.schema)
    }

    /// The wire field named `key`. Records usually list keys in declared order, so the field
    /// after the previous one (`guess`) is compared first; otherwise the table built once.
    #[inline]
    pub(crate) fn lookup(&self, key: &[u8], guess: usize) -> Option<usize> {
        if let Some(slot) = self.wire.get(guess) {
            if slot.name.as_bytes() == key {
                return Some(guess);
            }
        }
        self.by_name.get(key).copied()
    }

    /// The members an encoder writes for `batch` (in the plan's schema, columns found by
    /// name): each wire field fed by a column and not skipped, in wire order.
    pub(crate) fn members<'a>(&'a self, batch: &'a RecordBatch) -> Members<'a> {
        self.wire
            .iter()
            .filter(|slot| slot.rule != Rule::Skip)
            .filter_map(|slot| {
                let name = self.schema.field(slot.column?).name();
                Some((
                    slot.name.as_str(),
                    slot.rule,
                    batch.column_by_name(name).map(|a| a.as_ref()),
                ))
            })
            .collect()
    }
}

/// A plan's written members over a batch: wire name, rule and the column feeding it.
pub(crate) type Members<'a> = Vec<(&'a str, Rule, Option<&'a dyn Array>)>;

/// The mode and fields of `definition` when it is a wire schema of format `F`.
fn document_fields<F: DocumentFormat>(
    definition: &WireDefinition,
) -> Option<(&WireMode, &[WireField<DocType>])> {
    match (definition, F::FORMAT) {
        (WireDefinition::Json { mode, fields }, WireFormat::Json)
        | (WireDefinition::Cbor { mode, fields }, WireFormat::Cbor) => Some((mode, fields)),
        _ => None,
    }
}

/// The rule decoding wire type `wire` into `target` in format `F`, by the table of
/// `validate::catalog_entities::codec`; `None` where the table has no entry.
fn rule<F: DocumentFormat>(
    wire: DocType,
    target: &DataType,
    encoded: bool,
    nullable: bool,
) -> Option<Rule> {
    let ok = |accepted: bool, rule: Rule| accepted.then_some(rule);
    match wire {
        DocType::Null => ok(nullable, Rule::Null),
        DocType::String if *target == DataType::Datetime => ok(encoded, Rule::Rfc3339),
        DocType::String if *target == DataType::Bytes => ok(F::STRING_INTO_BYTES, Rule::Text),
        DocType::String => ok(*target == DataType::String, Rule::Text),
        DocType::Object => ok(*target == DataType::String, Rule::ObjectText),
        DocType::Integer => ok(target.is_integer(), Rule::Typed),
        DocType::Number => ok(target.is_float(), Rule::Typed),
        DocType::Boolean => ok(*target == DataType::Bool, Rule::Typed),
        DocType::Array => match target {
            DataType::Vec(_) | DataType::List(_) | DataType::Array(..) => {
                ok(elements_decode(target), Rule::Typed)
            }
            _ => None,
        },
    }
}

/// Whether a document value can decode into `ty` as an array element (or, for a list type,
/// hold such elements): anything but an innermost DATETIME (ENCODE names whole fields only),
/// and no ARRAY without dimensions or with one Arrow cannot represent.
fn elements_decode(ty: &DataType) -> bool {
    match ty {
        DataType::Vec(e) | DataType::List(e) => elements_decode(e),
        DataType::Array(e, dims) => {
            !dims.is_empty() && dims.iter().all(|&d| i32::try_from(d).is_ok()) && elements_decode(e)
        }
        DataType::Datetime => false,
        _ => true,
    }
}
