//! Schemas, `ALTER SCHEMA`, wire schemas (JSON, CBOR, AVRO) and codecs.
//!
//! Wire type names are keywords written in lower case, as DESIGN §7 writes them, so they read
//! apart from the upper-case value types (`string` on the wire, `STRING` in a schema).

use super::{choice, new_name, non_empty_string, positive_integer, refuse_repeat};
use crate::ast::catalog::{
    AlterSchema, AvroType, CatalogStmt, CodecSource, CreateCodec, CreateSchema, CreateWireSchema,
    DatetimeEncoding, DocType, FieldEncoding, JaqFormat, SchemaField, SchemaOperation,
    WireDefinition, WireField, WireFormat, WireMode,
};
use crate::ast::ObjectKind;
use crate::error::{Expected, NameKind, ParseError};
use crate::lexer::{Punct, TokenKind};
use crate::parse::{PResult, Parser};
use crate::render::catalog::is_bare_wire_name;

// ----- schemas -----

/// `CREATE SCHEMA s (field TYPE [SENSITIVE] [OPTIONAL], …)` after `SCHEMA`.
pub fn create_schema(p: &mut Parser, if_not_exists: bool) -> PResult<CatalogStmt> {
    let name = new_name(p)?;
    p.expect_punct(Punct::LParen)?;
    refuse_empty_list(p)?;
    let mut seen = Vec::new();
    let fields = p.comma_list(|p| {
        let field = schema_field(p)?;
        refuse_repeat(&mut seen, &field.name.name, field.name.span, || {
            format!("field `{}` is declared twice", field.name)
        })?;
        Ok(field)
    })?;
    p.expect_punct(Punct::RParen)?;
    Ok(CatalogStmt::CreateSchema(CreateSchema {
        if_not_exists,
        name,
        fields,
    }))
}

/// `name TYPE [SENSITIVE] [OPTIONAL]`, the two flags in either order.
fn schema_field(p: &mut Parser) -> PResult<SchemaField> {
    let name = p.ident(NameKind::New)?;
    let ty = p.type_name()?;
    let (mut sensitive, mut optional) = (false, false);
    loop {
        // A flag already given is not offered again, but repeating it gets its own message.
        for (flag, set) in [("SENSITIVE", sensitive), ("OPTIONAL", optional)] {
            if set && p.is_keyword_at(0, flag) {
                return Err(p.error_at(p.span(), format!("{flag} is given twice")));
            }
        }
        if !sensitive && p.eat_keyword("SENSITIVE") {
            sensitive = true;
        } else if !optional && p.eat_keyword("OPTIONAL") {
            optional = true;
        } else {
            break;
        }
    }
    Ok(SchemaField {
        name,
        ty,
        sensitive,
        optional,
    })
}

/// `ALTER SCHEMA s <operation>, …` after `SCHEMA`.
pub fn alter_schema(p: &mut Parser) -> PResult<CatalogStmt> {
    let name = p.ident(NameKind::Existing(ObjectKind::Schema))?;
    let operations = p.comma_list(schema_operation)?;
    Ok(CatalogStmt::AlterSchema(AlterSchema { name, operations }))
}

fn schema_operation(p: &mut Parser) -> PResult<SchemaOperation> {
    if p.eat_keyword("ADD") {
        p.expect_keyword("FIELD")?;
        return Ok(SchemaOperation::AddField(schema_field(p)?));
    }
    if p.eat_keyword("DROP") {
        p.expect_keyword("FIELD")?;
        return Ok(SchemaOperation::DropField(p.ident(NameKind::Field)?));
    }
    if p.eat_keyword("RENAME") {
        p.expect_keyword("FIELD")?;
        let from = p.ident(NameKind::Field)?;
        p.expect_keyword("TO")?;
        let to = p.ident(NameKind::New)?;
        return Ok(SchemaOperation::RenameField { from, to });
    }
    if p.eat_keyword("ALTER") {
        p.expect_keyword("FIELD")?;
        let field = p.ident(NameKind::Field)?;
        if p.eat_keyword("SET") {
            return match p.expect_one_of(&["TYPE", "OPTIONAL"])? {
                "TYPE" => Ok(SchemaOperation::SetType {
                    field,
                    ty: p.type_name()?,
                }),
                _ => Ok(SchemaOperation::SetOptional(field)),
            };
        }
        if p.eat_keyword("DROP") {
            p.expect_keyword("OPTIONAL")?;
            return Ok(SchemaOperation::DropOptional(field));
        }
        return Err(p.unexpected());
    }
    Err(p.unexpected())
}

