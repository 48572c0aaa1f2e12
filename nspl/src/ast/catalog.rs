//! Catalog statements of DESIGN §7: domains, schemas, wire schemas, codecs, branches, relays,
//! clients, vhosts, endpoints, resources, users, subscriptions and cluster commands.
//!
//! Passwords live in this tree as written, because the canonical text must round-trip; use
//! [`CatalogStmt::redacted`] (or `render::catalog::render_redacted`) before logging a statement.
//!
//! Grammar decisions where DESIGN §7 is silent:
//! - `UNPACED` is the default and is not rendered: `CREATE UNPACED DOMAIN d` prints as
//!   `CREATE DOMAIN d`. A paced domain needs both PERIOD (above 0s) and SKEW.
//! - Schema fields take `SENSITIVE` and `OPTIONAL` in either order, each once; the canonical
//!   order is `SENSITIVE OPTIONAL`. A field list is never empty and names no field twice.
//! - `ALTER SCHEMA s` takes comma-separated operations applied in order; each `ALTER FIELD f`
//!   carries one action (`SET TYPE T`, `SET OPTIONAL` or `DROP OPTIONAL`).
//! - Wire type names are keywords, matched case-insensitively and rendered in lower case as
//!   DESIGN writes them. JSON and CBOR wire schemas require `MODE STRICT | LOOSE`; AVRO takes no
//!   MODE. AVRO composites are `record(f T, …)`, `enum('A', …)` (Avro names, none twice),
//!   `array<T>`, `map<T>` (string keys) and `fixed(n)` with `n >= 1`. Wire field names are
//!   external keys: bare when lower-case identifiers, otherwise quoted (`'orderId'`).
//! - JAQ codecs read `JSON`, `CBOR`, `YAML`, `TOML` or `XML` and take `ON INGESTION`,
//!   `ON EMITTING` or both, in that order; programs are non-empty. Wire codecs take
//!   `ENCODE f AS RFC3339`, each field once.
//! - `CREATE CLIENT` clause order is TYPE, `WITH SIGNALING PROTOCOL` (TYPE WEBSOCKETS only),
//!   MOUNT, `POOL SIZE` (TYPE REDIS and POSTGRES only, the database pools), CONFIG (required,
//!   no key twice). `ALTER CLIENT c` takes `SET MOUNT …`, `SET POOL SIZE n` and
//!   `SET CONFIG {…}`, each at most once, comma-separated; SET MOUNT and SET CONFIG replace
//!   the whole list or map.
//! - VHOST hosts are DNS names (labels of letters, digits and `-`), written bare when every
//!   label is a word (`api.example.com`), quoted otherwise (`'my-api.example.com'`); no host
//!   twice, compared case-insensitively. Endpoint PATHs start with `/`.
//! - `ALTER USER u` takes `SET PASSWORD '…'` and `SET ROLE R`, each at most once; passwords
//!   are non-empty. `BATCH SAMPLE RATE` is in (0, 1].
//! - `RELOCATE` moves only placed entities (relays, ingestors, processors, emitters), each
//!   once; `FOLLOW PREFERENCES` or `IGNORE PREFERENCES` is required.
//! - Counts (`CAPACITY`, `MAX INSTANCES`, `POOL SIZE`) are at least 1; TTL is above 0s.

use super::{Branching, ConfigMap, ConfigValue, Duration, Expr, Ident, ObjectKind};
use super::{ResourceVersion, TypeName};
use crate::span::Span;

/// What [`CatalogStmt::redacted`] writes in place of a secret.
pub const MASKED: &str = "<masked>";

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum CatalogStmt {
    CreateDomain(CreateDomain),
    CreateSchema(CreateSchema),
    AlterSchema(AlterSchema),
    CreateWireSchema(CreateWireSchema),
    CreateCodec(CreateCodec),
    CreateBranch(CreateBranch),
    CreateRelay(CreateRelay),
    CreateClient(CreateClient),
    AlterClient(AlterClient),
    CreateVhost(CreateVhost),
    CreateEndpoint(CreateEndpoint),
    CreateResource(CreateResource),
    /// `UPLOAD RESOURCE <r> FROM '<dir>'`: stores a new version of the resource.
    UploadResource {
        resource: Ident,
        path: String,
    },
    RebindResource(RebindResource),
    CreateUser(CreateUser),
    AlterUser(AlterUser),
    CreateSubscription(CreateSubscription),
    /// `SHOW CLUSTER STATUS`.
    ShowClusterStatus,
    /// `CORDON NODE n`, `UNCORDON NODE n`, `DRAIN NODE n`.
    Node {
        command: NodeCommand,
        node: Ident,
    },
    Relocate(Relocate),
}

