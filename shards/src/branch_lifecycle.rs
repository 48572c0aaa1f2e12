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
//! Live branches sit on one intrusive doubly-linked list threaded through a slab of nodes by
//! `u32` indices, ordered from least to most recently touched, plus a `HashMap` from key to node
//! index. A touch unlinks a node and relinks it at the most-recent end; an eviction unlinks the
//! least-recent end: both are O(1), and once the slab and map have grown to the population no
//! touch allocates (freed nodes go on a free list and are reused; a new key is cloned once when
//! its branch is created, never on a touch).
//!
//! **LRU order is last-input order.** Every touch stamps the node with an instant no earlier than
//! any stamp already in the table (a `now_ns` that goes backwards is clamped to the latest instant
//! the table has seen) and moves it to the most-recent end, so stamps never decrease from the
//! least-recent end to the most-recent end. The oldest last input is therefore always at the
//! least-recent end, and the TTL sweep can walk from there and **stop at the first branch that has
//! not expired**: every branch after it was touched at the same instant or later, so it has not
//! expired either. A sweep thus costs O(evicted + 1), never a scan of the population.
//!
//! **Bounded.** With `MAX INSTANCES n` the table never holds more than `n` branches: an insert at
//! the bound evicts before it inserts. Without it, the table is still bounded by
//! [`MAX_TABLE_INSTANCES`] (the `u32` index space), a population no shard's memory could hold;
//! reaching it evicts by LRU like a declared bound instead of failing. The slab holds at most one
//! node per branch that was live at the same time, so memory follows the configured bound (or the
//! peak population), never input volume.
//!
//! Counters only grow and saturate; `len` is the live population, checked against the map and the
//! list by `debug_assert` after every transition in debug builds.
//!
//! # Engine memory per idle branch
//!
//! An idle branch costs one slab node and one map entry. Beside `K` and `V`, a node holds two
//! `u32` links, a `u64` last-input instant and the discriminant of the `Option` that marks free
//! nodes (often folded into a niche of `K` or `V`); a map entry holds a `u32` index and one
//! hashbrown control byte. The key is stored twice (once in the map, once in the node so LRU and
//! TTL evictions can find the map entry): for `K = Box<[u8]>` that is a second 16-byte box plus
//! the key bytes again. [`BranchTable::OVERHEAD_BYTES_PER_BRANCH`] computes the fixed part for the
//! concrete `K` and `V`; the `shards_branch_lifecycle` tests check the whole per-branch figure,
//! including the second key copy, map load-factor slack and preallocated-but-free slab space,
//! against DESIGN §10's 1 KiB per idle branch.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::mem::size_of;

use thiserror::Error;

/// Largest population one table can hold, in branches: the `u32` node index space, with
/// `u32::MAX` reserved as the list end. Also the effective bound of a table without
/// `MAX INSTANCES`.
pub const MAX_TABLE_INSTANCES: u32 = u32::MAX - 1;

/// Largest number of branches a bounded table preallocates at construction, in branches. A
/// `MAX INSTANCES` beyond this grows its slab and map on demand up to the bound (amortized, and
/// never again once warm), so a large declared bound does not reserve memory no branch uses.
pub const MAX_PREALLOCATED_INSTANCES: u32 = 65_536;

/// Largest population whose whole list a debug-build invariant check walks, in branches.
#[cfg(debug_assertions)]
const FULL_CHECK_MAX_INSTANCES: usize = 256;

/// End of the intrusive lists (the live list and the free list).
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

/// The answer of [`BranchTable::touch_or_insert`].
#[derive(Debug)]
pub struct Touched<'a, K, V> {
    /// The branch's state, now the most recently used.
    pub state: &'a mut V,
    /// Whether the branch was created by this call (its state came from `make`).
    pub created: bool,
    /// The branch evicted as least recently used to make room, with its state; the caller drops
    /// its buffered work. Counted with reason `lru`.
    pub evicted: Option<(K, V)>,
}

/// One slab slot: a live branch on the LRU list, or a free slot on the free list.
#[derive(Debug)]
struct Node<K, V> {
    /// Toward the least recently used end (live), or the next free slot (free).
    older: u32,
    /// Toward the most recently used end (live only).
    newer: u32,
    /// Physical monotonic instant of the last accepted input, in nanoseconds.
    last_input_ns: u64,
    /// The branch, or `None` when the slot is free.
    entry: Option<(K, V)>,
}

