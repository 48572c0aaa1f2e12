//! Processors (`spec/processors.md`): junction, deduplicator, reorderer, window processor,
//! inferencer, WASM processor, correlator, reingestor and generator, their ALTER operations,
//! and RESET WASM PROCESSOR.
//!
//! Every CREATE shares one frame ([`CreateProcessor`]: name, node-wide branching,
//! materialized-state dependencies, routes) around a kind-specific [`ProcessorDef`] that holds
//! what the kind consumes and the clauses only it has. Clause order in canonical text follows
//! the spec: inputs, collection, filter, kind clauses, branching, state, routes, kind tail.

use super::{
    Assignment, Attachment, Branching, ByteSize, Collect, Duration, Expr, GeneralErrorPolicy,
    Ident, Input, ObjectKind, ResourceVersion, Route, StateDependency, TypeName,
};

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum ProcessorStmt {
    /// Boxed: a CREATE is far larger than the other statements.
    Create(Box<CreateProcessor>),
    Alter(AlterProcessor),
    ResetWasm(ResetWasm),
}

/// `CREATE [IF NOT EXISTS] [ATTACHED | DETACHED] <kind> <name> …`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CreateProcessor {
    pub if_not_exists: bool,
    /// Absent means the default (ATTACHED); generators never carry one.
    pub attachment: Option<Attachment>,
    pub name: Ident,
    pub def: ProcessorDef,
    /// The node-wide contract; `None` only for reingestors, whose routes carry branching.
    pub branching: Option<Branching>,
    /// `USING MATERIALIZED STATE …` in written order (generators name their one relay in
    /// [`ProcessorDef::Generator`] instead).
    pub state: Vec<StateDependency>,
    pub routes: Vec<Route>,
}

/// `FROM <relay> [WHERE …], … [COLLECT FOR …] [FILTER WHERE …]`: what an ordinary processor
/// consumes.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct RelayFeed {
    pub inputs: Vec<Input>,
    pub collect: Option<Collect>,
    /// Node-wide `FILTER WHERE`.
    pub filter: Option<Expr>,
}

/// One correlator side: `LEFT FROM … [COLLECT FOR …]` or `RIGHT FROM … [COLLECT FOR …]`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CorrelatorSide {
    pub inputs: Vec<Input>,
    pub collect: Option<Collect>,
}

/// The kind of a processor with the clauses only that kind has.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum ProcessorDef {
    Junction {
        feed: RelayFeed,
    },
    Deduplicator {
        feed: RelayFeed,
        /// `DEDUPLICATE ON <expr>, …`.
        on: Vec<Expr>,
        max_time: Duration,
    },
    Reorderer {
        feed: RelayFeed,
        /// `BY <expr>, …`.
        by: Vec<Expr>,
        max_time: Duration,
    },
    Window {
        feed: RelayFeed,
        width: WindowExtent,
        step: WindowExtent,
        max_state_size: Option<ByteSize>,
    },
    Inferencer {
        feed: RelayFeed,
        model: ResourceFile,
        inputs: Vec<TensorInput>,
        outputs: Vec<Tensor>,
    },
    Wasm {
        feed: RelayFeed,
        module: ResourceFile,
        max_fuel: u64,
        max_memory: ByteSize,
        /// `ON REJECTED STATE …` after the routes; absent means PRESERVE.
        on_rejected_state: Option<RejectedStatePolicy>,
        /// `ON GLOBAL ERROR …` after the routes.
        on_global_error: Option<GeneralErrorPolicy>,
    },
    Correlator {
        left: CorrelatorSide,
        right: CorrelatorSide,
        /// `CORRELATE WHERE <expr>`.
        condition: Expr,
        matching: MatchMode,
        max_time: Duration,
        on_timeout: CorrelationTimeout,
    },
    Reingestor {
        feed: RelayFeed,
    },
    Generator {
        /// `USING MATERIALIZED STATE <relay>`: the one relay generation reads.
        source: Ident,
        /// `EACH <duration>`.
        each: Duration,
    },
}

impl ProcessorDef {
    pub fn kind(&self) -> ObjectKind {
        match self {
            ProcessorDef::Junction { .. } => ObjectKind::Junction,
            ProcessorDef::Deduplicator { .. } => ObjectKind::Deduplicator,
            ProcessorDef::Reorderer { .. } => ObjectKind::Reorderer,
            ProcessorDef::Window { .. } => ObjectKind::WindowProcessor,
            ProcessorDef::Inferencer { .. } => ObjectKind::Inferencer,
            ProcessorDef::Wasm { .. } => ObjectKind::WasmProcessor,
            ProcessorDef::Correlator { .. } => ObjectKind::Correlator,
            ProcessorDef::Reingestor { .. } => ObjectKind::Reingestor,
            ProcessorDef::Generator { .. } => ObjectKind::Generator,
        }
    }
}

/// `WIDTH`/`STEP` of a window: `<duration> DURATION` or `<n> ROWS` (count windows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum WindowExtent {
    Duration(Duration),
    Rows(u64),
}

/// `USING RESOURCE <resource> VERSION <n> | LATEST FILE '<file>'`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct ResourceFile {
    pub resource: Ident,
    pub version: ResourceVersion,
    /// The file inside the resource version, kept exactly.
    pub file: String,
}

/// `'<name>' DENSE TENSOR<T>[d, …]`: one model tensor.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Tensor {
    /// The model's tensor name, kept exactly.
    pub name: String,
    /// A scalar element type.
    pub element: TypeName,
    /// One or more positive dimensions.
    pub dims: Vec<u64>,
}

