//! [`KafkaProducer`]: the non-blocking producer a KAFKA TOPIC emitter drives from its shard.
//!
//! Owns the producer half: enqueueing records with a caller token, telling a full local queue
//! (retry later) from a refusal (the record can never be sent), and handing back each token
//! with its delivery outcome.
//!
//! Why it is correct on a glommio shard: [`KafkaProducer::send`] and
//! [`KafkaProducer::send_batch`] only enqueue into librdkafka's local queue (neither
//! `rd_kafka_producev` nor `rd_kafka_produce_batch` blocks here: a full queue is reported
//! instead), and [`KafkaProducer::poll_deliveries`] only polls with a zero timeout, reading
//! each delivery-report event's records in one pass on the calling thread ([`super::produce`]).
//! The token travels as librdkafka's per-message opaque pointer value (a `usize`), so no box
//! is allocated per message in this crate. Every enqueued record produces exactly one delivery
//! report (librdkafka's guarantee, including purges and timeouts), so every token comes back
//! exactly once — except when the producer is dropped without [`KafkaProducer::flush`]: then
//! rdkafka purges what is still queued.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

use super::produce::{OutRecord, ProduceQueue, Served};
use super::{classify, client_config, creation_error};
use crate::ConnectorError;

/// Most librdkafka events (each a batch of delivery reports, or an error) one
/// [`KafkaProducer::poll_deliveries`] serves, so a shard never stays inside one call for long.
const MAX_EVENTS_PER_POLL: usize = 64;

/// Why [`KafkaProducer::send`] did not enqueue a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendRefused {
    /// librdkafka's local queue is full (`queue.buffering.max.messages` / `.kbytes`): serve
    /// deliveries and send again later.
    QueueFull,
    /// The record cannot be enqueued; the error says whether retrying can help.
    Failed(ConnectorError),
}

/// One delivery outcome: the caller's token and the broker's answer.
pub type Delivery = (u64, Result<(), ConnectorError>);

/// The librdkafka context. Its callbacks run only inside rdkafka's own poll (during `flush`
/// and on drop) and only record; [`KafkaProducer::poll_deliveries`] reads the same kinds of
/// events itself.
struct Context {
    topic: String,
    deliveries: Mutex<Vec<Delivery>>,
    /// The latest client-level error (all brokers down, authentication…).
    error: Mutex<Option<ConnectorError>>,
}

impl Context {
    fn deliveries(&self) -> MutexGuard<'_, Vec<Delivery>> {
        // Only appended to and drained: valid whatever a panicking holder did.
        self.deliveries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn error(&self) -> MutexGuard<'_, Option<ConnectorError>> {
        self.error.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Logs and keeps a client-level error.
    fn client_error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(topic = %self.topic, "kafka producer error: {error}: {reason}");
        *Context::error(self) = Some(classify("producer", &error));
    }
}

impl ClientContext for Context {
    fn error(&self, error: KafkaError, reason: &str) {
        self.client_error(error, reason);
    }
}

/// A delivery report's outcome as the caller sees it.
fn outcome(code: RDKafkaErrorCode) -> Result<(), ConnectorError> {
    match code {
        RDKafkaErrorCode::NoError => Ok(()),
        code => Err(classify("delivery", &KafkaError::MessageProduction(code))),
    }
}

impl ProducerContext for Context {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, token: usize) {
        let outcome = match result {
            Ok(_) => Ok(()),
            Err((error, _)) => Err(classify("delivery", error)),
        };
        // usize → u64 is lossless on every supported (32- and 64-bit) target.
        self.deliveries().push((token as u64, outcome));
    }
}

/// A Kafka producer for one topic, driven by zero-timeout polls.
///
/// Dropping it purges records still queued (their tokens never come back): call
/// [`KafkaProducer::flush`] (off-shard) first on a graceful stop.
pub struct KafkaProducer {
    /// Declared before `producer`: its handles are released before the client is destroyed.
    queue: ProduceQueue,
    producer: BaseProducer<Context>,
    topic: String,
}

impl KafkaProducer {
    /// Creates the producer. `config` is passed to librdkafka unchanged (it must name
    /// `bootstrap.servers`); no key is overridden.
    pub fn new(config: &[(String, String)], topic: &str) -> Result<KafkaProducer, ConnectorError> {
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
        let context = Context {
            topic: topic.to_string(),
            deliveries: Mutex::new(Vec::new()),
            error: Mutex::new(None),
        };
        let producer: BaseProducer<Context> = client_config(config, &[])
            .create_with_context(context)
            .map_err(|error| creation_error(&error))?;
        let queue = ProduceQueue::new(producer.client().native_ptr(), topic).ok_or_else(|| {
            ConnectorError::config("TOPIC", format!("'{topic}' cannot be opened by librdkafka"))
        })?;
        Ok(KafkaProducer {
            queue,
            producer,
            topic: topic.to_string(),
        })
    }