// ----- domains -----

/// `CREATE [IF NOT EXISTS] [UNPACED] DOMAIN d` or `CREATE PACED DOMAIN d WITH PERIOD p SKEW s`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateDomain {
    pub if_not_exists: bool,
    pub name: Ident,
    pub pacing: Pacing,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum Pacing {
    /// The default; `UNPACED` may be written but is not rendered.
    Unpaced,
    Paced {
        period: Duration,
        skew: Duration,
    },
}

// ----- schemas -----

/// `CREATE SCHEMA s (field TYPE [SENSITIVE] [OPTIONAL], …)`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateSchema {
    pub if_not_exists: bool,
    pub name: Ident,
    pub fields: Vec<SchemaField>,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct SchemaField {
    pub name: Ident,
    pub ty: TypeName,
    pub sensitive: bool,
    pub optional: bool,
}

/// `ALTER SCHEMA s <operation>, …`, applied in order.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct AlterSchema {
    pub name: Ident,
    pub operations: Vec<SchemaOperation>,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum SchemaOperation {
    /// `ADD FIELD f T [SENSITIVE] [OPTIONAL]`.
    AddField(SchemaField),
    /// `DROP FIELD f`.
    DropField(Ident),
    /// `RENAME FIELD a TO b`.
    RenameField { from: Ident, to: Ident },
    /// `ALTER FIELD f SET TYPE T`.
    SetType { field: Ident, ty: TypeName },
    /// `ALTER FIELD f SET OPTIONAL`.
    SetOptional(Ident),
    /// `ALTER FIELD f DROP OPTIONAL`.
    DropOptional(Ident),
}

// ----- wire schemas -----

/// The encodings a wire schema or wire codec describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum WireFormat {
    Json,
    Cbor,
    Avro,
}

impl WireFormat {
    pub const ALL: [WireFormat; 3] = [WireFormat::Json, WireFormat::Cbor, WireFormat::Avro];

    pub fn keyword(self) -> &'static str {
        match self {
            WireFormat::Json => "JSON",
            WireFormat::Cbor => "CBOR",
            WireFormat::Avro => "AVRO",
        }
    }
}

/// `MODE STRICT` refuses keys the wire schema does not declare; `MODE LOOSE` ignores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum WireMode {
    Strict,
    Loose,
}

/// `CREATE WIRE JSON|CBOR SCHEMA w MODE m (…)` or `CREATE WIRE AVRO SCHEMA w (…)`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateWireSchema {
    pub if_not_exists: bool,
    pub name: Ident,
    pub definition: WireDefinition,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum WireDefinition {
    Json {
        mode: WireMode,
        fields: Vec<WireField<DocType>>,
    },
    Cbor {
        mode: WireMode,
        fields: Vec<WireField<DocType>>,
    },
    Avro {
        fields: Vec<WireField<AvroType>>,
    },
}

impl WireDefinition {
    pub fn format(&self) -> WireFormat {
        match self {
            WireDefinition::Json { .. } => WireFormat::Json,
            WireDefinition::Cbor { .. } => WireFormat::Cbor,
            WireDefinition::Avro { .. } => WireFormat::Avro,
        }
    }
}

/// One field of a wire schema. The name is an external key, kept exactly: written bare when it
/// is a lower-case identifier, quoted otherwise (`'orderId'`).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct WireField<T> {
    pub name: String,
    pub span: Span,
    pub ty: T,
    pub optional: bool,
}

/// A JSON or CBOR wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum DocType {
    String,
    Number,
    Integer,
    Boolean,
    Object,
    Array,
    Null,
}

