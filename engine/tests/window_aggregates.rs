//! Window aggregate accumulators (`nervix::runtime::aggregate`) against data-driven cases in
//! `data/aggregates/*.txt`.
//!
//! A file holds cases:
//! ```text
//! # comment
//! schema: a I64 OPTIONAL, k STRING
//! call: ARG_MAX(input.a, input.k)
//! run: [[1, "x"], [null, "y"]]
//! run: [[3, "a"]]
//! expect: 1
//! ```
//! `schema` declares the `input.` fields (it stays until the next `schema`). Each `run` is one
//! consecutive run of rows as a JSON array; with one field a row is the field's value, with more
//! a row is an array of the fields' values in schema order (`DATETIME` values are RFC 3339
//! strings, `BYTES` hex strings). A case ends with `expect: <JSON>` (the one-row result: numbers, strings, `null`,
//! arrays for `VEC`, instants as RFC 3339, bytes as hex), `expect_near: <number> <tolerance>`, or
//! `expect_error: <text>` (an error from preparing the call or from `finish` containing text).
//!
//! The call is type-checked as a window route's SET would be, prepared with
//! `AggregateCall::from_typed`, and its value arguments are evaluated by the expression VM over
//! one batch holding every run (offset by a leading row, so folds read sliced arrays). The
//! accumulator then folds the runs as written, and again — after `clear` — as one run and as one
//! run per row; all three must meet the expectation, and the result must have the call's
//! result type.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType as Arrow, Field, Schema as ArrowSchema, TimeUnit};
use nervix::nspl::ast::{ExprKind, Ident};
use nervix::nspl::parse_expression;
use nervix::runtime::aggregate::{Accumulator, AggregateCall};
use nervix::types::{check, DataType, ExprContext, FieldType, Scope, TypedExpr, TypedKind};
use nervix::vm::{arrow_type, ColumnSlot, EvalContext, Program};
use serde_json::Value as Json;

/// 2026-01-01T00:00:00Z.
const NOW_NS: i64 = 1_767_225_600_000_000_000;

struct Schema {
    fields: Vec<(String, DataType)>,
}

impl Scope for Schema {
    fn field(&self, path: &[Ident]) -> Result<FieldType, String> {
        let names: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        match names.as_slice() {
            ["input", name] => self
                .fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, ty)| FieldType::optional(ty.clone()))
                .ok_or_else(|| format!("unknown field `input.{name}`")),
            _ => Err(format!("unknown field `{}`", names.join("."))),
        }
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

