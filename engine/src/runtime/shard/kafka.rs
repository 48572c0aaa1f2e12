//! KAFKA TOPIC intakes on a shard (spec: "Kafka", "Delivery Modes"; DESIGN §5.1): records a
//! consumer task polled are decoded straight into the ingestor's open ingest group, each
//! record under its own acknowledgement root in an ACK mode, and the group enters the graph
//! when it closes.
//!
//! A record is one payload: ACK PARALLEL MAX n counts records, and a record is acknowledged
//! once every row decoded from it was acknowledged on every route it reached. Roots carry a
//! [`PayloadToken`] tagged [`KAFKA_TOKEN_TAG`] whose sequence packs the record's partition and
//! offset, so a resolution finds its record without a lookup table; the intake's
//! [`OffsetTracker`] turns resolutions into commits of the acknowledged prefix and seeks back
//! to rejected records.
//!
//! Groups close at [`INGEST_GROUP_MESSAGES`] records or rows, when the ACK window is full (no
//! more records could join), after BATCH TIMEOUT from the group's first record, or after
//! [`INGEST_GROUP_IDLE_NS`] without a record; ACK SEQUENTIAL closes after every record.
//! A record the codec refuses is reported (ON GENERAL ERROR LOG) and acknowledged: it decoded
//! into nothing, which every route has taken.

use std::sync::Arc;

use nervix_connectors::kafka::{KafkaConsumer, KafkaRecord};
use nervix_connectors::ConnectorError;

use super::endpoint::{INGEST_GROUP_IDLE_NS, INGEST_GROUP_MESSAGES};
use super::graph::{Instant, PayloadToken};
use super::mesh::Ctx;
use super::{cx, DomainRun, ShardCounters, ShardState};
use crate::runtime::envelope::EnvelopeBuilder;
use crate::runtime::frame::AckRun;
use crate::runtime::kafka::offsets::{OffsetAction, OffsetTracker};
use crate::runtime::plan::{IntakeDecoder, KafkaOffsets, KafkaSourcePlan};

/// Marks the payload tokens of Kafka records (client producers' ids never reach it).
pub const KAFKA_TOKEN_TAG: u64 = 1 << 63;
/// Bits of a token's sequence that hold the record's offset; the partition sits above them.
const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// The highest partition number a token can carry.
pub const MAX_PARTITION: i32 = (1 << (64 - OFFSET_BITS)) - 1;
/// OFFSET BY DOMAIN: how often changed next offsets are handed to the runtime-state writer
/// (also at a drain and when the intake goes).
pub const STATE_SNAPSHOT_INTERVAL_NS: u64 = 1_000_000_000;

/// What one Kafka consumer instance counted.
#[derive(Debug, Default, Clone, Copy)]
pub struct KafkaCounters {
    pub records: u64,
    pub rows_decoded: u64,
    pub decode_failures: u64,
    /// Records rejected downstream or timed out, each followed by a seek back.
    pub rejections: u64,
    pub commits: u64,
    pub seeks: u64,
}

/// One consumer instance of a KAFKA TOPIC ingestor on this shard.
pub struct KafkaIntake {
    pub plan: Arc<KafkaSourcePlan>,
    /// The ingestor's index in its graph.
    pub ingestor: usize,
    pub instance: u32,
    /// Unique on this shard: tags the intake's acknowledgement tokens.
    pub id: u64,
    decoder: IntakeDecoder,
    /// Record headers and partition/offset per row, when the ingestor's programs read them.
    envelope: Option<EnvelopeBuilder>,
    /// The open group's records' roots, in row order.
    acks: Vec<AckRun>,
    group_records: usize,
    /// Physical instants of the open group's first and latest record (0: no open group).
    group_opened_ns: u64,
    last_record_ns: u64,
    pub tracker: OffsetTracker,
    /// RETRY POLICY: the wait before reading a rejected partition again, doubling to MAX.
    backoff_ms: u64,
    paused_until_ns: u64,
    /// OFFSET BY DOMAIN: the next offsets acknowledged so far, by partition, whether they
    /// changed since they were last handed to the runtime-state writer, and when that was.
    domain_offsets: Vec<(i32, i64)>,
    domain_dirty: bool,
    persisted_ns: u64,
    pub counters: KafkaCounters,
}

