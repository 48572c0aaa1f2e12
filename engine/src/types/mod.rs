//! The expression type checker (DESIGN §4 types, §7 expressions and functions).
//!
//! This module owns the static meaning of every NSPL scalar expression: which operand types an
//! operator, cast, conditional, function or window aggregate accepts, what type it yields, and
//! whether the result can be null or is SENSITIVE. [`check`] turns a parsed [`Expr`] into a
//! [`TypedExpr`] — the same tree with every node's [`FieldType`] resolved and every call bound to
//! a [`Function`] or [`Aggregate`] — which the expression VM compiles. It does no I/O and knows
//! nothing of the catalog: the caller resolves field paths through a [`Scope`] and says what the
//! expression's position allows through an [`ExprContext`].
//!
//! # Why it is correct
//!
//! * Every node is checked bottom-up from its children's resolved types, so the type recorded on a
//!   node is exactly what the rules below derive; nothing is inferred from later context except
//!   the literal adaptation described next, which only ever rewrites a literal leaf.
//! * **No implicit casts.** Operands of an operator must have one type; a mismatch is an error
//!   naming both types. The one exception is literals, which have no declared type:
//!   - an integer literal is `I64` and a decimal literal `F64` by default, **but a literal takes
//!     the numeric type of the other operand (or of the parameter, IN list, branch or expected
//!     type it meets) when its value fits that type** — `input.latency >= 0` with `latency I32`
//!     compares I32 with I32, `x_u8 = 300` is refused ("integer literal 300 does not fit U8"), and
//!     an integer literal becomes `F32`/`F64` only when it is exactly representable there. A
//!     decimal literal adapts only to `F32`/`F64`. A leading `-` belongs to the literal
//!     (`x_i8 = -128` fits). Only a literal (or a negated literal) adapts; `1 + 2` is an `I64`
//!     expression;
//!   - `NULL` takes the type of what it meets and is nullable; a `NULL` that meets nothing typed
//!     is refused with a hint to write `NULL AS <type>`;
//!   - string literals are `STRING`, `TRUE`/`FALSE` are `BOOL`.
//! * **Nullability** propagates: a node is nullable when any operand is, except where a rule says
//!   otherwise (`IS NULL`, `is_null`, `coalesce`, `concat`, `IF`/`CASE` branch rules, functions
//!   and aggregates documented as always or never null, `TRY_CAST`/`JSON_VALUE` always nullable).
//! * **Sensitivity** propagates: a node is SENSITIVE when any child is (conditions included),
//!   except `leak_sensitive(x)`, which clears it. The caller compares [`FieldType::sensitive`] of
//!   the result with its destination field to refuse writing a sensitive value into a
//!   non-sensitive field.
//! * **Bounded recursion.** The parser caps parenthesised and prefix nesting at
//!   [`nervix_nspl::parse::MAX_NESTING_DEPTH`] (128) levels, but left-associative chains
//!   (`a + b + c + …`, `x AS T AS T …`) are built by a loop and can be deeper, and callers may
//!   build trees directly. The checker therefore counts its own depth and refuses trees deeper
//!   than [`MAX_EXPRESSION_DEPTH`]; every accepted [`TypedExpr`] is at most that deep, which
//!   also bounds every later recursive pass over it (the VM compiler, `Drop`). A level costs
//!   about 2 KiB of stack (measured, debug and release alike), so the deepest accepted tree
//!   needs under 512 KiB — a quarter of a default 2 MiB thread stack.
//! * No input panics: every failure is a [`TypeError`] with the span of the offending node.
//!
//! The operator rules live in `check.rs`, literal adaptation in `literal.rs`, the function table
//! in [`functions`] and the window aggregate table in [`aggregates`]; each documents its
//! signatures.

pub mod aggregates;
mod check;
pub mod collect;
pub mod functions;
mod literal;
mod typed;

use std::fmt;

use nervix_nspl::ast::{Expr, Ident, TypeName};
use nervix_nspl::Span;

pub use aggregates::Aggregate;
pub use functions::Function;
pub use typed::{TypedExpr, TypedKind, Value};

/// Trees deeper than this are refused (see the module docs on bounded recursion).
pub const MAX_EXPRESSION_DEPTH: u32 = 256;