/// `<tensor> = <expr>`: one entry of an inferencer's INPUTS.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct TensorInput {
    pub tensor: Tensor,
    pub value: Expr,
}

/// `ON REJECTED STATE PRESERVE | RESET` of a WASM processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum RejectedStatePolicy {
    Preserve,
    Reset,
}

/// `MATCH EARLIEST | LATEST | ALL` of a correlator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum MatchMode {
    Earliest,
    Latest,
    All,
}

/// `ON CORRELATION TIMEOUT <left>, <right>`: what happens to a side's unmatched record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct CorrelationTimeout {
    pub left: TimeoutAction,
    pub right: TimeoutAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum TimeoutAction {
    Drop,
    Log,
}

/// `ALTER <kind> <name> <op>, …`; operations apply in written order.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct AlterProcessor {
    pub kind: ObjectKind,
    pub name: Ident,
    pub ops: Vec<AlterOp>,
}

/// A correlator side named in an ALTER input operation (`ADD LEFT FROM …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum Side {
    Left,
    Right,
}

/// One ALTER operation. Input and collection operations carry a [`Side`] for correlators and
/// none for every other kind.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum AlterOp {
    /// `ADD [LEFT|RIGHT] FROM <relay> [WHERE <expr>]`.
    AddFrom { side: Option<Side>, input: Input },
    /// `DROP [LEFT|RIGHT] FROM <relay>`.
    DropFrom { side: Option<Side>, relay: Ident },
    /// `ALTER [LEFT|RIGHT] FROM <relay> SET WHERE <expr>` (`Some`) or `DROP WHERE` (`None`).
    AlterFrom {
        side: Option<Side>,
        relay: Ident,
        filter: Option<Expr>,
    },
    /// `SET [LEFT|RIGHT] COLLECT FOR …`.
    SetCollect {
        side: Option<Side>,
        collect: Collect,
    },
    /// `DROP [LEFT|RIGHT] COLLECT`.
    DropCollect { side: Option<Side> },
    /// `SET FILTER WHERE <expr>`.
    SetFilter(Expr),
    /// `DROP FILTER WHERE`.
    DropFilter,
    /// `SET ATTACHED | SET DETACHED`.
    SetAttachment(Attachment),
    /// `SET BRANCHED BY <branch> | SET UNBRANCHED`.
    SetBranching(Branching),
    /// `ADD MATERIALIZED STATE <relay> <policy>`.
    AddState(StateDependency),
    /// `DROP MATERIALIZED STATE <relay>`.
    DropState(Ident),
    /// `ALTER MATERIALIZED STATE <relay> SET <policy>`.
    AlterState(StateDependency),
    /// `ADD ROUTE TO <relay> <route body>`.
    AddRoute(Route),
    /// `DROP ROUTE TO <relay>`.
    DropRoute(Ident),
    /// `REPLACE ROUTE TO <relay> <route body>`.
    ReplaceRoute(Route),
    /// `SET DEDUPLICATE ON <expr>, …` (deduplicators).
    SetDeduplicateOn(Vec<Expr>),
    /// `SET MAX TIME <duration>` (deduplicators, reorderers, correlators).
    SetMaxTime(Duration),
    /// `SET BY <expr>, …` (reorderers).
    SetBy(Vec<Expr>),
    /// `SET WIDTH …` (windows).
    SetWidth(WindowExtent),
    /// `SET STEP …` (windows).
    SetStep(WindowExtent),
    /// `SET MAX STATE SIZE <bytes>` (windows).
    SetMaxStateSize(ByteSize),
    /// `DROP MAX STATE SIZE` (windows).
    DropMaxStateSize,
    /// `SET RESOURCE <resource> VERSION … [FILE '<file>']` (inferencers, WASM processors).
    SetResource {
        resource: Ident,
        version: ResourceVersion,
        /// Absent keeps the current file.
        file: Option<String>,
    },
    /// `SET INPUTS { … }` (inferencers).
    SetInputs(Vec<TensorInput>),
    /// `SET OUTPUT SCHEMA { … }` (inferencers).
    SetOutputSchema(Vec<Tensor>),
    /// `SET MAX FUEL <n>` (WASM processors).
    SetMaxFuel(u64),
    /// `SET MAX MEMORY <bytes>` (WASM processors).
    SetMaxMemory(ByteSize),
    /// `SET ON REJECTED STATE PRESERVE | RESET` (WASM processors).
    SetOnRejectedState(RejectedStatePolicy),
    /// `SET ON GLOBAL ERROR IGNORE | LOG` (WASM processors).
    SetOnGlobalError(GeneralErrorPolicy),
    /// `SET CORRELATE WHERE <expr>` (correlators).
    SetCorrelateWhere(Expr),
    /// `SET MATCH …` (correlators).
    SetMatch(MatchMode),
    /// `SET ON CORRELATION TIMEOUT <left>, <right>` (correlators).
    SetCorrelationTimeout(CorrelationTimeout),
    /// `SET MATERIALIZED STATE <relay>` (generators).
    SetSource(Ident),
    /// `SET EACH <duration>` (generators).
    SetEach(Duration),
}

/// `RESET WASM PROCESSOR <p> STATE IN DOMAIN <d> FOR <scope>`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct ResetWasm {
    pub processor: Ident,
    pub domain: Ident,
    pub scope: ResetScope,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub enum ResetScope {
    Unbranched,
    AllBranches,
    /// `BRANCH VALUES { field = <literal>, … }`: one exact branch.
    BranchValues(Vec<Assignment>),
}
