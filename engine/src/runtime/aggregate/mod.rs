//! Window aggregate state (spec: Window processor; the table in [`crate::types::aggregates`]).
//!
//! This module owns what a window folds its retained rows into and what it emits for each
//! aggregate call: [`AggregateCall`] is a checked `TypedKind::Aggregate` node prepared once
//! (argument Arrow types, literal parameters, result type), and [`Accumulator`] is one call's
//! state. It does no I/O and knows nothing of panes, branches or shards: the window evaluates the
//! call's [`AggregateCall::value_args`] into arrays, [`Accumulator::fold`]s each consecutive run
//! of retained rows in row order, [`Accumulator::finish`]es when it emits, and after stepping
//! [`Accumulator::clear`]s and refolds the surviving runs (nothing is ever subtracted).
//!
//! # Why it is correct
//!
//! * **The table, aggregate by aggregate.** Nulls are skipped by every reader (two-argument
//!   aggregates skip a row where either argument is null); counts are exact; integer `SUM` is
//!   exact in `i128` and its overflow of `I64` is an [`AggregateError::SumOverflow`] at `finish`
//!   only; `AVG` divides the exact (integer) or compensated (float) sum by the count; floating
//!   sums and moments are compensated or centered per run and merged ([`moments`]); pickers copy
//!   one row of the argument's own type ([`pick`]); the sketches have fixed, documented bounds
//!   ([`histogram`], [`hll`], [`quantile`], [`topk`]). `finish` builds a one-row array of exactly
//!   [`AggregateCall::result_type`] ([`Finished`]: the scalar results unboxed), null where the
//!   table says "null when".
//! * **No per-row dispatch or allocation.** `fold` matches the state once and the readers
//!   ([`read`]) dispatch on the Arrow type once per call (or per stack chunk), then loop over
//!   typed values and validity bits. Allocation happens once per run at most (a picked row's
//!   copy), when a top-k counter takes a longer value, and never in the sketches, whose memory is
//!   reserved in `new`.
//! * **Bounded and accounted.** Every sketch's capacity is a named constant, reserved when the
//!   accumulator is made and reported in full by [`Accumulator::reserved_bytes`].
//! * **No panics on bad input.** `fold` first checks that it got one array per value argument,
//!   of the prepared types, covering the range; if not it folds nothing and `finish` reports
//!   [`AggregateError::Arguments`] until `clear`.

mod finished;
mod histogram;
mod hll;
mod moments;
mod pick;
mod quantile;
mod read;
mod topk;

use std::ops::Range;

use arrow_array::{new_null_array, Array, ArrayRef, BooleanArray};
use arrow_schema::DataType as Arrow;

use crate::types::aggregates::{MAX_HISTOGRAM_BUCKETS, MAX_TOP_K};
use crate::types::{Aggregate, TypedExpr, TypedKind, Value};
use crate::vm::arrow_type;

pub use finished::{column, Finished};
pub use histogram::HistogramParams;
pub use hll::{HLL_PRECISION, HLL_REGISTERS};
pub use quantile::{
    quantile_capacity_items, QUANTILE_K, QUANTILE_MAX_LEVELS, QUANTILE_MIN_LEVEL_ITEMS,
};
pub use topk::{top_k_slots, TOP_K_MIN_SLOTS, TOP_K_SLOTS_PER_K};

use histogram::Histogram;
use hll::HyperLogLog;
use moments::{CompensatedSum, IntegerSum, Moments};
use pick::{Pick, PickKind};
use quantile::QuantileSketch;
use topk::TopK;

/// Why an aggregate call cannot be prepared or its result computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AggregateError {
    /// The expression handed to [`AggregateCall::from_typed`] is not an aggregate call.
    #[error("expected a window aggregate call, found another expression")]
    NotAnAggregate,
    /// A literal parameter is missing, not a literal, or out of its range.
    #[error("the {what} of {aggregate} must be {expected}")]
    Literal {
        aggregate: &'static str,
        what: &'static str,
        expected: String,
    },
    /// An argument type the aggregate's signature does not accept.
    #[error("{aggregate} cannot aggregate {found} arguments")]
    ArgumentType {
        aggregate: &'static str,
        found: String,
    },
    /// A call with a number of arguments the aggregate does not take.
    #[error("{aggregate} cannot take {found} arguments")]
    Arity {
        aggregate: &'static str,
        found: usize,
    },
    /// The exact integer sum does not fit the `I64` result; fails the output row.
    #[error("I64 overflow in SUM: the exact sum is {sum}")]
    SumOverflow { sum: i128 },
    /// `fold` was given arrays that do not match the call; nothing was folded.
    #[error("{aggregate} was folded with arguments that do not match the call: {reason}")]
    Arguments {
        aggregate: &'static str,
        reason: String,
    },
}

