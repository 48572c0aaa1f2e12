//! Commit-after-acknowledgement bookkeeping of one Kafka consumer (spec: "Kafka" — "In an ACK
//! mode, Nervix commits a Kafka position only after its downstream acknowledgement
//! completes. If downstream work rejects a record, the ingestor seeks back to it").
//!
//! A pure state machine: the consumer loop reports records it admitted, resolutions of their
//! acknowledgement roots and rebalances; the tracker answers with the positions to commit and
//! the seeks to make. No I/O and no clock of its own (the caller passes physical instants), so
//! every rule is tested without a broker.
//!
//! # Why it is correct
//!
//! * Per partition, the records in flight are kept in ascending offset order. A record enters
//!   only above every record already there (offsets a consumer delivers grow; a delivery that
//!   goes back — a seek, a reassignment — first drops what lies at or above it), so the
//!   commit position is simply the first record not yet acknowledged: everything below it
//!   was acknowledged, and nothing at or above it is ever committed.
//! * A rejected record (negative acknowledgement, or ACK TIMEOUT without progress) drops every
//!   tracked record at or above it and asks for one seek back to it; until that seek is made,
//!   records the consumer still delivers from the partition are refused (they would be
//!   delivered again after the seek anyway), so the commit position never passes the
//!   rejected record.
//! * A resolution names its record by partition and offset. A resolution for a record that is
//!   no longer tracked (dropped by a rewind or a revocation) changes nothing; one that finds a
//!   record of the same offset delivered again is still true of that record's content — it
//!   was acknowledged (or rejected) on every route — so applying it is sound.
//! * A revoked partition is forgotten without a seek: whichever member gets it next resumes
//!   from the committed position, which never passes a rejected record.

use std::collections::VecDeque;

/// Where one tracked record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecordState {
    Pending,
    Acked,
}

/// One partition's records in flight and its positions.
#[derive(Debug, Default)]
struct PartitionOffsets {
    /// `(offset, state, admitted physical ns)`, ascending by offset.
    in_flight: VecDeque<(i64, RecordState, u64)>,
    /// The next offset everything below which was acknowledged (what a commit records).
    committable: Option<i64>,
    /// The position last handed out to commit.
    committed: Option<i64>,
    /// A rejected record's offset the consumer must seek back to before reading on.
    rewind: Option<i64>,
    /// Whether the rewind's seek was handed out and not yet confirmed.
    seek_issued: bool,
}

impl PartitionOffsets {
    /// Pops the acknowledged prefix, advancing the committable position.
    fn advance(&mut self) {
        while let Some(&(offset, RecordState::Acked, _)) = self.in_flight.front() {
            self.committable = Some(offset + 1);
            self.in_flight.pop_front();
        }
    }

    /// Drops every tracked record at or above `offset`; returns how many were pending.
    fn truncate_from(&mut self, offset: i64) -> usize {
        let keep = self.in_flight.partition_point(|&(o, _, _)| o < offset);
        let dropped = self.pending_from(keep);
        self.in_flight.truncate(keep);
        dropped
    }

    /// Pending records from position `start` on.
    fn pending_from(&self, start: usize) -> usize {
        self.in_flight
            .range(start..)
            .filter(|&&(_, state, _)| state == RecordState::Pending)
            .count()
    }

    fn position(&self, offset: i64) -> Option<usize> {
        // A partition's offsets are usually consecutive (gaps come only from compaction and
        // transaction markers), so the record sits `offset - first` places in: check there
        // first, search only when a gap moved it.
        let first = self.in_flight.front()?.0;
        let guess = usize::try_from(offset.checked_sub(first)?).ok()?;
        if self
            .in_flight
            .get(guess)
            .is_some_and(|&(o, _, _)| o == offset)
        {
            return Some(guess);
        }
        self.in_flight
            .binary_search_by_key(&offset, |&(o, _, _)| o)
            .ok()
    }
}

