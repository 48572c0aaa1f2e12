//! `APPROX_TOP_K`: the space-saving algorithm (Metwally, Agrawal, El Abbadi 2005) over a fixed
//! number of counters, [`top_k_slots`] for a given `k`.
//!
//! Accuracy: with `m` counters over `n` values, every value occurring more than `n/m` times is
//! held, and a held count exceeds the true count by at most `n/m` (the count of the counter it
//! replaced). While there are no more distinct values than counters the counts are exact.
//!
//! Why it is correct: a seen value increments its counter; an unseen value takes a free counter,
//! or else replaces the value of the least counter and increments it — the space-saving rule
//! behind the bound above. The least counter is the root of a binary min-heap of counter
//! indices, so each value costs `O(log m)`. Everything is reserved up front: the counters, the
//! heap, and a hash index with room for twice the counters (so its in-place rehash after
//! removals never needs to grow it). A replaced string or bytes value reuses the evicted value's
//! buffers, so folding allocates only when a value longer than any it replaces arrives. The
//! result is the `k` highest counts, most frequent first, ties broken by ascending value (the
//! order `<` gives fixed-width values; byte order, i.e. code point order, for strings).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::ops::Range;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BinaryArray, ListArray, StringArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType as Arrow, Field};

use super::read::{fixed_keys_array, for_each_bytes_key, for_each_fixed_key, has_fixed_key};

/// Counters per requested `k`.
pub const TOP_K_SLOTS_PER_K: usize = 4;

/// The fewest counters any `APPROX_TOP_K` keeps.
pub const TOP_K_MIN_SLOTS: usize = 64;

/// The counters kept for `k`.
pub fn top_k_slots(k: usize) -> usize {
    k.saturating_mul(TOP_K_SLOTS_PER_K).max(TOP_K_MIN_SLOTS)
}

/// A counted value: a fixed-width key (`u64`) or the bytes of a string or `BYTES` value.
pub(super) trait CountedKey: Eq + Hash + Ord + Borrow<Self::Ref> {
    type Ref: ?Sized + Eq + Hash;
    fn owned(from: &Self::Ref) -> Self;
    /// Overwrites `self` with `from`, reusing its buffer.
    fn assign(&mut self, from: &Self::Ref);
    fn heap_bytes(&self) -> usize;
}

impl CountedKey for u64 {
    type Ref = u64;
    fn owned(from: &u64) -> u64 {
        *from
    }
    fn assign(&mut self, from: &u64) {
        *self = *from;
    }
    fn heap_bytes(&self) -> usize {
        0
    }
}

impl CountedKey for Vec<u8> {
    type Ref = [u8];
    fn owned(from: &[u8]) -> Vec<u8> {
        from.to_vec()
    }
    fn assign(&mut self, from: &[u8]) {
        self.clear();
        self.extend_from_slice(from);
    }
    fn heap_bytes(&self) -> usize {
        self.capacity()
    }
}

#[derive(Debug, Clone)]
struct Counter<K> {
    key: K,
    count: u64,
    heap_position: usize,
}

#[derive(Debug, Clone)]
pub(super) struct SpaceSaving<K> {
    counters: Vec<Counter<K>>,
    /// Counter indices, a min-heap by count.
    heap: Vec<usize>,
    index: HashMap<K, usize>,
    slots: usize,
    /// Heap bytes of the keys (each key is held twice: counter and index).
    key_bytes: usize,
}

impl<K: CountedKey> SpaceSaving<K> {
    fn new(slots: usize) -> SpaceSaving<K> {
        SpaceSaving {
            counters: Vec::with_capacity(slots),
            heap: Vec::with_capacity(slots),
            index: HashMap::with_capacity(2 * slots),
            slots,
            key_bytes: 0,
        }
    }

    fn clear(&mut self) {
        self.counters.clear();
        self.heap.clear();
        self.index.clear();
        self.key_bytes = 0;
    }