impl DocType {
    pub const ALL: [DocType; 7] = [
        DocType::String,
        DocType::Number,
        DocType::Integer,
        DocType::Boolean,
        DocType::Object,
        DocType::Array,
        DocType::Null,
    ];

    /// The lower-case word DESIGN §7 writes for the type.
    pub fn word(self) -> &'static str {
        match self {
            DocType::String => "string",
            DocType::Number => "number",
            DocType::Integer => "integer",
            DocType::Boolean => "boolean",
            DocType::Object => "object",
            DocType::Array => "array",
            DocType::Null => "null",
        }
    }
}

/// An AVRO wire type. Composites are written `record(f T, …)`, `enum('A', 'B')`,
/// `array<T>`, `map<T>` (keys are strings, as in Avro) and `fixed(16)`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
#[cfg_attr(
    feature = "rkyv",
    rkyv(
        serialize_bounds(
            __S: rkyv::ser::Writer + rkyv::ser::Allocator,
            __S::Error: rkyv::rancor::Source,
        ),
        deserialize_bounds(__D::Error: rkyv::rancor::Source),
        bytecheck(bounds(
            __C: rkyv::validation::ArchiveContext,
            __C::Error: rkyv::rancor::Source,
        )),
    )
)]
pub enum AvroType {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Record(#[cfg_attr(feature = "rkyv", rkyv(omit_bounds))] Vec<WireField<AvroType>>),
    Enum(Vec<String>),
    Array(#[cfg_attr(feature = "rkyv", rkyv(omit_bounds))] Box<AvroType>),
    Map(#[cfg_attr(feature = "rkyv", rkyv(omit_bounds))] Box<AvroType>),
    Fixed(u64),
}

// ----- codecs -----

/// `CREATE CODEC c FROM … TO SCHEMA s …`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateCodec {
    pub if_not_exists: bool,
    pub name: Ident,
    pub source: CodecSource,
    pub schema: Ident,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum CodecSource {
    /// `FROM WIRE <format> SCHEMA w … [ENCODE f AS RFC3339, …]`.
    Wire {
        format: WireFormat,
        wire_schema: Ident,
        encodings: Vec<FieldEncoding>,
    },
    /// `FROM <format> … WITH JAQ TRANSFORMATIONS [ON INGESTION '…'] [ON EMITTING '…']`
    /// (at least one of the two programs).
    Jaq {
        format: JaqFormat,
        on_ingestion: Option<String>,
        on_emitting: Option<String>,
    },
}

/// The document formats a JAQ codec reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum JaqFormat {
    Json,
    Cbor,
    Yaml,
    Toml,
    Xml,
}

impl JaqFormat {
    pub const ALL: [JaqFormat; 5] = [
        JaqFormat::Json,
        JaqFormat::Cbor,
        JaqFormat::Yaml,
        JaqFormat::Toml,
        JaqFormat::Xml,
    ];

    pub fn keyword(self) -> &'static str {
        match self {
            JaqFormat::Json => "JSON",
            JaqFormat::Cbor => "CBOR",
            JaqFormat::Yaml => "YAML",
            JaqFormat::Toml => "TOML",
            JaqFormat::Xml => "XML",
        }
    }
}

/// `ENCODE <field> AS RFC3339`: how a DATETIME field travels as a wire string.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct FieldEncoding {
    pub field: Ident,
    pub encoding: DatetimeEncoding,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum DatetimeEncoding {
    Rfc3339,
}

// ----- branches and relays -----

/// `CREATE BRANCH b SCHEMA s TTL d [MAX INSTANCES n EVICT LRU]`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateBranch {
    pub if_not_exists: bool,
    pub name: Ident,
    pub schema: Ident,
    pub ttl: Duration,
    /// `MAX INSTANCES n EVICT LRU` (LRU is the only eviction).
    pub max_instances: Option<u64>,
}

/// `CREATE RELAY r SCHEMA s BRANCHED BY b | UNBRANCHED [CAPACITY n]
/// [WITH MATERIALIZED STATE LAST BY TIMESTAMP]`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateRelay {
    pub if_not_exists: bool,
    pub name: Ident,
    pub schema: Ident,
    pub branching: Branching,
    pub capacity: Option<u64>,
    pub materialized: bool,
}

