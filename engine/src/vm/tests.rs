//! Unit tests of the VM's public surface: sliced batches, errors, predicates, compile errors.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, StringArray};
use nervix_nspl::parse_expression;

use super::*;
use crate::types::{check, DataType, ExprContext, FieldType, Scope};

struct Fields(Vec<(&'static str, FieldType)>);

impl Scope for Fields {
    fn field(&self, path: &[nervix_nspl::ast::Ident]) -> Result<FieldType, String> {
        let key: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        let key = key.join(".");
        self.0
            .iter()
            .find(|(n, _)| *n == key)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| format!("unknown field `{key}`"))
    }
}

fn program(text: &str) -> Program {
    let scope = Fields(vec![
        ("a", FieldType::optional(DataType::I64)),
        ("s", FieldType::optional(DataType::String)),
    ]);
    let expr = parse_expression(text).expect("parse");
    let typed = check(&expr, &scope, &ExprContext::default()).expect("check");
    Program::compile(&typed, &|path: &[String]| match path.join(".").as_str() {
        "a" => Some(ColumnSlot {
            source: 0,
            column: 0,
        }),
        "s" => Some(ColumnSlot {
            source: 0,
            column: 1,
        }),
        _ => None,
    })
    .expect("compile")
}

fn eval_on(p: &Program, columns: &[ArrayRef]) -> Evaluated {
    let n = columns.first().map_or(0, |c| c.len());
    let sources: [&[ArrayRef]; 1] = [columns];
    p.eval(&EvalContext {
        sources: &sources,
        num_rows: n,
        now_ns: 0,
        envelope: None,
    })
}

const EXPRESSIONS: &[&str] = &[
    "a + 1",
    "10 / a",
    "upper(s)",
    "lower(s) || '!'",
    "contains(s, 'b')",
    "starts_with(s, 'a')",
    "ends_with(s, 'c')",
    "substr(s, 2, 2)",
    "IF a > 1 THEN s ELSE 'none' END",
    "CASE WHEN a = 0 THEN 'zero' WHEN 10 / a > 2 THEN 'big' END",
    "coalesce(s, 'd')",
    "a IN (1, 2, NULL)",
    "s AS I64",
    "length(s) + a",
    "regexp_replace(s, '[a-z]', 'X', 'g')",
];

#[test]
fn sliced_batches_give_the_same_results() {
    let a: ArrayRef = Arc::new(Int64Array::from(vec![
        Some(7),
        Some(0),
        None,
        Some(3),
        Some(1),
        Some(9),
    ]));
    let s: ArrayRef = Arc::new(StringArray::from(vec![
        Some("zz"),
        Some("abc"),
        None,
        Some("ÉbÇ"),
        Some("12"),
        Some("qq"),
    ]));
    let (offset, len) = (1, 4);
    let sliced = [a.slice(offset, len), s.slice(offset, len)];
    let fresh: [ArrayRef; 2] = [
        Arc::new(Int64Array::from(vec![Some(0), None, Some(3), Some(1)])),
        Arc::new(StringArray::from(vec![
            Some("abc"),
            None,
            Some("ÉbÇ"),
            Some("12"),
        ])),
    ];
    for text in EXPRESSIONS {
        let p = program(text);
        let x = eval_on(&p, &sliced);
        let y = eval_on(&p, &fresh);
        assert_eq!(x.values.to_data(), y.values.to_data(), "{text}");
        assert_eq!(x.errors, y.errors, "{text}");
    }
}

#[test]
fn empty_and_all_null_batches() {
    for text in EXPRESSIONS {
        let p = program(text);
        let empty = eval_on(
            &p,
            &[
                Arc::new(Int64Array::from(Vec::<i64>::new())),
                Arc::new(StringArray::from(Vec::<&str>::new())),
            ],
        );
        assert_eq!(empty.values.len(), 0, "{text}");
        let nulls = eval_on(
            &p,
            &[
                Arc::new(Int64Array::from(vec![None, None])),
                Arc::new(StringArray::from(vec![None::<&str>, None])),
            ],
        );
        assert_eq!(nulls.values.len(), 2, "{text}");
    }
}

#[test]
fn wrong_or_missing_columns_fail_rows_without_panicking() {
    let p = program("a + 1");
    let wrong: [ArrayRef; 2] = [
        Arc::new(StringArray::from(vec!["x", "y"])),
        Arc::new(StringArray::from(vec!["x", "y"])),
    ];
    let out = eval_on(&p, &wrong);
    assert_eq!(out.errors.len(), 2);
    let sources: [&[ArrayRef]; 0] = [];
    let out = p.eval(&EvalContext {
        sources: &sources,
        num_rows: 3,
        now_ns: 0,
        envelope: None,
    });
    assert_eq!(out.values.len(), 3);
    assert_eq!(out.errors.len(), 3);
}

#[test]
fn predicate_masks_nulls_and_errors() {
    let p = program("10 / a > 2");
    let cols: [ArrayRef; 2] = [
        Arc::new(Int64Array::from(vec![Some(1), Some(0), None, Some(5)])),
        Arc::new(StringArray::from(vec!["", "", "", ""])),
    ];
    let sources: [&[ArrayRef]; 1] = [&cols];
    let (mask, errors) = eval_predicate(
        &p,
        &EvalContext {
            sources: &sources,
            num_rows: 4,
            now_ns: 0,
            envelope: None,
        },
    );
    assert_eq!(mask, BooleanArray::from(vec![true, false, false, false]));
    let listed: Vec<(u32, &str)> = errors.iter().collect();
    assert_eq!(listed, vec![(1, "division by zero")]);
    assert_eq!(
        errors.mask(4),
        BooleanArray::from(vec![false, true, false, false])
    );
}

#[test]
fn compile_errors_name_what_failed() {
    let scope = Fields(vec![("x", FieldType::required(DataType::I64))]);
    let expr = parse_expression("x + 1").expect("parse");
    let typed = check(&expr, &scope, &ExprContext::default()).expect("check");
    let err = Program::compile(&typed, &|_: &[String]| None).expect_err("unknown");
    assert_eq!(err, VmError::UnknownField { path: "x".into() });
}

#[test]
fn programs_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Program>();
}

