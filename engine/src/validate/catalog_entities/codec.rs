//! `CREATE CODEC`: what a codec reads and whether it can produce its schema.
//!
//! A JAQ codec names only its `TO SCHEMA`, which must exist; its programs are the ingestion
//! runtime's to run. A wire codec `FROM WIRE <format> SCHEMA w TO SCHEMA s [ENCODE f AS
//! RFC3339, …]` must satisfy:
//!
//! 1. `w` exists and is a wire schema of the codec's format:
//!    `codec 'c' reads WIRE JSON, but wire schema 'w' is WIRE AVRO`;
//! 2. `s` exists;
//! 3. every `ENCODE f AS RFC3339` names a DATETIME field of `s` that a wire *string* of the
//!    same name feeds (spec: "JSON or AVRO string wire values require `ENCODE <field> AS
//!    RFC3339` on the codec before they can decode into the named DATETIME field");
//! 4. every field of `s` with a wire field of the same name (names compare exactly; a wire
//!    name such as `'orderId'` never matches a schema field) decodes by the table below, and
//!    every *required* field of `s` has one, which is itself required (an OPTIONAL wire field
//!    may be absent, and a required schema field could then not be produced). Wire fields no
//!    schema field names are read and dropped.
//!
//! # Wire types and the schema types they decode into
//!
//! | JSON / CBOR wire type | schema types |
//! |---|---|
//! | `string` | `STRING`; `DATETIME` only with `ENCODE f AS RFC3339`; CBOR also `BYTES` (a byte string, or a text string's UTF-8) |
//! | `integer` | `U8 … I64` (each value range-checked) |
//! | `number` | `F32`, `F64` |
//! | `boolean` | `BOOL` |
//! | `array` | `VEC<T>`, `ARRAY<T, d…>`, `LIST<STRING>` — elements decode per value by this table, so `T` (innermost) cannot be `DATETIME` |
//! | `object` | `STRING`: the object as JSON text, readable with `JSON_VALUE` |
//! | `null` | any `OPTIONAL` field (always null) |
//!
//! | AVRO wire type | schema types |
//! |---|---|
//! | `null` | any `OPTIONAL` field (always null) |
//! | `boolean` | `BOOL` |
//! | `int`, `long` | `U8 … I64` (each value range-checked) |
//! | `float`, `double` | `F32`, `F64` |
//! | `bytes`, `fixed(n)` | `BYTES` |
//! | `string` | `STRING`; `DATETIME` only with `ENCODE f AS RFC3339` |
//! | `enum(…)` | `STRING` (the symbol) |
//! | `array<T>` | `VEC<E>` when `T` decodes into `E`; `ARRAY<E, d1, …, dn>` when `T` is `n - 1` more arrays around a type that decodes into `E`; `LIST<STRING>` when `T` decodes into `STRING` |
//! | `record(…)`, `map<T>` | `STRING`: the value as JSON text, readable with `JSON_VALUE` |
//!
//! Decisions where the spec is silent: integers never decode into floats nor numbers into
//! integers (no implicit casts, as in expressions); DATETIME has no integer (epoch) encoding,
//! because RFC3339 is the only encoding the language declares; a JSON string is text, so it
//! never decodes into `BYTES`; nested documents keep their content as JSON text rather than
//! being refused, so nothing a wire schema declares is unreachable.

use nervix_nspl::ast::catalog::{
    AvroType, CodecSource, CreateCodec, CreateSchema, DocType, FieldEncoding, SchemaField,
    WireDefinition, WireFormat,
};
use nervix_nspl::ast::TypeName;

use crate::catalog::{CatalogError, DomainScope};
use crate::types::DataType;

/// Checks a codec against the candidate domain.
pub(super) fn validate_codec(
    scope: &DomainScope<'_>,
    codec: &CreateCodec,
) -> Result<(), CatalogError> {
    match &codec.source {
        CodecSource::Jaq { .. } => scope.schema(&codec.schema).map(|_| ()),
        CodecSource::Wire {
            format,
            wire_schema,
            encodings,
        } => {
            let wire = scope.wire_schema(wire_schema)?;
            let actual = wire.definition.format();
            if actual != *format {
                return Err(CatalogError::new(
                    wire_schema.span,
                    format!(
                        "codec '{}' reads WIRE {}, but wire schema '{}' is WIRE {}",
                        codec.name,
                        format.keyword(),
                        wire_schema,
                        actual.keyword()
                    ),
                ));
            }
            let schema = scope.schema(&codec.schema)?;
            let wire = WireFields {
                name: &wire_schema.name,
                definition: &wire.definition,
            };
            for encoding in encodings {
                check_encoding(&wire, schema, encoding)?;
            }
            for field in &schema.fields {
                check_field(codec, &wire, schema, encodings, field)?;
            }
            Ok(())
        }
    }
}

