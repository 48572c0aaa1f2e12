//! The keyspace of one DEDUPLICATOR branch: which keys were seen, and when first.
//!
//! A row's key is the arrow-row encoding of its `DEDUPLICATE ON` values (one byte string that
//! orders and compares like the values, nulls included), hashed with xxh3-128. The keyspace
//! keeps the 128-bit hash, not the bytes, so memory per key is fixed and admitting a row never
//! allocates; two different keys collide with probability about n²/2¹²⁹, which for the bound
//! below is under 10⁻²⁴ — accepted and documented (docs/decisions.md).
//!
//! Why it is exact: a key is a duplicate while `now − first_seen < MAX TIME` (spec: "each key
//! expires MAX TIME after its … first sighting"); first sightings are queued in time order, so
//! expiry pops the queue's front and removes the key only when the map still holds that same
//! sighting. Domain time can go back — a new START earlier than the restored keys, a wall
//! clock stepped back under an unpaced domain — so a sighting earlier than the queue's newest
//! goes to a second queue ordered by time instead: a later sighting at the front never holds
//! up the expiry of earlier ones (the keyspace would otherwise fill and refuse every new key).
//! Duplicates inside one batch are caught because the batch's rows are admitted in order.
//!
//! At least once: a key is *held* while the payload of its first row is unresolved
//! ([`Keyspace::hold`]). A held key catches duplicates like any other, but no snapshot or backup
//! carries it, and if that payload is refused ([`Keyspace::resolve`]) the key is forgotten. So
//! a source's redelivery of a refused payload, or of one a crash lost before it was
//! acknowledged, passes again instead of being dropped as a duplicate of a row that never
//! arrived. (A duplicate dropped while its key was held is acknowledged then; it is not
//! redelivered if the first row's payload is refused — docs/decisions.md.)
//!
//! Bounded: at most [`MAX_KEYS_PER_BRANCH`] live keys; a row whose new key would exceed it is
//! refused (the caller negatively acknowledges it, so nothing is lost and the source redelivers
//! after keys expire).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::ops::Range;

use arrow_array::ArrayRef;
use arrow_row::{RowConverter, SortField};

/// Live keys one branch may hold (about 48 bytes each: map entry and expiry queue entry).
pub const MAX_KEYS_PER_BRANCH: usize = 4_194_304;

/// What admitting one row decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sighting {
    /// The key's first sighting within MAX TIME: the row goes on.
    First,
    /// Seen within MAX TIME: the row is dropped (and acknowledged).
    Duplicate,
    /// The keyspace is full: the row is refused.
    Full,
}

/// The keys of one branch with their first-seen times (domain ns).
#[derive(Debug, Default)]
pub struct Keyspace {
    first_seen: HashMap<u128, i64>,
    /// Sightings in the order they came, which is time order.
    by_time: VecDeque<(i64, u128)>,
    /// Sightings earlier than `by_time`'s newest when they came, earliest on top.
    out_of_order: BinaryHeap<Reverse<(i64, u128)>>,
    /// Keys whose first row's payload is unresolved, with the watch entry that resolves them
    /// (always keys of `first_seen`).
    held: HashMap<u128, u64>,
    /// Queued sightings the map no longer holds that expiry has not popped yet (a refused
    /// key's, one an earlier restored sighting replaced): past a bound the queues are rebuilt.
    stale_queued: usize,
    /// Changed since its last snapshot.
    dirty: bool,
}

/// Stale queued sightings a keyspace tolerates before it rebuilds its queues, however few
/// keys it holds (it rebuilds once they outnumber its keys).
const MIN_STALE_BEFORE_COMPACTION: usize = 1_024;

/// The snapshot format version (first byte of an encoded keyspace).
const SNAPSHOT_VERSION: u8 = 2;
/// Bytes per key in a snapshot: the hash and the first sighting.
const SNAPSHOT_KEY_BYTES: usize = 24;

impl Keyspace {
    pub fn len(&self) -> usize {
        self.first_seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first_seen.is_empty()
    }

    /// Forgets keys first seen at or before `now_ns − max_time_ns`.
    pub fn expire(&mut self, now_ns: i64, max_time_ns: u64) {
        let cutoff = now_ns.saturating_sub(max_time_ns.min(i64::MAX as u64) as i64);
        while let Some(&(seen, key)) = self.by_time.front() {
            if seen > cutoff {
                break;
            }
            self.by_time.pop_front();
            self.forget(key, seen);
        }
        while let Some(&Reverse((seen, key))) = self.out_of_order.peek() {
            if seen > cutoff {
                break;
            }
            self.out_of_order.pop();
            self.forget(key, seen);
        }
    }