impl KafkaIntake {
    /// `uses_envelope`: whether the ingestor reads headers or `metadata.` (else none is built).
    pub fn new(
        plan: Arc<KafkaSourcePlan>,
        ingestor: usize,
        instance: u32,
        id: u64,
        uses_envelope: bool,
    ) -> Self {
        KafkaIntake {
            decoder: plan.codec.decoder(),
            envelope: uses_envelope.then(EnvelopeBuilder::new),
            backoff_ms: plan.ack.map_or(0, |ack| ack.retry_backoff_ms),
            plan,
            ingestor,
            instance,
            id,
            acks: Vec::new(),
            group_records: 0,
            group_opened_ns: 0,
            last_record_ns: 0,
            tracker: OffsetTracker::new(),
            paused_until_ns: 0,
            domain_offsets: Vec::new(),
            domain_dirty: false,
            persisted_ns: 0,
            counters: KafkaCounters::default(),
        }
    }

    /// Records the ACK window still admits (`usize::MAX` under NO ACK).
    fn window_room(&self) -> usize {
        match self.plan.ack {
            None => usize::MAX,
            Some(ack) => (ack.max_outstanding as usize).saturating_sub(self.tracker.pending()),
        }
    }

    /// ACK modes: rejects records past their ACK TIMEOUT and appends the seeks and commits
    /// due; OFFSET BY DOMAIN keeps its commits in `domain_offsets` instead. A seek starts the
    /// RETRY POLICY backoff; a commit resets it.
    fn offset_actions(&mut self, now_ns: u64, actions: &mut Vec<OffsetAction>) {
        let Some(ack) = self.plan.ack else {
            // MODE NO ACK tracks nothing but the rewinds of records it could not take.
            let before = actions.len();
            self.tracker.actions(actions);
            self.counters.seeks += (actions.len() - before) as u64;
            return;
        };
        self.counters.rejections += self.tracker.time_out(now_ns, ack.ack_timeout_ns) as u64;
        let before = actions.len();
        self.tracker.actions(actions);
        let (mut seeks, mut commits) = (0, 0);
        let domain = matches!(self.plan.offsets, KafkaOffsets::Domain { .. });
        let mut index = before;
        while index < actions.len() {
            match actions[index] {
                OffsetAction::Seek(..) => {
                    seeks += 1;
                    index += 1;
                }
                OffsetAction::Commit(partition, next) if domain => {
                    // The runtime state keeps the positions: the commit stays here.
                    actions.remove(index);
                    commits += 1;
                    self.record_domain_offset(partition, next);
                }
                OffsetAction::Commit(..) => {
                    commits += 1;
                    index += 1;
                }
            }
        }
        self.counters.seeks += seeks;
        self.counters.commits += commits;
        if seeks > 0 {
            // Read the rejected partitions again after BACKOFF, doubling up to MAX.
            self.paused_until_ns = now_ns + self.backoff_ms * 1_000_000;
            self.backoff_ms = (self.backoff_ms * 2)
                .min(ack.retry_max_ms.max(ack.retry_backoff_ms))
                .max(1);
        } else if commits > 0 {
            self.backoff_ms = ack.retry_backoff_ms;
        }
    }

    /// OFFSET BY DOMAIN: `partition`'s next offset is `next`.
    fn record_domain_offset(&mut self, partition: i32, next: i64) {
        self.domain_dirty = true;
        match self
            .domain_offsets
            .iter_mut()
            .find(|(p, _)| *p == partition)
        {
            Some(slot) => slot.1 = next,
            None => self.domain_offsets.push((partition, next)),
        }
    }

    /// Whether the open group must enter the graph now.
    fn group_due(&self, now_ns: u64) -> bool {
        if self.group_opened_ns == 0 {
            return false;
        }
        let full = self.group_records >= INGEST_GROUP_MESSAGES
            || self.decoder.buffered_rows() >= INGEST_GROUP_MESSAGES
            || self.window_room() == 0;
        let idle = now_ns.saturating_sub(self.last_record_ns) >= INGEST_GROUP_IDLE_NS;
        let timed_out = self
            .plan
            .ack
            .is_some_and(|ack| now_ns.saturating_sub(self.group_opened_ns) >= ack.batch_timeout_ns);
        full || idle || timed_out
    }
}

/// Which consumer instance a task feeds.
#[derive(Debug, Clone)]
pub struct KafkaTarget {
    pub domain: String,
    pub id: u64,
}

/// What a consumer task may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaRoom {
    /// The intake is gone (its domain stopped or its graph was replaced): end.
    Gone,
    /// Admission is closed (a hold or a quiesce): read nothing.
    Closed,
    /// At most this many records may be taken now (0: wait).
    Records(usize),
}

