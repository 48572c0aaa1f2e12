//! `CREATE SCHEMA` field types and `CREATE WIRE … SCHEMA` consistency.
//!
//! The parser already refuses duplicate fields, empty field lists, zero `ARRAY` dimensions,
//! invalid Avro names and repeated enum symbols; those rules are checked again here only
//! because a definition may also arrive without the parser (a flow file, a restored catalog),
//! and they cost a pass over the fields.
//!
//! Field types (DESIGN §4), decisions where it is silent:
//!
//! | type | rule | why |
//! |---|---|---|
//! | `ARRAY<T, d…>` | `T` is a scalar type; every `d` is at least 1; the product of the dimensions is at most 2,147,483,647 | an ARRAY is a tensor: nesting is written as more dimensions (`ARRAY<F32, 2, 3>`), and Arrow's FixedSizeList length is an `i32` |
//! | `VEC<T>` | `T` is any valid type but `LIST` | Arrow lists nest freely; `LIST` holds header values only |
//! | `LIST<T>` | `T` is `STRING`, and a `LIST` is never an element of another type | DESIGN §4 defines `LIST<STRING>` for headers and nothing else |
//!
//! Wire schemas: an Avro field of type `null` cannot be `OPTIONAL`, because OPTIONAL is the
//! union `[null, T]` and an Avro union cannot list `null` twice. JSON and CBOR `null OPTIONAL`
//! is fine (the key may be absent or null).

use std::collections::BTreeSet;

use nervix_nspl::ast::catalog::{
    AvroType, CreateSchema, CreateWireSchema, WireDefinition, WireField,
};
use nervix_nspl::ast::TypeName;
use nervix_nspl::Span;

use crate::catalog::CatalogError;
use crate::types::DataType;

/// The most elements an `ARRAY` may hold: Arrow's FixedSizeList length is an `i32`.
const MAX_ARRAY_ELEMENTS: u64 = i32::MAX as u64;

/// Checks the field types of a schema and that no field is declared twice.
pub(super) fn validate_schema(schema: &CreateSchema) -> Result<(), CatalogError> {
    let mut seen = BTreeSet::new();
    for field in &schema.fields {
        if !seen.insert(field.name.name.as_str()) {
            return Err(CatalogError::new(
                field.name.span,
                format!(
                    "field '{}' is declared twice in schema '{}'",
                    field.name, schema.name
                ),
            ));
        }
        check_type(&field.ty).map_err(|problem| {
            CatalogError::new(
                field.name.span,
                format!(
                    "field '{}' of schema '{}' is {}: {problem}",
                    field.name,
                    schema.name,
                    DataType::from_type_name(&field.ty)
                ),
            )
        })?;
    }
    Ok(())
}

/// Why `ty` is not a valid field type, if it is not.
pub(super) fn check_type(ty: &TypeName) -> Result<(), String> {
    match ty {
        TypeName::Array(element, dims) => {
            if !DataType::from_type_name(element).is_scalar() {
                return Err(format!(
                    "an ARRAY element must be a scalar type, not {}; write every dimension in \
                     one ARRAY, such as ARRAY<F32, 2, 3>",
                    DataType::from_type_name(element)
                ));
            }
            if dims.is_empty() {
                return Err("an ARRAY needs at least one dimension".to_string());
            }
            if dims.contains(&0) {
                return Err("ARRAY dimensions are at least 1".to_string());
            }
            let elements = dims
                .iter()
                .try_fold(1u64, |product, d| product.checked_mul(u64::from(*d)))
                .filter(|n| *n <= MAX_ARRAY_ELEMENTS);
            if elements.is_none() {
                return Err(format!(
                    "an ARRAY holds at most {MAX_ARRAY_ELEMENTS} elements, the product of its \
                     dimensions"
                ));
            }
            Ok(())
        }
        TypeName::Vec(element) => {
            if matches!(**element, TypeName::List(_)) {
                return Err(
                    "a LIST holds header values and cannot be an element; use VEC<STRING>"
                        .to_string(),
                );
            }
            check_type(element)
        }
        TypeName::List(element) => {
            if **element != TypeName::String {
                return Err("a LIST holds header values: write LIST<STRING>".to_string());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Checks a wire schema: unique field names at every level and, for AVRO, Avro names and
/// unions.
pub(super) fn validate_wire_schema(wire: &CreateWireSchema) -> Result<(), CatalogError> {
    let name = &wire.name.name;
    match &wire.definition {
        WireDefinition::Json { fields, .. } | WireDefinition::Cbor { fields, .. } => {
            unique_names(name, fields)
        }
        WireDefinition::Avro { fields } => avro_fields(name, fields),
    }
}

fn unique_names<T>(wire: &str, fields: &[WireField<T>]) -> Result<(), CatalogError> {
    let mut seen = BTreeSet::new();
    for field in fields {
        if !seen.insert(field.name.as_str()) {
            return Err(CatalogError::new(
                field.span,
                format!(
                    "wire field '{}' is declared twice in wire schema '{wire}'",
                    field.name
                ),
            ));
        }
    }
    Ok(())
}

fn avro_fields(wire: &str, fields: &[WireField<AvroType>]) -> Result<(), CatalogError> {
    unique_names(wire, fields)?;
    for field in fields {
        if !is_avro_name(&field.name) {
            return Err(CatalogError::new(
                field.span,
                format!(
                    "wire field '{}' of wire schema '{wire}' is not an Avro name: use letters, \
                     digits and `_`, not first a digit",
                    field.name
                ),
            ));
        }
        if field.optional && field.ty == AvroType::Null {
            return Err(CatalogError::new(
                field.span,
                format!(
                    "wire field '{}' of wire schema '{wire}' is null OPTIONAL: OPTIONAL is an \
                     Avro union with null, which cannot list null twice; declare it null",
                    field.name
                ),
            ));
        }
        avro_type(wire, &field.name, field.span, &field.ty)?;
    }
    Ok(())
}

/// Checks the composites inside one Avro type.
fn avro_type(wire: &str, field: &str, span: Span, ty: &AvroType) -> Result<(), CatalogError> {
    match ty {
        AvroType::Record(fields) => avro_fields(wire, fields),
        AvroType::Array(element) | AvroType::Map(element) => avro_type(wire, field, span, element),
        AvroType::Enum(symbols) => {
            let mut seen = BTreeSet::new();
            for symbol in symbols {
                if !is_avro_name(symbol) {
                    return Err(CatalogError::new(
                        span,
                        format!(
                            "enum symbol '{symbol}' of wire field '{field}' is not an Avro name: \
                             use letters, digits and `_`, not first a digit"
                        ),
                    ));
                }
                if !seen.insert(symbol.as_str()) {
                    return Err(CatalogError::new(
                        span,
                        format!("enum symbol '{symbol}' of wire field '{field}' is listed twice"),
                    ));
                }
            }
            if symbols.is_empty() {
                return Err(CatalogError::new(
                    span,
                    format!("the enum of wire field '{field}' lists no symbol"),
                ));
            }
            Ok(())
        }
        AvroType::Fixed(0) => Err(CatalogError::new(
            span,
            format!("wire field '{field}' is fixed(0): a fixed size is at least 1"),
        )),
        _ => Ok(()),
    }
}

/// Whether `name` is a valid Avro name: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_avro_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
