//! A relay's owner buffer: the one queue of frames a relay holds on its owning shard, bounded by
//! the relay's `CAPACITY` in frames across all its branches (DESIGN §5 item 4).
//!
//! A full buffer backpressures: [`RelayBuffer::try_push`] hands the frame back inside [`Full`]
//! and the producer waits. Nothing is ever dropped. Frames leave in FIFO order through
//! [`RelayBuffer::pop`]. Dispatch to the consumers subscribed per relay and branch is the
//! caller's; this buffer only bounds and orders.
//!
//! The buffer is single-threaded (it lives on one shard; no locks), does no I/O and never blocks:
//! waiting is a protocol between it and its caller.
//!
//! # Waiter protocol
//!
//! Producers are named by [`ProducerId`]. A producer refused with [`Full`] is queued as a
//! *waiter*, once, in the order of its first refusal. Whenever a slot frees — a [`pop`], or a
//! woken producer withdrawing through [`cancel`] — and a waiter is queued, the slot is *reserved*
//! for the front waiter and its id is returned ([`Popped::wake`], or `cancel`'s result) so the
//! caller can wake exactly that producer. Its next `try_push` consumes the reservation and
//! always succeeds. So:
//!
//! * producers never poll: a refused producer sleeps until the caller wakes it by id;
//! * waiters are served strictly in FIFO order, and a newcomer cannot overtake them — while
//!   anyone waits, every free slot is reserved, so newcomers are refused and queue behind;
//! * a waiter that retries before it is woken is refused again and keeps its place;
//! * a producer that stops waiting (ended, cancelled) calls [`cancel`]; a reservation it held
//!   passes to the next waiter, so no slot is stranded.
//!
//! # Why it is correct
//!
//! With `reserved` the number of woken producers holding a slot, the buffer keeps two invariants
//! (asserted after every mutation in debug builds):
//!
//! 1. `len + reserved <= capacity_frames` — so the frame count never exceeds `CAPACITY`;
//! 2. a waiter is queued only when no slot is free: `waiters > 0 ⇒ len + reserved ==
//!    capacity_frames` — so nobody waits for space that exists (no lost wake-up).
//!
//! A push takes a free or reserved slot (1 holds); a refused push queues only when no unreserved
//! slot is free (2 holds); every operation that frees a slot immediately reserves it for the front
//! waiter if there is one (2 holds). Frames are only moved — into the queue, back to the producer
//! in `Full`, or out through `pop` — so none is lost or duplicated. Memory is bounded by
//! `CAPACITY` frames plus one entry per distinct waiting producer.
//!
//! [`pop`]: RelayBuffer::pop
//! [`cancel`]: RelayBuffer::cancel

use std::collections::{HashMap, VecDeque};

/// The identity of a producer, unique among the producers of one relay buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerId(pub u64);

/// A push refused because the buffer is full. It carries the frame back: the producer keeps it
/// and retries once woken (see the module's waiter protocol).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("relay owner buffer is full; wait to be woken and retry")]
pub struct Full<F>(pub F);

impl<F> Full<F> {
    /// The refused frame.
    #[must_use]
    pub fn into_frame(self) -> F {
        self.0
    }
}

/// Errors building a relay buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RelayBufferError {
    /// `CAPACITY` 0 would refuse every frame forever.
    #[error("relay CAPACITY must be at least one frame")]
    ZeroCapacity,
}

/// A popped frame, and the producer to wake if popping it freed a slot someone waited for.
#[derive(Debug, PartialEq, Eq)]
pub struct Popped<F> {
    /// The oldest frame.
    pub frame: F,
    /// The producer now holding a reserved slot: wake it; its next `try_push` succeeds.
    pub wake: Option<ProducerId>,
}

/// Counters of one relay buffer, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayBufferStats {
    /// Frames accepted.
    pub pushed: u64,
    /// Frames popped.
    pub popped: u64,
    /// Pushes refused with [`Full`].
    pub full_refusals: u64,
    /// Most frames held at once.
    pub high_water_frames: usize,
}