/// One top-level wire field, whatever the format.
#[derive(Clone, Copy)]
enum WireType<'a> {
    Doc(WireFormat, DocType),
    Avro(&'a AvroType),
}

impl WireType<'_> {
    fn describe(self) -> String {
        match self {
            WireType::Doc(_, t) => t.word().to_string(),
            WireType::Avro(t) => avro_name(t),
        }
    }
}

/// The top-level fields of a wire schema, looked up by name.
struct WireFields<'a> {
    name: &'a str,
    definition: &'a WireDefinition,
}

impl<'a> WireFields<'a> {
    /// The wire field `name`: its type and whether it is OPTIONAL.
    fn get(&self, name: &str) -> Option<(WireType<'a>, bool)> {
        match self.definition {
            WireDefinition::Json { fields, .. } => fields
                .iter()
                .find(|f| f.name == name)
                .map(|f| (WireType::Doc(WireFormat::Json, f.ty), f.optional)),
            WireDefinition::Cbor { fields, .. } => fields
                .iter()
                .find(|f| f.name == name)
                .map(|f| (WireType::Doc(WireFormat::Cbor, f.ty), f.optional)),
            WireDefinition::Avro { fields } => fields
                .iter()
                .find(|f| f.name == name)
                .map(|f| (WireType::Avro(&f.ty), f.optional)),
        }
    }
}

fn check_encoding(
    wire: &WireFields<'_>,
    schema: &CreateSchema,
    encoding: &FieldEncoding,
) -> Result<(), CatalogError> {
    let name = &encoding.field.name;
    let refuse = |message: String| Err(CatalogError::new(encoding.field.span, message));
    let Some(field) = schema.fields.iter().find(|f| f.name.name == *name) else {
        return refuse(format!(
            "ENCODE {name} AS RFC3339 names no field of schema '{}'",
            schema.name
        ));
    };
    if field.ty != TypeName::Datetime {
        return refuse(format!(
            "ENCODE {name} AS RFC3339 applies only to DATETIME fields, but field '{name}' of \
             schema '{}' is {}",
            schema.name,
            DataType::from_type_name(&field.ty)
        ));
    }
    match wire.get(name) {
        None => refuse(format!(
            "ENCODE {name} AS RFC3339 decodes a wire string, but wire schema '{}' has no field \
             '{name}'",
            wire.name
        )),
        Some((ty, _)) if !is_string(ty) => refuse(format!(
            "ENCODE {name} AS RFC3339 decodes a wire string, but wire field '{name}' of wire \
             schema '{}' is {}",
            wire.name,
            ty.describe()
        )),
        Some(_) => Ok(()),
    }
}

fn is_string(ty: WireType<'_>) -> bool {
    matches!(
        ty,
        WireType::Doc(_, DocType::String) | WireType::Avro(AvroType::String)
    )
}

fn check_field(
    codec: &CreateCodec,
    wire: &WireFields<'_>,
    schema: &CreateSchema,
    encodings: &[FieldEncoding],
    field: &SchemaField,
) -> Result<(), CatalogError> {
    let name = &field.name.name;
    let Some((wire_type, wire_optional)) = wire.get(name) else {
        if field.optional {
            return Ok(());
        }
        return Err(CatalogError::new(
            codec.schema.span,
            format!(
                "codec '{}' cannot produce required field '{name}' of schema '{}': wire schema \
                 '{}' has no field '{name}'",
                codec.name, schema.name, wire.name
            ),
        ));
    };
    if wire_optional && !field.optional {
        return Err(CatalogError::new(
            codec.schema.span,
            format!(
                "codec '{}' cannot always produce required field '{name}' of schema '{}': wire \
                 field '{name}' of wire schema '{}' is OPTIONAL; make one of them match",
                codec.name, schema.name, wire.name
            ),
        ));
    }
    let target = DataType::from_type_name(&field.ty);
    let encoded = encodings.iter().any(|e| e.field.name == *name);
    let datetime = if encoded {
        Datetime::Encoded
    } else {
        Datetime::NotEncoded(name)
    };
    decodes(wire_type, &target, field.optional, datetime).map_err(|reason| {
        CatalogError::new(
            codec.schema.span,
            format!(
                "codec '{}' cannot decode wire field '{name}' of wire schema '{}' into field \
                 '{name}' of schema '{}': {reason}",
                codec.name, wire.name, schema.name
            ),
        )
    })
}

