//! Route buffers' flushes and the order in which their frames leave: no frame leaves ahead
//! of older rows that another buffer holds past its deadline.
//!
//! Why it matters: a window processor's input watermark is the latest row time it admitted,
//! across its branches, so a frame whose rows are later than rows still buffered for another
//! branch closes that branch's window before those rows arrive (they then open a second
//! window). A tick flushes every due buffer at once, earliest event time first
//! (`Graph::flush_routes`). But a buffer past its deadline that takes new rows before a tick
//! flushes what it held on the spot ([`nervix_shards::flush::RouteFlusher::append`]), alone:
//! while the shard is busy (rounds of a step run without ticks in between), that frame —
//! rows of a recent input batch — overtook the rows of earlier batches that other branches'
//! buffers still held, and Nexmark q5 lost counts this way.
//!
//! The rule: before a node processes a frame, every buffer due at that instant flushes, in
//! the tick's order. Then no buffer an append reaches is past its deadline (deadlines are
//! compared with the same instant), so buffers only ever flush together, in that order.
//! Checking costs one comparison: `Graph::route_due` is a lower bound of every buffer's
//! deadline — lowered as appends arm deadlines, recomputed exactly by each flush of the
//! routes in the pass that flushes — so a stale bound only causes one flush that finds
//! nothing due.

use nervix_shards::branch_key::BranchKey;
use nervix_shards::flush::Deadline;

use super::{min_opt, Ctx, Graph, Instant, NodeRef};
use crate::runtime::frame::Frame;
use crate::runtime::plan::RelayId;
use crate::runtime::shard::buffers::Flushed;

/// Which route buffers flush.
#[derive(Clone, Copy)]
pub(super) enum RouteFlush<'k> {
    /// Those whose deadline came.
    Due,
    /// Every buffer, or only one branch's (stop, shutdown, eviction, entity pause).
    Forced(Option<&'k BranchKey>),
    /// Those the plan's (just altered) FLUSH policies find due or full.
    NewPolicies,
}

impl Graph {
    /// Lowers the route-buffer bound to a deadline a buffer armed.
    pub(super) fn note_route_deadline(&mut self, deadline: Option<Deadline>) {
        crate::runtime::shard::buffers::lower_to(&mut self.route_due, deadline);
    }

    /// The earliest deadline of any route buffer: (logical, physical) ns.
    pub(super) fn route_deadline(&self) -> (Option<i64>, Option<u64>) {
        let mut logical: Option<i64> = None;
        let mut physical: Option<u64> = None;
        for node in self
            .ingestors
            .iter()
            .chain(&self.processors)
            .chain(&self.emitters)
        {
            for buffers in &node.routes {
                let (l, p) = buffers.next_deadline();
                logical = min_opt(logical, l);
                physical = min_opt(physical, p);
            }
        }
        (logical, physical)
    }

    /// Flushes the due route buffers, as a tick would, if any may be due at `at`.
    pub(super) fn flush_overdue_routes(&mut self, at: Instant, cx: &mut Ctx<'_>) {
        let (logical, physical) = self.route_due;
        let due = logical.is_some_and(|l| l <= at.now.logical_ns)
            || physical.is_some_and(|p| p <= at.now.physical_ns);
        if due {
            self.flush_routes(RouteFlush::Due, at, cx);
        }
    }

    /// Route buffers' flushes (see [`RouteFlush`]). Processor and ingestor frames go to their
    /// target relays, emitter frames to their sinks.
    pub(super) fn flush_routes(&mut self, which: RouteFlush<'_>, at: Instant, cx: &mut Ctx<'_>) {
        let plan = self.plan.clone();
        let nodes = self.node_refs(true);
        // Kept between calls: a tick can flush thousands of frames (Nexmark q5's 8,192-bid
        // batches fan out into as many branches), and growing fresh vectors of that many
        // frames, then copying them into the sorted order, cost more than the sort. A flush
        // reached from inside this one (a publish delivers to a node that flushes) finds them
        // taken and uses fresh ones.
        let FlushScratch {
            mut out,
            mut frames,
            mut order,
        } = std::mem::take(&mut self.flush_scratch);
        let (mut due_logical, mut due_physical) = (None, None);
        for node in nodes {
            let routes = match node {
                NodeRef::Ingestor(i) => &plan.ingestors[i].routes[..],
                NodeRef::Processor(i) => &plan.processors[i].routes[..],
                NodeRef::Emitter(i) => std::slice::from_ref(&plan.emitters[i].route),
            };
            for (route, buffers) in self.node_mut(node).routes.iter_mut().enumerate() {
                let target = match node {
                    NodeRef::Emitter(_) => usize::MAX,
                    _ => routes[route].target,
                };
                let (logical, physical) = match which {
                    RouteFlush::Forced(only) => {
                        buffers.force_flush(only, &mut frames);
                        buffers.next_deadline()
                    }
                    RouteFlush::Due => buffers.tick(at.now, &mut frames),
                    RouteFlush::NewPolicies => {
                        buffers.set_policy(routes[route].flush, at.now, &mut frames);
                        buffers.next_deadline()
                    }
                };
                due_logical = min_opt(due_logical, logical);
                due_physical = min_opt(due_physical, physical);
                out.extend(frames.drain(..).map(|f| Some((f, node, target))));
            }
        }
        // Earliest event time first, then oldest buffer, across every route: one input batch
        // fans out over routes and branches in route order, so without this a later row on an
        // earlier route (an end of input, a far-ahead event time) could reach a window before
        // earlier rows on other routes and move its watermark past them (see
        // `RouteBuffers::tick`). Frames without event time keep their buffers' order. The
        // frames of one buffer share its earliest time, so they keep their row order; they are
        // adjacent in `out` (a buffer's flush emits them together, and `opened` names one
        // buffer), so that time is the least over each run of equal `opened`.
        let opened = |slot: &Option<(Flushed, NodeRef, RelayId)>| slot.as_ref().map(|s| s.0.opened);
        for buffer in out.chunk_by(|a, b| opened(a) == opened(b)) {
            // `Option`'s order puts `None` first: one untimed frame makes the buffer untimed.
            // (Each frame's earliest time was taken when its rows were appended.)
            let earliest = buffer
                .iter()
                .flatten()
                .map(|(flushed, _, _)| flushed.earliest_ns)
                .min()
                .flatten();
            let opening = opened(&buffer[0]).expect("every slot is filled until the sort");
            let key = (earliest, opening);
            let first = order.len();
            order.extend((first..first + buffer.len()).map(|position| (key, position)));
        }
        // Sorted as (key, position) pairs, then taken in that order: a flush can hold
        // thousands of frames, and moving them whole through the sort cost more than the
        // comparisons. The position breaks ties, so the order is the stable one.
        order.sort_unstable();
        self.route_due = (due_logical, due_physical);
        // Consecutive frames of one node are published together (`publish_all` may merge them).
        let mut from_node: Option<NodeRef> = None;
        let mut publishing: Vec<(RelayId, Frame)> = Vec::new();
        for (_, position) in order.drain(..) {
            let Some((Flushed { frame, .. }, node, relay)) = out[position].take() else {
                continue;
            };
            if from_node != Some(node) {
                if let Some(from) = from_node.take() {
                    self.publish_all(from, std::mem::take(&mut publishing), at, cx);
                }
            }
            match node {
                NodeRef::Emitter(index) => self.emitter_queues[index].ready.push_back(frame),
                _ => {
                    from_node = Some(node);
                    publishing.push((relay, frame));
                }
            }
        }
        if let Some(from) = from_node {
            self.publish_all(from, publishing, at, cx);
        }
        out.clear();
        self.flush_scratch = FlushScratch { out, frames, order };
    }
}

