//! Ingestors (`spec/ingestors.md`): every transport head with its own source body, the
//! CLIENT PRODUCER head, ALTER … INGESTOR operations, and signaling protocols.

/// The connector and entity an ingestor reads, written before `INGESTOR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IngestorHead {
    HttpRequest,
    KafkaTopic,
    PulsarTopic,
    RabbitmqQueue,
    RedisPubsub,
    MqttTopic,
    NatsSubject,
    ZeromqPull,
    SyslogListener,
    SqsQueue,
    PrometheusQuery,
    HttpEndpoint,
    WebsocketsEndpoint,
    WebsocketsConnection,
    ClientProducer,
}

impl IngestorHead {
    pub const ALL: [IngestorHead; 15] = [
        IngestorHead::HttpRequest,
        IngestorHead::KafkaTopic,
        IngestorHead::PulsarTopic,
        IngestorHead::RabbitmqQueue,
        IngestorHead::RedisPubsub,
        IngestorHead::MqttTopic,
        IngestorHead::NatsSubject,
        IngestorHead::ZeromqPull,
        IngestorHead::SyslogListener,
        IngestorHead::SqsQueue,
        IngestorHead::PrometheusQuery,
        IngestorHead::HttpEndpoint,
        IngestorHead::WebsocketsEndpoint,
        IngestorHead::WebsocketsConnection,
        IngestorHead::ClientProducer,
    ];

    /// `[connector, entity]`, e.g. `["KAFKA", "TOPIC"]`.
    pub fn keywords(self) -> [&'static str; 2] {
        match self {
            IngestorHead::HttpRequest => ["HTTP", "REQUEST"],
            IngestorHead::KafkaTopic => ["KAFKA", "TOPIC"],
            IngestorHead::PulsarTopic => ["PULSAR", "TOPIC"],
            IngestorHead::RabbitmqQueue => ["RABBITMQ", "QUEUE"],
            IngestorHead::RedisPubsub => ["REDIS", "PUBSUB"],
            IngestorHead::MqttTopic => ["MQTT", "TOPIC"],
            IngestorHead::NatsSubject => ["NATS", "SUBJECT"],
            IngestorHead::ZeromqPull => ["ZEROMQ", "PULL"],
            IngestorHead::SyslogListener => ["SYSLOG", "LISTENER"],
            IngestorHead::SqsQueue => ["SQS", "QUEUE"],
            IngestorHead::PrometheusQuery => ["PROMETHEUS", "QUERY"],
            IngestorHead::HttpEndpoint => ["HTTP", "ENDPOINT"],
            IngestorHead::WebsocketsEndpoint => ["WEBSOCKETS", "ENDPOINT"],
            IngestorHead::WebsocketsConnection => ["WEBSOCKETS", "CONNECTION"],
            IngestorHead::ClientProducer => ["CLIENT", "PRODUCER"],
        }
    }

    /// The head's phrase as messages and SHOW INGESTORS print it: `KAFKA TOPIC`.
    pub fn phrase(self) -> &'static str {
        match self {
            IngestorHead::HttpRequest => "HTTP REQUEST",
            IngestorHead::KafkaTopic => "KAFKA TOPIC",
            IngestorHead::PulsarTopic => "PULSAR TOPIC",
            IngestorHead::RabbitmqQueue => "RABBITMQ QUEUE",
            IngestorHead::RedisPubsub => "REDIS PUBSUB",
            IngestorHead::MqttTopic => "MQTT TOPIC",
            IngestorHead::NatsSubject => "NATS SUBJECT",
            IngestorHead::ZeromqPull => "ZEROMQ PULL",
            IngestorHead::SyslogListener => "SYSLOG LISTENER",
            IngestorHead::SqsQueue => "SQS QUEUE",
            IngestorHead::PrometheusQuery => "PROMETHEUS QUERY",
            IngestorHead::HttpEndpoint => "HTTP ENDPOINT",
            IngestorHead::WebsocketsEndpoint => "WEBSOCKETS ENDPOINT",
            IngestorHead::WebsocketsConnection => "WEBSOCKETS CONNECTION",
            IngestorHead::ClientProducer => "CLIENT PRODUCER",
        }
    }

    /// The head as one completion item: `KAFKA TOPIC INGESTOR`.
    pub fn phrase_with(self, suffix: &'static str) -> &'static str {
        debug_assert_eq!(suffix, "INGESTOR");
        match self {
            IngestorHead::HttpRequest => "HTTP REQUEST INGESTOR",
            IngestorHead::KafkaTopic => "KAFKA TOPIC INGESTOR",
            IngestorHead::PulsarTopic => "PULSAR TOPIC INGESTOR",
            IngestorHead::RabbitmqQueue => "RABBITMQ QUEUE INGESTOR",
            IngestorHead::RedisPubsub => "REDIS PUBSUB INGESTOR",
            IngestorHead::MqttTopic => "MQTT TOPIC INGESTOR",
            IngestorHead::NatsSubject => "NATS SUBJECT INGESTOR",
            IngestorHead::ZeromqPull => "ZEROMQ PULL INGESTOR",
            IngestorHead::SyslogListener => "SYSLOG LISTENER INGESTOR",
            IngestorHead::SqsQueue => "SQS QUEUE INGESTOR",
            IngestorHead::PrometheusQuery => "PROMETHEUS QUERY INGESTOR",
            IngestorHead::HttpEndpoint => "HTTP ENDPOINT INGESTOR",
            IngestorHead::WebsocketsEndpoint => "WEBSOCKETS ENDPOINT INGESTOR",
            IngestorHead::WebsocketsConnection => "WEBSOCKETS CONNECTION INGESTOR",
            IngestorHead::ClientProducer => "CLIENT PRODUCER INGESTOR",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum IngestorStmt {}