/// Whether a wire string may decode into DATETIME where the value lands.
#[derive(Clone, Copy)]
enum Datetime<'a> {
    /// The field is named by `ENCODE … AS RFC3339`.
    Encoded,
    /// A top-level field without ENCODE.
    NotEncoded(&'a str),
    /// An element of an array, which ENCODE cannot name.
    Element,
}

/// Whether a value of `wire` decodes into `target`, by the module's table; the reason if not.
fn decodes(
    wire: WireType<'_>,
    target: &DataType,
    optional: bool,
    datetime: Datetime<'_>,
) -> Result<(), String> {
    let refuse = || {
        Err(format!(
            "wire type {} does not decode into {target}",
            wire.describe()
        ))
    };
    if *target == DataType::Datetime && is_string(wire) {
        return match datetime {
            Datetime::Encoded => Ok(()),
            Datetime::NotEncoded(field) => Err(format!(
                "a wire string decodes into DATETIME only with ENCODE {field} AS RFC3339 on the \
                 codec"
            )),
            Datetime::Element => Err(
                "DATETIME array elements cannot be decoded: ENCODE … AS RFC3339 applies to a \
                 whole DATETIME field"
                    .to_string(),
            ),
        };
    }
    let accepted = match wire {
        WireType::Doc(_, DocType::Null) | WireType::Avro(AvroType::Null) => {
            return if optional {
                Ok(())
            } else {
                Err(format!(
                    "wire type null decodes only into an OPTIONAL field, not a required {target}"
                ))
            };
        }
        WireType::Doc(format, doc) => match doc {
            DocType::String => {
                *target == DataType::String
                    || (format == WireFormat::Cbor && *target == DataType::Bytes)
            }
            DocType::Integer => target.is_integer(),
            DocType::Number => target.is_float(),
            DocType::Boolean => *target == DataType::Bool,
            DocType::Object => *target == DataType::String,
            DocType::Array => doc_array(target),
            DocType::Null => false,
        },
        WireType::Avro(avro) => match avro {
            AvroType::Boolean => *target == DataType::Bool,
            AvroType::Int | AvroType::Long => target.is_integer(),
            AvroType::Float | AvroType::Double => target.is_float(),
            AvroType::Bytes | AvroType::Fixed(_) => *target == DataType::Bytes,
            AvroType::String | AvroType::Enum(_) => *target == DataType::String,
            AvroType::Record(_) | AvroType::Map(_) => *target == DataType::String,
            AvroType::Array(element) => return avro_array(element, target),
            AvroType::Null => false,
        },
    };
    if accepted {
        Ok(())
    } else {
        refuse()
    }
}

/// A JSON or CBOR `array` into a list type: its elements are checked per value at decode time,
/// so only an innermost DATETIME (which no element can be encoded as) is refused here.
fn doc_array(target: &DataType) -> bool {
    match target {
        DataType::Vec(element) | DataType::List(element) | DataType::Array(element, _) => {
            *innermost(element) != DataType::Datetime
        }
        _ => false,
    }
}

fn innermost(ty: &DataType) -> &DataType {
    match ty {
        DataType::Vec(e) | DataType::List(e) | DataType::Array(e, _) => innermost(e),
        other => other,
    }
}

/// An Avro `array<element>` into a list type.
fn avro_array(element: &AvroType, target: &DataType) -> Result<(), String> {
    let in_context = |reason: String| {
        format!(
            "wire type array<{}> does not decode into {target}: {reason}",
            avro_name(element)
        )
    };
    match target {
        DataType::Vec(inner) | DataType::List(inner) => {
            decodes(WireType::Avro(element), inner, false, Datetime::Element).map_err(in_context)
        }
        DataType::Array(inner, dims) => {
            // ARRAY<E, d1, …, dn> reads n nested Avro arrays.
            let mut wire = element;
            for _ in 1..dims.len() {
                match wire {
                    AvroType::Array(next) => wire = next,
                    _ => {
                        return Err(in_context(format!(
                            "{} dimensions need {} nested Avro arrays",
                            dims.len(),
                            dims.len()
                        )))
                    }
                }
            }
            decodes(WireType::Avro(wire), inner, false, Datetime::Element).map_err(in_context)
        }
        _ => Err(format!(
            "wire type array<{}> does not decode into {target}",
            avro_name(element)
        )),
    }
}

/// How DESIGN §7 writes an Avro type, with composites abbreviated.
fn avro_name(ty: &AvroType) -> String {
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