/// `a I64 OPTIONAL, b STRING` (every field is read as nullable; `OPTIONAL` is accepted).
fn parse_schema(text: &str) -> Schema {
    let mut fields = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    // Split on top-level commas only: `VEC<I64>` has none, `ARRAY<F32, 2>` has one inside.
    for c in text.chars().chain(std::iter::once(',')) {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ',' if depth == 0 => {
                let words: Vec<&str> = current.split_whitespace().collect();
                let (name, rest) = words.split_first().expect("a field name");
                let ty: Vec<&str> = rest.iter().copied().filter(|w| *w != "OPTIONAL").collect();
                fields.push((name.to_string(), parse_type(&ty.join(" "))));
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    Schema { fields }
}

/// The Arrow type arrow-json decodes a field as: instants without their zone (arrow-json
/// cannot name "UTC" without chrono-tz), restored after decoding.
fn decode_type(ty: &DataType) -> Arrow {
    match ty {
        DataType::Datetime => Arrow::Timestamp(TimeUnit::Nanosecond, None),
        other => arrow_type(other),
    }
}

/// One column per field over every row of every run, after one leading all-null row that is
/// sliced off.
fn columns(schema: &Schema, rows: &[Json]) -> Vec<ArrayRef> {
    let fields: Vec<Field> = schema
        .fields
        .iter()
        .map(|(name, ty)| Field::new(name, decode_type(ty), true))
        .collect();
    let arrow_schema = Arc::new(ArrowSchema::new(fields));
    let mut text = String::from("{}\n");
    for row in rows {
        let mut object = serde_json::Map::new();
        if schema.fields.len() == 1 {
            object.insert(schema.fields[0].0.clone(), row.clone());
        } else {
            let cells = row.as_array().expect("a row of several fields is an array");
            for ((name, _), cell) in schema.fields.iter().zip(cells) {
                object.insert(name.clone(), cell.clone());
            }
        }
        text.push_str(&Json::Object(object).to_string());
        text.push('\n');
    }
    let mut decoder = arrow_json::ReaderBuilder::new(arrow_schema.clone())
        .build_decoder()
        .expect("decoder");
    decoder.decode(text.as_bytes()).expect("decode rows");
    let batch: RecordBatch = decoder
        .flush()
        .expect("flush")
        .unwrap_or_else(|| RecordBatch::new_empty(arrow_schema));
    schema
        .fields
        .iter()
        .zip(batch.columns())
        .map(|((_, ty), column)| {
            let column = match ty {
                DataType::Datetime => Arc::new(
                    column
                        .as_any()
                        .downcast_ref::<arrow_array::TimestampNanosecondArray>()
                        .expect("instants")
                        .clone()
                        .with_timezone("UTC"),
                ),
                _ => column.clone(),
            };
            column.slice(1, rows.len())
        })
        .collect()
}

/// The one-row result as JSON.
fn render(array: &dyn Array, row: usize) -> Json {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    if array.is_null(row) {
        return Json::Null;
    }
    macro_rules! number {
        ($t:ty) => {
            Json::from(array.as_primitive::<$t>().value(row))
        };
    }
    match array.data_type() {
        Arrow::Int8 => number!(Int8Type),
        Arrow::Int16 => number!(Int16Type),
        Arrow::Int32 => number!(Int32Type),
        Arrow::Int64 => number!(Int64Type),
        Arrow::UInt8 => number!(UInt8Type),
        Arrow::UInt16 => number!(UInt16Type),
        Arrow::UInt32 => number!(UInt32Type),
        Arrow::UInt64 => number!(UInt64Type),
        Arrow::Float32 => float(f64::from(array.as_primitive::<Float32Type>().value(row))),
        Arrow::Float64 => float(array.as_primitive::<Float64Type>().value(row)),
        Arrow::Boolean => Json::from(array.as_boolean().value(row)),
        Arrow::Utf8 => Json::from(array.as_string::<i32>().value(row)),
        Arrow::Binary => Json::from(
            array
                .as_binary::<i32>()
                .value(row)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
        ),
        Arrow::Timestamp(TimeUnit::Nanosecond, _) => {
            let ns = array.as_primitive::<TimestampNanosecondType>().value(row);
            Json::from(
                chrono::DateTime::from_timestamp_nanos(ns)
                    .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            )
        }
        Arrow::List(_) => {
            let items = array.as_list::<i32>().value(row);
            Json::Array((0..items.len()).map(|i| render(&items, i)).collect())
        }
        Arrow::FixedSizeList(..) => {
            let items = array.as_fixed_size_list().value(row);
            Json::Array((0..items.len()).map(|i| render(&items, i)).collect())
        }
        other => panic!("cannot render {other}"),
    }
}

/// JSON has no NaN or infinities: those render as strings.
fn float(v: f64) -> Json {
    if v.is_finite() {
        Json::from(v)
    } else {
        Json::from(v.to_string())
    }
}

/// Equal JSON, numbers compared by value (an integer result `6` equals an expected `6`, a float
/// result `6.0` equals it too).
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        _ => a == b,
    }
}

enum Expect {
    Exactly(Json),
    Near(f64, f64),
    Error(String),
}

struct Case {
    call: String,
    runs: Vec<Vec<Json>>,
    expect: Expect,
}

/// The aggregate node of a checked call (the call may sit inside a scalar expression).
fn find_aggregate(node: &TypedExpr) -> Option<&TypedExpr> {
    if let TypedKind::Aggregate { .. } = node.kind {
        return Some(node);
    }
    match &node.kind {
        TypedKind::Binary { left, right, .. } => {
            find_aggregate(left).or_else(|| find_aggregate(right))
        }
        TypedKind::Unary { expr, .. } | TypedKind::Cast { expr, .. } => find_aggregate(expr),
        TypedKind::Call { args, .. } => args.iter().find_map(find_aggregate),
        _ => None,
    }
}

fn check_result(got: Result<Json, String>, expect: &Expect) -> Result<(), String> {
    match (got, expect) {
        (Ok(got), Expect::Exactly(want)) if same(&got, want) => Ok(()),
        (Ok(Json::Number(got)), Expect::Near(want, tolerance))
            if got.as_f64().is_some_and(|g| (g - want).abs() <= *tolerance) =>
        {
            Ok(())
        }
        (Err(error), Expect::Error(want)) if error.contains(want.as_str()) => Ok(()),
        (got, _) => Err(format!("got {got:?}")),
    }
}

