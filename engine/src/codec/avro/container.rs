//! Avro object container files (Avro 1.11 specification, "Object Container Files"): the
//! header, the writer schema's match with the wire schema, and the blocks.
//!
//! A file is the magic `Obj` 0x01, a metadata map (`avro.schema`, the writer schema as JSON,
//! required; `avro.codec`, `null` when absent), a 16-byte sync marker, then blocks of a record
//! count, a byte size, that many bytes of (possibly compressed) datums and the sync marker
//! again. The writer schema must have the wire schema's shape — a record with the same
//! fields, in order, of the same types, where an OPTIONAL wire field is the union
//! `["null", T]` — and the first difference is named; logical types and names are ignored, as
//! they do not change the binary encoding. Codecs `null` and `deflate` (raw RFC 1951, inflated
//! within [`MAX_AVRO_BLOCK_BYTES`]) are decoded; any other is refused by name.

use std::collections::HashMap;

use nervix_nspl::ast::catalog::{AvroType, WireField};
use serde_json::Value;

use super::decode::CONTAINER_MAGIC;
use super::error::DecodeCause;
use super::plan::{avro_name, AvroCodecPlan};
use super::reader::{fail, Fail, Reader};
use super::MAX_AVRO_BLOCK_BYTES;

const SYNC_BYTES: usize = 16;
/// Metadata values (the writer schema above all) longer than this are refused.
const MAX_METADATA_BYTES: usize = 1 << 20;
/// A writer type shown in a message is cut to this many characters.
const MAX_SHOWN_CHARS: usize = 80;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    Null,
    Deflate,
}

pub(crate) struct Header {
    pub codec: Codec,
    sync: [u8; SYNC_BYTES],
}

/// One block's record count and the payload range of its data.
pub(crate) struct Block {
    pub count: usize,
    pub start: usize,
    pub end: usize,
}

/// Reads the header at the start of `r` and checks the writer schema against `plan`.
pub(crate) fn header(r: &mut Reader<'_>, plan: &AvroCodecPlan) -> Result<Header, Fail> {
    if r.take(CONTAINER_MAGIC.len()).ok() != Some(CONTAINER_MAGIC.as_slice()) {
        return Err(fail(0, DecodeCause::Magic));
    }
    let (mut schema, mut codec) = (None, None);
    loop {
        let n = r.block(&AvroType::Bytes)?;
        if n == 0 {
            break;
        }
        for _ in 0..n {
            let key = r.string()?;
            let at = r.pos;
            let value = r.bytes()?;
            if value.len() > MAX_METADATA_BYTES {
                return Err(fail(
                    at,
                    DecodeCause::Container(format!(
                        "metadata value longer than {MAX_METADATA_BYTES} bytes"
                    )),
                ));
            }
            match key {
                b"avro.schema" => schema = Some((at, value)),
                b"avro.codec" => codec = Some((at, value)),
                _ => {}
            }
        }
    }
    let sync_at = r.pos;
    let mut sync = [0; SYNC_BYTES];
    sync.copy_from_slice(r.take(SYNC_BYTES).map_err(|f| Fail {
        offset: sync_at,
        ..f
    })?);
    let codec = match codec {
        None => Codec::Null,
        Some((_, b"null")) => Codec::Null,
        Some((_, b"deflate")) => Codec::Deflate,
        Some((at, other)) => {
            return Err(fail(
                at,
                DecodeCause::Codec(String::from_utf8_lossy(other).into_owned()),
            ))
        }
    };
    let Some((at, schema)) = schema else {
        return Err(fail(
            sync_at,
            DecodeCause::Container("the header has no avro.schema".to_string()),
        ));
    };
    let writer: Value = serde_json::from_slice(schema).map_err(|e| {
        fail(
            at,
            DecodeCause::Container(format!("avro.schema is not JSON: {e}")),
        )
    })?;
    let mut names = HashMap::new();
    let top = resolve(&writer, &mut names)
        .filter(|(kind, _)| *kind == "record")
        .and_then(|(_, object)| object);
    let Some(top) = top else {
        return Err(fail(
            at,
            DecodeCause::Schema(format!(
                "the writer schema is {}, not a record",
                show(&writer)
            )),
        ));
    };
    fields(top.get("fields"), &plan.fields, "", &mut names).map_err(|e| {
        fail(
            at,
            DecodeCause::Schema(format!("wire schema '{}': {e}", plan.name)),
        )
    })?;
    Ok(Header { codec, sync })
}

/// The next block, or `None` at the end of the file.
pub(crate) fn block(r: &mut Reader<'_>, header: &Header) -> Result<Option<Block>, Fail> {
    if r.left() == 0 {
        return Ok(None);
    }
    let at = r.pos;
    let count = r.long()?;
    let count = usize::try_from(count).map_err(|_| {
        fail(
            at,
            DecodeCause::Container(format!("negative block record count {count}")),
        )
    })?;
    let size = r.length()?;
    if size > MAX_AVRO_BLOCK_BYTES {
        return Err(fail(
            at,
            DecodeCause::Container(format!("block longer than {MAX_AVRO_BLOCK_BYTES} bytes")),
        ));
    }
    let start = r.pos;
    r.take(size)?;
    let end = r.pos;
    let sync_at = r.pos;
    if r.take(SYNC_BYTES)? != header.sync {
        return Err(fail(sync_at, DecodeCause::Sync));
    }
    Ok(Some(Block { count, start, end }))
}

