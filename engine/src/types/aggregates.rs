//! Window aggregates (spec: Window processor) and how their calls are checked.
//!
//! Aggregates are allowed only where [`ExprContext::aggregates`](super::ExprContext) is set — a
//! window processor route's SET — and cannot be nested; their arguments are evaluated per input
//! row, which is the only place a window route may read `input.` (when
//! [`ExprContext::aggregate_arguments_read_input`](super::ExprContext) is set). An aggregate call
//! may sit inside a larger scalar expression (`COUNT(input.x) + 1`).
//!
//! Parameter words: `T` any type, `s` a scalar (not `ARRAY`/`VEC`/`LIST`), `o` orderable
//! (numeric, `STRING`, `DATETIME`), `x` numeric, `n` integer, `f` float. Aggregates ignore null
//! arguments. A window may hold no rows once stepping has removed them, and its arguments may all
//! be null, so every aggregate whose value is undefined over no values is nullable; the counting
//! aggregates are 0 instead. A result is SENSITIVE when an argument is.
//!
//! | aggregate | signature | null when |
//! |---|---|---|
//! | `COUNT` | `(T) -> I64`, non-null values | never (0) |
//! | `COUNT_IF` | `(BOOL) -> I64`, TRUE values | never (0) |
//! | `BOOL_AND`, `BOOL_OR` | `(BOOL) -> BOOL` | no values |
//! | `SUM` | `(n) -> I64`, `(f) -> F64`; integer overflow fails the row | no values |
//! | `AVG` | `(x) -> F64` | no values |
//! | `MIN`, `MAX` | `(o) -> o` | no values |
//! | `FIRST`, `LAST` | `(T) -> T`, the earliest / latest non-null value | no values |
//! | `ARG_MIN`, `ARG_MAX` | `(value T, key o) -> T`, the value at the least / greatest key | no keyed values |
//! | `VAR_POP`, `STDDEV_POP` | `(x) -> F64` | no values |
//! | `VAR_SAMP`, `STDDEV_SAMP` | `(x) -> F64` | fewer than 2 values |
//! | `COVAR_POP` | `(x, x) -> F64`, the two may differ in numeric type | no pairs |
//! | `COVAR_SAMP` | `(x, x) -> F64` | fewer than 2 pairs |
//! | `CORR` | `(x, x) -> F64` | fewer than 2 pairs, or a variance of 0 |
//! | `PERCENTILE_LINEAR_HISTOGRAM` | `(x, percentile literal in [0, 100], low literal, high literal, buckets integer literal in [1, 65536]) -> F64`: the percentile interpolated linearly within `buckets` equal-width buckets spanning `[low, high)` (values outside clamp to the edge buckets); `low < high` | no values |
//! | `APPROX_COUNT_DISTINCT` | `(s) -> I64` | never (0) |
//! | `APPROX_QUANTILE` | `(x, quantile literal in [0, 1]) -> F64` | no values |
//! | `APPROX_TOP_K` | `(s, k integer literal in [1, 1000]) -> VEC<s>`, most frequent first | never (empty) |
//!
//! Literal parameters are typed `F64` (percentile, bounds, quantile) or `I64` (buckets, k) in the
//! typed tree.

use nervix_nspl::ast::Expr;
use nervix_nspl::Span;

use super::check::{flags, Checker};
use super::functions::{check_arity, Param};
use super::literal::{resolve, Operand};
use super::{DataType, FieldType, TypeError, TypedExpr, TypedKind};

/// Most buckets a `PERCENTILE_LINEAR_HISTOGRAM` may declare.
pub const MAX_HISTOGRAM_BUCKETS: i128 = 65_536;

/// Largest `k` of `APPROX_TOP_K`.
pub const MAX_TOP_K: i128 = 1_000;

macro_rules! aggregates {
    ($($variant:ident = $name:literal, $min:literal ..= $max:literal;)*) => {
        /// A window aggregate; see the module table for signatures.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
        pub enum Aggregate {
            $($variant,)*
        }

        impl Aggregate {
            /// Every window aggregate, in table order.
            pub const ALL: &'static [Aggregate] = &[$(Aggregate::$variant,)*];

            /// The name as the spec writes it (calls are case-insensitive).
            pub fn name(self) -> &'static str {
                match self {
                    $(Aggregate::$variant => $name,)*
                }
            }

            /// The least and most arguments.
            pub fn arity(self) -> (usize, Option<usize>) {
                match self {
                    $(Aggregate::$variant => ($min, Some($max)),)*
                }
            }
        }
    };
}

