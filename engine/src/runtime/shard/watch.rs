//! Payload outcomes a node asked to hear about: a deduplicator learns whether the payload of a
//! key's first row was acknowledged (the key may then be snapshotted) or refused (the key is
//! forgotten, so the source's redelivery passes).
//!
//! Every root lives on shard 0 (`mesh.rs`), so a node elsewhere registers its watch there as
//! an [`AckOp::Watch`](super::mesh::AckOp::Watch) and hears back in a
//! [`MeshMsg::WatchOutcomes`](super::mesh::MeshMsg::WatchOutcomes).
//!
//! Why no outcome is missed or wrong: a node watches a root while it holds units of that root
//! (the rows it is about to pass on), and its watch travels to shard 0 on the same FIFO channel
//! as — and ahead of — the transfer of those units. So when shard 0 registers the watch the
//! root cannot have resolved acknowledged; if it is no longer open it was refused (or timed
//! out), and the watch is answered "refused" at once. Every open root resolves (ACK TIMEOUT
//! bounds it), so every watch is answered exactly once: its entry leaves the table when it is.
//!
//! Bounded: a node watches at most once per (frame, root) it passes first sightings of, and a
//! deduplicator stops watching past [`MAX_WATCHED_ENTRIES`] unanswered entries (it refuses the
//! rows instead, and their sources redeliver).

use std::collections::HashMap;

use nervix_shards::ack::{AckHandle, AckSlab};

use super::graph::PayloadToken;
use super::mesh::{MeshMsg, Outbox, ROOT_SHARD};

/// Unanswered watches one deduplicator may hold on a shard.
pub const MAX_WATCHED_ENTRIES: usize = 1 << 20;

/// One watch's answer: its entry and whether the payload was acknowledged.
pub type WatchOutcome = (u64, bool);

/// A shard's watches: the entries it asked about, and on shard 0 who waits for which payload.
#[derive(Debug, Default)]
pub struct Watches {
    next_entry: u64,
    /// Shard 0: per watched payload, `(shard, entry)` of every watch on it.
    by_payload: HashMap<PayloadToken, Vec<(usize, u64)>>,
    /// Answers for this shard's nodes, not yet handed to them.
    pub ready: Vec<WatchOutcome>,
}

impl Watches {
    /// A new entry number, unique on this shard (entries of different shards never meet: an
    /// answer goes back to the shard that asked).
    pub fn next_entry(&mut self) -> u64 {
        self.next_entry += 1;
        self.next_entry
    }

    /// Shard 0: `shard` waits for `root`'s outcome under `entry`. A root no longer open was
    /// refused (see the module docs): answered at once.
    pub fn register(
        &mut self,
        slab: &AckSlab<PayloadToken>,
        outbox: &mut Outbox,
        shard: usize,
        root: AckHandle,
        entry: u64,
    ) {
        match slab.token(root) {
            Some(token) => self
                .by_payload
                .entry(token)
                .or_default()
                .push((shard, entry)),
            None => self.answer(outbox, shard, (entry, false)),
        }
    }

    /// Shard 0: `token`'s payload resolved; its watches are answered.
    pub fn resolved(&mut self, outbox: &mut Outbox, token: PayloadToken, acknowledged: bool) {
        if self.by_payload.is_empty() {
            return;
        }
        let Some(waiting) = self.by_payload.remove(&token) else {
            return;
        };
        for (shard, entry) in waiting {
            self.answer(outbox, shard, (entry, acknowledged));
        }
    }

    fn answer(&mut self, outbox: &mut Outbox, shard: usize, outcome: WatchOutcome) {
        if shard == ROOT_SHARD {
            self.ready.push(outcome);
            return;
        }
        let queue = &mut outbox.queues[shard];
        // Consecutive answers share one message.
        if let Some(MeshMsg::WatchOutcomes(outcomes)) = queue.back_mut() {
            outcomes.push(outcome);
        } else {
            queue.push_back(MeshMsg::WatchOutcomes(vec![outcome]));
        }
    }

    /// Payloads watched and not yet resolved (shard 0).
    pub fn watched_payloads(&self) -> usize {
        self.by_payload.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(batch_seq: u64) -> PayloadToken {
        PayloadToken {
            producer: 1,
            batch_seq,
        }
    }

    #[test]
    fn a_watch_is_answered_once_with_its_payloads_outcome() {
        let mut slab = AckSlab::new(4).expect("slab");
        let mut outbox = Outbox::new(2);
        let mut watches = Watches::default();
        let acked = slab.open(token(1)).expect("root");
        let refused = slab.open(token(2)).expect("root");
        let (here, there) = (watches.next_entry(), watches.next_entry());
        watches.register(&slab, &mut outbox, ROOT_SHARD, acked, here);
        watches.register(&slab, &mut outbox, 1, refused, there);
        watches.resolved(&mut outbox, token(1), true);
        watches.resolved(&mut outbox, token(2), false);
        watches.resolved(&mut outbox, token(1), true);
        assert_eq!(watches.ready, vec![(here, true)]);
        match outbox.queues[1].pop_front() {
            Some(MeshMsg::WatchOutcomes(outcomes)) => assert_eq!(outcomes, vec![(there, false)]),
            _ => panic!("no answer for shard 1"),
        }
        assert!(outbox.queues[1].is_empty());
        assert_eq!(watches.watched_payloads(), 0);
    }

    #[test]
    fn a_root_no_longer_open_is_answered_refused_at_once() {
        let mut slab = AckSlab::new(4).expect("slab");
        let mut outbox = Outbox::new(1);
        let mut watches = Watches::default();
        let root = slab.open(token(1)).expect("root");
        slab.nack(root).expect("nack");
        let entry = watches.next_entry();
        watches.register(&slab, &mut outbox, ROOT_SHARD, root, entry);
        assert_eq!(watches.ready, vec![(entry, false)]);
        assert_eq!(watches.watched_payloads(), 0);
    }
}