/// Which state a call folds into, with its literal parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    Count,
    CountIf,
    BoolAnd,
    BoolOr,
    IntegerSum,
    FloatSum,
    IntegerAvg,
    FloatAvg,
    Pick(PickKind),
    Moments(MomentKind),
    Histogram(HistogramParams),
    Distinct,
    Quantile(f64),
    TopK(usize),
}

/// A checked aggregate call, prepared once per window route.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateCall {
    aggregate: Aggregate,
    /// Positions of the value arguments in the typed call.
    value_args: Vec<usize>,
    /// The Arrow type of each value argument, in `value_args` order.
    arg_types: Vec<Arrow>,
    plan: Plan,
    result_type: Arrow,
}

/// The literal at `args[index]` as a number.
fn literal_number(args: &[TypedExpr], index: usize) -> Option<f64> {
    match &args.get(index)?.kind {
        TypedKind::Literal(Value::Float(v)) => Some(*v),
        TypedKind::Literal(Value::Int(v)) => Some(*v as f64),
        TypedKind::Literal(Value::UInt(v)) => Some(*v as f64),
        _ => None,
    }
}

impl AggregateCall {
    /// From a typed `TypedKind::Aggregate` node (literal params read from the typed tree).
    pub fn from_typed(expr: &TypedExpr) -> Result<AggregateCall, AggregateError> {
        let TypedKind::Aggregate { aggregate, args } = &expr.kind else {
            return Err(AggregateError::NotAnAggregate);
        };
        let aggregate = *aggregate;
        let name = aggregate.name();
        let literal = |index: usize, what: &'static str, low: f64, high: f64| {
            literal_number(args, index)
                .filter(|v| v.is_finite() && *v >= low && *v <= high)
                .ok_or_else(|| AggregateError::Literal {
                    aggregate: name,
                    what,
                    expected: if low.is_finite() {
                        format!("a numeric literal from {low} to {high}")
                    } else {
                        "a finite numeric literal".to_string()
                    },
                })
        };
        let (min, max) = aggregate.arity();
        if args.len() < min || max.is_some_and(|max| args.len() > max) {
            return Err(AggregateError::Arity {
                aggregate: name,
                found: args.len(),
            });
        }
        let value_type = args
            .first()
            .map_or(Arrow::Null, |a| arrow_type(&a.ty.data_type));
        let integer = value_type.is_integer();
        use Aggregate as A;
        let (plan, literal_positions): (Plan, &[usize]) = match aggregate {
            A::Count => (Plan::Count, &[]),
            A::CountIf => (Plan::CountIf, &[]),
            A::BoolAnd => (Plan::BoolAnd, &[]),
            A::BoolOr => (Plan::BoolOr, &[]),
            A::Sum if integer => (Plan::IntegerSum, &[]),
            A::Sum => (Plan::FloatSum, &[]),
            A::Avg if integer => (Plan::IntegerAvg, &[]),
            A::Avg => (Plan::FloatAvg, &[]),
            A::Min => (Plan::Pick(PickKind::Min), &[]),
            A::Max => (Plan::Pick(PickKind::Max), &[]),
            A::First => (Plan::Pick(PickKind::First), &[]),
            A::Last => (Plan::Pick(PickKind::Last), &[]),
            A::ArgMin => (Plan::Pick(PickKind::ArgMin), &[]),
            A::ArgMax => (Plan::Pick(PickKind::ArgMax), &[]),
            A::VarPop => (Plan::Moments(MomentKind::VarPop), &[]),
            A::VarSamp => (Plan::Moments(MomentKind::VarSamp), &[]),
            A::StddevPop => (Plan::Moments(MomentKind::StddevPop), &[]),
            A::StddevSamp => (Plan::Moments(MomentKind::StddevSamp), &[]),
            A::CovarPop => (Plan::Moments(MomentKind::CovarPop), &[]),
            A::CovarSamp => (Plan::Moments(MomentKind::CovarSamp), &[]),
            A::Corr => (Plan::Moments(MomentKind::Corr), &[]),
            A::PercentileLinearHistogram => {
                let percentile = literal(1, "percentile", 0.0, 100.0)?;
                let low = literal(2, "low bound", f64::NEG_INFINITY, f64::INFINITY)?;
                let high = literal(3, "high bound", f64::NEG_INFINITY, f64::INFINITY)?;
                let buckets = literal(4, "bucket count", 1.0, MAX_HISTOGRAM_BUCKETS as f64)?;
                if low >= high || buckets.fract() != 0.0 {
                    return Err(AggregateError::Literal {
                        aggregate: name,
                        what: "bounds and bucket count",
                        expected: format!(
                            "a low bound under the high bound and a whole bucket count, \
                             found {low}, {high} and {buckets}"
                        ),
                    });
                }
                let histogram = HistogramParams {
                    percentile,
                    low,
                    high,
                    buckets: buckets as usize,
                };
                (Plan::Histogram(histogram), &[1, 2, 3, 4])
            }
            A::ApproxCountDistinct => (Plan::Distinct, &[]),
            A::ApproxQuantile => (Plan::Quantile(literal(1, "quantile", 0.0, 1.0)?), &[1]),
            A::ApproxTopK => {
                let k = literal(1, "k", 1.0, MAX_TOP_K as f64)?;
                if k.fract() != 0.0 {
                    return Err(AggregateError::Literal {
                        aggregate: name,
                        what: "k",
                        expected: format!("a whole number, found {k}"),
                    });
                }
                (Plan::TopK(k as usize), &[1])
            }
        };
        let value_args: Vec<usize> = (0..args.len())
            .filter(|i| !literal_positions.contains(i))
            .collect();
        let arg_types: Vec<Arrow> = value_args
            .iter()
            .map(|i| arrow_type(&args[*i].ty.data_type))
            .collect();
        let call = AggregateCall {
            aggregate,
            value_args,
            arg_types,
            plan,
            result_type: arrow_type(&expr.ty.data_type),
        };
        call.check_types()?;
        Ok(call)
    }

    /// Refuses argument types this module has no state for (the checker never produces them).
    fn check_types(&self) -> Result<(), AggregateError> {
        use Aggregate as A;
        let accepted = |position: usize, ty: &Arrow| -> bool {
            match self.aggregate {
                A::Count | A::First | A::Last => true,
                A::CountIf | A::BoolAnd | A::BoolOr => ty == &Arrow::Boolean,
                A::Min | A::Max => pick::is_orderable(ty),
                // The value may be anything; the key must be orderable.
                A::ArgMin | A::ArgMax => position == 0 || pick::is_orderable(ty),
                A::ApproxCountDistinct | A::ApproxTopK => {
                    read::has_fixed_key(ty) || matches!(ty, Arrow::Utf8 | Arrow::Binary)
                }
                _ => ty.is_numeric(),
            }
        };
        match self
            .arg_types
            .iter()
            .enumerate()
            .find(|(position, ty)| !accepted(*position, ty))
        {
            Some((_, ty)) => Err(AggregateError::ArgumentType {
                aggregate: self.aggregate.name(),
                found: ty.to_string(),
            }),
            None => Ok(()),
        }
    }

    pub fn aggregate(&self) -> Aggregate {
        self.aggregate
    }

    /// Indices into the call's typed `args` of the arguments the VM must evaluate per row
    /// (i.e. not the literal parameters), in order.
    pub fn value_args(&self) -> &[usize] {
        &self.value_args
    }

    /// The Arrow type `fold` expects of each value argument, in [`Self::value_args`] order.
    pub fn arg_types(&self) -> &[Arrow] {
        &self.arg_types
    }

    pub fn result_type(&self) -> &Arrow {
        &self.result_type
    }
}