// ----- wire schemas -----

fn wire_format(p: &mut Parser) -> PResult<WireFormat> {
    let choices = WireFormat::ALL.map(|f| (f.keyword(), f));
    choice(p, None, &choices)
}

/// `CREATE WIRE <format> SCHEMA w …` after `WIRE`.
pub fn create_wire_schema(p: &mut Parser, if_not_exists: bool) -> PResult<CatalogStmt> {
    let format = wire_format(p)?;
    p.expect_keyword("SCHEMA")?;
    let name = new_name(p)?;
    let definition = match format {
        WireFormat::Json | WireFormat::Cbor => {
            p.expect_keyword("MODE")?;
            let mode = choice(
                p,
                None,
                &[("STRICT", WireMode::Strict), ("LOOSE", WireMode::Loose)],
            )?;
            let fields = wire_fields(p, false, doc_type)?;
            if format == WireFormat::Json {
                WireDefinition::Json { mode, fields }
            } else {
                WireDefinition::Cbor { mode, fields }
            }
        }
        WireFormat::Avro => {
            if p.is_keyword_at(0, "MODE") {
                return Err(p.error_at(
                    p.span(),
                    "AVRO wire schemas take no MODE: an Avro record holds exactly its declared \
                     fields",
                ));
            }
            WireDefinition::Avro {
                fields: wire_fields(p, true, avro_type)?,
            }
        }
    };
    Ok(CatalogStmt::CreateWireSchema(CreateWireSchema {
        if_not_exists,
        name,
        definition,
    }))
}

/// `(field type [OPTIONAL], …)` with no field named twice.
fn wire_fields<T>(
    p: &mut Parser,
    avro: bool,
    ty: fn(&mut Parser) -> PResult<T>,
) -> PResult<Vec<WireField<T>>> {
    p.expect_punct(Punct::LParen)?;
    refuse_empty_list(p)?;
    let mut seen = Vec::new();
    let fields = p.comma_list(|p| {
        let span = p.span();
        let name = wire_field_name(p, avro)?;
        refuse_repeat(&mut seen, &name, span, || {
            format!("wire field '{name}' is declared twice")
        })?;
        let ty = ty(p)?;
        let optional = p.eat_keyword("OPTIONAL");
        Ok(WireField {
            name,
            span,
            ty,
            optional,
        })
    })?;
    p.expect_punct(Punct::RParen)?;
    Ok(fields)
}

/// Refuses `()`: a schema or record declares at least one field.
fn refuse_empty_list(p: &mut Parser) -> PResult<()> {
    if p.peek().kind == TokenKind::Punct(Punct::RParen) {
        return Err(p.error_at(
            p.span(),
            "expected a field, found `)`: a field list cannot be empty",
        ));
    }
    Ok(())
}

/// Whether `name` is a valid Avro name: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_avro_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A wire field name: a lower-case word, or a string for any other external key.
fn wire_field_name(p: &mut Parser, avro: bool) -> PResult<String> {
    let span = p.span();
    let name = if p.at_string() {
        non_empty_string(p, "a wire field name")?
    } else {
        p.note(Expected::Name(NameKind::New));
        if p.peek().kind != TokenKind::Word {
            return Err(p.unexpected());
        }
        let token = p.peek().clone();
        let text = p.text(&token).to_string();
        if !is_bare_wire_name(&text) {
            return Err(p.error_at(
                span,
                format!(
                    "wire field `{text}` is not a lower-case name: quote it to keep its case, \
                     '{text}'"
                ),
            ));
        }
        p.advance();
        text
    };
    if avro && !is_avro_name(&name) {
        return Err(p.error_at(
            span,
            format!("'{name}' is not an Avro name: use letters, digits and `_`, not first a digit"),
        ));
    }
    Ok(name)
}

fn doc_type(p: &mut Parser) -> PResult<DocType> {
    let choices = DocType::ALL.map(|t| (t.word(), t));
    choice(p, None, &choices)
}

/// The AVRO type words, in DESIGN §7's order.
const AVRO_WORDS: [&str; 13] = [
    "null", "boolean", "int", "long", "float", "double", "bytes", "string", "record", "enum",
    "array", "map", "fixed",
];

fn avro_type(p: &mut Parser) -> PResult<AvroType> {
    p.nested(avro_type_inner)
}

