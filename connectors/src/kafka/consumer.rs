//! [`KafkaConsumer`]: the non-blocking consumer a KAFKA TOPIC ingestor polls from its shard.
//!
//! Owns the consumer half: group or assigned mode, zero-timeout polling with borrowed record
//! views, rebalance and commit-error bookkeeping, asynchronous commits, seeks, pause/resume and
//! leaving/rejoining the group on quiesce.
//!
//! Records of assigned partitions are read many per call from a queue of their own
//! ([`super::fetch`]); events stay on the consumer queue.
//!
//! Why it is correct on a glommio shard: [`KafkaConsumer::poll_batch`] only calls librdkafka's
//! `poll` and batch consume with a zero timeout, and every other hot-path method hands a request to librdkafka's
//! own threads without waiting for a broker (asynchronous commit, seek with a zero timeout,
//! assign, pause, resume, subscribe, unsubscribe). Rebalance and commit callbacks run inside
//! `poll`, on the calling thread, and only append to lists the caller drains afterwards, so the
//! engine sees every assignment change between two polls and can drop the in-flight positions of
//! revoked partitions (the spec: no seek after a rebalance moved the partition). Methods that
//! wait for a broker say **BLOCKING** and take a timeout.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

use super::fetch::{FetchQueue, Fetched};
use super::headers::KafkaHeaders;
use super::{classify, client_config, creation_error};
use crate::ConnectorError;

/// librdkafka settings Nervix changes only when the client CONFIG does not name them.
///
/// `fetch.queue.backoff.ms`: when its local queue reaches `queued.min.messages` or
/// `queued.max.messages.kbytes`, librdkafka waits this long (default 1,000 ms) before fetching
/// that partition again. A shard drains the queue within a millisecond, so the default leaves
/// the consumer idle for most of every second under load (measured: ~140 k records/s with it,
/// ~300–400 k with 1 ms on the same run; perf/RESULTS.md).
pub const CONSUMER_DEFAULTS: &[(&str, &str)] = &[("fetch.queue.backoff.ms", "1")];

/// Most non-message events (rebalances, commit results, errors, partition EOFs) one
/// [`KafkaConsumer::poll_batch`] serves before returning, so a storm of events cannot keep a
/// shard inside one call.
const MAX_EVENTS_PER_BATCH: usize = 64;

/// Most unread commit errors kept; older ones are dropped first (the newest say most about
/// the current state, and an engine that never drains must not grow without bound).
const MAX_PENDING_COMMIT_ERRORS: usize = 256;

/// The prefix of the group id librdkafka needs in [`ConsumerGroup::Assigned`] mode.
pub const ASSIGNED_GROUP_PREFIX: &str = "nervix-domain-";
/// The longest a closing consumer serves its revocation before librdkafka closes it.
pub const CLOSE_LEAVE_MS: u64 = 5_000;
/// How often a closing consumer looks at its assignment.
const CLOSE_LEAVE_POLL_MS: u64 = 5;

/// How offsets are owned (the spec's OFFSET BY CONSUMER GROUP / OFFSET BY DOMAIN).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerGroup {
    /// Subscribe as a member of this group: Kafka assigns partitions and stores offsets.
    Named(String),
    /// No group management: the caller assigns partitions with explicit offsets
    /// ([`KafkaConsumer::assign`]). librdkafka still needs a group id for some operations; it
    /// is `nervix-domain-<topic>` and never joins a group.
    Assigned,
}

/// A change of the partitions this consumer owns, reported after the poll that served it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebalanceEvent {
    /// These partitions were added (eager protocol: the whole new assignment).
    Assigned(Vec<i32>),
    /// These partitions were taken away (eager protocol: the whole old assignment); in-flight
    /// positions of them must not be committed or sought any more.
    Revoked(Vec<i32>),
}

/// One consumed record, borrowed from librdkafka for the duration of the callback.
#[derive(Debug, Clone, Copy)]
pub struct KafkaRecord<'a> {
    pub partition: i32,
    pub offset: i64,
    /// The value; empty for a null (tombstone) value.
    pub payload: &'a [u8],
    pub key: Option<&'a [u8]>,
    /// Create or log-append time, when the broker reports one.
    pub timestamp_ms: Option<i64>,
    /// The record's headers in record order.
    pub headers: KafkaHeaders<'a>,
}

