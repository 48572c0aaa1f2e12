//! The document formats a JAQ codec reads and writes, to and from jq values.
//!
//! - JSON: one JSON text (serde_json, nesting ≤ its 128 limit); numbers become jq integers
//!   when integral and in `i64`/`u64`, floats otherwise.
//! - CBOR: one data item and nothing after it (ciborium, nesting ≤ [`MAX_DOCUMENT_DEPTH`]);
//!   byte strings stay byte strings, tags are dropped (their content kept), map keys of any
//!   type are kept.
//! - YAML: exactly one document (yaml-rust2 events); plain scalars are resolved by YAML 1.2
//!   core rules (`42`, `4.2`, `true`, `null`/`~`), quoted ones stay strings; anchors are
//!   ignored and aliases refused (no alias expansion, so no "billion laughs").
//! - TOML: one document (the toml crate); datetimes become their RFC 3339 text.
//! - XML (roxmltree; DTDs refused, namespaces dropped to local names): the document is
//!   `{"<root>": value(root)}`, where an element's value is its text (`""` when empty) if it
//!   has no attributes and no child elements; otherwise an object holding `"@<name>"` for each
//!   attribute, one key per child element name (its value, or an array of values in document
//!   order when the name repeats) and `"#text"` for its text when not blank. Text is trimmed;
//!   comments and processing instructions are dropped. All leaves are strings (use `tonumber`
//!   in the program for numeric fields).
//!
//! Writing is the inverse, for ON EMITTING: JSON (non-finite numbers as `null`, object keys
//! must be strings), CBOR, YAML, TOML (the value must be an object; `null` has no TOML form),
//! and XML (the value must be an object with exactly one key, the root element; strings,
//! numbers and booleans become text, `null` an empty element, arrays repeat their element;
//! names must be XML names).

use std::fmt::Write as _;

use jaq_json::{Map, Num, Val};
use nervix_nspl::ast::catalog::JaqFormat;

use super::error::DecodeCause;
use super::value::type_name;
use super::MAX_DOCUMENT_DEPTH;

/// Parses `payload` in `format` into one jq value.
pub(crate) fn parse(format: JaqFormat, payload: &[u8]) -> Result<Val, DecodeCause> {
    let fail = |message: String| DecodeCause::Parse {
        format: format.keyword(),
        message,
    };
    let text = || std::str::from_utf8(payload).map_err(|e| fail(e.to_string()));
    match format {
        JaqFormat::Json => serde_json::from_slice::<serde_json::Value>(payload)
            .map(from_json)
            .map_err(|e| fail(e.to_string())),
        JaqFormat::Cbor => {
            let mut rest = payload;
            let value: ciborium::Value =
                ciborium::de::from_reader_with_recursion_limit(&mut rest, MAX_DOCUMENT_DEPTH)
                    .map_err(|e| fail(cbor_message(e)))?;
            if !rest.is_empty() {
                return Err(fail(format!("{} bytes after the data item", rest.len())));
            }
            Ok(from_cbor(value))
        }
        JaqFormat::Yaml => parse_yaml(text()?).map_err(fail),
        JaqFormat::Toml => text()?
            .parse::<toml::Table>()
            .map(|t| from_toml(toml::Value::Table(t)))
            .map_err(|e| fail(toml_message(&e.to_string()))),
        JaqFormat::Xml => parse_xml(text()?).map_err(fail),
    }
}

fn cbor_message(e: ciborium::de::Error<std::io::Error>) -> String {
    use ciborium::de::Error;
    match e {
        Error::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "unexpected end of input".to_string()
        }
        Error::Io(e) => e.to_string(),
        Error::Syntax(offset) => format!("syntax error at byte {offset}"),
        Error::Semantic(Some(offset), message) => format!("{message} at byte {offset}"),
        Error::Semantic(None, message) => message,
        Error::RecursionLimitExceeded => format!("nesting deeper than {MAX_DOCUMENT_DEPTH}"),
    }
}

