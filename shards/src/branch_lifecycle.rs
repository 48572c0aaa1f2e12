//! The live concrete branches of one branch declaration on one shard (DESIGN §5 item 9).
//!
//! A [`BranchTable`] owns the population of concrete branch instances a `CREATE BRANCH … TTL d
//! [MAX INSTANCES n EVICT LRU]` declaration has on one shard: each instance is keyed by its
//! encoded branch key `K` and holds the caller's per-branch state `V` (route buffers, processor
//! state, …) together with the instant of its last accepted input. It decides which instances
//! leave and why, and counts every departure by reason ([`EvictionCounters`]: `ttl`, `lru`,
//! `explicit`), which is what `nervix_branch_evictions_total{reason}` and
//! `nervix_branch_instances` report. It hands evicted state back to the caller, who drops the
//! branch's buffered work with it.
//!
//! It does no I/O and reads no clock: every operation carries the **physical monotonic** instant
//! it happens at, in nanoseconds (TTL and its maintenance scan are physical, DESIGN §5).
//!
//! # Rules
//!
//! * [`BranchTable::touch_or_insert`] is called once per accepted input for a branch. An existing
//!   branch becomes the most recently used and its last-input instant becomes `now_ns`. A new
//!   branch is created with the caller's state; when the table already holds its bound, the least
//!   recently used branch is evicted first (reason `lru`) and returned in [`Touched::evicted`].
//! * [`BranchTable::touch_all`] touches a batch of keys in turn with the same result, looking
//!   every key up before touching any so that their cache misses overlap.
//! * [`BranchTable::sweep`] is the periodic physical maintenance scan: it releases branches whose
//!   idle time (`now_ns` − last accepted input) is **longer** than the TTL (reason `ttl`), at most
//!   `max_evictions` per call so one scan never stalls the shard; the rest wait for the next call
//!   ([`BranchTable::next_expiry_ns`] says when one is due).
//! * [`BranchTable::remove`] releases one branch on request, e.g. domain stop (reason
//!   `explicit`).
//! * Reading state ([`BranchTable::get`], [`BranchTable::get_mut`]) is not input: it neither
//!   refreshes the TTL nor the LRU position.
//!
//! # Why it is correct
//!
//! Live branches sit in a slab of nodes addressed by `u32` indices, each holding its key, with a
//! hash table of node indices alone (a probe compares the key in the node it names; growing
//! rehashes each key from its node), and a **touch queue**: one entry `(sequence, node)` is
//! appended per touch, oldest first. Each touch takes the next number of a table-wide sequence and
//! writes it into the node; an entry is *live* when its node holds a branch and carries that same
//! number, so each live branch has exactly one live entry — its latest touch — and every earlier
//! entry of it (or of a freed node whose slot was reused: sequence numbers never repeat) is *stale*
//! and skipped. The live entries in queue order are therefore the branches from least to most
//! recently touched, exactly the order a linked list relinked on every touch would keep, but a
//! touch writes only the node and the queue's tail: it never visits the neighbours a relink would
//! unlink it from (two cache misses per touch on a table of 100,000 branches, Nexmark q5's).
//!
//! **LRU order is last-input order.** Every touch stamps the node with an instant no earlier than
//! any stamp already in the table (a `now_ns` that goes backwards is clamped to the latest instant
//! the table has seen) and its live entry is the newest, so stamps never decrease along the live
//! entries. The oldest last input is therefore always the first live entry, and the TTL sweep can
//! walk from there and **stop at the first branch that has not expired**: every live entry after
//! it was touched at the same instant or later, so it has not expired either. The queue's front is
//! kept live (stale entries reaching it are dropped when it changes), so a sweep costs
//! O(evicted + 1) and [`BranchTable::next_expiry_ns`] reads one entry.
//!
//! **Bounded.** With `MAX INSTANCES n` the table never holds more than `n` branches: an insert at
//! the bound evicts before it inserts. Without it, the table is still bounded by
//! [`MAX_TABLE_INSTANCES`] (the `u32` index space), a population no shard's memory could hold;
//! reaching it evicts by LRU like a declared bound instead of failing. The slab holds at most one
//! node per branch that was live at the same time. The queue is compacted (its stale entries
//! dropped, order kept) once it holds more than twice the live branches plus
//! [`TOUCH_QUEUE_SLACK`] entries, so it never exceeds that, and compaction is amortized O(1): after
//! one, at least half the population in touches or removals comes before the next. Memory thus
//! follows the configured bound (or the peak population), never input volume.
//!
//! Counters only grow and saturate; `len` is the live population, checked against the map and the
//! queue by `debug_assert` after every transition in debug builds.
//!
//! # Engine memory per idle branch
//!
//! An idle branch costs one slab node, one map entry and up to two queue entries. Beside `K` and
//! `V`, a node holds its sequence number, a `u64` last-input instant, a free-list link and the
//! discriminant of the `Option` that marks free nodes (often folded into a niche of `K` or `V`); a
//! map entry is a `u32` node index and one hashbrown control byte; a queue entry is a sequence
//! number and an index. The key is stored once, in the node: the map holds no key, so its bucket
//! array stays small enough to keep in cache on large tables (4-byte buckets where a `(K, u32)`
//! entry would be 32 bytes for a 24-byte key). [`BranchTable::OVERHEAD_BYTES_PER_BRANCH`] computes
//! the fixed part for the concrete `K` and `V`; the `shards_branch_lifecycle` tests check the whole
//! per-branch figure, including map load-factor slack and preallocated-but-free slab and queue
//! space, against DESIGN §10's 1 KiB per idle branch.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hash};
use std::mem::size_of;

