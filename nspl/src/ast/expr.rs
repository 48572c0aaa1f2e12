//! Scalar expressions (DESIGN §7): literals, operators, casts, conditionals, calls.
//!
//! Parentheses leave no trace: the tree records structure only, and the renderer adds exactly
//! the parentheses precedence requires.

use super::{Ident, TypeName};
use crate::span::Span;

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum Literal {
    /// An integer literal; a leading `-` is a unary operator, so the value is never negative.
    Integer(u64),
    Decimal(f64),
    String(String),
    Bool(bool),
    Null,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
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
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
#[cfg_attr(
    feature = "rkyv",
    rkyv(
        serialize_bounds(
            __S: rkyv::ser::Writer + rkyv::ser::Allocator,
            __S::Error: rkyv::rancor::Source,
        ),
        deserialize_bounds(__D::Error: rkyv::rancor::Source),
        bytecheck(bounds(
            __C: rkyv::validation::ArchiveContext,
            __C::Error: rkyv::rancor::Source,
        )),
    )
)]
pub enum ExprKind {
    Literal(Literal),
    /// A field read: `amount`, `input.amount`, `relay_state.profiles.enabled`.
    Field(Vec<Ident>),
    Unary {
        op: UnaryOp,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        expr: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        left: Box<Expr>,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        right: Box<Expr>,
    },
    /// `x AS T` (fails the message on a bad value) or `TRY_CAST(x AS T)` (yields null).
    Cast {
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        expr: Box<Expr>,
        ty: TypeName,
        try_cast: bool,
    },
    IsNull {
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        expr: Box<Expr>,
        negated: bool,
    },
    InList {
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        expr: Box<Expr>,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        list: Vec<Expr>,
        negated: bool,
    },
    Between {
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        expr: Box<Expr>,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        low: Box<Expr>,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        high: Box<Expr>,
        negated: bool,
    },
    /// `IF c THEN a ELSE b END`.
    If {
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        condition: Box<Expr>,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        then: Box<Expr>,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        otherwise: Box<Expr>,
    },
    /// `CASE [operand] WHEN … THEN … [ELSE …] END`.
    Case {
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        operand: Option<Box<Expr>>,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        branches: Vec<(Expr, Expr)>,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        otherwise: Option<Box<Expr>>,
    },
    /// A function or window aggregate call; `name` is lower-case.
    Call {
        name: Ident,
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        args: Vec<Expr>,
    },
    /// `JSON_VALUE(doc, '$.path' AS T)`.
    JsonValue {
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))]
        doc: Box<Expr>,
        path: String,
        ty: TypeName,
    },
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span }
    }

    /// Pushes the direct children onto `stack` so that popping visits them in written order —
    /// the step of an iterative pre-order walk, safe on trees of any depth.
    pub fn push_children<'e>(&'e self, stack: &mut Vec<&'e Expr>) {
        let before = stack.len();
        match &self.kind {
            ExprKind::Literal(_) | ExprKind::Field(_) => {}
            ExprKind::Unary { expr, .. }
            | ExprKind::Cast { expr, .. }
            | ExprKind::IsNull { expr, .. }
            | ExprKind::JsonValue { doc: expr, .. } => stack.push(expr),
            ExprKind::Binary { left, right, .. } => stack.extend([&**left, &**right]),
            ExprKind::InList { expr, list, .. } => {
                stack.push(expr);
                stack.extend(list);
            }
            ExprKind::Between {
                expr, low, high, ..
            } => stack.extend([&**expr, &**low, &**high]),
            ExprKind::If {
                condition,
                then,
                otherwise,
            } => stack.extend([&**condition, &**then, &**otherwise]),
            ExprKind::Case {
                operand,
                branches,
                otherwise,
            } => {
                stack.extend(operand.as_deref());
                for (when, then) in branches {
                    stack.extend([when, then]);
                }
                stack.extend(otherwise.as_deref());
            }
            ExprKind::Call { args, .. } => stack.extend(args),
        }
        stack[before..].reverse();
    }
}