/// What the callbacks collected since the caller last drained them.
#[derive(Default)]
struct Collected {
    rebalances: Vec<RebalanceEvent>,
    /// Partitions assigned since the last poll whose records must be forwarded to the fetch
    /// queue (librdkafka forgets a forwarding when it stops fetching a partition).
    to_forward: Vec<i32>,
    commit_errors: Vec<String>,
    /// The latest non-fatal client error (transport, unknown topic…), for DESCRIBE INGESTOR.
    error: Option<ConnectorError>,
}

/// The librdkafka context: callbacks run inside `poll` on the polling thread and only record.
struct Context {
    topic: String,
    collected: Mutex<Collected>,
    /// Counts served callbacks, to tell an event rdkafka consumed (poll returns `None`) from an
    /// empty queue.
    served: AtomicU64,
}

impl Context {
    fn collected(&self) -> MutexGuard<'_, Collected> {
        // The lists stay valid whatever a panicking holder did: they are only appended to.
        self.collected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn partitions_of(&self, list: &TopicPartitionList) -> Vec<i32> {
        list.elements_for_topic(&self.topic)
            .iter()
            .map(|element| element.partition())
            .collect()
    }
}

impl ClientContext for Context {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(topic = %self.topic, "kafka consumer error: {error}: {reason}");
        self.collected().error = Some(classify("consumer", &error));
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, _: &BaseConsumer<Context>, rebalance: &Rebalance<'_>) {
        self.served.fetch_add(1, Ordering::Relaxed);
        match rebalance {
            Rebalance::Revoke(list) => {
                let partitions = self.partitions_of(list);
                self.collected()
                    .rebalances
                    .push(RebalanceEvent::Revoked(partitions));
            }
            Rebalance::Assign(_) => {}
            Rebalance::Error(error) => {
                tracing::warn!(topic = %self.topic, "kafka rebalance error: {error}");
                self.collected().error = Some(classify("rebalance", error));
            }
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Context>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(list) = rebalance {
            let partitions = self.partitions_of(list);
            let mut collected = self.collected();
            collected.to_forward.extend_from_slice(&partitions);
            collected
                .rebalances
                .push(RebalanceEvent::Assigned(partitions));
        }
    }

    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        self.served.fetch_add(1, Ordering::Relaxed);
        let mut failures = Vec::new();
        if let Err(error) = result {
            // No offsets to commit is not a failure of anything the caller asked for.
            if error.rdkafka_error_code() != Some(rdkafka::types::RDKafkaErrorCode::NoOffset) {
                failures.push(format!("kafka commit failed: {error}"));
            }
        }
        for element in offsets.elements() {
            if let Err(error) = element.error() {
                failures.push(format!(
                    "kafka commit of {}[{}] failed: {error}",
                    element.topic(),
                    element.partition()
                ));
            }
        }
        if failures.is_empty() {
            return;
        }
        let mut collected = self.collected();
        for failure in failures {
            if collected.commit_errors.len() >= MAX_PENDING_COMMIT_ERRORS {
                collected.commit_errors.remove(0);
            }
            collected.commit_errors.push(failure);
        }
    }
}

/// A Kafka consumer of one topic, driven by zero-timeout polls.
///
/// Dropping it closes the consumer, which **BLOCKS** while it leaves the group (see
/// [`KafkaConsumer::close`]).
pub struct KafkaConsumer {
    /// Where the assigned partitions' records are read from (`None`: librdkafka could not make
    /// the queue, and records stay on the consumer queue). Declared before `consumer`, so it
    /// is destroyed before the client it belongs to.
    fetch: Option<FetchQueue>,
    consumer: BaseConsumer<Context>,
    topic: String,
    group: ConsumerGroup,
}

impl Drop for KafkaConsumer {
    fn drop(&mut self) {
        self.leave_group();
    }
}

