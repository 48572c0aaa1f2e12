//! Per-shard acknowledgement slab (DESIGN §5 item 7).
//!
//! This module owns the bookkeeping that decides when a source payload (the unit a source
//! acknowledges upstream) is acked or nacked. Every payload gets one [`AckRoot`] slot in a slab
//! preallocated at construction with a bounded number of slots ([`AckSlab::capacity_roots`]);
//! rows and deliveries that descend from the payload are tracked by a counter in that slot, not by
//! per-row allocations, locks or tasks. It is pure core logic: no I/O, no locks, no allocation
//! after construction.
//!
//! Why it is correct:
//!
//! - **Resolves exactly once.** A root resolves when its intake is closed and its pending count
//!   reaches zero ([`Outcome::Acked`]), or on its first nack ([`Outcome::Nacked`]). Resolution
//!   moves the slot to a resolved state that ignores every later operation, and queues the
//!   `(token, outcome)` event once. Only [`AckSlab::drain_resolved`] frees the slot.
//! - **Never early.** While intake is open, more pending can still arrive, so a pending count of
//!   zero does not resolve the root; only [`AckSlab::close_intake`] allows it.
//! - **Stale handles cannot corrupt another payload.** A handle carries the generation of the slot
//!   it was issued for; freeing a slot bumps its generation, so a handle kept past its payload's
//!   life no longer matches and is refused with [`AckError::StaleHandle`]. A slot whose
//!   generation would wrap is retired instead of reused, so a generation is never issued twice
//!   for one slot.
//! - **Bounded.** At most `capacity_roots` slots exist; [`AckSlab::open`] refuses with
//!   [`SlabFull`] when none is free (callers backpressure). The resolved-event queue holds at most
//!   one event per slot, so it is preallocated to the same bound and never grows.
//! - **Counters never underflow.** Acking more than is pending is a caller bug and is refused with
//!   [`AckError::AckExceedsPending`], leaving the root unchanged.

use thiserror::Error;

/// Slab size used when a shard is not configured otherwise, in roots (source payloads in flight).
pub const DEFAULT_CAPACITY_ROOTS: u32 = 65_536;

/// Largest slab a shard may configure, in roots. `u32::MAX` is reserved as the free-list end.
pub const MAX_CAPACITY_ROOTS: u32 = u32::MAX - 1;

/// End of the intrusive free list.
const NO_SLOT: u32 = u32::MAX;

/// A generation-tagged reference to one acknowledgement root.
///
/// `index` selects the slot; `generation` must match the slot's current generation, otherwise the
/// handle is stale (its payload resolved and the slot may serve another payload now).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckHandle {
    /// Slot index in the shard's slab.
    pub index: u32,
    /// Generation of the slot when the handle was issued.
    pub generation: u32,
}

/// How a payload, or one delivery of it, ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Every row the payload produced was acked on every route it reached.
    Acked,
    /// At least one row or delivery was nacked.
    Nacked,
}

/// [`AckSlab::open`] refused: every slot holds a live or undrained root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error(
    "acknowledgement slab full ({capacity_roots} roots in flight); back off until roots resolve"
)]
pub struct SlabFull {
    /// The slab's bound, in roots.
    pub capacity_roots: u32,
}

/// A slab size outside `1..=MAX_CAPACITY_ROOTS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error(
    "acknowledgement slab capacity must be 1..={MAX_CAPACITY_ROOTS} roots, got {capacity_roots}"
)]
pub struct InvalidCapacity {
    /// The refused size, in roots.
    pub capacity_roots: u32,
}

/// An operation the slab refused. The root it named is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum AckError {
    /// The handle's slot was freed (and perhaps reused) or never existed. Late acks for a resolved
    /// payload arrive this way; callers count and ignore them.
    #[error("stale acknowledgement handle {handle:?}")]
    StaleHandle {
        /// The refused handle.
        handle: AckHandle,
    },
    /// More acks than outstanding deliveries: a caller bug.
    #[error("ack of {acked} exceeds {pending} pending on {handle:?}")]
    AckExceedsPending {
        /// The root.
        handle: AckHandle,
        /// Outstanding deliveries before the refused ack.
        pending: u64,
        /// The refused ack count.
        acked: u64,
    },
    /// `add_pending` or `close_intake` after `close_intake`: a caller bug.
    #[error("intake of {handle:?} is already closed")]
    IntakeClosed {
        /// The root.
        handle: AckHandle,
    },
    /// The pending count would exceed `u64::MAX`: a caller bug.
    #[error("pending count of {handle:?} overflows")]
    PendingOverflow {
        /// The root.
        handle: AckHandle,
    },
}