// ----- clients, vhosts, endpoints, resources -----

/// The connector a client speaks, after `TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum ClientType {
    Kafka,
    Http,
    Prometheus,
    Websockets,
    Mqtt,
    Nats,
    Pulsar,
    Rabbitmq,
    Redis,
    Sqs,
    Syslog,
    Zeromq,
    Postgres,
    File,
}

impl ClientType {
    pub const ALL: [ClientType; 14] = [
        ClientType::Kafka,
        ClientType::Http,
        ClientType::Prometheus,
        ClientType::Websockets,
        ClientType::Mqtt,
        ClientType::Nats,
        ClientType::Pulsar,
        ClientType::Rabbitmq,
        ClientType::Redis,
        ClientType::Sqs,
        ClientType::Syslog,
        ClientType::Zeromq,
        ClientType::Postgres,
        ClientType::File,
    ];

    pub fn keyword(self) -> &'static str {
        match self {
            ClientType::Kafka => "KAFKA",
            ClientType::Http => "HTTP",
            ClientType::Prometheus => "PROMETHEUS",
            ClientType::Websockets => "WEBSOCKETS",
            ClientType::Mqtt => "MQTT",
            ClientType::Nats => "NATS",
            ClientType::Pulsar => "PULSAR",
            ClientType::Rabbitmq => "RABBITMQ",
            ClientType::Redis => "REDIS",
            ClientType::Sqs => "SQS",
            ClientType::Syslog => "SYSLOG",
            ClientType::Zeromq => "ZEROMQ",
            ClientType::Postgres => "POSTGRES",
            ClientType::File => "FILE",
        }
    }

    /// Whether the client keeps a database connection pool (`POOL SIZE n`).
    pub fn has_pool(self) -> bool {
        matches!(self, ClientType::Redis | ClientType::Postgres)
    }
}

/// `<resource> VERSION n|LATEST` in a MOUNT list.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Mount {
    pub resource: Ident,
    pub version: ResourceVersion,
}

/// `CREATE CLIENT c TYPE T [WITH SIGNALING PROTOCOL p] [MOUNT r VERSION v, …] [POOL SIZE n]
/// CONFIG {…}`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateClient {
    pub if_not_exists: bool,
    pub name: Ident,
    pub client_type: ClientType,
    /// Only with `TYPE WEBSOCKETS`.
    pub signaling_protocol: Option<Ident>,
    pub mounts: Vec<Mount>,
    /// Only with `TYPE REDIS` and `TYPE POSTGRES`.
    pub pool_size: Option<u64>,
    pub config: ConfigMap,
}

/// `ALTER CLIENT c <operation>, …`, applied in order.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct AlterClient {
    pub name: Ident,
    pub operations: Vec<ClientOperation>,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum ClientOperation {
    /// `SET MOUNT r VERSION v, …`: replaces the whole mount list.
    SetMount(Vec<Mount>),
    /// `SET POOL SIZE n`.
    SetPoolSize(u64),
    /// `SET CONFIG {…}`: replaces the whole configuration.
    SetConfig(ConfigMap),
}

/// `CREATE VHOST v host, … [WITH TLS r VERSION n|LATEST]`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateVhost {
    pub if_not_exists: bool,
    pub name: Ident,
    /// DNS names, kept exactly as written.
    pub hosts: Vec<String>,
    pub tls: Option<Mount>,
}

/// The protocol an endpoint serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum EndpointType {
    Http,
    Websockets,
}

impl EndpointType {
    pub fn keyword(self) -> &'static str {
        match self {
            EndpointType::Http => "HTTP",
            EndpointType::Websockets => "WEBSOCKETS",
        }
    }
}

/// `CREATE ENDPOINT e ON v PATH '/p' TYPE HTTP|WEBSOCKETS [WITH SIGNALING PROTOCOL p]`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateEndpoint {
    pub if_not_exists: bool,
    pub name: Ident,
    pub vhost: Ident,
    pub path: String,
    pub endpoint_type: EndpointType,
    /// Only with `TYPE WEBSOCKETS`.
    pub signaling_protocol: Option<Ident>,
}

