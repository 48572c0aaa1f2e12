//! Operator, cast, conditional, field and JSON rules of the checker.
//!
//! | expression | operands | result |
//! |---|---|---|
//! | `a + b`, `a - b`, `a * b`, `a / b` | one numeric type | that type (integer `/` truncates) |
//! | `a % b` | one integer type | that type |
//! | `a \|\| b` | `STRING`, `STRING` | `STRING` |
//! | `a = b`, `a != b` | one scalar type | `BOOL` |
//! | `a < b`, `<=`, `>`, `>=` | one orderable type (numeric, `STRING`, `DATETIME`) | `BOOL` |
//! | `a AND b`, `a OR b`, `NOT a` | `BOOL` | `BOOL` |
//! | `-a` | a signed numeric type (`I8`…`I64`, `F32`, `F64`) | that type |
//! | `a IS [NOT] NULL` | anything | `BOOL`, never null |
//! | `a [NOT] IN (b, …)` | every item the operand's scalar type | `BOOL` |
//! | `a [NOT] BETWEEN l AND h` | one orderable type | `BOOL` |
//! | `IF c THEN a ELSE b END` | `c` `BOOL`; `a`, `b` one type | that type, nullable if a branch is |
//! | `CASE [x] WHEN w THEN r … [ELSE e] END` | `w` `BOOL` (or `x`'s scalar type); results one type | that type, nullable if a result is or ELSE is missing |
//! | `x AS T`, `TRY_CAST(x AS T)` | see casts below | `T` (`TRY_CAST`: nullable) |
//! | `JSON_VALUE(doc, '$…' AS T)` | `doc` `STRING`, path starting with `$`, `T` numeric, `BOOL`, `STRING` or `DATETIME` | `T`, nullable |
//!
//! Casts convert between scalar types: any type to itself, numeric ↔ numeric, numeric ↔
//! `STRING`, `STRING` ↔ `DATETIME`, `BOOL` ↔ `STRING` and `STRING` ↔ `BYTES` (UTF-8). Everything
//! else (`DATETIME` ↔ numeric, `BOOL` ↔ numeric, anything with `ARRAY`/`VEC`/`LIST`) is refused
//! naming both types. A numeric literal cast to a numeric type becomes a literal of that type
//! (`300 AS U8` is refused as a literal that does not fit); `NULL AS T` is a typed null.

use nervix_nspl::ast::{BinaryOp, Expr, ExprKind, Ident, Literal, TypeName, UnaryOp};
use nervix_nspl::Span;

use super::literal::{common_target, resolve, Operand, Pending};
use super::{
    Aggregate, DataType, ExprContext, FieldType, Scope, TypeError, TypedExpr, TypedKind, Value,
    MAX_EXPRESSION_DEPTH,
};

/// One checking pass over one expression.
pub(crate) struct Checker<'a> {
    pub(super) scope: &'a dyn Scope,
    pub(super) ctx: &'a ExprContext,
    depth: u32,
    /// The aggregate whose arguments are being checked, if any.
    pub(super) inside_aggregate: Option<Aggregate>,
}

/// Whether any of `children` is nullable, and whether any is sensitive.
pub(super) fn flags<'t>(children: impl IntoIterator<Item = &'t TypedExpr>) -> (bool, bool) {
    children.into_iter().fold((false, false), |(n, s), c| {
        (n || c.ty.nullable, s || c.ty.sensitive)
    })
}

/// A node whose nullability and sensitivity are `(nullable, sensitive)`.
fn derived(
    kind: TypedKind,
    data_type: DataType,
    (nullable, sensitive): (bool, bool),
    span: Span,
) -> Operand {
    Operand::Typed(TypedExpr {
        kind,
        ty: FieldType {
            data_type,
            nullable,
            sensitive,
        },
        span,
    })
}

fn boxed(e: TypedExpr) -> Box<TypedExpr> {
    Box::new(e)
}

fn op_text(op: BinaryOp) -> &'static str {
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

/// Why values of type `t` cannot be compared with `op`, if they cannot.
fn comparison_refusal(op: &str, t: &DataType, ordering: bool) -> Option<String> {
    if !t.is_scalar() {
        return Some(format!(
            "cannot compare {t} values with {op}: only scalar values compare"
        ));
    }
    if ordering && !t.is_orderable() {
        return Some(format!(
            "{op} cannot order {t} values; {t} supports only = and !="
        ));
    }
    None
}