/// The toml crate's report on one line: its position line and its last line (the cause),
/// without the source excerpt between them.
fn toml_message(report: &str) -> String {
    let mut lines = report.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    match lines.next_back() {
        Some(last) if last != first => format!("{first}: {last}"),
        _ => first.to_string(),
    }
}

fn from_json(v: serde_json::Value) -> Val {
    use serde_json::Value;
    match v {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Val::Num(Num::from_integral(i)),
            (None, Some(u)) => Val::Num(Num::from_integral(u)),
            _ => Val::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Val::from(s),
        Value::Array(items) => items.into_iter().map(from_json).collect(),
        Value::Object(members) => Val::obj(
            members
                .into_iter()
                .map(|(k, v)| (Val::from(k), from_json(v)))
                .collect(),
        ),
    }
}

fn from_cbor(v: ciborium::Value) -> Val {
    use ciborium::Value;
    match v {
        Value::Integer(i) => Val::Num(Num::from_integral(i128::from(i))),
        Value::Bytes(b) => Val::byte_str(b),
        Value::Float(f) => Val::from(f),
        Value::Text(s) => Val::from(s),
        Value::Bool(b) => Val::Bool(b),
        Value::Tag(_, inner) => from_cbor(*inner),
        Value::Array(items) => items.into_iter().map(from_cbor).collect(),
        Value::Map(entries) => Val::obj(
            entries
                .into_iter()
                .map(|(k, v)| (from_cbor(k), from_cbor(v)))
                .collect(),
        ),
        // `Null` and any simple value ciborium adds later.
        _ => Val::Null,
    }
}

fn from_toml(v: toml::Value) -> Val {
    use toml::Value;
    match v {
        Value::String(s) => Val::from(s),
        Value::Integer(i) => Val::Num(Num::from_integral(i)),
        Value::Float(f) => Val::from(f),
        Value::Boolean(b) => Val::Bool(b),
        Value::Datetime(d) => Val::from(d.to_string()),
        Value::Array(items) => items.into_iter().map(from_toml).collect(),
        Value::Table(t) => Val::obj(
            t.into_iter()
                .map(|(k, v)| (Val::from(k), from_toml(v)))
                .collect(),
        ),
    }
}

/// A YAML container being built from parser events.
enum Open {
    Seq(Vec<Val>),
    /// Entries and the key waiting for its value.
    Map(Map, Option<Val>),
}

/// Builds one document's value from yaml-rust2 events; keeps the first error.
#[derive(Default)]
struct YamlBuilder {
    stack: Vec<Open>,
    documents: Vec<Val>,
    error: Option<String>,
}

impl YamlBuilder {
    fn push(&mut self, v: Val) {
        match self.stack.last_mut() {
            None => self.documents.push(v),
            Some(Open::Seq(items)) => items.push(v),
            Some(Open::Map(map, key)) => match key.take() {
                None => *key = Some(v),
                Some(k) => {
                    map.insert(k, v);
                }
            },
        }
    }

    fn open(&mut self, container: Open) {
        if self.stack.len() >= MAX_DOCUMENT_DEPTH {
            self.error
                .get_or_insert(format!("nesting deeper than {MAX_DOCUMENT_DEPTH}"));
        }
        self.stack.push(container);
    }
}