/// What the consumer must do for the tracker's partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetAction {
    /// Commit `next offset` for the partition.
    Commit(i32, i64),
    /// Seek the partition back to this offset.
    Seek(i32, i64),
}

/// The commit-after-acknowledgement bookkeeping of one consumer.
#[derive(Debug, Default)]
pub struct OffsetTracker {
    /// Partition number → offsets; a consumer holds few partitions, so a small vector.
    partitions: Vec<(i32, PartitionOffsets)>,
    /// Tracked records awaiting their acknowledgement (what an ACK window counts).
    pending: usize,
}

impl OffsetTracker {
    pub fn new() -> OffsetTracker {
        OffsetTracker::default()
    }

    fn partition(&mut self, partition: i32) -> &mut PartitionOffsets {
        let index = match self.partitions.iter().position(|(p, _)| *p == partition) {
            Some(index) => index,
            None => {
                self.partitions
                    .push((partition, PartitionOffsets::default()));
                self.partitions.len() - 1
            }
        };
        &mut self.partitions[index].1
    }

    /// Whether a record the consumer delivered may enter the graph: not while its partition
    /// waits to be rewound (it will be delivered again from the rewind).
    pub fn admissible(&self, partition: i32) -> bool {
        !self
            .partitions
            .iter()
            .any(|(p, offsets)| *p == partition && offsets.rewind.is_some())
    }

    /// A record entered the graph under an acknowledgement root at physical `now_ns`.
    pub fn admitted(&mut self, partition: i32, offset: i64, now_ns: u64) {
        let offsets = self.partition(partition);
        let mut dropped = 0;
        if offsets
            .in_flight
            .back()
            .is_some_and(|&(last, _, _)| last >= offset)
        {
            // The consumer went back (a seek or a reassignment we did not see): what lies at
            // or above this record is being delivered again.
            dropped = offsets.truncate_from(offset);
        }
        offsets
            .in_flight
            .push_back((offset, RecordState::Pending, now_ns));
        self.pending = self.pending + 1 - dropped;
    }

    /// The root of record `offset` of `partition` resolved.
    pub fn resolved(&mut self, partition: i32, offset: i64, acked: bool) {
        let offsets = self.partition(partition);
        let Some(position) = offsets.position(offset) else {
            return;
        };
        let was_pending = offsets.in_flight[position].1 == RecordState::Pending;
        let dropped = if acked {
            offsets.in_flight[position].1 = RecordState::Acked;
            offsets.advance();
            usize::from(was_pending)
        } else {
            Self::reject(offsets, offset)
        };
        self.pending -= dropped;
    }

    /// Rejects record `offset` and everything above it; returns how many were pending.
    fn reject(offsets: &mut PartitionOffsets, offset: i64) -> usize {
        let dropped = offsets.truncate_from(offset);
        if offsets.rewind.is_none_or(|rewind| offset < rewind) {
            offsets.rewind = Some(offset);
            offsets.seek_issued = false;
        }
        offsets.advance();
        dropped
    }

    /// Record `offset` was delivered but not taken (no room for it): the partition is read
    /// again from it, as after a rejection.
    pub fn rewind(&mut self, partition: i32, offset: i64) {
        let offsets = self.partition(partition);
        let dropped = Self::reject(offsets, offset);
        self.pending -= dropped;
    }

    /// Rejects the oldest pending record of every partition that has waited `timeout_ns` or
    /// longer (ACK TIMEOUT); returns how many were rejected.
    pub fn time_out(&mut self, now_ns: u64, timeout_ns: u64) -> usize {
        let mut rejected = 0;
        for (_, offsets) in &mut self.partitions {
            let oldest = offsets
                .in_flight
                .iter()
                .find(|&&(_, state, _)| state == RecordState::Pending)
                .copied();
            if let Some((offset, _, admitted_ns)) = oldest {
                if now_ns.saturating_sub(admitted_ns) >= timeout_ns {
                    self.pending -= Self::reject(offsets, offset);
                    rejected += 1;
                }
            }
        }
        rejected
    }