fn run_case(schema: &Schema, case: &Case) -> Result<(), String> {
    let parsed = parse_expression(&case.call).map_err(|e| format!("parse: {e:?}"))?;
    let ctx = ExprContext {
        aggregates: true,
        aggregate_arguments_read_input: true,
        ..ExprContext::default()
    };
    let typed = check(&parsed, schema, &ctx).map_err(|e| format!("check: {e}"))?;
    let node = find_aggregate(&typed).ok_or("no aggregate in the call")?;
    let call = match AggregateCall::from_typed(node) {
        Ok(call) => call,
        Err(error) => return check_result(Err(error.to_string()), &case.expect),
    };
    if call.result_type() != &arrow_type(&node.ty.data_type) {
        return Err(format!(
            "result type {} differs from the node's",
            call.result_type()
        ));
    }
    let TypedKind::Aggregate { args, .. } = &node.kind else {
        return Err("not an aggregate".into());
    };

    let rows: Vec<Json> = case.runs.iter().flatten().cloned().collect();
    let columns = columns(schema, &rows);
    let resolve = |path: &[String]| match path {
        [scope, name] if scope == "input" => schema
            .fields
            .iter()
            .position(|(n, _)| n == name)
            .map(|column| ColumnSlot { source: 0, column }),
        _ => None,
    };
    let sources: [&[ArrayRef]; 1] = [&columns];
    let eval = EvalContext {
        sources: &sources,
        num_rows: rows.len(),
        now_ns: NOW_NS,
        envelope: None,
    };
    let mut values = Vec::new();
    for index in call.value_args() {
        let program = Program::compile(&args[*index], &resolve).map_err(|e| format!("{e}"))?;
        let out = program.eval(&eval);
        if let Some((row, message)) = out.errors.iter().next() {
            return Err(format!("argument {index} failed at row {row}: {message}"));
        }
        values.push(out.values);
    }

    let mut runs = Vec::new();
    let mut start = 0;
    for run in &case.runs {
        runs.push(start..start + run.len());
        start += run.len();
    }
    let groupings = [
        ("as written", runs),
        ("as one run", std::iter::once(0..rows.len()).collect()),
        ("row by row", (0..rows.len()).map(|r| r..r + 1).collect()),
    ];
    // Row i is timed i: the case's rows are in time order as written.
    let times: Vec<i64> = (0..rows.len() as i64).collect();
    let mut accumulator = Accumulator::new(&call);
    for (grouping, runs) in groupings {
        accumulator.clear();
        for run in runs {
            accumulator.fold(&values, &times, run);
        }
        if accumulator.reserved_bytes() == 0 {
            return Err("no reserved bytes".into());
        }
        let got = match accumulator.finish() {
            Ok(value) => {
                let array = value.into_array();
                if array.len() != 1 || array.data_type() != call.result_type() {
                    return Err(format!(
                        "{grouping}: result {array:?} is not one row of the type"
                    ));
                }
                Ok(render(array.as_ref(), 0))
            }
            Err(error) => Err(error.to_string()),
        };
        check_result(got, &case.expect).map_err(|e| format!("{grouping}: {e}"))?;
    }
    Ok(())
}

#[test]
fn window_aggregate_cases() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/aggregates");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("data dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    let mut cases = 0;
    let mut failures = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        let mut schema = Schema { fields: Vec::new() };
        let mut call: Option<String> = None;
        let mut runs: Vec<Vec<Json>> = Vec::new();
        for (lineno, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{name}:{}", lineno + 1);
            let (key, rest) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("{at}: `{line}`"));
            let rest = rest.trim();
            let expect = match key {
                "schema" => {
                    schema = parse_schema(rest);
                    continue;
                }
                "call" => {
                    call = Some(rest.to_string());
                    runs.clear();
                    continue;
                }
                "run" => {
                    let run: Json =
                        serde_json::from_str(rest).unwrap_or_else(|e| panic!("{at}: bad run: {e}"));
                    runs.push(
                        run.as_array()
                            .unwrap_or_else(|| panic!("{at}: not an array"))
                            .clone(),
                    );
                    continue;
                }
                "expect" => Expect::Exactly(
                    serde_json::from_str(rest).unwrap_or_else(|e| panic!("{at}: bad JSON: {e}")),
                ),
                "expect_near" => {
                    let (value, tolerance) = rest.split_once(' ').expect("value and tolerance");
                    Expect::Near(
                        value.parse().expect("a number"),
                        tolerance.trim().parse().expect("a tolerance"),
                    )
                }
                "expect_error" => Expect::Error(rest.to_string()),
                other => panic!("{at}: unknown key `{other}`"),
            };
            let text = call
                .clone()
                .unwrap_or_else(|| panic!("{at}: expect without call"));
            if let Some((aggregate, _)) = text.split_once('(') {
                covered.insert(aggregate.trim().to_ascii_uppercase());
            }
            cases += 1;
            let case = Case {
                call: text.clone(),
                runs: std::mem::take(&mut runs),
                expect,
            };
            if let Err(message) = run_case(&schema, &case) {
                failures.push(format!("{at}: `{text}`: {message}"));
            }
        }
    }
    println!("{cases} window aggregate cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let missing: Vec<&str> = nervix::types::Aggregate::ALL
        .iter()
        .map(|a| a.name())
        .filter(|name| !covered.contains(*name))
        .collect();
    assert!(missing.is_empty(), "no case calls {missing:?}");
}

