//! A hash map whose entries live in a slab ([`SlabMap`]), for per-branch state on the data path.
//!
//! A [`SlabMap`] owns its keys and values in a slab: a `Vec` of slots, each holding one entry
//! `(K, V)` or a free-list link. A `hashbrown::HashTable<u32>` indexes the occupied slots by slot
//! number, hashing keys with [`KeyHashState`].
//!
//! Why it exists: a `HashMap<K, V>` keeps every entry inline in its bucket array, so a map of
//! 40,000 windows (~170 bytes of state each) is a ~13 MB array in which every probe and insert
//! misses the cache, and every growth moves every value. Here a bucket is a 4-byte slot number
//! and a control byte, so the index of such a map stays small enough to keep in cache; a probe
//! touches the slab once, at the slot it finds; growth rehashes `u32`s; and an insert reuses the
//! most recently freed slot, whose line is likely still cached.
//!
//! Why it is correct:
//!
//! - **Equality and hashing are the key's.** A key is stored once, in its slot. Lookups hash the
//!   key (or the borrowed `Q`, which `K: Borrow<Q>` obliges to hash and compare as its `K` does)
//!   with the map's one hasher, and the index compares the key in the slot a candidate names.
//! - **The index names occupied slots only.** A slot is filled before its number is indexed, and
//!   its number leaves the index when it is freed, so every closure that reads a slot through the
//!   index (equality, and the rehash on growth) finds an entry. hashbrown's `HashTable::entry`
//!   reserves room for a new entry during the probe — any growth rehashes there, while every
//!   indexed slot is occupied — so [`VacantEntry::insert`] places its slot and then indexes it
//!   without rehashing.
//! - **Free list.** Freed slots are linked through their `next` field from `free_head`
//!   (`u32::MAX` ends the list), most recently freed first; a slot is on the list exactly when it
//!   is free. An insert takes the list's head and pushes a new slot only when the list is empty,
//!   that is when every slot is occupied, so the slab holds at most one slot per entry live at the
//!   same time: its length is the peak population. It never shrinks; memory follows the peak (as
//!   in `branch_lifecycle::BranchTable`).
//! - **Bounded.** Slot numbers are `u32` with `u32::MAX` reserved, so a map holds at most
//!   [`MAX_ENTRIES`]; inserting beyond that panics, as no shard holds that many.
//!
//! Iteration walks the slab in slot order: its cost follows the peak population, and its order is
//! unspecified (as a `HashMap`'s is).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};

use hashbrown::hash_table::{self, HashTable};

use crate::branch_key::KeyHashState;

/// Largest population of one map, in entries: the `u32` slot number space, with `u32::MAX`
/// reserved as the free list's end.
pub const MAX_ENTRIES: u32 = u32::MAX - 1;

/// End of the free list.
const NO_SLOT: u32 = u32::MAX;

/// One slab slot: an entry, or a free slot on the free list. An enum rather than an `Option`
/// beside a link, so a slot is no larger than its entry plus a tag (often folded into a niche).
#[derive(Debug)]
enum Slot<K, V> {
    Occupied(K, V),
    /// `next` is the next free slot, or [`NO_SLOT`].
    Free {
        next: u32,
    },
}

impl<K, V> Slot<K, V> {
    fn entry(&self) -> Option<(&K, &V)> {
        match self {
            Self::Occupied(key, value) => Some((key, value)),
            Self::Free { .. } => None,
        }
    }

    fn entry_mut(&mut self) -> Option<(&K, &mut V)> {
        match self {
            Self::Occupied(key, value) => Some((key, value)),
            Self::Free { .. } => None,
        }
    }

    /// The entry of a slot the index names, which is occupied (module docs).
    fn indexed(&self) -> (&K, &V) {
        self.entry().expect("the index names occupied slots only")
    }

    /// [`Slot::indexed`], mutably.
    fn indexed_mut(&mut self) -> (&K, &mut V) {
        self.entry_mut()
            .expect("the index names occupied slots only")
    }
}

/// Whether slot `at` holds `key`: the index's equality, as the index holds no keys.
fn holds<K, V, Q>(slots: &[Slot<K, V>], at: u32, key: &Q) -> bool
where
    K: Borrow<Q>,
    Q: Eq + ?Sized,
{
    slots[at as usize]
        .entry()
        .is_some_and(|(k, _)| k.borrow() == key)
}