use hashbrown::hash_table::{Entry, HashTable};
use thiserror::Error;

use crate::branch_key::KeyHashState;

/// Largest population one table can hold, in branches: the `u32` node index space, with
/// `u32::MAX` reserved as the free list's end. Also the effective bound of a table without
/// `MAX INSTANCES`.
pub const MAX_TABLE_INSTANCES: u32 = u32::MAX - 1;

/// Largest number of branches a bounded table preallocates at construction, in branches. A
/// `MAX INSTANCES` beyond this grows its slab and map on demand up to the bound (amortized, and
/// never again once warm), so a large declared bound does not reserve memory no branch uses.
pub const MAX_PREALLOCATED_INSTANCES: u32 = 65_536;

/// Stale touch-queue entries tolerated beyond twice the live branches before the queue is
/// compacted, in entries (module docs).
pub const TOUCH_QUEUE_SLACK: usize = 64;

/// Largest population whose whole queue a debug-build invariant check walks, in branches.
#[cfg(debug_assertions)]
const FULL_CHECK_MAX_INSTANCES: usize = 256;

/// End of the free list.
const NO_NODE: u32 = u32::MAX;

/// Why a branch left its table: the `reason` label of `nervix_branch_evictions_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvictionReason {
    /// Idle longer than the declaration's TTL, released by the maintenance scan.
    Ttl,
    /// Least recently used when a new branch arrived at `MAX INSTANCES`.
    Lru,
    /// Removed on request (domain stop, alteration).
    Explicit,
}

impl EvictionReason {
    /// The metric label value.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Ttl => "ttl",
            Self::Lru => "lru",
            Self::Explicit => "explicit",
        }
    }
}

/// Branches released since the table was created, by reason (monotonic, saturating).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct EvictionCounters {
    /// Released by the TTL maintenance scan.
    pub ttl: u64,
    /// Evicted as least recently used at `MAX INSTANCES`.
    pub lru: u64,
    /// Removed on request.
    pub explicit: u64,
}

impl EvictionCounters {
    /// The counter for `reason`.
    #[must_use]
    pub const fn get(&self, reason: EvictionReason) -> u64 {
        match reason {
            EvictionReason::Ttl => self.ttl,
            EvictionReason::Lru => self.lru,
            EvictionReason::Explicit => self.explicit,
        }
    }

    fn count(&mut self, reason: EvictionReason) {
        let counter = match reason {
            EvictionReason::Ttl => &mut self.ttl,
            EvictionReason::Lru => &mut self.lru,
            EvictionReason::Explicit => &mut self.explicit,
        };
        *counter = counter.saturating_add(1);
    }
}

