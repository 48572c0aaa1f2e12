//! The pieces every node shares: input lists, collection, materialized state, output routes,
//! flush and error policies, and delivery/quiesce bodies of sources.

use super::{ByteSize, Duration, Expr, Ident};

/// `FROM <relay> [WHERE <expr>]`, one input of a processor or emitter.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Input {
    pub relay: Ident,
    pub filter: Option<Expr>,
}

/// `COLLECT FOR <duration> [MAX BATCH SIZE <bytes>]`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Collect {
    pub interval: Duration,
    pub max_batch_size: Option<ByteSize>,
}

/// `BRANCHED BY <branch>` or `UNBRANCHED` as a node-wide contract.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum Branching {
    BranchedBy(Ident),
    Unbranched,
}

/// `USING MATERIALIZED STATE <relay> <policy>`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct StateDependency {
    pub relay: Ident,
    pub policy: StatePolicy,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum StatePolicy {
    /// `DEFAULT { field = constant, … }`.
    Default(Vec<Assignment>),
    RequiredSkip,
    RequiredWait,
}

/// `field = expr` in SET lists and constant records.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Assignment {
    pub target: Ident,
    pub value: Expr,
}

/// `INHERIT ALL [EXCEPT a, b]` or `INHERIT a, b`, optionally `LEAK SENSITIVE`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Inherit {
    pub fields: InheritFields,
    pub leak_sensitive: bool,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum InheritFields {
    All { except: Vec<Ident> },
    Only(Vec<Ident>),
}

/// A route's outgoing branch: `BRANCHED BY <branch> [SET key = expr, …]` or `UNBRANCHED`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum RouteBranching {
    BranchedBy { branch: Ident, set: Vec<Assignment> },
    Unbranched,
}

/// `FLUSH EACH <duration> MAX BATCH SIZE <bytes>` or `FLUSH IMMEDIATE`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum Flush {
    Each {
        interval: Duration,
        max_batch_size: ByteSize,
    },
    Immediate,
}

/// `ON MESSAGE ERROR IGNORE | LOG | SEND TO <relay> [SET …]`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum MessageErrorPolicy {
    Ignore,
    Log,
    SendTo { relay: Ident, set: Vec<Assignment> },
}

/// `ON GENERAL ERROR IGNORE | LOG` (and the WASM processor's `ON GLOBAL ERROR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum GeneralErrorPolicy {
    Ignore,
    Log,
}

/// `TO <relay> …`: one output route. Which clauses a route may or must hold depends on its
/// node; see [`crate::parse::route::RouteRules`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Route {
    pub target: Ident,
    pub inherit: Option<Inherit>,
    pub set: Vec<Assignment>,
    pub filter: Option<Expr>,
    pub branching: Option<RouteBranching>,
    pub flush: Option<Flush>,
    pub on_error: MessageErrorPolicy,
}

/// `MODE …` of a source or sink.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum DeliveryMode {
    NoAck,
    AckSequential {
        ack_timeout: Duration,
        retry: RetryPolicy,
    },
    AckParallel {
        max: u64,
        /// Absent for CLIENT PRODUCER ingestors and emitters.
        batch_timeout: Option<Duration>,
        ack_timeout: Duration,
        retry: RetryPolicy,
    },
}

/// `RETRY POLICY BACKOFF <duration> MAX <duration>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct RetryPolicy {
    pub backoff: Duration,
    pub max: Duration,
}

/// `ON QUIESCE <body>`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum QuiesceMode {
    Suspend,
    /// `BUFFER MAX SIZE <bytes> [ON OVERFLOW DROP OLDEST | DROP NEWEST]`; endpoints omit the
    /// overflow policy.
    Buffer {
        max_size: ByteSize,
        overflow: Option<OverflowPolicy>,
    },
    Drop,
    RejectRetryAfter(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum OverflowPolicy {
    DropOldest,
    DropNewest,
}