/// Which finishing rule a moment state applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MomentKind {
    VarPop,
    VarSamp,
    StddevPop,
    StddevSamp,
    CovarPop,
    CovarSamp,
    Corr,
}

/// One aggregate's state; matched once per `fold`.
#[derive(Debug, Clone)]
enum State {
    Count(u64),
    CountIf(u64),
    /// `BOOL_AND` / `BOOL_OR`: whether any value was seen, and whether one was FALSE / TRUE.
    BoolAnd {
        seen: bool,
        any_false: bool,
    },
    BoolOr {
        seen: bool,
        any_true: bool,
    },
    IntegerSum(IntegerSum),
    FloatSum(CompensatedSum),
    IntegerAvg(IntegerSum),
    FloatAvg(CompensatedSum),
    Pick(Pick),
    Moments(MomentKind, Moments),
    Histogram(Histogram),
    Distinct(HyperLogLog),
    Quantile(QuantileSketch),
    TopK(usize, TopK),
}

/// The state of one aggregate call over a window's rows.
#[derive(Debug, Clone)]
pub struct Accumulator<'c> {
    /// Borrowed from the plan: a window's emission builds accumulators for every record.
    call: &'c AggregateCall,
    state: State,
    /// Set when `fold` was handed arrays that do not match the call.
    fault: Option<AggregateError>,
}

