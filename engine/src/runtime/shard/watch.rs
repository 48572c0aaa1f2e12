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
//! out), and the watch is answered "refused" at once. A root resolves, or its source gives the
//! payload up after ACK TIMEOUT (the client is answered `ack_timeout`, Kafka reads the record
//! again) — which answers its watches refused — so every watch is answered once, and its entry
//! leaves the table when it is.
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

/// A shard's watches: the entries it asked about, and on shard 0 who waits for which root.
#[derive(Debug, Default)]
pub struct Watches {
    next_entry: u64,
    /// Shard 0: per watched root, `(shard, entry)` of every watch on it.
    by_root: HashMap<AckHandle, Vec<(usize, u64)>>,
    /// Shard 0: the watched root of each payload token. A source may open a second root for
    /// the same payload (Kafka reads an offset again after ACK TIMEOUT) while the first is
    /// still open; the first is then given up ([`Watches::given_up`]).
    root_of: HashMap<PayloadToken, AckHandle>,
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
            Some(token) => {
                self.by_root.entry(root).or_default().push((shard, entry));
                self.root_of.insert(token, root);
            }
            None => self.answer(outbox, shard, (entry, false)),
        }
    }

    /// Shard 0: `root` (of payload `token`) resolved; its watches are answered.
    pub fn resolved(
        &mut self,
        outbox: &mut Outbox,
        root: AckHandle,
        token: PayloadToken,
        acknowledged: bool,
    ) {
        if self.by_root.is_empty() {
            return;
        }
        let Some(waiting) = self.by_root.remove(&root) else {
            return;
        };
        if self.root_of.get(&token) == Some(&root) {
            self.root_of.remove(&token);
        }
        for (shard, entry) in waiting {
            self.answer(outbox, shard, (entry, acknowledged));
        }
    }

    /// Shard 0: the source gave payload `token` up while its root may still be open (it
    /// answered its client `ack_timeout`, or reads the payload again): its watches are
    /// answered refused, so a resend is not taken for a duplicate of rows that may never be
    /// acknowledged. Rows of the old root still delivered later are duplicates, which at
    /// least once allows.
    pub fn given_up(&mut self, outbox: &mut Outbox, token: PayloadToken) {
        if self.root_of.is_empty() {
            return;
        }
        let Some(root) = self.root_of.remove(&token) else {
            return;
        };
        for (shard, entry) in self.by_root.remove(&root).unwrap_or_default() {
            self.answer(outbox, shard, (entry, false));
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

    /// Roots watched and not yet resolved (shard 0).
    pub fn watched_roots(&self) -> usize {
        self.by_root.len()
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
        watches.resolved(&mut outbox, acked, token(1), true);
        watches.resolved(&mut outbox, refused, token(2), false);
        watches.resolved(&mut outbox, acked, token(1), true);
        assert_eq!(watches.ready, vec![(here, true)]);
        match outbox.queues[1].pop_front() {
            Some(MeshMsg::WatchOutcomes(outcomes)) => assert_eq!(outcomes, vec![(there, false)]),
            _ => panic!("no answer for shard 1"),
        }
        assert!(outbox.queues[1].is_empty());
        assert_eq!(watches.watched_roots(), 0);
    }

    /// A payload its source gave up (ack_timeout, or read again under a new root) answers its
    /// watches refused; the old root's later resolution answers nothing more, and a new
    /// root's watch is its own.
    #[test]
    fn a_payload_given_up_is_answered_refused_once() {
        let mut slab = AckSlab::new(4).expect("slab");
        let mut outbox = Outbox::new(1);
        let mut watches = Watches::default();
        let old = slab.open(token(1)).expect("root");
        let first = watches.next_entry();
        watches.register(&slab, &mut outbox, ROOT_SHARD, old, first);
        watches.given_up(&mut outbox, token(1));
        let new = slab.open(token(1)).expect("root");
        let second = watches.next_entry();
        watches.register(&slab, &mut outbox, ROOT_SHARD, new, second);
        watches.resolved(&mut outbox, old, token(1), true);
        watches.resolved(&mut outbox, new, token(1), true);
        assert_eq!(watches.ready, vec![(first, false), (second, true)]);
        assert_eq!(watches.watched_roots(), 0);
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
        assert_eq!(watches.watched_roots(), 0);
    }
}