/// The live concrete branches of one branch declaration on one shard; see the module docs.
#[derive(Debug)]
pub struct BranchTable<K, V> {
    ttl_ns: u64,
    /// `MAX INSTANCES`, if declared.
    max_instances: Option<u32>,
    nodes: Vec<Node<K, V>>,
    index: HashMap<K, u32, crate::branch_key::KeyHashState>,
    /// Least recently used live node.
    lru: u32,
    /// Most recently used live node.
    mru: u32,
    free_head: u32,
    /// Latest instant stamped on any touch; stamps are clamped to it so they never decrease.
    latest_input_ns: u64,
    counters: EvictionCounters,
}

impl<K, V> BranchTable<K, V>
where
    K: Hash + Eq + Clone,
{
    /// Engine bytes an idle branch costs beside its `K` and `V`: the slab node's links, instant and
    /// slot tag, the map entry's index and control byte, and the second copy of `K` the node keeps
    /// (its inline size; heap bytes a `K` owns come on top). Map load-factor slack is excluded.
    pub const OVERHEAD_BYTES_PER_BRANCH: usize =
        (size_of::<Node<K, V>>() - size_of::<K>() - size_of::<V>())
            + (size_of::<(K, u32)>() + 1 - size_of::<K>())
            + size_of::<K>();

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
            index: HashMap::with_capacity_and_hasher(preallocated, Default::default()),
            lru: NO_NODE,
            mru: NO_NODE,
            free_head: NO_NODE,
            latest_input_ns: 0,
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

    /// Bytes the table's slab and map have allocated, excluding heap memory owned by keys and
    /// states (map size estimated as its capacity × (entry + control byte)).
    #[must_use]
    pub fn allocated_bytes(&self) -> usize {
        self.nodes
            .capacity()
            .saturating_mul(size_of::<Node<K, V>>())
            .saturating_add(
                self.index
                    .capacity()
                    .saturating_mul(size_of::<(K, u32)>() + 1),
            )
    }

    /// Records one accepted input for the branch `key` at physical instant `now_ns`: refreshes an
    /// existing branch, or creates it with `make()`, first evicting the least recently used branch
    /// (reason `lru`) when the table is at its bound. The branch becomes the most recently used.
    pub fn touch_or_insert<Q>(
        &mut self,
        key: &Q,
        now_ns: u64,
        make: impl FnOnce() -> V,
    ) -> Touched<'_, K, V>
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.latest_input_ns = self.latest_input_ns.max(now_ns);
        let stamp_ns = self.latest_input_ns;

        if let Some(&at) = self.index.get(key) {
            self.unlink(at);
            self.push_mru(at, stamp_ns);
            self.check_invariants();
            let state = self.state_mut(at);
            return Touched {
                state,
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

        let owned = K::from(key);
        let entry = Some((owned.clone(), make()));
        let at = if self.free_head == NO_NODE {
            // The free list is empty only when every slot is live, so the slab length equals the
            // population, which is below the bound (≤ MAX_TABLE_INSTANCES) after the eviction.
            let at = self.nodes.len() as u32;
            self.nodes.push(Node {
                older: NO_NODE,
                newer: NO_NODE,
                last_input_ns: stamp_ns,
                entry,
            });
            at
        } else {
            let at = self.free_head;
            let node = &mut self.nodes[at as usize];
            debug_assert!(node.entry.is_none(), "free list holds a live node {at}");
            self.free_head = node.older;
            node.entry = entry;
            at
        };
        self.index.insert(owned, at);
        self.push_mru(at, stamp_ns);
        self.check_invariants();
        let state = self.state_mut(at);
        Touched {
            state,
            created: true,
            evicted,
        }
    }

    /// The maintenance scan at physical instant `now_ns`: releases branches idle longer than the
    /// TTL, least recently touched first, at most `max_evictions` of them, appending each with its
    /// state to `out` (reason `ttl`). Returns how many it released. Stops at the first branch that
    /// has not expired (see the module docs for why none after it has).
    pub fn sweep(&mut self, now_ns: u64, max_evictions: usize, out: &mut Vec<(K, V)>) -> usize {
        let mut released = 0;
        while released < max_evictions && self.lru != NO_NODE {
            let idle_ns = now_ns.saturating_sub(self.nodes[self.lru as usize].last_input_ns);
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
        (self.lru != NO_NODE).then(|| {
            self.nodes[self.lru as usize]
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
        let at = self.index.remove(key)?;
        self.unlink(at);
        let (_, state) = self.free(at)?;
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
        let at = *self.index.get(key)?;
        self.nodes[at as usize].entry.as_ref().map(|(_, v)| v)
    }

    /// The state of live branch `key`, mutably, without touching it.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = *self.index.get(key)?;
        self.nodes[at as usize].entry.as_mut().map(|(_, v)| v)
    }

    /// The physical instant of live branch `key`'s last accepted input, in nanoseconds.
    #[must_use]
    pub fn last_input_ns<Q>(&self, key: &Q) -> Option<u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = *self.index.get(key)?;
        Some(self.nodes[at as usize].last_input_ns)
    }

    /// Live branches from least to most recently used, each with its state and last-input
    /// instant in nanoseconds.
    pub fn iter_lru(&self) -> impl Iterator<Item = (&K, &V, u64)> + '_ {
        let mut at = self.lru;
        std::iter::from_fn(move || {
            let node = self.nodes.get(at as usize)?;
            at = node.newer;
            let (k, v) = node.entry.as_ref()?;
            Some((k, v, node.last_input_ns))
        })
    }

    /// Unlinks the least recently used branch, frees its node and counts it under `reason`.
    fn evict_lru_end(&mut self, reason: EvictionReason) -> Option<(K, V)> {
        let at = self.lru;
        if at == NO_NODE {
            return None;
        }
        self.unlink(at);
        let (key, state) = self.free(at)?;
        let removed = self.index.remove(&key);
        debug_assert_eq!(
            removed,
            Some(at),
            "map and list disagree on an evicted branch"
        );
        self.counters.count(reason);
        Some((key, state))
    }

    fn state_mut(&mut self, at: u32) -> &mut V {
        match &mut self.nodes[at as usize].entry {
            Some((_, state)) => state,
            None => unreachable!("branch node {at} is live on the list"),
        }
    }

    /// Links live node `at` at the most recently used end, stamped `stamp_ns`.
    fn push_mru(&mut self, at: u32, stamp_ns: u64) {
        let old_mru = self.mru;
        let node = &mut self.nodes[at as usize];
        node.older = old_mru;
        node.newer = NO_NODE;
        node.last_input_ns = stamp_ns;
        if old_mru == NO_NODE {
            self.lru = at;
        } else {
            self.nodes[old_mru as usize].newer = at;
        }
        self.mru = at;
    }

    /// Takes live node `at` off the LRU list (its links become stale).
    fn unlink(&mut self, at: u32) {
        let Node { older, newer, .. } = self.nodes[at as usize];
        if older == NO_NODE {
            self.lru = newer;
        } else {
            self.nodes[older as usize].newer = newer;
        }
        if newer == NO_NODE {
            self.mru = older;
        } else {
            self.nodes[newer as usize].older = older;
        }
    }

    /// Moves unlinked node `at` to the free list, returning its branch.
    fn free(&mut self, at: u32) -> Option<(K, V)> {
        let node = &mut self.nodes[at as usize];
        let entry = node.entry.take();
        debug_assert!(entry.is_some(), "freeing an already free node {at}");
        node.older = self.free_head;
        node.newer = NO_NODE;
        self.free_head = at;
        entry
    }

    /// Debug-build check that the list, the map and the stamps agree. Walks the whole list only
    /// for populations up to [`FULL_CHECK_MAX_INSTANCES`] so large debug-build tests stay linear.
    fn check_invariants(&self) {
        #[cfg(debug_assertions)]
        if self.index.len() <= FULL_CHECK_MAX_INSTANCES {
            let mut count = 0usize;
            let mut at = self.lru;
            let mut prev = NO_NODE;
            let mut prev_stamp = 0u64;
            while at != NO_NODE {
                let node = &self.nodes[at as usize];
                debug_assert_eq!(node.older, prev, "broken back link at node {at}");
                debug_assert!(
                    node.last_input_ns >= prev_stamp,
                    "last-input instants decrease along the LRU list at node {at}"
                );
                let (key, _) = node
                    .entry
                    .as_ref()
                    .unwrap_or_else(|| panic!("free node {at} on the LRU list"));
                debug_assert_eq!(self.index.get(key), Some(&at), "map disagrees at {at}");
                prev_stamp = node.last_input_ns;
                prev = at;
                at = node.newer;
                count += 1;
            }
            debug_assert_eq!(prev, self.mru, "list end is not the most recent node");
            debug_assert_eq!(count, self.index.len(), "list and map populations differ");
            debug_assert!(
                count <= self.max_instances.unwrap_or(MAX_TABLE_INSTANCES) as usize,
                "population {count} above the bound"
            );
        }
    }
}
