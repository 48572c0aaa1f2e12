//! Compilation: a checked [`TypedExpr`] becomes a tree of [`Node`]s, built once.
//!
//! Correct because it is a one-to-one walk of the typed tree that only *adds* preparation:
//! field paths become [`ColumnSlot`]s (unknown ones are refused by name), literals become
//! one-row arrays of their node's Arrow type, regexes are compiled with their flags, JSONPaths
//! and literal parameters (`date_trunc` units, `extract` fields, `date_bin` strides,
//! `regexp_extract` groups) are parsed, and everything that cannot be prepared is a
//! [`VmError`] now rather than a failure per batch. The typed tree is at most
//! `MAX_EXPRESSION_DEPTH` deep, which bounds this recursion and the evaluator's.

use arrow_array::ArrayRef;
use nervix_nspl::ast::{BinaryOp, UnaryOp};
use regex::Regex;

use super::arrow_types::{arrow_type, literal_array};
use super::json::{parse_path, PathStep};
use super::{ColumnSlot, VmError};
use crate::types::{DataType, Function, TypedExpr, TypedKind, Value};

/// One compiled node: what it computes and its result type.
pub(crate) struct Node {
    pub kind: NodeKind,
    pub ty: DataType,
    pub arrow: arrow_schema::DataType,
    /// The value is SENSITIVE: error messages do not quote it.
    pub sensitive: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl Arith {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Arith::Add => "+",
            Arith::Sub => "-",
            Arith::Mul => "*",
            Arith::Div => "/",
            Arith::Rem => "%",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

/// A prepared literal parameter of a function call.
pub(crate) enum Prepared {
    None,
    Regex {
        re: Regex,
        global: bool,
    },
    RegexGroup {
        re: Regex,
        group: usize,
    },
    /// A `date_trunc` unit or `extract` field, lower-case.
    Word(String),
    /// A `date_bin` stride in nanoseconds.
    Stride(i64),
}

pub(crate) enum NodeKind {
    /// A one-row array of the node's type (a scalar, broadcast only when needed).
    Literal(ArrayRef),
    Field {
        slot: ColumnSlot,
        path: String,
    },
    Neg(Box<Node>),
    Not(Box<Node>),
    Arith(Arith, Box<Node>, Box<Node>),
    Concat(Box<Node>, Box<Node>),
    Cmp(Cmp, Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cast {
        expr: Box<Node>,
        try_cast: bool,
    },
    IsNull {
        expr: Box<Node>,
        negated: bool,
    },
    InList {
        expr: Box<Node>,
        list: Vec<Node>,
        negated: bool,
    },
    Between {
        expr: Box<Node>,
        low: Box<Node>,
        high: Box<Node>,
        negated: bool,
    },
    If {
        condition: Box<Node>,
        then: Box<Node>,
        otherwise: Box<Node>,
    },
    Case {
        operand: Option<Box<Node>>,
        branches: Vec<(Node, Node)>,
        otherwise: Option<Box<Node>>,
    },
    Call {
        function: Function,
        args: Vec<Node>,
        prepared: Prepared,
    },
    JsonValue {
        doc: Box<Node>,
        path: Vec<PathStep>,
    },
}

/// Compiles `expr`; see the module docs.
pub(crate) fn compile(
    expr: &TypedExpr,
    resolve: &dyn Fn(&[String]) -> Option<ColumnSlot>,
) -> Result<Node, VmError> {
    let c = |e: &TypedExpr| compile(e, resolve).map(Box::new);
    let kind = match &expr.kind {
        TypedKind::Literal(value) => {
            let array = literal_array(value, &expr.ty.data_type).ok_or_else(|| {
                VmError::InvalidArgument {
                    message: format!("literal {value:?} cannot be a {}", expr.ty.data_type),
                }
            })?;
            NodeKind::Literal(array)
        }
        TypedKind::Field(path) => {
            let slot = resolve(path).ok_or_else(|| VmError::UnknownField {
                path: path.join("."),
            })?;
            NodeKind::Field {
                slot,
                path: path.join("."),
            }
        }
        TypedKind::Unary { op, expr: inner } => match op {
            UnaryOp::Neg => NodeKind::Neg(c(inner)?),
            UnaryOp::Not => NodeKind::Not(c(inner)?),
        },
        TypedKind::Binary { op, left, right } => {
            let (l, r) = (c(left)?, c(right)?);
            match op {
                BinaryOp::Or => NodeKind::Or(l, r),
                BinaryOp::And => NodeKind::And(l, r),
                BinaryOp::Eq => NodeKind::Cmp(Cmp::Eq, l, r),
                BinaryOp::NotEq => NodeKind::Cmp(Cmp::NotEq, l, r),
                BinaryOp::Lt => NodeKind::Cmp(Cmp::Lt, l, r),
                BinaryOp::LtEq => NodeKind::Cmp(Cmp::LtEq, l, r),
                BinaryOp::Gt => NodeKind::Cmp(Cmp::Gt, l, r),
                BinaryOp::GtEq => NodeKind::Cmp(Cmp::GtEq, l, r),
                BinaryOp::Concat => NodeKind::Concat(l, r),
                BinaryOp::Add => NodeKind::Arith(Arith::Add, l, r),
                BinaryOp::Sub => NodeKind::Arith(Arith::Sub, l, r),
                BinaryOp::Mul => NodeKind::Arith(Arith::Mul, l, r),
                BinaryOp::Div => NodeKind::Arith(Arith::Div, l, r),
                BinaryOp::Mod => NodeKind::Arith(Arith::Rem, l, r),
            }
        }
        TypedKind::Cast {
            expr: inner,
            try_cast,
            ..
        } => NodeKind::Cast {
            expr: c(inner)?,
            try_cast: *try_cast,
        },
        TypedKind::IsNull {
            expr: inner,
            negated,
        } => NodeKind::IsNull {
            expr: c(inner)?,
            negated: *negated,
        },
        TypedKind::InList {
            expr: inner,
            list,
            negated,
        } => NodeKind::InList {
            expr: c(inner)?,
            list: list
                .iter()
                .map(|e| compile(e, resolve))
                .collect::<Result<_, _>>()?,
            negated: *negated,
        },
        TypedKind::Between {
            expr: inner,
            low,
            high,
            negated,
        } => NodeKind::Between {
            expr: c(inner)?,
            low: c(low)?,
            high: c(high)?,
            negated: *negated,
        },
        TypedKind::If {
            condition,
            then,
            otherwise,
        } => NodeKind::If {
            condition: c(condition)?,
            then: c(then)?,
            otherwise: c(otherwise)?,
        },
        TypedKind::Case {
            operand,
            branches,
            otherwise,
        } => NodeKind::Case {
            operand: operand.as_deref().map(c).transpose()?,
            branches: branches
                .iter()
                .map(|(w, t)| Ok((compile(w, resolve)?, compile(t, resolve)?)))
                .collect::<Result<_, VmError>>()?,
            otherwise: otherwise.as_deref().map(c).transpose()?,
        },
        TypedKind::Call { function, args } => {
            let prepared = prepare(*function, args)?;
            let args = args
                .iter()
                .map(|e| compile(e, resolve))
                .collect::<Result<_, _>>()?;
            NodeKind::Call {
                function: *function,
                args,
                prepared,
            }
        }
        TypedKind::Aggregate { aggregate, .. } => {
            return Err(VmError::Unsupported {
                what: format!(
                    "window aggregate {} is evaluated by its window, not the expression VM",
                    aggregate.name()
                ),
            })
        }
        TypedKind::JsonValue { doc, path, .. } => NodeKind::JsonValue {
            doc: c(doc)?,
            path: parse_path(path).map_err(|message| VmError::InvalidArgument { message })?,
        },
    };
    Ok(Node {
        kind,
        ty: expr.ty.data_type.clone(),
        arrow: arrow_type(&expr.ty.data_type),
        sensitive: expr.ty.sensitive,
    })
}

fn string_arg(args: &[TypedExpr], i: usize) -> Option<&str> {
    match args.get(i).map(|a| &a.kind) {
        Some(TypedKind::Literal(Value::String(s))) => Some(s),
        _ => None,
    }
}

/// The largest compiled regex program, so a pattern cannot claim unbounded memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

fn build_regex(pattern: &str, flags: &str) -> Result<Regex, VmError> {
    regex::RegexBuilder::new(pattern)
        .case_insensitive(flags.contains('i'))
        .multi_line(flags.contains('m'))
        .dot_matches_new_line(flags.contains('s'))
        .ignore_whitespace(flags.contains('x'))
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| VmError::InvalidRegex {
            pattern: pattern.to_string(),
            message: e.to_string(),
        })
}

/// Prepares the literal parameters of a call.
fn prepare(function: Function, args: &[TypedExpr]) -> Result<Prepared, VmError> {
    use Function as F;
    let missing = |what: &str| VmError::InvalidArgument {
        message: format!("{what} of {} must be a STRING literal", function.name()),
    };
    Ok(match function {
        // Header reads are evaluated against the envelope the runtime passes (or fail per row
        // without one); header writes belong to HTTP REQUEST emitters, not the VM.
        F::WriteHeader => {
            return Err(VmError::Unsupported {
                what: format!(
                    "{} is an emitter clause, not an expression",
                    function.name()
                ),
            })
        }
        F::RegexpLike | F::RegexpSubstr => {
            let pattern = string_arg(args, 1).ok_or_else(|| missing("the pattern"))?;
            let flags = string_arg(args, 2).unwrap_or("");
            Prepared::Regex {
                re: build_regex(pattern, flags)?,
                global: false,
            }
        }
        F::RegexpReplace => {
            let pattern = string_arg(args, 1).ok_or_else(|| missing("the pattern"))?;
            let flags = string_arg(args, 3).unwrap_or("");
            Prepared::Regex {
                re: build_regex(pattern, flags)?,
                global: flags.contains('g'),
            }
        }
        F::RegexpExtract => {
            let pattern = string_arg(args, 1).ok_or_else(|| missing("the pattern"))?;
            let re = build_regex(pattern, "")?;
            let group = match args.get(2).map(|a| &a.kind) {
                None => 0,
                Some(TypedKind::Literal(Value::Int(n))) if *n >= 0 => {
                    usize::try_from(*n).unwrap_or(usize::MAX)
                }
                Some(TypedKind::Literal(Value::UInt(n))) => {
                    usize::try_from(*n).unwrap_or(usize::MAX)
                }
                Some(_) => {
                    return Err(VmError::InvalidArgument {
                        message: "the group of regexp_extract must be an integer literal of at \
                                  least 0"
                            .to_string(),
                    })
                }
            };
            if group >= re.captures_len() {
                return Err(VmError::InvalidArgument {
                    message: format!(
                        "regexp_extract group {group} does not exist: '{pattern}' has {} group(s)",
                        re.captures_len() - 1
                    ),
                });
            }
            Prepared::RegexGroup { re, group }
        }
        F::DateTrunc | F::Extract => {
            let word = string_arg(args, 0).ok_or_else(|| missing("the unit"))?;
            Prepared::Word(word.to_ascii_lowercase())
        }
        F::DateBin => match args.first().map(|a| &a.kind) {
            Some(TypedKind::Literal(Value::Int(n))) if *n > 0 => Prepared::Stride(*n),
            _ => {
                return Err(VmError::InvalidArgument {
                    message: "the stride of date_bin must be a positive duration literal"
                        .to_string(),
                })
            }
        },
        _ => Prepared::None,
    })
}

impl Node {
    /// Whether `node` or any node below it satisfies `found` (a walk of the compiled tree, as
    /// deep as the typed tree, which `MAX_EXPRESSION_DEPTH` bounds).
    pub(crate) fn any(&self, found: &dyn Fn(&Node) -> bool) -> bool {
        if found(self) {
            return true;
        }
        let one = |n: &Node| n.any(found);
        match &self.kind {
            NodeKind::Literal(_) | NodeKind::Field { .. } => false,
            NodeKind::Neg(e) | NodeKind::Not(e) => one(e),
            NodeKind::Cast { expr, .. } | NodeKind::IsNull { expr, .. } => one(expr),
            NodeKind::Arith(_, l, r)
            | NodeKind::Concat(l, r)
            | NodeKind::Cmp(_, l, r)
            | NodeKind::And(l, r)
            | NodeKind::Or(l, r) => one(l) || one(r),
            NodeKind::InList { expr, list, .. } => one(expr) || list.iter().any(one),
            NodeKind::Between {
                expr, low, high, ..
            } => one(expr) || one(low) || one(high),
            NodeKind::If {
                condition,
                then,
                otherwise,
            } => one(condition) || one(then) || one(otherwise),
            NodeKind::Case {
                operand,
                branches,
                otherwise,
            } => {
                operand.as_deref().is_some_and(one)
                    || branches.iter().any(|(w, t)| one(w) || one(t))
                    || otherwise.as_deref().is_some_and(one)
            }
            NodeKind::Call { args, .. } => args.iter().any(one),
            NodeKind::JsonValue { doc, .. } => one(doc),
        }
    }
}
