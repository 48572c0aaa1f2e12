//! Expressions: precedence, canonical text, round trips of generated trees, depth limits.

mod common;

use common::tree;
use nervix_nspl::parse_expression;
use nervix_nspl::render::fmt_expr;
use proptest::prelude::*;

fn canonical(src: &str) -> String {
    fmt_expr(&parse_expression(src).unwrap_or_else(|e| panic!("{src}: {e}")))
}

#[test]
fn precedence_follows_design_section_7() {
    let cases = [
        ("a + b * c", "a + b * c"),
        ("(a + b) * c", "(a + b) * c"),
        ("a - (b - c)", "a - (b - c)"),
        ("(a - b) - c", "a - b - c"),
        ("NOT a = b AND c OR d", "NOT a = b AND c OR d"),
        ("not (a or b)", "NOT (a OR b)"),
        ("a || b = c", "a || b = c"),
        ("-x AS I64", "-x AS I64"),
        ("(-x) as int64", "(-x) AS I64"),
        ("- - x", "-(-x)"),
        ("x between 1 and 2 and y", "x BETWEEN 1 AND 2 AND y"),
        ("x not between a + 1 and b", "x NOT BETWEEN a + 1 AND b"),
        ("x not in (1, 2, 'a')", "x NOT IN (1, 2, 'a')"),
        ("x is not null and y is null", "x IS NOT NULL AND y IS NULL"),
        ("a <> b", "a != b"),
        ("(amount + fee) / divisor", "(amount + fee) / divisor"),
        ("lower(TRIM(raw))", "lower(trim(raw))"),
        ("count(input.latency) + 1", "COUNT(input.latency) + 1"),
        (
            "concat(\"paid:\", output.amount AS STRING)",
            "concat('paid:', output.amount AS STRING)",
        ),
        ("TRY_CAST(raw AS INT64)", "TRY_CAST(raw AS I64)"),
        (
            "JSON_VALUE(raw, '$.order.id' AS INT64)",
            "JSON_VALUE(raw, '$.order.id' AS I64)",
        ),
        ("if a then 1 else 2 end", "IF a THEN 1 ELSE 2 END"),
        (
            "case x when 1 then 'a' else 'b' end",
            "CASE x WHEN 1 THEN 'a' ELSE 'b' END",
        ),
        (
            "case when x > 1 then 'a' end",
            "CASE WHEN x > 1 THEN 'a' END",
        ),
        ("'it''s'", "'it''s'"),
        (
            "relay_state.profiles.enabled",
            "relay_state.profiles.enabled",
        ),
        ("1.5e-7 * 2.0", "1.5e-7 * 2.0"),
        (
            "(active AND amount > 5) OR NOT flagged",
            "active AND amount > 5 OR NOT flagged",
        ),
        ("x AS ARRAY<F32, 2, 3>", "x AS ARRAY<F32, 2, 3>"),
        (
            "read_headers('a') = x AS LIST<STRING>",
            "read_headers('a') = x AS LIST<STRING>",
        ),
    ];
    for (src, expected) in cases {
        assert_eq!(canonical(src), expected, "canonical text of {src}");
        assert_eq!(canonical(expected), expected, "idempotence of {expected}");
    }
}

#[test]
fn refusals_name_what_was_expected() {
    let cases = [
        ("a +", "1:4", "expected an expression, found end of input"),
        ("a AND", "1:6", "expected an expression, found end of input"),
        ("(a", "1:3", "expected `)`, found end of input"),
        ("x BETWEEN 1", "1:12", "`AND`, found end of input"),
        ("Amount > 1", "1:1", "names are lower-case, write `amount`"),
        ("x IS NOT 1", "1:10", "expected `NULL`, found `1`"),
        ("x AS INTEGER", "1:6", "expected one of `U8`"),
        (
            "99999999999999999999",
            "1:1",
            "integer literal `99999999999999999999` is out of range",
        ),
        ("1e999", "1:1", "decimal literal `1e999` is out of range"),
        ("'open", "1:1", "unterminated string"),
        ("a # b", "1:3", "unexpected character `#`"),
        ("case end", "1:6", "expected"),
        ("if a then b end", "1:13", "expected `ELSE`, found `end`"),
    ];
    for (src, at, message) in cases {
        let error = parse_expression(src).expect_err(src);
        let pos = nervix_nspl::position(src, error.span.start).to_string();
        assert_eq!(pos, at, "position of the error in {src}: {}", error.message);
        assert!(
            error.message.contains(message),
            "{src}: message `{}` lacks `{message}`",
            error.message
        );
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let depth = 100_000;
    let src = format!("{}x{}", "(".repeat(depth), ")".repeat(depth));
    let error = parse_expression(&src).expect_err("too deep");
    assert!(
        error.message.contains("nested too deeply"),
        "{}",
        error.message
    );
    let src = format!("{}x", "NOT ".repeat(depth));
    assert!(parse_expression(&src).is_err());
    let src = format!("{}x", "-".repeat(depth));
    assert!(parse_expression(&src).is_err());
    // Long flat chains are not nesting and parse fine.
    let src = vec!["x"; 10_000].join(" + ");
    assert!(parse_expression(&src).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_expressions_render_and_parse_back_equal(e in tree()) {
        let text = fmt_expr(&e);
        let parsed = parse_expression(&text)
            .map_err(|err| TestCaseError::fail(format!("{text}: {err}")))?;
        prop_assert_eq!(&parsed, &e, "text: {}", text);
        prop_assert_eq!(fmt_expr(&parsed), text);
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let _ = parse_expression(&s);
        let _ = nervix_nspl::parse_script(&s);
    }
}