/// The hash of the key in slot `at`, which the index needs to move the slot's number when it
/// grows; the slot is occupied because the index names occupied slots only.
fn hash_at<K: Hash, V>(hasher: &KeyHashState, slots: &[Slot<K, V>], at: u32) -> u64 {
    hasher.hash_one(slots[at as usize].indexed().0)
}

/// Panics when a map of `occupied` entries has no room for one more ([`MAX_ENTRIES`]).
fn assert_room(occupied: usize) {
    assert!(
        occupied < MAX_ENTRIES as usize,
        "SlabMap is full: it holds at most {MAX_ENTRIES} entries (no shard holds that many)"
    );
}

/// Puts `(key, value)` into the free list's head slot, or a new slot when the list is empty;
/// returns the slot. The caller indexes it. Takes the slab's fields alone so it can run while a
/// vacant index entry borrows the index.
///
/// # Panics
///
/// When the map already holds [`MAX_ENTRIES`]. Checked before anything changes, so the map stays
/// whole.
fn place<K, V>(slots: &mut Vec<Slot<K, V>>, free_head: &mut u32, key: K, value: V) -> u32 {
    if *free_head == NO_SLOT {
        // The free list is empty only when every slot is occupied, so the slab's length is the
        // population: below MAX_ENTRIES, the number fits and is not NO_SLOT.
        assert_room(slots.len());
        let at = slots.len() as u32;
        slots.push(Slot::Occupied(key, value));
        at
    } else {
        let at = *free_head;
        let slot = &mut slots[at as usize];
        let Slot::Free { next } = *slot else {
            panic!("the free list names occupied slot {at}");
        };
        *free_head = next;
        *slot = Slot::Occupied(key, value);
        at
    }
}

/// Frees slot `at`, whose number the caller has taken out of the index, onto the free list's
/// head; returns its entry.
fn free<K, V>(slot: &mut Slot<K, V>, at: u32, free_head: &mut u32) -> (K, V) {
    let Slot::Occupied(key, value) = std::mem::replace(slot, Slot::Free { next: *free_head })
    else {
        panic!("freeing free slot {at}");
    };
    *free_head = at;
    (key, value)
}

/// A map from `K` to `V` whose entries live in a slab indexed by slot number; see the module
/// docs. Lookups need `K: Hash + Eq`.
pub struct SlabMap<K, V> {
    /// The entries, and free slots linked from `free_head`. Its length is the peak population.
    slots: Vec<Slot<K, V>>,
    /// The most recently freed slot, or [`NO_SLOT`].
    free_head: u32,
    /// The occupied slots' numbers, hashed by their keys with `hasher`.
    index: HashTable<u32>,
    hasher: KeyHashState,
}

impl<K, V> Default for SlabMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for SlabMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K, V> SlabMap<K, V> {
    /// An empty map; it allocates nothing until the first insert.
    #[must_use]
    pub fn new() -> Self {
        Self {
            slots: Vec::new(),
            free_head: NO_SLOT,
            index: HashTable::new(),
            hasher: KeyHashState::default(),
        }
    }

    /// Entries in the map.
    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the map holds no entry.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Every entry, in unspecified order. Walks the whole slab (module docs).
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.slots.iter().filter_map(Slot::entry)
    }

    /// Every key, in unspecified order.
    pub fn keys(&self) -> impl Iterator<Item = &K> + '_ {
        self.iter().map(|(key, _)| key)
    }

    /// Every value, in unspecified order.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.iter().map(|(_, value)| value)
    }

    /// Every value, mutably, in unspecified order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.slots
            .iter_mut()
            .filter_map(|slot| slot.entry_mut().map(|(_, value)| value))
    }
}

impl<K: Hash + Eq, V> SlabMap<K, V> {
    /// The slot holding `key`.
    fn find<Q>(&self, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slots = &self.slots;
        self.index
            .find(self.hasher.hash_one(key), |&at| holds(slots, at, key))
            .copied()
    }

