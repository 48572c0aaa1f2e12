//! `APPROX_QUANTILE`: a KLL quantile sketch (Karnin, Lang, Liberty 2016) in one buffer reserved
//! once at its greatest size, [`quantile_capacity_items`] values (about 8 KiB).
//!
//! Accuracy: with [`QUANTILE_K`] = 200 the normalized rank error of a returned value is
//! typically under 1 % and stays under 2 % in the tests (100 000 values); until the first
//! compaction (fewer than 200 values) the answer is exact. `q = 0` and `q = 1` return the exact
//! minimum and maximum, which the sketch tracks beside its samples. NaN is not counted.
//!
//! Why it is correct: level `h` holds samples of weight `2^h`. A level's capacity shrinks
//! geometrically (factor 2/3) with its depth below the top level, never below
//! [`QUANTILE_MIN_LEVEL_ITEMS`]; when the buffer holds as many values as the levels' capacities
//! sum to, the lowest over-full level is sorted and every other value of it (odd or even
//! positions by a reproducible coin) moves up a level with twice the weight, one leftover value
//! staying when the count is odd. That halves a level's weight exactly in two, so the retained
//! weights always sum to the count, and the rank of any value is off by at most the weight of
//! one level's compactions — the KLL bound. Capacities summed over levels grow with the number
//! of levels, and a `u64` count can never need more than [`QUANTILE_MAX_LEVELS`] levels, so the
//! buffer never outgrows its reservation. Levels are stored top first and level 0 last, so a new
//! value is a push within capacity (no allocation) and a compaction moves only the lower levels.
//! The coin restarts from a fixed seed on `clear`, so a refold builds the same sketch.

use std::ops::Range;

use arrow_array::Array;

use super::read::for_each_f64;

/// The capacity of the top level; sets the accuracy.
pub const QUANTILE_K: usize = 200;

/// The least capacity of a level.
pub const QUANTILE_MIN_LEVEL_ITEMS: usize = 8;

/// Levels the sketch may have: a level `h` sample weighs `2^h`, so a `u64` count needs fewer.
pub const QUANTILE_MAX_LEVELS: usize = 64;

/// The coin's starting state (any non-zero xorshift state).
const COIN_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// The capacity of a level `depth` levels below the top: `max(MIN, ceil(K·(2/3)^depth))`.
fn level_capacity(depth: usize) -> usize {
    let scaled = (QUANTILE_K as f64 * (2.0f64 / 3.0).powi(depth as i32)).ceil() as usize;
    scaled.max(QUANTILE_MIN_LEVEL_ITEMS)
}

/// How many values `levels` levels hold before a compaction.
fn total_capacity(levels: usize) -> usize {
    (0..levels).map(level_capacity).sum()
}

/// The values the sketch reserves: the total capacity of [`QUANTILE_MAX_LEVELS`] levels.
pub fn quantile_capacity_items() -> usize {
    total_capacity(QUANTILE_MAX_LEVELS)
}

#[derive(Debug, Clone)]
pub(super) struct QuantileSketch {
    quantile: f64,
    /// Level `levels - 1` first, level 0 last.
    items: Vec<f64>,
    /// Boxed: the accumulator's state enum stays small.
    level_len: Box<[usize; QUANTILE_MAX_LEVELS]>,
    levels: usize,
    capacity: usize,
    count: u64,
    min: f64,
    max: f64,
    coin: u64,
}

impl QuantileSketch {
    pub fn new(quantile: f64) -> QuantileSketch {
        QuantileSketch {
            quantile,
            items: Vec::with_capacity(quantile_capacity_items()),
            level_len: Box::new([0; QUANTILE_MAX_LEVELS]),
            levels: 1,
            capacity: total_capacity(1),
            count: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            coin: COIN_SEED,
        }
    }

    pub fn clear(&mut self) {
        self.items.clear();
        *self.level_len = [0; QUANTILE_MAX_LEVELS];
        self.levels = 1;
        self.capacity = total_capacity(1);
        self.count = 0;
        self.min = f64::INFINITY;
        self.max = f64::NEG_INFINITY;
        self.coin = COIN_SEED;
    }

