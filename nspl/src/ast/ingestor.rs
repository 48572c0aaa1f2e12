//! Ingestors (`spec/ingestors.md`): every transport head with its own source body, the
//! CLIENT PRODUCER head, ALTER … INGESTOR operations, and signaling protocols.

use super::{
    ConfigMap, DeliveryMode, Duration, Expr, GeneralErrorPolicy, Ident, QuiesceMode,
    ResourceVersion, Route,
};

/// The connector and entity an ingestor reads, written before `INGESTOR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
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

/// A delivery mode as the per-entity tables name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeKind {
    NoAck,
    AckSequential,
    AckParallel,
}

impl ModeKind {
    pub fn of(mode: &DeliveryMode) -> ModeKind {
        match mode {
            DeliveryMode::NoAck => ModeKind::NoAck,
            DeliveryMode::AckSequential { .. } => ModeKind::AckSequential,
            DeliveryMode::AckParallel { .. } => ModeKind::AckParallel,
        }
    }

    /// `NO ACK`, `ACK SEQUENTIAL`, `ACK PARALLEL`.
    pub fn words(self) -> &'static str {
        match self {
            ModeKind::NoAck => "NO ACK",
            ModeKind::AckSequential => "ACK SEQUENTIAL",
            ModeKind::AckParallel => "ACK PARALLEL",
        }
    }
}

/// A quiesce body as the per-entity tables name it (its first keyword).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuiesceKind {
    Suspend,
    Buffer,
    Drop,
    Reject,
}

impl QuiesceKind {
    pub const ALL: [QuiesceKind; 4] = [
        QuiesceKind::Suspend,
        QuiesceKind::Buffer,
        QuiesceKind::Drop,
        QuiesceKind::Reject,
    ];

    pub fn of(quiesce: &QuiesceMode) -> QuiesceKind {
        match quiesce {
            QuiesceMode::Suspend => QuiesceKind::Suspend,
            QuiesceMode::Buffer { .. } => QuiesceKind::Buffer,
            QuiesceMode::Drop => QuiesceKind::Drop,
            QuiesceMode::RejectRetryAfter(_) => QuiesceKind::Reject,
        }
    }

    pub fn keyword(self) -> &'static str {
        match self {
            QuiesceKind::Suspend => "SUSPEND",
            QuiesceKind::Buffer => "BUFFER",
            QuiesceKind::Drop => "DROP",
            QuiesceKind::Reject => "REJECT",
        }
    }
}

impl IngestorHead {
    /// The delivery modes the entity honors (its body in the spec's "Supported Ingestor
    /// Types"); the parser enforces them in CREATE and validation after every ALTER.
    pub fn delivery_modes(self) -> &'static [ModeKind] {
        use IngestorHead as H;
        use ModeKind::*;
        match self {
            H::KafkaTopic | H::PulsarTopic | H::MqttTopic => &[NoAck, AckSequential, AckParallel],
            H::RabbitmqQueue | H::SqsQueue => &[AckSequential],
            H::ClientProducer => &[AckSequential, AckParallel],
            H::HttpRequest
            | H::RedisPubsub
            | H::NatsSubject
            | H::ZeromqPull
            | H::SyslogListener
            | H::PrometheusQuery
            | H::HttpEndpoint
            | H::WebsocketsEndpoint
            | H::WebsocketsConnection => &[NoAck],
        }
    }

    /// The quiesce modes the entity honors.
    pub fn quiesce_modes(self) -> &'static [QuiesceKind] {
        use IngestorHead as H;
        use QuiesceKind::*;
        match self {
            H::KafkaTopic | H::PulsarTopic | H::RabbitmqQueue | H::SqsQueue | H::ClientProducer => {
                &[Suspend]
            }
            H::HttpRequest | H::PrometheusQuery => &[Suspend, Buffer],
            H::RedisPubsub | H::NatsSubject | H::WebsocketsConnection => &[Buffer, Drop],
            H::MqttTopic | H::ZeromqPull | H::SyslogListener => &[Suspend, Buffer, Drop],
            H::HttpEndpoint | H::WebsocketsEndpoint => &[Reject, Buffer],
        }
    }

    /// Server-side endpoints, whose BUFFER takes no ON OVERFLOW.
    pub fn is_endpoint(self) -> bool {
        matches!(
            self,
            IngestorHead::HttpEndpoint | IngestorHead::WebsocketsEndpoint
        )
    }
}

