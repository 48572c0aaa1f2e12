//! The NSPL abstract syntax tree.
//!
//! One module per statement family; this module holds the shared leaves (names, durations,
//! sizes, types) and the [`Statement`] enum that ties the families together. The tree is
//! deliberately plain data: the catalog (engine) turns it into validated, typed models, and the
//! canonical renderer turns it back into text. Spans never affect equality (see [`Span`]).
//!
//! With the `rkyv` feature every node (and [`Span`]) also derives rkyv's `Archive`, `Serialize`
//! and `Deserialize`, with bytecheck validation of archived bytes. The recursive types
//! ([`Expr`] through [`ExprKind`], [`TypeName`], [`catalog::AvroType`]) omit the derive's
//! bounds on their recursive fields and state the serializer, deserializer and validator
//! bounds by hand.

pub mod catalog;
pub mod emitter;
pub mod expr;
pub mod ingestor;
pub mod processor;
pub mod route;
pub mod session;

pub use catalog::CatalogStmt;
pub use emitter::EmitterStmt;
pub use expr::{BinaryOp, Expr, ExprKind, Literal, UnaryOp};
pub use ingestor::IngestorStmt;
pub use processor::ProcessorStmt;
pub use route::*;
pub use session::{ObjectKind, SessionStmt};

use crate::span::Span;

/// A lower-case identifier naming a model, field or scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

impl Ident {
    pub fn new(name: impl Into<String>) -> Ident {
        Ident {
            name: name.into(),
            span: Span::default(),
        }
    }
}

impl std::fmt::Display for Ident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// A duration in nanoseconds, written `250ms`, `5s`, `10m`, `1h`, `1d`, `100us`, `10ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Duration {
    pub nanos: u64,
}

/// A byte count, written `512KiB`, `1MiB`, `8MiB`, `1GiB`, `100B`, `1KB`, `1MB`, `1GB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct ByteSize {
    pub bytes: u64,
}

/// A value type of the data model (DESIGN §4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
pub enum TypeName {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
    Bool,
    String,
    Datetime,
    Bytes,
    /// Fixed-size list with one or more dimensions: `ARRAY<F32, 2, 3>`.
    Array(
        #[cfg_attr(feature = "rkyv", rkyv(omit_bounds))] Box<TypeName>,
        Vec<u32>,
    ),
    /// Variable-length list: `VEC<I64>`.
    Vec(#[cfg_attr(feature = "rkyv", rkyv(omit_bounds))] Box<TypeName>),
    /// Header values: `LIST<STRING>`.
    List(#[cfg_attr(feature = "rkyv", rkyv(omit_bounds))] Box<TypeName>),
}

/// `VERSION <n>` or `VERSION LATEST` of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum ResourceVersion {
    Number(u64),
    Latest,
}

/// A literal in a `CONFIG { 'key' = value, … }` map or a constant record.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum ConfigValue {
    String(String),
    Integer(i64),
    Decimal(f64),
    Bool(bool),
}

/// `CONFIG { 'key' = value, … }`: keys are external names, kept exactly.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct ConfigMap {
    pub entries: Vec<(String, ConfigValue)>,
}

/// What precedes the kind in a CREATE: `CREATE [IF NOT EXISTS] [ATTACHED | DETACHED]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreatePrefix {
    pub if_not_exists: bool,
    pub attachment: Option<Attachment>,
}

/// Whether a node holds upstream acknowledgements until its output is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum Attachment {
    Attached,
    Detached,
}

/// One complete NSPL statement.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum Statement {
    Session(SessionStmt),
    Catalog(CatalogStmt),
    Ingestor(IngestorStmt),
    Processor(ProcessorStmt),
    Emitter(EmitterStmt),
}

/// A statement with the span of its text (from its first token to its `;`).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Spanned {
    pub statement: Statement,
    pub span: Span,
}