#[test]
fn arrow_types_follow_design() {
    use arrow_schema::DataType as A;
    assert_eq!(
        arrow_type(&DataType::Datetime),
        A::Timestamp(arrow_schema::TimeUnit::Nanosecond, Some("UTC".into()))
    );
    let nested = arrow_type(&DataType::Array(Box::new(DataType::F32), vec![2, 3]));
    let A::FixedSizeList(outer, 2) = nested else {
        panic!("outer {nested:?}")
    };
    assert!(
        matches!(outer.data_type(), A::FixedSizeList(inner, 3) if inner.data_type() == &A::Float32 && inner.name() == "item")
    );
    let list = arrow_type(&DataType::Vec(Box::new(DataType::I64)));
    assert!(matches!(list, A::List(item) if item.is_nullable() && item.name() == "item"));
}

#[test]
fn deepest_checked_trees_compile_and_evaluate() {
    // A left-deep chain as deep as the checker accepts, on a default-sized test thread.
    let mut text = String::from("a");
    for _ in 0..(crate::types::MAX_EXPRESSION_DEPTH - 2) {
        text.push_str(" + 1");
    }
    let p = program(&text);
    let out = eval_on(
        &p,
        &[
            Arc::new(Int64Array::from(vec![Some(1), None])),
            Arc::new(StringArray::from(vec!["", ""])),
        ],
    );
    let values = out
        .values
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("I64");
    assert_eq!(
        values.value(0),
        i64::from(crate::types::MAX_EXPRESSION_DEPTH) - 1
    );
    assert!(values.is_null(1));
    let mut nested = String::from("a");
    for _ in 0..100 {
        nested = format!("IF {nested} > 0 THEN {nested} ELSE 0 END");
        if nested.len() > 4000 {
            break;
        }
    }
    let _ = program(&nested);
}

/// A program where `read_header` / `read_headers` are allowed.
fn header_program(text: &str) -> Program {
    let scope = Fields(vec![
        ("a", FieldType::optional(DataType::I64)),
        ("s", FieldType::optional(DataType::String)),
    ]);
    let expr = parse_expression(text).expect("parse");
    let context = ExprContext {
        headers: Ok(()),
        ..ExprContext::default()
    };
    let typed = check(&expr, &scope, &context).expect("check");
    Program::compile(&typed, &|path: &[String]| match path.join(".").as_str() {
        "s" => Some(ColumnSlot {
            source: 0,
            column: 1,
        }),
        _ => None,
    })
    .expect("compile")
}

/// Two payloads: 0 has `X-Tenant: a`, `x-tag: 1`, `X-TAG: 2`; 1 has `x-tenant: b`.
fn header_table(rule: NameRule) -> Arc<HeaderTable> {
    let mut table = HeaderTable::new(rule);
    table.push("X-Tenant", "a");
    table.push("x-tag", "1");
    table.push("X-TAG", "2");
    table.close_payload();
    table.push("discarded", "x");
    table.discard_open();
    table.push("x-tenant", "b");
    table.close_payload();
    Arc::new(table)
}