/// `CREATE RESOURCE r`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateResource {
    pub if_not_exists: bool,
    pub name: Ident,
}

/// `REBIND RESOURCE r TO VERSION n|LATEST [FOR VHOST v, …]`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct RebindResource {
    pub resource: Ident,
    pub version: ResourceVersion,
    /// Empty: every user of the resource.
    pub vhosts: Vec<Ident>,
}

// ----- users -----

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum Role {
    Admin,
    Operator,
    Reader,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Admin, Role::Operator, Role::Reader];

    pub fn keyword(self) -> &'static str {
        match self {
            Role::Admin => "ADMIN",
            Role::Operator => "OPERATOR",
            Role::Reader => "READER",
        }
    }
}

/// `CREATE USER u WITH PASSWORD '…' ROLE R`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateUser {
    pub if_not_exists: bool,
    pub name: Ident,
    /// A secret: see [`CatalogStmt::redacted`].
    pub password: String,
    pub role: Role,
}

/// `ALTER USER u SET PASSWORD '…' | SET ROLE R, …`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct AlterUser {
    pub name: Ident,
    pub operations: Vec<UserOperation>,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum UserOperation {
    /// A secret: see [`CatalogStmt::redacted`].
    SetPassword(String),
    SetRole(Role),
}

// ----- subscriptions -----

/// `CREATE SUBSCRIPTION s TO relay [WHERE expr] [BATCH SAMPLE RATE r]`, `0 < r <= 1`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateSubscription {
    pub if_not_exists: bool,
    pub name: Ident,
    pub relay: Ident,
    pub filter: Option<Expr>,
    pub sample_rate: Option<f64>,
}

// ----- cluster -----

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum NodeCommand {
    Cordon,
    Uncordon,
    Drain,
}

impl NodeCommand {
    pub fn keyword(self) -> &'static str {
        match self {
            NodeCommand::Cordon => "CORDON",
            NodeCommand::Uncordon => "UNCORDON",
            NodeCommand::Drain => "DRAIN",
        }
    }
}

/// `RELOCATE <kind> <name>, … ONTO NODE n FOLLOW PREFERENCES | IGNORE PREFERENCES`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Relocate {
    pub targets: Vec<(ObjectKind, Ident)>,
    pub node: Ident,
    pub follow_preferences: bool,
}

// ----- redaction -----

/// CONFIG keys whose string values [`CatalogStmt::redacted`] masks: any key containing one of
/// these words, case-insensitively (`sasl.password`, `ssl.key.password`, `api_token`, …).
const SECRET_KEY_WORDS: [&str; 8] = [
    "password",
    "passwd",
    "secret",
    "token",
    "credential",
    "apikey",
    "api_key",
    "private_key",
];

/// Whether a CONFIG key names a secret value.
pub fn is_secret_config_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_KEY_WORDS.iter().any(|w| key.contains(w))
}

fn redact_config(config: &mut ConfigMap) {
    for (key, value) in &mut config.entries {
        if is_secret_config_key(key) {
            *value = ConfigValue::String(MASKED.to_string());
        }
    }
}

impl CatalogStmt {
    /// A copy fit for logs: passwords, and CONFIG values whose key names a secret (see
    /// [`is_secret_config_key`]), become `'<masked>'`. The copy still renders and parses.
    pub fn redacted(&self) -> CatalogStmt {
        let mut copy = self.clone();
        match &mut copy {
            CatalogStmt::CreateUser(user) => user.password = MASKED.to_string(),
            CatalogStmt::AlterUser(alter) => {
                for op in &mut alter.operations {
                    if let UserOperation::SetPassword(password) = op {
                        *password = MASKED.to_string();
                    }
                }
            }
            CatalogStmt::CreateClient(client) => redact_config(&mut client.config),
            CatalogStmt::AlterClient(alter) => {
                for op in &mut alter.operations {
                    if let ClientOperation::SetConfig(config) = op {
                        redact_config(config);
                    }
                }
            }
            _ => {}
        }
        copy
    }
}
