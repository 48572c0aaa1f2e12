//! The flush decision of one route × concrete branch buffer (DESIGN §5 item 3).
//!
//! A route buffers the rows it constructed for each concrete branch and writes them as one batch
//! when its `FLUSH` policy says so. This module owns only that decision: *when* the buffered rows
//! leave and *which* appends each emitted batch holds. It holds no rows itself — the caller keeps
//! the buffered Arrow data and tells the [`RouteFlusher`] how large each append is ([`Chunk`]:
//! logical Arrow value, offset and validity bytes plus rows, as `MAX BATCH SIZE` counts them).
//!
//! It does no I/O and reads no clock: every event carries the instants it happened at ([`Now`]),
//! and every answer is an action for the caller to carry out (engine/runtime split). The caller
//! asks [`RouteFlusher::next_deadline`] when to wake and calls [`RouteFlusher::tick`] then.
//!
//! # Rules
//!
//! * `FLUSH EACH d MAX BATCH SIZE b` ([`FlushPolicy::Each`]): the empty → buffered transition arms
//!   a deadline `d` later in **domain-logical** time. The buffer flushes when that deadline is
//!   reached (`now >= deadline`, so exactly-at-deadline fires), or as soon as it holds `b` bytes.
//!   `MAX BATCH SIZE` only clamps: an append is never split, and an append that would carry a
//!   non-empty buffer past `b` first flushes what is buffered, so an emitted batch exceeds `b` only
//!   when one append alone does — and such an append flushes alone.
//! * `FLUSH IMMEDIATE` ([`FlushPolicy::Immediate`]): the empty → buffered transition arms a
//!   deadline [`IMMEDIATE_WINDOW_NS`] later in **physical** monotonic time; there is no size bound.
//! * Force flush ([`RouteFlusher::force_flush`]) — model alteration, domain pause, ownership
//!   handoff, shutdown — emits whatever is buffered regardless of policy; on an empty buffer it is a
//!   no-op.
//! * Every flush empties the buffer and disarms the deadline; the next append arms a fresh one.
//!
//! # Why it is correct
//!
//! The state is the buffered totals and an optional deadline, with the invariant
//! *buffer empty ⇔ no deadline* (checked by `debug_assert` after every transition). Every path
//! that empties the buffer goes through one function (`take`), which also disarms; the only path
//! that makes it non-empty arms. Each policy reads exactly one clock: [`Deadline`] records which,
//! and expiry compares against that clock alone, so a stopped domain clock never delays an
//! Immediate window and a fast physical clock never fires a `FLUSH EACH` interval. An append that
//! arrives after an expired deadline the caller has not ticked yet first flushes the expired
//! batch, so rows never join a batch whose deadline had passed before they arrived.
//!
//! Arithmetic saturates: a deadline past the end of the clock's range never fires by time (force
//! flush still empties it), and byte and row totals cannot wrap.

/// The system-owned `FLUSH IMMEDIATE` batching window: 100 µs of physical monotonic time from the
/// empty → buffered transition (NSPL Overview, DESIGN §9).
pub const IMMEDIATE_WINDOW_NS: u64 = 100_000;

/// A route's `FLUSH` clause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// `FLUSH EACH <interval> MAX BATCH SIZE <bytes>`.
    Each {
        /// Domain-logical interval from the empty → buffered transition, in nanoseconds. Zero
        /// flushes every append as it arrives.
        interval_ns: u64,
        /// Byte bound in logical Arrow value, offset and validity bytes. Zero flushes every
        /// append alone.
        max_batch_bytes: u64,
    },
    /// `FLUSH IMMEDIATE`: a physical [`IMMEDIATE_WINDOW_NS`] window, no size bound.
    Immediate,
}

impl FlushPolicy {
    /// Whether the policy reads the size of what is buffered: only `FLUSH EACH` has a byte
    /// bound. Under `FLUSH IMMEDIATE` a caller may append chunks of zero bytes (their rows
    /// only), and recounts with [`RouteFlusher::recount_bytes`] when a change of policy
    /// begins to read them.
    pub const fn counts_bytes(&self) -> bool {
        matches!(self, FlushPolicy::Each { .. })
    }

    /// Every append leaves as it arrives (a zero interval and a zero byte bound): the policy of
    /// routes that take no `FLUSH` clause, whose node decides when a record exists.
    pub const AT_ONCE: FlushPolicy = FlushPolicy::Each {
        interval_ns: 0,
        max_batch_bytes: 0,
    };
}