/// What an accepted operation did to its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The counters changed; the root is still open.
    Counted,
    /// This operation resolved the root; its event is queued for [`AckSlab::drain_resolved`].
    Resolved(Outcome),
    /// The root had already resolved (awaiting drain); the operation was ignored.
    Ignored,
}

/// What [`AckSlab::apply_batch`] did with a vector of `(handle, outcome)` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchSummary {
    /// Entries that changed a root (counted or resolved it).
    pub applied: usize,
    /// Entries whose root had already resolved and was awaiting drain.
    pub ignored: usize,
    /// Entries with a stale handle.
    pub stale: usize,
    /// Entries refused as caller bugs (acks beyond pending).
    pub refused: usize,
    /// The first refusal, for the caller's log.
    pub first_refusal: Option<AckError>,
}

/// The state of one root. Public for documentation; the slab owns every instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckRoot<T> {
    /// Unused; links to the next free slot.
    Free {
        /// Next free slot, or the list end.
        next_free: u32,
    },
    /// A payload in flight.
    Open {
        /// The caller's payload token, returned on resolution.
        token: T,
        /// Outstanding rows/deliveries.
        pending: u64,
        /// No more pending will be added.
        intake_closed: bool,
    },
    /// Resolved, event queued, slot not yet freed.
    Resolved,
}

#[derive(Debug, Clone, Copy)]
struct Slot<T> {
    generation: u32,
    root: AckRoot<T>,
}

/// The per-shard acknowledgement slab. `T` is the caller's payload token (for example a source
/// offset or a connector delivery tag), copied back out when the payload resolves.
#[derive(Debug)]
pub struct AckSlab<T> {
    slots: Vec<Slot<T>>,
    free_head: u32,
    resolved: Vec<(u32, T, Outcome)>,
    open_roots: u32,
    retired_slots: u32,
    acked_total: u64,
    nacked_total: u64,
}

impl<T: Copy> AckSlab<T> {
    /// A slab of `capacity_roots` slots, all allocated now.
    pub fn new(capacity_roots: u32) -> Result<Self, InvalidCapacity> {
        if capacity_roots == 0 || capacity_roots > MAX_CAPACITY_ROOTS {
            return Err(InvalidCapacity { capacity_roots });
        }
        let slots = (0..capacity_roots)
            .map(|index| Slot {
                generation: 0,
                root: AckRoot::Free {
                    next_free: if index + 1 < capacity_roots {
                        index + 1
                    } else {
                        NO_SLOT
                    },
                },
            })
            .collect();
        Ok(Self {
            slots,
            free_head: 0,
            resolved: Vec::with_capacity(capacity_roots as usize),
            open_roots: 0,
            retired_slots: 0,
            acked_total: 0,
            nacked_total: 0,
        })
    }

    /// The slab's bound, in roots.
    pub fn capacity_roots(&self) -> u32 {
        // Never truncates: `new` bounds the length by `MAX_CAPACITY_ROOTS`.
        self.slots.len() as u32
    }

    /// Roots opened and not yet resolved.
    pub fn open_roots(&self) -> u32 {
        self.open_roots
    }

    /// Resolved roots whose events await [`Self::drain_resolved`] (their slots are still held).
    pub fn undrained_roots(&self) -> usize {
        self.resolved.len()
    }

    /// Slots retired because their generation was exhausted (never reused again).
    pub fn retired_slots(&self) -> u32 {
        self.retired_slots
    }

    /// Roots resolved as acked since construction.
    pub fn acked_total(&self) -> u64 {
        self.acked_total
    }

    /// Roots resolved as nacked since construction.
    pub fn nacked_total(&self) -> u64 {
        self.nacked_total
    }