/// Where a producer stands with the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Standing {
    /// Refused and queued; not yet woken.
    Waiting,
    /// Woken; one slot is reserved for its next push.
    Reserved,
}

/// A relay's owner buffer of frames `F`, bounded by `CAPACITY` in frames.
#[derive(Debug)]
pub struct RelayBuffer<F> {
    frames: VecDeque<F>,
    capacity_frames: usize,
    /// Waiting producers, in the order of their first refusal.
    waiters: VecDeque<ProducerId>,
    /// Every producer that is waiting or holds a reservation.
    standing: HashMap<ProducerId, Standing>,
    /// Slots reserved for woken producers.
    reserved_frames: usize,
    stats: RelayBufferStats,
}

impl<F> RelayBuffer<F> {
    /// An empty buffer holding at most `capacity_frames` frames. Storage grows with use, up to
    /// the bound; nothing is preallocated.
    pub fn new(capacity_frames: usize) -> Result<Self, RelayBufferError> {
        if capacity_frames == 0 {
            return Err(RelayBufferError::ZeroCapacity);
        }
        Ok(Self {
            frames: VecDeque::new(),
            capacity_frames,
            waiters: VecDeque::new(),
            standing: HashMap::new(),
            reserved_frames: 0,
            stats: RelayBufferStats::default(),
        })
    }

    /// Appends `frame` from `producer`, or refuses it with [`Full`] (handing it back) and queues
    /// `producer` as a waiter. Succeeds for a producer holding a reservation; refuses everyone
    /// else while any producer waits, so waiters are never overtaken.
    pub fn try_push(&mut self, producer: ProducerId, frame: F) -> Result<(), Full<F>> {
        let accepted = match self.standing.get(&producer) {
            Some(Standing::Reserved) => {
                self.standing.remove(&producer);
                self.reserved_frames -= 1;
                true
            }
            // Retried before being woken: refused again, keeps its place.
            Some(Standing::Waiting) => false,
            None => {
                if self.waiters.is_empty() && self.free_frames() > 0 {
                    true
                } else {
                    self.standing.insert(producer, Standing::Waiting);
                    self.waiters.push_back(producer);
                    false
                }
            }
        };
        let result = if accepted {
            self.frames.push_back(frame);
            self.stats.pushed += 1;
            self.stats.high_water_frames = self.stats.high_water_frames.max(self.frames.len());
            Ok(())
        } else {
            self.stats.full_refusals += 1;
            Err(Full(frame))
        };
        self.check_invariants();
        result
    }

    /// Removes the oldest frame. If that freed a slot a producer waits for, the slot is reserved
    /// for the front waiter and [`Popped::wake`] names it.
    pub fn pop(&mut self) -> Option<Popped<F>> {
        let frame = self.frames.pop_front()?;
        self.stats.popped += 1;
        let wake = self.reserve_for_next_waiter();
        self.check_invariants();
        Some(Popped { frame, wake })
    }

    /// The oldest frame, left in place.
    pub fn front(&self) -> Option<&F> {
        self.frames.front()
    }

