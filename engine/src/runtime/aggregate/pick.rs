//! The aggregates that pick one input value: `FIRST`, `LAST`, `MIN`, `MAX`, `ARG_MIN`,
//! `ARG_MAX`.
//!
//! Why it is correct: each run is scanned once, with one type dispatch, for its candidate row
//! (the first or last valid row, or the row with the least or greatest key); only that candidate
//! is compared with the kept value, and only a better candidate is copied — a one-row array of
//! the argument's own type, so any type (lists included) is kept exactly and the result needs no
//! conversion. Each run's rows are in time order (stable: rows of one instant stay in admission
//! order) and every candidate carries its row time, so "first" and "last" are the window's
//! earliest and latest non-null values by time whichever order the runs arrived in (of rows at
//! one instant, the earlier-admitted is first and the later-admitted last). Keys are ordered as
//! `<` orders them: numbers by value, floats in IEEE total order (so NaN is greater than every
//! number), `STRING` by code point (UTF-8 byte order) and `DATETIME` by instant. Ties keep the
//! earliest row by time, then by admission: a candidate replaces the kept one only when it is
//! strictly better, or equal and earlier. `ARG_MIN`/`ARG_MAX` consider only rows whose value
//! and key are both non-null.

use std::cmp::Ordering;
use std::ops::Range;

use arrow_array::{Array, ArrayRef, ArrowNativeTypeOp, PrimitiveArray, StringArray, UInt32Array};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType as Arrow, TimeUnit};

use super::read::with_primitive;

/// Which value a [`Pick`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PickKind {
    First,
    Last,
    Min,
    Max,
    ArgMin,
    ArgMax,
}

/// The kept value (and, for `ARG_*`, its key) as one-row copies.
#[derive(Debug, Clone)]
pub(super) struct Pick {
    kind: PickKind,
    value: Option<ArrayRef>,
    key: Option<ArrayRef>,
    /// The kept row's time.
    time_ns: i64,
}

/// Whether `ty` can be a `MIN`/`MAX` argument or an `ARG_*` key.
pub(super) fn is_orderable(ty: &Arrow) -> bool {
    ty.is_numeric() || matches!(ty, Arrow::Utf8 | Arrow::Timestamp(TimeUnit::Nanosecond, _))
}

impl Pick {
    pub fn new(kind: PickKind) -> Pick {
        Pick {
            kind,
            value: None,
            key: None,
            time_ns: 0,
        }
    }

    pub fn clear(&mut self) {
        self.value = None;
        self.key = None;
    }

    /// The kept value, if any.
    pub fn value(&self) -> Option<&ArrayRef> {
        self.value.as_ref()
    }

    pub fn held_bytes(&self) -> usize {
        [&self.value, &self.key]
            .into_iter()
            .flatten()
            .map(|a| a.get_array_memory_size())
            .sum()
    }

    /// Folds one run: `args[0]` is the value, `args[1]` the key of `ARG_*`; `times` are the
    /// run's row times (ascending), indexed like the arguments.
    pub fn fold(&mut self, args: &[ArrayRef], times: &[i64], range: Range<usize>) {
        let Some(values) = args.first() else {
            return;
        };
        let time_of = |row: usize| times.get(row).copied().unwrap_or(i64::MAX);
        match self.kind {
            PickKind::First => {
                let nulls = values.logical_nulls();
                if let Some(row) = range.into_iter().find(|r| is_valid(nulls.as_ref(), *r)) {
                    if self.value.is_none() || time_of(row) < self.time_ns {
                        self.keep(values, None, row, time_of(row));
                    }
                }
            }
            PickKind::Last => {
                let nulls = values.logical_nulls();
                if let Some(row) = range.rev().find(|r| is_valid(nulls.as_ref(), *r)) {
                    if self.value.is_none() || time_of(row) >= self.time_ns {
                        self.keep(values, None, row, time_of(row));
                    }
                }
            }
            PickKind::Min | PickKind::Max => {
                let want = self.wanted();
                if let Some(row) = extreme_row(values.as_ref(), None, range, want) {
                    if self.beats(values.as_ref(), row, time_of(row), self.value.as_ref()) {
                        self.keep(values, None, row, time_of(row));
                    }
                }
            }
            PickKind::ArgMin | PickKind::ArgMax => {
                let Some(keys) = args.get(1) else {
                    return;
                };
                let want = self.wanted();
                let value_nulls = values.logical_nulls();
                if let Some(row) = extreme_row(keys.as_ref(), value_nulls.as_ref(), range, want) {
                    if self.beats(keys.as_ref(), row, time_of(row), self.key.as_ref()) {
                        self.keep(values, Some(keys), row, time_of(row));
                    }
                }
            }
        }
    }