fn token_of(id: u64, partition: i32, offset: i64) -> Option<PayloadToken> {
    let partition = u64::try_from(partition).ok()?;
    let offset = u64::try_from(offset).ok()?;
    (partition <= MAX_PARTITION as u64 && offset <= OFFSET_MASK).then_some(PayloadToken {
        producer: KAFKA_TOKEN_TAG | id,
        batch_seq: partition << OFFSET_BITS | offset,
    })
}

impl ShardState {
    fn kafka_intake_mut(&mut self, target: &KafkaTarget) -> Option<&mut KafkaIntake> {
        self.runs
            .get_mut(&target.domain)?
            .kafka
            .iter_mut()
            .find(|intake| intake.id == target.id)
    }

    /// How many records the consumer of `target` may hand over now.
    pub fn kafka_room(&self, target: &KafkaTarget) -> KafkaRoom {
        let Some(run) = self.runs.get(&target.domain) else {
            return KafkaRoom::Gone;
        };
        let Some(intake) = run.kafka.iter().find(|intake| intake.id == target.id) else {
            return KafkaRoom::Gone;
        };
        if !run.admission.get(intake.ingestor).is_some_and(|a| a.open) {
            return KafkaRoom::Closed;
        }
        let now_ns = crate::runtime::clock::physical_ns();
        if self.draining
            || !run.graph.ingestor_ready(intake.ingestor)
            || now_ns < intake.paused_until_ns
        {
            return KafkaRoom::Records(0);
        }
        let slab_room = (self.slab.capacity_roots() - self.slab.open_roots()) as usize;
        let group_room = INGEST_GROUP_MESSAGES.saturating_sub(intake.group_records);
        let room = intake.window_room().min(group_room);
        KafkaRoom::Records(if intake.plan.ack.is_some() {
            room.min(slab_room)
        } else {
            room
        })
    }

    /// Polls at most `max` records of `consumer` into the open group of `target`; returns how
    /// many were polled. The clocks are read once for the whole poll: its records count as
    /// taken at the poll's instant. The intake is looked up once per poll, not per record.
    pub fn kafka_poll(
        &mut self,
        target: &KafkaTarget,
        consumer: &mut KafkaConsumer,
        max: usize,
    ) -> Result<usize, ConnectorError> {
        let at = self.instant();
        let ShardState {
            shard,
            shards,
            outbox,
            progressed,
            runs,
            slab,
            counters,
            draining,
            watches,
            ..
        } = self;
        let Some(run) = runs.get_mut(&target.domain) else {
            return Ok(0);
        };
        let Some(index) = run.kafka.iter().position(|i| i.id == target.id) else {
            return Ok(0);
        };
        let mut take = Take {
            cx: Ctx {
                shard: *shard,
                shards: *shards,
                slab,
                outbox,
                progressed,
                watches,
            },
            counters,
            draining: *draining,
            domain: &target.domain,
            at,
        };
        consumer.poll_batch(max, |record| take.record(run, index, &record))
    }

    /// Hands the open group of intake `id` to its graph.
    fn close_kafka_group(&mut self, domain: &str, id: u64, at: Instant) {
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let Some(index) = run.kafka.iter().position(|i| i.id == id) else {
            return;
        };
        close_group(run, index, &mut self.counters, cx!(self), at);
    }

    /// Closes every open Kafka group of `domain` (a hold, a stop or a drain).
    pub fn close_kafka_groups(&mut self, domain: &str) {
        let at = self.instant();
        let ids: Vec<u64> = self
            .runs
            .get(domain)
            .map(|run| run.kafka.iter().map(|i| i.id).collect())
            .unwrap_or_default();
        for id in ids {
            self.close_kafka_group(domain, id, at);
        }
    }

    /// After a poll: partitions the group took away are forgotten, a due group enters the
    /// graph, records past their ACK TIMEOUT are rejected, and the commits and seeks due are
    /// appended to `actions`.
    pub fn kafka_after_poll(
        &mut self,
        target: &KafkaTarget,
        revoked: &[i32],
        actions: &mut Vec<OffsetAction>,
    ) {
        let at = self.instant();
        let now_ns = at.now.physical_ns;
        let due = {
            let Some(intake) = self.kafka_intake_mut(target) else {
                return;
            };
            intake.tracker.revoked(revoked);
            intake.group_due(now_ns)
        };
        if due {
            self.close_kafka_group(&target.domain, target.id, at);
        }
        self.step();
        let held = self.kafka_room(target) == KafkaRoom::Closed;
        if let Some(intake) = self.kafka_intake_mut(target) {
            intake.offset_actions(now_ns, actions);
            // A hold (or a drain) waits for the positions: hand them over at once.
            let due = now_ns.saturating_sub(intake.persisted_ns) >= STATE_SNAPSHOT_INTERVAL_NS;
            if due || held || self.draining {
                self.persist_kafka_offsets(&target.domain, Some(target.id));
            }
        }
    }