    /// Removes `key` when the map still holds this sighting of it.
    fn forget(&mut self, key: u128, seen: i64) {
        if self.first_seen.get(&key) == Some(&seen) {
            self.first_seen.remove(&key);
            self.held.remove(&key);
            self.dirty = true;
        }
    }

    /// Holds `key` (just admitted as a first sighting) until watch `entry` resolves.
    pub fn hold(&mut self, key: u128, entry: u64) {
        debug_assert!(self.first_seen.contains_key(&key), "a held key is live");
        self.held.insert(key, entry);
    }

    /// Watch `entry` resolved: its held `key` is kept (snapshots now carry it) when the payload
    /// was acknowledged, forgotten when it was refused. A key that expired meanwhile, or was
    /// seen anew under another entry, is left alone.
    pub fn resolve(&mut self, key: u128, entry: u64, acknowledged: bool) {
        if self.held.get(&key) != Some(&entry) {
            return;
        }
        self.held.remove(&key);
        if !acknowledged {
            // Its queued sighting goes stale (`forget` compares sightings).
            self.first_seen.remove(&key);
            self.stale_queued += 1;
        }
        self.dirty = true;
    }

    /// Rebuilds the expiry queues from the live sightings, without stale ones. A key refused
    /// and seen again at the same instant (a paced domain's clock can stand still) would
    /// otherwise be queued twice under one sighting, and listed twice by [`Keyspace::entries`].
    fn compact(&mut self) {
        let mut live: Vec<(i64, u128)> = self
            .first_seen
            .iter()
            .map(|(key, seen)| (*seen, *key))
            .collect();
        live.sort_unstable();
        self.by_time = live.into();
        self.out_of_order.clear();
        self.stale_queued = 0;
    }

    /// Keys held for an unresolved payload.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Queues a sighting for expiry (see the module docs for the two queues).
    fn queue(&mut self, key: u128, seen: i64) {
        if self
            .by_time
            .back()
            .is_some_and(|(newest, _)| seen < *newest)
        {
            self.out_of_order.push(Reverse((seen, key)));
        } else {
            self.by_time.push_back((seen, key));
        }
        if self.stale_queued > self.first_seen.len().max(MIN_STALE_BEFORE_COMPACTION) {
            self.compact();
        }
    }

    /// Admits one key hash seen at `now_ns`.
    pub fn admit(&mut self, key: u128, now_ns: i64) -> Sighting {
        if self.first_seen.contains_key(&key) {
            return Sighting::Duplicate;
        }
        if self.first_seen.len() >= MAX_KEYS_PER_BRANCH {
            return Sighting::Full;
        }
        self.first_seen.insert(key, now_ns);
        self.queue(key, now_ns);
        self.dirty = true;
        Sighting::First
    }

    /// Installs a key with its archived first sighting (restore); a later sighting of the
    /// same key keeps the earlier time.
    pub fn restore(&mut self, key: u128, first_seen_ns: i64) {
        match self.first_seen.get(&key) {
            // A repeat of the kept sighting, or a later one: nothing changes (queued twice,
            // the key would be written twice by the next snapshot, which then reads back
            // as damaged).
            Some(kept) if *kept <= first_seen_ns => return,
            // An earlier sighting replaces the kept one; the queued one goes stale.
            Some(_) => self.stale_queued += 1,
            None if self.first_seen.len() >= MAX_KEYS_PER_BRANCH => return,
            None => {}
        }
        self.first_seen.insert(key, first_seen_ns);
        self.queue(key, first_seen_ns);
    }

    /// Every live key with its first sighting, held keys excepted (backups and snapshots):
    /// the in-order ones oldest first, then the others.
    pub fn entries(&self) -> impl Iterator<Item = (u128, i64)> + '_ {
        let late = self.out_of_order.iter().map(|Reverse(sighting)| sighting);
        self.by_time
            .iter()
            .chain(late)
            .filter(|(seen, key)| {
                self.first_seen.get(key) == Some(seen) && !self.held.contains_key(key)
            })
            .map(|(seen, key)| (*key, *seen))
    }
}