    /// Keeps row `row` (and its key for `ARG_*`), timed `time_ns`.
    fn keep(&mut self, values: &ArrayRef, keys: Option<&ArrayRef>, row: usize, time_ns: i64) {
        self.value = Some(copy_row(values, row));
        if let Some(keys) = keys {
            self.key = Some(copy_row(keys, row));
        }
        self.time_ns = time_ns;
    }

    fn wanted(&self) -> Ordering {
        match self.kind {
            PickKind::Min | PickKind::ArgMin => Ordering::Less,
            _ => Ordering::Greater,
        }
    }

    /// Whether the key at `row`, timed `time_ns`, beats the kept key (or nothing is kept):
    /// strictly better, or equal and earlier.
    fn beats(&self, keys: &dyn Array, row: usize, time_ns: i64, kept: Option<&ArrayRef>) -> bool {
        let Some(kept) = kept else {
            return true;
        };
        match compare_rows(keys, row, kept.as_ref(), 0) {
            Some(Ordering::Equal) => time_ns < self.time_ns,
            order => order == Some(self.wanted()),
        }
    }
}

fn is_valid(nulls: Option<&NullBuffer>, row: usize) -> bool {
    nulls.is_none_or(|n| n.is_valid(row))
}

/// A one-row copy of `array[row]`, so the kept value does not hold the whole batch alive.
fn copy_row(array: &ArrayRef, row: usize) -> ArrayRef {
    let index = UInt32Array::from(vec![row as u32]);
    // `take` of an in-bounds index cannot fail; the zero-copy slice is an equal fallback.
    arrow_select::take::take(array.as_ref(), &index, None).unwrap_or_else(|_| array.slice(row, 1))
}

/// The row of `range` with the least (`want == Less`) or greatest key, skipping null keys and
/// rows null in `also`; the earliest such row on ties.
fn extreme_row(
    keys: &dyn Array,
    also: Option<&NullBuffer>,
    range: Range<usize>,
    want: Ordering,
) -> Option<usize> {
    with_primitive!(keys.data_type(), T => {
        let keys = keys.as_any().downcast_ref::<PrimitiveArray<T>>()?;
        let values = keys.values();
        let mut best: Option<usize> = None;
        for row in range {
            if keys.is_null(row) || !is_valid(also, row) {
                continue;
            }
            if best.is_none_or(|b| values[row].compare(values[b]) == want) {
                best = Some(row);
            }
        }
        best
    }, _ => {
        let keys = keys.as_any().downcast_ref::<StringArray>()?;
        let mut best: Option<usize> = None;
        for row in range {
            if keys.is_null(row) || !is_valid(also, row) {
                continue;
            }
            if best.is_none_or(|b| keys.value(row).cmp(keys.value(b)) == want) {
                best = Some(row);
            }
        }
        best
    })
}