    /// Hands changed OFFSET BY DOMAIN positions of `domain`'s intakes to the runtime-state
    /// writer: intake `only`'s (a full writer queue leaves them changed for the next time), or
    /// every intake's as the domain stops (waiting for room in the queue).
    pub fn persist_kafka_offsets(&mut self, domain: &str, only: Option<u64>) {
        let now_ns = crate::runtime::clock::physical_ns();
        let Some(state) = self.runtime_state.clone() else {
            return;
        };
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        for intake in &mut run.kafka {
            if only.is_some_and(|id| id != intake.id) || !intake.domain_dirty {
                continue;
            }
            if let KafkaOffsets::Domain { key } = &intake.plan.offsets {
                let positions = intake.domain_offsets.clone();
                // A stop waits for room in the writer's queue: its last offsets are not
                // dropped for a writer that is behind. A periodic snapshot is offered again.
                let saved = match only {
                    Some(_) => state.save_kafka_offsets(key, positions),
                    None => state
                        .save_kafka_offsets_waiting(key, positions)
                        .inspect_err(|error| {
                            tracing::error!(%domain, %error, "cannot persist Kafka offsets at stop")
                        })
                        .is_ok(),
                };
                if saved {
                    intake.domain_dirty = false;
                    intake.persisted_ns = now_ns;
                }
            }
        }
    }

    /// The consumer made (or failed to make) a seek the tracker asked for.
    pub fn kafka_seeked(&mut self, target: &KafkaTarget, partition: i32, offset: i64, ok: bool) {
        if let Some(intake) = self.kafka_intake_mut(target) {
            if ok {
                intake.tracker.seek_done(partition, offset);
            } else {
                intake.tracker.seek_failed(partition);
            }
        }
    }

    /// A Kafka record's root resolved.
    pub(super) fn kafka_resolved(&mut self, token: PayloadToken, acked: bool) {
        let id = token.producer & !KAFKA_TOKEN_TAG;
        let partition = (token.batch_seq >> OFFSET_BITS) as i32;
        let offset = (token.batch_seq & OFFSET_MASK) as i64;
        for run in self.runs.values_mut() {
            if let Some(intake) = run.kafka.iter_mut().find(|i| i.id == id) {
                if !acked {
                    intake.counters.rejections += 1;
                }
                intake.tracker.resolved(partition, offset, acked);
                return;
            }
        }
    }

    /// Whether `domain`'s Kafka intakes have committed (or handed to the runtime state) all
    /// they acknowledged and await no acknowledgement.
    pub fn kafka_domain_settled(&self, domain: &str) -> bool {
        self.runs.get(domain).is_none_or(|run| {
            run.kafka
                .iter()
                .all(|i| i.tracker.settled() && !i.domain_dirty)
        })
    }

    /// Whether every Kafka intake of every domain has committed (or handed to the runtime
    /// state) all it acknowledged.
    pub fn kafka_settled(&self) -> bool {
        self.runs
            .keys()
            .all(|domain| self.kafka_domain_settled(domain))
    }
}

/// What taking polled records needs of the shard besides the intake's domain run (borrowed
/// apart from it, so a poll resolves the run and the intake once).
struct Take<'a> {
    cx: Ctx<'a>,
    counters: &'a mut ShardCounters,
    draining: bool,
    domain: &'a str,
    at: Instant,
}

