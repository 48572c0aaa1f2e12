//! Scalar expressions (DESIGN §7): literals, operators, casts, conditionals, calls.
//!
//! Parentheses leave no trace: the tree records structure only, and the renderer adds exactly
//! the parentheses precedence requires.

use super::{Ident, TypeName};
use crate::span::Span;

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// An integer literal; a leading `-` is a unary operator, so the value is never negative.
    Integer(u64),
    Decimal(f64),
    String(String),
    Bool(bool),
    Null,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Or,
    And,
    Eq,
    /// `!=`; `<>` parses to the same operator.
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    Concat,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Literal(Literal),
    /// A field read: `amount`, `input.amount`, `relay_state.profiles.enabled`.
    Field(Vec<Ident>),
    Unary {
        op: UnaryOp,
        expr: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `x AS T` (fails the message on a bad value) or `TRY_CAST(x AS T)` (yields null).
    Cast {
        expr: Box<Expr>,
        ty: TypeName,
        try_cast: bool,
    },
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    /// `IF c THEN a ELSE b END`.
    If {
        condition: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// `CASE [operand] WHEN … THEN … [ELSE …] END`.
    Case {
        operand: Option<Box<Expr>>,
        branches: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
    },
    /// A function or window aggregate call; `name` is lower-case.
    Call {
        name: Ident,
        args: Vec<Expr>,
    },
    /// `JSON_VALUE(doc, '$.path' AS T)`.
    JsonValue {
        doc: Box<Expr>,
        path: String,
        ty: TypeName,
    },
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span }
    }
}
