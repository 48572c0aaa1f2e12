//! The scalar function registry (DESIGN §7) and how calls are checked.
//!
//! Every function the language knows is a [`Function`] variant; [`Function::ALL`] is the
//! registry, and the table below is each one's signature. Parameter words: `s` is `STRING`,
//! `n` is any integer type (`U8`…`I64`; an integer literal is `I64`), `x` is any numeric type,
//! `t` is `DATETIME`, `T` is any type. Unless a row says otherwise, the result is nullable when
//! an argument is and SENSITIVE when an argument is. A *literal* parameter must be written as a
//! literal, so the VM prepares it once and the checker can refuse a bad one before deployment.
//!
//! | function | signature | result null when |
//! |---|---|---|
//! | `now` | `now() -> DATETIME` — the execution snapshot instant; nondeterministic | never |
//! | `uuid_v4`, `uuid_v7` | `() -> STRING`; nondeterministic | never |
//! | `leak_sensitive` | `(T) -> T`, **not** SENSITIVE | argument is |
//! | `coalesce` | `(T, T, …) -> T`, at least 2 arguments of one type | **all** arguments are |
//! | `is_null` | `(T) -> BOOL` | never |
//! | `nullif` | `(T, T) -> T`, scalar `T` | always nullable |
//! | `lower`, `upper`, `initcap`, `reverse`, `md5` | `(s) -> STRING` (`md5`: 32 hex digits) | propagate |
//! | `trim`, `ltrim`, `rtrim`, `btrim` | `(s [, characters s]) -> STRING` | propagate |
//! | `length`, `char_length` | `(s) -> I64`, in characters | propagate |
//! | `concat` | `(s, …) -> STRING`, at least 1; a null argument counts as `''` | never |
//! | `substr` | `(s, start n [, count n]) -> STRING`, 1-based | propagate |
//! | `left`, `right`, `repeat` | `(s, n) -> STRING` | propagate |
//! | `lpad`, `rpad` | `(s, length n [, fill s]) -> STRING` | propagate |
//! | `replace` | `(s, from s, to s) -> STRING` | propagate |
//! | `split_part` | `(s, delimiter s, index n) -> STRING`, 1-based | propagate |
//! | `strpos` | `(s, substring s) -> I64`, 1-based, 0 when absent | propagate |
//! | `starts_with`, `ends_with`, `contains` | `(s, s) -> BOOL` | propagate |
//! | `to_hex` | `(n or BYTES) -> STRING` | propagate |
//! | `regexp_like` | `(s, pattern literal [, flags literal]) -> BOOL` | propagate |
//! | `regexp_replace` | `(s, pattern literal, replacement s [, flags literal]) -> STRING`; flag `g` replaces every match | propagate |
//! | `regexp_substr` | `(s, pattern literal [, flags literal]) -> STRING`, the first match | always nullable (no match) |
//! | `regexp_extract` | `(s, pattern literal [, group integer literal ≥ 0]) -> STRING` | always nullable (no match) |
//! | `abs`, `ceil`, `floor` | `(x) -> x's type` | propagate |
//! | `round` | `(x [, digits n]) -> x's type` | propagate |
//! | `sqrt`, `exp`, `ln`, `sin`, `cos`, `tan` | `(x) -> F64` (computed in F64) | propagate |
//! | `log` | `(x) -> F64` base 10, or `(base x, x) -> F64` | propagate |
//! | `pow` | `(x, x) -> F64` | propagate |
//! | `mod` | `(a, b) -> a's type`, one integer type (as `%`) | propagate |
//! | `read_header` | `(name s) -> STRING`, first value; needs a header context | always nullable (absent) |
//! | `read_headers` | `(name s) -> LIST<STRING>`, every value in order; needs a header context | never (empty list) |
//! | `write_header` | `(name s, value s) -> BOOL` (always TRUE); emitters only; side effect; arguments must not be SENSITIVE | never |
//! | `date_trunc` | `(unit literal, t) -> DATETIME`; unit `microsecond millisecond second minute hour day week month quarter year` | propagate |
//! | `date_bin` | `(stride literal, t [, origin t]) -> DATETIME`; stride an NSPL duration (`'15m'`), replaced by its I64 nanoseconds in the typed tree; origin defaults to the Unix epoch | propagate |
//! | `extract` | `(field literal, t) -> I64`; field `year quarter month week day dow doy hour minute second millisecond microsecond nanosecond epoch` | propagate |
//! | `parse_datetime` | `(s, format s) -> DATETIME` | always nullable (no match) |
//! | `format_datetime` | `(t, format s) -> STRING` | propagate |
//!
//! Regex flags: `i` (case-insensitive), `m` (multi-line), `s` (`.` matches newline), `x`
//! (verbose), and for `regexp_replace` also `g` (every match). Unit, field and flag literals
//! are case-insensitive and stored lower-case.