fn eval_with_envelope(
    p: &Program,
    names: &[Option<&str>],
    payloads: &[u32],
    rule: NameRule,
) -> Evaluated {
    let columns: [ArrayRef; 2] = [
        Arc::new(Int64Array::from(vec![0; names.len()])),
        Arc::new(StringArray::from(names.to_vec())),
    ];
    let view = EnvelopeView::new(
        header_table(rule),
        arrow_array::UInt32Array::from(payloads.to_vec()),
        Vec::new(),
    );
    let sources: [&[ArrayRef]; 1] = [&columns];
    p.eval(&EvalContext {
        sources: &sources,
        num_rows: names.len(),
        now_ns: 0,
        envelope: Some(&view),
    })
}

#[test]
fn read_header_reads_each_rows_payload() {
    let p = header_program("read_header('x-tenant')");
    assert!(p.reads_headers());
    let rows = [Some(""), Some(""), Some(""), Some("")];
    let out = eval_with_envelope(&p, &rows, &[0, 0, 1, 7], NameRule::AsciiCaseInsensitive);
    assert!(out.errors.is_empty());
    let values = out
        .values
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("STRING");
    let got: Vec<Option<&str>> = values.iter().collect();
    // Payload 7 does not exist: no headers, so NULL.
    assert_eq!(got, vec![Some("a"), Some("a"), Some("b"), None]);
    // Exact names: `x-tenant` is not `X-Tenant`.
    let out = eval_with_envelope(&p, &rows, &[0, 1, 0, 1], NameRule::Exact);
    let values = out
        .values
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("STRING");
    let got: Vec<Option<&str>> = values.iter().collect();
    assert_eq!(got, vec![None, Some("b"), None, Some("b")]);
}

#[test]
fn read_header_takes_a_per_row_name() {
    let p = header_program("read_header(lower(s))");
    let names = [Some("X-TENANT"), Some("x-tag"), None, Some("x-tag")];
    let out = eval_with_envelope(&p, &names, &[0, 0, 0, 1], NameRule::AsciiCaseInsensitive);
    assert!(out.errors.is_empty());
    let values = out
        .values
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("STRING");
    let got: Vec<Option<&str>> = values.iter().collect();
    assert_eq!(got, vec![Some("a"), Some("1"), None, None]);
}

#[test]
fn read_headers_lists_every_value_in_order() {
    let p = header_program("read_headers('X-Tag')");
    let rows = [Some(""), Some(""), Some("")];
    let out = eval_with_envelope(&p, &rows, &[0, 0, 1], NameRule::AsciiCaseInsensitive);
    assert!(out.errors.is_empty());
    assert_eq!(
        out.values.data_type(),
        &arrow_type(&DataType::List(Box::new(DataType::String)))
    );
    let lists = out
        .values
        .as_any()
        .downcast_ref::<arrow_array::ListArray>()
        .expect("LIST");
    let row = |i: usize| -> Vec<String> {
        let values = lists.value(i);
        let values = values
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("STRING");
        values.iter().map(|v| v.unwrap_or("").to_string()).collect()
    };
    assert_eq!(row(0), ["1", "2"]);
    assert_eq!(row(1), ["1", "2"]);
    // Absent: an empty list, never NULL.
    assert!(row(2).is_empty());
    assert_eq!(lists.null_count(), 0);
    // A per-row name, NULL name → empty list.
    let p = header_program("read_headers(s)");
    let names = [Some("x-tag"), None, Some("x-tenant")];
    let out = eval_with_envelope(&p, &names, &[0, 0, 1], NameRule::AsciiCaseInsensitive);
    let lists = out
        .values
        .as_any()
        .downcast_ref::<arrow_array::ListArray>()
        .expect("LIST");
    assert_eq!(lists.value(0).len(), 2);
    assert_eq!(lists.value(1).len(), 0);
    assert_eq!(lists.value(2).len(), 1);
}

#[test]
fn header_reads_without_an_envelope_fail_every_row() {
    let p = header_program("read_header('x-tenant')");
    let columns: [ArrayRef; 2] = [
        Arc::new(Int64Array::from(vec![0, 0])),
        Arc::new(StringArray::from(vec!["", ""])),
    ];
    let out = eval_on(&p, &columns);
    assert_eq!(out.values.null_count(), 2);
    let messages: Vec<(u32, &str)> = out.errors.iter().collect();
    assert_eq!(messages.len(), 2);
    assert!(
        messages[0].1.contains("needs a header context"),
        "{messages:?}"
    );
    // An envelope of another length is refused, not misread.
    let p = header_program("read_headers('x-tenant')");
    let out = eval_with_envelope(&p, &[Some(""), Some("")], &[0], NameRule::Exact);
    assert_eq!(out.errors.len(), 2);
    assert!(!program("a + 1").reads_headers());
}