/// An ingestor or signaling-protocol statement.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum IngestorStmt {
    /// Boxed: a CREATE is far larger than the other statements sharing [`super::Statement`].
    Create(Box<CreateIngestor>),
    Alter(AlterIngestor),
    CreateSignalingProtocol(Box<CreateSignalingProtocol>),
}

/// `CREATE [IF NOT EXISTS] <head> INGESTOR <name> FROM <body> … ON GENERAL ERROR …`.
///
/// The head is not stored separately: the source body's variant names it (see
/// [`SourceBody::head`]), so a statement cannot pair one head with another head's body.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateIngestor {
    pub if_not_exists: bool,
    pub name: Ident,
    pub source: SourceBody,
    /// `DECODE USING <codec>`: present under every head except CLIENT PRODUCER.
    pub decode: Option<Ident>,
    pub timestamp: Option<TimestampSource>,
    /// `FILTER WHERE <expr>`, run once per source ingest group before any route.
    pub filter: Option<Expr>,
    /// At least one.
    pub routes: Vec<Route>,
    pub on_general_error: GeneralErrorPolicy,
}

/// `TIMESTAMP NOW | TIMESTAMP AT <field>`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum TimestampSource {
    Now,
    At(Ident),
}

/// The body after `FROM`, one variant per head; every body ends with its delivery mode and
/// its quiesce mode.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum SourceBody {
    /// `<client> EVERY <duration>`.
    HttpRequest {
        client: Ident,
        every: Duration,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client> TOPIC '<t>' OFFSET BY … [INSTANCES n]`.
    KafkaTopic {
        client: Ident,
        topic: String,
        offset: KafkaOffset,
        instances: Option<u64>,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client> TOPIC '<t>' SUBSCRIPTION '<s>' [INSTANCES n]`.
    PulsarTopic {
        client: Ident,
        topic: String,
        subscription: String,
        instances: Option<u64>,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client> QUEUE '<q>' [INSTANCES n]`.
    RabbitmqQueue {
        client: Ident,
        queue: String,
        instances: Option<u64>,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client> CHANNEL '<c>'`.
    RedisPubsub {
        client: Ident,
        channel: String,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client> TOPIC '<filter>' [INSTANCES n] [SESSION CLEAN|PERSISTENT] [QOS 0|1]`.
    MqttTopic {
        client: Ident,
        topic: String,
        instances: Option<u64>,
        session: Option<MqttSession>,
        qos: Option<u8>,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client> SUBJECT '<s>' QUEUE GROUP '<g>' INSTANCES n` (all required).
    NatsSubject {
        client: Ident,
        subject: String,
        queue_group: String,
        instances: u64,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client>`.
    ZeromqPull {
        client: Ident,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client>`.
    SyslogListener {
        client: Ident,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client> QUEUE '<q>' [INSTANCES n]`.
    SqsQueue {
        client: Ident,
        queue: String,
        instances: Option<u64>,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `<client> QUERY '<promql>' EVERY <duration>`.
    PrometheusQuery {
        client: Ident,
        query: String,
        every: Duration,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    HttpEndpoint(EndpointBody),
    WebsocketsEndpoint(EndpointBody),
    /// `<client>`.
    WebsocketsConnection {
        client: Ident,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
    /// `SCHEMA <schema>`.
    ClientProducer {
        schema: Ident,
        mode: DeliveryMode,
        quiesce: QuiesceMode,
    },
}

/// `<endpoint> MODE NO ACK ON QUIESCE …`, shared by HTTP ENDPOINT and WEBSOCKETS ENDPOINT.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct EndpointBody {
    pub endpoint: Ident,
    pub mode: DeliveryMode,
    pub quiesce: QuiesceMode,
}

/// `OFFSET BY CONSUMER GROUP '<group>' | OFFSET BY DOMAIN`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum KafkaOffset {
    ConsumerGroup(String),
    Domain,
}

/// `SESSION CLEAN | SESSION PERSISTENT` of an MQTT subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum MqttSession {
    Clean,
    Persistent,
}

impl SourceBody {
    /// The head whose body this is.
    pub fn head(&self) -> IngestorHead {
        match self {
            SourceBody::HttpRequest { .. } => IngestorHead::HttpRequest,
            SourceBody::KafkaTopic { .. } => IngestorHead::KafkaTopic,
            SourceBody::PulsarTopic { .. } => IngestorHead::PulsarTopic,
            SourceBody::RabbitmqQueue { .. } => IngestorHead::RabbitmqQueue,
            SourceBody::RedisPubsub { .. } => IngestorHead::RedisPubsub,
            SourceBody::MqttTopic { .. } => IngestorHead::MqttTopic,
            SourceBody::NatsSubject { .. } => IngestorHead::NatsSubject,
            SourceBody::ZeromqPull { .. } => IngestorHead::ZeromqPull,
            SourceBody::SyslogListener { .. } => IngestorHead::SyslogListener,
            SourceBody::SqsQueue { .. } => IngestorHead::SqsQueue,
            SourceBody::PrometheusQuery { .. } => IngestorHead::PrometheusQuery,
            SourceBody::HttpEndpoint(_) => IngestorHead::HttpEndpoint,
            SourceBody::WebsocketsEndpoint(_) => IngestorHead::WebsocketsEndpoint,
            SourceBody::WebsocketsConnection { .. } => IngestorHead::WebsocketsConnection,
            SourceBody::ClientProducer { .. } => IngestorHead::ClientProducer,
        }
    }

    /// The body's `MODE …`.
    pub fn mode(&self) -> &DeliveryMode {
        match self {
            SourceBody::HttpEndpoint(e) | SourceBody::WebsocketsEndpoint(e) => &e.mode,
            SourceBody::HttpRequest { mode, .. }
            | SourceBody::KafkaTopic { mode, .. }
            | SourceBody::PulsarTopic { mode, .. }
            | SourceBody::RabbitmqQueue { mode, .. }
            | SourceBody::RedisPubsub { mode, .. }
            | SourceBody::MqttTopic { mode, .. }
            | SourceBody::NatsSubject { mode, .. }
            | SourceBody::ZeromqPull { mode, .. }
            | SourceBody::SyslogListener { mode, .. }
            | SourceBody::SqsQueue { mode, .. }
            | SourceBody::PrometheusQuery { mode, .. }
            | SourceBody::WebsocketsConnection { mode, .. }
            | SourceBody::ClientProducer { mode, .. } => mode,
        }
    }

    /// The body's `ON QUIESCE …`, to replace (ALTER … SET QUIESCE).
    pub fn quiesce_mut(&mut self) -> &mut QuiesceMode {
        match self {
            SourceBody::HttpEndpoint(e) | SourceBody::WebsocketsEndpoint(e) => &mut e.quiesce,
            SourceBody::HttpRequest { quiesce, .. }
            | SourceBody::KafkaTopic { quiesce, .. }
            | SourceBody::PulsarTopic { quiesce, .. }
            | SourceBody::RabbitmqQueue { quiesce, .. }
            | SourceBody::RedisPubsub { quiesce, .. }
            | SourceBody::MqttTopic { quiesce, .. }
            | SourceBody::NatsSubject { quiesce, .. }
            | SourceBody::ZeromqPull { quiesce, .. }
            | SourceBody::SyslogListener { quiesce, .. }
            | SourceBody::SqsQueue { quiesce, .. }
            | SourceBody::PrometheusQuery { quiesce, .. }
            | SourceBody::WebsocketsConnection { quiesce, .. }
            | SourceBody::ClientProducer { quiesce, .. } => quiesce,
        }
    }

    /// The body's `ON QUIESCE …`.
    pub fn quiesce(&self) -> &QuiesceMode {
        match self {
            SourceBody::HttpEndpoint(e) | SourceBody::WebsocketsEndpoint(e) => &e.quiesce,
            SourceBody::HttpRequest { quiesce, .. }
            | SourceBody::KafkaTopic { quiesce, .. }
            | SourceBody::PulsarTopic { quiesce, .. }
            | SourceBody::RabbitmqQueue { quiesce, .. }
            | SourceBody::RedisPubsub { quiesce, .. }
            | SourceBody::MqttTopic { quiesce, .. }
            | SourceBody::NatsSubject { quiesce, .. }
            | SourceBody::ZeromqPull { quiesce, .. }
            | SourceBody::SyslogListener { quiesce, .. }
            | SourceBody::SqsQueue { quiesce, .. }
            | SourceBody::PrometheusQuery { quiesce, .. }
            | SourceBody::WebsocketsConnection { quiesce, .. }
            | SourceBody::ClientProducer { quiesce, .. } => quiesce,
        }
    }
}

/// `ALTER <head> INGESTOR <name> <operation>, …`, applied in written order.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct AlterIngestor {
    /// The head as written; the catalog refuses one that differs from the stored ingestor's.
    pub head: IngestorHead,
    pub name: Ident,
    /// At least one.
    pub operations: Vec<AlterIngestorOp>,
}

/// One ALTER … INGESTOR operation.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum AlterIngestorOp {
    /// `SET FROM <complete body>`; its variant always matches the ALTER's head.
    SetFrom(SourceBody),
    /// `SET QUIESCE <body>`: any quiesce body; the stored source refuses one it cannot honor.
    SetQuiesce(QuiesceMode),
    /// `SET DECODE USING <codec>` (not under CLIENT PRODUCER).
    SetDecode(Ident),
    /// `SET TIMESTAMP NOW | SET TIMESTAMP AT <field>`.
    SetTimestamp(TimestampSource),
    DropTimestamp,
    /// `SET FILTER WHERE <expr>`.
    SetFilter(Expr),
    /// `DROP FILTER WHERE`.
    DropFilter,
    /// `ADD ROUTE TO <relay> <route body>`.
    AddRoute(Route),
    /// `DROP ROUTE TO <relay>`.
    DropRoute(Ident),
    /// `REPLACE ROUTE TO <relay> <route body>`.
    ReplaceRoute(Route),
    /// `SET GENERAL ERROR IGNORE | LOG`.
    SetGeneralError(GeneralErrorPolicy),
}

/// `CREATE [IF NOT EXISTS] SIGNALING PROTOCOL <name> FORMAT … [FAIL JAQ '<m>'] ON CONNECT
/// [ACCEPT DATA] <steps> TIMEOUT <duration>`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateSignalingProtocol {
    pub if_not_exists: bool,
    pub name: Ident,
    pub format: SignalingFormat,
    /// The protocol-wide `FAIL JAQ '<matcher>'`, checked after a step's own FAIL JAQ.
    pub fail: Option<String>,
    /// `ON CONNECT ACCEPT DATA`: payload flows from the first frame.
    pub accept_data_on_connect: bool,
    /// In written order; they run strictly one after another.
    pub steps: Vec<SignalingStep>,
    /// One budget for the whole handshake.
    pub timeout: Duration,
}

/// The wire format of signaling frames.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum SignalingFormat {
    Json,
    Yaml,
    Toml,
    Xml,
    Cbor,
    Raw,
    Protobuf(ProtobufSignaling),
}

/// `PROTOBUF USING RESOURCE <res> VERSION <n>|LATEST CONFIG {…} SEND MESSAGE '<type>'
/// WAIT MESSAGE '<type>'`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct ProtobufSignaling {
    pub resource: Ident,
    pub version: ResourceVersion,
    pub config: ConfigMap,
    pub send_message: String,
    pub wait_message: String,
}

/// One handshake step.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum SignalingStep {
    /// `SEND JAQ '<program>', …`: each program produces one frame.
    Send(Vec<String>),
    Wait(WaitStep),
}

/// `WAIT JAQ '<matcher>', … [FAIL JAQ '<matcher>'] [CAPTURE '<program>'] [ACCEPT DATA]`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct WaitStep {
    /// At least one; satisfied in any arrival order.
    pub matchers: Vec<String>,
    pub fail: Option<String>,
    /// Only on a single-matcher WAIT.
    pub capture: Option<String>,
    pub accept_data: bool,
}