use nervix_nspl::ast::{Expr, Ident};
use nervix_nspl::Span;

use super::check::{flags, Checker};
use super::literal::{common_target, resolve, Operand};
use super::{Aggregate, DataType, FieldType, TypeError, TypedExpr, TypedKind, Value};

macro_rules! functions {
    ($($variant:ident = $name:literal, $min:literal ..= $max:expr;)*) => {
        /// A scalar function of DESIGN §7; see the module table for signatures.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
        pub enum Function {
            $($variant,)*
        }

        impl Function {
            /// The registry: every function, in table order.
            pub const ALL: &'static [Function] = &[$(Function::$variant,)*];

            /// The name calls use (lower-case).
            pub fn name(self) -> &'static str {
                match self {
                    $(Function::$variant => $name,)*
                }
            }

            /// The least and (if bounded) most arguments.
            pub fn arity(self) -> (usize, Option<usize>) {
                match self {
                    $(Function::$variant => ($min, $max),)*
                }
            }
        }
    };
}

functions! {
    Now = "now", 0..=Some(0);
    UuidV4 = "uuid_v4", 0..=Some(0);
    UuidV7 = "uuid_v7", 0..=Some(0);
    LeakSensitive = "leak_sensitive", 1..=Some(1);
    Coalesce = "coalesce", 2..=None;
    IsNull = "is_null", 1..=Some(1);
    NullIf = "nullif", 2..=Some(2);
    Lower = "lower", 1..=Some(1);
    Upper = "upper", 1..=Some(1);
    Trim = "trim", 1..=Some(2);
    Ltrim = "ltrim", 1..=Some(2);
    Rtrim = "rtrim", 1..=Some(2);
    Btrim = "btrim", 1..=Some(2);
    Length = "length", 1..=Some(1);
    CharLength = "char_length", 1..=Some(1);
    Concat = "concat", 1..=None;
    Substr = "substr", 2..=Some(3);
    Left = "left", 2..=Some(2);
    Right = "right", 2..=Some(2);
    Lpad = "lpad", 2..=Some(3);
    Rpad = "rpad", 2..=Some(3);
    Replace = "replace", 3..=Some(3);
    Reverse = "reverse", 1..=Some(1);
    Repeat = "repeat", 2..=Some(2);
    SplitPart = "split_part", 3..=Some(3);
    Strpos = "strpos", 2..=Some(2);
    StartsWith = "starts_with", 2..=Some(2);
    EndsWith = "ends_with", 2..=Some(2);
    Contains = "contains", 2..=Some(2);
    Initcap = "initcap", 1..=Some(1);
    Md5 = "md5", 1..=Some(1);
    ToHex = "to_hex", 1..=Some(1);
    RegexpLike = "regexp_like", 2..=Some(3);
    RegexpReplace = "regexp_replace", 3..=Some(4);
    RegexpSubstr = "regexp_substr", 2..=Some(3);
    RegexpExtract = "regexp_extract", 2..=Some(3);
    Abs = "abs", 1..=Some(1);
    Ceil = "ceil", 1..=Some(1);
    Floor = "floor", 1..=Some(1);
    Round = "round", 1..=Some(2);
    Sqrt = "sqrt", 1..=Some(1);
    Exp = "exp", 1..=Some(1);
    Ln = "ln", 1..=Some(1);
    Log = "log", 1..=Some(2);
    Pow = "pow", 2..=Some(2);
    Sin = "sin", 1..=Some(1);
    Cos = "cos", 1..=Some(1);
    Tan = "tan", 1..=Some(1);
    Mod = "mod", 2..=Some(2);
    ReadHeader = "read_header", 1..=Some(1);
    ReadHeaders = "read_headers", 1..=Some(1);
    WriteHeader = "write_header", 2..=Some(2);
    DateTrunc = "date_trunc", 2..=Some(2);
    DateBin = "date_bin", 2..=Some(3);
    Extract = "extract", 2..=Some(2);
    ParseDatetime = "parse_datetime", 2..=Some(2);
    FormatDatetime = "format_datetime", 2..=Some(2);
}

