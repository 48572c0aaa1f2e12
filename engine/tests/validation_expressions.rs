//! The expression type checker (`nervix::types`) against a table of cases.
//!
//! `data/expressions/cases.txt` holds one case per line:
//! `expression | scope fields | context | expected`, where
//! * scope fields are `;`-separated `path TYPE [OPTIONAL] [SENSITIVE]` (`-` for none);
//! * context is `,`-separated flags (`-` for none): `agg` (aggregates allowed), `window`
//!   (aggregates, and `input.` only inside aggregate arguments), `headers` (read_header
//!   available; otherwise refused as an MQTT TOPIC ingestor refuses it), `const`
//!   (constant_only), `write` (write_header allowed), `expect=TYPE` (check against an expected
//!   type);
//! * expected is the result type as NSPL spells it (`STRING OPTIONAL SENSITIVE`), or `! message`
//!   for an exact error message, optionally followed by ` ^ text` naming the source text the
//!   error's span covers, or `!~ text` for an error whose message contains `text`.
//!
//! Besides the table: every registered function and aggregate has a passing case, no call shape
//! panics, deep trees are refused rather than overflowing, and the typed tree has the structure
//! the VM relies on.

use std::collections::HashMap;

use nervix::nspl::ast::{ExprKind, Ident};
use nervix::nspl::parse_expression;
use nervix::types::{
    check, check_expecting, Aggregate, DataType, ExprContext, FieldType, Function, Scope,
    TypedKind, Value, MAX_EXPRESSION_DEPTH,
};

const CASES: &str = include_str!("data/expressions/cases.txt");

/// The refusal the table's contexts use when `headers` is not set.
const NO_HEADERS: &str = "MQTT TOPIC ingestors do not support read_header or read_headers";

struct TableScope(HashMap<String, FieldType>);

impl Scope for TableScope {
    fn field(&self, path: &[Ident]) -> Result<FieldType, String> {
        let key: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        let key = key.join(".");
        self.0
            .get(&key)
            .cloned()
            .ok_or_else(|| format!("unknown field `{key}`"))
    }
}

fn parse_type(text: &str) -> DataType {
    let expr = parse_expression(&format!("NULL AS {text}"))
        .unwrap_or_else(|e| panic!("bad type `{text}` in the table: {e:?}"));
    match expr.kind {
        ExprKind::Cast { ty, .. } => DataType::from_type_name(&ty),
        other => panic!("bad type `{text}`: {other:?}"),
    }
}

fn parse_field_type(text: &str) -> FieldType {
    let mut words: Vec<&str> = text.split_whitespace().collect();
    let mut nullable = false;
    let mut sensitive = false;
    while let Some(last) = words.last() {
        match *last {
            "OPTIONAL" => nullable = true,
            "SENSITIVE" => sensitive = true,
            _ => break,
        }
        words.pop();
    }
    FieldType {
        data_type: parse_type(&words.join(" ")),
        nullable,
        sensitive,
    }
}

fn parse_scope(text: &str) -> TableScope {
    let mut fields = HashMap::new();
    if text != "-" {
        for entry in text.split(';') {
            let entry = entry.trim();
            let (path, ty) = entry
                .split_once(' ')
                .unwrap_or_else(|| panic!("bad scope entry `{entry}`"));
            fields.insert(path.to_string(), parse_field_type(ty));
        }
    }
    TableScope(fields)
}

fn parse_context(text: &str) -> (ExprContext, Option<DataType>) {
    let mut ctx = ExprContext {
        headers: Err(NO_HEADERS.to_string()),
        ..ExprContext::default()
    };
    let mut expected = None;
    if text == "-" {
        return (ctx, expected);
    }
    for flag in text.split(',').map(str::trim) {
        match flag {
            "agg" => ctx.aggregates = true,
            "window" => {
                ctx.aggregates = true;
                ctx.aggregate_arguments_read_input = true;
            }
            "headers" => ctx.headers = Ok(()),
            "const" => ctx.constant_only = true,
            "write" => ctx.write_header = true,
            other => match other.strip_prefix("expect=") {
                Some(ty) => expected = Some(parse_type(ty)),
                None => panic!("unknown context flag `{other}`"),
            },
        }
    }
    (ctx, expected)
}