impl Keyspace {
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Encodes every live key that is not held with its first sighting under key model
    /// `model` (empty when none: deletes the entry).
    pub fn snapshot(&mut self, model: u64) -> Vec<u8> {
        self.dirty = false;
        if self.stale_queued > 0 {
            self.compact();
        }
        let stored = self.first_seen.len() - self.held.len();
        if stored == 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(13 + stored * SNAPSHOT_KEY_BYTES);
        out.push(SNAPSHOT_VERSION);
        out.extend_from_slice(&model.to_le_bytes());
        out.extend_from_slice(&(stored as u32).to_le_bytes());
        for (key, seen) in self.entries() {
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&seen.to_le_bytes());
        }
        out
    }

    /// A keyspace from a [`Keyspace::snapshot`] taken under key model `model`; None when the
    /// bytes are not one or the keys were other expressions.
    pub fn from_snapshot(bytes: &[u8], model: u64) -> Option<Keyspace> {
        let (&version, rest) = bytes.split_first()?;
        if version != SNAPSHOT_VERSION || rest.len() < 12 {
            return None;
        }
        if u64::from_le_bytes(rest[..8].try_into().ok()?) != model {
            return None;
        }
        let rest = &rest[8..];
        let count = u32::from_le_bytes(rest[..4].try_into().ok()?) as usize;
        let body = &rest[4..];
        if body.len() != count * SNAPSHOT_KEY_BYTES {
            return None;
        }
        let mut space = Keyspace::default();
        for entry in body.chunks_exact(SNAPSHOT_KEY_BYTES) {
            let key = u128::from_le_bytes(entry[..16].try_into().ok()?);
            let seen = i64::from_le_bytes(entry[16..].try_into().ok()?);
            space.restore(key, seen);
        }
        space.dirty = false;
        Some(space)
    }
}

/// Hashes every row's key values (`values`: one array per `DEDUPLICATE ON` expression, all of
/// `rows` rows) into `out`. Fails only when arrow-row cannot encode a type, which validation
/// rules out for scalar keys.
pub fn key_hashes(
    converter: &mut RowConverter,
    values: &[ArrayRef],
    rows: Range<usize>,
    out: &mut Vec<u128>,
) -> Result<(), arrow_schema::ArrowError> {
    out.clear();
    let encoded = converter.convert_columns(values)?;
    out.extend(rows.map(|row| xxhash_rust::xxh3::xxh3_128(encoded.row(row).as_ref())));
    Ok(())
}

