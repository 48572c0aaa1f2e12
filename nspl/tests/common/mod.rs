//! Proptest strategies that generate NSPL syntax trees, shared by the round-trip tests.

#![allow(dead_code)] // each test binary uses a different subset

use nervix_nspl::ast::{BinaryOp, Expr, ExprKind, Ident, Literal, TypeName, UnaryOp};
use nervix_nspl::Span;
use proptest::prelude::*;

pub fn ident(name: &str) -> Ident {
    Ident::new(name)
}

pub fn expr(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}

pub fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        any::<u64>().prop_map(|i| expr(ExprKind::Literal(Literal::Integer(i)))),
        (0.0f64..1e12).prop_map(|f| expr(ExprKind::Literal(Literal::Decimal(f)))),
        "[ -~]{0,8}".prop_map(|s| expr(ExprKind::Literal(Literal::String(s)))),
        any::<bool>().prop_map(|b| expr(ExprKind::Literal(Literal::Bool(b)))),
        Just(expr(ExprKind::Literal(Literal::Null))),
        prop::collection::vec("[a-z_][a-z0-9_]{0,6}", 1..4).prop_filter_map(
            "reserved words are not field names",
            |parts| {
                let reserved = nervix_nspl::parse::expr::RESERVED_IN_EXPRESSIONS;
                if reserved.iter().any(|r| r.eq_ignore_ascii_case(&parts[0])) {
                    return None;
                }
                Some(expr(ExprKind::Field(
                    parts.iter().map(|p| ident(p)).collect(),
                )))
            }
        ),
    ]
}

pub fn type_name() -> impl Strategy<Value = TypeName> {
    prop_oneof![
        Just(TypeName::I64),
        Just(TypeName::F64),
        Just(TypeName::String),
        Just(TypeName::Datetime),
        Just(TypeName::Vec(Box::new(TypeName::U8))),
        Just(TypeName::Array(Box::new(TypeName::F32), vec![2, 3])),
    ]
}

pub fn tree() -> impl Strategy<Value = Expr> {
    let ops = [
        BinaryOp::Or,
        BinaryOp::And,
        BinaryOp::Eq,
        BinaryOp::NotEq,
        BinaryOp::Lt,
        BinaryOp::LtEq,
        BinaryOp::Gt,
        BinaryOp::GtEq,
        BinaryOp::Concat,
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Mod,
    ];
    leaf().prop_recursive(6, 64, 4, move |inner| {
        let b = |e: Expr| Box::new(e);
        prop_oneof![
            (
                prop::sample::select(ops.to_vec()),
                inner.clone(),
                inner.clone()
            )
                .prop_map(move |(op, l, r)| expr(ExprKind::Binary {
                    op,
                    left: b(l),
                    right: b(r)
                })),
            (prop::bool::ANY, inner.clone()).prop_map(move |(neg, e)| expr(ExprKind::Unary {
                op: if neg { UnaryOp::Neg } else { UnaryOp::Not },
                expr: b(e)
            })),
            (inner.clone(), type_name(), any::<bool>()).prop_map(move |(e, ty, try_cast)| expr(
                ExprKind::Cast {
                    expr: b(e),
                    ty,
                    try_cast
                }
            )),
            (inner.clone(), any::<bool>()).prop_map(move |(e, negated)| expr(ExprKind::IsNull {
                expr: b(e),
                negated
            })),
            (
                inner.clone(),
                prop::collection::vec(inner.clone(), 1..3),
                any::<bool>()
            )
                .prop_map(move |(e, list, negated)| expr(ExprKind::InList {
                    expr: b(e),
                    list,
                    negated
                })),
            (inner.clone(), inner.clone(), inner.clone(), any::<bool>()).prop_map(
                move |(e, low, high, negated)| expr(ExprKind::Between {
                    expr: b(e),
                    low: b(low),
                    high: b(high),
                    negated
                })
            ),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(move |(c, t, o)| expr(
                ExprKind::If {
                    condition: b(c),
                    then: b(t),
                    otherwise: b(o)
                }
            )),
            (
                prop::option::of(inner.clone()),
                prop::collection::vec((inner.clone(), inner.clone()), 1..3),
                prop::option::of(inner.clone())
            )
                .prop_map(move |(operand, branches, otherwise)| expr(ExprKind::Case {
                    operand: operand.map(b),
                    branches,
                    otherwise: otherwise.map(b)
                })),
            (
                "[a-z][a-z_]{0,8}",
                prop::collection::vec(inner.clone(), 0..3)
            )
                .prop_filter_map(
                    "reserved words are not function names",
                    move |(name, args)| {
                        let reserved = nervix_nspl::parse::expr::RESERVED_IN_EXPRESSIONS;
                        if reserved.iter().any(|r| r.eq_ignore_ascii_case(&name)) {
                            return None;
                        }
                        Some(expr(ExprKind::Call {
                            name: ident(&name),
                            args,
                        }))
                    }
                ),
            (inner.clone(), "[ -~]{0,8}", type_name()).prop_map(move |(doc, path, ty)| expr(
                ExprKind::JsonValue {
                    doc: b(doc),
                    path,
                    ty
                }
            )),
        ]
    })
}