impl yaml_rust2::parser::EventReceiver for YamlBuilder {
    fn on_event(&mut self, event: yaml_rust2::Event) {
        use yaml_rust2::parser::Event;
        use yaml_rust2::scanner::TScalarStyle;
        use yaml_rust2::Yaml;
        if self.error.is_some() {
            return;
        }
        match event {
            Event::Alias(_) => self.error = Some("aliases are not supported".to_string()),
            Event::Scalar(text, TScalarStyle::Plain, _, _) => {
                let v = match Yaml::from_str(&text) {
                    Yaml::Integer(i) => Val::Num(Num::from_integral(i)),
                    Yaml::Real(r) => match r.parse::<f64>() {
                        Ok(f) => Val::from(f),
                        Err(_) => Val::from(r),
                    },
                    Yaml::Boolean(b) => Val::Bool(b),
                    Yaml::Null => Val::Null,
                    _ => Val::from(text),
                };
                self.push(v);
            }
            Event::Scalar(text, ..) => self.push(Val::from(text)),
            Event::SequenceStart(..) => self.open(Open::Seq(Vec::new())),
            Event::MappingStart(..) => self.open(Open::Map(Map::default(), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let v = match self.stack.pop() {
                    Some(Open::Seq(items)) => items.into_iter().collect(),
                    Some(Open::Map(map, _)) => Val::obj(map),
                    None => Val::Null,
                };
                self.push(v);
            }
            _ => {}
        }
    }
}

fn parse_yaml(text: &str) -> Result<Val, String> {
    let mut builder = YamlBuilder::default();
    let mut parser = yaml_rust2::parser::Parser::new_from_str(text);
    parser.load(&mut builder, true).map_err(|e| e.to_string())?;
    if let Some(error) = builder.error {
        return Err(error);
    }
    let mut documents = builder.documents.into_iter();
    match (documents.next(), documents.next()) {
        (Some(v), None) => Ok(v),
        (None, _) => Err("no document".to_string()),
        (Some(_), Some(_)) => Err("more than one document".to_string()),
    }
}

fn parse_xml(text: &str) -> Result<Val, String> {
    let doc = roxmltree::Document::parse(text).map_err(|e| e.to_string())?;
    let root = doc.root_element();
    let mut map = Map::default();
    map.insert(
        Val::from(root.tag_name().name().to_string()),
        xml_value(root, 1)?,
    );
    Ok(Val::obj(map))
}

fn xml_value(e: roxmltree::Node<'_, '_>, depth: usize) -> Result<Val, String> {
    if depth > MAX_DOCUMENT_DEPTH {
        return Err(format!("nesting deeper than {MAX_DOCUMENT_DEPTH}"));
    }
    let mut text = String::new();
    // Child names in first-appearance order, each with its values.
    let mut children: Vec<(&str, Vec<Val>)> = Vec::new();
    for child in e.children() {
        if child.is_text() {
            text.push_str(child.text().unwrap_or(""));
        } else if child.is_element() {
            let name = child.tag_name().name();
            let value = xml_value(child, depth + 1)?;
            match children.iter_mut().find(|(n, _)| *n == name) {
                Some((_, values)) => values.push(value),
                None => children.push((name, vec![value])),
            }
        }
    }
    let text = text.trim();
    if children.is_empty() && e.attributes().len() == 0 {
        return Ok(Val::from(text.to_string()));
    }
    let mut map = Map::default();
    for attribute in e.attributes() {
        map.insert(
            Val::from(format!("@{}", attribute.name())),
            Val::from(attribute.value().to_string()),
        );
    }
    for (name, mut values) in children {
        let value = if values.len() == 1 {
            values.pop().unwrap_or_default()
        } else {
            values.into_iter().collect()
        };
        map.insert(Val::from(name.to_string()), value);
    }
    if !text.is_empty() {
        map.insert(Val::from("#text".to_string()), Val::from(text.to_string()));
    }
    Ok(Val::obj(map))
}

/// Appends `v` written in `format` to `out`.
pub(crate) fn write(format: JaqFormat, v: &Val, out: &mut Vec<u8>) -> Result<(), String> {
    match format {
        JaqFormat::Json => {
            let mut text = String::new();
            write_json(v, &mut text)?;
            out.extend_from_slice(text.as_bytes());
            Ok(())
        }
        JaqFormat::Cbor => {
            ciborium::into_writer(&to_cbor(v)?, &mut *out).map_err(|e| e.to_string())
        }
        JaqFormat::Yaml => {
            let mut text = String::new();
            yaml_rust2::YamlEmitter::new(&mut text)
                .dump(&to_yaml(v))
                .map_err(|e| format!("{e:?}"))?;
            text.push('\n');
            out.extend_from_slice(text.as_bytes());
            Ok(())
        }
        JaqFormat::Toml => {
            let toml::Value::Table(table) = to_toml(v)? else {
                return Err(format!("expected an object, found {}", type_name(v)));
            };
            let text = toml::to_string(&table).map_err(|e| e.to_string())?;
            out.extend_from_slice(text.as_bytes());
            Ok(())
        }
        JaqFormat::Xml => {
            let Val::Obj(map) = v else {
                return Err(format!("expected an object, found {}", type_name(v)));
            };
            let mut entries = map.iter();
            let (Some((Val::TStr(name), value)), None) = (entries.next(), entries.next()) else {
                return Err("expected an object with exactly one key, the root element".into());
            };
            let mut text = String::new();
            xml_element(&String::from_utf8_lossy(name), value, &mut text, 0)?;
            out.extend_from_slice(text.as_bytes());
            Ok(())
        }
    }
}

/// `v` as one compact JSON text, keys in the object's order (for objects fed into STRING
/// fields); a value JSON cannot write (a non-string key) becomes `null`.
pub(crate) fn json_text(v: &Val) -> String {
    let mut text = String::new();
    match write_json(v, &mut text) {
        Ok(()) => text,
        Err(_) => "null".to_string(),
    }
}

/// Writes `v` as compact JSON, keeping object key order; non-finite numbers become `null`.
fn write_json(v: &Val, out: &mut String) -> Result<(), String> {
    match v {
        Val::Null => out.push_str("null"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Num(n) => match number(n) {
            Some(Number::Int(i)) => {
                let _ = write!(out, "{i}");
            }
            Some(Number::Float(f)) if f.is_finite() => {
                let _ = write!(out, "{f:?}");
            }
            _ => out.push_str("null"),
        },
        Val::TStr(b) | Val::BStr(b) => json_string(&String::from_utf8_lossy(b), out),
        Val::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out)?;
            }
            out.push(']');
        }
        Val::Obj(map) => {
            out.push('{');
            for (i, (key, value)) in map.iter().enumerate() {
                let Val::TStr(key) = key else {
                    return Err(format!(
                        "JSON object keys must be strings, found {}",
                        type_name(key)
                    ));
                };
                if i > 0 {
                    out.push(',');
                }
                json_string(&String::from_utf8_lossy(key), out);
                out.push(':');
                write_json(value, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// `text` as a JSON string (RFC 8259 §7 escapes).
fn json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A jq number as an integer when it is one, else a float; `None` when it is neither.
enum Number {
    Int(i128),
    Float(f64),
}

fn number(n: &Num) -> Option<Number> {
    match n {
        Num::Int(i) => i128::try_from(*i).ok().map(Number::Int),
        Num::Float(f) => Some(Number::Float(*f)),
        other => {
            let text = other.to_string();
            text.parse::<i128>()
                .map(Number::Int)
                .ok()
                .or_else(|| text.parse::<f64>().ok().map(Number::Float))
        }
    }
}

fn to_cbor(v: &Val) -> Result<ciborium::Value, String> {
    use ciborium::Value;
    Ok(match v {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => match number(n) {
            Some(Number::Int(i)) => Value::Integer(
                ciborium::value::Integer::try_from(i)
                    .map_err(|_| format!("{i} does not fit a CBOR integer"))?,
            ),
            Some(Number::Float(f)) => Value::Float(f),
            None => Value::Null,
        },
        Val::TStr(b) => Value::Text(text_of(b)),
        Val::BStr(b) => Value::Bytes(b.to_vec()),
        Val::Arr(items) => Value::Array(items.iter().map(to_cbor).collect::<Result<_, _>>()?),
        Val::Obj(map) => Value::Map(
            map.iter()
                .map(|(k, v)| Ok((to_cbor(k)?, to_cbor(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

fn to_yaml(v: &Val) -> yaml_rust2::Yaml {
    use yaml_rust2::Yaml;
    match v {
        Val::Null => Yaml::Null,
        Val::Bool(b) => Yaml::Boolean(*b),
        Val::Num(n) => match number(n) {
            Some(Number::Int(i)) => {
                i64::try_from(i).map_or_else(|_| Yaml::Real(i.to_string()), Yaml::Integer)
            }
            Some(Number::Float(f)) => Yaml::Real(format!("{f:?}")),
            None => Yaml::Null,
        },
        Val::TStr(b) | Val::BStr(b) => Yaml::String(text_of(b)),
        Val::Arr(items) => Yaml::Array(items.iter().map(to_yaml).collect()),
        Val::Obj(map) => Yaml::Hash(map.iter().map(|(k, v)| (to_yaml(k), to_yaml(v))).collect()),
    }
}

fn to_toml(v: &Val) -> Result<toml::Value, String> {
    use toml::Value;
    Ok(match v {
        Val::Null => return Err("TOML has no null".to_string()),
        Val::Bool(b) => Value::Boolean(*b),
        Val::Num(n) => match number(n) {
            Some(Number::Int(i)) => Value::Integer(
                i64::try_from(i).map_err(|_| format!("{i} does not fit a TOML integer"))?,
            ),
            Some(Number::Float(f)) => Value::Float(f),
            None => return Err(format!("{n} is not a TOML number")),
        },
        Val::TStr(b) | Val::BStr(b) => Value::String(text_of(b)),
        Val::Arr(items) => Value::Array(items.iter().map(to_toml).collect::<Result<_, _>>()?),
        Val::Obj(map) => Value::Table(
            map.iter()
                .map(|(k, v)| match k {
                    Val::TStr(k) => Ok((text_of(k), to_toml(v)?)),
                    other => Err(format!(
                        "TOML keys must be strings, found {}",
                        type_name(other)
                    )),
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// Whether `name` is a plain XML name (ASCII letters, digits, `_`, `-`, `.`, not starting
/// with a digit, `-` or `.`).
fn xml_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn xml_escape(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

/// A scalar as XML text; containers are refused where only text fits.
fn xml_scalar(v: &Val) -> Result<String, String> {
    match v {
        Val::Null => Ok(String::new()),
        Val::Bool(b) => Ok(b.to_string()),
        Val::Num(n) => Ok(n.to_string()),
        Val::TStr(b) | Val::BStr(b) => Ok(text_of(b)),
        other => Err(format!("expected text, found {}", type_name(other))),
    }
}

fn xml_element(name: &str, v: &Val, out: &mut String, depth: usize) -> Result<(), String> {
    if !xml_name(name) {
        return Err(format!("'{name}' is not an XML element name"));
    }
    if depth > MAX_DOCUMENT_DEPTH {
        return Err(format!("nesting deeper than {MAX_DOCUMENT_DEPTH}"));
    }
    let Val::Obj(map) = v else {
        if matches!(v, Val::Null) {
            let _ = write!(out, "<{name}/>");
            return Ok(());
        }
        let text = xml_scalar(v).map_err(|e| format!("element '{name}': {e}"))?;
        out.push('<');
        out.push_str(name);
        out.push('>');
        xml_escape(&text, out);
        let _ = write!(out, "</{name}>");
        return Ok(());
    };
    out.push('<');
    out.push_str(name);
    let mut text = None;
    let mut children = Vec::new();
    for (key, value) in map.iter() {
        let Val::TStr(key) = key else {
            return Err(format!(
                "XML keys must be strings, found {}",
                type_name(key)
            ));
        };
        let key = text_of(key);
        if let Some(attribute) = key.strip_prefix('@') {
            if !xml_name(attribute) {
                return Err(format!("'{attribute}' is not an XML attribute name"));
            }
            let value = xml_scalar(value).map_err(|e| format!("attribute '{attribute}': {e}"))?;
            let _ = write!(out, " {attribute}=\"");
            xml_escape(&value, out);
            out.push('"');
        } else if key == "#text" {
            text = Some(xml_scalar(value)?);
        } else {
            children.push((key, value));
        }
    }
    out.push('>');
    if let Some(text) = text {
        xml_escape(&text, out);
    }
    for (key, value) in children {
        match value {
            Val::Arr(items) => {
                for item in items.iter() {
                    xml_element(&key, item, out, depth + 1)?;
                }
            }
            other => xml_element(&key, other, out, depth + 1)?,
        }
    }
    let _ = write!(out, "</{name}>");
    Ok(())
}