aggregates! {
    Count = "COUNT", 1..=1;
    CountIf = "COUNT_IF", 1..=1;
    BoolAnd = "BOOL_AND", 1..=1;
    BoolOr = "BOOL_OR", 1..=1;
    Sum = "SUM", 1..=1;
    Avg = "AVG", 1..=1;
    Min = "MIN", 1..=1;
    Max = "MAX", 1..=1;
    First = "FIRST", 1..=1;
    Last = "LAST", 1..=1;
    ArgMin = "ARG_MIN", 2..=2;
    ArgMax = "ARG_MAX", 2..=2;
    VarPop = "VAR_POP", 1..=1;
    VarSamp = "VAR_SAMP", 1..=1;
    StddevPop = "STDDEV_POP", 1..=1;
    StddevSamp = "STDDEV_SAMP", 1..=1;
    CovarPop = "COVAR_POP", 2..=2;
    CovarSamp = "COVAR_SAMP", 2..=2;
    Corr = "CORR", 2..=2;
    PercentileLinearHistogram = "PERCENTILE_LINEAR_HISTOGRAM", 5..=5;
    ApproxCountDistinct = "APPROX_COUNT_DISTINCT", 1..=1;
    ApproxQuantile = "APPROX_QUANTILE", 2..=2;
    ApproxTopK = "APPROX_TOP_K", 2..=2;
}

impl Aggregate {
    /// The aggregate called `name` (any case), if any.
    pub fn from_name(name: &str) -> Option<Aggregate> {
        Aggregate::ALL
            .iter()
            .copied()
            .find(|a| a.name().eq_ignore_ascii_case(name))
    }

    /// The parameter each argument position accepts.
    fn params(self) -> &'static [Param] {
        use Aggregate as A;
        match self {
            A::Count | A::First | A::Last => &[Param::Any],
            A::CountIf | A::BoolAnd | A::BoolOr => &[Param::Bool],
            A::Min | A::Max => &[Param::Orderable],
            A::ArgMin | A::ArgMax => &[Param::Any, Param::Orderable],
            A::ApproxCountDistinct | A::ApproxTopK => &[Param::Scalar],
            A::Sum
            | A::Avg
            | A::VarPop
            | A::VarSamp
            | A::StddevPop
            | A::StddevSamp
            | A::CovarPop
            | A::CovarSamp
            | A::Corr
            | A::PercentileLinearHistogram
            | A::ApproxQuantile => &[Param::Numeric, Param::Numeric],
        }
    }
}

/// A numeric literal parameter: what it must be, and its inclusive range.
struct LiteralParam {
    what: &'static str,
    integer: bool,
    low: f64,
    high: f64,
}

impl LiteralParam {
    fn refusal(&self, aggregate: Aggregate) -> String {
        let kind = if self.integer {
            "an integer literal"
        } else {
            "a numeric literal"
        };
        let range = if self.low.is_finite() && self.high.is_finite() {
            format!(" from {} to {}", self.low, self.high)
        } else {
            String::new()
        };
        format!(
            "the {} of {} must be {kind}{range}",
            self.what,
            aggregate.name()
        )
    }
}

/// The literal parameters of `aggregate`, by argument position.
fn literal_params(aggregate: Aggregate) -> Vec<(usize, LiteralParam)> {
    let numeric = |what, low, high| LiteralParam {
        what,
        integer: false,
        low,
        high,
    };
    let integer = |what, high: i128| LiteralParam {
        what,
        integer: true,
        low: 1.0,
        high: high as f64,
    };
    match aggregate {
        Aggregate::PercentileLinearHistogram => vec![
            (1, numeric("percentile", 0.0, 100.0)),
            (2, numeric("low bound", f64::NEG_INFINITY, f64::INFINITY)),
            (3, numeric("high bound", f64::NEG_INFINITY, f64::INFINITY)),
            (4, integer("bucket count", MAX_HISTOGRAM_BUCKETS)),
        ],
        Aggregate::ApproxQuantile => vec![(1, numeric("quantile", 0.0, 1.0))],
        Aggregate::ApproxTopK => vec![(1, integer("k", MAX_TOP_K))],
        _ => vec![],
    }
}