    fn reserved_bytes(&self) -> usize {
        let counter = std::mem::size_of::<Counter<K>>() + std::mem::size_of::<usize>();
        // A hash map entry: key, value and one control byte.
        let entry = std::mem::size_of::<K>() + std::mem::size_of::<usize>() + 1;
        self.counters.capacity().max(self.slots) * counter
            + self.index.capacity() * entry
            + self.key_bytes
    }

    fn observe(&mut self, key: &K::Ref) {
        if let Some(&counter) = self.index.get(key) {
            self.counters[counter].count += 1;
            self.sift_down(self.counters[counter].heap_position);
            return;
        }
        if self.counters.len() < self.slots {
            let counter = self.counters.len();
            let owned = K::owned(key);
            self.key_bytes += 2 * owned.heap_bytes();
            self.index.insert(K::owned(key), counter);
            self.counters.push(Counter {
                key: owned,
                count: 1,
                heap_position: self.heap.len(),
            });
            self.heap.push(counter);
            self.sift_up(self.heap.len() - 1);
            return;
        }
        let Some(&least) = self.heap.first() else {
            return;
        };
        let slot = &mut self.counters[least];
        let Some((mut indexed, _)) = self.index.remove_entry(slot.key.borrow()) else {
            return;
        };
        self.key_bytes -= indexed.heap_bytes() + slot.key.heap_bytes();
        indexed.assign(key);
        slot.key.assign(key);
        self.key_bytes += indexed.heap_bytes() + slot.key.heap_bytes();
        slot.count += 1;
        self.index.insert(indexed, least);
        self.sift_down(0);
    }

    fn count_at(&self, position: usize) -> u64 {
        self.counters[self.heap[position]].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        let (ca, cb) = (self.heap[a], self.heap[b]);
        self.counters[ca].heap_position = a;
        self.counters[cb].heap_position = b;
    }

    fn sift_up(&mut self, mut position: usize) {
        while position > 0 {
            let parent = (position - 1) / 2;
            if self.count_at(parent) <= self.count_at(position) {
                break;
            }
            self.swap(parent, position);
            position = parent;
        }
    }

    fn sift_down(&mut self, mut position: usize) {
        loop {
            let left = 2 * position + 1;
            if left >= self.heap.len() {
                break;
            }
            let right = left + 1;
            let child = if right < self.heap.len() && self.count_at(right) < self.count_at(left) {
                right
            } else {
                left
            };
            if self.count_at(position) <= self.count_at(child) {
                break;
            }
            self.swap(position, child);
            position = child;
        }
    }

    /// The `k` most counted keys, most frequent first, ties by ascending key.
    fn top(&self, k: usize) -> Vec<&K> {
        let mut order: Vec<&Counter<K>> = self.counters.iter().collect();
        order.sort_unstable_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        order.into_iter().take(k).map(|c| &c.key).collect()
    }
}

/// An `APPROX_TOP_K` state: counters over fixed-width keys or over bytes.
#[derive(Debug, Clone)]
pub(super) enum TopK {
    Fixed(SpaceSaving<u64>),
    Bytes(SpaceSaving<Vec<u8>>),
}

impl TopK {
    pub fn new(value_type: &Arrow, k: usize) -> TopK {
        let slots = top_k_slots(k);
        if has_fixed_key(value_type) {
            TopK::Fixed(SpaceSaving::new(slots))
        } else {
            TopK::Bytes(SpaceSaving::new(slots))
        }
    }

    pub fn clear(&mut self) {
        match self {
            TopK::Fixed(counters) => counters.clear(),
            TopK::Bytes(counters) => counters.clear(),
        }
    }

    pub fn reserved_bytes(&self) -> usize {
        match self {
            TopK::Fixed(counters) => counters.reserved_bytes(),
            TopK::Bytes(counters) => counters.reserved_bytes(),
        }
    }

    pub fn fold(&mut self, values: &dyn Array, range: Range<usize>) {
        match self {
            TopK::Fixed(counters) => for_each_fixed_key(values, range, |k| counters.observe(&k)),
            TopK::Bytes(counters) => for_each_bytes_key(values, range, |k| counters.observe(k)),
        }
    }

