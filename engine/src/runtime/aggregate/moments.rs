//! Sums and moments: exact integer sums, compensated floating sums, and centered moments for
//! the variance, covariance and correlation aggregates.
//!
//! Why it is correct:
//! * [`IntegerSum`] adds integers exactly in `i128`: fewer than 2^63 values of magnitude below
//!   2^64 cannot leave `i128`, and the add saturates anyway, so a sum outside `I64` is always
//!   reported as such, never wrapped.
//! * [`CompensatedSum`] is Neumaier's variant of Kahan summation: the rounding error of every
//!   addition is recovered exactly (`(a - t) + b` with `|a| >= |b|` is error-free) and carried in
//!   a separate term, so the result is as if summed in roughly twice the precision. Each run is
//!   summed on its own and merged into the window by adding its sum and carrying its
//!   compensation. A non-finite running sum (an infinity or NaN among the values, or an
//!   overflow) is returned as is, because its compensation term is meaningless then.
//! * [`Moments`] keeps count, means and centered second moments (`M2x = Σ(x-x̄)²`,
//!   `Cxy = Σ(x-x̄)(y-ȳ)`). A run is folded with Welford's update, which never subtracts two large
//!   sums of squares, and runs are merged with Chan et al.'s pairwise formula
//!   `M2 = M2a + M2b + δ²·na·nb/n`, which is algebraically identical to a one-pass fold over the
//!   concatenation; only the last rounded digits can differ with the run grouping.

use std::ops::Range;

use arrow_array::Array;

use super::read::{for_each_f64, for_each_f64_pair, for_each_i128};

/// An exact sum of integers and how many were added.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct IntegerSum {
    pub sum: i128,
    pub count: u64,
}

impl IntegerSum {
    pub fn fold(&mut self, values: &dyn Array, range: Range<usize>) {
        let (mut sum, mut count) = (0i128, 0u64);
        for_each_i128(values, range, |v| {
            sum = sum.saturating_add(v);
            count += 1;
        });
        self.sum = self.sum.saturating_add(sum);
        self.count += count;
    }
}

/// A Neumaier-compensated floating sum.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct CompensatedSum {
    sum: f64,
    compensation: f64,
    pub count: u64,
}

impl CompensatedSum {
    pub fn add(&mut self, value: f64) {
        let total = self.sum + value;
        // The rounding error of `sum + value`, recovered exactly from the larger operand.
        self.compensation += if self.sum.abs() >= value.abs() {
            (self.sum - total) + value
        } else {
            (value - total) + self.sum
        };
        self.sum = total;
        self.count += 1;
    }

    /// Merges another sum: its rounded sum is added with compensation, its own compensation
    /// carried over as is.
    pub fn merge(&mut self, other: &CompensatedSum) {
        let count = self.count;
        self.add(other.sum);
        self.compensation += other.compensation;
        self.count = count + other.count;
    }

    /// Folds one run on its own, then merges it in.
    pub fn fold(&mut self, values: &dyn Array, range: Range<usize>) {
        let mut run = CompensatedSum::default();
        for_each_f64(values, range, |_, v| run.add(v));
        self.merge(&run);
    }

    pub fn value(&self) -> f64 {
        if self.sum.is_finite() {
            self.sum + self.compensation
        } else {
            self.sum
        }
    }
}

/// Count, means and centered second moments of values (`y` unused) or of pairs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Moments {
    pub count: u64,
    mean_x: f64,
    mean_y: f64,
    m2_x: f64,
    m2_y: f64,
    c_xy: f64,
}

impl Moments {
    /// Welford's update with one pair.
    fn push(&mut self, x: f64, y: f64) {
        self.count += 1;
        let n = self.count as f64;
        let dx = x - self.mean_x;
        self.mean_x += dx / n;
        let dy = y - self.mean_y;
        self.mean_y += dy / n;
        self.m2_x += dx * (x - self.mean_x);
        self.m2_y += dy * (y - self.mean_y);
        self.c_xy += dx * (y - self.mean_y);
    }