/// Whether `AS`/`TRY_CAST` converts `from` to `to`.
fn castable(from: &DataType, to: &DataType) -> bool {
    use DataType as T;
    from == to
        || (from.is_numeric() && to.is_numeric())
        || (from.is_numeric() && *to == T::String)
        || (*from == T::String && to.is_numeric())
        || matches!(
            (from, to),
            (T::String, T::Datetime)
                | (T::Datetime, T::String)
                | (T::Bool, T::String)
                | (T::String, T::Bool)
                | (T::Bytes, T::String)
                | (T::String, T::Bytes)
        )
}

impl<'a> Checker<'a> {
    pub(crate) fn new(scope: &'a dyn Scope, ctx: &'a ExprContext) -> Checker<'a> {
        Checker {
            scope,
            ctx,
            depth: 0,
            inside_aggregate: None,
        }
    }

    /// Checks one node, counting depth so no tree recurses without bound.
    pub(crate) fn expr(&mut self, e: &Expr) -> Result<Operand, TypeError> {
        if self.depth >= MAX_EXPRESSION_DEPTH {
            return Err(TypeError::new(
                e.span,
                format!(
                    "expression nested too deeply: the limit is {MAX_EXPRESSION_DEPTH} levels \
                     (each operator of a chain counts one; use IN for long OR chains)"
                ),
            ));
        }
        self.depth += 1;
        let result = self.node(e);
        self.depth -= 1;
        result
    }

    /// Checks `e` and gives a pending literal its default type.
    pub(super) fn typed(&mut self, e: &Expr) -> Result<TypedExpr, TypeError> {
        let operand = self.expr(e)?;
        resolve(operand, None)
    }

    fn node(&mut self, e: &Expr) -> Result<Operand, TypeError> {
        let span = e.span;
        match &e.kind {
            ExprKind::Literal(literal) => Ok(literal_operand(literal, span)),
            ExprKind::Field(path) => self.field(path, span),
            ExprKind::Unary { op, expr } => self.unary(*op, expr, span),
            ExprKind::Binary { op, left, right } => self.binary(*op, left, right, span),
            ExprKind::Cast { expr, ty, try_cast } => self.cast(expr, ty, *try_cast, span),
            ExprKind::IsNull { expr, negated } => {
                let inner = self.typed(expr)?;
                let sensitive = inner.ty.sensitive;
                Ok(Operand::Typed(TypedExpr {
                    kind: TypedKind::IsNull {
                        expr: boxed(inner),
                        negated: *negated,
                    },
                    ty: FieldType {
                        data_type: DataType::Bool,
                        nullable: false,
                        sensitive,
                    },
                    span,
                }))
            }
            ExprKind::InList {
                expr,
                list,
                negated,
            } => self.in_list(expr, list, *negated, span),
            ExprKind::Between {
                expr,
                low,
                high,
                negated,
            } => self.between(expr, low, high, *negated, span),
            ExprKind::If {
                condition,
                then,
                otherwise,
            } => self.if_expr(condition, then, otherwise, span),
            ExprKind::Case {
                operand,
                branches,
                otherwise,
            } => self.case(operand.as_deref(), branches, otherwise.as_deref(), span),
            ExprKind::Call { name, args } => self.call(name, args, span),
            ExprKind::JsonValue { doc, path, ty } => self.json_value(doc, path, ty, span),
        }
    }

    fn field(&mut self, path: &[Ident], span: Span) -> Result<Operand, TypeError> {
        let names: Vec<String> = path.iter().map(|i| i.name.clone()).collect();
        let text = names.join(".");
        if self.ctx.constant_only {
            return Err(TypeError::new(
                span,
                format!("a constant expression cannot read fields, found `{text}`"),
            ));
        }
        if self.ctx.aggregate_arguments_read_input
            && self.inside_aggregate.is_none()
            && names.first().is_some_and(|n| n == "input")
        {
            return Err(TypeError::new(
                span,
                format!(
                    "`{text}` can only be read inside a window aggregate's arguments, \
                     such as COUNT({text})"
                ),
            ));
        }
        let ty = self
            .scope
            .field(path)
            .map_err(|message| TypeError::new(span, message))?;
        Ok(Operand::Typed(TypedExpr {
            kind: TypedKind::Field(names),
            ty,
            span,
        }))
    }

    fn unary(&mut self, op: UnaryOp, operand: &Expr, span: Span) -> Result<Operand, TypeError> {
        let inner = self.expr(operand)?;
        match op {
            UnaryOp::Neg => {
                if let Operand::Pending { literal, .. } = inner {
                    // The sign belongs to the literal, so `-128` can be an I8.
                    let literal = match literal {
                        Pending::Int(v) => Pending::Int(-v),
                        Pending::Decimal(v) => Pending::Decimal(-v),
                        Pending::Null => Pending::Null,
                    };
                    return Ok(Operand::Pending { literal, span });
                }
                let inner = resolve(inner, None)?;
                let t = &inner.ty.data_type;
                if !t.is_numeric() || t.is_unsigned() {
                    return Err(TypeError::new(
                        span,
                        format!("unary - needs a signed numeric operand, found {t}"),
                    ));
                }
                let data_type = t.clone();
                let inherited = flags([&inner]);
                let kind = TypedKind::Unary {
                    op,
                    expr: boxed(inner),
                };
                Ok(derived(kind, data_type, inherited, span))
            }
            UnaryOp::Not => {
                let inner = resolve(inner, Some(&DataType::Bool))?;
                if inner.ty.data_type != DataType::Bool {
                    return Err(TypeError::new(
                        span,
                        format!("NOT needs a BOOL operand, found {}", inner.ty.data_type),
                    ));
                }
                let inherited = flags([&inner]);
                let kind = TypedKind::Unary {
                    op,
                    expr: boxed(inner),
                };
                Ok(derived(kind, DataType::Bool, inherited, span))
            }
        }
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        left: &Expr,
        right: &Expr,
        span: Span,
    ) -> Result<Operand, TypeError> {
        let left = self.expr(left)?;
        let right = self.expr(right)?;
        let target = match op {
            BinaryOp::And | BinaryOp::Or => Some(DataType::Bool),
            BinaryOp::Concat => Some(DataType::String),
            _ => common_target([&left, &right]),
        };
        let left = resolve(left, target.as_ref())?;
        let right = resolve(right, target.as_ref())?;
        let (lt, rt) = (&left.ty.data_type, &right.ty.data_type);
        let text = op_text(op);
        let result = match op {
            BinaryOp::And | BinaryOp::Or => {
                if *lt != DataType::Bool || *rt != DataType::Bool {
                    return Err(TypeError::new(
                        span,
                        format!("{text} needs BOOL operands, found {lt} and {rt}"),
                    ));
                }
                DataType::Bool
            }
            BinaryOp::Eq
            | BinaryOp::NotEq
            | BinaryOp::Lt
            | BinaryOp::LtEq
            | BinaryOp::Gt
            | BinaryOp::GtEq => {
                if lt != rt {
                    return Err(TypeError::new(
                        span,
                        format!(
                            "cannot compare {lt} with {rt}: no implicit casts; \
                             cast one side with AS"
                        ),
                    ));
                }
                let ordering = !matches!(op, BinaryOp::Eq | BinaryOp::NotEq);
                if let Some(message) = comparison_refusal(text, lt, ordering) {
                    return Err(TypeError::new(span, message));
                }
                DataType::Bool
            }
            BinaryOp::Concat => {
                if *lt != DataType::String || *rt != DataType::String {
                    return Err(TypeError::new(
                        span,
                        format!("|| needs STRING operands, found {lt} and {rt}"),
                    ));
                }
                DataType::String
            }
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                if lt != rt || !lt.is_numeric() {
                    let hint = if op == BinaryOp::Add && *lt == DataType::String {
                        "; use || to concatenate strings"
                    } else {
                        ""
                    };
                    return Err(TypeError::new(
                        span,
                        format!(
                            "{text} needs operands of one numeric type, found {lt} and {rt}{hint}"
                        ),
                    ));
                }
                lt.clone()
            }
            BinaryOp::Mod => {
                if lt != rt || !lt.is_integer() {
                    return Err(TypeError::new(
                        span,
                        format!("% needs operands of one integer type, found {lt} and {rt}"),
                    ));
                }
                lt.clone()
            }
        };
        let children = [&left, &right];
        let (nullable, sensitive) = flags(children);
        Ok(Operand::Typed(TypedExpr {
            kind: TypedKind::Binary {
                op,
                left: boxed(left),
                right: boxed(right),
            },
            ty: FieldType {
                data_type: result,
                nullable,
                sensitive,
            },
            span,
        }))
    }

    fn cast(
        &mut self,
        operand: &Expr,
        ty: &TypeName,
        try_cast: bool,
        span: Span,
    ) -> Result<Operand, TypeError> {
        let to = DataType::from_type_name(ty);
        if !to.is_scalar() {
            return Err(TypeError::new(
                span,
                format!("cannot cast to {to}: AS and TRY_CAST convert between scalar types"),
            ));
        }
        let inner = self.expr(operand)?;
        let inner = match inner {
            Operand::Pending {
                literal: Pending::Null,
                ..
            } => {
                // `NULL AS T` is how a typed null is written.
                let mut typed = resolve(inner, Some(&to))?;
                typed.span = span;
                return Ok(Operand::Typed(typed));
            }
            Operand::Pending {
                literal: Pending::Int(_),
                ..
            } if to.is_integer() => {
                let mut typed = resolve(inner, Some(&to))?;
                typed.span = span;
                typed.ty.nullable = try_cast;
                return Ok(Operand::Typed(typed));
            }
            Operand::Pending { .. } if to.is_float() => match resolve(inner.clone(), Some(&to)) {
                Ok(mut typed) => {
                    typed.span = span;
                    typed.ty.nullable = try_cast;
                    return Ok(Operand::Typed(typed));
                }
                Err(_) => resolve(inner, None)?,
            },
            other => resolve(other, None)?,
        };
        let from = &inner.ty.data_type;
        if !castable(from, &to) {
            let why = if from.is_scalar() {
                "there is no conversion between them"
            } else {
                "AS and TRY_CAST convert between scalar types"
            };
            return Err(TypeError::new(
                span,
                format!("cannot cast {from} to {to}: {why}"),
            ));
        }
        let nullable = inner.ty.nullable || try_cast;
        let sensitive = inner.ty.sensitive;
        Ok(Operand::Typed(TypedExpr {
            kind: TypedKind::Cast {
                expr: boxed(inner),
                to: to.clone(),
                try_cast,
            },
            ty: FieldType {
                data_type: to,
                nullable,
                sensitive,
            },
            span,
        }))
    }

    fn in_list(
        &mut self,
        operand: &Expr,
        list: &[Expr],
        negated: bool,
        span: Span,
    ) -> Result<Operand, TypeError> {
        let operand = self.expr(operand)?;
        let items = list
            .iter()
            .map(|e| self.expr(e))
            .collect::<Result<Vec<_>, _>>()?;
        let target = common_target(std::iter::once(&operand).chain(&items));
        let operand = resolve(operand, target.as_ref())?;
        let t = operand.ty.data_type.clone();
        if let Some(message) = comparison_refusal("IN", &t, false) {
            return Err(TypeError::new(span, message));
        }
        let mut typed_items = Vec::with_capacity(items.len());
        for item in items {
            let item = resolve(item, Some(&t))?;
            if item.ty.data_type != t {
                return Err(TypeError::new(
                    item.span,
                    format!(
                        "IN list values must have the operand's type {t}, found {}: \
                         no implicit casts",
                        item.ty.data_type
                    ),
                ));
            }
            typed_items.push(item);
        }
        let (nullable, sensitive) = flags(std::iter::once(&operand).chain(&typed_items));
        Ok(Operand::Typed(TypedExpr {
            kind: TypedKind::InList {
                expr: boxed(operand),
                list: typed_items,
                negated,
            },
            ty: FieldType {
                data_type: DataType::Bool,
                nullable,
                sensitive,
            },
            span,
        }))
    }

    fn between(
        &mut self,
        operand: &Expr,
        low: &Expr,
        high: &Expr,
        negated: bool,
        span: Span,
    ) -> Result<Operand, TypeError> {
        let parts = [self.expr(operand)?, self.expr(low)?, self.expr(high)?];
        let target = common_target(&parts);
        let [operand, low, high] = parts;
        let operand = resolve(operand, target.as_ref())?;
        let t = operand.ty.data_type.clone();
        if let Some(message) = comparison_refusal("BETWEEN", &t, true) {
            return Err(TypeError::new(span, message));
        }
        let mut bounds = Vec::with_capacity(2);
        for bound in [low, high] {
            let bound = resolve(bound, Some(&t))?;
            if bound.ty.data_type != t {
                return Err(TypeError::new(
                    bound.span,
                    format!(
                        "BETWEEN bounds must have the operand's type {t}, found {}: \
                         no implicit casts",
                        bound.ty.data_type
                    ),
                ));
            }
            bounds.push(bound);
        }
        let inherited = flags(std::iter::once(&operand).chain(&bounds));
        let high = bounds.pop().map(boxed);
        let low = bounds.pop().map(boxed);
        let (Some(low), Some(high)) = (low, high) else {
            return Err(TypeError::new(span, "BETWEEN needs two bounds"));
        };
        let kind = TypedKind::Between {
            expr: boxed(operand),
            low,
            high,
            negated,
        };
        Ok(derived(kind, DataType::Bool, inherited, span))
    }

    /// Checks `e` as a condition: a `BOOL` (a `NULL` literal counts as a BOOL null).
    fn condition(&mut self, e: &Expr, what: &str) -> Result<TypedExpr, TypeError> {
        let operand = self.expr(e)?;
        let typed = resolve(operand, Some(&DataType::Bool))?;
        if typed.ty.data_type != DataType::Bool {
            return Err(TypeError::new(
                typed.span,
                format!("{what} must be BOOL, found {}", typed.ty.data_type),
            ));
        }
        Ok(typed)
    }

    /// Gives `results` one type, refusing a mismatch as `what` (`IF`, `CASE`).
    fn unify_results(
        &mut self,
        results: Vec<Operand>,
        what: &str,
        span: Span,
    ) -> Result<Vec<TypedExpr>, TypeError> {
        let target = common_target(&results);
        let Some(target) = target else {
            return Err(TypeError::new(
                span,
                format!(
                    "cannot infer the type of {what}: every branch is NULL; write NULL AS <type>"
                ),
            ));
        };
        let typed = results
            .into_iter()
            .map(|r| resolve(r, Some(&target)))
            .collect::<Result<Vec<_>, _>>()?;
        // Blame the first branch, in source order, that differs from the first branch.
        if let Some(first) = typed.first() {
            let first = &first.ty.data_type;
            if let Some(other) = typed.iter().find(|r| r.ty.data_type != *first) {
                return Err(TypeError::new(
                    other.span,
                    format!(
                        "{what} branches must have one type, found {first} and {}: \
                         no implicit casts; cast one with AS",
                        other.ty.data_type
                    ),
                ));
            }
        }
        Ok(typed)
    }

    fn if_expr(
        &mut self,
        condition: &Expr,
        then: &Expr,
        otherwise: &Expr,
        span: Span,
    ) -> Result<Operand, TypeError> {
        let condition = self.condition(condition, "IF condition")?;
        let branches = vec![self.expr(then)?, self.expr(otherwise)?];
        let mut branches = self.unify_results(branches, "IF", span)?.into_iter();
        let (Some(then), Some(otherwise)) = (branches.next(), branches.next()) else {
            return Err(TypeError::new(span, "IF needs two branches"));
        };
        let data_type = then.ty.data_type.clone();
        let nullable = then.ty.nullable || otherwise.ty.nullable;
        let (_, sensitive) = flags([&condition, &then, &otherwise]);
        Ok(Operand::Typed(TypedExpr {
            kind: TypedKind::If {
                condition: boxed(condition),
                then: boxed(then),
                otherwise: boxed(otherwise),
            },
            ty: FieldType {
                data_type,
                nullable,
                sensitive,
            },
            span,
        }))
    }

    fn case(
        &mut self,
        operand: Option<&Expr>,
        branches: &[(Expr, Expr)],
        otherwise: Option<&Expr>,
        span: Span,
    ) -> Result<Operand, TypeError> {
        let mut whens = Vec::with_capacity(branches.len());
        let operand = match operand {
            None => {
                for (when, _) in branches {
                    whens.push(self.condition(when, "CASE WHEN condition")?);
                }
                None
            }
            Some(operand) => {
                let operand = self.expr(operand)?;
                let values = branches
                    .iter()
                    .map(|(when, _)| self.expr(when))
                    .collect::<Result<Vec<_>, _>>()?;
                let target = common_target(std::iter::once(&operand).chain(&values));
                let operand = resolve(operand, target.as_ref())?;
                let t = operand.ty.data_type.clone();
                if let Some(message) = comparison_refusal("CASE", &t, false) {
                    return Err(TypeError::new(operand.span, message));
                }
                for value in values {
                    let value = resolve(value, Some(&t))?;
                    if value.ty.data_type != t {
                        return Err(TypeError::new(
                            value.span,
                            format!(
                                "CASE WHEN values must have the operand's type {t}, found {}: \
                                 no implicit casts",
                                value.ty.data_type
                            ),
                        ));
                    }
                    whens.push(value);
                }
                Some(boxed(operand))
            }
        };
        let mut results = Vec::with_capacity(branches.len() + 1);
        for (_, then) in branches {
            results.push(self.expr(then)?);
        }
        if let Some(otherwise) = otherwise {
            results.push(self.expr(otherwise)?);
        }
        let mut results = self.unify_results(results, "CASE", span)?;
        let otherwise_typed = match otherwise {
            Some(_) => results.pop().map(boxed),
            None => None,
        };
        let data_type = results
            .first()
            .or(otherwise_typed.as_deref())
            .map_or(DataType::Bool, |r| r.ty.data_type.clone());
        let nullable = otherwise_typed.is_none()
            || results.iter().any(|r| r.ty.nullable)
            || otherwise_typed.as_ref().is_some_and(|o| o.ty.nullable);
        let (_, sensitive) = flags(
            operand
                .as_deref()
                .into_iter()
                .chain(&whens)
                .chain(&results)
                .chain(otherwise_typed.as_deref()),
        );
        Ok(Operand::Typed(TypedExpr {
            kind: TypedKind::Case {
                operand,
                branches: whens.into_iter().zip(results).collect(),
                otherwise: otherwise_typed,
            },
            ty: FieldType {
                data_type,
                nullable,
                sensitive,
            },
            span,
        }))
    }

    fn json_value(
        &mut self,
        doc: &Expr,
        path: &str,
        ty: &TypeName,
        span: Span,
    ) -> Result<Operand, TypeError> {
        let doc = resolve(self.expr(doc)?, Some(&DataType::String))?;
        if doc.ty.data_type != DataType::String {
            return Err(TypeError::new(
                doc.span,
                format!(
                    "JSON_VALUE document must be STRING, found {}",
                    doc.ty.data_type
                ),
            ));
        }
        if !path.starts_with('$') {
            return Err(TypeError::new(
                span,
                format!("JSON_VALUE path must start with `$`, found `{path}`"),
            ));
        }
        let to = DataType::from_type_name(ty);
        if !to.is_scalar() || to == DataType::Bytes {
            return Err(TypeError::new(
                span,
                format!("JSON_VALUE cannot read {to}: it reads numbers, BOOL, STRING and DATETIME"),
            ));
        }
        let sensitive = doc.ty.sensitive;
        Ok(Operand::Typed(TypedExpr {
            kind: TypedKind::JsonValue {
                doc: boxed(doc),
                path: path.to_string(),
                to: to.clone(),
            },
            ty: FieldType {
                data_type: to,
                nullable: true,
                sensitive,
            },
            span,
        }))
    }
}

fn literal_operand(literal: &Literal, span: Span) -> Operand {
    let typed = |value: Value, data_type: DataType| {
        Operand::Typed(TypedExpr {
            kind: TypedKind::Literal(value),
            ty: FieldType::required(data_type),
            span,
        })
    };
    match literal {
        Literal::Integer(v) => Operand::Pending {
            literal: Pending::Int(i128::from(*v)),
            span,
        },
        Literal::Decimal(v) => Operand::Pending {
            literal: Pending::Decimal(*v),
            span,
        },
        Literal::Null => Operand::Pending {
            literal: Pending::Null,
            span,
        },
        Literal::String(s) => typed(Value::String(s.clone()), DataType::String),
        Literal::Bool(b) => typed(Value::Bool(*b), DataType::Bool),
    }
}