/// A `MAX INSTANCES` outside `1..=MAX_TABLE_INSTANCES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("MAX INSTANCES must be 1..={MAX_TABLE_INSTANCES} branches, got {max_instances}")]
pub struct InvalidMaxInstances {
    /// The refused bound, in branches.
    pub max_instances: u32,
}

/// The answer of [`BranchTable::touch_or_insert`]. It carries no reference to the branch's state,
/// so it holds no borrow of the table; a caller that needs the state asks
/// [`BranchTable::get_mut`].
#[derive(Debug)]
pub struct Touched<K, V> {
    /// Whether the branch was created by this call (its state came from `make`).
    pub created: bool,
    /// The branch evicted as least recently used to make room, with its state; the caller drops
    /// its buffered work. Counted with reason `lru`.
    pub evicted: Option<(K, V)>,
}

/// One slab slot: a live branch, or a free slot on the free list.
#[derive(Debug)]
struct Node<K, V> {
    /// The sequence number of the branch's latest touch: its one live queue entry carries it.
    seq: u64,
    /// Physical monotonic instant of the last accepted input, in nanoseconds.
    last_input_ns: u64,
    /// The next free slot (free nodes only).
    next_free: u32,
    /// The branch, or `None` when the slot is free.
    entry: Option<(K, V)>,
}

/// One touch-queue entry: node `at` was touched with sequence number `seq`.
#[derive(Debug, Clone, Copy)]
struct Touch {
    seq: u64,
    at: u32,
}

/// Whether `touch` is its node's latest, on a live node (module docs).
fn is_live<K, V>(nodes: &[Node<K, V>], touch: Touch) -> bool {
    let node = &nodes[touch.at as usize];
    node.entry.is_some() && node.seq == touch.seq
}

/// Whether node `at` holds branch `key`: the map's equality, as the map holds no keys.
fn holds<K, V, Q>(nodes: &[Node<K, V>], at: u32, key: &Q) -> bool
where
    K: Borrow<Q>,
    Q: Eq + ?Sized,
{
    nodes[at as usize]
        .entry
        .as_ref()
        .is_some_and(|(k, _)| k.borrow() == key)
}

/// The hash of the key in node `at`, which the map needs to move the node's entry when it grows.
/// The map names live nodes only, and a node is placed before its index is inserted.
fn hash_at<K: Hash, V>(hasher: &KeyHashState, nodes: &[Node<K, V>], at: u32) -> u64 {
    let (key, _) = nodes[at as usize]
        .entry
        .as_ref()
        .expect("the map names live nodes only");
    hasher.hash_one(key)
}

/// The live concrete branches of one branch declaration on one shard; see the module docs.
#[derive(Debug)]
pub struct BranchTable<K, V> {
    ttl_ns: u64,
    /// `MAX INSTANCES`, if declared.
    max_instances: Option<u32>,
    nodes: Vec<Node<K, V>>,
    /// The live branches' node indices, hashed by their nodes' keys with `hasher`.
    index: HashTable<u32>,
    /// Hashes keys for `index`. `K: Borrow<Q>` makes a borrowed `Q` hash as its `K` does.
    hasher: KeyHashState,
    /// Touches, oldest first; its front is live whenever it is not empty.
    touches: VecDeque<Touch>,
    /// The sequence number the next touch takes.
    next_seq: u64,
    free_head: u32,
    /// Latest instant stamped on any touch; stamps are clamped to it so they never decrease.
    latest_input_ns: u64,
    /// [`BranchTable::touch_all`]'s lookups, kept between calls so a call allocates nothing.
    lookups: Vec<u32>,
    counters: EvictionCounters,
}

