//! The type-resolved expression tree the checker produces and the expression VM compiles.
//!
//! It mirrors the parsed tree node for node, so a VM error can point at the same span, but every
//! node carries its resolved [`FieldType`], literals carry values of their resolved type, and
//! calls name a [`Function`] or [`Aggregate`] rather than a string. Parentheses leave no trace
//! and a negated numeric literal is folded into one literal.

use nervix_nspl::ast::{BinaryOp, UnaryOp};
use nervix_nspl::Span;

use super::{Aggregate, DataType, FieldType, Function};

/// One checked expression node.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct TypedExpr {
    pub kind: TypedKind,
    pub ty: FieldType,
    pub span: Span,
}

/// A literal's value, in the representation of its resolved type.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum Value {
    /// A typed null (the node's type says which).
    Null,
    Bool(bool),
    /// A value of `I8`, `I16`, `I32` or `I64`.
    Int(i64),
    /// A value of `U8`, `U16`, `U32` or `U64`.
    UInt(u64),
    /// A value of `F32` or `F64`.
    Float(f64),
    String(String),
}

/// What a node computes, with typed children.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(
    serialize_bounds(
        __S: rkyv::ser::Writer + rkyv::ser::Allocator,
        __S::Error: rkyv::rancor::Source,
    ),
    deserialize_bounds(__D::Error: rkyv::rancor::Source),
    bytecheck(bounds(
        __C: rkyv::validation::ArchiveContext,
        __C::Error: rkyv::rancor::Source,
    )),
)]
pub enum TypedKind {
    Literal(Value),
    /// A field read; the path exactly as written (`input.amount`, `relay_state.r.x`, `amount`).
    Field(Vec<String>),
    /// `-x` (signed numbers only) or `NOT x`.
    Unary {
        op: UnaryOp,
        #[rkyv(omit_bounds)]
        expr: Box<TypedExpr>,
    },
    /// Both operands have one type (see the module rules); the node's type is the result's.
    Binary {
        op: BinaryOp,
        #[rkyv(omit_bounds)]
        left: Box<TypedExpr>,
        #[rkyv(omit_bounds)]
        right: Box<TypedExpr>,
    },
    /// `x AS T` (fails the message on a bad value) or `TRY_CAST(x AS T)` (yields null).
    Cast {
        #[rkyv(omit_bounds)]
        expr: Box<TypedExpr>,
        to: DataType,
        try_cast: bool,
    },
    IsNull {
        #[rkyv(omit_bounds)]
        expr: Box<TypedExpr>,
        negated: bool,
    },
    /// Every list item has the operand's type.
    InList {
        #[rkyv(omit_bounds)]
        expr: Box<TypedExpr>,
        #[rkyv(omit_bounds)]
        list: Vec<TypedExpr>,
        negated: bool,
    },
    /// Bounds have the operand's type.
    Between {
        #[rkyv(omit_bounds)]
        expr: Box<TypedExpr>,
        #[rkyv(omit_bounds)]
        low: Box<TypedExpr>,
        #[rkyv(omit_bounds)]
        high: Box<TypedExpr>,
        negated: bool,
    },
    If {
        #[rkyv(omit_bounds)]
        condition: Box<TypedExpr>,
        #[rkyv(omit_bounds)]
        then: Box<TypedExpr>,
        #[rkyv(omit_bounds)]
        otherwise: Box<TypedExpr>,
    },
    /// With an operand, each WHEN value has the operand's type; without, each is a BOOL.
    Case {
        #[rkyv(omit_bounds)]
        operand: Option<Box<TypedExpr>>,
        #[rkyv(omit_bounds)]
        branches: Vec<(TypedExpr, TypedExpr)>,
        #[rkyv(omit_bounds)]
        otherwise: Option<Box<TypedExpr>>,
    },
    /// A scalar function; argument types match [`Function`]'s documented signature.
    Call {
        function: Function,
        #[rkyv(omit_bounds)]
        args: Vec<TypedExpr>,
    },
    /// A window aggregate; arguments are evaluated per input row.
    Aggregate {
        aggregate: Aggregate,
        #[rkyv(omit_bounds)]
        args: Vec<TypedExpr>,
    },
    /// `JSON_VALUE(doc, '$…' AS T)`: the node's type is `T`, nullable.
    JsonValue {
        #[rkyv(omit_bounds)]
        doc: Box<TypedExpr>,
        path: String,
        to: DataType,
    },
}