/// The size of an append, or of a buffered or flushed batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Logical Arrow value, offset and validity bytes (unused capacity and object overhead
    /// excluded), as `MAX BATCH SIZE` counts them.
    pub bytes: u64,
    /// Rows.
    pub rows: u64,
}

impl Chunk {
    /// A chunk of `bytes` logical bytes holding `rows` rows.
    #[must_use]
    pub const fn new(bytes: u64, rows: u64) -> Self {
        Self { bytes, rows }
    }

    /// Whether the chunk holds no rows (and so has nothing to deliver).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.rows == 0
    }

    fn saturating_add(self, other: Self) -> Self {
        Self {
            bytes: self.bytes.saturating_add(other.bytes),
            rows: self.rows.saturating_add(other.rows),
        }
    }
}

/// The instants an event happened at, read by the caller (the flusher reads no clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Now {
    /// The domain's logical time, in nanoseconds since the Unix epoch (DATETIME scale).
    pub logical_ns: i64,
    /// Physical monotonic time, in nanoseconds from an arbitrary origin.
    pub physical_ns: u64,
}

impl Now {
    /// Instants `logical_ns` (domain-logical) and `physical_ns` (monotonic).
    #[must_use]
    pub const fn new(logical_ns: i64, physical_ns: u64) -> Self {
        Self {
            logical_ns,
            physical_ns,
        }
    }
}

/// When an armed buffer flushes by time, on the clock its policy uses. Deadlines of one clock
/// order by instant (every logical one sorts before every physical one, which only matters to
/// a collection that mixes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Deadline {
    /// Domain-logical nanoseconds (`FLUSH EACH`).
    Logical(i64),
    /// Physical monotonic nanoseconds (`FLUSH IMMEDIATE`).
    Physical(u64),
}

impl Deadline {
    /// Whether the deadline is reached at `now` (reaching it exactly counts).
    #[must_use]
    pub const fn is_reached(&self, now: Now) -> bool {
        match *self {
            Self::Logical(at) => now.logical_ns >= at,
            Self::Physical(at) => now.physical_ns >= at,
        }
    }
}

/// Why a batch left the buffer (for per-reason counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushReason {
    /// The interval (`FLUSH EACH`) or the Immediate window expired.
    Deadline,
    /// `MAX BATCH SIZE` was reached, or the next append would have passed it.
    Size,
    /// Force flush: model alteration, domain pause, ownership handoff or shutdown.
    Forced,
}

/// What the caller must do after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing leaves the buffer.
    None,
    /// Write everything buffered as one batch of `bytes` logical bytes and `rows` rows.
    Flush {
        /// Logical bytes of the batch.
        bytes: u64,
        /// Rows of the batch.
        rows: u64,
        /// Why it flushes.
        reason: FlushReason,
    },
}

impl Action {
    /// Whether this action flushes.
    #[must_use]
    pub const fn is_flush(&self) -> bool {
        matches!(self, Self::Flush { .. })
    }
}

/// The actions of one append, to be carried out in field order.
///
/// `before` writes what was buffered *before* this append (the append is not part of it); then
/// the append joins the buffer; then `after` writes the buffer *including* this append. Either or
/// both may be [`Action::None`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendActions {
    /// Flush of the previously buffered batch, excluding this append.
    pub before: Action,
    /// Flush of the buffer ending with this append.
    pub after: Action,
}

impl AppendActions {
    const NONE: Self = Self {
        before: Action::None,
        after: Action::None,
    };

    /// The flushes in the order they must be written.
    pub fn flushes(&self) -> impl Iterator<Item = Action> {
        [self.before, self.after]
            .into_iter()
            .filter(Action::is_flush)
    }
}

/// The flush state machine of one route × concrete branch buffer.
#[derive(Clone, Debug)]
pub struct RouteFlusher {
    policy: FlushPolicy,
    buffered: Chunk,
    deadline: Option<Deadline>,
    /// When the buffer last went from empty to buffered (meaningful while armed): a policy
    /// change re-arms from it.
    armed_at: Now,
}

