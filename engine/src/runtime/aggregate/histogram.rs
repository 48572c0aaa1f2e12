//! `PERCENTILE_LINEAR_HISTOGRAM`: counts in equal-width buckets over `[low, high)` and a
//! percentile interpolated linearly inside the bucket that holds it.
//!
//! Why it is correct: bucket `b` covers `[low + b·w, low + (b+1)·w)` with `w = (high-low)/n`;
//! a value's bucket is `floor((x - low)/w)` clamped to `[0, n-1]`, so values below `low` count in
//! the first bucket and values at or above `high` (infinities included) in the last, as the table
//! says. NaN has no place on the axis and is not counted. The percentile `p` asks for rank
//! `r = p/100 · count`; walking the buckets in order, the first non-empty bucket whose cumulative
//! count reaches `r` holds it, and the result is that bucket's lower edge plus the fraction
//! `(r - before)/bucket_count` of its width — so `p = 0` is the lower edge of the first non-empty
//! bucket and `p = 100` the upper edge of the last. The bucket counts are reserved once, at the
//! declared size ([`crate::types::aggregates::MAX_HISTOGRAM_BUCKETS`] at most, 512 KiB).

use std::ops::Range;

use arrow_array::Array;

use super::read::for_each_f64;

/// The literal parameters of one `PERCENTILE_LINEAR_HISTOGRAM` call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramParams {
    /// In `[0, 100]`.
    pub percentile: f64,
    pub low: f64,
    /// Greater than `low`.
    pub high: f64,
    /// In `[1, MAX_HISTOGRAM_BUCKETS]`.
    pub buckets: usize,
}

#[derive(Debug, Clone)]
pub(super) struct Histogram {
    params: HistogramParams,
    counts: Vec<u64>,
    total: u64,
}

impl Histogram {
    pub fn new(params: HistogramParams) -> Histogram {
        Histogram {
            params,
            counts: vec![0; params.buckets],
            total: 0,
        }
    }

    pub fn clear(&mut self) {
        self.counts.fill(0);
        self.total = 0;
    }

    pub fn reserved_bytes(&self) -> usize {
        self.counts.capacity() * std::mem::size_of::<u64>()
    }

    pub fn fold(&mut self, values: &dyn Array, range: Range<usize>) {
        let HistogramParams { low, high, .. } = self.params;
        let last = self.counts.len().saturating_sub(1);
        let scale = self.counts.len() as f64 / (high - low);
        let counts = &mut self.counts;
        let mut added = 0u64;
        for_each_f64(values, range, |_, x| {
            if x.is_nan() {
                return;
            }
            let position = (x - low) * scale;
            // A negative position (or -inf) is below `low`; `as` saturates huge ones.
            let bucket = if position > 0.0 {
                (position as usize).min(last)
            } else {
                0
            };
            if let Some(count) = counts.get_mut(bucket) {
                *count += 1;
                added += 1;
            }
        });
        self.total += added;
    }

    /// The interpolated percentile, or `None` without values.
    pub fn percentile(&self) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let HistogramParams {
            percentile,
            low,
            high,
            ..
        } = self.params;
        let width = (high - low) / self.counts.len() as f64;
        let rank = percentile / 100.0 * self.total as f64;
        let mut before = 0u64;
        for (bucket, count) in self.counts.iter().enumerate() {
            if *count == 0 {
                continue;
            }
            let after = before + count;
            if after as f64 >= rank {
                let fraction = (rank - before as f64) / *count as f64;
                return Some(low + (bucket as f64 + fraction.clamp(0.0, 1.0)) * width);
            }
            before = after;
        }
        // Unreachable with `percentile <= 100`: the last non-empty bucket reaches `total`.
        Some(high)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Float64Array;

    fn histogram(percentile: f64, values: &[f64]) -> Option<f64> {
        let mut h = Histogram::new(HistogramParams {
            percentile,
            low: 0.0,
            high: 100.0,
            buckets: 10,
        });
        h.fold(&Float64Array::from(values.to_vec()), 0..values.len());
        h.percentile()
    }

    #[test]
    fn interpolates_inside_the_bucket() {
        // 4 values in [10, 20): the median is halfway through that bucket.
        assert_eq!(histogram(50.0, &[11.0, 12.0, 13.0, 14.0]), Some(15.0));
        assert_eq!(histogram(0.0, &[11.0, 55.0]), Some(10.0));
        assert_eq!(histogram(100.0, &[11.0, 55.0]), Some(60.0));
        // Out-of-range values clamp to the edge buckets; NaN is not counted.
        assert_eq!(
            histogram(100.0, &[-5.0, f64::INFINITY, f64::NAN]),
            Some(100.0)
        );
        assert_eq!(histogram(0.0, &[f64::NEG_INFINITY, 500.0]), Some(0.0));
        assert_eq!(histogram(50.0, &[f64::NAN]), None);
    }
}