impl KafkaConsumer {
    /// Creates the consumer; in [`ConsumerGroup::Named`] mode it also subscribes to `topic`.
    ///
    /// `config` is passed to librdkafka unchanged (it must name `bootstrap.servers`), except
    /// these keys, which the mode requires and which win over the user's:
    /// - `group.id`: the named group, or `nervix-domain-<topic>` in assigned mode;
    /// - `enable.auto.commit`: `auto_commit` (always `false` in assigned mode);
    /// - `enable.auto.offset.store`: `false` when offsets are committed by the caller (named
    ///   mode without auto-commit, and assigned mode), so only [`KafkaConsumer::commit`] moves
    ///   them.
    ///
    /// `auto.offset.reset` is never set (the spec: the user decides); [`CONSUMER_DEFAULTS`] apply
    /// only where the CONFIG names no value.
    pub fn new(
        config: &[(String, String)],
        group: ConsumerGroup,
        topic: &str,
        auto_commit: bool,
    ) -> Result<KafkaConsumer, ConnectorError> {
        if topic.is_empty() {
            return Err(ConnectorError::config("TOPIC", "must not be empty"));
        }
        let has_brokers = config.iter().any(|(key, _)| {
            matches!(
                key.as_str(),
                "bootstrap.servers" | "metadata.broker.list" | "test.mock.num.brokers"
            )
        });
        if !has_brokers {
            return Err(ConnectorError::config(
                "bootstrap.servers",
                "is required for a Kafka client",
            ));
        }
        let group_id = match &group {
            ConsumerGroup::Named(name) if name.is_empty() => {
                return Err(ConnectorError::config(
                    "CONSUMER GROUP",
                    "must not be empty",
                ))
            }
            ConsumerGroup::Named(name) => name.clone(),
            ConsumerGroup::Assigned => format!("{ASSIGNED_GROUP_PREFIX}{topic}"),
        };
        let auto_commit = auto_commit && matches!(group, ConsumerGroup::Named(_));
        let mut required = vec![
            ("group.id", group_id.as_str()),
            (
                "enable.auto.commit",
                if auto_commit { "true" } else { "false" },
            ),
        ];
        if !auto_commit {
            required.push(("enable.auto.offset.store", "false"));
        }
        let context = Context {
            topic: topic.to_string(),
            collected: Mutex::new(Collected::default()),
            served: AtomicU64::new(0),
        };
        let mut config = client_config(config, &required);
        for (key, value) in CONSUMER_DEFAULTS {
            if config.get(key).is_none() {
                config.set(*key, *value);
            }
        }
        let consumer: BaseConsumer<Context> = config
            .create_with_context(context)
            .map_err(|error| creation_error(&error))?;
        if matches!(group, ConsumerGroup::Named(_)) {
            consumer
                .subscribe(&[topic])
                .map_err(|error| classify("subscribe", &error))?;
        }
        let fetch = FetchQueue::new(consumer.client().native_ptr(), topic);
        Ok(KafkaConsumer {
            fetch,
            consumer,
            topic: topic.to_string(),
            group,
        })
    }