/// A value type of the data model (DESIGN §4).
#[derive(Debug, Clone, PartialEq, Eq, Hash, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
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
pub enum DataType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
    Bool,
    String,
    /// `Timestamp(Nanosecond, "UTC")`.
    Datetime,
    Bytes,
    /// Fixed-size list with one or more dimensions: `ARRAY<F32, 2, 3>`.
    Array(#[rkyv(omit_bounds)] Box<DataType>, Vec<u32>),
    /// Variable-length list: `VEC<I64>`.
    Vec(#[rkyv(omit_bounds)] Box<DataType>),
    /// Header values: `LIST<STRING>`.
    List(#[rkyv(omit_bounds)] Box<DataType>),
}

impl DataType {
    /// The type a parsed type name denotes.
    pub fn from_type_name(name: &TypeName) -> DataType {
        match name {
            TypeName::U8 => DataType::U8,
            TypeName::I8 => DataType::I8,
            TypeName::U16 => DataType::U16,
            TypeName::I16 => DataType::I16,
            TypeName::U32 => DataType::U32,
            TypeName::I32 => DataType::I32,
            TypeName::U64 => DataType::U64,
            TypeName::I64 => DataType::I64,
            TypeName::F32 => DataType::F32,
            TypeName::F64 => DataType::F64,
            TypeName::Bool => DataType::Bool,
            TypeName::String => DataType::String,
            TypeName::Datetime => DataType::Datetime,
            TypeName::Bytes => DataType::Bytes,
            TypeName::Array(element, dims) => {
                DataType::Array(Box::new(DataType::from_type_name(element)), dims.clone())
            }
            TypeName::Vec(element) => DataType::Vec(Box::new(DataType::from_type_name(element))),
            TypeName::List(element) => DataType::List(Box::new(DataType::from_type_name(element))),
        }
    }

    /// `U8 I8 U16 I16 U32 I32 U64 I64`.
    pub fn is_integer(&self) -> bool {
        matches!(
            self,
            DataType::U8
                | DataType::I8
                | DataType::U16
                | DataType::I16
                | DataType::U32
                | DataType::I32
                | DataType::U64
                | DataType::I64
        )
    }

    /// `U8 U16 U32 U64`.
    pub fn is_unsigned(&self) -> bool {
        matches!(
            self,
            DataType::U8 | DataType::U16 | DataType::U32 | DataType::U64
        )
    }

    /// `F32 F64`.
    pub fn is_float(&self) -> bool {
        matches!(self, DataType::F32 | DataType::F64)
    }

    /// Integers and floats.
    pub fn is_numeric(&self) -> bool {
        self.is_integer() || self.is_float()
    }

    /// Everything but `ARRAY`, `VEC` and `LIST`.
    pub fn is_scalar(&self) -> bool {
        !matches!(
            self,
            DataType::Array(..) | DataType::Vec(_) | DataType::List(_)
        )
    }

    /// Types `<`, `<=`, `>`, `>=`, `BETWEEN`, MIN/MAX and ARG_MIN/ARG_MAX keys can order:
    /// numbers, `STRING` (by code point) and `DATETIME`.
    pub fn is_orderable(&self) -> bool {
        self.is_numeric() || matches!(self, DataType::String | DataType::Datetime)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            DataType::U8 => "U8",
            DataType::I8 => "I8",
            DataType::U16 => "U16",
            DataType::I16 => "I16",
            DataType::U32 => "U32",
            DataType::I32 => "I32",
            DataType::U64 => "U64",
            DataType::I64 => "I64",
            DataType::F32 => "F32",
            DataType::F64 => "F64",
            DataType::Bool => "BOOL",
            DataType::String => "STRING",
            DataType::Datetime => "DATETIME",
            DataType::Bytes => "BYTES",
            DataType::Array(element, dims) => {
                write!(f, "ARRAY<{element}")?;
                for dim in dims {
                    write!(f, ", {dim}")?;
                }
                return f.write_str(">");
            }
            DataType::Vec(element) => return write!(f, "VEC<{element}>"),
            DataType::List(element) => return write!(f, "LIST<{element}>"),
        };
        f.write_str(name)
    }
}

/// The type of a schema field or of an expression's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct FieldType {
    pub data_type: DataType,
    /// The value can be null (a schema field's `OPTIONAL`).
    pub nullable: bool,
    /// The value is `SENSITIVE` and may reach a non-sensitive field only through
    /// `leak_sensitive(…)`.
    pub sensitive: bool,
}

