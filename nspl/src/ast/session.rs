//! Session and inspection statements: USE, START/STOP, transactions, and the uniform
//! SHOW / SHOW CREATE / DESCRIBE / DROP over every kind of entity.

use super::Ident;

/// Every kind of named entity, as SHOW, SHOW CREATE, DESCRIBE and DROP address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum ObjectKind {
    Domain,
    Schema,
    WireSchema,
    Codec,
    Branch,
    Relay,
    Client,
    Vhost,
    Endpoint,
    Resource,
    SignalingProtocol,
    Ingestor,
    Emitter,
    Junction,
    Deduplicator,
    Reorderer,
    WindowProcessor,
    Inferencer,
    WasmProcessor,
    Correlator,
    Reingestor,
    Generator,
    User,
    Subscription,
    Node,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 25] = [
        ObjectKind::Domain,
        ObjectKind::Schema,
        ObjectKind::WireSchema,
        ObjectKind::Codec,
        ObjectKind::Branch,
        ObjectKind::Relay,
        ObjectKind::Client,
        ObjectKind::Vhost,
        ObjectKind::Endpoint,
        ObjectKind::Resource,
        ObjectKind::SignalingProtocol,
        ObjectKind::Ingestor,
        ObjectKind::Emitter,
        ObjectKind::Junction,
        ObjectKind::Deduplicator,
        ObjectKind::Reorderer,
        ObjectKind::WindowProcessor,
        ObjectKind::Inferencer,
        ObjectKind::WasmProcessor,
        ObjectKind::Correlator,
        ObjectKind::Reingestor,
        ObjectKind::Generator,
        ObjectKind::User,
        ObjectKind::Subscription,
        ObjectKind::Node,
    ];

    /// The keywords naming one entity of this kind, e.g. `["WINDOW", "PROCESSOR"]`.
    pub fn keywords(self) -> &'static [&'static str] {
        match self {
            ObjectKind::Domain => &["DOMAIN"],
            ObjectKind::Schema => &["SCHEMA"],
            ObjectKind::WireSchema => &["WIRE", "SCHEMA"],
            ObjectKind::Codec => &["CODEC"],
            ObjectKind::Branch => &["BRANCH"],
            ObjectKind::Relay => &["RELAY"],
            ObjectKind::Client => &["CLIENT"],
            ObjectKind::Vhost => &["VHOST"],
            ObjectKind::Endpoint => &["ENDPOINT"],
            ObjectKind::Resource => &["RESOURCE"],
            ObjectKind::SignalingProtocol => &["SIGNALING", "PROTOCOL"],
            ObjectKind::Ingestor => &["INGESTOR"],
            ObjectKind::Emitter => &["EMITTER"],
            ObjectKind::Junction => &["JUNCTION"],
            ObjectKind::Deduplicator => &["DEDUPLICATOR"],
            ObjectKind::Reorderer => &["REORDERER"],
            ObjectKind::WindowProcessor => &["WINDOW", "PROCESSOR"],
            ObjectKind::Inferencer => &["INFERENCER"],
            ObjectKind::WasmProcessor => &["WASM", "PROCESSOR"],
            ObjectKind::Correlator => &["CORRELATOR"],
            ObjectKind::Reingestor => &["REINGESTOR"],
            ObjectKind::Generator => &["GENERATOR"],
            ObjectKind::User => &["USER"],
            ObjectKind::Subscription => &["SUBSCRIPTION"],
            ObjectKind::Node => &["NODE"],
        }
    }

    /// The keywords listing all entities of this kind, e.g. `["WINDOW", "PROCESSORS"]`.
    pub fn plural_keywords(self) -> &'static [&'static str] {
        match self {
            ObjectKind::Domain => &["DOMAINS"],
            ObjectKind::Schema => &["SCHEMAS"],
            ObjectKind::WireSchema => &["WIRE", "SCHEMAS"],
            ObjectKind::Codec => &["CODECS"],
            ObjectKind::Branch => &["BRANCHES"],
            ObjectKind::Relay => &["RELAYS"],
            ObjectKind::Client => &["CLIENTS"],
            ObjectKind::Vhost => &["VHOSTS"],
            ObjectKind::Endpoint => &["ENDPOINTS"],
            ObjectKind::Resource => &["RESOURCES"],
            ObjectKind::SignalingProtocol => &["SIGNALING", "PROTOCOLS"],
            ObjectKind::Ingestor => &["INGESTORS"],
            ObjectKind::Emitter => &["EMITTERS"],
            ObjectKind::Junction => &["JUNCTIONS"],
            ObjectKind::Deduplicator => &["DEDUPLICATORS"],
            ObjectKind::Reorderer => &["REORDERERS"],
            ObjectKind::WindowProcessor => &["WINDOW", "PROCESSORS"],
            ObjectKind::Inferencer => &["INFERENCERS"],
            ObjectKind::WasmProcessor => &["WASM", "PROCESSORS"],
            ObjectKind::Correlator => &["CORRELATORS"],
            ObjectKind::Reingestor => &["REINGESTORS"],
            ObjectKind::Generator => &["GENERATORS"],
            ObjectKind::User => &["USERS"],
            ObjectKind::Subscription => &["SUBSCRIPTIONS"],
            ObjectKind::Node => &["NODES"],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum DescribeFormat {
    Text,
    Json,
}

/// When a START begins the domain clock.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum StartAt {
    /// `START;`: run on the present clock.
    Default,
    /// `START AT NOW [TIME RATE f]`.
    Now { time_rate: Option<f64> },
    /// `START AT '<RFC 3339 instant>' [TIME RATE f]`.
    Instant {
        instant: String,
        time_rate: Option<f64>,
    },
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum SessionStmt {
    Use(Ident),
    Start(StartAt),
    Stop,
    Begin,
    Commit,
    Revert,
    /// `SHOW <KIND>S` (and `SHOW ROLES`).
    ShowAll(ObjectKind),
    ShowRoles,
    ShowCreate {
        kind: ObjectKind,
        name: Ident,
    },
    Describe {
        kind: ObjectKind,
        name: Ident,
        format: DescribeFormat,
    },
    Drop {
        kind: ObjectKind,
        if_exists: bool,
        name: Ident,
    },
}