impl Function {
    /// The function called `name` (any case), if any.
    pub fn from_name(name: &str) -> Option<Function> {
        Function::ALL
            .iter()
            .copied()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// Gives a different value on each call (refused in constant positions).
    pub fn is_nondeterministic(self) -> bool {
        matches!(self, Function::Now | Function::UuidV4 | Function::UuidV7)
    }

    /// Changes something outside the expression (refused in constant positions).
    pub fn has_side_effects(self) -> bool {
        self == Function::WriteHeader
    }

    /// Reads the message's transport headers (needs a header context).
    pub fn reads_headers(self) -> bool {
        matches!(self, Function::ReadHeader | Function::ReadHeaders)
    }
}

/// `date_trunc` units.
pub const DATE_TRUNC_UNITS: &[&str] = &[
    "microsecond",
    "millisecond",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "quarter",
    "year",
];

/// `extract` fields.
pub const EXTRACT_FIELDS: &[&str] = &[
    "year",
    "quarter",
    "month",
    "week",
    "day",
    "dow",
    "doy",
    "hour",
    "minute",
    "second",
    "millisecond",
    "microsecond",
    "nanosecond",
    "epoch",
];

/// What a parameter accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Param {
    String,
    Datetime,
    Bool,
    /// Any integer type.
    Integer,
    /// Any numeric type.
    Numeric,
    /// Numeric, `STRING` or `DATETIME`.
    Orderable,
    /// Any integer type or `BYTES`.
    IntegerOrBytes,
    /// Anything but `ARRAY`, `VEC`, `LIST`.
    Scalar,
    Any,
}

impl Param {
    fn accepts(self, t: &DataType) -> bool {
        match self {
            Param::String => *t == DataType::String,
            Param::Datetime => *t == DataType::Datetime,
            Param::Bool => *t == DataType::Bool,
            Param::Integer => t.is_integer(),
            Param::Numeric => t.is_numeric(),
            Param::Orderable => t.is_orderable(),
            Param::IntegerOrBytes => t.is_integer() || *t == DataType::Bytes,
            Param::Scalar => t.is_scalar(),
            Param::Any => true,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Param::String => "STRING",
            Param::Datetime => "DATETIME",
            Param::Bool => "BOOL",
            Param::Integer => "an integer (U8 to I64)",
            Param::Numeric => "numeric",
            Param::Orderable => "orderable (numeric, STRING or DATETIME)",
            Param::IntegerOrBytes => "an integer or BYTES",
            Param::Scalar => "a scalar value",
            Param::Any => "a value",
        }
    }

    fn target(self) -> Option<DataType> {
        match self {
            Param::String => Some(DataType::String),
            Param::Datetime => Some(DataType::Datetime),
            Param::Bool => Some(DataType::Bool),
            _ => None,
        }
    }
}

/// How a call's result nullability follows from its arguments.
enum Nulls {
    /// Nullable when any argument is.
    Propagate,
    Always,
    Never,
    /// Nullable only when every argument is (`coalesce`).
    AllArguments,
}

