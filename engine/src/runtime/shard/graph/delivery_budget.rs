//! How much one poll of a shard task may hand from relays to consumers: a number of relay
//! frames and a span of physical time, whichever runs out first.
//!
//! Why time and not frames alone: a frame is taken whole, and frames differ in cost by four
//! orders of magnitude — a window's input is one frame per branch of a row or two, while one
//! client batch reaching a reingestor that fans out over thousands of branches (Nexmark q5)
//! is several milliseconds of work. A frame count fit for one kind is wrong for the other:
//! eight frames per step (this module's predecessor) let one poll run eight fan-outs, 50–60 ms
//! of a shard with a 10 ms stall budget, yet stopped a backlog of one-row frames after eight.
//! The time bound is checked before each frame, so a poll holds the shard for at most about
//! one frame past [`MAX_DELIVERY_PER_STEP_NS`]; the frame bound stays as a hard limit.
//!
//! Why it loses nothing: a spent budget only ends the pump's delivery loop with the relay
//! fronts in place and `deferred` set; the shard's ticker continues with a new budget after
//! other tasks ran.

use crate::runtime::clock;

/// Relay frames one step hands to consumers at most.
pub const MAX_FRAMES_PER_STEP: usize = 1_024;
/// How long one step keeps handing relay frames to consumers, in physical ns: the same
/// slice a session reader or the command loop runs before going back to the reactor.
pub const MAX_DELIVERY_PER_STEP_NS: u64 = crate::runtime::driver::MAX_RUN_BEFORE_YIELD_NS;

/// What a step's pump may still hand to consumers (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryBudget {
    /// Relay frames still allowed.
    pub frames: usize,
    /// The physical instant ([`clock::physical_ns`]) from which no frame is taken.
    pub until_ns: u64,
}

impl DeliveryBudget {
    /// Outside a step: everything.
    pub const UNBOUNDED: DeliveryBudget = DeliveryBudget {
        frames: usize::MAX,
        until_ns: u64::MAX,
    };

    /// A step's budget from physical instant `now_ns` on.
    pub fn for_step(now_ns: u64) -> DeliveryBudget {
        DeliveryBudget {
            frames: MAX_FRAMES_PER_STEP,
            until_ns: now_ns.saturating_add(MAX_DELIVERY_PER_STEP_NS),
        }
    }

    /// Whether no further frame may be taken now (reads the clock unless unbounded in time).
    pub fn spent(&self) -> bool {
        self.frames == 0 || (self.until_ns != u64::MAX && clock::physical_ns() >= self.until_ns)
    }

    /// Counts one frame taken.
    pub fn take_frame(&mut self) {
        debug_assert!(self.frames > 0, "a frame taken past the frame budget");
        self.frames = self.frames.saturating_sub(1);
    }
}