impl RouteFlusher {
    /// An empty, disarmed buffer under `policy`.
    #[must_use]
    pub const fn new(policy: FlushPolicy) -> Self {
        Self {
            policy,
            buffered: Chunk { bytes: 0, rows: 0 },
            deadline: None,
            armed_at: Now {
                logical_ns: 0,
                physical_ns: 0,
            },
        }
    }

    /// The policy this buffer follows.
    #[must_use]
    pub const fn policy(&self) -> FlushPolicy {
        self.policy
    }

    /// What is buffered now.
    #[must_use]
    pub const fn buffered(&self) -> Chunk {
        self.buffered
    }

    /// When the buffer flushes by time if nothing else happens; `None` when empty. The caller
    /// wakes then (on the clock the deadline names) and calls [`Self::tick`].
    #[must_use]
    pub const fn next_deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// Replaces the buffered byte count with `bytes`, the size of what is buffered counted
    /// now: for a caller that did not count bytes under a policy that does not read them
    /// ([`FlushPolicy::counts_bytes`]), before it adopts one that does.
    pub fn recount_bytes(&mut self, bytes: u64) {
        self.buffered.bytes = bytes;
    }

    /// Adds `chunk` to the buffer at `now`. A chunk without rows has nothing to deliver and is
    /// ignored (it neither arms nor flushes).
    pub fn append(&mut self, chunk: Chunk, now: Now) -> AppendActions {
        if chunk.is_empty() {
            return AppendActions::NONE;
        }
        let mut actions = AppendActions::NONE;
        // An expired deadline the caller has not ticked yet fires before the new rows join.
        if self.deadline.is_some_and(|d| d.is_reached(now)) {
            actions.before = self.take(FlushReason::Deadline);
        } else if let FlushPolicy::Each {
            max_batch_bytes, ..
        } = self.policy
        {
            // Never grow a batch past the bound by joining it: flush what is there first.
            if !self.buffered.is_empty()
                && self.buffered.bytes.saturating_add(chunk.bytes) > max_batch_bytes
            {
                actions.before = self.take(FlushReason::Size);
            }
        }
        if self.buffered.is_empty() {
            self.armed_at = now;
            self.deadline = Some(self.arm(now));
        }
        self.buffered = self.buffered.saturating_add(chunk);
        actions.after = match self.policy {
            FlushPolicy::Each {
                max_batch_bytes, ..
            } if self.buffered.bytes >= max_batch_bytes => self.take(FlushReason::Size),
            // Only a zero interval (or a clock at the end of its range) expires on arming.
            _ if self.deadline.is_some_and(|d| d.is_reached(now)) => {
                self.take(FlushReason::Deadline)
            }
            _ => Action::None,
        };
        self.check_invariant();
        actions
    }

    /// Fires the deadline if it is reached at `now`.
    pub fn tick(&mut self, now: Now) -> Action {
        if self.deadline.is_some_and(|d| d.is_reached(now)) {
            self.take(FlushReason::Deadline)
        } else {
            Action::None
        }
    }

    /// Flushes whatever is buffered, whatever the policy (model alteration, domain pause,
    /// ownership handoff, shutdown). A no-op on an empty buffer.
    pub fn force_flush(&mut self) -> Action {
        if self.buffered.is_empty() {
            Action::None
        } else {
            self.take(FlushReason::Forced)
        }
    }

    /// Adopts `policy` (a dynamic ALTER of the route's FLUSH) and evaluates what is buffered
    /// against it at `now`: the deadline is re-armed from when the buffer was opened under the
    /// new policy's clock, and the buffer flushes if that deadline has passed or it holds
    /// `MAX BATCH SIZE` bytes or more.
    pub fn set_policy(&mut self, policy: FlushPolicy, now: Now) -> Action {
        self.policy = policy;
        if self.buffered.is_empty() {
            return Action::None;
        }
        self.deadline = Some(self.arm(self.armed_at));
        let action = match policy {
            FlushPolicy::Each {
                max_batch_bytes, ..
            } if self.buffered.bytes >= max_batch_bytes => self.take(FlushReason::Size),
            _ => self.tick(now),
        };
        self.check_invariant();
        action
    }

    /// The deadline armed by an empty → buffered transition at `now`.
    fn arm(&self, now: Now) -> Deadline {
        match self.policy {
            FlushPolicy::Each { interval_ns, .. } => {
                Deadline::Logical(now.logical_ns.saturating_add_unsigned(interval_ns))
            }
            FlushPolicy::Immediate => {
                Deadline::Physical(now.physical_ns.saturating_add(IMMEDIATE_WINDOW_NS))
            }
        }
    }