/// A writer type as a message shows it: its JSON, cut short.
fn show(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > MAX_SHOWN_CHARS {
        let cut: String = text.chars().take(MAX_SHOWN_CHARS).collect();
        format!("{cut}…")
    } else {
        text
    }
}

const PRIMITIVES: [&str; 8] = [
    "null", "boolean", "int", "long", "float", "double", "bytes", "string",
];

/// A writer type's kind (`"int"`, `"record"`, …) and, for a type written as an object (or
/// named earlier), that object; named types are recorded in `names` as they are defined.
fn resolve<'a>(
    v: &'a Value,
    names: &mut HashMap<String, &'a Value>,
) -> Option<(&'a str, Option<&'a serde_json::Map<String, Value>>)> {
    match v {
        Value::String(name) if PRIMITIVES.contains(&name.as_str()) => Some((name, None)),
        Value::String(name) => {
            let found = names.get(name.as_str()).copied().or_else(|| {
                names
                    .iter()
                    .find(|(full, _)| full.rsplit('.').next() == Some(name.as_str()))
                    .map(|(_, v)| *v)
            })?;
            let object = found.as_object()?;
            Some((object.get("type")?.as_str()?, Some(object)))
        }
        Value::Object(object) => {
            let kind = object.get("type")?;
            if let Value::String(kind) = kind {
                if let Some(Value::String(name)) = object.get("name") {
                    names.insert(name.clone(), v);
                    if let Some(Value::String(ns)) = object.get("namespace") {
                        names.insert(format!("{ns}.{name}"), v);
                    }
                }
                Some((kind.as_str(), Some(object)))
            } else {
                // `{"type": {...}}` wraps another type.
                resolve(kind, names)
            }
        }
        _ => None,
    }
}

/// Checks a writer record's field list against the wire fields, in order.
fn fields<'a>(
    writer: Option<&'a Value>,
    wire: &[WireField<AvroType>],
    path: &str,
    names: &mut HashMap<String, &'a Value>,
) -> Result<(), String> {
    let Some(writer) = writer.and_then(Value::as_array) else {
        return Err(format!("record{} has no field list", at(path)));
    };
    for i in 0..writer.len().max(wire.len()) {
        match (writer.get(i), wire.get(i)) {
            (Some(w), Some(f)) => {
                let name = w.get("name").and_then(Value::as_str).unwrap_or("");
                let here = if path.is_empty() {
                    f.name.clone()
                } else {
                    format!("{path}.{}", f.name)
                };
                if name != f.name {
                    return Err(format!(
                        "field {i}{}: the writer has '{name}', the wire schema '{}'",
                        at(path),
                        f.name
                    ));
                }
                let Some(ty) = w.get("type") else {
                    return Err(format!("field '{here}' has no type in the writer schema"));
                };
                field_type(ty, &f.ty, f.optional, &here, names)?;
            }
            (Some(w), None) => {
                let name = w.get("name").and_then(Value::as_str).unwrap_or("");
                return Err(format!(
                    "the writer has an extra field '{name}'{}",
                    at(path)
                ));
            }
            (None, Some(f)) => {
                return Err(format!("the writer lacks field '{}'{}", f.name, at(path)))
            }
            (None, None) => {}
        }
    }
    Ok(())
}

fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" of '{path}'")
    }
}

/// Checks one writer type against a wire type (`optional`: the union `["null", T]`).
fn field_type<'a>(
    writer: &'a Value,
    wire: &AvroType,
    optional: bool,
    path: &str,
    names: &mut HashMap<String, &'a Value>,
) -> Result<(), String> {
    let differs = || {
        format!(
            "field '{path}': the writer has {}, the wire schema {}{}",
            show(writer),
            avro_name(wire),
            if optional { " OPTIONAL" } else { "" }
        )
    };
    if optional {
        return match writer.as_array().map(Vec::as_slice) {
            Some([null, ty]) if null.as_str() == Some("null") => {
                field_type(ty, wire, false, path, names)
            }
            _ => Err(differs()),
        };
    }
    let Some((kind, object)) = resolve(writer, names) else {
        return Err(differs());
    };
    let get = |key: &str| object.and_then(|o| o.get(key));
    let same = match wire {
        AvroType::Null => kind == "null",
        AvroType::Boolean => kind == "boolean",
        AvroType::Int => kind == "int",
        AvroType::Long => kind == "long",
        AvroType::Float => kind == "float",
        AvroType::Double => kind == "double",
        AvroType::Bytes => kind == "bytes",
        AvroType::String => kind == "string",
        AvroType::Fixed(n) => kind == "fixed" && get("size").and_then(Value::as_u64) == Some(*n),
        AvroType::Enum(symbols) => {
            kind == "enum"
                && get("symbols").and_then(Value::as_array).is_some_and(|s| {
                    s.len() == symbols.len()
                        && s.iter().zip(symbols).all(|(a, b)| a.as_str() == Some(b))
                })
        }
        AvroType::Record(wire_fields) => {
            if kind != "record" {
                return Err(differs());
            }
            return fields(get("fields"), wire_fields, path, names);
        }
        AvroType::Array(item) => {
            let Some(items) = get("items").filter(|_| kind == "array") else {
                return Err(differs());
            };
            return field_type(items, item, false, &format!("{path}[]"), names);
        }
        AvroType::Map(value) => {
            let Some(values) = get("values").filter(|_| kind == "map") else {
                return Err(differs());
            };
            return field_type(values, value, false, &format!("{path}{{}}"), names);
        }
    };
    if same {
        Ok(())
    } else {
        Err(differs())
    }
}