impl Take<'_> {
    /// Decodes one polled record into the open group of intake `index` of `run`. A record
    /// that cannot be admitted now (no window or slab room, or its partition waits to be
    /// rewound) is not taken: its partition is rewound to it, so it is read again.
    fn record(&mut self, run: &mut DomainRun, index: usize, record: &KafkaRecord<'_>) {
        let now_ns = self.at.now.physical_ns;
        let intake = &mut run.kafka[index];
        let (partition, offset) = (record.partition, record.offset);
        if !intake.tracker.admissible(partition) {
            return;
        }
        let open = run.admission.get(intake.ingestor).is_some_and(|a| a.open);
        if !open || self.draining || intake.window_room() == 0 {
            // Delivered while nothing may be taken (a paused consumer's straggler): read it
            // again later.
            intake.tracker.rewind(partition, offset);
            return;
        }
        let root = match intake.plan.ack {
            None => None,
            Some(_) => {
                let token = token_of(intake.id, partition, offset);
                if let Some(token) = token {
                    // Read again (after ACK TIMEOUT, a rewind, a reassignment): the first
                    // read's root, if still open, is given up.
                    self.cx.watches.given_up(self.cx.outbox, token);
                }
                let opened = token
                    .filter(|_| intake.window_room() > 0)
                    .and_then(|token| self.cx.slab.open(token).ok());
                match opened {
                    Some(root) => Some(root),
                    None => {
                        // Taken beyond the window (a poll raced a full window) or beyond what
                        // a token carries: read it again later.
                        intake.tracker.rewind(partition, offset);
                        return;
                    }
                }
            }
        };
        if let Some(envelope) = intake.envelope.as_mut() {
            envelope.begin_payload();
            for header in record.headers.iter() {
                envelope.push_header(header.name.as_bytes(), header.value.unwrap_or_default());
            }
        }
        let decoded = intake.decoder.decode_payload(record.payload);
        if let Some(envelope) = intake.envelope.as_mut() {
            match &decoded {
                Ok(rows) => envelope.end_payload(*rows, Some((partition, offset))),
                Err(_) => envelope.abandon_payload(),
            }
        }
        let rows = match decoded {
            Ok(rows) => rows,
            Err(error) => {
                intake.counters.decode_failures += 1;
                let ingestor = &run.graph.plan.ingestors[intake.ingestor];
                if ingestor.general_error == nervix_nspl::ast::GeneralErrorPolicy::Log {
                    tracing::warn!(
                        "domain '{}': ingestor '{}' could not decode record {offset} of \
                         partition {partition} ({} bytes): {error}",
                        self.domain,
                        ingestor.name,
                        record.payload.len()
                    );
                }
                0
            }
        };
        intake.counters.records += 1;
        intake.counters.rows_decoded += u64::from(rows);
        if intake.group_opened_ns == 0 {
            intake.group_opened_ns = now_ns.max(1);
        }
        intake.last_record_ns = now_ns.max(1);
        intake.group_records += 1;
        if root.is_none() && matches!(intake.plan.offsets, KafkaOffsets::Domain { .. }) {
            // MODE NO ACK under OFFSET BY DOMAIN: a position counts once it is read.
            intake.record_domain_offset(partition, offset + 1);
        }
        if let Some(root) = root {
            intake.tracker.admitted(partition, offset, now_ns);
            let _ = self.cx.slab.add_pending(root, u64::from(rows));
            let _ = self.cx.slab.close_intake(root);
            if rows > 0 {
                intake.acks.push(AckRun { root, rows });
            }
        }
        let sequential = intake.plan.ack.is_some_and(|ack| ack.max_outstanding == 1);
        if sequential || intake.group_due(now_ns) {
            close_group(run, index, self.counters, &mut self.cx, self.at);
        }
    }
}

/// Hands the open group of intake `index` of `run` to its graph.
fn close_group(
    run: &mut DomainRun,
    index: usize,
    counters: &mut ShardCounters,
    cx: &mut Ctx<'_>,
    at: Instant,
) {
    let intake = &mut run.kafka[index];
    intake.group_opened_ns = 0;
    intake.last_record_ns = 0;
    intake.group_records = 0;
    let acks = std::mem::take(&mut intake.acks);
    if intake.decoder.buffered_rows() == 0 {
        return;
    }
    let batch = intake.decoder.finish();
    let envelope = intake.envelope.as_mut().map(EnvelopeBuilder::finish);
    let ingestor = intake.ingestor;
    counters.rows_admitted += batch.num_rows() as u64;
    counters.bytes_admitted += crate::runtime::logical_bytes::logical_bytes(&batch);
    run.graph.ingest(ingestor, &batch, acks, envelope, at, cx);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_partition_and_offset() {
        let token = token_of(7, 12, 123_456_789).expect("in range");
        assert_eq!(token.producer, KAFKA_TOKEN_TAG | 7);
        assert_eq!((token.batch_seq >> OFFSET_BITS) as i32, 12);
        assert_eq!((token.batch_seq & OFFSET_MASK) as i64, 123_456_789);
        assert!(token_of(7, -1, 0).is_none());
        assert!(token_of(7, MAX_PARTITION + 1, 0).is_none());
        assert!(token_of(7, 0, 1 << OFFSET_BITS).is_none());
    }
}