    /// Empties and disarms the buffer, returning the flush of what it held.
    fn take(&mut self, reason: FlushReason) -> Action {
        debug_assert!(
            !self.buffered.is_empty(),
            "route flusher: flushing an empty buffer"
        );
        let Chunk { bytes, rows } = std::mem::take(&mut self.buffered);
        self.deadline = None;
        Action::Flush {
            bytes,
            rows,
            reason,
        }
    }

    fn check_invariant(&self) {
        debug_assert_eq!(
            self.buffered.is_empty(),
            self.deadline.is_none(),
            "route flusher: a buffer is armed exactly when it holds rows"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[derive(Clone, Copy, Debug)]
    enum Event {
        /// bytes, rows, logical ns, physical ns
        Append(u64, u64, i64, u64),
        /// logical ns, physical ns
        Tick(i64, u64),
        Force,
        /// the new policy, logical ns, physical ns
        Policy(FlushPolicy, i64, u64),
    }

    /// One expected flush: bytes, rows, reason.
    type F = (u64, u64, FlushReason);

    struct Case {
        name: &'static str,
        policy: FlushPolicy,
        /// Each event, the flushes it must produce in order, and the deadline left armed.
        steps: &'static [(Event, &'static [F], Option<Deadline>)],
    }

    use Deadline::{Logical as L, Physical as P};
    use Event::{Append, Force, Policy, Tick};
    use FlushReason::{Deadline as D, Forced as X, Size as S};

    const EACH_10MS_1K: FlushPolicy = FlushPolicy::Each {
        interval_ns: 10 * MS,
        max_batch_bytes: 1_000,
    };
    const W: u64 = IMMEDIATE_WINDOW_NS;