fn avro_type_inner(p: &mut Parser) -> PResult<AvroType> {
    let choices = AVRO_WORDS.map(|w| (w, w));
    let word = choice(p, Some("an AVRO type"), &choices)?;
    Ok(match word {
        "null" => AvroType::Null,
        "boolean" => AvroType::Boolean,
        "int" => AvroType::Int,
        "long" => AvroType::Long,
        "float" => AvroType::Float,
        "double" => AvroType::Double,
        "bytes" => AvroType::Bytes,
        "string" => AvroType::String,
        "record" => AvroType::Record(wire_fields(p, true, avro_type)?),
        "enum" => {
            p.expect_punct(Punct::LParen)?;
            let mut seen = Vec::new();
            let symbols = p.comma_list(|p| {
                let span = p.span();
                let symbol = p.string()?;
                if !is_avro_name(&symbol) {
                    return Err(ParseError::new(
                        span,
                        format!(
                            "enum symbol '{symbol}' is not an Avro name: use letters, digits \
                             and `_`, not first a digit"
                        ),
                    ));
                }
                refuse_repeat(&mut seen, &symbol, span, || {
                    format!("enum symbol '{symbol}' is listed twice")
                })?;
                Ok(symbol)
            })?;
            p.expect_punct(Punct::RParen)?;
            AvroType::Enum(symbols)
        }
        "array" | "map" => {
            p.expect_punct(Punct::Lt)?;
            let element = Box::new(avro_type(p)?);
            p.expect_punct(Punct::Gt)?;
            if word == "array" {
                AvroType::Array(element)
            } else {
                AvroType::Map(element)
            }
        }
        _ => {
            p.expect_punct(Punct::LParen)?;
            let size = positive_integer(p, "a fixed size")?;
            p.expect_punct(Punct::RParen)?;
            AvroType::Fixed(size)
        }
    })
}

// ----- codecs -----

/// `CREATE CODEC c FROM …` after `CODEC`.
pub fn create_codec(p: &mut Parser, if_not_exists: bool) -> PResult<CatalogStmt> {
    let name = new_name(p)?;
    p.expect_keyword("FROM")?;
    let (source, schema) = if p.eat_keyword("WIRE") {
        let format = wire_format(p)?;
        p.expect_keyword("SCHEMA")?;
        let wire_schema = p.ident(NameKind::Existing(ObjectKind::WireSchema))?;
        let schema = to_schema(p)?;
        let mut encodings = Vec::new();
        if p.eat_keyword("ENCODE") {
            let mut seen = Vec::new();
            encodings = p.comma_list(|p| {
                let field = p.ident(NameKind::Field)?;
                refuse_repeat(&mut seen, &field.name, field.span, || {
                    format!("field `{field}` is encoded twice")
                })?;
                p.expect_keywords(&["AS", "RFC3339"])?;
                Ok(FieldEncoding {
                    field,
                    encoding: DatetimeEncoding::Rfc3339,
                })
            })?;
        }
        let source = CodecSource::Wire {
            format,
            wire_schema,
            encodings,
        };
        (source, schema)
    } else {
        let choices = JaqFormat::ALL.map(|f| (f.keyword(), f));
        let format = choice(p, None, &choices)?;
        let schema = to_schema(p)?;
        p.expect_keywords(&["WITH", "JAQ", "TRANSFORMATIONS"])?;
        p.expect_keyword("ON")?;
        let (mut on_ingestion, mut on_emitting) = (None, None);
        if p.expect_one_of(&["INGESTION", "EMITTING"])? == "INGESTION" {
            on_ingestion = Some(non_empty_string(p, "a JAQ program")?);
            if p.eat_keyword("ON") {
                p.expect_keyword("EMITTING")?;
                on_emitting = Some(non_empty_string(p, "a JAQ program")?);
            }
        } else {
            on_emitting = Some(non_empty_string(p, "a JAQ program")?);
            if p.is_keyword_at(0, "ON") && p.is_keyword_at(1, "INGESTION") {
                return Err(p.error_at(p.span(), "ON INGESTION is written before ON EMITTING"));
            }
        }
        let source = CodecSource::Jaq {
            format,
            on_ingestion,
            on_emitting,
        };
        (source, schema)
    };
    Ok(CatalogStmt::CreateCodec(CreateCodec {
        if_not_exists,
        name,
        source,
        schema,
    }))
}

fn to_schema(p: &mut Parser) -> PResult<crate::ast::Ident> {
    p.expect_keywords(&["TO", "SCHEMA"])?;
    p.ident(NameKind::Existing(ObjectKind::Schema))
}