    /// Partitions taken from this consumer: forgotten without a seek.
    pub fn revoked(&mut self, partitions: &[i32]) {
        let pending = &mut self.pending;
        self.partitions.retain(|(p, offsets)| {
            let keep = !partitions.contains(p);
            if !keep {
                *pending -= offsets.pending_from(0);
            }
            keep
        });
    }

    /// Forgets every partition (the consumer left its group or was replaced).
    pub fn clear(&mut self) {
        self.partitions.clear();
        self.pending = 0;
    }

    /// Tracked records awaiting their acknowledgement.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Whether nothing awaits an acknowledgement, a seek or a commit.
    pub fn settled(&self) -> bool {
        self.pending == 0
            && self.partitions.iter().all(|(_, offsets)| {
                offsets.rewind.is_none() && offsets.committable == offsets.committed
            })
    }

    /// The seeks and commits due now, seeks first. A seek is handed out once until
    /// [`OffsetTracker::seek_done`] or [`OffsetTracker::seek_failed`] answers it.
    pub fn actions(&mut self, out: &mut Vec<OffsetAction>) {
        for (partition, offsets) in &mut self.partitions {
            if let (Some(rewind), false) = (offsets.rewind, offsets.seek_issued) {
                offsets.seek_issued = true;
                out.push(OffsetAction::Seek(*partition, rewind));
            }
        }
        for (partition, offsets) in &mut self.partitions {
            if offsets.committable != offsets.committed {
                if let Some(next) = offsets.committable {
                    offsets.committed = Some(next);
                    out.push(OffsetAction::Commit(*partition, next));
                }
            }
        }
    }

    /// The seek back of `partition` was made: the partition reads again from there.
    pub fn seek_done(&mut self, partition: i32, offset: i64) {
        let offsets = self.partition(partition);
        if offsets.rewind == Some(offset) {
            offsets.rewind = None;
            offsets.seek_issued = false;
        }
    }

    /// The seek back of `partition` failed: it is handed out again by the next
    /// [`OffsetTracker::actions`] (the caller waits before asking).
    pub fn seek_failed(&mut self, partition: i32) {
        self.partition(partition).seek_issued = false;
    }

