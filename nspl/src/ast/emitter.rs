//! Emitters (DESIGN §7): every sink head with its sink body, and ALTER … EMITTER.

/// The connector and entity an emitter writes, written before `EMITTER`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmitterHead {
    KafkaTopic,
    HttpRequest,
    ClientConsumer,
    FileAppend,
    MqttTopic,
    NatsSubject,
    RabbitmqQueue,
    RedisPubsub,
    ZeromqPush,
    SqsQueue,
    PulsarTopic,
    PostgresTable,
}

impl EmitterHead {
    pub const ALL: [EmitterHead; 12] = [
        EmitterHead::KafkaTopic,
        EmitterHead::HttpRequest,
        EmitterHead::ClientConsumer,
        EmitterHead::FileAppend,
        EmitterHead::MqttTopic,
        EmitterHead::NatsSubject,
        EmitterHead::RabbitmqQueue,
        EmitterHead::RedisPubsub,
        EmitterHead::ZeromqPush,
        EmitterHead::SqsQueue,
        EmitterHead::PulsarTopic,
        EmitterHead::PostgresTable,
    ];

    /// `[connector, entity]`, e.g. `["KAFKA", "TOPIC"]`.
    pub fn keywords(self) -> [&'static str; 2] {
        match self {
            EmitterHead::KafkaTopic => ["KAFKA", "TOPIC"],
            EmitterHead::HttpRequest => ["HTTP", "REQUEST"],
            EmitterHead::ClientConsumer => ["CLIENT", "CONSUMER"],
            EmitterHead::FileAppend => ["FILE", "APPEND"],
            EmitterHead::MqttTopic => ["MQTT", "TOPIC"],
            EmitterHead::NatsSubject => ["NATS", "SUBJECT"],
            EmitterHead::RabbitmqQueue => ["RABBITMQ", "QUEUE"],
            EmitterHead::RedisPubsub => ["REDIS", "PUBSUB"],
            EmitterHead::ZeromqPush => ["ZEROMQ", "PUSH"],
            EmitterHead::SqsQueue => ["SQS", "QUEUE"],
            EmitterHead::PulsarTopic => ["PULSAR", "TOPIC"],
            EmitterHead::PostgresTable => ["POSTGRES", "TABLE"],
        }
    }

    /// The head as one completion item: `KAFKA TOPIC EMITTER`.
    pub fn phrase(self) -> &'static str {
        match self {
            EmitterHead::KafkaTopic => "KAFKA TOPIC EMITTER",
            EmitterHead::HttpRequest => "HTTP REQUEST EMITTER",
            EmitterHead::ClientConsumer => "CLIENT CONSUMER EMITTER",
            EmitterHead::FileAppend => "FILE APPEND EMITTER",
            EmitterHead::MqttTopic => "MQTT TOPIC EMITTER",
            EmitterHead::NatsSubject => "NATS SUBJECT EMITTER",
            EmitterHead::RabbitmqQueue => "RABBITMQ QUEUE EMITTER",
            EmitterHead::RedisPubsub => "REDIS PUBSUB EMITTER",
            EmitterHead::ZeromqPush => "ZEROMQ PUSH EMITTER",
            EmitterHead::SqsQueue => "SQS QUEUE EMITTER",
            EmitterHead::PulsarTopic => "PULSAR TOPIC EMITTER",
            EmitterHead::PostgresTable => "POSTGRES TABLE EMITTER",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum EmitterStmt {}