/// [`Graph::flush_routes`]'s vectors, kept between calls (empty between them); each holds as
/// many entries as the largest flush had frames.
#[derive(Default)]
pub(super) struct FlushScratch {
    /// The flushed frames with their node and target relay, in flush order; taken in `order`.
    out: Vec<Option<(Flushed, NodeRef, RelayId)>>,
    /// One route's flush.
    frames: Vec<Flushed>,
    /// (earliest time, opening, position in `out`), sorted into publishing order.
    order: Vec<((Option<i64>, u64), usize)>,
}

#[cfg(test)]
mod tests {
    use nervix_shards::flush::IMMEDIATE_WINDOW_NS;

    use super::super::test_driver::Driver;
    use super::super::DeliveryBudget;

    #[test]
    fn a_buffer_past_its_deadline_does_not_leave_ahead_of_older_rows() {
        let mut driver = Driver::new();
        let window = IMMEDIATE_WINDOW_NS;
        // Sensor a opens its window at 0 s (due at 10 s).
        driver.send(&[("a", 0)], 0);
        driver.tick(window);
        // One batch: a at 5 s, b at 15 s; both buffers due 100 µs later.
        driver.send(&[("a", 5), ("b", 15)], 2 * window);
        // The shard is busy: the next batch comes after that deadline, before any tick. b's
        // buffer takes it; a's 5 s row must still reach a's window before b's 15 s row.
        driver.send(&[("b", 16)], 4 * window);
        driver.tick(5 * window);
        // Event time moves past every window; each hop (reingestor, window, emitter) waits
        // for one tick.
        driver.send(&[("c", 100)], 6 * window);
        for hop in 1..=3 {
            driver.tick((6 + 2 * hop) * window);
        }
        let mut tallies = driver.tallies.clone();
        tallies.sort();
        assert_eq!(
            tallies,
            vec![("a".to_string(), 2), ("b".to_string(), 2)],
            "a's two rows fall in one window, and so do b's"
        );
    }

    #[test]
    fn a_spent_delivery_budget_defers_relay_frames_and_loses_none() {
        let mut driver = Driver::new();
        let window = IMMEDIATE_WINDOW_NS;
        let sensors = ["a", "b", "c", "d", "e", "f"];
        // One batch per sensor: one batch's branches would travel as one grouped frame.
        for sensor in sensors {
            driver.send(&[(sensor, 1)], 0);
        }
        // The reingestor's six branch buffers flush into the window's relay; a budget whose
        // time has passed hands nothing on, one of one frame hands on one.
        let passed = DeliveryBudget {
            frames: usize::MAX,
            until_ns: 0,
        };
        assert!(driver.tick_within(window, passed), "nothing was handed on");
        let one_frame = DeliveryBudget {
            frames: 1,
            until_ns: u64::MAX,
        };
        let mut deferred_ticks = 0;
        while driver.tick_within(window, one_frame) {
            deferred_ticks += 1;
            assert!(
                deferred_ticks < 100,
                "the backlog drains one frame per tick"
            );
        }
        assert_eq!(deferred_ticks, sensors.len() - 1, "one frame per tick");
        // Event time moves past every window: each sensor's row is counted once.
        driver.send(&[("z", 100)], 2 * window);
        for hop in 1..=3 {
            driver.tick((2 + 2 * hop) * window);
        }
        let mut tallies = driver.tallies.clone();
        tallies.sort();
        let expected: Vec<(String, i64)> = sensors.iter().map(|s| (s.to_string(), 1)).collect();
        assert_eq!(tallies, expected);
    }
}