impl<'c> Accumulator<'c> {
    pub fn new(call: &'c AggregateCall) -> Accumulator<'c> {
        let state = match call.plan {
            Plan::Count => State::Count(0),
            Plan::CountIf => State::CountIf(0),
            Plan::BoolAnd => State::BoolAnd {
                seen: false,
                any_false: false,
            },
            Plan::BoolOr => State::BoolOr {
                seen: false,
                any_true: false,
            },
            Plan::IntegerSum => State::IntegerSum(IntegerSum::default()),
            Plan::FloatSum => State::FloatSum(CompensatedSum::default()),
            Plan::IntegerAvg => State::IntegerAvg(IntegerSum::default()),
            Plan::FloatAvg => State::FloatAvg(CompensatedSum::default()),
            Plan::Pick(kind) => State::Pick(Pick::new(kind)),
            Plan::Moments(kind) => State::Moments(kind, Moments::default()),
            Plan::Histogram(params) => State::Histogram(Histogram::new(params)),
            Plan::Distinct => State::Distinct(HyperLogLog::new()),
            Plan::Quantile(q) => State::Quantile(QuantileSketch::new(q)),
            Plan::TopK(k) => {
                let value_type = call.arg_types.first().unwrap_or(&Arrow::Null);
                State::TopK(k, TopK::new(value_type, k))
            }
        };
        Accumulator {
            call,
            state,
            fault: None,
        }
    }

    /// Why `args` cannot be folded over `range`, if they cannot.
    fn mismatch(&self, args: &[ArrayRef], range: &Range<usize>) -> Option<String> {
        if args.len() != self.call.arg_types.len() {
            return Some(format!(
                "{} arrays for {} value arguments",
                args.len(),
                self.call.arg_types.len()
            ));
        }
        for (i, (array, ty)) in args.iter().zip(&self.call.arg_types).enumerate() {
            if array.data_type() != ty {
                return Some(format!(
                    "argument {i} is {}, expected {ty}",
                    array.data_type()
                ));
            }
            if range.start > range.end || range.end > array.len() {
                return Some(format!(
                    "rows {}..{} of argument {i}, which has {} rows",
                    range.start,
                    range.end,
                    array.len()
                ));
            }
        }
        None
    }

    /// Folds rows `range` of the evaluated value arguments; nulls are ignored per the table.
    /// `times` are the rows' times, ascending, indexed like the arguments (the picks order
    /// rows by them).
    pub fn fold(&mut self, args: &[ArrayRef], times: &[i64], range: Range<usize>) {
        if self.fault.is_some() {
            return;
        }
        if let Some(reason) = self.mismatch(args, &range) {
            self.fault = Some(AggregateError::Arguments {
                aggregate: self.call.aggregate.name(),
                reason,
            });
            return;
        }
        let Some(first) = args.first() else {
            return;
        };
        let values = first.as_ref();
        match &mut self.state {
            State::Count(count) => *count += valid_rows(values, &range) as u64,
            State::CountIf(count) => {
                bool_rows(values, range, |v| *count += u64::from(v));
            }
            State::BoolAnd { seen, any_false } => bool_rows(values, range, |v| {
                *seen = true;
                *any_false |= !v;
            }),
            State::BoolOr { seen, any_true } => bool_rows(values, range, |v| {
                *seen = true;
                *any_true |= v;
            }),
            State::IntegerSum(sum) | State::IntegerAvg(sum) => sum.fold(values, range),
            State::FloatSum(sum) | State::FloatAvg(sum) => sum.fold(values, range),
            State::Pick(pick) => pick.fold(args, times, range),
            State::Moments(kind, moments) => match (kind, args.get(1)) {
                (MomentKind::CovarPop | MomentKind::CovarSamp | MomentKind::Corr, Some(y)) => {
                    moments.fold_pairs(values, y.as_ref(), range)
                }
                _ => moments.fold_values(values, range),
            },
            State::Histogram(histogram) => histogram.fold(values, range),
            State::Distinct(sketch) => sketch.fold(values, range),
            State::Quantile(sketch) => sketch.fold(values, range),
            State::TopK(_, top) => top.fold(values, range),
        }
    }

    /// The result as a one-row array of `call.result_type()`; an integer SUM overflow is an
    /// error (it fails that output row), everything else per the table's null rules.
    pub fn finish(&self) -> Result<Finished, AggregateError> {
        if let Some(fault) = &self.fault {
            return Err(fault.clone());
        }
        let ty = &self.call.result_type;
        let count = |count: u64| Finished::Int64(i64::try_from(count).ok());
        let value = match &self.state {
            State::Count(n) | State::CountIf(n) => count(*n),
            State::BoolAnd { seen, any_false } => Finished::Boolean(seen.then_some(!any_false)),
            State::BoolOr { seen, any_true } => Finished::Boolean(seen.then_some(*any_true)),
            State::IntegerSum(sum) => {
                if sum.count == 0 {
                    Finished::Int64(None)
                } else {
                    let value = i64::try_from(sum.sum)
                        .map_err(|_| AggregateError::SumOverflow { sum: sum.sum })?;
                    Finished::Int64(Some(value))
                }
            }
            State::FloatSum(sum) => Finished::Float64((sum.count > 0).then(|| sum.value())),
            State::IntegerAvg(sum) => {
                Finished::Float64((sum.count > 0).then(|| sum.sum as f64 / sum.count as f64))
            }
            State::FloatAvg(sum) => {
                Finished::Float64((sum.count > 0).then(|| sum.value() / sum.count as f64))
            }
            // A state with no value (an empty picker) is the typed null of the result.
            State::Pick(pick) => Finished::Array(
                pick.value()
                    .cloned()
                    .unwrap_or_else(|| new_null_array(ty, 1)),
            ),
            State::Moments(kind, moments) => Finished::Float64(match kind {
                MomentKind::VarPop => moments.variance(0),
                MomentKind::VarSamp => moments.variance(1),
                MomentKind::StddevPop => moments.variance(0).map(f64::sqrt),
                MomentKind::StddevSamp => moments.variance(1).map(f64::sqrt),
                MomentKind::CovarPop => moments.covariance(0),
                MomentKind::CovarSamp => moments.covariance(1),
                MomentKind::Corr => moments.correlation(),
            }),
            State::Histogram(histogram) => Finished::Float64(histogram.percentile()),
            State::Distinct(sketch) => Finished::Int64(Some(sketch.estimate().round() as i64)),
            State::Quantile(sketch) => Finished::Float64(sketch.quantile()),
            State::TopK(k, top) => {
                Finished::Array(top.finish(*k, ty).unwrap_or_else(|| new_null_array(ty, 1)))
            }
        };
        let found = value.data_type();
        if &found != ty {
            return Err(AggregateError::ArgumentType {
                aggregate: self.call.aggregate.name(),
                found: format!("a result of {found}, declared {ty}"),
            });
        }
        Ok(value)
    }

    /// Bytes this state holds or has reserved (sketches: their full reserved capacity).
    pub fn reserved_bytes(&self) -> usize {
        let held = match &self.state {
            State::Pick(pick) => pick.held_bytes(),
            State::Histogram(histogram) => histogram.reserved_bytes(),
            State::Distinct(sketch) => sketch.reserved_bytes(),
            State::Quantile(sketch) => sketch.reserved_bytes(),
            State::TopK(_, top) => top.reserved_bytes(),
            _ => 0,
        };
        std::mem::size_of::<Accumulator>() + held
    }

    pub fn clear(&mut self) {
        self.fault = None;
        match &mut self.state {
            State::Count(count) | State::CountIf(count) => *count = 0,
            State::BoolAnd { seen, any_false } => (*seen, *any_false) = (false, false),
            State::BoolOr { seen, any_true } => (*seen, *any_true) = (false, false),
            State::IntegerSum(sum) | State::IntegerAvg(sum) => *sum = IntegerSum::default(),
            State::FloatSum(sum) | State::FloatAvg(sum) => *sum = CompensatedSum::default(),
            State::Pick(pick) => pick.clear(),
            State::Moments(_, moments) => *moments = Moments::default(),
            State::Histogram(histogram) => histogram.clear(),
            State::Distinct(sketch) => sketch.clear(),
            State::Quantile(sketch) => sketch.clear(),
            State::TopK(_, top) => top.clear(),
        }
    }
}

/// Non-null rows of `range`, from the validity bitmap.
fn valid_rows(values: &dyn Array, range: &Range<usize>) -> usize {
    let len = range.end - range.start;
    match values.logical_nulls() {
        Some(nulls) => len - nulls.slice(range.start, len).null_count(),
        None => len,
    }
}

/// Calls `f(value)` for every non-null row of a `BOOL` array.
fn bool_rows(values: &dyn Array, range: Range<usize>, mut f: impl FnMut(bool)) {
    let Some(values) = values.as_any().downcast_ref::<BooleanArray>() else {
        return;
    };
    for row in range {
        if values.is_valid(row) {
            f(values.value(row));
        }
    }
}