impl Checker<'_> {
    /// Checks a window aggregate call.
    pub(super) fn aggregate(
        &mut self,
        aggregate: Aggregate,
        args: &[Expr],
        span: Span,
    ) -> Result<Operand, TypeError> {
        let name = aggregate.name();
        if !self.ctx.aggregates {
            return Err(TypeError::new(
                span,
                "window aggregates are only allowed in a window processor route's SET",
            ));
        }
        if let Some(outer) = self.inside_aggregate {
            return Err(TypeError::new(
                span,
                format!(
                    "window aggregates cannot be nested: {name} inside {}",
                    outer.name()
                ),
            ));
        }
        check_arity(name, aggregate.arity(), args.len(), span)?;
        self.inside_aggregate = Some(aggregate);
        let operands: Result<Vec<Operand>, TypeError> = args.iter().map(|a| self.expr(a)).collect();
        self.inside_aggregate = None;
        let mut operands = operands?;

        // Literal parameters first: they are constants, typed F64 or I64.
        let mut literals: Vec<(usize, TypedExpr, f64)> = Vec::new();
        for (index, param) in literal_params(aggregate).into_iter().rev() {
            if index >= operands.len() {
                continue;
            }
            let operand = operands.remove(index);
            let value = if param.integer {
                operand.integer_literal().map(|v| v as f64)
            } else {
                operand.numeric_literal()
            };
            let span = operand.span();
            let Some(value) = value.filter(|v| *v >= param.low && *v <= param.high) else {
                return Err(TypeError::new(span, param.refusal(aggregate)));
            };
            let target = if param.integer {
                DataType::I64
            } else {
                DataType::F64
            };
            let typed = resolve(operand, Some(&target))?;
            literals.push((index, typed, value));
        }
        literals.reverse();
        if aggregate == Aggregate::PercentileLinearHistogram {
            if let [_, (_, _, low), (_, high_expr, high), _] = literals.as_slice() {
                if low >= high {
                    return Err(TypeError::new(
                        high_expr.span,
                        format!(
                            "the high bound of {name} must exceed its low bound {low}, found {high}"
                        ),
                    ));
                }
            }
        }

        let params = aggregate.params();
        let mut typed = Vec::with_capacity(args.len());
        for (i, operand) in operands.into_iter().enumerate() {
            let param = params.get(i).copied().unwrap_or(Param::Any);
            typed.push(Checker::param(name, i, operand, param)?);
        }
        for (index, literal, _) in literals {
            typed.insert(index.min(typed.len()), literal);
        }

        let value_type = typed
            .first()
            .map_or(DataType::I64, |a| a.ty.data_type.clone());
        use Aggregate as A;
        let (result, nullable) = match aggregate {
            A::Count | A::CountIf | A::ApproxCountDistinct => (DataType::I64, false),
            A::BoolAnd | A::BoolOr => (DataType::Bool, true),
            A::Sum if value_type.is_integer() => (DataType::I64, true),
            A::Min | A::Max | A::First | A::Last | A::ArgMin | A::ArgMax => (value_type, true),
            A::ApproxTopK => (DataType::Vec(Box::new(value_type)), false),
            A::Sum
            | A::Avg
            | A::VarPop
            | A::VarSamp
            | A::StddevPop
            | A::StddevSamp
            | A::CovarPop
            | A::CovarSamp
            | A::Corr
            | A::PercentileLinearHistogram
            | A::ApproxQuantile => (DataType::F64, true),
        };
        let (_, sensitive) = flags(&typed);
        Ok(Operand::Typed(TypedExpr {
            kind: TypedKind::Aggregate {
                aggregate,
                args: typed,
            },
            ty: FieldType {
                data_type: result,
                nullable,
                sensitive,
            },
            span,
        }))
    }
}
