//! Node work on whole batches: the working-message model of a route ([`route`]) and its split
//! into one group per outgoing branch ([`branch_groups`]), the error records of `ON MESSAGE
//! ERROR SEND TO` ([`error_record`]), and the branch-local state of the stateful processors: a
//! deduplicator's keyspace ([`dedup`]), a reorderer's ordering buffer ([`reorder`]), a window's
//! retained rows ([`window`]) and a correlator's pending rows ([`correlate`]), with the
//! snapshots of held rows ([`correlate_snapshot`], [`reorder_snapshot`], over
//! [`state_codec`]).

pub mod branch_groups;
pub mod correlate;
pub mod correlate_snapshot;
pub mod dedup;
pub mod error_record;
pub mod pending_rows;
pub mod reorder;
pub mod reorder_snapshot;
pub mod route;
pub mod state_codec;
pub mod window;

/// A seeded xorshift source for the randomized tests of this module's state: `next(bound)` is
/// in `0..bound`, the same sequence on every run.
#[cfg(test)]
pub(crate) fn test_random(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    }
}