    const CASES: &[Case] = &[
        Case {
            name: "each: first append arms a logical deadline, later appends do not re-arm",
            policy: EACH_10MS_1K,
            steps: &[
                (Append(100, 1, 0, 0), &[], Some(L(10_000_000))),
                (Append(100, 2, 5_000_000, 9_999), &[], Some(L(10_000_000))),
                (Tick(9_999_999, u64::MAX), &[], Some(L(10_000_000))),
                (Tick(10_000_000, 0), &[(200, 3, D)], None),
                (Tick(99_000_000, 0), &[], None),
                (Append(10, 1, 20_000_000, 0), &[], Some(L(30_000_000))),
            ],
        },
        Case {
            name: "each: exactly at the deadline fires, one before does not",
            policy: EACH_10MS_1K,
            steps: &[
                (Append(1, 1, 7, 0), &[], Some(L(10_000_007))),
                (Tick(10_000_006, 0), &[], Some(L(10_000_007))),
                (Tick(10_000_007, 0), &[(1, 1, D)], None),
            ],
        },
        Case {
            name: "each: reaching the byte bound flushes at once, including the append",
            policy: EACH_10MS_1K,
            steps: &[
                (Append(600, 6, 0, 0), &[], Some(L(10_000_000))),
                (Append(400, 4, 1, 0), &[(1_000, 10, S)], None),
                (Append(999, 1, 2, 0), &[], Some(L(10_000_002))),
            ],
        },
        Case {
            name: "each: an append that would pass the bound flushes the buffer first",
            policy: EACH_10MS_1K,
            steps: &[
                (Append(600, 6, 0, 0), &[], Some(L(10_000_000))),
                (Append(500, 5, 3, 0), &[(600, 6, S)], Some(L(10_000_003))),
                (Tick(10_000_003, 0), &[(500, 5, D)], None),
            ],
        },
        Case {
            name: "each: an append larger than the bound flushes alone",
            policy: EACH_10MS_1K,
            steps: &[
                (Append(5_000, 50, 0, 0), &[(5_000, 50, S)], None),
                (Append(10, 1, 1, 0), &[], Some(L(10_000_001))),
                (Append(5_000, 50, 2, 0), &[(10, 1, S), (5_000, 50, S)], None),
            ],
        },
        Case {
            name: "each: a late append flushes the expired batch before joining",
            policy: EACH_10MS_1K,
            steps: &[
                (Append(10, 1, 0, 0), &[], Some(L(10_000_000))),
                (
                    Append(20, 2, 10_000_000, 0),
                    &[(10, 1, D)],
                    Some(L(20_000_000)),
                ),
            ],
        },
        Case {
            name: "each: the physical clock never fires a logical interval",
            policy: EACH_10MS_1K,
            steps: &[
                (Append(10, 1, 0, 0), &[], Some(L(10_000_000))),
                (Tick(0, u64::MAX), &[], Some(L(10_000_000))),
                (Append(10, 1, 0, u64::MAX), &[], Some(L(10_000_000))),
                (Tick(10_000_000, 0), &[(20, 2, D)], None),
            ],
        },
        Case {
            name: "each: a zero interval flushes every append as it arrives",
            policy: FlushPolicy::Each {
                interval_ns: 0,
                max_batch_bytes: 1_000,
            },
            steps: &[
                (Append(10, 1, 5, 0), &[(10, 1, D)], None),
                (Append(10, 1, 5, 0), &[(10, 1, D)], None),
            ],
        },
        Case {
            name: "each: a deadline past the end of logical time saturates, force still flushes",
            policy: FlushPolicy::Each {
                interval_ns: u64::MAX,
                max_batch_bytes: u64::MAX,
            },
            steps: &[
                (
                    Append(u64::MAX - 1, 1, i64::MAX - 1, 0),
                    &[],
                    Some(L(i64::MAX)),
                ),
                (Tick(i64::MAX - 1, u64::MAX), &[], Some(L(i64::MAX))),
                (Append(1, 1, i64::MAX - 1, 0), &[(u64::MAX, 2, S)], None),
                (Append(1, 1, i64::MAX - 1, 0), &[], Some(L(i64::MAX))),
                (Force, &[(1, 1, X)], None),
            ],
        },
        Case {
            name: "immediate: first append arms a physical 100 µs window",
            policy: FlushPolicy::Immediate,
            steps: &[
                (Append(10, 1, 0, 1_000), &[], Some(P(1_000 + W))),
                (Append(20, 2, 0, 50_000), &[], Some(P(1_000 + W))),
                (Tick(0, 1_000 + W - 1), &[], Some(P(1_000 + W))),
                (Tick(0, 1_000 + W), &[(30, 3, D)], None),
                (Append(5, 1, 0, 500_000), &[], Some(P(500_000 + W))),
            ],
        },
        Case {
            name: "immediate: the logical clock never fires the physical window",
            policy: FlushPolicy::Immediate,
            steps: &[
                (Append(10, 1, 0, 0), &[], Some(P(W))),
                (Tick(i64::MAX, W - 1), &[], Some(P(W))),
                (Append(10, 1, i64::MAX, W - 1), &[], Some(P(W))),
                (Tick(i64::MIN, W), &[(20, 2, D)], None),
            ],
        },
        Case {
            name: "immediate: no size bound",
            policy: FlushPolicy::Immediate,
            steps: &[
                (Append(u64::MAX, 1, 0, 0), &[], Some(P(W))),
                (Append(u64::MAX, 1, 0, 1), &[], Some(P(W))),
                (Tick(0, W), &[(u64::MAX, 2, D)], None),
            ],
        },
        Case {
            name: "immediate: a late append flushes the expired window before joining",
            policy: FlushPolicy::Immediate,
            steps: &[
                (Append(10, 1, 0, 0), &[], Some(P(W))),
                (Append(20, 2, 0, W + 7), &[(10, 1, D)], Some(P(2 * W + 7))),
            ],
        },
        Case {
            name: "force: flushes whatever is buffered under each policy; no-op when empty",
            policy: EACH_10MS_1K,
            steps: &[
                (Force, &[], None),
                (Append(10, 1, 0, 0), &[], Some(L(10_000_000))),
                (Force, &[(10, 1, X)], None),
                (Force, &[], None),
                (Tick(i64::MAX, u64::MAX), &[], None),
            ],
        },
        Case {
            name: "force: immediate",
            policy: FlushPolicy::Immediate,
            steps: &[
                (Force, &[], None),
                (Append(10, 1, 0, 0), &[], Some(P(W))),
                (Force, &[(10, 1, X)], None),
                (Tick(0, W), &[], None),
            ],
        },
        Case {
            name: "an append without rows is ignored",
            policy: EACH_10MS_1K,
            steps: &[
                (Append(0, 0, 0, 0), &[], None),
                (Append(5_000, 0, 0, 0), &[], None),
                (Append(10, 1, 0, 0), &[], Some(L(10_000_000))),
                (Append(5_000, 0, 9, 0), &[], Some(L(10_000_000))),
            ],
        },
        Case {
            name: "a zero byte bound flushes every append alone",
            policy: FlushPolicy::Each {
                interval_ns: MS,
                max_batch_bytes: 0,
            },
            steps: &[
                (Append(0, 3, 0, 0), &[(0, 3, S)], None),
                (Append(1, 1, 0, 0), &[(1, 1, S)], None),
            ],
        },
        Case {
            name: "a new policy re-arms from the buffer's opening, on its own clock",
            policy: EACH_10MS_1K,
            steps: &[
                (Append(10, 1, 2 * MS as i64, 500), &[], Some(L(12_000_000))),
                (
                    Policy(
                        FlushPolicy::Each {
                            interval_ns: 60 * MS,
                            max_batch_bytes: 1_000,
                        },
                        5 * MS as i64,
                        600,
                    ),
                    &[],
                    Some(L(62_000_000)),
                ),
                (
                    Policy(FlushPolicy::Immediate, 6 * MS as i64, 700),
                    &[],
                    Some(P(500 + W)),
                ),
                (Tick(0, 500 + W), &[(10, 1, D)], None),
                (Policy(EACH_10MS_1K, 0, 0), &[], None),
            ],
        },
        Case {
            name: "a new policy flushes at once what it finds due or too large",
            policy: FlushPolicy::Each {
                interval_ns: 60 * MS,
                max_batch_bytes: 10_000,
            },
            steps: &[
                (Append(10, 1, 0, 0), &[], Some(L(60_000_000))),
                (Policy(EACH_10MS_1K, 10 * MS as i64, 0), &[(10, 1, D)], None),
                (
                    Policy(
                        FlushPolicy::Each {
                            interval_ns: 60 * MS,
                            max_batch_bytes: 10_000,
                        },
                        10 * MS as i64,
                        0,
                    ),
                    &[],
                    None,
                ),
                (
                    Append(2_000, 2, 20 * MS as i64, 0),
                    &[],
                    Some(L(80_000_000)),
                ),
                (
                    Policy(EACH_10MS_1K, 20 * MS as i64, 0),
                    &[(2_000, 2, S)],
                    None,
                ),
            ],
        },
    ];

