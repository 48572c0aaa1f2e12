//! `COLLECT FOR <duration> [MAX BATCH SIZE <bytes>]` in front of a processor or emitter: its
//! input frames are gathered per concrete branch and handed to the node together when the
//! domain-logical interval ends (or the byte bound is reached), in arrival order.
//!
//! A correlator declares COLLECT FOR per side, so its collector is built from groups
//! ([`Collector::grouped`]): each group names its relays and policy and collects on its own per
//! branch; a frame from a relay no group names is handed over at once.
//!
//! The decision of when is the route flusher's ([`RouteFlusher`], `FLUSH EACH` rules), so a
//! collection and a route buffer release on exactly the same terms. For the stateless nodes
//! this data plane runs (junctions, reingestors, emitters), handing over the gathered frames
//! one after another is the same as handing over their concatenation: each row meets the same
//! filters and routes, in the same order, and lands in the same route buffers.

use std::collections::HashMap;

use nervix_shards::branch_key::{BranchKey, KeyHashState};
use nervix_shards::flush::{Chunk, Deadline, FlushPolicy, Now, RouteFlusher};

use crate::runtime::frame::Frame;
use crate::runtime::logical_bytes::logical_bytes;
use crate::runtime::plan::RelayId;

/// One group's collection in one branch: its flush decisions and the frames gathered.
type Gathering = (RouteFlusher, Vec<(RelayId, Frame)>);

/// The frames one node is collecting, per input group and branch.
pub struct Collector {
    /// Per group: the relays it collects (empty: every relay) and its policy.
    groups: Vec<(Vec<RelayId>, FlushPolicy)>,
    branches: HashMap<(usize, BranchKey), Gathering, KeyHashState>,
}

impl Collector {
    /// One collection over every input relay.
    pub fn new(policy: FlushPolicy) -> Collector {
        Collector::grouped(vec![(Vec::new(), policy)])
    }

    /// Independent collections, one per group of relays.
    pub fn grouped(groups: Vec<(Vec<RelayId>, FlushPolicy)>) -> Collector {
        Collector {
            groups,
            branches: HashMap::default(),
        }
    }

    /// Adds a frame; what must be handed over now is appended to `out` in order. Returns the
    /// branch's deadline afterwards, if it holds frames.
    pub fn append(
        &mut self,
        relay: RelayId,
        frame: Frame,
        now: Now,
        out: &mut Vec<(RelayId, Frame)>,
    ) -> Option<Deadline> {
        let Some(group) = self
            .groups
            .iter()
            .position(|(relays, _)| relays.is_empty() || relays.contains(&relay))
        else {
            out.push((relay, frame));
            return None;
        };
        let chunk = Chunk::new(logical_bytes(&frame.batch), frame.num_rows() as u64);
        let key = (group, frame.key.clone());
        let policy = self.groups[group].1;
        let (flusher, frames) = self
            .branches
            .entry(key.clone())
            .or_insert_with(|| (RouteFlusher::new(policy), Vec::new()));
        let actions = flusher.append(chunk, now);
        if actions.before.is_flush() {
            out.append(frames);
        }
        frames.push((relay, frame));
        if actions.after.is_flush() {
            out.append(frames);
        }
        let deadline = flusher.next_deadline();
        if frames.is_empty() {
            self.branches.remove(&key);
        }
        deadline
    }

    /// Hands over every branch whose interval ended.
    pub fn tick(&mut self, now: Now, out: &mut Vec<(RelayId, Frame)>) {
        self.branches.retain(|_, (flusher, frames)| {
            if flusher.tick(now).is_flush() {
                out.append(frames);
            }
            !frames.is_empty()
        });
    }

    /// Adopts new policies for the same groups (a dynamic ALTER of COLLECT FOR): each
    /// collection is evaluated against its group's new policy at `now`, and those found due or
    /// full are handed over. Returns false, changing nothing, when `groups` names other relays.
    pub fn set_policies(
        &mut self,
        groups: &[(Vec<RelayId>, FlushPolicy)],
        now: Now,
        out: &mut Vec<(RelayId, Frame)>,
    ) -> bool {
        let same_relays = groups.len() == self.groups.len()
            && groups
                .iter()
                .zip(&self.groups)
                .all(|((new, _), (old, _))| new == old);
        if !same_relays {
            return false;
        }
        self.groups = groups.to_vec();
        let groups = &self.groups;
        self.branches.retain(|(group, _), (flusher, frames)| {
            if flusher.set_policy(groups[*group].1, now).is_flush() {
                out.append(frames);
            }
            !frames.is_empty()
        });
        true
    }

    /// Hands over everything (or one branch's), as stop, shutdown and eviction need.
    pub fn force(&mut self, only: Option<&BranchKey>, out: &mut Vec<(RelayId, Frame)>) {
        self.branches.retain(|(_, key), (flusher, frames)| {
            if only.is_some_and(|k| k != key) {
                return true;
            }
            flusher.force_flush();
            out.append(frames);
            false
        });
    }

    /// The earliest logical deadline, ns.
    pub fn next_deadline(&self) -> Option<i64> {
        self.branches
            .values()
            .filter_map(|(flusher, _)| match flusher.next_deadline() {
                Some(Deadline::Logical(at)) => Some(at),
                _ => None,
            })
            .min()
    }

    /// Frames held.
    pub fn held_frames(&self) -> usize {
        self.branches.values().map(|(_, frames)| frames.len()).sum()
    }
}