impl<K, V> BranchTable<K, V>
where
    K: Hash + Eq + Clone,
{
    /// Engine bytes an idle branch costs beside its `K` and `V` (its one key copy, in the node):
    /// the slab node's sequence number, instant, free link and slot tag, the map entry's `u32`
    /// index and control byte, and two queue entries (the most a compacted queue holds per
    /// branch). Map load-factor slack is excluded.
    pub const OVERHEAD_BYTES_PER_BRANCH: usize =
        (size_of::<Node<K, V>>() - size_of::<K>() - size_of::<V>())
            + (size_of::<u32>() + 1)
            + 2 * size_of::<Touch>();

    /// A table for a declaration with `TTL ttl_ns` and, when declared, `MAX INSTANCES
    /// max_instances`. A bounded table preallocates room for its bound (up to
    /// [`MAX_PREALLOCATED_INSTANCES`]).
    ///
    /// # Errors
    ///
    /// [`InvalidMaxInstances`] when `max_instances` is `Some(0)` or above
    /// [`MAX_TABLE_INSTANCES`].
    pub fn new(ttl_ns: u64, max_instances: Option<u32>) -> Result<Self, InvalidMaxInstances> {
        let preallocated = match max_instances {
            Some(n) if n == 0 || n > MAX_TABLE_INSTANCES => {
                return Err(InvalidMaxInstances { max_instances: n });
            }
            Some(n) => n.min(MAX_PREALLOCATED_INSTANCES) as usize,
            None => 0,
        };
        Ok(Self {
            ttl_ns,
            max_instances,
            nodes: Vec::with_capacity(preallocated),
            index: HashTable::with_capacity(preallocated),
            hasher: KeyHashState::default(),
            touches: VecDeque::with_capacity(preallocated),
            next_seq: 0,
            free_head: NO_NODE,
            latest_input_ns: 0,
            lookups: Vec::new(),
            counters: EvictionCounters::default(),
        })
    }

    /// The declaration's TTL, in nanoseconds.
    #[must_use]
    pub const fn ttl_ns(&self) -> u64 {
        self.ttl_ns
    }

    /// The declared `MAX INSTANCES`, if any.
    #[must_use]
    pub const fn max_instances(&self) -> Option<u32> {
        self.max_instances
    }

    /// Live branches (`nervix_branch_instances` for this declaration on this shard).
    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether no branch is live.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Branches released since creation, by reason.
    #[must_use]
    pub const fn counters(&self) -> EvictionCounters {
        self.counters
    }

    /// Bytes the table's slab, map and touch queue have allocated, excluding heap memory owned by
    /// keys and states (the map's is its allocation: a `u32` and a control byte per bucket, and
    /// one group's control bytes of padding).
    #[must_use]
    pub fn allocated_bytes(&self) -> usize {
        self.nodes
            .capacity()
            .saturating_mul(size_of::<Node<K, V>>())
            .saturating_add(self.index.allocation_size())
            .saturating_add(self.touches.capacity().saturating_mul(size_of::<Touch>()))
    }

    /// The node of live branch `key`, whose hash is `hash`.
    fn find<Q>(&self, hash: u64, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let nodes = &self.nodes;
        self.index.find(hash, |&at| holds(nodes, at, key)).copied()
    }

    /// Takes node `at`, holding a key whose hash is `hash`, out of the map; whether it was there.
    /// Matched by index, so the node need not be read (nor live any more).
    fn unindex(&mut self, hash: u64, at: u32) -> bool {
        match self.index.find_entry(hash, |&i| i == at) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Records one accepted input for the branch `key` at physical instant `now_ns`: refreshes an
    /// existing branch, or creates it with `make()`, first evicting the least recently used branch
    /// (reason `lru`) when the table is at its bound. The branch becomes the most recently used.
    pub fn touch_or_insert<Q>(
        &mut self,
        key: &Q,
        now_ns: u64,
        make: impl FnOnce() -> V,
    ) -> Touched<K, V>
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        let stamp_ns = self.stamp(now_ns);
        let hash = self.hasher.hash_one(key);

        if let Some(at) = self.find(hash, key) {
            self.retouch(at, stamp_ns);
            self.check_invariants();
            return Touched {
                created: false,
                evicted: None,
            };
        }

        let bound = self.max_instances.unwrap_or(MAX_TABLE_INSTANCES) as usize;
        let evicted = if self.index.len() >= bound {
            self.evict_lru_end(EvictionReason::Lru)
        } else {
            None
        };
        // Below the bound now: the insert is `touch_unfound`'s.
        self.touch_unfound(key, now_ns, make);
        Touched {
            created: true,
            evicted,
        }
    }

    /// Puts a new branch into a free node of `nodes` (the free list starting at `free_head`) or a
    /// new one, stamped `stamp_ns`; returns the node. The caller indexes and enqueues it. The
    /// population must be below the bound. It takes the slab's fields alone so a caller can
    /// place a node while it holds a vacant map entry.
    fn place(
        nodes: &mut Vec<Node<K, V>>,
        free_head: &mut u32,
        key: K,
        state: V,
        stamp_ns: u64,
    ) -> u32 {
        let entry = Some((key, state));
        if *free_head == NO_NODE {
            // The free list is empty only when every slot is live, so the slab length equals the
            // population, which is below the bound (≤ MAX_TABLE_INSTANCES).
            let at = nodes.len() as u32;
            nodes.push(Node {
                seq: 0,
                last_input_ns: stamp_ns,
                next_free: NO_NODE,
                entry,
            });
            at
        } else {
            let at = *free_head;
            let node = &mut nodes[at as usize];
            debug_assert!(node.entry.is_none(), "free list holds a live node {at}");
            *free_head = node.next_free;
            node.next_free = NO_NODE;
            node.last_input_ns = stamp_ns;
            node.entry = entry;
            at
        }
    }

    /// A touch of `key`, which a lookup did not find, when the table is below its bound (no
    /// eviction can be needed): one map probe finds it (a key listed twice in a batch, inserted
    /// by its first touch) or the slot to insert it in, instead of a lookup and then an insert.
    fn touch_unfound<Q>(&mut self, key: &Q, now_ns: u64, make: impl FnOnce() -> V)
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        let stamp_ns = self.stamp(now_ns);
        let hash = self.hasher.hash_one(key);
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        // The probe reserves room for a vacant entry (any growth rehashes here, while every
        // indexed node is placed), so inserting the new node's index afterwards rehashes nothing.
        let found = match self.index.entry(
            hash,
            |&at| holds(nodes, at, key),
            |&at| hash_at(hasher, nodes, at),
        ) {
            Entry::Occupied(entry) => Some(*entry.get()),
            Entry::Vacant(entry) => {
                let at = Self::place(
                    &mut self.nodes,
                    &mut self.free_head,
                    K::from(key),
                    make(),
                    stamp_ns,
                );
                entry.insert(at);
                self.enqueue(at);
                self.compact_if_stale();
                None
            }
        };
        if let Some(at) = found {
            self.retouch(at, stamp_ns);
        }
        self.check_invariants();
    }

    /// [`BranchTable::touch_or_insert`] for each of `keys` in turn, at physical instant
    /// `now_ns`, appending the branches evicted to make room to `evicted`. The result is that of
    /// touching them one by one, but every key is looked up before any is touched: on a large
    /// table each lookup misses the cache, and a touch's stores between two lookups hold the next
    /// one up, so one by one the misses come in turn; looked up back to back, they overlap. A
    /// node found stays the key's until its touch because nothing leaves the table in between
    /// unless an insert reaches the bound, so when the new keys could reach it, the keys are
    /// touched one by one instead. A key the lookups did not find is inserted by one map probe
    /// that also finds it when it was listed twice (its first touch inserted it).
    pub fn touch_all<'q, Q>(
        &mut self,
        keys: impl Iterator<Item = &'q Q> + Clone,
        now_ns: u64,
        mut make: impl FnMut() -> V,
        evicted: &mut Vec<(K, V)>,
    ) where
        K: Borrow<Q> + for<'a> From<&'a Q>,
        Q: Hash + Eq + ?Sized + 'q,
    {
        let mut found = std::mem::take(&mut self.lookups);
        found.clear();
        found.extend(
            keys.clone()
                .map(|key| self.find(self.hasher.hash_one(key), key).unwrap_or(NO_NODE)),
        );
        let new_keys = found.iter().filter(|at| **at == NO_NODE).count();
        let bound = self.max_instances.unwrap_or(MAX_TABLE_INSTANCES) as usize;
        let no_eviction = self.index.len().saturating_add(new_keys) <= bound;
        for (key, &at) in keys.zip(&found) {
            if no_eviction && at != NO_NODE {
                // Stamped per touch: a call without keys must leave the latest instant as is.
                let stamp_ns = self.stamp(now_ns);
                self.retouch(at, stamp_ns);
                self.check_invariants();
            } else if no_eviction {
                self.touch_unfound(key, now_ns, &mut make);
            } else {
                evicted.extend(self.touch_or_insert(key, now_ns, &mut make).evicted);
            }
        }
        // Kept for the next call; it holds as many entries as the largest call had keys.
        self.lookups = found;
    }

    /// The maintenance scan at physical instant `now_ns`: releases branches idle longer than the
    /// TTL, least recently touched first, at most `max_evictions` of them, appending each with its
    /// state to `out` (reason `ttl`). Returns how many it released. Stops at the first branch that
    /// has not expired (see the module docs for why none after it has).
    pub fn sweep(&mut self, now_ns: u64, max_evictions: usize, out: &mut Vec<(K, V)>) -> usize {
        let mut released = 0;
        while released < max_evictions {
            let Some(front) = self.touches.front() else {
                break;
            };
            let idle_ns = now_ns.saturating_sub(self.nodes[front.at as usize].last_input_ns);
            if idle_ns <= self.ttl_ns {
                break;
            }
            match self.evict_lru_end(EvictionReason::Ttl) {
                Some(branch) => out.push(branch),
                None => break,
            }
            released += 1;
        }
        self.check_invariants();
        released
    }

    /// The physical instant from which the least recently touched branch is expired (the first
    /// instant at which a [`BranchTable::sweep`] releases something), or `None` when the table is
    /// empty. Saturates at `u64::MAX`.
    #[must_use]
    pub fn next_expiry_ns(&self) -> Option<u64> {
        self.touches.front().map(|front| {
            self.nodes[front.at as usize]
                .last_input_ns
                .saturating_add(self.ttl_ns)
                .saturating_add(1)
        })
    }

    /// Releases the branch `key` on request (reason `explicit`), returning its state, or `None`
    /// (and counting nothing) when it is not live.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let nodes = &self.nodes;
        let entry = self
            .index
            .find_entry(self.hasher.hash_one(key), |&at| holds(nodes, at, key))
            .ok()?;
        let (at, _) = entry.remove();
        let (_, state) = self.free(at)?;
        self.drop_stale_front();
        self.compact_if_stale();
        self.counters.count(EvictionReason::Explicit);
        self.check_invariants();
        Some(state)
    }

    /// The state of live branch `key`, without touching it.
    #[must_use]
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = self.find(self.hasher.hash_one(key), key)?;
        self.nodes[at as usize].entry.as_ref().map(|(_, v)| v)
    }

    /// The state of live branch `key`, mutably, without touching it.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = self.find(self.hasher.hash_one(key), key)?;
        self.nodes[at as usize].entry.as_mut().map(|(_, v)| v)
    }

    /// The physical instant of live branch `key`'s last accepted input, in nanoseconds.
    #[must_use]
    pub fn last_input_ns<Q>(&self, key: &Q) -> Option<u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = self.find(self.hasher.hash_one(key), key)?;
        Some(self.nodes[at as usize].last_input_ns)
    }

    /// Live branches from least to most recently used, each with its state and last-input
    /// instant in nanoseconds.
    pub fn iter_lru(&self) -> impl Iterator<Item = (&K, &V, u64)> + '_ {
        self.touches.iter().filter_map(|touch| {
            let node = &self.nodes[touch.at as usize];
            let (k, v) = node.entry.as_ref().filter(|_| node.seq == touch.seq)?;
            Some((k, v, node.last_input_ns))
        })
    }

    /// The instant a touch at `now_ns` is stamped with: `now_ns`, or the latest instant the
    /// table has seen when `now_ns` is earlier (stamps never decrease, module docs).
    fn stamp(&mut self, now_ns: u64) -> u64 {
        self.latest_input_ns = self.latest_input_ns.max(now_ns);
        self.latest_input_ns
    }

    /// Makes live node `at` the most recently used, stamped `stamp_ns`.
    ///
    /// It only writes the node, never reads it: on a large table the node may be a cache miss again
    /// (in a batch, the later keys' lookups can push out the line this key's lookup brought in),
    /// and a read would hold up the touch until it arrives. Whether an end of the queue is `at`'s
    /// live entry is known from the entry alone: the back entry is the latest touch of any node, so
    /// one naming `at` is `at`'s latest (a slot freed and reused since was enqueued again by its
    /// insert), and the front entry is always live.
    fn retouch(&mut self, at: u32, stamp_ns: u64) {
        self.nodes[at as usize].last_input_ns = stamp_ns;
        // Already the newest entry: the order stays as it is.
        if self.touches.back().is_some_and(|back| back.at == at) {
            return;
        }
        // Its previous entry goes stale now; when it was the front, the front moves on.
        let was_front = self.touches.front().is_some_and(|front| front.at == at);
        self.enqueue(at);
        if was_front {
            self.drop_stale_front();
        }
        self.compact_if_stale();
    }

    /// Appends live node `at`'s newest touch to the queue.
    fn enqueue(&mut self, at: u32) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.nodes[at as usize].seq = seq;
        self.touches.push_back(Touch { seq, at });
    }

    /// Drops stale entries from the queue's front, so the front is the least recently used
    /// branch's entry.
    fn drop_stale_front(&mut self) {
        while let Some(&front) = self.touches.front() {
            if is_live(&self.nodes, front) {
                return;
            }
            self.touches.pop_front();
        }
    }

    /// Drops every stale entry, keeping the order, once they outnumber the bound (module docs).
    fn compact_if_stale(&mut self) {
        if self.touches.len() <= 2 * self.index.len() + TOUCH_QUEUE_SLACK {
            return;
        }
        let nodes = &self.nodes;
        self.touches.retain(|touch| is_live(nodes, *touch));
    }

    /// Evicts the least recently used branch, frees its node and counts it under `reason`.
    fn evict_lru_end(&mut self, reason: EvictionReason) -> Option<(K, V)> {
        let front = self.touches.pop_front()?;
        debug_assert!(is_live(&self.nodes, front), "a stale entry at the front");
        let (key, state) = self.free(front.at)?;
        let removed = self.unindex(self.hasher.hash_one(&key), front.at);
        debug_assert!(removed, "map and queue disagree on an evicted branch");
        self.drop_stale_front();
        self.counters.count(reason);
        Some((key, state))
    }

    /// Moves node `at` to the free list, returning its branch; its queue entries become stale.
    fn free(&mut self, at: u32) -> Option<(K, V)> {
        let node = &mut self.nodes[at as usize];
        let entry = node.entry.take();
        debug_assert!(entry.is_some(), "freeing an already free node {at}");
        node.next_free = self.free_head;
        self.free_head = at;
        entry
    }

    /// Debug-build check that the queue, the map and the stamps agree. Walks the whole queue only
    /// for populations up to [`FULL_CHECK_MAX_INSTANCES`] so large debug-build tests stay linear.
    fn check_invariants(&self) {
        #[cfg(debug_assertions)]
        {
            debug_assert!(
                self.touches.len() <= 2 * self.index.len() + TOUCH_QUEUE_SLACK + 1,
                "touch queue past its bound"
            );
            debug_assert!(
                self.touches
                    .front()
                    .is_none_or(|front| is_live(&self.nodes, *front)),
                "a stale entry at the front"
            );
            if self.index.len() <= FULL_CHECK_MAX_INSTANCES {
                let mut count = 0usize;
                let mut prev_stamp = 0u64;
                for touch in self.touches.iter().filter(|t| is_live(&self.nodes, **t)) {
                    let node = &self.nodes[touch.at as usize];
                    debug_assert!(
                        node.last_input_ns >= prev_stamp,
                        "last-input instants decrease along the queue at node {}",
                        touch.at
                    );
                    let (key, _) = node.entry.as_ref().expect("a live entry's node is live");
                    debug_assert_eq!(
                        self.find(self.hasher.hash_one(key), key),
                        Some(touch.at),
                        "map disagrees at {}",
                        touch.at
                    );
                    prev_stamp = node.last_input_ns;
                    count += 1;
                }
                // One live entry per branch: as many as the map holds, each naming its own node.
                debug_assert_eq!(count, self.index.len(), "queue and map populations differ");
                debug_assert!(
                    count <= self.max_instances.unwrap_or(MAX_TABLE_INSTANCES) as usize,
                    "population {count} above the bound"
                );
            }
        }
    }
}