    /// The value of `key`.
    #[must_use]
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = self.find(key)?;
        Some(self.slots[at as usize].indexed().1)
    }

    /// The value of `key`, mutably.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = self.find(key)?;
        Some(self.slots[at as usize].indexed_mut().1)
    }

    /// Whether the map holds `key`.
    #[must_use]
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.find(key).is_some()
    }

    /// Removes `key`, returning its value; its slot becomes the free list's head.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slots = &self.slots;
        let indexed = self
            .index
            .find_entry(self.hasher.hash_one(key), |&at| holds(slots, at, key))
            .ok()?;
        let (at, _) = indexed.remove();
        let slot = &mut self.slots[at as usize];
        Some(free(slot, at, &mut self.free_head).1)
    }

    /// Maps `key` to `value`. Returns the value it replaced, if any; a replacement keeps the
    /// stored key and drops `key`, as `HashMap::insert` does.
    ///
    /// # Panics
    ///
    /// When a new key would take the map past [`MAX_ENTRIES`].
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.entry(key) {
            Entry::Occupied(mut entry) => Some(std::mem::replace(entry.get_mut(), value)),
            Entry::Vacant(entry) => {
                entry.insert(value);
                None
            }
        }
    }

    /// The entry of `key`, found with one probe, for reading, updating, inserting or removing it
    /// in place. A vacant entry holds `key` until it is inserted; it may grow the index before it
    /// is returned (module docs), even when it is then dropped.
    pub fn entry(&mut self, key: K) -> Entry<'_, K, V> {
        let hash = self.hasher.hash_one(&key);
        let (slots, hasher) = (&self.slots, &self.hasher);
        match self.index.entry(
            hash,
            |&at| holds(slots, at, &key),
            |&at| hash_at(hasher, slots, at),
        ) {
            hash_table::Entry::Occupied(indexed) => {
                let at = *indexed.get();
                Entry::Occupied(OccupiedEntry {
                    slot: &mut self.slots[at as usize],
                    indexed,
                    free_head: &mut self.free_head,
                })
            }
            hash_table::Entry::Vacant(indexed) => Entry::Vacant(VacantEntry {
                key,
                indexed,
                slots: &mut self.slots,
                free_head: &mut self.free_head,
            }),
        }
    }

    /// Test check that the index, the slab and the free list agree (module docs).
    #[cfg(test)]
    fn check_invariants(&self) {
        let occupied = self.slots.iter().filter(|s| s.entry().is_some()).count();
        assert_eq!(
            occupied,
            self.index.len(),
            "occupied slots and index differ"
        );
        let mut on_list = vec![false; self.slots.len()];
        let mut at = self.free_head;
        while at != NO_SLOT {
            let Slot::Free { next } = self.slots[at as usize] else {
                panic!("free list names occupied slot {at}");
            };
            assert!(!on_list[at as usize], "free list loops at {at}");
            on_list[at as usize] = true;
            at = next;
        }
        let free = on_list.iter().filter(|&&listed| listed).count();
        assert_eq!(
            free,
            self.slots.len() - self.index.len(),
            "a free slot is off the list"
        );
        for (at, slot) in self.slots.iter().enumerate() {
            if let Some((key, _)) = slot.entry() {
                assert_eq!(self.find(key), Some(at as u32), "index misses slot {at}");
            }
        }
    }
}

/// A key's place in a [`SlabMap`], from [`SlabMap::entry`].
#[derive(Debug)]
pub enum Entry<'a, K, V> {
    /// The key is in the map.
    Occupied(OccupiedEntry<'a, K, V>),
    /// The key is not in the map.
    Vacant(VacantEntry<'a, K, V>),
}

/// A key the map holds, with its slot.
#[derive(Debug)]
pub struct OccupiedEntry<'a, K, V> {
    slot: &'a mut Slot<K, V>,
    /// The slot's number in the index; removed with the entry.
    indexed: hash_table::OccupiedEntry<'a, u32>,
    free_head: &'a mut u32,
}

impl<'a, K, V> OccupiedEntry<'a, K, V> {
    /// The stored key.
    #[must_use]
    pub fn key(&self) -> &K {
        self.slot.indexed().0
    }

    /// The value.
    #[must_use]
    pub fn get(&self) -> &V {
        self.slot.indexed().1
    }