/// Compares `a[i]` with `b[j]` (both valid, of one orderable type); `None` for other types.
fn compare_rows(a: &dyn Array, i: usize, b: &dyn Array, j: usize) -> Option<Ordering> {
    with_primitive!(a.data_type(), T => {
        let a = a.as_any().downcast_ref::<PrimitiveArray<T>>()?;
        let b = b.as_any().downcast_ref::<PrimitiveArray<T>>()?;
        Some(a.value(i).compare(b.value(j)))
    }, _ => {
        let a = a.as_any().downcast_ref::<StringArray>()?;
        let b = b.as_any().downcast_ref::<StringArray>()?;
        Some(a.value(i).cmp(b.value(j)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float64Array, Int32Array};
    use std::sync::Arc;

    /// Folds `runs` of rows all at one instant (admission order decides ties).
    fn fold_runs(kind: PickKind, args: &[ArrayRef], runs: &[Range<usize>]) -> Option<ArrayRef> {
        let times = vec![0; args.first().map_or(0, |a| a.len())];
        fold_timed(kind, args, &times, runs)
    }

    fn fold_timed(
        kind: PickKind,
        args: &[ArrayRef],
        times: &[i64],
        runs: &[Range<usize>],
    ) -> Option<ArrayRef> {
        let mut pick = Pick::new(kind);
        for run in runs {
            pick.fold(args, times, run.clone());
        }
        pick.value().cloned()
    }

    /// Runs that arrive out of time order: FIRST and LAST go by row time, not by arrival,
    /// and a tie of MIN keeps the earlier row by time.
    #[test]
    fn first_last_and_ties_go_by_row_time_not_by_arrival() {
        // Run 0..2 arrived first with times 20, 30; run 2..4 later with times 10, 40.
        let values: ArrayRef = Arc::new(Int32Array::from(vec![5, 7, 5, 9]));
        let times = [20, 30, 10, 40];
        let runs = [0..2, 2..4];
        let first = fold_timed(
            PickKind::First,
            std::slice::from_ref(&values),
            &times,
            &runs,
        );
        let last = fold_timed(PickKind::Last, std::slice::from_ref(&values), &times, &runs);
        assert_eq!(first.unwrap().as_ref(), &Int32Array::from(vec![5]));
        assert_eq!(last.unwrap().as_ref(), &Int32Array::from(vec![9]));
        // MIN 5 at times 20 and 10: the one at 10 is kept, seen through ARG_MIN's value.
        let labels: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, 3, 4]));
        let args = [labels, values];
        let arg_min = fold_timed(PickKind::ArgMin, &args, &times, &runs);
        assert_eq!(arg_min.unwrap().as_ref(), &Int32Array::from(vec![3]));
    }

    #[test]
    fn float_extremes_use_total_order() {
        let x: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(1.0),
            None,
            Some(f64::NAN),
            Some(-3.0),
        ]));
        let max = fold_runs(PickKind::Max, std::slice::from_ref(&x), &[0..2, 2..4]).expect("a max");
        assert!(max
            .as_any()
            .downcast_ref::<Float64Array>()
            .is_some_and(|a| a.value(0).is_nan()));
        let min = fold_runs(PickKind::Min, &[x], &[0..1, 1..4]).expect("a min");
        assert_eq!(
            min.as_any()
                .downcast_ref::<Float64Array>()
                .map(|a| a.value(0)),
            Some(-3.0)
        );
    }

    #[test]
    fn arg_ties_keep_the_earliest_row_across_runs() {
        let values: ArrayRef = Arc::new(Int32Array::from(vec![10, 20, 30, 40]));
        let keys: ArrayRef = Arc::new(StringArray::from(vec!["b", "a", "c", "a"]));
        let min = fold_runs(
            PickKind::ArgMin,
            &[values.clone(), keys.clone()],
            &[0..2, 2..4],
        );
        let got = min.and_then(|a| a.as_any().downcast_ref::<Int32Array>().map(|a| a.value(0)));
        assert_eq!(got, Some(20));
        let max = fold_runs(PickKind::ArgMax, &[values, keys], &[0..3, 3..4]);
        let got = max.and_then(|a| a.as_any().downcast_ref::<Int32Array>().map(|a| a.value(0)));
        assert_eq!(got, Some(30));
    }
}