/// A converter for keys of `values`' types.
pub fn key_converter(values: &[ArrayRef]) -> Result<RowConverter, arrow_schema::ArrowError> {
    RowConverter::new(
        values
            .iter()
            .map(|v| SortField::new(v.data_type().clone()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot that lists a key twice (damaged, or a hand-made backup) restores it once,
    /// at its earlier sighting, and its next snapshot reads back.
    #[test]
    fn a_key_listed_twice_restores_once_at_its_earlier_sighting() {
        let mut space = Keyspace::default();
        for (key, seen) in [(5, 30), (5, 30), (5, 10), (6, 0), (6, 0)] {
            space.restore(key, seen);
        }
        let mut keys: Vec<(u128, i64)> = space.entries().collect();
        keys.sort();
        assert_eq!(keys, vec![(5, 10), (6, 0)]);
        assert!(Keyspace::from_snapshot(&space.snapshot(9), 9).is_some());
    }

    /// Domain time went back (a restored key first seen later than now): keys seen since
    /// still expire MAX TIME after their sighting, behind the later one, and the snapshot
    /// carries both.
    #[test]
    fn keys_expire_in_time_even_after_domain_time_went_back() {
        let mut space = Keyspace::default();
        space.restore(1, 1_000);
        assert_eq!(space.admit(2, 10), Sighting::First);
        assert_eq!(space.admit(3, 20), Sighting::First);
        space.expire(115, 100);
        assert_eq!(space.admit(2, 115), Sighting::First, "2 expired at 110");
        assert_eq!(
            space.admit(3, 115),
            Sighting::Duplicate,
            "3 lives until 120"
        );
        assert_eq!(
            space.admit(1, 115),
            Sighting::Duplicate,
            "1 lives until 1,100"
        );
        let restored = Keyspace::from_snapshot(&space.snapshot(9), 9).expect("reads back");
        let mut keys: Vec<(u128, i64)> = restored.entries().collect();
        keys.sort();
        assert_eq!(keys, vec![(1, 1_000), (2, 115), (3, 20)]);
    }

    #[test]
    fn a_key_is_a_duplicate_until_max_time_after_its_first_sighting() {
        let mut space = Keyspace::default();
        assert_eq!(space.admit(7, 100), Sighting::First);
        assert_eq!(space.admit(7, 150), Sighting::Duplicate);
        space.expire(199, 100);
        assert_eq!(space.admit(7, 199), Sighting::Duplicate);
        space.expire(200, 100);
        assert!(space.is_empty());
        assert_eq!(space.admit(7, 200), Sighting::First);
    }

    #[test]
    fn a_snapshot_restores_every_key_with_its_sighting() {
        let mut space = Keyspace::default();
        space.admit(3, 30);
        space.admit(u128::MAX, 40);
        let bytes = space.snapshot(7);
        assert!(!space.is_dirty());
        assert!(
            Keyspace::from_snapshot(&bytes, 8).is_none(),
            "another key model"
        );
        let restored = Keyspace::from_snapshot(&bytes, 7).expect("a keyspace");
        assert_eq!(
            restored.entries().collect::<Vec<_>>(),
            vec![(3, 30), (u128::MAX, 40)]
        );
        assert!(Keyspace::from_snapshot(&bytes[..bytes.len() - 1], 7).is_none());
    }

    #[test]
    fn a_damaged_snapshot_is_refused_or_read_never_a_panic() {
        let mut space = Keyspace::default();
        space.admit(3, 30);
        space.admit(9, 40);
        let bytes = space.snapshot(7);
        for (torn, damaged) in super::super::state_codec::damaged_copies(&bytes) {
            let Some(restored) = Keyspace::from_snapshot(&damaged, 7) else {
                continue;
            };
            assert!(!torn, "a torn snapshot of {} bytes was read", damaged.len());
            assert_eq!(
                restored.entries().count(),
                2,
                "a flipped byte keeps the count"
            );
        }
    }

    /// A held key catches duplicates but no snapshot carries it until its payload is
    /// acknowledged; a refused payload's key is forgotten, so its redelivery passes.
    #[test]
    fn a_held_key_is_stored_once_acknowledged_and_forgotten_once_refused() {
        let mut space = Keyspace::default();
        assert_eq!(space.admit(1, 10), Sighting::First);
        space.hold(1, 100);
        assert_eq!(space.admit(2, 10), Sighting::First);
        space.hold(2, 101);
        assert_eq!(space.admit(1, 11), Sighting::Duplicate);
        assert!(space.snapshot(9).is_empty(), "held keys are not stored");
        space.resolve(1, 100, true);
        space.resolve(2, 101, false);
        assert!(space.is_dirty());
        assert_eq!(
            space.admit(2, 12),
            Sighting::First,
            "a refused key is forgotten"
        );
        space.hold(2, 102);
        space.resolve(2, 101, false);
        assert_eq!(
            space.held(),
            1,
            "a stale entry leaves the new sighting held"
        );
        let restored = Keyspace::from_snapshot(&space.snapshot(9), 9).expect("reads back");
        assert_eq!(restored.entries().collect::<Vec<_>>(), vec![(1, 10)]);
        space.expire(1_000, 100);
        assert_eq!(space.held(), 0, "an expired key is no longer held");
        space.resolve(2, 102, false);
        assert!(space.is_empty());
    }

    /// A key refused and seen again at the same instant is written once: the snapshot reads
    /// back (it listed the key twice, and its count did not match).
    #[test]
    fn a_key_refused_and_seen_again_at_the_same_instant_is_stored_once() {
        let mut space = Keyspace::default();
        assert_eq!(space.admit(1, 10), Sighting::First);
        space.hold(1, 100);
        space.resolve(1, 100, false);
        assert_eq!(space.admit(1, 10), Sighting::First);
        let restored = Keyspace::from_snapshot(&space.snapshot(9), 9).expect("reads back");
        assert_eq!(restored.entries().collect::<Vec<_>>(), vec![(1, 10)]);
        space.expire(110, 100);
        assert!(space.is_empty());
    }

    #[test]
    fn restored_keys_expire_from_their_archived_sighting() {
        let mut space = Keyspace::default();
        space.restore(1, 10);
        space.restore(2, 20);
        assert_eq!(space.entries().collect::<Vec<_>>(), vec![(1, 10), (2, 20)]);
        space.expire(115, 100);
        assert_eq!(space.admit(1, 115), Sighting::First);
        assert_eq!(space.admit(2, 115), Sighting::Duplicate);
    }
}
