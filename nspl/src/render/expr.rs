//! Expressions to text with the fewest parentheses that keep the tree's structure.

use super::{fmt_float, fmt_type, quote};
use crate::ast::{BinaryOp, Expr, ExprKind, Literal, UnaryOp};
use crate::parse::expr::level;

/// Window aggregates render upper-case, as the spec writes them; other calls lower-case.
pub const WINDOW_AGGREGATES: &[&str] = &[
    "count",
    "count_if",
    "bool_and",
    "bool_or",
    "sum",
    "avg",
    "min",
    "max",
    "first",
    "last",
    "arg_min",
    "arg_max",
    "var_pop",
    "var_samp",
    "stddev_pop",
    "stddev_samp",
    "covar_pop",
    "covar_samp",
    "corr",
    "percentile_linear_histogram",
    "approx_count_distinct",
    "approx_quantile",
    "approx_top_k",
];

pub fn fmt_expr(e: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, e);
    out
}

fn binary_level(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Or => level::OR,
        BinaryOp::And => level::AND,
        BinaryOp::Eq
        | BinaryOp::NotEq
        | BinaryOp::Lt
        | BinaryOp::LtEq
        | BinaryOp::Gt
        | BinaryOp::GtEq => level::COMPARE,
        BinaryOp::Concat => level::CONCAT,
        BinaryOp::Add | BinaryOp::Sub => level::ADD,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => level::MUL,
    }
}

fn binary_symbol(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Or => "OR",
        BinaryOp::And => "AND",
        BinaryOp::Eq => "=",
        BinaryOp::NotEq => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::LtEq => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::GtEq => ">=",
        BinaryOp::Concat => "||",
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Mod => "%",
    }
}

/// The precedence level of an expression's outermost operator.
fn precedence(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary { op, .. } => binary_level(*op),
        ExprKind::Unary {
            op: UnaryOp::Not, ..
        } => level::NOT,
        ExprKind::Unary {
            op: UnaryOp::Neg, ..
        } => level::NEG,
        ExprKind::IsNull { .. } | ExprKind::InList { .. } | ExprKind::Between { .. } => {
            level::COMPARE
        }
        ExprKind::Cast {
            try_cast: false, ..
        } => level::CAST,
        _ => level::ATOM,
    }
}

/// Writes `e`, parenthesized when its precedence is below `min`.
fn write_operand(out: &mut String, e: &Expr, min: u8) {
    if precedence(e) < min {
        out.push('(');
        write_expr(out, e);
        out.push(')');
    } else {
        write_expr(out, e);
    }
}

fn write_list(out: &mut String, items: &[Expr]) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_expr(out, item);
    }
}

fn write_expr(out: &mut String, e: &Expr) {
    match &e.kind {
        ExprKind::Literal(l) => match l {
            Literal::Integer(i) => out.push_str(&i.to_string()),
            Literal::Decimal(f) => out.push_str(&fmt_float(*f)),
            Literal::String(s) => out.push_str(&quote(s)),
            Literal::Bool(true) => out.push_str("TRUE"),
            Literal::Bool(false) => out.push_str("FALSE"),
            Literal::Null => out.push_str("NULL"),
        },
        ExprKind::Field(path) => {
            for (i, part) in path.iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(&part.name);
            }
        }
        ExprKind::Unary { op, expr } => match op {
            UnaryOp::Not => {
                out.push_str("NOT ");
                write_operand(out, expr, level::NOT);
            }
            UnaryOp::Neg => {
                out.push('-');
                // `--` would start a comment, so a nested negation is parenthesized.
                let nested_neg = matches!(
                    expr.kind,
                    ExprKind::Unary {
                        op: UnaryOp::Neg,
                        ..
                    }
                );
                write_operand(out, expr, if nested_neg { level::ATOM } else { level::NEG });
            }
        },
        ExprKind::Binary { op, left, right } => {
            let lvl = binary_level(*op);
            write_operand(out, left, lvl);
            out.push(' ');
            out.push_str(binary_symbol(*op));
            out.push(' ');
            write_operand(out, right, lvl + 1);
        }
        ExprKind::Cast { expr, ty, try_cast } => {
            if *try_cast {
                out.push_str("TRY_CAST(");
                write_operand(out, expr, level::CAST);
                out.push_str(" AS ");
                out.push_str(&fmt_type(ty));
                out.push(')');
            } else {
                write_operand(out, expr, level::CAST);
                out.push_str(" AS ");
                out.push_str(&fmt_type(ty));
            }
        }
        ExprKind::IsNull { expr, negated } => {
            write_operand(out, expr, level::COMPARE);
            out.push_str(if *negated { " IS NOT NULL" } else { " IS NULL" });
        }
        ExprKind::InList {
            expr,
            list,
            negated,
        } => {
            write_operand(out, expr, level::COMPARE);
            out.push_str(if *negated { " NOT IN (" } else { " IN (" });
            write_list(out, list);
            out.push(')');
        }
        ExprKind::Between {
            expr,
            low,
            high,
            negated,
        } => {
            write_operand(out, expr, level::COMPARE);
            out.push_str(if *negated {
                " NOT BETWEEN "
            } else {
                " BETWEEN "
            });
            write_operand(out, low, level::COMPARE + 1);
            out.push_str(" AND ");
            write_operand(out, high, level::COMPARE + 1);
        }
        ExprKind::If {
            condition,
            then,
            otherwise,
        } => {
            out.push_str("IF ");
            write_expr(out, condition);
            out.push_str(" THEN ");
            write_expr(out, then);
            out.push_str(" ELSE ");
            write_expr(out, otherwise);
            out.push_str(" END");
        }
        ExprKind::Case {
            operand,
            branches,
            otherwise,
        } => {
            out.push_str("CASE");
            if let Some(operand) = operand {
                out.push(' ');
                write_expr(out, operand);
            }
            for (when, then) in branches {
                out.push_str(" WHEN ");
                write_expr(out, when);
                out.push_str(" THEN ");
                write_expr(out, then);
            }
            if let Some(otherwise) = otherwise {
                out.push_str(" ELSE ");
                write_expr(out, otherwise);
            }
            out.push_str(" END");
        }
        ExprKind::Call { name, args } => {
            if WINDOW_AGGREGATES.contains(&name.name.as_str()) {
                out.push_str(&name.name.to_ascii_uppercase());
            } else {
                out.push_str(&name.name);
            }
            out.push('(');
            write_list(out, args);
            out.push(')');
        }
        ExprKind::JsonValue { doc, path, ty } => {
            out.push_str("JSON_VALUE(");
            write_expr(out, doc);
            out.push_str(", ");
            out.push_str(&quote(path));
            out.push_str(" AS ");
            out.push_str(&fmt_type(ty));
            out.push(')');
        }
    }
}
