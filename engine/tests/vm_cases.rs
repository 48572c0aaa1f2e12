//! The expression VM (`nervix::vm`) against data-driven cases in `data/vm/*.txt`.
//!
//! A file holds blocks:
//! ```text
//! # comment
//! schema: a I64, b STRING OPTIONAL, c F64
//! rows:
//! 1 | 'x' | 1.5
//! 2 | NULL | 2.0
//! expr: a + 1
//! expect: 2, 3
//! ```
//! Values are `NULL`, numbers, `TRUE`/`FALSE`, or `'text'` (STRING, BYTES, and DATETIME as
//! RFC 3339). Each `expr` is type-checked with the engine's checker, compiled with
//! `Program::compile`, evaluated, and its rows rendered (`'text'`, numbers, `true`, `NULL`, or
//! `ERROR message` for a failed row) and joined with `, `. `expect_compile: text` expects a
//! compile error containing `text`. Every case also runs on a sliced copy of the batch (offset
//! 1) and on its first row alone, and must give the same rows.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::*;
use arrow_array::{Array, ArrayRef};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use nervix::nspl::ast::{ExprKind, Ident};
use nervix::nspl::parse_expression;
use nervix::types::{check, DataType, ExprContext, FieldType, Scope};
use nervix::vm::{arrow_type, ColumnSlot, EvalContext, Program};

/// 2026-01-01T00:00:00Z.
const NOW_NS: i64 = 1_767_225_600_000_000_000;

struct Schema {
    fields: Vec<(String, FieldType)>,
}

impl Scope for Schema {
    fn field(&self, path: &[Ident]) -> Result<FieldType, String> {
        let key: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        let key = key.join(".");
        self.fields
            .iter()
            .find(|(n, _)| *n == key)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| format!("unknown field `{key}`"))
    }
}

fn parse_type(text: &str) -> DataType {
    let expr = parse_expression(&format!("NULL AS {text}"))
        .unwrap_or_else(|e| panic!("bad type `{text}`: {e:?}"));
    match expr.kind {
        ExprKind::Cast { ty, .. } => DataType::from_type_name(&ty),
        other => panic!("bad type `{text}`: {other:?}"),
    }
}

fn parse_schema(text: &str) -> Schema {
    let mut fields = Vec::new();
    for part in text.split(',') {
        let words: Vec<&str> = part.split_whitespace().collect();
        let (name, rest) = words.split_first().expect("field name");
        let nullable = rest.contains(&"OPTIONAL");
        let sensitive = rest.contains(&"SENSITIVE");
        let ty: Vec<&str> = rest
            .iter()
            .copied()
            .filter(|w| *w != "OPTIONAL" && *w != "SENSITIVE")
            .collect();
        fields.push((
            name.to_string(),
            FieldType {
                data_type: parse_type(&ty.join(" ")),
                nullable,
                sensitive,
            },
        ));
    }
    Schema { fields }
}

fn unquote(v: &str) -> Option<String> {
    v.strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .map(|s| s.replace("''", "'"))
}