    /// The value, mutably.
    pub fn get_mut(&mut self) -> &mut V {
        self.slot.indexed_mut().1
    }

    /// The value, mutably, for as long as the map was borrowed.
    #[must_use]
    pub fn into_mut(self) -> &'a mut V {
        self.slot.indexed_mut().1
    }

    /// Removes the entry, returning its value; its slot becomes the free list's head.
    pub fn remove(self) -> V {
        // The number leaves the index first, so the index never names the freed slot.
        let (at, _) = self.indexed.remove();
        free(self.slot, at, self.free_head).1
    }
}

/// A key the map does not hold; the index already has room for it. It borrows the map only, so
/// a caller may hold it while it works on other values and insert afterwards.
#[derive(Debug)]
pub struct VacantEntry<'a, K, V> {
    key: K,
    indexed: hash_table::VacantEntry<'a, u32>,
    slots: &'a mut Vec<Slot<K, V>>,
    free_head: &'a mut u32,
}

impl<'a, K, V> VacantEntry<'a, K, V> {
    /// The key that would be inserted.
    #[must_use]
    pub fn key(&self) -> &K {
        &self.key
    }

    /// Inserts the key with `value` into the most recently freed slot (or a new one) and returns
    /// the value, mutably.
    ///
    /// # Panics
    ///
    /// When the map already holds [`MAX_ENTRIES`].
    pub fn insert(self, value: V) -> &'a mut V {
        let at = place(self.slots, self.free_head, self.key, value);
        // Placed first, though the index's room was reserved by the probe: inserting the number
        // rehashes nothing.
        self.indexed.insert(at);
        self.slots[at as usize].indexed_mut().1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch_key::{BranchKey, KeyBytes};
    use proptest::prelude::*;
    use std::collections::HashMap;
    use std::fmt::Debug;

    /// A key whose hash keeps one bit of it, so many keys share a hash and the index must tell
    /// them apart by the slots' keys.
    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Colliding(u8);