    /// The one-row `VEC<s>` of the `k` most frequent values; `None` if `result_type` is not a
    /// list of a type this state counts.
    pub fn finish(&self, k: usize, result_type: &Arrow) -> Option<ArrayRef> {
        let Arrow::List(item) = result_type else {
            return None;
        };
        let values: ArrayRef = match self {
            TopK::Fixed(counters) => {
                let keys: Vec<u64> = counters.top(k).into_iter().copied().collect();
                fixed_keys_array(&keys, item.data_type())?
            }
            TopK::Bytes(counters) => {
                let keys = counters.top(k);
                match item.data_type() {
                    Arrow::Utf8 => {
                        let texts: Vec<&str> = keys
                            .iter()
                            .map(|k| std::str::from_utf8(k).unwrap_or_default())
                            .collect();
                        Arc::new(StringArray::from(texts))
                    }
                    Arrow::Binary => Arc::new(BinaryArray::from(
                        keys.iter().map(|k| k.as_slice()).collect::<Vec<_>>(),
                    )),
                    _ => return None,
                }
            }
        };
        list_of(item, values)
    }
}

fn list_of(item: &Arc<Field>, values: ArrayRef) -> Option<ArrayRef> {
    let offsets = OffsetBuffer::from_lengths([values.len()]);
    let list = ListArray::try_new(item.clone(), offsets, values, None).ok()?;
    Some(Arc::new(list))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;

    #[test]
    fn heavy_hitters_survive_a_long_tail() {
        // 3 heavy values among 20 000 singletons, far more distinct values than counters.
        let mut values = Vec::new();
        for i in 0..20_000i64 {
            values.push(1_000_000 + i);
            if i % 10 == 0 {
                values.push(7);
            }
            if i % 20 == 0 {
                values.push(8);
            }
            if i % 40 == 0 {
                values.push(9);
            }
        }
        let array = Int64Array::from(values);
        let mut top = TopK::new(&Arrow::Int64, 3);
        for start in (0..array.len()).step_by(1000) {
            top.fold(&array, start..(start + 1000).min(array.len()));
        }
        let item = Arc::new(Field::new("item", Arrow::Int64, true));
        let result = top.finish(3, &Arrow::List(item)).expect("a list");
        let list = result.as_any().downcast_ref::<ListArray>().expect("list");
        let got = list.value(0);
        let got = got.as_any().downcast_ref::<Int64Array>().expect("i64");
        assert_eq!(got.values().to_vec(), vec![7, 8, 9]);
    }

    #[test]
    fn string_counts_are_exact_below_capacity_and_ties_sort_by_value() {
        let array = StringArray::from(vec!["b", "a", "c", "b", "a", "d"]);
        let mut top = TopK::new(&Arrow::Utf8, 3);
        top.fold(&array, 0..6);
        let item = Arc::new(Field::new("item", Arrow::Utf8, true));
        let result = top.finish(3, &Arrow::List(item)).expect("a list");
        let list = result.as_any().downcast_ref::<ListArray>().expect("list");
        let got = list.value(0);
        let got = got.as_any().downcast_ref::<StringArray>().expect("strings");
        let got: Vec<&str> = got.iter().flatten().collect();
        assert_eq!(got, vec!["a", "b", "c"]);
    }

    #[test]
    fn evictions_reuse_key_buffers() {
        let words: Vec<String> = (0..1000).map(|i| format!("w{i:04}")).collect();
        let array = StringArray::from(words);
        let mut top = TopK::new(&Arrow::Utf8, 1);
        top.fold(&array, 0..1000);
        let TopK::Bytes(counters) = &top else {
            panic!("strings use byte keys");
        };
        assert_eq!(counters.counters.len(), TOP_K_MIN_SLOTS);
        assert_eq!(counters.index.len(), TOP_K_MIN_SLOTS);
        let bytes: usize = counters.counters.iter().map(|c| 2 * c.key.capacity()).sum();
        assert_eq!(counters.key_bytes, bytes);
    }
}