    /// The topic this consumer reads.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Polls with a zero timeout until `max_records` records were handed to `each` or no more
    /// are ready; returns how many were. Rebalance and commit callbacks run inside (drain them
    /// with [`KafkaConsumer::take_rebalance_events`] and
    /// [`KafkaConsumer::take_commit_errors`] afterwards). Partition EOFs are skipped; other
    /// non-fatal errors are logged and kept for [`KafkaConsumer::take_error`]. A fatal
    /// consumer error returns `Err` (permanent: the consumer must be recreated).
    ///
    /// Call it regularly even while paused or quiescing: librdkafka serves group membership
    /// (rebalances, leaving the group) only through these polls.
    pub fn poll_batch(
        &mut self,
        max_records: usize,
        mut each: impl FnMut(KafkaRecord<'_>),
    ) -> Result<usize, ConnectorError> {
        let mut delivered = 0;
        let mut events = 0;
        // The consumer queue first: events, and records of partitions not forwarded yet, which
        // precede anything of theirs on the fetch queue.
        let mut drained = false;
        while delivered < max_records && events < MAX_EVENTS_PER_BATCH {
            let served_before = self.consumer.context().served.load(Ordering::Relaxed);
            match self.consumer.poll(Duration::ZERO) {
                Some(Ok(message)) => {
                    let record = KafkaRecord {
                        partition: message.partition(),
                        offset: message.offset(),
                        payload: message.payload().unwrap_or(&[]),
                        key: message.key(),
                        timestamp_ms: message.timestamp().to_millis(),
                        headers: KafkaHeaders::of(&message),
                    };
                    each(record);
                    delivered += 1;
                }
                Some(Err(KafkaError::PartitionEOF(_))) => events += 1,
                Some(Err(error)) => {
                    events += 1;
                    self.consumer_error(&error)?;
                }
                None => {
                    let served = self.consumer.context().served.load(Ordering::Relaxed);
                    if served == served_before {
                        drained = true;
                        break;
                    }
                    events += 1;
                }
            }
        }
        self.forward_assigned();
        let Some(fetch) = self.fetch.as_mut().filter(|_| drained) else {
            return Ok(delivered);
        };
        let mut error = None;
        while delivered < max_records && events < MAX_EVENTS_PER_BATCH {
            let taken = fetch.consume(max_records - delivered, |fetched| match fetched {
                Fetched::Record(record) => {
                    each(record);
                    delivered += 1;
                }
                Fetched::PartitionEof => events += 1,
                Fetched::Error(code) => {
                    events += 1;
                    error = Some(code);
                }
            });
            if taken == 0 {
                break;
            }
        }
        if let Some(code) = error {
            self.consumer_error(&KafkaError::MessageConsumption(code.into()))?;
        }
        Ok(delivered)
    }

    /// A consumer error a poll returned: fatal ones end the consumer (`Err`), the others are
    /// kept for [`KafkaConsumer::take_error`].
    fn consumer_error(&self, error: &KafkaError) -> Result<(), ConnectorError> {
        if let Some((code, reason)) = self.consumer.client().fatal_error() {
            return Err(ConnectorError::permanent(format!(
                "kafka consumer failed fatally: {code}: {reason}"
            )));
        }
        if matches!(error, KafkaError::MessageConsumptionFatal(_)) {
            return Err(classify("consumer", error));
        }
        tracing::debug!(topic = %self.topic, "kafka consumer error: {error}");
        self.consumer.context().collected().error = Some(classify("consumer", error));
        Ok(())
    }

    /// Forwards the partitions assigned since the last call to the fetch queue.
    fn forward_assigned(&mut self) {
        let partitions = std::mem::take(&mut self.consumer.context().collected().to_forward);
        self.forward(&partitions);
    }

    /// Forwards `partitions`' records to the fetch queue.
    fn forward(&self, partitions: &[i32]) {
        let Some(fetch) = &self.fetch else {
            return;
        };
        let client = self.consumer.client().native_ptr();
        for &partition in partitions {
            if !fetch.forward(client, partition) {
                tracing::warn!(
                    topic = %self.topic,
                    "kafka partition {partition} has no queue to forward; its records stay on \
                     the consumer queue"
                );
            }
        }
    }

    /// The assignment changes served by polls since the last call, in order.
    pub fn take_rebalance_events(&mut self) -> Vec<RebalanceEvent> {
        std::mem::take(&mut self.consumer.context().collected().rebalances)
    }

    /// Commit failures librdkafka reported (through the commit callback) since the last call.
    pub fn take_commit_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.consumer.context().collected().commit_errors)
    }

    /// The latest non-fatal client error since the last call (transport, unknown topic…).
    pub fn take_error(&mut self) -> Option<ConnectorError> {
        self.consumer.context().collected().error.take()
    }

    /// Commits `(partition, next offset)` pairs — the offset of the last acknowledged record
    /// plus one — asynchronously. `Ok` means librdkafka queued the commit (the spec's
    /// confirmation for Kafka); a later broker refusal shows in
    /// [`KafkaConsumer::take_commit_errors`].
    pub fn commit(&mut self, positions: &[(i32, i64)]) -> Result<(), ConnectorError> {
        if positions.is_empty() {
            return Ok(());
        }
        let list = self.partition_list(positions)?;
        self.consumer
            .commit(&list, CommitMode::Async)
            .map_err(|error| classify("commit", &error))
    }

    /// Moves the fetch position of an assigned `partition` back (or forward) to `offset`, e.g.
    /// to re-deliver a rejected record. Does not wait: a failure is reported as transient (the
    /// caller refreshes its assignment and retries, as the spec says).
    pub fn seek(&mut self, partition: i32, offset: i64) -> Result<(), ConnectorError> {
        self.consumer
            .seek(
                &self.topic,
                partition,
                Offset::from_raw(offset),
                Duration::ZERO,
            )
            .map_err(|error| {
                ConnectorError::transient(format!(
                    "kafka seek of {}[{partition}] to {offset}: {error}",
                    self.topic
                ))
            })
    }

    /// Assigned mode: replaces the assignment with these `(partition, offset)` pairs. Offsets
    /// are next offsets to read, or librdkafka's logical offsets (-2 beginning, -1 end).
    /// An empty slice unassigns everything.
    pub fn assign(&mut self, positions: &[(i32, i64)]) -> Result<(), ConnectorError> {
        let list = self.partition_list(positions)?;
        self.consumer
            .assign(&list)
            .map_err(|error| classify("assign", &error))?;
        let partitions: Vec<i32> = positions.iter().map(|&(partition, _)| partition).collect();
        self.forward(&partitions);
        Ok(())
    }

    /// Pauses fetching of every currently assigned partition (partitions assigned by a later
    /// rebalance start unpaused).
    pub fn pause_all(&mut self) -> Result<(), ConnectorError> {
        let assignment = self
            .consumer
            .assignment()
            .map_err(|error| classify("pause", &error))?;
        self.consumer
            .pause(&assignment)
            .map_err(|error| classify("pause", &error))
    }

    /// Resumes fetching of every currently assigned partition.
    pub fn resume_all(&mut self) -> Result<(), ConnectorError> {
        let assignment = self
            .consumer
            .assignment()
            .map_err(|error| classify("resume", &error))?;
        self.consumer
            .resume(&assignment)
            .map_err(|error| classify("resume", &error))
    }

    /// Quiesce: leaves the group (named mode; the revocation arrives through the next polls)
    /// or drops the assignment (assigned mode).
    pub fn unsubscribe(&mut self) -> Result<(), ConnectorError> {
        match self.group {
            ConsumerGroup::Named(_) => {
                self.consumer.unsubscribe();
                Ok(())
            }
            ConsumerGroup::Assigned => self
                .consumer
                .unassign()
                .map_err(|error| classify("unassign", &error)),
        }
    }

    /// Resume after quiesce: rejoins the group (named mode; it resumes from committed
    /// offsets). In assigned mode this does nothing: the caller assigns again.
    pub fn resubscribe(&mut self) -> Result<(), ConnectorError> {
        match self.group {
            ConsumerGroup::Named(_) => self
                .consumer
                .subscribe(&[self.topic.as_str()])
                .map_err(|error| classify("subscribe", &error)),
            ConsumerGroup::Assigned => Ok(()),
        }
    }

    /// The partitions currently assigned (a local read, no broker).
    pub fn assignment(&self) -> Result<Vec<i32>, ConnectorError> {
        let list = self
            .consumer
            .assignment()
            .map_err(|error| classify("assignment", &error))?;
        Ok(self.consumer.context().partitions_of(&list))
    }

    /// **BLOCKING** (up to `timeout`): the low and high watermarks of `partition`.
    pub fn fetch_watermarks(
        &self,
        partition: i32,
        timeout: Duration,
    ) -> Result<(i64, i64), ConnectorError> {
        self.consumer
            .fetch_watermarks(&self.topic, partition, timeout)
            .map_err(|error| classify("watermarks", &error))
    }

    /// **BLOCKING** (up to `timeout`): how many partitions the topic has.
    pub fn partition_count(&self, timeout: Duration) -> Result<i32, ConnectorError> {
        let metadata = self
            .consumer
            .fetch_metadata(Some(&self.topic), timeout)
            .map_err(|error| classify("metadata", &error))?;
        let topic = metadata
            .topics()
            .iter()
            .find(|topic| topic.name() == self.topic)
            .ok_or_else(|| {
                ConnectorError::transient(format!("kafka metadata lacks topic '{}'", self.topic))
            })?;
        if let Some(error) = topic.error() {
            let error = KafkaError::MetadataFetch(error.into());
            return Err(classify("metadata", &error));
        }
        i32::try_from(topic.partitions().len()).map_err(|_| {
            ConnectorError::permanent(format!(
                "kafka topic '{}' has too many partitions",
                self.topic
            ))
        })
    }

    /// **BLOCKING** (up to `timeout`): the group's committed next offsets of `partitions`
    /// (`None` where the group has committed nothing).
    pub fn committed_offsets(
        &self,
        partitions: &[i32],
        timeout: Duration,
    ) -> Result<Vec<(i32, Option<i64>)>, ConnectorError> {
        committed_of(&self.consumer, &self.topic, partitions, timeout)
    }

    /// **BLOCKING**: closes the consumer, leaving the group (named mode) and waiting for
    /// librdkafka to finish; the same happens when it is dropped. Run it off-shard.
    pub fn close(self) {
        drop(self);
    }

    /// Leaves the group before librdkafka closes the consumer: unsubscribes and serves the
    /// revocation until nothing is assigned, for at most [`CLOSE_LEAVE_MS`]. librdkafka's close
    /// was seen to wait forever when it met a rebalance still in progress (its revocation
    /// callback assigns synchronously during the close).
    fn leave_group(&mut self) {
        if !matches!(self.group, ConsumerGroup::Named(_)) {
            return;
        }
        self.consumer.unsubscribe();
        let until = std::time::Instant::now() + Duration::from_millis(CLOSE_LEAVE_MS);
        while std::time::Instant::now() < until {
            // Serves rebalance callbacks; records fetched now are not committed, so they
            // are delivered again to whoever owns their partition next.
            let _ = self.consumer.poll(Duration::ZERO);
            if self
                .consumer
                .assignment()
                .is_ok_and(|assigned| assigned.count() == 0)
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(CLOSE_LEAVE_POLL_MS));
        }
    }

    fn partition_list(
        &self,
        positions: &[(i32, i64)],
    ) -> Result<TopicPartitionList, ConnectorError> {
        let mut list = TopicPartitionList::with_capacity(positions.len());
        for &(partition, offset) in positions {
            list.add_partition_offset(&self.topic, partition, Offset::from_raw(offset))
                .map_err(|error| classify("offset list", &error))?;
        }
        Ok(list)
    }
}