/// `lower takes 1 argument, found 2`, or nothing when `found` is within the arity.
pub(super) fn check_arity(
    name: &str,
    (min, max): (usize, Option<usize>),
    found: usize,
    span: Span,
) -> Result<(), TypeError> {
    if found >= min && max.is_none_or(|max| found <= max) {
        return Ok(());
    }
    let plural = |n: usize| if n == 1 { "argument" } else { "arguments" };
    let takes = match max {
        Some(0) => "no arguments".to_string(),
        Some(max) if max == min => format!("{min} {}", plural(min)),
        Some(max) if max == min + 1 => format!("{min} or {max} arguments"),
        Some(max) => format!("{min} to {max} arguments"),
        None => format!("at least {min} {}", plural(min)),
    };
    Err(TypeError::new(
        span,
        format!("{name} takes {takes}, found {found}"),
    ))
}

/// Levenshtein distance between two short names.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len().abs_diff(b.len()) > 2 || a.len() > 64 || b.len() > 64 {
        return usize::MAX;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The closest of `candidates` within two edits of `name` (one edit for names of four letters
/// or fewer, where two edits reach almost any short name).
pub(super) fn did_you_mean<'n>(name: &str, candidates: &[&'n str]) -> Option<&'n str> {
    let lower = name.to_ascii_lowercase();
    let max_edits = if lower.len() <= 4 { 1 } else { 2 };
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let d = edit_distance(&lower, &candidate.to_ascii_lowercase());
        if d <= max_edits && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// The text of a `STRING` literal argument.