impl FieldType {
    /// A required, non-sensitive value of `data_type`.
    pub fn required(data_type: DataType) -> FieldType {
        FieldType {
            data_type,
            nullable: false,
            sensitive: false,
        }
    }

    /// A nullable, non-sensitive value of `data_type`.
    pub fn optional(data_type: DataType) -> FieldType {
        FieldType {
            data_type,
            nullable: true,
            sensitive: false,
        }
    }
}

impl fmt::Display for FieldType {
    /// NSPL spelling: `STRING OPTIONAL SENSITIVE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.data_type)?;
        if self.nullable {
            f.write_str(" OPTIONAL")?;
        }
        if self.sensitive {
            f.write_str(" SENSITIVE")?;
        }
        Ok(())
    }
}

/// Resolves field paths for the checker. The caller decides what `input.x`, `message.x`,
/// `output.x`, bare `x`, `relay_state.r.x`, `branch.x`, `left.x`, `right.x`, `error.x`,
/// `partial_output.x` and `metadata.x` mean where the expression stands; an `Err` carries the
/// message the checker reports at the field's span.
pub trait Scope {
    fn field(&self, path: &[Ident]) -> Result<FieldType, String>;
}

/// What the expression's position in a statement allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprContext {
    /// Window aggregate calls are allowed (a window processor route's SET only).
    pub aggregates: bool,
    /// `input.` fields may be read only inside aggregate arguments (window routes).
    pub aggregate_arguments_read_input: bool,
    /// Whether `read_header`/`read_headers` are available; `Err` holds the exact refusal.
    pub headers: Result<(), String>,
    /// Constant positions (materialized-state DEFAULTs, RESET branch values): no field reads,
    /// no side effects, no nondeterministic or message-reading calls.
    pub constant_only: bool,
    /// `write_header` is available (emitters only).
    pub write_header: bool,
}

impl Default for ExprContext {
    /// A plain scalar position: no aggregates, no headers, no `write_header`.
    fn default() -> ExprContext {
        ExprContext {
            aggregates: false,
            aggregate_arguments_read_input: false,
            headers: Err("read_header and read_headers are not available here".to_string()),
            constant_only: false,
            write_header: false,
        }
    }
}

/// A refused expression: the span of the offending node and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct TypeError {
    pub span: Span,
    pub message: String,
}

impl TypeError {
    pub(crate) fn new(span: Span, message: impl Into<String>) -> TypeError {
        TypeError {
            span,
            message: message.into(),
        }
    }
}

/// Type-checks `expr`. Literals that meet no typed operand take their default types
/// (`I64`, `F64`).
pub fn check(expr: &Expr, scope: &dyn Scope, ctx: &ExprContext) -> Result<TypedExpr, TypeError> {
    let mut checker = check::Checker::new(scope, ctx);
    let operand = checker.expr(expr)?;
    let typed = literal::resolve(operand, None)?;
    collect::record(&typed);
    Ok(typed)
}

/// Type-checks `expr` where a value of `expected` is wanted (a SET destination, a predicate):
/// a literal adapts to `expected` when it fits, and any other type is refused naming both types.
/// Nullability and sensitivity are left to the caller, who knows the destination.
pub fn check_expecting(
    expr: &Expr,
    scope: &dyn Scope,
    ctx: &ExprContext,
    expected: &DataType,
) -> Result<TypedExpr, TypeError> {
    let mut checker = check::Checker::new(scope, ctx);
    let operand = checker.expr(expr)?;
    let typed = literal::resolve(operand, Some(expected))?;
    if typed.ty.data_type != *expected {
        return Err(TypeError::new(
            expr.span,
            format!(
                "expected {expected}, found {}: no implicit casts; cast with AS",
                typed.ty.data_type
            ),
        ));
    }
    collect::record(&typed);
    Ok(typed)
}