struct Case {
    line: usize,
    expression: String,
    scope: String,
    context: String,
    expected: String,
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (i, raw) in CASES.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let columns: Vec<&str> = line.split(" | ").map(str::trim).collect();
        let [expression, scope, context, expected] = columns[..] else {
            panic!(
                "line {}: expected 4 columns, found {}",
                i + 1,
                columns.len()
            );
        };
        cases.push(Case {
            line: i + 1,
            expression: expression.to_string(),
            scope: scope.to_string(),
            context: context.to_string(),
            expected: expected.to_string(),
        });
    }
    cases
}

/// The outcome of one case: `Ok(type)` or `Err((message, covered source text))`.
fn run(case: &Case) -> Result<String, (String, String)> {
    let expr = parse_expression(&case.expression)
        .unwrap_or_else(|e| panic!("line {}: does not parse: {e:?}", case.line));
    let scope = parse_scope(&case.scope);
    let (ctx, expected) = parse_context(&case.context);
    let result = match &expected {
        Some(t) => check_expecting(&expr, &scope, &ctx, t),
        None => check(&expr, &scope, &ctx),
    };
    match result {
        Ok(typed) => Ok(typed.ty.to_string()),
        Err(e) => {
            let covered = case
                .expression
                .get(e.span.start as usize..e.span.end as usize)
                .unwrap_or("<span outside the text>")
                .to_string();
            Err((e.message, covered))
        }
    }
}

