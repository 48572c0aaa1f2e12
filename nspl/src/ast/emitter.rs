//! Emitters (DESIGN §7): every sink head with its sink body, and ALTER … EMITTER.

use super::{
    Assignment, Attachment, Collect, Duration, Expr, Flush, GeneralErrorPolicy, Ident, Inherit,
    Input, MessageErrorPolicy, RetryPolicy, StateDependency,
};

/// The connector and entity an emitter writes, written before `EMITTER`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
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

/// An emitter statement: `CREATE … EMITTER` or `ALTER <head> EMITTER`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum EmitterStmt {
    Create(Box<CreateEmitter>),
    Alter(AlterEmitter),
}

/// `CREATE [IF NOT EXISTS] [ATTACHED | DETACHED] <head> EMITTER <name> …`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateEmitter {
    pub if_not_exists: bool,
    /// As written; absent means the default, ATTACHED.
    pub attachment: Option<Attachment>,
    pub head: EmitterHead,
    pub name: Ident,
    /// `FROM <relay> [WHERE <expr>], …` (at least one).
    pub inputs: Vec<Input>,
    pub collect: Option<Collect>,
    /// `USING MATERIALIZED STATE …`, in written order.
    pub state: Vec<StateDependency>,
    /// `TO <sink body>` with its delivery clauses: the emitter's one route.
    pub sink: Sink,
    pub construction: Construction,
    pub flush: Flush,
    pub on_message_error: MessageErrorPolicy,
    pub on_general_error: GeneralErrorPolicy,
}

/// Everything after `TO`: the head's sink body, then MODE, RETRY POLICY and the encoding.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Sink {
    pub body: SinkBody,
    pub mode: EmitterMode,
    /// Emitters retry failed writes in every mode, so the policy stands apart from MODE.
    pub retry: RetryPolicy,
    pub encoding: Option<Encoding>,
}

/// The head-specific part of the sink, right after `TO`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum SinkBody {
    /// `<client> TOPIC '<t>' [KEY <expr>]`.
    KafkaTopic {
        client: Ident,
        topic: String,
        key: Option<Expr>,
    },
    /// `<client> METHOD <expr> PATH <expr>`: one request per row.
    HttpRequest {
        client: Ident,
        method: Expr,
        path: Expr,
    },
    /// `SCHEMA <schema>`: consumers attached over the session protocol receive Arrow batches.
    ClientConsumer { schema: Ident },
    /// `<client> PATH '<relative path>' FORMAT NDJSON | ARROW`.
    FileAppend {
        client: Ident,
        path: String,
        format: FileFormat,
    },
    /// `<client> TOPIC '<t>' [QOS 0 | 1]`.
    MqttTopic {
        client: Ident,
        topic: String,
        qos: Option<u8>,
    },
    /// `<client> SUBJECT '<s>'`.
    NatsSubject { client: Ident, subject: String },
    /// `<client> QUEUE '<q>'`: published through the default exchange to that queue.
    RabbitmqQueue { client: Ident, queue: String },
    /// `<client> CHANNEL '<c>'`.
    RedisPubsub { client: Ident, channel: String },
    /// `<client>`: the client's PUSH socket.
    ZeromqPush { client: Ident },
    /// `<client> QUEUE '<q>'`.
    SqsQueue { client: Ident, queue: String },
    /// `<client> TOPIC '<t>' [KEY <expr>]`.
    PulsarTopic {
        client: Ident,
        topic: String,
        key: Option<Expr>,
    },
    /// `<client> INSERT TO TABLE '<t>' VALUES {"col" = <expr>, …}`.
    PostgresTable {
        client: Ident,
        table: String,
        /// Column names (external, kept exactly) and their values, in written order.
        values: Vec<(String, Expr)>,
    },
}

