//! Kafka, through librdkafka (rdkafka 0.39, librdkafka 2.12.1 built from source).
//!
//! This module owns the byte-level Kafka halves the engine drives from its shards (DESIGN §3:
//! "Kafka (rdkafka) ... run on the shards themselves"): [`KafkaConsumer`] for KAFKA TOPIC
//! ingestors, [`KafkaProducer`] for KAFKA TOPIC emitters, and [`MockKafka`], librdkafka's mock
//! cluster on loopback for tests and `nervix dev kafka`. Like the rest of the crate it sees
//! bytes only: no NSPL, codecs or Arrow.
//!
//! Why it is correct to call from a glommio shard: every method that the hot path uses only
//! polls librdkafka's queues with a zero timeout or hands a request to librdkafka's own threads
//! (subscribe, assign, seek with a zero timeout, asynchronous commit, pause/resume — each a
//! local hand-off that waits for no broker). Methods that do wait for a broker
//! (`fetch_watermarks`, `partition_count`, `committed_offsets`, `flush`, closing a consumer) are
//! marked **BLOCKING** and take an explicit timeout so the caller runs them off-shard.
//!
//! Client configuration is the user's CONFIG passed through unchanged (the spec: "Kafka client
//! configuration is passed through to librdkafka"), except the few keys a mode requires, which
//! each constructor documents and overrides.

mod consumer;
mod fetch;
mod headers;
mod mock;
mod produce;
mod producer;

pub use consumer::{
    group_offsets, ConsumerGroup, KafkaConsumer, KafkaRecord, RebalanceEvent,
    ASSIGNED_GROUP_PREFIX, CONSUMER_DEFAULTS,
};
pub use headers::{KafkaHeader, KafkaHeaders, INVALID_HEADER_NAME};
pub use mock::{MockKafka, MAX_MOCK_BROKERS, MAX_MOCK_PARTITIONS};
pub use produce::{OutRecord, PRODUCE_BATCH_RECORDS};
pub use producer::{Delivery, KafkaProducer, SendRefused};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::ClientConfig;

use crate::ConnectorError;

/// Builds a librdkafka configuration from the user's pairs, then applies `required` on top
/// (the keys the mode cannot work without win over the user's).
fn client_config(user: &[(String, String)], required: &[(&str, &str)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    for (key, value) in user {
        config.set(key.as_str(), value.as_str());
    }
    for (key, value) in required {
        config.set(*key, *value);
    }
    config
}

/// The librdkafka error code inside `error`, when it carries one.
fn error_code(error: &KafkaError) -> Option<RDKafkaErrorCode> {
    error.rdkafka_error_code()
}

/// Whether retrying the same operation can never succeed: the request itself is wrong for the
/// cluster (too large, no such topic, not authorized, malformed) or the client is in a fatal
/// state. Everything else (timeouts, transport, leader moves, purges, full queues) may pass.
fn is_permanent(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::MessageSizeTooLarge
            | C::InvalidMessageSize
            | C::InvalidMessage
            | C::InvalidRecord
            | C::MessageBatchTooLarge
            | C::InvalidTopic
            | C::UnknownTopic
            | C::UnknownPartition
            | C::UnknownTopicOrPartition
            | C::TopicAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::TransactionalIdAuthorizationFailed
            | C::InvalidRequiredAcks
            | C::InvalidTimestamp
            | C::UnsupportedForMessageFormat
            | C::UnsupportedCompressionType
            | C::UnsupportedVersion
            | C::InvalidArgument
            | C::InvalidGroupId
            | C::InvalidConfig
            | C::Fatal
    )
}

/// Classifies a librdkafka error as the crate's [`ConnectorError`] with `what` as context.
fn classify(what: &str, error: &KafkaError) -> ConnectorError {
    let permanent = match error {
        KafkaError::ClientConfig(..) => {
            return ConnectorError::config("CONFIG", format!("is rejected by librdkafka: {error}"))
        }
        KafkaError::ClientCreation(..) | KafkaError::MessageConsumptionFatal(..) => true,
        other => error_code(other).is_some_and(is_permanent),
    };
    if permanent {
        ConnectorError::permanent(format!("kafka {what}: {error}"))
    } else {
        ConnectorError::transient(format!("kafka {what}: {error}"))
    }
}

/// A `config` error for a client that librdkafka refused to create (bad key or value).
fn creation_error(error: &KafkaError) -> ConnectorError {
    match error {
        KafkaError::ClientConfig(_, _, key, value) => ConnectorError::config(
            key,
            format!("= '{value}' is rejected by librdkafka: {error}"),
        ),
        other => {
            ConnectorError::config("CONFIG", format!("cannot create the Kafka client: {other}"))
        }
    }
}