#[test]
fn table_cases_hold() {
    let cases = cases();
    assert!(cases.len() >= 60, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let outcome = run(case);
        let ok = match (case.expected.strip_prefix("! "), &outcome) {
            (None, Err((message, _))) if case.expected.starts_with("!~ ") => {
                message.contains(&case.expected["!~ ".len()..])
            }
            (Some(want), Err((message, covered))) => match want.split_once(" ^ ") {
                Some((want_message, want_span)) => message == want_message && covered == want_span,
                None => message == want,
            },
            (None, Ok(ty)) => *ty == case.expected,
            _ => false,
        };
        if !ok {
            let got = match &outcome {
                Ok(ty) => ty.clone(),
                Err((message, covered)) => format!("! {message} ^ {covered}"),
            };
            failures.push(format!(
                "line {}: `{}`\n    expected: {}\n    got:      {got}",
                case.line, case.expression, case.expected
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Whether a passing case calls `name` (case-insensitively).
fn has_passing_case(cases: &[Case], name: &str) -> bool {
    let call = format!("{}(", name.to_ascii_lowercase());
    cases.iter().any(|c| {
        !c.expected.starts_with('!')
            && c.expression
                .to_ascii_lowercase()
                .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == '('))
                .any(|word| word.starts_with(&call))
    })
}

#[test]
fn every_registered_function_and_aggregate_has_a_passing_case() {
    let cases = cases();
    let missing: Vec<&str> = Function::ALL
        .iter()
        .map(|f| f.name())
        .chain(Aggregate::ALL.iter().map(|a| a.name()))
        .filter(|name| !has_passing_case(&cases, name))
        .collect();
    assert!(missing.is_empty(), "no passing case calls {missing:?}");
}

#[test]
fn no_call_shape_panics() {
    let args = ["1", "-2.5", "'s'", "NULL", "b", "ts", "v", "o"];
    let scope = parse_scope("b BOOL; ts DATETIME; v VEC<I64>; o I32 OPTIONAL SENSITIVE");
    let contexts = [
        ExprContext::default(),
        ExprContext {
            aggregates: true,
            aggregate_arguments_read_input: true,
            headers: Ok(()),
            constant_only: false,
            write_header: true,
        },
        ExprContext {
            constant_only: true,
            ..ExprContext::default()
        },
    ];
    let names = Function::ALL
        .iter()
        .map(|f| f.name())
        .chain(Aggregate::ALL.iter().map(|a| a.name()));
    let mut checked = 0usize;
    for name in names {
        let mut shapes: Vec<Vec<&str>> = vec![vec![]];
        // Every shape of up to 3 arguments, and longer ones (up to 5) that vary only the first
        // and last argument.
        for _ in 0..5 {
            let longer: Vec<Vec<&str>> = shapes
                .iter()
                .filter(|s| s.len() < 3 || s[1..].iter().all(|a| *a == "1"))
                .flat_map(|s| {
                    args.iter().map(move |a| {
                        let mut s = s.clone();
                        s.push(a);
                        s
                    })
                })
                .collect();
            shapes.extend(longer);
            shapes.sort();
            shapes.dedup();
        }
        for shape in &shapes {
            let text = format!("{name}({})", shape.join(", "));
            let expr = parse_expression(&text).expect("call shapes parse");
            for ctx in &contexts {
                // Only the absence of a panic matters here.
                let _ = check(&expr, &scope, ctx);
                checked += 1;
            }
        }
    }
    assert!(checked > 10_000, "checked {checked}");
}

#[test]
fn deep_trees_are_refused_not_overflowed() {
    let scope = parse_scope("x I64");
    let ctx = ExprContext::default();
    let within = format!("x{}", " + 1".repeat(MAX_EXPRESSION_DEPTH as usize - 2));
    let typed = check(&parse_expression(&within).expect("parses"), &scope, &ctx);
    assert_eq!(typed.map(|t| t.ty.to_string()), Ok("I64".to_string()));

    // The parser builds operator chains in a loop, so they can exceed its nesting bound.
    let chain = format!("x{}", " + 1".repeat(5_000));
    let err =
        check(&parse_expression(&chain).expect("parses"), &scope, &ctx).expect_err("too deep");
    assert!(
        err.message.starts_with("expression nested too deeply"),
        "{}",
        err.message
    );
}

#[test]
fn typed_tree_records_resolved_types_and_identities() {
    let scope = parse_scope("input.latency I32 OPTIONAL; input.name STRING SENSITIVE");
    let ctx = ExprContext {
        aggregates: true,
        ..ExprContext::default()
    };
    let expr = parse_expression("input.latency >= -5 AND lower(input.name) = 'a'").expect("parses");
    let typed = check(&expr, &scope, &ctx).expect("checks");
    assert_eq!(
        typed.ty,
        FieldType {
            data_type: DataType::Bool,
            nullable: true,
            sensitive: true,
        }
    );
    let TypedKind::Binary { left, right, .. } = &typed.kind else {
        panic!("AND is binary: {typed:?}");
    };
    let TypedKind::Binary { right: literal, .. } = &left.kind else {
        panic!(">= is binary");
    };
    assert_eq!(literal.kind, TypedKind::Literal(Value::Int(-5)));
    assert_eq!(literal.ty, FieldType::required(DataType::I32));
    let TypedKind::Binary { left: call, .. } = &right.kind else {
        panic!("= is binary");
    };
    assert!(matches!(
        &call.kind,
        TypedKind::Call { function: Function::Lower, args } if args.len() == 1
    ));

    let expr = parse_expression("COUNT(input.latency) + 1").expect("parses");
    let typed = check(&expr, &scope, &ctx).expect("checks");
    assert!(typed.has_aggregate());
    let TypedKind::Binary { left, right, .. } = &typed.kind else {
        panic!("+ is binary");
    };
    assert!(matches!(
        left.kind,
        TypedKind::Aggregate {
            aggregate: Aggregate::Count,
            ..
        }
    ));
    assert_eq!(right.kind, TypedKind::Literal(Value::Int(1)));

    let expr = parse_expression("date_bin('15m', now())").expect("parses");
    let typed = check(&expr, &scope, &ctx).expect("checks");
    let TypedKind::Call { args, .. } = &typed.kind else {
        panic!("date_bin is a call");
    };
    assert_eq!(
        args[0].kind,
        TypedKind::Literal(Value::Int(900_000_000_000))
    );
}

#[test]
fn display_spells_types_as_nspl() {
    assert_eq!(parse_type("ARRAY<F32, 2>").to_string(), "ARRAY<F32, 2>");
    assert_eq!(parse_type("ARRAY<F32,2,3>").to_string(), "ARRAY<F32, 2, 3>");
    assert_eq!(parse_type("VEC<I64>").to_string(), "VEC<I64>");
    assert_eq!(parse_type("LIST<STRING>").to_string(), "LIST<STRING>");
    assert_eq!(parse_type("INT64").to_string(), "I64");
    assert_eq!(parse_type("TIMESTAMP").to_string(), "DATETIME");
}