    #[test]
    fn flush_tables() {
        for case in CASES {
            let mut flusher = RouteFlusher::new(case.policy);
            for (i, (event, expected, deadline)) in case.steps.iter().enumerate() {
                let got: Vec<Action> = match *event {
                    Append(bytes, rows, l, p) => flusher
                        .append(Chunk::new(bytes, rows), Now::new(l, p))
                        .flushes()
                        .collect(),
                    Tick(l, p) => Some(flusher.tick(Now::new(l, p)))
                        .filter(Action::is_flush)
                        .into_iter()
                        .collect(),
                    Force => Some(flusher.force_flush())
                        .filter(Action::is_flush)
                        .into_iter()
                        .collect(),
                    Policy(policy, l, p) => Some(flusher.set_policy(policy, Now::new(l, p)))
                        .filter(Action::is_flush)
                        .into_iter()
                        .collect(),
                };
                let want: Vec<Action> = expected
                    .iter()
                    .map(|&(bytes, rows, reason)| Action::Flush {
                        bytes,
                        rows,
                        reason,
                    })
                    .collect();
                assert_eq!(got, want, "{}: step {i} {event:?}", case.name);
                assert_eq!(
                    flusher.next_deadline(),
                    *deadline,
                    "{}: deadline after step {i} {event:?}",
                    case.name
                );
                assert_eq!(
                    flusher.buffered().is_empty(),
                    deadline.is_none(),
                    "{}: armed exactly when buffered, step {i}",
                    case.name
                );
            }
        }
    }