impl TypedExpr {
    /// Whether any node of the tree (this one included) satisfies `pred`. Iterative, so it is
    /// safe on any tree.
    pub fn any(&self, mut pred: impl FnMut(&TypedExpr) -> bool) -> bool {
        let mut stack = vec![self];
        while let Some(node) = stack.pop() {
            if pred(node) {
                return true;
            }
            node.push_children(&mut stack);
        }
        false
    }

    /// Whether the tree calls a window aggregate.
    pub fn has_aggregate(&self) -> bool {
        self.any(|n| matches!(n.kind, TypedKind::Aggregate { .. }))
    }

    /// Pushes this node's direct children onto `stack`.
    pub(crate) fn push_children<'a>(&'a self, stack: &mut Vec<&'a TypedExpr>) {
        match &self.kind {
            TypedKind::Literal(_) | TypedKind::Field(_) => {}
            TypedKind::Unary { expr, .. }
            | TypedKind::Cast { expr, .. }
            | TypedKind::IsNull { expr, .. }
            | TypedKind::JsonValue { doc: expr, .. } => stack.push(expr),
            TypedKind::Binary { left, right, .. } => stack.extend([&**left, &**right]),
            TypedKind::InList { expr, list, .. } => {
                stack.push(expr);
                stack.extend(list);
            }
            TypedKind::Between {
                expr, low, high, ..
            } => stack.extend([&**expr, &**low, &**high]),
            TypedKind::If {
                condition,
                then,
                otherwise,
            } => stack.extend([&**condition, &**then, &**otherwise]),
            TypedKind::Case {
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
            TypedKind::Call { args, .. } | TypedKind::Aggregate { args, .. } => stack.extend(args),
        }
    }

    /// Replaces, outermost first, every node `replace` returns a substitute for (its subtree
    /// is not visited). A window route uses it to turn aggregate calls into column reads.
    pub fn replace_nodes(&mut self, replace: &mut impl FnMut(&TypedExpr) -> Option<TypedExpr>) {
        if let Some(substitute) = replace(self) {
            *self = substitute;
            return;
        }
        let mut children: Vec<&mut TypedExpr> = Vec::new();
        match &mut self.kind {
            TypedKind::Literal(_) | TypedKind::Field(_) => {}
            TypedKind::Unary { expr, .. }
            | TypedKind::Cast { expr, .. }
            | TypedKind::IsNull { expr, .. }
            | TypedKind::JsonValue { doc: expr, .. } => children.push(expr),
            TypedKind::Binary { left, right, .. } => children.extend([&mut **left, &mut **right]),
            TypedKind::InList { expr, list, .. } => {
                children.push(expr);
                children.extend(list.iter_mut());
            }
            TypedKind::Between {
                expr, low, high, ..
            } => children.extend([&mut **expr, &mut **low, &mut **high]),
            TypedKind::If {
                condition,
                then,
                otherwise,
            } => children.extend([&mut **condition, &mut **then, &mut **otherwise]),
            TypedKind::Case {
                operand,
                branches,
                otherwise,
            } => {
                children.extend(operand.as_deref_mut());
                for (when, then) in branches {
                    children.extend([when, then]);
                }
                children.extend(otherwise.as_deref_mut());
            }
            TypedKind::Call { args, .. } | TypedKind::Aggregate { args, .. } => {
                children.extend(args.iter_mut())
            }
        }
        for child in children {
            child.replace_nodes(replace);
        }
    }
}