    /// The topic this producer writes.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Enqueues one record (partitioned by librdkafka's partitioner on `key`); `token` comes
    /// back with the outcome from [`KafkaProducer::poll_deliveries`]. Never blocks.
    ///
    /// Headers are copied into a librdkafka header list only when there are any.
    pub fn send(
        &mut self,
        key: Option<&[u8]>,
        payload: &[u8],
        headers: &[(&str, &[u8])],
        token: u64,
    ) -> Result<(), SendRefused> {
        let opaque = usize::try_from(token).map_err(|_| {
            SendRefused::Failed(ConnectorError::permanent(format!(
                "kafka delivery token {token} does not fit this platform's pointer width"
            )))
        })?;
        let mut record =
            BaseRecord::<[u8], [u8], usize>::with_opaque_to(&self.topic, opaque).payload(payload);
        if let Some(key) = key {
            record = record.key(key);
        }
        if !headers.is_empty() {
            let mut list = OwnedHeaders::new_with_capacity(headers.len());
            for &(name, value) in headers {
                list = list.insert(Header {
                    key: name,
                    value: Some(value),
                });
            }
            record = record.headers(list);
        }
        match self.producer.send(record) {
            Ok(()) => Ok(()),
            Err((error, _)) => {
                if error.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) {
                    return Err(SendRefused::QueueFull);
                }
                if let Some((code, reason)) = self.producer.client().fatal_error() {
                    return Err(SendRefused::Failed(ConnectorError::permanent(format!(
                        "kafka producer failed fatally: {code}: {reason}"
                    ))));
                }
                Err(SendRefused::Failed(classify("send", &error)))
            }
        }
    }

    /// Enqueues headerless records in order, partitioned by librdkafka's partitioner on each
    /// key exactly as [`KafkaProducer::send`] does, with one librdkafka call per
    /// [`PRODUCE_BATCH_RECORDS`](super::PRODUCE_BATCH_RECORDS) records; each token comes back
    /// with its outcome from [`KafkaProducer::poll_deliveries`]. Never blocks.
    ///
    /// Returns how many leading records were handled; `refused` got the index and error of
    /// each one that can never be enqueued as sent (its token never comes back). Fewer than
    /// `records.len()` means the local queue is full: send the rest again after serving
    /// deliveries.
    pub fn send_batch(
        &mut self,
        records: &[OutRecord<'_>],
        mut refused: impl FnMut(usize, ConnectorError),
    ) -> usize {
        let mut handled = 0;
        while handled < records.len() {
            let rest = &records[handled..];
            let producer = &self.producer;
            let taken = self.queue.produce(rest, |index, err| {
                let error = match (RDKafkaErrorCode::from(err), producer.client().fatal_error()) {
                    (RDKafkaErrorCode::Fatal, Some((code, reason))) => ConnectorError::permanent(
                        format!("kafka producer failed fatally: {code}: {reason}"),
                    ),
                    (code, _) => classify("send", &KafkaError::MessageProduction(code)),
                };
                refused(handled + index, error);
            });
            handled += taken;
            if taken < rest.len().min(super::PRODUCE_BATCH_RECORDS) {
                break;
            }
        }
        handled
    }

    /// Serves delivery reports with zero-timeout polls and appends each `(token, outcome)` to
    /// `out` (broker acknowledgement, or the error with its transient/permanent
    /// classification). Call it regularly: librdkafka also serves its error events here.
    pub fn poll_deliveries(&mut self, out: &mut Vec<Delivery>) {
        let context = self.producer.context();
        self.queue.poll(MAX_EVENTS_PER_POLL, |served| match served {
            // usize → u64 is lossless on every supported (32- and 64-bit) target.
            Served::Delivery(token, err) => out.push((token as u64, outcome(err.into()))),
            Served::Error(err, reason) => {
                context.client_error(KafkaError::Global(err.into()), reason)
            }
            Served::Log(level, facility, line) => log(level, facility, line),
        });
        // Reports rdkafka's own poll served (during a flush) went to the context.
        let mut served = context.deliveries();
        if !served.is_empty() {
            out.append(&mut served);
        }
    }

    /// The latest client-level error since the last call (all brokers down, authentication…).
    pub fn take_error(&mut self) -> Option<ConnectorError> {
        self.producer.context().error().take()
    }

    /// Records enqueued or in flight whose delivery has not been reported by a poll yet.
    pub fn in_flight(&self) -> usize {
        usize::try_from(self.producer.in_flight_count()).unwrap_or(0)
    }

    /// **BLOCKING** (up to `timeout`): waits until every queued record has been delivered or
    /// failed. The reports are collected and handed out by the next
    /// [`KafkaProducer::poll_deliveries`]. Run it off-shard.
    pub fn flush(&self, timeout: Duration) -> Result<(), ConnectorError> {
        self.producer
            .flush(timeout)
            .map_err(|error| classify("flush", &error))
    }
}

/// A librdkafka log line (syslog `level`) as the crate's tracing event.
fn log(level: i32, facility: &str, line: &str) {
    match level {
        ..=3 => tracing::error!("librdkafka {facility}: {line}"),
        4 => tracing::warn!("librdkafka {facility}: {line}"),
        5 | 6 => tracing::info!("librdkafka {facility}: {line}"),
        _ => tracing::debug!("librdkafka {facility}: {line}"),
    }
}