fn string_literal(arg: &TypedExpr) -> Option<&str> {
    match &arg.kind {
        TypedKind::Literal(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// A positive NSPL duration (`250ms`, `15m`, `1d`) in nanoseconds.
fn parse_duration(text: &str) -> Option<i64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = text.split_at(split);
    let value: i64 = digits.parse().ok()?;
    let scale: i64 = match unit.to_ascii_lowercase().as_str() {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return None,
    };
    value.checked_mul(scale).filter(|n| *n > 0)
}

impl Checker<'_> {
    /// Checks a call: a window aggregate, a function, or an unknown name.
    pub(super) fn call(
        &mut self,
        name: &Ident,
        args: &[Expr],
        span: Span,
    ) -> Result<Operand, TypeError> {
        if let Some(aggregate) = Aggregate::from_name(&name.name) {
            return self.aggregate(aggregate, args, span);
        }
        if let Some(function) = Function::from_name(&name.name) {
            return self.function(function, args, span);
        }
        let mut known: Vec<&str> = Function::ALL.iter().map(|f| f.name()).collect();
        if self.ctx.aggregates {
            known.extend(Aggregate::ALL.iter().map(|a| a.name()));
        }
        let suggestion = did_you_mean(&name.name, &known)
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        let mut functions: Vec<&str> = Function::ALL.iter().map(|f| f.name()).collect();
        functions.sort_unstable();
        let mut message = format!(
            "unknown function `{}`{suggestion} (functions: {}",
            name.name,
            functions.join(", ")
        );
        if self.ctx.aggregates {
            let aggregates: Vec<&str> = Aggregate::ALL.iter().map(|a| a.name()).collect();
            message.push_str(&format!("; window aggregates: {}", aggregates.join(", ")));
        }
        message.push(')');
        Err(TypeError::new(name.span, message))
    }

    /// Refuses `function` where the context does not allow it.
    fn gate(&self, function: Function, span: Span) -> Result<(), TypeError> {
        let name = function.name();
        if self.ctx.constant_only {
            let why = if function.is_nondeterministic() {
                Some("it is nondeterministic")
            } else if function.has_side_effects() {
                Some("it has side effects")
            } else if function.reads_headers() {
                Some("it reads the message's headers")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(TypeError::new(
                    span,
                    format!("a constant expression cannot call {name}: {why}"),
                ));
            }
        }
        if function.reads_headers() {
            if let Err(refusal) = &self.ctx.headers {
                return Err(TypeError::new(span, refusal.clone()));
            }
        }
        if function.has_side_effects() && !self.ctx.write_header {
            return Err(TypeError::new(
                span,
                format!("{name} is only available in an emitter's INVOKE"),
            ));
        }
        Ok(())
    }

    /// Gives `operand` (argument `index`, 0-based, of `name`) a type `param` accepts.
    pub(super) fn param(
        name: &str,
        index: usize,
        operand: Operand,
        param: Param,
    ) -> Result<TypedExpr, TypeError> {
        let typed = resolve(operand, param.target().as_ref())?;
        if !param.accepts(&typed.ty.data_type) {
            return Err(TypeError::new(
                typed.span,
                format!(
                    "argument {} of {name} must be {}, found {}",
                    index + 1,
                    param.describe(),
                    typed.ty.data_type
                ),
            ));
        }
        Ok(typed)
    }

    /// Types every argument with the parameter at its position (the last repeats).
    fn params(
        name: &str,
        operands: Vec<Operand>,
        params: &[Param],
    ) -> Result<Vec<TypedExpr>, TypeError> {
        operands
            .into_iter()
            .enumerate()
            .map(|(i, operand)| {
                let param = params
                    .get(i)
                    .or(params.last())
                    .copied()
                    .unwrap_or(Param::Any);
                Checker::param(name, i, operand, param)
            })
            .collect()
    }

    /// Gives every argument one type, refusing a mismatch naming both types.
    fn one_type(
        name: &str,
        operands: Vec<Operand>,
        span: Span,
    ) -> Result<Vec<TypedExpr>, TypeError> {
        let Some(target) = common_target(&operands) else {
            return Err(TypeError::new(
                span,
                format!(
                    "cannot infer the type of {name}: every argument is NULL; write NULL AS <type>"
                ),
            ));
        };
        let typed = operands
            .into_iter()
            .map(|o| resolve(o, Some(&target)))
            .collect::<Result<Vec<_>, _>>()?;
        // Blame the first argument, in source order, that differs from the first argument.
        if let Some(first) = typed.first() {
            let first = &first.ty.data_type;
            if let Some(other) = typed.iter().find(|a| a.ty.data_type != *first) {
                return Err(TypeError::new(
                    other.span,
                    format!(
                        "{name} arguments must have one type, found {first} and {}: \
                         no implicit casts",
                        other.ty.data_type
                    ),
                ));
            }
        }
        Ok(typed)
    }

    fn function(
        &mut self,
        function: Function,
        args: &[Expr],
        span: Span,
    ) -> Result<Operand, TypeError> {
        use Function as F;
        use Param as P;
        let name = function.name();
        check_arity(name, function.arity(), args.len(), span)?;
        self.gate(function, span)?;
        let operands = args
            .iter()
            .map(|a| self.expr(a))
            .collect::<Result<Vec<_>, _>>()?;
        let typed_params = |operands, params: &[Param]| Checker::params(name, operands, params);
        let (args, result, nulls) = match function {
            F::Now => (vec![], DataType::Datetime, Nulls::Never),
            F::UuidV4 | F::UuidV7 => (vec![], DataType::String, Nulls::Never),
            F::LeakSensitive => {
                let args = typed_params(operands, &[P::Any])?;
                let t = args[0].ty.data_type.clone();
                (args, t, Nulls::Propagate)
            }
            F::Coalesce => {
                let args = Checker::one_type(name, operands, span)?;
                let t = args[0].ty.data_type.clone();
                (args, t, Nulls::AllArguments)
            }
            F::IsNull => (
                typed_params(operands, &[P::Any])?,
                DataType::Bool,
                Nulls::Never,
            ),
            F::NullIf => {
                let args = Checker::one_type(name, operands, span)?;
                let t = args[0].ty.data_type.clone();
                if !t.is_scalar() {
                    return Err(TypeError::new(
                        span,
                        format!("nullif compares scalar values, found {t}"),
                    ));
                }
                (args, t, Nulls::Always)
            }
            F::Lower | F::Upper | F::Initcap | F::Reverse | F::Md5 => {
                let args = typed_params(operands, &[P::String])?;
                (args, DataType::String, Nulls::Propagate)
            }
            F::Trim | F::Ltrim | F::Rtrim | F::Btrim | F::Replace => {
                let args = typed_params(operands, &[P::String])?;
                (args, DataType::String, Nulls::Propagate)
            }
            F::Length | F::CharLength | F::Strpos => {
                let args = typed_params(operands, &[P::String])?;
                (args, DataType::I64, Nulls::Propagate)
            }
            F::Concat => {
                let args = typed_params(operands, &[P::String])?;
                (args, DataType::String, Nulls::Never)
            }
            F::Substr | F::Left | F::Right | F::Repeat => {
                let args = typed_params(operands, &[P::String, P::Integer])?;
                (args, DataType::String, Nulls::Propagate)
            }
            F::Lpad | F::Rpad => {
                let args = typed_params(operands, &[P::String, P::Integer, P::String])?;
                (args, DataType::String, Nulls::Propagate)
            }
            F::SplitPart => {
                let args = typed_params(operands, &[P::String, P::String, P::Integer])?;
                (args, DataType::String, Nulls::Propagate)
            }
            F::StartsWith | F::EndsWith | F::Contains => {
                let args = typed_params(operands, &[P::String])?;
                (args, DataType::Bool, Nulls::Propagate)
            }
            F::ToHex => {
                let args = typed_params(operands, &[P::IntegerOrBytes])?;
                (args, DataType::String, Nulls::Propagate)
            }
            F::RegexpLike | F::RegexpReplace | F::RegexpSubstr | F::RegexpExtract => {
                self.regex(function, operands)?
            }
            F::Abs | F::Ceil | F::Floor | F::Round => {
                let args = typed_params(operands, &[P::Numeric, P::Integer])?;
                let t = args[0].ty.data_type.clone();
                (args, t, Nulls::Propagate)
            }
            F::Sqrt | F::Exp | F::Ln | F::Log | F::Pow | F::Sin | F::Cos | F::Tan => {
                let args = typed_params(operands, &[P::Numeric])?;
                (args, DataType::F64, Nulls::Propagate)
            }
            F::Mod => {
                let args = Checker::one_type(name, operands, span)?;
                let t = args[0].ty.data_type.clone();
                if !t.is_integer() {
                    return Err(TypeError::new(
                        span,
                        format!("mod needs arguments of one integer type, found {t} and {t}"),
                    ));
                }
                (args, t, Nulls::Propagate)
            }
            F::ReadHeader => {
                let args = typed_params(operands, &[P::String])?;
                (args, DataType::String, Nulls::Always)
            }
            F::ReadHeaders => {
                let args = typed_params(operands, &[P::String])?;
                let list = DataType::List(Box::new(DataType::String));
                (args, list, Nulls::Never)
            }
            F::WriteHeader => {
                let args = typed_params(operands, &[P::String])?;
                if let Some(secret) = args.iter().find(|a| a.ty.sensitive) {
                    return Err(TypeError::new(
                        secret.span,
                        "write_header would send a SENSITIVE value out of the system; \
                         wrap it in leak_sensitive(…) to allow it",
                    ));
                }
                (args, DataType::Bool, Nulls::Never)
            }
            F::DateTrunc | F::Extract => {
                let mut args = typed_params(operands, &[P::String, P::Datetime])?;
                let (what, allowed, result) = if function == F::DateTrunc {
                    ("unit", DATE_TRUNC_UNITS, DataType::Datetime)
                } else {
                    ("field", EXTRACT_FIELDS, DataType::I64)
                };
                let word = string_literal(&args[0]).map(str::to_ascii_lowercase);
                match word {
                    Some(word) if allowed.contains(&word.as_str()) => {
                        args[0].kind = TypedKind::Literal(Value::String(word));
                    }
                    _ => {
                        return Err(TypeError::new(
                            args[0].span,
                            format!(
                                "the {what} of {name} must be a STRING literal, one of: {}",
                                allowed.join(", ")
                            ),
                        ))
                    }
                }
                (args, result, Nulls::Propagate)
            }
            F::DateBin => {
                let mut args = typed_params(operands, &[P::String, P::Datetime])?;
                let Some(nanos) = string_literal(&args[0]).and_then(parse_duration) else {
                    return Err(TypeError::new(
                        args[0].span,
                        "the stride of date_bin must be a positive duration literal such as '15m' \
                         (units ns us ms s m h d)",
                    ));
                };
                args[0].kind = TypedKind::Literal(Value::Int(nanos));
                args[0].ty.data_type = DataType::I64;
                (args, DataType::Datetime, Nulls::Propagate)
            }
            F::ParseDatetime => {
                let args = typed_params(operands, &[P::String])?;
                (args, DataType::Datetime, Nulls::Always)
            }
            F::FormatDatetime => {
                let args = typed_params(operands, &[P::Datetime, P::String])?;
                (args, DataType::String, Nulls::Propagate)
            }
        };
        let (any_nullable, any_sensitive) = flags(&args);
        let nullable = match nulls {
            Nulls::Propagate => any_nullable,
            Nulls::Always => true,
            Nulls::Never => false,
            Nulls::AllArguments => args.iter().all(|a| a.ty.nullable),
        };
        let sensitive = any_sensitive && function != F::LeakSensitive;
        Ok(Operand::Typed(TypedExpr {
            kind: TypedKind::Call { function, args },
            ty: FieldType {
                data_type: result,
                nullable,
                sensitive,
            },
            span,
        }))
    }

    /// The regex functions: pattern and flags must be STRING literals.
    fn regex(
        &mut self,
        function: Function,
        operands: Vec<Operand>,
    ) -> Result<(Vec<TypedExpr>, DataType, Nulls), TypeError> {
        use Function as F;
        let name = function.name();
        let params: &[Param] = match function {
            F::RegexpExtract => &[Param::String, Param::String, Param::Integer],
            _ => &[Param::String],
        };
        let mut args = Checker::params(name, operands, params)?;
        if string_literal(&args[1]).is_none() {
            return Err(TypeError::new(
                args[1].span,
                format!("the pattern of {name} must be a STRING literal, so it is compiled once"),
            ));
        }
        let flags_at = match function {
            F::RegexpReplace => Some(3),
            F::RegexpExtract => None,
            _ => Some(2),
        };
        let allowed = if function == F::RegexpReplace {
            "imsxg"
        } else {
            "imsx"
        };
        if let Some(flags_arg) = flags_at.and_then(|i| args.get_mut(i)) {
            let text = string_literal(flags_arg).map(str::to_ascii_lowercase);
            match text {
                Some(text) if text.chars().all(|c| allowed.contains(c)) => {
                    flags_arg.kind = TypedKind::Literal(Value::String(text));
                }
                _ => {
                    let listed: Vec<String> = allowed.chars().map(String::from).collect();
                    return Err(TypeError::new(
                        flags_arg.span,
                        format!(
                            "the flags of {name} must be a STRING literal of {}",
                            listed.join(" ")
                        ),
                    ));
                }
            }
        }
        if function == F::RegexpExtract {
            if let Some(group) = args.get(2) {
                if !matches!(group.kind, TypedKind::Literal(Value::Int(n)) if n >= 0) {
                    return Err(TypeError::new(
                        group.span,
                        "the group of regexp_extract must be an integer literal of at least 0",
                    ));
                }
            }
        }
        Ok(match function {
            F::RegexpLike => (args, DataType::Bool, Nulls::Propagate),
            F::RegexpReplace => (args, DataType::String, Nulls::Propagate),
            _ => (args, DataType::String, Nulls::Always),
        })
    }
}