impl SinkBody {
    /// The head whose sink this body is.
    pub fn head(&self) -> EmitterHead {
        match self {
            SinkBody::KafkaTopic { .. } => EmitterHead::KafkaTopic,
            SinkBody::HttpRequest { .. } => EmitterHead::HttpRequest,
            SinkBody::ClientConsumer { .. } => EmitterHead::ClientConsumer,
            SinkBody::FileAppend { .. } => EmitterHead::FileAppend,
            SinkBody::MqttTopic { .. } => EmitterHead::MqttTopic,
            SinkBody::NatsSubject { .. } => EmitterHead::NatsSubject,
            SinkBody::RabbitmqQueue { .. } => EmitterHead::RabbitmqQueue,
            SinkBody::RedisPubsub { .. } => EmitterHead::RedisPubsub,
            SinkBody::ZeromqPush { .. } => EmitterHead::ZeromqPush,
            SinkBody::SqsQueue { .. } => EmitterHead::SqsQueue,
            SinkBody::PulsarTopic { .. } => EmitterHead::PulsarTopic,
            SinkBody::PostgresTable { .. } => EmitterHead::PostgresTable,
        }
    }
}

/// `FORMAT NDJSON | ARROW` of a FILE APPEND emitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum FileFormat {
    Ndjson,
    Arrow,
}

/// An emitter's `MODE`. Unlike a source's, ACK PARALLEL takes no BATCH TIMEOUT and the
/// retry policy is kept in [`Sink::retry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum EmitterMode {
    NoAck,
    AckSequential { ack_timeout: Duration },
    AckParallel { max: u64, ack_timeout: Duration },
}

/// `ENCODE USING <codec>` or `WITHOUT BODY`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum Encoding {
    Codec(Ident),
    WithoutBody,
}

/// The output construction clauses between the sink and FLUSH; each is optional.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Construction {
    pub inherit: Option<Inherit>,
    pub set: Vec<Assignment>,
    pub filter: Option<Expr>,
    /// `INVOKE write_header(<name>, <value>), …`, in written order.
    pub headers: Vec<HeaderWrite>,
}

impl Construction {
    pub fn is_empty(&self) -> bool {
        self.inherit.is_none()
            && self.set.is_empty()
            && self.filter.is_none()
            && self.headers.is_empty()
    }
}

/// One `write_header(<name>, <value>)` call of INVOKE.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct HeaderWrite {
    pub name: Expr,
    pub value: Expr,
}

/// `ALTER <head> EMITTER <name> <operation>, …`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct AlterEmitter {
    pub head: EmitterHead,
    pub name: Ident,
    /// Applied in written order (at least one).
    pub operations: Vec<AlterEmitterOp>,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum AlterEmitterOp {
    /// `ADD FROM <relay> [WHERE <expr>]`.
    AddFrom(Input),
    /// `DROP FROM <relay>`.
    DropFrom(Ident),
    /// `ALTER FROM <relay> SET WHERE <expr>`.
    SetFromWhere { relay: Ident, filter: Expr },
    /// `ALTER FROM <relay> DROP WHERE`.
    DropFromWhere(Ident),
    /// `SET COLLECT FOR <duration> [MAX BATCH SIZE <bytes>]`.
    SetCollect(Collect),
    /// `DROP COLLECT`.
    DropCollect,
    /// `ADD MATERIALIZED STATE <relay> <policy>`.
    AddState(StateDependency),
    /// `DROP MATERIALIZED STATE <relay>`.
    DropState(Ident),
    /// `ALTER MATERIALIZED STATE <relay> SET <policy>`.
    AlterState(StateDependency),
    /// `SET ATTACHED | SET DETACHED`.
    SetAttachment(Attachment),
    /// `SET TO <complete sink body>`, MODE, RETRY POLICY and encoding included.
    SetSink(Sink),
    /// `REPLACE CONSTRUCTION <INHERIT | SET | WHERE | INVOKE clauses>`: the whole block.
    ReplaceConstruction(Construction),
    /// `DROP CONSTRUCTION`: no INHERIT, SET, WHERE or INVOKE any more.
    DropConstruction,
    /// `SET FLUSH EACH … | SET FLUSH IMMEDIATE`.
    SetFlush(Flush),
    /// `SET MESSAGE ERROR IGNORE | LOG | SEND TO <relay> [SET …]`.
    SetMessageError(MessageErrorPolicy),
    /// `SET GENERAL ERROR IGNORE | LOG`.
    SetGeneralError(GeneralErrorPolicy),
}