    /// The frames held, oldest first, left in place.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &F> + '_ {
        self.frames.iter()
    }

    /// Withdraws `producer` from the waiter protocol (it ended or stopped waiting). A waiting
    /// producer leaves the queue; a reservation it held passes to the next waiter, whose id is
    /// returned for the caller to wake. Unknown producers are a no-op.
    pub fn cancel(&mut self, producer: ProducerId) -> Option<ProducerId> {
        let wake = match self.standing.remove(&producer) {
            None => None,
            Some(Standing::Waiting) => {
                self.waiters.retain(|&w| w != producer);
                None
            }
            Some(Standing::Reserved) => {
                self.reserved_frames -= 1;
                self.reserve_for_next_waiter()
            }
        };
        self.check_invariants();
        wake
    }

    /// Frames held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether no frame is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The `CAPACITY` bound, in frames.
    #[must_use]
    pub fn capacity_frames(&self) -> usize {
        self.capacity_frames
    }

    /// Slots neither holding a frame nor reserved for a woken producer.
    #[must_use]
    pub fn free_frames(&self) -> usize {
        self.capacity_frames - self.frames.len() - self.reserved_frames
    }

    /// Producers waiting to be woken, front first.
    pub fn waiters(&self) -> impl ExactSizeIterator<Item = ProducerId> + '_ {
        self.waiters.iter().copied()
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> RelayBufferStats {
        self.stats
    }

    /// Reserves a free slot for the front waiter, if any, returning it to be woken.
    fn reserve_for_next_waiter(&mut self) -> Option<ProducerId> {
        if self.free_frames() == 0 {
            return None;
        }
        let next = self.waiters.pop_front()?;
        let previous = self.standing.insert(next, Standing::Reserved);
        debug_assert_eq!(
            previous,
            Some(Standing::Waiting),
            "relay buffer: a queued waiter must be standing as waiting"
        );
        self.reserved_frames += 1;
        Some(next)
    }

    fn check_invariants(&self) {
        debug_assert!(
            self.frames.len() + self.reserved_frames <= self.capacity_frames,
            "relay buffer: frames and reservations exceed CAPACITY"
        );
        debug_assert!(
            self.waiters.is_empty() || self.free_frames() == 0,
            "relay buffer: a producer waits while a slot is free"
        );
        debug_assert_eq!(
            self.standing.len(),
            self.waiters.len() + self.reserved_frames,
            "relay buffer: every standing producer is queued or holds a reservation"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ProducerId = ProducerId(1);
    const B: ProducerId = ProducerId(2);
    const C: ProducerId = ProducerId(3);
    const D: ProducerId = ProducerId(4);

    #[test]
    fn front_shows_the_next_frame_without_taking_it() {
        let mut buf = RelayBuffer::new(2).unwrap();
        assert_eq!(buf.front(), None);
        assert_eq!(buf.try_push(A, 7), Ok(()));
        assert_eq!(buf.try_push(A, 8), Ok(()));
        assert_eq!(buf.front(), Some(&7));
        assert_eq!(buf.len(), 2);
        assert_eq!(buf.pop().map(|p| p.frame), Some(7));
        assert_eq!(buf.front(), Some(&8));
    }

    #[test]
    fn zero_capacity_is_refused() {
        assert_eq!(
            RelayBuffer::<u32>::new(0).err(),
            Some(RelayBufferError::ZeroCapacity)
        );
    }

    #[test]
    fn capacity_is_respected_and_the_frame_comes_back() {
        let mut buf = RelayBuffer::new(3).unwrap();
        for i in 0..3 {
            assert_eq!(buf.try_push(A, i), Ok(()));
        }
        assert_eq!(buf.len(), 3);
        assert_eq!(buf.try_push(A, 99), Err(Full(99)));
        assert_eq!(buf.len(), 3);
        assert_eq!(buf.capacity_frames(), 3);
        assert_eq!(buf.free_frames(), 0);
        let stats = buf.stats();
        assert_eq!(
            (stats.pushed, stats.full_refusals, stats.high_water_frames),
            (3, 1, 3)
        );
    }

    #[test]
    fn fifo_order_is_preserved() {
        let mut buf = RelayBuffer::new(8).unwrap();
        for i in 0..8 {
            buf.try_push(ProducerId(i % 3), i).unwrap();
        }
        let out: Vec<u64> = std::iter::from_fn(|| buf.pop().map(|p| p.frame)).collect();
        assert_eq!(out, (0..8).collect::<Vec<_>>());
        assert!(buf.is_empty());
        assert_eq!(buf.stats().popped, 8);
        assert_eq!(buf.pop(), None);
    }

    #[test]
    fn waiters_are_woken_in_fifo_order_and_not_overtaken() {
        let mut buf = RelayBuffer::new(1).unwrap();
        buf.try_push(A, "a0").unwrap();
        assert!(buf.try_push(B, "b0").is_err());
        assert!(buf.try_push(C, "c0").is_err());
        assert!(buf.try_push(D, "d0").is_err());
        assert_eq!(buf.waiters().collect::<Vec<_>>(), [B, C, D]);

        // B retries before being woken: refused, keeps its place.
        assert!(buf.try_push(B, "b0").is_err());
        assert_eq!(buf.waiters().collect::<Vec<_>>(), [B, C, D]);

        let popped = buf.pop().unwrap();
        assert_eq!((popped.frame, popped.wake), ("a0", Some(B)));
        // The freed slot is B's: a newcomer (A again) cannot take it and queues behind D.
        assert!(buf.try_push(A, "a1").is_err());
        assert_eq!(buf.waiters().collect::<Vec<_>>(), [C, D, A]);
        assert_eq!(buf.try_push(B, "b0"), Ok(()));

        assert_eq!(buf.pop().unwrap().wake, Some(C));
        assert_eq!(buf.try_push(C, "c0"), Ok(()));
        assert_eq!(buf.pop().unwrap().wake, Some(D));
        assert_eq!(buf.try_push(D, "d0"), Ok(()));
        assert_eq!(buf.pop().unwrap().wake, Some(A));
        assert_eq!(buf.try_push(A, "a1"), Ok(()));
        let last = buf.pop().unwrap();
        assert_eq!((last.frame, last.wake), ("a1", None));
        assert_eq!(buf.stats().full_refusals, 5);
    }

    #[test]
    fn cancel_leaves_the_queue_and_passes_a_reservation_on() {
        let mut buf = RelayBuffer::new(1).unwrap();
        buf.try_push(A, 0).unwrap();
        assert!(buf.try_push(B, 1).is_err());
        assert!(buf.try_push(C, 2).is_err());
        assert!(buf.try_push(D, 3).is_err());
        // C gives up while waiting.
        assert_eq!(buf.cancel(C), None);
        assert_eq!(buf.waiters().collect::<Vec<_>>(), [B, D]);
        // B is woken, then ends without pushing: its slot goes to D.
        assert_eq!(buf.pop().unwrap().wake, Some(B));
        assert_eq!(buf.cancel(B), Some(D));
        assert_eq!(buf.try_push(D, 3), Ok(()));
        // Unknown and repeated cancels are no-ops.
        assert_eq!(buf.cancel(B), None);
        assert_eq!(buf.cancel(ProducerId(77)), None);
        // Nobody waits: a woken-then-cancelled slot becomes free again.
        assert_eq!(buf.pop().unwrap().wake, None);
        assert_eq!(buf.free_frames(), 1);
    }

    #[test]
    fn full_error_displays_and_returns_the_frame() {
        let err = Full(vec![1, 2, 3]);
        assert_eq!(
            err.to_string(),
            "relay owner buffer is full; wait to be woken and retry"
        );
        assert_eq!(err.into_frame(), vec![1, 2, 3]);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    const PRODUCERS: usize = 4;

    #[derive(Clone, Copy, Debug)]
    enum Op {
        /// The producer pushes its held frame (a retry, possibly spurious) or its next one.
        Push(usize),
        Pop,
        /// The producer stops waiting; it keeps its frame and may come back as a newcomer.
        Cancel(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (0..PRODUCERS).prop_map(Op::Push),
            4 => Just(Op::Pop),
            1 => (0..PRODUCERS).prop_map(Op::Cancel),
        ]
    }

    /// A frame: (producer, sequence number within that producer).
    type Frame = (usize, u64);

    #[derive(Default, Clone)]
    struct Producer {
        next_seq: u64,
        held: Option<Frame>,
        woken: bool,
    }

    struct Model {
        buf: RelayBuffer<Frame>,
        producers: Vec<Producer>,
        /// Expected waiter queue.
        waiters: VecDeque<usize>,
        /// Expected buffer content.
        queue: VecDeque<Frame>,
        delivered: Vec<Vec<u64>>,
        refusals: u64,
    }

    impl Model {
        /// Checks a wake-up against the model: the front waiter, and nobody left waiting
        /// while a slot is free.
        fn wake(&mut self, who: Option<ProducerId>) -> Result<(), TestCaseError> {
            match who {
                Some(p) => {
                    let front = self.waiters.pop_front();
                    prop_assert_eq!(Some(p.0 as usize), front, "woken out of FIFO order");
                    self.producers[p.0 as usize].woken = true;
                }
                None => prop_assert!(
                    self.waiters.is_empty() || self.buf.free_frames() == 0,
                    "a slot is free but no waiter was woken"
                ),
            }
            Ok(())
        }

        fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
            match op {
                Op::Push(i) => {
                    let p = &mut self.producers[i];
                    let frame = p.held.take().unwrap_or_else(|| {
                        p.next_seq += 1;
                        (i, p.next_seq - 1)
                    });
                    let was_woken = std::mem::take(&mut p.woken);
                    match self.buf.try_push(ProducerId(i as u64), frame) {
                        Ok(()) => {
                            prop_assert!(
                                was_woken || self.waiters.is_empty(),
                                "a newcomer overtook a waiter"
                            );
                            self.queue.push_back(frame);
                        }
                        Err(Full(back)) => {
                            prop_assert!(!was_woken, "a woken producer was refused");
                            prop_assert_eq!(back, frame, "the refused frame must come back");
                            self.producers[i].held = Some(back);
                            self.refusals += 1;
                            if !self.waiters.contains(&i) {
                                self.waiters.push_back(i);
                            }
                        }
                    }
                }
                Op::Pop => match self.buf.pop() {
                    Some(Popped { frame, wake }) => {
                        prop_assert_eq!(Some(frame), self.queue.pop_front(), "FIFO order");
                        self.delivered[frame.0].push(frame.1);
                        self.wake(wake)?;
                    }
                    None => prop_assert!(self.queue.is_empty()),
                },
                Op::Cancel(i) => {
                    self.waiters.retain(|&w| w != i);
                    self.producers[i].woken = false;
                    let wake = self.buf.cancel(ProducerId(i as u64));
                    self.wake(wake)?;
                }
            }
            prop_assert!(self.buf.len() <= self.buf.capacity_frames());
            prop_assert_eq!(self.buf.len(), self.queue.len());
            prop_assert_eq!(
                self.buf.waiters().map(|p| p.0 as usize).collect::<Vec<_>>(),
                self.waiters.iter().copied().collect::<Vec<_>>()
            );
            Ok(())
        }
    }

    proptest! {
        /// Under any interleaving: CAPACITY holds, order is FIFO, waiters are woken in FIFO order
        /// and never overtaken, a woken producer's retry succeeds, and after draining every frame
        /// any producer created was delivered exactly once, in its order.
        #[test]
        fn no_frame_lost_and_fifo_wakeups(
            capacity in 1usize..5,
            ops in proptest::collection::vec(op(), 0..300),
        ) {
            let mut m = Model {
                buf: RelayBuffer::new(capacity).unwrap(),
                producers: vec![Producer::default(); PRODUCERS],
                waiters: VecDeque::new(),
                queue: VecDeque::new(),
                delivered: vec![Vec::new(); PRODUCERS],
                refusals: 0,
            };
            for op in ops {
                m.apply(op)?;
            }
            // Drain: consumers pop, woken producers retry; producers still holding a frame
            // that are not queued (they cancelled) retry as newcomers.
            let mut rounds = 0;
            while !m.queue.is_empty() || m.producers.iter().any(|p| p.held.is_some()) {
                rounds += 1;
                prop_assert!(rounds < 10_000, "drain made no progress");
                for i in 0..PRODUCERS {
                    let p = &m.producers[i];
                    if p.held.is_some() && (p.woken || !m.waiters.contains(&i)) {
                        m.apply(Op::Push(i))?;
                    }
                }
                m.apply(Op::Pop)?;
            }
            for (i, got) in m.delivered.iter().enumerate() {
                let want: Vec<u64> = (0..m.producers[i].next_seq).collect();
                prop_assert_eq!(got, &want, "producer {} lost, duplicated or reordered frames", i);
            }
            let stats = m.buf.stats();
            prop_assert_eq!(stats.pushed, stats.popped);
            prop_assert_eq!(stats.full_refusals, m.refusals);
            prop_assert!(stats.high_water_frames <= capacity);
        }
    }
}