/// **BLOCKING** (up to `timeout`): the committed next offsets of consumer group `group` on
/// `topic`'s `partitions` (`None` where the group has committed nothing), read without joining
/// the group — so asking never triggers a rebalance of its members.
pub fn group_offsets(
    config: &[(String, String)],
    group: &str,
    topic: &str,
    partitions: &[i32],
    timeout: Duration,
) -> Result<Vec<(i32, Option<i64>)>, ConnectorError> {
    let consumer: BaseConsumer = client_config(
        config,
        &[("group.id", group), ("enable.auto.commit", "false")],
    )
    .create()
    .map_err(|error| creation_error(&error))?;
    committed_of(&consumer, topic, partitions, timeout)
}

/// The committed next offsets `consumer`'s group holds for `topic`'s `partitions`.
fn committed_of<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partitions: &[i32],
    timeout: Duration,
) -> Result<Vec<(i32, Option<i64>)>, ConnectorError> {
    let mut list = TopicPartitionList::with_capacity(partitions.len());
    for &partition in partitions {
        list.add_partition(topic, partition);
    }
    let committed = consumer
        .committed_offsets(list, timeout)
        .map_err(|error| classify("committed offsets", &error))?;
    Ok(committed
        .elements_for_topic(topic)
        .iter()
        .map(|element| match element.offset() {
            Offset::Offset(offset) => (element.partition(), Some(offset)),
            _ => (element.partition(), None),
        })
        .collect())
}