/// The prepared call of `text` over `schema`.
fn prepare(schema: &str, text: &str) -> AggregateCall {
    let schema = parse_schema(schema);
    let parsed = parse_expression(text).expect("parses");
    let ctx = ExprContext {
        aggregates: true,
        aggregate_arguments_read_input: true,
        ..ExprContext::default()
    };
    let typed = check(&parsed, &schema, &ctx).expect("checks");
    AggregateCall::from_typed(find_aggregate(&typed).expect("an aggregate")).expect("prepares")
}

#[test]
fn literal_parameters_are_not_value_arguments() {
    let call = prepare(
        "x F64",
        "PERCENTILE_LINEAR_HISTOGRAM(input.x, 90, -1, 1, 200)",
    );
    assert_eq!(call.value_args(), &[0]);
    assert_eq!(call.arg_types(), &[Arrow::Float64]);
    let call = prepare("s STRING", "APPROX_TOP_K(input.s, 10)");
    assert_eq!(call.value_args(), &[0]);
    assert_eq!(call.result_type(), &arrow_type(&parse_type("VEC<STRING>")));
    let call = prepare("v STRING, k I64", "ARG_MAX(input.v, input.k)");
    assert_eq!(call.value_args(), &[0, 1]);
}

#[test]
fn a_scalar_expression_is_not_an_aggregate_call() {
    let schema = parse_schema("a I64");
    let parsed = parse_expression("input.a + 1").expect("parses");
    let ctx = ExprContext {
        aggregates: true,
        ..ExprContext::default()
    };
    let typed = check(&parsed, &schema, &ctx).expect("checks");
    let error = AggregateCall::from_typed(&typed).expect_err("refused");
    assert_eq!(
        error.to_string(),
        "expected a window aggregate call, found another expression"
    );
}

#[test]
fn mismatched_arguments_fold_nothing_and_fail_until_cleared() {
    let call = prepare("a I64", "SUM(input.a)");
    let mut accumulator = Accumulator::new(&call);
    let wrong: ArrayRef = Arc::new(arrow_array::Int32Array::from(vec![1, 2]));
    accumulator.fold(&[wrong], &[0, 1], 0..2);
    let error = accumulator.finish().expect_err("a fault");
    assert_eq!(
        error.to_string(),
        "SUM was folded with arguments that do not match the call: argument 0 is Int32, \
         expected Int64"
    );
    let right: ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1, 2]));
    accumulator.fold(std::slice::from_ref(&right), &[0, 1], 0..2);
    assert!(accumulator.finish().is_err(), "a fault sticks until clear");
    accumulator.clear();
    accumulator.fold(std::slice::from_ref(&right), &[0, 1], 1..3);
    let error = accumulator.finish().expect_err("out of range");
    assert!(error
        .to_string()
        .contains("rows 1..3 of argument 0, which has 2 rows"));
    accumulator.clear();
    accumulator.fold(&[right], &[0, 1], 0..2);
    let sum = accumulator.finish().expect("a sum").into_array();
    assert_eq!(render(sum.as_ref(), 0), Json::from(3));
}

#[test]
fn sketches_report_their_full_reservation_from_the_start() {
    use nervix::runtime::aggregate::*;
    let reserved =
        |schema: &str, text: &str| Accumulator::new(&prepare(schema, text)).reserved_bytes();
    let plain = reserved("a I64", "COUNT(input.a)");
    assert!(reserved("s STRING", "APPROX_COUNT_DISTINCT(input.s)") >= plain + HLL_REGISTERS);
    assert!(
        reserved("x F64", "APPROX_QUANTILE(input.x, 0.5)")
            >= plain + quantile_capacity_items() * std::mem::size_of::<f64>()
    );
    assert!(
        reserved(
            "x F64",
            "PERCENTILE_LINEAR_HISTOGRAM(input.x, 50, 0, 1, 65536)"
        ) >= plain + 65_536 * std::mem::size_of::<u64>()
    );
    let top = reserved("i I64", "APPROX_TOP_K(input.i, 1000)");
    assert!(top >= plain + top_k_slots(1000) * 2 * std::mem::size_of::<u64>());
    // Folding does not grow a sketch's reservation.
    let call = prepare("x F64", "APPROX_QUANTILE(input.x, 0.5)");
    let mut accumulator = Accumulator::new(&call);
    let before = accumulator.reserved_bytes();
    let values: ArrayRef = Arc::new(arrow_array::Float64Array::from_iter_values(
        (0..200_000).map(f64::from),
    ));
    accumulator.fold(&[values], &vec![0; 200_000], 0..200_000);
    assert_eq!(accumulator.reserved_bytes(), before);
}