    pub fn reserved_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<f64>()
            + std::mem::size_of::<[usize; QUANTILE_MAX_LEVELS]>()
    }

    pub fn fold(&mut self, values: &dyn Array, range: Range<usize>) {
        for_each_f64(values, range, |_, x| self.push(x));
    }

    fn push(&mut self, x: f64) {
        if x.is_nan() {
            return;
        }
        self.items.push(x);
        self.level_len[0] += 1;
        self.count += 1;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        if self.items.len() >= self.capacity {
            self.compact();
        }
    }

    /// xorshift64: one reproducible bit per compaction.
    fn flip(&mut self) -> usize {
        self.coin ^= self.coin << 13;
        self.coin ^= self.coin >> 7;
        self.coin ^= self.coin << 17;
        (self.coin & 1) as usize
    }

    /// Compacts the lowest level holding at least its capacity.
    fn compact(&mut self) {
        let levels = self.levels;
        let Some(level) =
            (0..levels).find(|h| self.level_len[*h] >= level_capacity(levels - 1 - *h))
        else {
            return;
        };
        if level + 1 >= QUANTILE_MAX_LEVELS {
            // Needs a count beyond u64; never reached.
            return;
        }
        let start: usize = self.level_len[level + 1..levels].iter().sum();
        let end = start + self.level_len[level];
        let Some(run) = self.items.get_mut(start..end) else {
            return;
        };
        run.sort_unstable_by(f64::total_cmp);
        let odd = run.len() % 2;
        let half = (run.len() - odd) / 2;
        let leftover = run.first().copied();
        let offset = self.flip();
        // Survivors move to the front of the level, which adjoins the end of the level above;
        // each is read at or after where it is written.
        for i in 0..half {
            self.items[start + i] = self.items[start + odd + offset + 2 * i];
        }
        if let (1, Some(leftover)) = (odd, leftover) {
            self.items[start + half] = leftover;
        }
        let kept_end = start + half + odd;
        let len = self.items.len();
        self.items.copy_within(end..len, kept_end);
        self.items.truncate(len - (end - kept_end));
        self.level_len[level + 1] += half;
        self.level_len[level] = odd;
        if level + 1 == levels {
            self.levels += 1;
            self.capacity = total_capacity(self.levels);
        }
    }

    /// The value whose cumulative weight first reaches `q · count`; the exact extremes for
    /// `q = 0` and `q = 1`; `None` without values.
    pub fn quantile(&self) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        if self.quantile <= 0.0 {
            return Some(self.min);
        }
        if self.quantile >= 1.0 {
            return Some(self.max);
        }
        let mut weighted: Vec<(f64, u64)> = Vec::with_capacity(self.items.len());
        let mut start = 0;
        for level in (0..self.levels).rev() {
            let end = start + self.level_len[level];
            let weight = 1u64 << level;
            weighted.extend(self.items[start..end].iter().map(|v| (*v, weight)));
            start = end;
        }
        weighted.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let target = self.quantile * self.count as f64;
        let mut seen = 0u64;
        for (value, weight) in &weighted {
            seen += weight;
            if seen as f64 >= target {
                return Some(*value);
            }
        }
        Some(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Float64Array;

    fn rank_error(len: usize, q: f64, runs: usize) -> f64 {
        // A permutation of 0..len, so a value's rank is the value itself.
        let values: Vec<f64> = (0..len).map(|i| ((i * 7919) % len) as f64).collect();
        let array = Float64Array::from(values);
        let mut sketch = QuantileSketch::new(q);
        let step = len.div_ceil(runs);
        for start in (0..len).step_by(step) {
            sketch.fold(&array, start..(start + step).min(len));
        }
        assert!(sketch.items.len() <= quantile_capacity_items());
        let got = sketch.quantile().unwrap_or(f64::NAN);
        (got / len as f64 - q).abs()
    }

    #[test]
    fn rank_error_stays_small() {
        for q in [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99] {
            for runs in [1, 7] {
                let error = rank_error(100_000, q, runs);
                assert!(error < 0.02, "q {q}: rank error {error}");
            }
        }
    }

    #[test]
    fn small_inputs_are_exact_and_weights_add_up() {
        let mut sketch = QuantileSketch::new(0.5);
        let reserved = sketch.items.capacity();
        let values = Float64Array::from(vec![5.0, 1.0, f64::NAN, 4.0, 2.0, 3.0]);
        sketch.fold(&values, 0..6);
        assert_eq!(sketch.quantile(), Some(3.0));
        sketch.clear();
        assert_eq!(sketch.quantile(), None);
        let many = Float64Array::from_iter_values((0..1_000_000).map(f64::from));
        sketch.fold(&many, 0..1_000_000);
        let mut total = 0u64;
        let mut start = 0;
        for level in (0..sketch.levels).rev() {
            total += (sketch.level_len[level] as u64) << level;
            start += sketch.level_len[level];
        }
        assert_eq!(start, sketch.items.len());
        assert_eq!(total, 1_000_000);
        assert_eq!(sketch.items.capacity(), reserved);
    }

    #[test]
    fn reservation_is_about_eight_kib() {
        assert!(quantile_capacity_items() * 8 < 9 * 1024);
    }
}