/// One column from its cells; `pad` adds a leading null row (sliced off later).
fn build_column(ty: &DataType, cells: &[&str], pad: bool) -> ArrayRef {
    macro_rules! prim {
        ($b:ty, $t:ty) => {{
            let mut b = <$b>::new();
            if pad {
                b.append_null();
            }
            for c in cells {
                if *c == "NULL" {
                    b.append_null();
                } else {
                    b.append_value(
                        c.parse::<$t>()
                            .unwrap_or_else(|e| panic!("bad cell {c}: {e}")),
                    );
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    match ty {
        DataType::I8 => prim!(Int8Builder, i8),
        DataType::I16 => prim!(Int16Builder, i16),
        DataType::I32 => prim!(Int32Builder, i32),
        DataType::I64 => prim!(Int64Builder, i64),
        DataType::U8 => prim!(UInt8Builder, u8),
        DataType::U16 => prim!(UInt16Builder, u16),
        DataType::U32 => prim!(UInt32Builder, u32),
        DataType::U64 => prim!(UInt64Builder, u64),
        DataType::F32 => prim!(Float32Builder, f32),
        DataType::F64 => prim!(Float64Builder, f64),
        DataType::Bool => {
            let mut b = BooleanBuilder::new();
            if pad {
                b.append_null();
            }
            for c in cells {
                match c.to_ascii_uppercase().as_str() {
                    "NULL" => b.append_null(),
                    "TRUE" => b.append_value(true),
                    "FALSE" => b.append_value(false),
                    other => panic!("bad BOOL {other}"),
                }
            }
            Arc::new(b.finish())
        }
        DataType::String | DataType::Bytes | DataType::Datetime => {
            let texts: Vec<Option<String>> = std::iter::repeat_n(None, usize::from(pad))
                .chain(cells.iter().map(|c| {
                    if *c == "NULL" {
                        None
                    } else {
                        Some(unquote(c).unwrap_or_else(|| panic!("bad text cell {c}")))
                    }
                }))
                .collect();
            match ty {
                DataType::String => Arc::new(arrow_array::StringArray::from(texts)),
                DataType::Bytes => Arc::new(arrow_array::BinaryArray::from(
                    texts
                        .iter()
                        .map(|t| t.as_deref().map(str::as_bytes))
                        .collect::<Vec<_>>(),
                )),
                _ => {
                    let ns: Vec<Option<i64>> = texts
                        .iter()
                        .map(|t| {
                            t.as_deref().map(|t| {
                                chrono::DateTime::parse_from_rfc3339(t)
                                    .unwrap_or_else(|e| panic!("bad datetime {t}: {e}"))
                                    .timestamp_nanos_opt()
                                    .expect("in range")
                            })
                        })
                        .collect();
                    Arc::new(arrow_array::TimestampNanosecondArray::from(ns).with_timezone("UTC"))
                }
            }
        }
        other => panic!("no cells for {other}"),
    }
}

fn render(values: &dyn Array, errors: &HashMap<u32, String>) -> String {
    // Arrow's formatter cannot name the "UTC" zone without chrono-tz: render instants here.
    if let Some(t) = values
        .as_any()
        .downcast_ref::<arrow_array::TimestampNanosecondArray>()
    {
        return (0..t.len())
            .map(|i| match errors.get(&(i as u32)) {
                Some(e) => format!("ERROR {e}"),
                None if t.is_null(i) => "NULL".to_string(),
                None => chrono::DateTime::from_timestamp_nanos(t.value(i))
                    .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            })
            .collect::<Vec<_>>()
            .join(", ");
    }
    let fmt = ArrayFormatter::try_new(values, &FormatOptions::default().with_null("NULL"))
        .expect("formatter");
    let quote = matches!(
        values.data_type(),
        arrow_schema::DataType::Utf8 | arrow_schema::DataType::Binary
    );
    (0..values.len())
        .map(|i| {
            if let Some(e) = errors.get(&(i as u32)) {
                return format!("ERROR {e}");
            }
            let text = fmt.value(i).to_string();
            if quote && values.is_valid(i) {
                let raw = match values.data_type() {
                    arrow_schema::DataType::Binary => String::from_utf8_lossy(
                        values
                            .as_any()
                            .downcast_ref::<arrow_array::BinaryArray>()
                            .expect("binary")
                            .value(i),
                    )
                    .into_owned(),
                    _ => text,
                };
                format!("'{raw}'")
            } else {
                text
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

struct Batch {
    columns: Vec<ArrayRef>,
    num_rows: usize,
}

fn run(program: &Program, batch: &Batch) -> String {
    let sources: [&[ArrayRef]; 1] = [&batch.columns];
    let ctx = EvalContext {
        sources: &sources,
        num_rows: batch.num_rows,
        now_ns: NOW_NS,
        envelope: None,
    };
    let out = program.eval(&ctx);
    assert_eq!(out.values.len(), batch.num_rows, "output length");
    assert_eq!(out.values.data_type(), program.data_type(), "output type");
    let rows: Vec<u32> = out.errors.iter().map(|(r, _)| r).collect();
    assert!(rows.windows(2).all(|w| w[0] < w[1]), "errors ascending");
    for r in &rows {
        assert!(out.values.is_null(*r as usize), "failed row {r} is null");
    }
    let errors: HashMap<u32, String> = out.errors.iter().map(|(r, m)| (r, m.to_string())).collect();
    render(out.values.as_ref(), &errors)
}

#[test]
fn vm_cases() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/vm");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("data dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    let mut cases = 0;
    let mut failures = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        let mut schema = Schema { fields: Vec::new() };
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut in_rows = false;
        let mut expr: Option<(usize, String)> = None;
        for (lineno, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{name}:{}", lineno + 1);
            if let Some(s) = line.strip_prefix("schema:") {
                schema = parse_schema(s);
                rows.clear();
                in_rows = false;
            } else if line == "rows:" {
                in_rows = true;
                rows.clear();
            } else if let Some(e) = line.strip_prefix("expr:") {
                in_rows = false;
                expr = Some((lineno + 1, e.trim().to_string()));
            } else if let Some(want) = line.strip_prefix("expect:") {
                cases += 1;
                let (_, e) = expr
                    .clone()
                    .unwrap_or_else(|| panic!("{at}: expect without expr"));
                if let Err(message) = case(&schema, &rows, &e, Ok(want.trim())) {
                    failures.push(format!("{at}: `{e}`: {message}"));
                }
            } else if let Some(want) = line.strip_prefix("expect_compile:") {
                cases += 1;
                let (_, e) = expr
                    .clone()
                    .unwrap_or_else(|| panic!("{at}: expect without expr"));
                if let Err(message) = case(&schema, &rows, &e, Err(want.trim())) {
                    failures.push(format!("{at}: `{e}`: {message}"));
                }
            } else if in_rows {
                rows.push(line.split('|').map(|c| c.trim().to_string()).collect());
            } else {
                panic!("{at}: cannot read `{line}`");
            }
        }
    }
    println!("{cases} VM cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn case(
    schema: &Schema,
    rows: &[Vec<String>],
    text: &str,
    want: Result<&str, &str>,
) -> Result<(), String> {
    let parsed = parse_expression(text).map_err(|e| format!("parse: {e:?}"))?;
    let typed =
        check(&parsed, schema, &ExprContext::default()).map_err(|e| format!("check: {e}"))?;
    let resolve = |path: &[String]| {
        let key = path.join(".");
        schema
            .fields
            .iter()
            .position(|(n, _)| *n == key)
            .map(|column| ColumnSlot { source: 0, column })
    };
    let program = match (Program::compile(&typed, &resolve), want) {
        (Ok(p), Ok(_)) => p,
        (Err(e), Err(w)) if e.to_string().contains(w) => return Ok(()),
        (Err(e), _) => return Err(format!("compile: {e}")),
        (Ok(_), Err(w)) => return Err(format!("compiled, expected compile error `{w}`")),
    };
    let want = want.unwrap_or_default();
    if program.data_type() != &arrow_type(&typed.ty.data_type) {
        return Err("program type differs from arrow_type".into());
    }
    let cells = |r: &Vec<String>, i: usize| -> String {
        r.get(i).cloned().unwrap_or_else(|| "NULL".into())
    };
    let make = |pad: bool, take: usize| -> Batch {
        let columns = schema
            .fields
            .iter()
            .enumerate()
            .map(|(i, (_, ft))| {
                let col: Vec<String> = rows.iter().take(take).map(|r| cells(r, i)).collect();
                let refs: Vec<&str> = col.iter().map(String::as_str).collect();
                let a = build_column(&ft.data_type, &refs, pad);
                if pad {
                    a.slice(1, refs.len())
                } else {
                    a
                }
            })
            .collect();
        Batch {
            columns,
            num_rows: rows.len().min(take),
        }
    };
    let got = run(&program, &make(false, usize::MAX));
    if got != want {
        return Err(format!("\n  expected: {want}\n  got:      {got}"));
    }
    let sliced = run(&program, &make(true, usize::MAX));
    if sliced != got {
        return Err(format!("sliced input differs:\n  {got}\n  {sliced}"));
    }
    if !rows.is_empty() {
        let first = run(&program, &make(true, 1));
        let expected_first = got.split(", ").next().unwrap_or_default().to_string();
        if !got.contains(", ") && first != expected_first {
            return Err(format!("one-row batch differs: {first}"));
        }
    }
    let empty = run(&program, &make(false, 0));
    if !empty.is_empty() {
        return Err(format!("empty batch gave `{empty}`"));
    }
    Ok(())
}