    /// Chan et al.'s merge of two disjoint sets of pairs.
    pub fn merge(&mut self, other: &Moments) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let (na, nb) = (self.count as f64, other.count as f64);
        let n = na + nb;
        let dx = other.mean_x - self.mean_x;
        let dy = other.mean_y - self.mean_y;
        let weight = na * nb / n;
        self.mean_x += dx * nb / n;
        self.mean_y += dy * nb / n;
        self.m2_x += other.m2_x + dx * dx * weight;
        self.m2_y += other.m2_y + dy * dy * weight;
        self.c_xy += other.c_xy + dx * dy * weight;
        self.count += other.count;
    }

    /// Folds one run of single values (as pairs `(x, x)`, leaving `y` equal to `x`).
    pub fn fold_values(&mut self, values: &dyn Array, range: Range<usize>) {
        let mut run = Moments::default();
        for_each_f64(values, range, |_, v| run.push(v, v));
        self.merge(&run);
    }

    /// Folds one run of pairs; a row with either side null is skipped.
    pub fn fold_pairs(&mut self, x: &dyn Array, y: &dyn Array, range: Range<usize>) {
        let mut run = Moments::default();
        for_each_f64_pair(x, y, range, |a, b| run.push(a, b));
        self.merge(&run);
    }

    /// `M2x / (n - ddof)`, or `None` without more than `ddof` values.
    pub fn variance(&self, ddof: u64) -> Option<f64> {
        (self.count > ddof).then(|| self.m2_x / (self.count - ddof) as f64)
    }

    /// `Cxy / (n - ddof)`, or `None` without more than `ddof` pairs.
    pub fn covariance(&self, ddof: u64) -> Option<f64> {
        (self.count > ddof).then(|| self.c_xy / (self.count - ddof) as f64)
    }

    /// Pearson's correlation, clamped to [-1, 1] against rounding; `None` with fewer than two
    /// pairs or a variance of 0.
    pub fn correlation(&self) -> Option<f64> {
        if self.count < 2 || self.m2_x == 0.0 || self.m2_y == 0.0 {
            return None;
        }
        Some((self.c_xy / (self.m2_x * self.m2_y).sqrt()).clamp(-1.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Float64Array;

    #[test]
    fn compensation_recovers_what_naive_summation_loses() {
        let values = Float64Array::from(vec![1e100, 1.0, -1e100, 1e-3]);
        let naive: f64 = values.values().iter().sum();
        assert_eq!(naive, 1e-3);
        let mut one_run = CompensatedSum::default();
        one_run.fold(&values, 0..4);
        assert_eq!(one_run.value(), 1.001);
        let mut runs = CompensatedSum::default();
        for row in 0..4 {
            runs.fold(&values, row..row + 1);
        }
        assert_eq!(runs.value(), 1.001);
        assert_eq!(runs.count, 4);
        // Many small values next to a large one: every 0.1 would be rounded away naively.
        let mut sum = CompensatedSum::default();
        sum.add(1e16);
        for _ in 0..10 {
            sum.add(0.1);
        }
        assert_eq!(sum.value(), 1e16 + 1.0);
    }

    #[test]
    fn infinities_are_not_turned_into_nan() {
        let mut sum = CompensatedSum::default();
        sum.add(f64::INFINITY);
        sum.add(1.0);
        assert_eq!(sum.value(), f64::INFINITY);
    }

    fn data(len: usize) -> (Float64Array, Float64Array) {
        // A large offset makes a naive sum-of-squares variance lose every digit.
        let x: Vec<f64> = (0..len)
            .map(|i| 1e9 + ((i * 37) % 101) as f64 * 0.5)
            .collect();
        let y: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, v)| v * -2.0 + (i % 7) as f64)
            .collect();
        (Float64Array::from(x), Float64Array::from(y))
    }

    #[test]
    fn chan_merge_equals_one_pass() {
        let (x, y) = data(1000);
        let mut one_pass = Moments::default();
        one_pass.fold_pairs(&x, &y, 0..1000);
        for cuts in [
            vec![1, 2, 500],
            vec![333, 334, 999],
            vec![10, 20, 30, 40, 700],
        ] {
            let mut merged = Moments::default();
            let mut start = 0;
            for end in cuts.iter().copied().chain([1000]) {
                merged.fold_pairs(&x, &y, start..end);
                start = end;
            }
            assert_eq!(merged.count, 1000);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
            assert!(close(
                merged.variance(0).unwrap_or(0.0),
                one_pass.variance(0).unwrap_or(1.0)
            ));
            assert!(close(
                merged.covariance(1).unwrap_or(0.0),
                one_pass.covariance(1).unwrap_or(1.0)
            ));
            assert!(close(
                merged.correlation().unwrap_or(0.0),
                one_pass.correlation().unwrap_or(1.0)
            ));
        }
    }

    #[test]
    fn centered_moments_match_the_two_pass_definition() {
        let (x, _) = data(1000);
        let mean = x.values().iter().sum::<f64>() / 1000.0;
        let two_pass = x
            .values()
            .iter()
            .map(|v| (v - mean) * (v - mean))
            .sum::<f64>()
            / 999.0;
        let mut moments = Moments::default();
        moments.fold_values(&x, 0..1000);
        let got = moments.variance(1).unwrap_or(f64::NAN);
        assert!(
            (got - two_pass).abs() <= 1e-9 * two_pass,
            "{got} vs {two_pass}"
        );
    }

    #[test]
    fn integer_sums_are_exact_beyond_i64() {
        let values = arrow_array::Int64Array::from(vec![i64::MAX, i64::MAX, -i64::MAX]);
        let mut sum = IntegerSum::default();
        sum.fold(&values, 0..2);
        assert_eq!(sum.sum, 2 * i128::from(i64::MAX));
        sum.fold(&values, 2..3);
        assert_eq!(sum.sum, i128::from(i64::MAX));
        assert_eq!(sum.count, 3);
    }
}