    #[test]
    fn append_actions_split_before_and_after() {
        let mut flusher = RouteFlusher::new(EACH_10MS_1K);
        assert_eq!(
            flusher.append(Chunk::new(10, 1), Now::default()),
            AppendActions::NONE
        );
        let actions = flusher.append(Chunk::new(2_000, 2), Now::default());
        assert_eq!(
            actions.before,
            Action::Flush {
                bytes: 10,
                rows: 1,
                reason: FlushReason::Size
            }
        );
        assert_eq!(
            actions.after,
            Action::Flush {
                bytes: 2_000,
                rows: 2,
                reason: FlushReason::Size
            }
        );
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Ev {
        Append(u64, u64, u64),
        Advance(u64, u64),
        Tick,
        Force,
    }

    fn ev() -> impl Strategy<Value = Ev> {
        prop_oneof![
            4 => (0u64..3_000, 0u64..5, 0u64..3).prop_map(|(b, r, dt)| Ev::Append(b, r, dt)),
            2 => (0u64..20_000_000, 0u64..300_000).prop_map(|(l, p)| Ev::Advance(l, p)),
            2 => Just(Ev::Tick),
            1 => Just(Ev::Force),
        ]
    }

    struct Out {
        immediate: bool,
        max: u64,
        rows: u64,
        bytes: u64,
    }

    impl Out {
        /// Accounts a flush of `appends` appends and checks it respects the byte bound.
        fn check(&mut self, a: Action, appends: u64) -> Result<(), TestCaseError> {
            let Action::Flush { bytes, rows, .. } = a else {
                return Err(TestCaseError::fail("expected a flush"));
            };
            prop_assert!(rows > 0 && appends > 0);
            if !self.immediate {
                prop_assert!(
                    bytes <= self.max || appends == 1,
                    "{bytes} bytes in {appends} appends"
                );
            }
            self.rows += rows;
            self.bytes += bytes;
            Ok(())
        }
    }

    proptest! {
        /// Rows and bytes are conserved, a batch passes the bound only when one append alone
        /// does, and a buffer is armed exactly when it holds rows.
        #[test]
        fn conserves_and_clamps(
            immediate in any::<bool>(),
            max in 0u64..4_000,
            events in proptest::collection::vec(ev(), 0..200),
        ) {
            let policy = if immediate {
                FlushPolicy::Immediate
            } else {
                FlushPolicy::Each { interval_ns: 10_000_000, max_batch_bytes: max }
            };
            let mut f = RouteFlusher::new(policy);
            let mut now = Now::default();
            let (mut in_rows, mut in_bytes) = (0u64, 0u64);
            let mut out = Out { immediate, max, rows: 0, bytes: 0 };
            // Appends (with rows) in the batch being buffered, as the model sees it.
            let mut batch_appends = 0u64;
            for e in events {
                match e {
                    Ev::Append(b, r, dt) => {
                        now.logical_ns += i64::try_from(dt).unwrap_or(0);
                        now.physical_ns += dt;
                        let acts = f.append(Chunk::new(b, r), now);
                        if r > 0 {
                            in_rows += r;
                            in_bytes += b;
                            if acts.before.is_flush() {
                                out.check(acts.before, batch_appends)?;
                                batch_appends = 0;
                            }
                            batch_appends += 1;
                        } else {
                            prop_assert_eq!(acts, AppendActions::NONE);
                        }
                        if acts.after.is_flush() {
                            out.check(acts.after, batch_appends)?;
                            batch_appends = 0;
                        }
                    }
                    Ev::Advance(l, p) => {
                        now.logical_ns += i64::try_from(l).unwrap_or(0);
                        now.physical_ns += p;
                    }
                    Ev::Tick | Ev::Force => {
                        let a = if matches!(e, Ev::Tick) { f.tick(now) } else { f.force_flush() };
                        if a.is_flush() {
                            out.check(a, batch_appends)?;
                            batch_appends = 0;
                        }
                    }
                }
                prop_assert_eq!(f.buffered().is_empty(), f.next_deadline().is_none());
                prop_assert_eq!(f.buffered().is_empty(), batch_appends == 0);
                if let Some(d) = f.next_deadline() {
                    // Only the passage of time (or an ignored, rowless append) leaves a reached
                    // deadline for the next tick.
                    prop_assert!(
                        !d.is_reached(now) || matches!(e, Ev::Advance(..) | Ev::Append(_, 0, _))
                    );
                }
            }
            let last = f.force_flush();
            if last.is_flush() {
                out.check(last, batch_appends)?;
            }
            prop_assert_eq!(in_rows, out.rows);
            prop_assert_eq!(in_bytes, out.bytes);
        }
    }
}