    /// Opens a root for a payload. Refuses when every slot is held; the caller backpressures its
    /// source until [`Self::drain_resolved`] frees slots.
    pub fn open(&mut self, payload_token: T) -> Result<AckHandle, SlabFull> {
        let index = self.free_head;
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return Err(SlabFull {
                capacity_roots: self.slots.len() as u32,
            });
        };
        let AckRoot::Free { next_free } = slot.root else {
            unreachable!("the free list links only free slots");
        };
        self.free_head = next_free;
        slot.root = AckRoot::Open {
            token: payload_token,
            pending: 0,
            intake_closed: false,
        };
        self.open_roots += 1;
        Ok(AckHandle {
            index,
            generation: slot.generation,
        })
    }

    /// Adds `n` outstanding rows/deliveries to an open root.
    pub fn add_pending(&mut self, handle: AckHandle, n: u64) -> Result<Effect, AckError> {
        match &mut self.slot_mut(handle)?.root {
            AckRoot::Open {
                pending,
                intake_closed,
                ..
            } => {
                if *intake_closed {
                    return Err(AckError::IntakeClosed { handle });
                }
                *pending = pending
                    .checked_add(n)
                    .ok_or(AckError::PendingOverflow { handle })?;
                Ok(Effect::Counted)
            }
            AckRoot::Resolved => Ok(Effect::Ignored),
            AckRoot::Free { .. } => unreachable!("slot_mut refuses free slots"),
        }
    }

    /// Acks `n` outstanding rows/deliveries. Resolves the root as acked when intake is closed and
    /// nothing remains pending.
    pub fn ack(&mut self, handle: AckHandle, n: u64) -> Result<Effect, AckError> {
        let slot = self.slot_mut(handle)?;
        let resolves = match &mut slot.root {
            AckRoot::Open {
                pending,
                intake_closed,
                ..
            } => {
                if n > *pending {
                    return Err(AckError::AckExceedsPending {
                        handle,
                        pending: *pending,
                        acked: n,
                    });
                }
                *pending -= n;
                *intake_closed && *pending == 0
            }
            AckRoot::Resolved => return Ok(Effect::Ignored),
            AckRoot::Free { .. } => unreachable!("slot_mut refuses free slots"),
        };
        Ok(self.settle(handle.index, resolves, Outcome::Acked))
    }

    /// Replaces `from` outstanding units with `into` new ones in one step, as a node that holds
    /// `from` rows of a payload hands on `into` derived rows (a junction fanning out, a filter
    /// dropping). Allowed after intake closed: the holder's own units keep the root open, so
    /// splitting them can never resolve it early. Resolves as acked when nothing remains.
    pub fn transfer(
        &mut self,
        handle: AckHandle,
        from: u64,
        into: u64,
    ) -> Result<Effect, AckError> {
        let slot = self.slot_mut(handle)?;
        let resolves = match &mut slot.root {
            AckRoot::Open {
                pending,
                intake_closed,
                ..
            } => {
                if from > *pending {
                    return Err(AckError::AckExceedsPending {
                        handle,
                        pending: *pending,
                        acked: from,
                    });
                }
                *pending = (*pending - from)
                    .checked_add(into)
                    .ok_or(AckError::PendingOverflow { handle })?;
                *intake_closed && *pending == 0
            }
            AckRoot::Resolved => return Ok(Effect::Ignored),
            AckRoot::Free { .. } => unreachable!("slot_mut refuses free slots"),
        };
        Ok(self.settle(handle.index, resolves, Outcome::Acked))
    }

    /// Nacks the payload: the first nack resolves the root as nacked; later operations on it are
    /// ignored.
    pub fn nack(&mut self, handle: AckHandle) -> Result<Effect, AckError> {
        match self.slot_mut(handle)?.root {
            AckRoot::Open { .. } => Ok(self.settle(handle.index, true, Outcome::Nacked)),
            AckRoot::Resolved => Ok(Effect::Ignored),
            AckRoot::Free { .. } => unreachable!("slot_mut refuses free slots"),
        }
    }

    /// Declares that no more pending will be added. Resolves the root as acked if nothing is
    /// pending.
    pub fn close_intake(&mut self, handle: AckHandle) -> Result<Effect, AckError> {
        let resolves = match &mut self.slot_mut(handle)?.root {
            AckRoot::Open {
                pending,
                intake_closed,
                ..
            } => {
                if *intake_closed {
                    return Err(AckError::IntakeClosed { handle });
                }
                *intake_closed = true;
                *pending == 0
            }
            AckRoot::Resolved => return Ok(Effect::Ignored),
            AckRoot::Free { .. } => unreachable!("slot_mut refuses free slots"),
        };
        Ok(self.settle(handle.index, resolves, Outcome::Acked))
    }

    /// Applies a batched `(handle, outcome)` vector, as cross-shard and cross-node acks arrive:
    /// each `Acked` entry acks one delivery, each `Nacked` entry nacks the payload. Every entry is
    /// applied independently; stale, ignored and refused entries are counted, never fatal.
    pub fn apply_batch(&mut self, batch: &[(AckHandle, Outcome)]) -> BatchSummary {
        let mut summary = BatchSummary::default();
        for &(handle, outcome) in batch {
            let result = match outcome {
                Outcome::Acked => self.ack(handle, 1),
                Outcome::Nacked => self.nack(handle),
            };
            match result {
                Ok(Effect::Counted | Effect::Resolved(_)) => summary.applied += 1,
                Ok(Effect::Ignored) => summary.ignored += 1,
                Err(AckError::StaleHandle { .. }) => summary.stale += 1,
                Err(error) => {
                    summary.refused += 1;
                    summary.first_refusal.get_or_insert(error);
                }
            }
        }
        summary
    }

    /// Moves every queued resolution into `out` as `(token, outcome)` and frees their slots,
    /// bumping each slot's generation so handles to them become stale.
    pub fn drain_resolved(&mut self, out: &mut Vec<(T, Outcome)>) {
        out.reserve(self.resolved.len());
        self.drain_with(|_, token, outcome| out.push((token, outcome)));
    }

    /// [`AckSlab::drain_resolved`] with each root's handle (as it was before it went stale).
    pub fn drain_resolved_handles(&mut self, out: &mut Vec<(AckHandle, T, Outcome)>) {
        out.reserve(self.resolved.len());
        self.drain_with(|handle, token, outcome| out.push((handle, token, outcome)));
    }

    fn drain_with(&mut self, mut each: impl FnMut(AckHandle, T, Outcome)) {
        for (index, token, outcome) in self.resolved.drain(..) {
            let slot = &mut self.slots[index as usize];
            let handle = AckHandle {
                index,
                generation: slot.generation,
            };
            each(handle, token, outcome);
            debug_assert!(matches!(slot.root, AckRoot::Resolved));
            match slot.generation.checked_add(1) {
                Some(next) => {
                    slot.generation = next;
                    slot.root = AckRoot::Free {
                        next_free: self.free_head,
                    };
                    self.free_head = index;
                }
                None => {
                    // Reusing the slot would reissue generation 0 and let an ancient handle alias
                    // a new payload; retire it instead (after 2^32 reuses of this one slot).
                    slot.root = AckRoot::Free { next_free: NO_SLOT };
                    self.retired_slots += 1;
                }
            }
        }
    }

    /// The live (open or resolved-undrained) slot a handle names, or `StaleHandle`.
    /// The payload token of an open root, or `None` for a stale handle or a resolved root.
    pub fn token(&self, handle: AckHandle) -> Option<T>
    where
        T: Copy,
    {
        match self.slots.get(handle.index as usize) {
            Some(Slot {
                generation,
                root: AckRoot::Open { token, .. },
            }) if *generation == handle.generation => Some(*token),
            _ => None,
        }
    }

    fn slot_mut(&mut self, handle: AckHandle) -> Result<&mut Slot<T>, AckError> {
        match self.slots.get_mut(handle.index as usize) {
            Some(slot)
                if slot.generation == handle.generation
                    && !matches!(slot.root, AckRoot::Free { .. }) =>
            {
                Ok(slot)
            }
            _ => Err(AckError::StaleHandle { handle }),
        }
    }

    /// Resolves the open root at `index` with `outcome` when `resolves`, queueing its event.
    fn settle(&mut self, index: u32, resolves: bool, outcome: Outcome) -> Effect {
        if !resolves {
            return Effect::Counted;
        }
        let slot = &mut self.slots[index as usize];
        let AckRoot::Open { token, .. } = slot.root else {
            unreachable!("only open roots settle");
        };
        slot.root = AckRoot::Resolved;
        // Never reallocates: at most one queued event per slot, preallocated in `new`.
        self.resolved.push((index, token, outcome));
        self.open_roots -= 1;
        match outcome {
            Outcome::Acked => self.acked_total += 1,
            Outcome::Nacked => self.nacked_total += 1,
        }
        Effect::Resolved(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_acked_only_after_intake_closes() {
        let mut slab = AckSlab::new(4).unwrap();
        let h = slab.open(7u64).unwrap();
        assert_eq!(slab.add_pending(h, 2), Ok(Effect::Counted));
        assert_eq!(slab.ack(h, 2), Ok(Effect::Counted));
        assert_eq!(slab.add_pending(h, 1), Ok(Effect::Counted));
        assert_eq!(slab.close_intake(h), Ok(Effect::Counted));
        assert_eq!(slab.ack(h, 1), Ok(Effect::Resolved(Outcome::Acked)));
        let mut out = Vec::new();
        slab.drain_resolved(&mut out);
        assert_eq!(out, vec![(7, Outcome::Acked)]);
        assert_eq!(slab.acked_total(), 1);
        assert_eq!(slab.open_roots(), 0);
    }

    /// A drained resolution names the handle its root was opened under, which is stale after.
    #[test]
    fn a_drained_resolution_carries_its_roots_handle() {
        let mut slab = AckSlab::new(1).unwrap();
        let h = slab.open(5u8).unwrap();
        slab.nack(h).unwrap();
        let mut out = Vec::new();
        slab.drain_resolved_handles(&mut out);
        assert_eq!(out, vec![(h, 5, Outcome::Nacked)]);
        let reused = slab.open(6u8).unwrap();
        assert_eq!(reused.index, h.index);
        assert_ne!(reused, h);
    }

    #[test]
    fn first_nack_wins_and_later_acks_are_ignored() {
        let mut slab = AckSlab::new(1).unwrap();
        let h = slab.open(1u32).unwrap();
        slab.add_pending(h, 3).unwrap();
        assert_eq!(slab.nack(h), Ok(Effect::Resolved(Outcome::Nacked)));
        assert_eq!(slab.ack(h, 1), Ok(Effect::Ignored));
        assert_eq!(slab.nack(h), Ok(Effect::Ignored));
        let mut out = Vec::new();
        slab.drain_resolved(&mut out);
        assert_eq!(out, vec![(1, Outcome::Nacked)]);
        assert_eq!(slab.ack(h, 1), Err(AckError::StaleHandle { handle: h }));
    }

    #[test]
    fn over_ack_is_refused_without_underflow() {
        let mut slab = AckSlab::new(1).unwrap();
        let h = slab.open(()).unwrap();
        slab.add_pending(h, 1).unwrap();
        assert_eq!(
            slab.ack(h, 2),
            Err(AckError::AckExceedsPending {
                handle: h,
                pending: 1,
                acked: 2
            })
        );
        slab.close_intake(h).unwrap();
        assert_eq!(slab.ack(h, 1), Ok(Effect::Resolved(Outcome::Acked)));
    }

    #[test]
    fn full_slab_refuses_and_reuse_bumps_generation() {
        let mut slab = AckSlab::new(1).unwrap();
        let h = slab.open(0u8).unwrap();
        assert_eq!(slab.open(1), Err(SlabFull { capacity_roots: 1 }));
        slab.close_intake(h).unwrap();
        // Resolved but undrained still holds the slot.
        assert_eq!(slab.open(1), Err(SlabFull { capacity_roots: 1 }));
        slab.drain_resolved(&mut Vec::new());
        let h2 = slab.open(1).unwrap();
        assert_eq!(h2.index, h.index);
        assert_eq!(h2.generation, h.generation + 1);
        assert_eq!(slab.nack(h), Err(AckError::StaleHandle { handle: h }));
        assert_eq!(slab.open_roots(), 1);
    }

    #[test]
    fn intake_closes_once_and_bad_capacities_are_refused() {
        let mut slab = AckSlab::new(2).unwrap();
        let h = slab.open(0u8).unwrap();
        slab.add_pending(h, 1).unwrap();
        slab.close_intake(h).unwrap();
        assert_eq!(
            slab.close_intake(h),
            Err(AckError::IntakeClosed { handle: h })
        );
        assert_eq!(
            slab.add_pending(h, 1),
            Err(AckError::IntakeClosed { handle: h })
        );
        assert!(AckSlab::<u8>::new(0).is_err());
        assert!(AckSlab::<u8>::new(u32::MAX).is_err());
        let bogus = AckHandle {
            index: 99,
            generation: 0,
        };
        assert_eq!(
            slab.ack(bogus, 1),
            Err(AckError::StaleHandle { handle: bogus })
        );
    }

    #[test]
    fn exhausted_generation_retires_the_slot() {
        let mut slab = AckSlab::new(1).unwrap();
        slab.slots[0].generation = u32::MAX;
        let h = slab.open(0u8).unwrap();
        slab.close_intake(h).unwrap();
        slab.drain_resolved(&mut Vec::new());
        assert_eq!(slab.retired_slots(), 1);
        assert_eq!(slab.open(1), Err(SlabFull { capacity_roots: 1 }));
    }
}