    /// Records in flight (pending or acknowledged above a pending one), for DESCRIBE.
    pub fn in_flight(&self) -> usize {
        self.partitions
            .iter()
            .map(|(_, offsets)| offsets.in_flight.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actions(tracker: &mut OffsetTracker) -> Vec<OffsetAction> {
        let mut out = Vec::new();
        tracker.actions(&mut out);
        out
    }

    #[test]
    fn commits_only_the_acknowledged_prefix() {
        let mut t = OffsetTracker::new();
        for offset in 10..15 {
            t.admitted(0, offset, 0);
        }
        t.resolved(0, 11, true);
        t.resolved(0, 12, true);
        assert_eq!(actions(&mut t), vec![], "10 is still pending");
        t.resolved(0, 10, true);
        assert_eq!(actions(&mut t), vec![OffsetAction::Commit(0, 13)]);
        assert_eq!(actions(&mut t), vec![], "nothing new to commit");
        t.resolved(0, 14, true);
        t.resolved(0, 13, true);
        assert_eq!(actions(&mut t), vec![OffsetAction::Commit(0, 15)]);
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.pending(), 0);
    }

    #[test]
    fn resolutions_find_records_across_offset_gaps() {
        // Compaction or transaction markers leave gaps: 20 and 21 are missing, so record 22
        // is not at `22 - first`.
        let mut t = OffsetTracker::new();
        for offset in [17, 18, 19, 22, 23, 30] {
            t.admitted(0, offset, 0);
        }
        t.resolved(0, 16, true);
        t.resolved(0, 21, true);
        t.resolved(0, 31, true);
        assert_eq!(t.pending(), 6, "untracked offsets change nothing");
        for offset in [23, 30, 22, 18] {
            t.resolved(0, offset, true);
        }
        assert_eq!(t.pending(), 2);
        assert_eq!(actions(&mut t), vec![], "17 is still pending");
        t.resolved(0, 17, true);
        assert_eq!(actions(&mut t), vec![OffsetAction::Commit(0, 19)]);
        t.resolved(0, 19, true);
        assert_eq!(actions(&mut t), vec![OffsetAction::Commit(0, 31)]);
        assert_eq!(t.pending(), 0);
    }

    #[test]
    fn a_rejection_seeks_back_and_never_commits_past_it() {
        let mut t = OffsetTracker::new();
        for offset in 0..6 {
            t.admitted(3, offset, 0);
        }
        t.resolved(3, 0, true);
        t.resolved(3, 2, false);
        t.resolved(3, 1, true);
        // Acknowledgements of records above the rejected one change nothing.
        t.resolved(3, 4, true);
        assert_eq!(
            t.pending(),
            0,
            "records from the rejected one on are no longer awaited"
        );
        assert_eq!(
            actions(&mut t),
            vec![OffsetAction::Seek(3, 2), OffsetAction::Commit(3, 2)]
        );
        assert!(
            !t.admissible(3),
            "records before the seek would be delivered again"
        );
        assert_eq!(actions(&mut t), vec![], "the seek is handed out once");
        t.seek_done(3, 2);
        assert!(t.admissible(3));
        for offset in 2..4 {
            t.admitted(3, offset, 0);
            t.resolved(3, offset, true);
        }
        assert_eq!(actions(&mut t), vec![OffsetAction::Commit(3, 4)]);
    }

    #[test]
    fn a_failed_seek_is_handed_out_again() {
        let mut t = OffsetTracker::new();
        t.admitted(1, 7, 0);
        t.resolved(1, 7, false);
        assert_eq!(actions(&mut t), vec![OffsetAction::Seek(1, 7)]);
        t.seek_failed(1);
        assert_eq!(actions(&mut t), vec![OffsetAction::Seek(1, 7)]);
    }

    #[test]
    fn the_lowest_rejection_wins() {
        let mut t = OffsetTracker::new();
        for offset in 0..5 {
            t.admitted(0, offset, 0);
        }
        t.resolved(0, 3, false);
        t.resolved(0, 1, false);
        assert_eq!(actions(&mut t), vec![OffsetAction::Seek(0, 1)]);
    }

    #[test]
    fn revoked_partitions_are_forgotten_without_a_seek() {
        let mut t = OffsetTracker::new();
        t.admitted(0, 5, 0);
        t.admitted(1, 9, 0);
        t.resolved(0, 5, false);
        assert_eq!(t.pending(), 1, "only partition 1's record is awaited");
        t.revoked(&[0]);
        t.resolved(1, 9, true);
        assert_eq!(actions(&mut t), vec![OffsetAction::Commit(1, 10)]);
        assert!(t.admissible(0));
    }

    #[test]
    fn ack_timeout_rejects_the_oldest_pending_record() {
        let mut t = OffsetTracker::new();
        t.admitted(0, 0, 100);
        t.admitted(0, 1, 200);
        t.resolved(0, 0, true);
        assert_eq!(t.time_out(250, 100), 0, "offset 1 has waited 50 ns");
        assert_eq!(t.time_out(300, 100), 1);
        assert_eq!(
            actions(&mut t),
            vec![OffsetAction::Seek(0, 1), OffsetAction::Commit(0, 1)]
        );
    }

    #[test]
    fn a_delivery_that_goes_back_drops_what_lies_above_it() {
        let mut t = OffsetTracker::new();
        for offset in 0..4 {
            t.admitted(0, offset, 0);
        }
        t.admitted(0, 2, 0);
        t.resolved(0, 3, true);
        for offset in 0..3 {
            t.resolved(0, offset, true);
        }
        assert_eq!(actions(&mut t), vec![OffsetAction::Commit(0, 3)]);
    }
}