    impl Hash for Colliding {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            state.write_u8(self.0 & 1);
        }
    }

    fn branch_key(i: u64) -> BranchKey {
        BranchKey::Key(KeyBytes::new(&i.to_be_bytes()))
    }

    #[test]
    fn a_removed_slot_is_reused_most_recent_first() {
        let mut map = SlabMap::new();
        for k in 0..3u32 {
            assert_eq!(map.insert(k, k * 10), None);
        }
        assert_eq!(map.remove(&1), Some(10));
        assert_eq!(map.insert(3, 30), None);
        assert_eq!(map.slots.len(), 3, "the slab grew though a slot was free");
        assert_eq!(map.find(&3), Some(1));

        assert_eq!(map.remove(&0), Some(0));
        let Entry::Occupied(entry) = map.entry(2) else {
            panic!("2 is in the map");
        };
        assert_eq!(entry.remove(), 20);
        let Entry::Vacant(entry) = map.entry(4) else {
            panic!("4 is not in the map");
        };
        assert_eq!(*entry.insert(40), 40);
        assert_eq!(
            map.find(&4),
            Some(2),
            "the most recently freed slot comes first"
        );
        assert_eq!(map.insert(5, 50), None);
        assert_eq!(map.find(&5), Some(0));
        assert_eq!(map.slots.len(), 3);
        map.check_invariants();
    }

    #[test]
    fn replacing_keeps_the_stored_key() {
        // Equal keys that tell apart: the first element is the key, the second a tag.
        #[derive(Debug)]
        struct Tagged(u8, u8);
        impl PartialEq for Tagged {
            fn eq(&self, other: &Self) -> bool {
                self.0 == other.0
            }
        }
        impl Eq for Tagged {}
        impl Hash for Tagged {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.0.hash(state);
            }
        }
        let mut map = SlabMap::new();
        assert_eq!(map.insert(Tagged(1, 0), "a"), None);
        assert_eq!(map.insert(Tagged(1, 1), "b"), Some("a"));
        let (key, value) = map.iter().next().unwrap();
        assert_eq!((key.1, *value), (0, "b"));
        assert_eq!(map.len(), 1);
    }

    #[test]
    fn many_entries_across_growth() {
        const N: u64 = 20_000;
        let mut map = SlabMap::new();
        for i in 0..N {
            assert_eq!(map.insert(branch_key(i), i), None);
        }
        assert_eq!(map.len(), N as usize);
        for i in 0..N {
            assert_eq!(map.get(&branch_key(i)), Some(&i));
        }
        for i in (0..N).step_by(2) {
            assert_eq!(map.remove(&branch_key(i)), Some(i));
        }
        for i in N..N + N / 2 {
            match map.entry(branch_key(i)) {
                Entry::Vacant(entry) => {
                    entry.insert(i);
                }
                Entry::Occupied(_) => panic!("{i} is not in the map"),
            }
        }
        assert_eq!(map.slots.len(), N as usize, "slab past the peak population");
        assert_eq!(map.len(), N as usize);
        for i in 0..N + N / 2 {
            let expected = (i >= N || i % 2 == 1).then_some(i);
            assert_eq!(map.get(&branch_key(i)).copied(), expected, "key {i}");
        }
        let mut values: Vec<u64> = map.values().copied().collect();
        values.sort_unstable();
        let expected: Vec<u64> = (1..N).step_by(2).chain(N..N + N / 2).collect();
        assert_eq!(values, expected);
        map.check_invariants();
    }

    /// The engine's pattern: work on a new key's state aside and insert it afterwards, holding
    /// the vacant entry meanwhile.
    #[test]
    fn a_vacant_entry_is_held_while_state_is_built_aside() {
        #[derive(Default)]
        struct Window {
            rows: u64,
        }
        let mut map: SlabMap<BranchKey, Window> = SlabMap::new();
        for _ in 0..3 {
            let key = branch_key(7);
            let mut aside = Window::default();
            let (state, vacant) = match map.entry(key.clone()) {
                Entry::Occupied(e) => (e.into_mut(), None),
                Entry::Vacant(e) => (&mut aside, Some(e)),
            };
            state.rows += 1;
            if let Some(e) = vacant {
                e.insert(aside);
            }
        }
        assert_eq!(map.get(&branch_key(7)).map(|w| w.rows), Some(3));
        assert_eq!(map.len(), 1);
    }

    #[test]
    #[should_panic(expected = "SlabMap is full")]
    fn inserting_past_the_bound_panics() {
        // The check `place` runs before it pushes a slot, at the bound rather than after four
        // billion inserts.
        assert_room(MAX_ENTRIES as usize - 1);
        assert_room(MAX_ENTRIES as usize);
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Insert(u8, u64),
        Remove(u8),
        GetMut(u8, u64),
        /// Through the entry: a vacant one is inserted, an occupied one updated.
        EntryInsert(u8, u64),
        /// Through the entry: an occupied one is removed, a vacant one dropped.
        EntryRemove(u8),
        /// The engine's pattern (see the unit test above): add to a value built aside when new.
        Aside(u8, u64),
        ValuesMut(u64),
    }

    /// Keys `0..KEYS`, few enough that operations meet.
    const KEYS: u8 = 12;

    fn op() -> impl Strategy<Value = Op> {
        let k = || 0..KEYS;
        prop_oneof![
            (k(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            k().prop_map(Op::Remove),
            (k(), any::<u64>()).prop_map(|(k, v)| Op::GetMut(k, v)),
            (k(), any::<u64>()).prop_map(|(k, v)| Op::EntryInsert(k, v)),
            k().prop_map(Op::EntryRemove),
            (k(), 0u64..100).prop_map(|(k, v)| Op::Aside(k, v)),
            (0u64..100).prop_map(Op::ValuesMut),
        ]
    }

    /// Runs `ops` against a [`SlabMap`] and a `HashMap` model, comparing them after every step.
    /// Keys are `key(k)`; lookups go through the borrowed form `as_q(key)`.
    fn run<K, Q>(
        ops: &[Op],
        key: impl Fn(u8) -> K,
        as_q: impl Fn(&K) -> &Q,
    ) -> Result<(), TestCaseError>
    where
        K: Hash + Eq + Ord + Clone + Debug + Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut map: SlabMap<K, u64> = SlabMap::new();
        let mut model: HashMap<K, u64> = HashMap::new();
        let mut peak = 0;
        for &op in ops {
            match op {
                Op::Insert(k, v) => {
                    prop_assert_eq!(map.insert(key(k), v), model.insert(key(k), v));
                }
                Op::Remove(k) => {
                    let q = key(k);
                    prop_assert_eq!(map.remove(as_q(&q)), model.remove(as_q(&q)));
                }
                Op::GetMut(k, v) => {
                    let q = key(k);
                    let got = map.get_mut(as_q(&q)).map(|x| std::mem::replace(x, v));
                    let want = model.get_mut(as_q(&q)).map(|x| std::mem::replace(x, v));
                    prop_assert_eq!(got, want);
                }
                Op::EntryInsert(k, v) => match map.entry(key(k)) {
                    Entry::Occupied(mut e) => {
                        prop_assert_eq!(e.key(), &key(k));
                        prop_assert_eq!(Some(e.get()), model.get(as_q(&key(k))));
                        *e.get_mut() = e.get().wrapping_add(v);
                        let new = *e.into_mut();
                        let old = model.get_mut(as_q(&key(k))).unwrap();
                        *old = old.wrapping_add(v);
                        prop_assert_eq!(new, *old);
                    }
                    Entry::Vacant(e) => {
                        prop_assert_eq!(e.key(), &key(k));
                        prop_assert!(!model.contains_key(as_q(&key(k))));
                        prop_assert_eq!(*e.insert(v), v);
                        model.insert(key(k), v);
                    }
                },
                Op::EntryRemove(k) => match map.entry(key(k)) {
                    Entry::Occupied(e) => {
                        prop_assert_eq!(Some(e.remove()), model.remove(as_q(&key(k))));
                    }
                    Entry::Vacant(_) => prop_assert!(!model.contains_key(as_q(&key(k)))),
                },
                Op::Aside(k, v) => {
                    let mut aside = 0u64;
                    let (state, vacant) = match map.entry(key(k)) {
                        Entry::Occupied(e) => (e.into_mut(), None),
                        Entry::Vacant(e) => (&mut aside, Some(e)),
                    };
                    *state = state.wrapping_add(v);
                    if let Some(e) = vacant {
                        e.insert(aside);
                    }
                    let old = model.entry(key(k)).or_default();
                    *old = old.wrapping_add(v);
                }
                Op::ValuesMut(v) => {
                    map.values_mut().for_each(|x| *x = x.wrapping_add(v));
                    model.values_mut().for_each(|x| *x = x.wrapping_add(v));
                }
            }

            peak = peak.max(model.len());
            prop_assert_eq!(map.len(), model.len());
            prop_assert_eq!(map.is_empty(), model.is_empty());
            prop_assert_eq!(
                map.slots.len(),
                peak,
                "slab length is not the peak population"
            );
            for k in 0..KEYS {
                let q = key(k);
                prop_assert_eq!(map.get(as_q(&q)), model.get(as_q(&q)), "get {:?}", q);
                prop_assert_eq!(map.contains_key(as_q(&q)), model.contains_key(as_q(&q)));
            }
            let mut got: Vec<(K, u64)> = map.iter().map(|(k, v)| (k.clone(), *v)).collect();
            let mut want: Vec<(K, u64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
            got.sort();
            want.sort();
            prop_assert_eq!(&got, &want);
            let mut keys: Vec<K> = map.keys().cloned().collect();
            keys.sort();
            prop_assert_eq!(
                keys,
                want.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
            );
            let mut values: Vec<u64> = map.values().copied().collect();
            let mut want_values: Vec<u64> = want.iter().map(|(_, v)| *v).collect();
            values.sort_unstable();
            want_values.sort_unstable();
            prop_assert_eq!(values, want_values);
            map.check_invariants();
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any sequence of operations leaves the map equal to a `HashMap` given the same ones,
        /// looked up through a borrowed, unsized form of the key.
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec(op(), 0..200)) {
            run(&ops, |k| vec![k; 1 + usize::from(k % 3)], Vec::as_slice)?;
        }

        /// The same with keys whose hashes collide, so equality decides every lookup.
        #[test]
        fn behaves_like_a_hash_map_under_collisions(
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            run(&ops, Colliding, |k| k)?;
        }
    }
}
