//! The runtime plan of one started domain: every relay, branch, ingestor, processor and emitter
//! of the catalog model, resolved to indices, Arrow schemas and compiled expression programs.
//!
//! The control core builds a [`DomainPlan`] from the validated catalog when a domain starts and
//! hands the same `Arc` to every shard; shards never see NSPL or the catalog (DESIGN §6: the
//! runtime never reparses). Building a plan cannot meet an invalid graph — validation accepted
//! it — so a refusal here ([`PlanError`]) means the model uses something this data plane does
//! not run yet (a CORRELATOR, GENERATOR, INFERENCER or WASM processor, count-based windows), and it names
//! the entity and what is missing.
//!
//! Expressions are found by span: validation stores every typed tree of an entity with the
//! span it has in the entity's canonical text, and the definition's AST carries the same spans.

mod branch_scope;
mod connection;
mod correlate;
mod endpoint;
mod generator;
mod http;
mod intake_codec;
mod kafka;
mod route;
mod row_body;
mod sink_expr;
mod window;
mod work;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_schema::{Field as ArrowField, FieldRef, Schema, SchemaRef};
use nervix_nspl::ast::catalog::CreateClient;
use nervix_nspl::ast::emitter::{CreateEmitter, EmitterMode, FileFormat, SinkBody};
use nervix_nspl::ast::ingestor::{CreateIngestor, SourceBody};
use nervix_nspl::ast::processor::{CreateProcessor, ProcessorDef};
use nervix_nspl::ast::{
    Attachment, Branching, CatalogStmt, ConfigValue, DeliveryMode, EmitterStmt, Expr,
    GeneralErrorPolicy, IngestorStmt, ProcessorStmt,
};
use nervix_nspl::ObjectKind;
use nervix_nspl::Statement;

use crate::catalog::{Domain, Entity, EntityKey};
use crate::types::TypedExpr;
use crate::validate::route::{schema_fields, Field};
use crate::vm::{arrow_type, Program};
pub use branch_scope::BranchScope;
use nervix_shards::flush::FlushPolicy;

pub use connection::ConnectionPlan;
pub use correlate::{CorrelatePlan, Side};
pub use endpoint::{EndpointPlan, IntakeQuiesce};
pub use http::{HttpSinkPlan, PollPlan};
pub use intake_codec::{IntakeCodec, IntakeDecoder};
pub use kafka::{KafkaAck, KafkaOffsets, KafkaSinkPlan, KafkaSourcePlan, MAX_KAFKA_INSTANCES};
pub use route::{BranchOut, ErrorPlan, ErrorSetPlan, RoutePlan, StateLayout};
pub use row_body::RowBody;
pub use window::{windows_over_storable, WindowCall, WindowPlan, UNDECLARED_STATE_CAP_BYTES};
pub use work::NodeWork;

/// Index of a relay in [`DomainPlan::relays`].
pub type RelayId = usize;
/// Index of a branch declaration in [`DomainPlan::branches`].
pub type BranchId = usize;

/// The default `CAPACITY` of a relay, in frames, when the statement gives none.
pub const DEFAULT_RELAY_CAPACITY_FRAMES: usize = 64;
/// The most frames one relay's owner buffer may be declared to hold.
pub const MAX_RELAY_CAPACITY_FRAMES: usize = 65_536;

/// Why a started domain cannot run on this data plane.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The model uses something the data plane does not run yet.
    #[error("{entity} cannot run: {what} is not supported by this data plane yet")]
    Unsupported { entity: String, what: String },
    /// A compiled expression was refused by the VM.
    #[error("{entity} cannot run: {message}")]
    Compile { entity: String, message: String },
    /// The catalog lacks an entity the model names (validation makes this unreachable).
    #[error("{entity} cannot run: {what} is missing from the catalog")]
    Missing { entity: String, what: String },
}

/// A relay: its schema, branch declaration and owner-buffer bound.
#[derive(Debug)]
pub struct RelayPlan {
    pub name: String,
    pub schema: SchemaRef,
    /// Sensitivity per column, for subscriptions and logs.
    pub sensitive: Vec<bool>,
    pub branch: Option<BranchId>,
    pub capacity_frames: usize,
    /// `WITH MATERIALIZED STATE LAST BY TIMESTAMP`: the relay keeps each branch's last row.
    pub materialized: bool,
}

/// What a node does when a materialized dependency has no state for its branch yet.
#[derive(Debug, Clone)]
pub enum StatePolicyPlan {
    /// A typed constant record (one row, one column per relay field).
    Default(Vec<arrow_array::ArrayRef>),
    /// The input is resolved without effect (acknowledged).
    Skip,
    /// The input waits, holding its acknowledgement and backpressuring, until state arrives.
    Wait,
}

/// One `USING MATERIALIZED STATE <relay> <policy>`.
#[derive(Debug, Clone)]
pub struct StatePlan {
    pub relay: RelayId,
    pub policy: StatePolicyPlan,
}

/// A branch declaration: its key fields and lifecycle bounds.
#[derive(Debug)]
pub struct BranchPlan {
    pub name: String,
    pub key_fields: Vec<FieldRef>,
    pub key_schema: SchemaRef,
    pub ttl_ns: u64,
    pub max_instances: Option<u32>,
}

/// How many admitted payloads may await their acknowledgement at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckWindow {
    pub max_outstanding: u32,
    pub ack_timeout_ns: u64,
    pub retry_backoff_ms: u64,
    pub retry_max_ms: u64,
}

impl AckWindow {
    /// MODE NO ACK: nothing waits for acknowledgements, so the window never fills.
    pub const NO_ACK: AckWindow = AckWindow {
        max_outstanding: u32::MAX,
        ack_timeout_ns: u64::MAX,
        retry_backoff_ms: 0,
        retry_max_ms: 0,
    };
}

/// A CLIENT PRODUCER's window from its delivery mode (validation refuses NO ACK there).
fn client_window(mode: &DeliveryMode, owner: &str) -> Result<AckWindow, PlanError> {
    Ok(match mode {
        DeliveryMode::AckSequential { ack_timeout, retry } => AckWindow {
            max_outstanding: 1,
            ack_timeout_ns: ack_timeout.nanos,
            retry_backoff_ms: retry.backoff.nanos / 1_000_000,
            retry_max_ms: retry.max.nanos / 1_000_000,
        },
        DeliveryMode::AckParallel {
            max,
            ack_timeout,
            retry,
            ..
        } => AckWindow {
            max_outstanding: u32::try_from(max.to_owned()).unwrap_or(u32::MAX).max(1),
            ack_timeout_ns: ack_timeout.nanos,
            retry_backoff_ms: retry.backoff.nanos / 1_000_000,
            retry_max_ms: retry.max.nanos / 1_000_000,
        },
        DeliveryMode::NoAck => {
            return Err(PlanError::Unsupported {
                entity: owner.to_string(),
                what: "MODE NO ACK on a client producer".to_string(),
            })
        }
    })
}

/// Where an ingestor's rows come from.
#[derive(Debug)]
pub enum SourcePlan {
    /// Applications submit Arrow batches over the session protocol (or in process).
    ClientProducer,
    /// HTTP ENDPOINT / WEBSOCKETS ENDPOINT: bodies decoded by a codec, MODE NO ACK.
    Endpoint(Arc<EndpointPlan>),
    /// HTTP REQUEST: polled responses decoded by a codec, MODE NO ACK.
    HttpPoll(Arc<PollPlan>),
    /// WEBSOCKETS CONNECTION: frames after the signaling handshake decoded by a codec.
    WebsocketsConnection(Arc<ConnectionPlan>),
    /// KAFKA TOPIC: records decoded by a codec, consumed on the shard (see `runtime::kafka`).
    Kafka(Arc<KafkaSourcePlan>),
}

/// An ingestor the data plane runs.
pub struct IngestorPlan {
    pub name: String,
    /// The input schema's fields, as producers must declare them.
    pub fields: Vec<Field>,
    pub schema: SchemaRef,
    pub sensitive: Vec<bool>,
    pub window: AckWindow,
    pub filter: Option<Program>,
    pub routes: Vec<RoutePlan>,
    pub general_error: GeneralErrorPolicy,
    /// The identity of the endpoint contract producers see (changes when it changes).
    pub contract_id: u64,
    pub source: SourcePlan,
    /// Whether its programs read the source envelope (`read_header`, `read_headers`,
    /// `metadata.`): only then do its intakes capture one (`runtime::envelope`).
    pub uses_envelope: bool,
    /// `TIMESTAMP AT <field>`: the input column (DATETIME) holding each row's event time.
    pub event_time: Option<usize>,
}

/// One `FROM <relay> [WHERE …]` of a processor or emitter.
pub struct InputPlan {
    pub relay: RelayId,
    pub filter: Option<Program>,
}

/// A JUNCTION or REINGESTOR: stateless routing of its inputs.
pub struct ProcessorPlan {
    pub name: String,
    pub kind: ObjectKind,
    pub inputs: Vec<InputPlan>,
    /// `COLLECT FOR`: how input frames are gathered per branch before the node sees them.
    pub collect: Option<FlushPolicy>,
    /// `USING MATERIALIZED STATE …`, in written order.
    pub state: Vec<StatePlan>,
    pub filter: Option<Program>,
    pub routes: Vec<RoutePlan>,
    /// What runs between the filters and the routes.
    pub work: NodeWork,
    /// The branch key fields its expressions read, as columns after the input's.
    pub branch_scope: Option<BranchScope>,
    pub detached: bool,
}

/// What an emitter writes to.
#[derive(Debug, Clone)]
pub enum SinkPlan {
    /// Applications attach consumers over the session protocol.
    ClientConsumer,
    /// Appends to a file under the FILE client's root.
    FileAppend { path: PathBuf, format: FileFormat },
    /// One HTTP request per row through a `TYPE HTTP` client.
    HttpRequest(Arc<HttpSinkPlan>),
    /// One Kafka record per row, produced on the shard.
    Kafka(Arc<KafkaSinkPlan>),
}

/// An emitter: its inputs, its one construction route (target = the sink schema) and sink.
pub struct EmitterPlan {
    pub name: String,
    /// `COLLECT FOR`, as for processors.
    pub collect: Option<FlushPolicy>,
    /// `USING MATERIALIZED STATE …`, as for processors.
    pub state: Vec<StatePlan>,
    /// The sink's fields (a CLIENT CONSUMER's TO SCHEMA; a file's input relay schema).
    pub fields: Vec<Field>,
    pub inputs: Vec<InputPlan>,
    /// The construction; its `target` is unused (emitters publish to their sink).
    pub route: RoutePlan,
    pub sink: SinkPlan,
    pub sensitive: Vec<bool>,
    pub detached: bool,
    /// `None` for NO ACK.
    pub ack_timeout_ns: Option<u64>,
    pub max_in_flight: u32,
    /// RETRY POLICY: a failed write is tried again after BACKOFF, doubling up to MAX.
    pub retry_backoff_ms: u64,
    pub retry_max_ms: u64,
}

impl EmitterPlan {
    /// Whether a frame's rows are acknowledged as soon as the sink takes it (NO ACK, or a
    /// detached boundary) rather than when the sink reports its outcome.
    pub fn resolves_at_handoff(&self) -> bool {
        self.ack_timeout_ns.is_none() || self.detached
    }

    /// Frames the sink may hold at once (ACK PARALLEL MAX n; SEQUENTIAL is one).
    pub fn in_flight_slots(&self) -> usize {
        self.max_in_flight.max(1) as usize
    }
}

/// The whole runnable graph of one started domain.
pub struct DomainPlan {
    pub name: String,
    pub generation: u64,
    /// How the domain's logical time follows the node's clocks (fixed by its START).
    pub pace: crate::runtime::clock::DomainPace,
    pub relays: Vec<RelayPlan>,
    pub branches: Vec<BranchPlan>,
    pub ingestors: Vec<IngestorPlan>,
    pub processors: Vec<ProcessorPlan>,
    pub emitters: Vec<EmitterPlan>,
}

impl DomainPlan {
    pub fn relay_id(&self, name: &str) -> Option<RelayId> {
        self.relays.iter().position(|r| r.name == name)
    }

    pub fn ingestor(&self, name: &str) -> Option<usize> {
        self.ingestors.iter().position(|i| i.name == name)
    }

    pub fn emitter(&self, name: &str) -> Option<usize> {
        self.emitters.iter().position(|e| e.name == name)
    }
}

/// The Arrow schema of NSPL fields: OPTIONAL is nullable.
pub fn arrow_schema(fields: &[Field]) -> SchemaRef {
    Arc::new(Schema::new(
        fields
            .iter()
            .map(|f| ArrowField::new(&f.name, arrow_type(&f.ty.data_type), f.ty.nullable))
            .collect::<Vec<_>>(),
    ))
}

/// Typed trees of one entity, by the span of the expression they type.
pub(crate) struct TypedIndex<'e> {
    entity: String,
    by_span: HashMap<(u32, u32), &'e TypedExpr>,
    /// A window processor's aggregate calls (by span) and the result column each is read
    /// through; empty elsewhere.
    aggregates: HashMap<(u32, u32), usize>,
    /// Set while a window processor's routes compile: their trees read aggregate results and
    /// the branch key through emission columns (`window::read_results`).
    window_routes: bool,
}

impl<'e> TypedIndex<'e> {
    fn new(entity: &'e Entity) -> TypedIndex<'e> {
        let mut by_span = HashMap::new();
        for typed in &entity.typed {
            by_span
                .entry((typed.span.start, typed.span.end))
                .or_insert(typed);
        }
        TypedIndex {
            entity: entity.key.to_string(),
            by_span,
            aggregates: HashMap::new(),
            window_routes: false,
        }
    }

    pub(crate) fn entity(&self) -> &str {
        &self.entity
    }

    /// The typed tree of `expr`.
    pub(crate) fn get(&self, expr: &Expr) -> Result<&'e TypedExpr, PlanError> {
        self.by_span
            .get(&(expr.span.start, expr.span.end))
            .copied()
            .ok_or_else(|| PlanError::Missing {
                entity: self.entity.clone(),
                what: format!(
                    "the typed expression at {}..{}",
                    expr.span.start, expr.span.end
                ),
            })
    }

    /// The typed tree stored for the span `span` (validation checks some clauses, such as
    /// `INVOKE write_header(name, value)`, as one call over several written expressions).
    pub(crate) fn get_span(&self, span: nervix_nspl::Span) -> Result<&'e TypedExpr, PlanError> {
        self.by_span
            .get(&(span.start, span.end))
            .copied()
            .ok_or_else(|| PlanError::Missing {
                entity: self.entity.clone(),
                what: format!("the typed expression at {}..{}", span.start, span.end),
            })
    }

    /// Compiles `expr` with `resolve`.
    pub(crate) fn compile(
        &self,
        expr: &Expr,
        resolve: &dyn Fn(&[String]) -> Option<crate::vm::ColumnSlot>,
    ) -> Result<Program, PlanError> {
        self.compile_typed(self.get(expr)?, resolve)
    }

    /// Compiles an already found typed tree with `resolve`.
    pub(crate) fn compile_typed(
        &self,
        typed: &TypedExpr,
        resolve: &dyn Fn(&[String]) -> Option<crate::vm::ColumnSlot>,
    ) -> Result<Program, PlanError> {
        let rewritten;
        let typed = if self.window_routes {
            rewritten = window::read_results(typed, &self.aggregates);
            &rewritten
        } else {
            typed
        };
        Program::compile(typed, resolve).map_err(|e| PlanError::Compile {
            entity: self.entity.clone(),
            message: e.to_string(),
        })
    }
}

/// Builds the runnable plan of `domain`. `data_dir` anchors FILE clients' relative roots;
/// the catalog supplies cluster-wide entities (VHOSTs) and resources (client MOUNTs); `pace`
/// is the domain clock its START fixed.
pub fn build(
    domain: &Domain,
    catalog: &crate::catalog::Catalog,
    data_dir: &std::path::Path,
    pace: crate::runtime::clock::DomainPace,
) -> Result<DomainPlan, PlanError> {
    let mut builder = Builder {
        domain,
        global: &catalog.global,
        resources: &catalog.resources,
        data_dir,
        plan: DomainPlan {
            name: domain.name().to_string(),
            generation: domain.header.generation,
            pace,
            relays: Vec::new(),
            branches: Vec::new(),
            ingestors: Vec::new(),
            processors: Vec::new(),
            emitters: Vec::new(),
        },
    };
    builder.branches_and_relays()?;
    for entity in domain.entities.values() {
        match &entity.definition {
            Statement::Ingestor(IngestorStmt::Create(create)) => {
                builder.ingestor(entity, create)?
            }
            Statement::Processor(ProcessorStmt::Create(create)) => {
                builder.processor(entity, create)?
            }
            Statement::Emitter(EmitterStmt::Create(create)) => builder.emitter(entity, create)?,
            _ => {}
        }
    }
    Ok(builder.plan)
}

pub(crate) struct Builder<'d> {
    domain: &'d Domain,
    global: &'d std::collections::BTreeMap<EntityKey, Entity>,
    resources: &'d std::collections::BTreeMap<String, crate::catalog::Resource>,
    data_dir: &'d std::path::Path,
    pub(crate) plan: DomainPlan,
}

impl<'d> Builder<'d> {
    fn entity(&self, kind: ObjectKind, name: &str) -> Option<&'d Entity> {
        self.domain.entities.get(&EntityKey::new(kind, name))
    }

    pub(crate) fn schema_fields(&self, name: &str, owner: &str) -> Result<Vec<Field>, PlanError> {
        match self.entity(ObjectKind::Schema, name).map(|e| &e.definition) {
            Some(Statement::Catalog(CatalogStmt::CreateSchema(schema))) => {
                Ok(schema_fields(schema))
            }
            _ => Err(PlanError::Missing {
                entity: owner.to_string(),
                what: format!("schema '{name}'"),
            }),
        }
    }

    /// The fields of the schema a codec decodes into (`DECODE USING c` → `c`'s TO SCHEMA).
    fn codec_fields(
        &self,
        codec: Option<&nervix_nspl::ast::Ident>,
        owner: &str,
    ) -> Result<Vec<Field>, PlanError> {
        let missing = |what: String| PlanError::Missing {
            entity: owner.to_string(),
            what,
        };
        let codec = codec.ok_or_else(|| missing("DECODE USING".to_string()))?;
        match self
            .entity(ObjectKind::Codec, &codec.name)
            .map(|e| &e.definition)
        {
            Some(Statement::Catalog(CatalogStmt::CreateCodec(create))) => {
                self.schema_fields(&create.schema.name, owner)
            }
            _ => Err(missing(format!("codec '{}'", codec.name))),
        }
    }

    fn branches_and_relays(&mut self) -> Result<(), PlanError> {
        for entity in self.domain.entities.values() {
            if let Statement::Catalog(CatalogStmt::CreateBranch(branch)) = &entity.definition {
                let owner = entity.key.to_string();
                let fields = self.schema_fields(&branch.schema.name, &owner)?;
                let key_schema = arrow_schema(&fields);
                self.plan.branches.push(BranchPlan {
                    name: branch.name.name.clone(),
                    key_fields: key_schema.fields().iter().cloned().collect(),
                    key_schema,
                    ttl_ns: branch.ttl.nanos,
                    max_instances: branch
                        .max_instances
                        .map(|n| u32::try_from(n).unwrap_or(u32::MAX - 1)),
                });
            }
        }
        for entity in self.domain.entities.values() {
            if let Statement::Catalog(CatalogStmt::CreateRelay(relay)) = &entity.definition {
                let owner = entity.key.to_string();
                let fields = self.schema_fields(&relay.schema.name, &owner)?;
                let branch = match &relay.branching {
                    Branching::Unbranched => None,
                    Branching::BranchedBy(name) => Some(self.branch_id(&name.name, &owner)?),
                };
                let capacity = relay
                    .capacity
                    .map(|c| usize::try_from(c).unwrap_or(MAX_RELAY_CAPACITY_FRAMES))
                    .unwrap_or(DEFAULT_RELAY_CAPACITY_FRAMES)
                    .clamp(1, MAX_RELAY_CAPACITY_FRAMES);
                self.plan.relays.push(RelayPlan {
                    name: relay.name.name.clone(),
                    schema: arrow_schema(&fields),
                    sensitive: fields.iter().map(|f| f.ty.sensitive).collect(),
                    branch,
                    capacity_frames: capacity,
                    materialized: relay.materialized,
                });
            }
        }
        Ok(())
    }

    pub(crate) fn branch_id(&self, name: &str, owner: &str) -> Result<BranchId, PlanError> {
        self.plan
            .branches
            .iter()
            .position(|b| b.name == name)
            .ok_or_else(|| PlanError::Missing {
                entity: owner.to_string(),
                what: format!("branch '{name}'"),
            })
    }

    pub(crate) fn relay_id(&self, name: &str, owner: &str) -> Result<RelayId, PlanError> {
        self.plan.relay_id(name).ok_or_else(|| PlanError::Missing {
            entity: owner.to_string(),
            what: format!("relay '{name}'"),
        })
    }

    fn ingestor(&mut self, entity: &'d Entity, create: &CreateIngestor) -> Result<(), PlanError> {
        let owner = entity.key.to_string();
        let (fields, window, source) = match &create.source {
            SourceBody::ClientProducer { schema, mode, .. } => {
                let fields = self.schema_fields(&schema.name, &owner)?;
                let window = client_window(mode, &owner)?;
                (fields, window, SourcePlan::ClientProducer)
            }
            SourceBody::HttpEndpoint(body) | SourceBody::WebsocketsEndpoint(body) => {
                let fields = self.codec_fields(create.decode.as_ref(), &owner)?;
                let endpoint = self.endpoint_source(
                    &owner,
                    create.source.head(),
                    body,
                    create.decode.as_ref(),
                    &fields,
                )?;
                (
                    fields,
                    AckWindow::NO_ACK,
                    SourcePlan::Endpoint(Arc::new(endpoint)),
                )
            }
            SourceBody::HttpRequest {
                client,
                every,
                quiesce,
                ..
            } => {
                let fields = self.codec_fields(create.decode.as_ref(), &owner)?;
                let poll = self.poll_source(
                    &client.name,
                    every,
                    quiesce,
                    create.decode.as_ref(),
                    &fields,
                    &owner,
                )?;
                (
                    fields,
                    AckWindow::NO_ACK,
                    SourcePlan::HttpPoll(Arc::new(poll)),
                )
            }
            SourceBody::WebsocketsConnection {
                client, quiesce, ..
            } => {
                let fields = self.codec_fields(create.decode.as_ref(), &owner)?;
                let connection = self.connection_source(
                    &client.name,
                    quiesce,
                    create.decode.as_ref(),
                    &fields,
                    &owner,
                )?;
                (
                    fields,
                    AckWindow::NO_ACK,
                    SourcePlan::WebsocketsConnection(Arc::new(connection)),
                )
            }
            SourceBody::KafkaTopic {
                client,
                topic,
                offset,
                instances,
                mode,
                quiesce,
            } => {
                let fields = self.codec_fields(create.decode.as_ref(), &owner)?;
                let body = kafka::KafkaSourceBody {
                    client,
                    topic,
                    offset,
                    instances: *instances,
                    mode,
                    quiesce,
                    ingestor: &create.name.name,
                };
                let (window, kafka) =
                    self.kafka_source(body, create.decode.as_ref(), &fields, &owner)?;
                (fields, window, SourcePlan::Kafka(Arc::new(kafka)))
            }
            other => {
                return Err(PlanError::Unsupported {
                    entity: owner,
                    what: format!("the {} source", other.head().phrase()),
                })
            }
        };
        let typed = TypedIndex::new(entity);
        let filter = match &create.filter {
            Some(expr) => Some(typed.compile(expr, &route::input_resolver(&fields))?),
            None => None,
        };
        let mut routes = Vec::with_capacity(create.routes.len());
        for written in &create.routes {
            routes.push(route::compile(
                self,
                &typed,
                &fields,
                written,
                None,
                &StateLayout::default(),
            )?);
        }
        let contract_id = contract_identity(&entity.definition);
        let uses_envelope = route::reads_envelope(filter.as_ref(), &routes);
        self.plan.ingestors.push(IngestorPlan {
            name: create.name.name.clone(),
            schema: arrow_schema(&fields),
            fields: fields.clone(),
            sensitive: fields.iter().map(|f| f.ty.sensitive).collect(),
            window,
            filter,
            routes,
            general_error: create.on_general_error,
            contract_id,
            source,
            uses_envelope,
            event_time: match &create.timestamp {
                Some(nervix_nspl::ast::ingestor::TimestampSource::At(field)) => {
                    fields.iter().position(|f| f.name == field.name)
                }
                _ => None,
            },
        });
        Ok(())
    }

    /// The fields of relay `name`'s schema; a relay the catalog does not hold is refused as a
    /// missing schema of `owner`.
    fn relay_fields(&self, name: &str, owner: &str) -> Result<Vec<Field>, PlanError> {
        let schema_name = match self.entity(ObjectKind::Relay, name).map(|e| &e.definition) {
            Some(Statement::Catalog(CatalogStmt::CreateRelay(r))) => r.schema.name.clone(),
            _ => String::new(),
        };
        self.schema_fields(&schema_name, owner)
    }

    /// The inputs' plans and their rows' fields, followed by `scope` (columns the shard adds
    /// to every input frame, see `branch_scope`).
    fn inputs(
        &self,
        typed: &TypedIndex<'_>,
        written: &[nervix_nspl::ast::Input],
        scope: &[Field],
        owner: &str,
    ) -> Result<(Vec<InputPlan>, Vec<Field>), PlanError> {
        let mut inputs = Vec::with_capacity(written.len());
        let mut input_fields = Vec::new();
        for input in written {
            let relay = self.relay_id(&input.relay.name, owner)?;
            let mut fields = self.relay_fields(&input.relay.name, owner)?;
            fields.extend_from_slice(scope);
            let filter = match &input.filter {
                Some(expr) => Some(typed.compile(expr, &route::input_resolver(&fields))?),
                None => None,
            };
            inputs.push(InputPlan { relay, filter });
            // Validation requires every input of a node to share one schema model.
            input_fields = fields;
        }
        Ok((inputs, input_fields))
    }

    /// `USING MATERIALIZED STATE …`: each relay with its policy (DEFAULT records evaluated
    /// once, here), and the layout expressions read `relay_state.*` through.
    fn state_dependencies(
        &self,
        typed: &TypedIndex<'_>,
        written: &[nervix_nspl::ast::StateDependency],
        owner: &str,
    ) -> Result<(Vec<StatePlan>, StateLayout), PlanError> {
        let mut plans = Vec::with_capacity(written.len());
        let mut layout = StateLayout::default();
        for dependency in written {
            let relay = self.relay_id(&dependency.relay.name, owner)?;
            let fields = self.relay_fields(&dependency.relay.name, owner)?;
            let policy = match &dependency.policy {
                nervix_nspl::ast::StatePolicy::RequiredSkip => StatePolicyPlan::Skip,
                nervix_nspl::ast::StatePolicy::RequiredWait => StatePolicyPlan::Wait,
                nervix_nspl::ast::StatePolicy::Default(assignments) => {
                    let schema = arrow_schema(&fields);
                    let mut record: Vec<arrow_array::ArrayRef> = schema
                        .fields()
                        .iter()
                        .map(|f| arrow_array::new_null_array(f.data_type(), 1))
                        .collect();
                    for assignment in assignments {
                        let Some(column) =
                            fields.iter().position(|f| f.name == assignment.target.name)
                        else {
                            continue;
                        };
                        let program = typed.compile(&assignment.value, &|_: &[String]| None)?;
                        let evaluated = program.eval(&crate::vm::EvalContext {
                            sources: &[],
                            num_rows: 1,
                            now_ns: 0,
                            envelope: None,
                        });
                        if let Some((_, message)) = evaluated.errors.iter().next() {
                            return Err(PlanError::Compile {
                                entity: owner.to_string(),
                                message: format!(
                                    "the DEFAULT of '{}' fails: {message}",
                                    assignment.target.name
                                ),
                            });
                        }
                        record[column] = evaluated.values;
                    }
                    StatePolicyPlan::Default(record)
                }
            };
            plans.push(StatePlan { relay, policy });
            layout.deps.push((dependency.relay.name.clone(), fields));
        }
        Ok((plans, layout))
    }

    fn processor(&mut self, entity: &'d Entity, create: &CreateProcessor) -> Result<(), PlanError> {
        if let ProcessorDef::Generator { source, each } = &create.def {
            return self.generator(entity, create, source, each);
        }
        let owner = entity.key.to_string();
        let mut typed = TypedIndex::new(entity);
        let (state, layout) = self.state_dependencies(&typed, &create.state, &owner)?;
        let feed = match &create.def {
            ProcessorDef::Junction { feed }
            | ProcessorDef::Reingestor { feed }
            | ProcessorDef::Deduplicator { feed, .. }
            | ProcessorDef::Reorderer { feed, .. }
            | ProcessorDef::Window { feed, .. } => feed,
            def @ ProcessorDef::Correlator { .. } => {
                let planned = self.correlator(&typed, def, &owner)?;
                let work = NodeWork::Correlate(Box::new(planned.plan));
                // Per-side collection lives in the correlator's plan (`CorrelatePlan::collect`).
                let collect = None;
                let (inputs, fields) = (planned.inputs, planned.route_fields);
                return self.push_processor(
                    create,
                    &typed,
                    (inputs, collect, None),
                    (work, None),
                    &fields,
                    (state, &layout),
                );
            }
            other => {
                return Err(PlanError::Unsupported {
                    entity: owner,
                    what: format!("the {} processor", crate::catalog::kind_name(other.kind())),
                })
            }
        };
        // Window routes read the key through their emission (`window::read_results`).
        let mut scope = Vec::new();
        let branch_scope = if matches!(create.def, ProcessorDef::Window { .. }) {
            None
        } else {
            let branch = match feed.inputs.first() {
                Some(input) => self.plan.relays[self.relay_id(&input.relay.name, &owner)?].branch,
                None => None,
            };
            let key = branch.map(|id| (id, self.plan.branches[id].key_fields.as_slice()));
            branch_scope::extend(&typed, entity, key, &mut scope)?
        };
        let (inputs, fields) = self.inputs(&typed, &feed.inputs, &scope, &owner)?;
        let filter = match &feed.filter {
            Some(expr) => Some(typed.compile(expr, &route::input_resolver(&fields))?),
            None => None,
        };
        let (work, route_fields) = match &create.def {
            ProcessorDef::Window {
                width,
                step,
                max_state_size,
                ..
            } => {
                let extents = (width, step, max_state_size.as_ref());
                let branch_key = inputs
                    .first()
                    .and_then(|input| self.plan.relays[input.relay].branch)
                    .map(|id| self.plan.branches[id].key_fields.clone())
                    .unwrap_or_default();
                let (plan, results, columns) =
                    window::plan(&typed, create, extents, &fields, &branch_key, &owner)?;
                // Routes read each aggregate call's result as an input column.
                typed.aggregates = columns;
                typed.window_routes = true;
                (NodeWork::Window(Box::new(plan)), results)
            }
            def => (self.node_work(&typed, def, &fields, &owner)?, fields),
        };
        let collect = feed.collect.as_ref().map(collect_policy);
        self.push_processor(
            create,
            &typed,
            (inputs, collect, filter),
            (work, branch_scope),
            &route_fields,
            (state, &layout),
        )
    }

    /// Compiles `create`'s routes over `route_fields` and adds the processor to the plan.
    fn push_processor(
        &mut self,
        create: &CreateProcessor,
        typed: &TypedIndex<'_>,
        (inputs, collect, filter): (Vec<InputPlan>, Option<FlushPolicy>, Option<Program>),
        (work, branch_scope): (NodeWork, Option<BranchScope>),
        route_fields: &[Field],
        (state, layout): (Vec<StatePlan>, &StateLayout),
    ) -> Result<(), PlanError> {
        let incoming = create.branching.as_ref();
        let mut routes = Vec::with_capacity(create.routes.len());
        for written in &create.routes {
            routes.push(route::compile(
                self,
                typed,
                route_fields,
                written,
                incoming,
                layout,
            )?);
        }
        self.plan.processors.push(ProcessorPlan {
            name: create.name.name.clone(),
            kind: create.def.kind(),
            inputs,
            collect,
            state,
            filter,
            routes,
            work,
            branch_scope,
            detached: create.attachment == Some(Attachment::Detached),
        });
        Ok(())
    }

    /// The fields an emitter without a sink schema writes: its input relay's, as constructed.
    fn emitter_input_fields(
        &self,
        create: &CreateEmitter,
        owner: &str,
    ) -> Result<Vec<Field>, PlanError> {
        let first = create.inputs.first().map(|i| i.relay.name.clone());
        let schema_name = first
            .and_then(
                |relay: String| match self.entity(ObjectKind::Relay, &relay) {
                    Some(Entity {
                        definition: Statement::Catalog(CatalogStmt::CreateRelay(r)),
                        ..
                    }) => Some(r.schema.name.clone()),
                    _ => None,
                },
            )
            .unwrap_or_default();
        self.schema_fields(&schema_name, owner)
    }

    fn file_root(&self, client: &str, owner: &str) -> Result<PathBuf, PlanError> {
        let Some(Statement::Catalog(CatalogStmt::CreateClient(CreateClient { config, .. }))) = self
            .entity(ObjectKind::Client, client)
            .map(|e| &e.definition)
        else {
            return Err(PlanError::Missing {
                entity: owner.to_string(),
                what: format!("client '{client}'"),
            });
        };
        let root = config.entries.iter().find_map(|(key, value)| match value {
            ConfigValue::String(path) if key == "root" => Some(PathBuf::from(path)),
            _ => None,
        });
        let root = root.unwrap_or_else(|| PathBuf::from("files"));
        Ok(if root.is_absolute() {
            root
        } else {
            self.data_dir.join(root)
        })
    }

    fn emitter(&mut self, entity: &'d Entity, create: &CreateEmitter) -> Result<(), PlanError> {
        let owner = entity.key.to_string();
        let (sink, sink_fields) = match &create.sink.body {
            SinkBody::ClientConsumer { schema } => (
                SinkPlan::ClientConsumer,
                self.schema_fields(&schema.name, &owner)?,
            ),
            SinkBody::FileAppend {
                client,
                path,
                format,
            } => {
                let relative = std::path::Path::new(path);
                if relative.is_absolute()
                    || relative
                        .components()
                        .any(|c| matches!(c, std::path::Component::ParentDir))
                {
                    return Err(PlanError::Unsupported {
                        entity: owner,
                        what: format!("the path '{path}' (it must stay under the client's root)"),
                    });
                }
                let root = self.file_root(&client.name, &owner)?;
                (
                    SinkPlan::FileAppend {
                        path: root.join(relative),
                        format: *format,
                    },
                    self.emitter_input_fields(create, &owner)?,
                )
            }
            // The request programs compile below, once the typed trees are indexed.
            SinkBody::HttpRequest { .. } | SinkBody::KafkaTopic { .. } => (
                SinkPlan::ClientConsumer,
                self.emitter_input_fields(create, &owner)?,
            ),
            other => {
                return Err(PlanError::Unsupported {
                    entity: owner,
                    what: format!("the {} sink", other.head().phrase()),
                })
            }
        };
        let writes_rows = matches!(
            create.sink.body,
            SinkBody::HttpRequest { .. } | SinkBody::KafkaTopic { .. }
        );
        if !create.construction.headers.is_empty() && !writes_rows {
            return Err(PlanError::Unsupported {
                entity: owner,
                what: "INVOKE write_header".to_string(),
            });
        }
        if let Some(nervix_nspl::ast::emitter::Encoding::Codec(codec)) = &create.sink.encoding {
            if !writes_rows {
                return Err(PlanError::Unsupported {
                    entity: owner,
                    what: format!(
                        "ENCODE USING {} on a {} sink",
                        codec.name,
                        create.sink.body.head().phrase()
                    ),
                });
            }
        }
        let typed = TypedIndex::new(entity);
        let sink = match &create.sink.body {
            SinkBody::HttpRequest {
                client,
                method,
                path,
            } => SinkPlan::HttpRequest(Arc::new(self.http_sink(
                &typed,
                create,
                &client.name,
                (method, path),
                &sink_fields,
                &owner,
            )?)),
            SinkBody::KafkaTopic { client, topic, key } => {
                SinkPlan::Kafka(Arc::new(self.kafka_sink(
                    &typed,
                    create,
                    (client, topic, key.as_ref()),
                    &sink_fields,
                    &owner,
                )?))
            }
            _ => sink,
        };
        let (state, layout) = self.state_dependencies(&typed, &create.state, &owner)?;
        let (inputs, fields) = self.inputs(&typed, &create.inputs, &[], &owner)?;
        let route = route::compile_emitter(self, &typed, &fields, &sink_fields, create, &layout)?;
        let (ack_timeout_ns, max_in_flight) = match create.sink.mode {
            EmitterMode::NoAck => (None, 1),
            EmitterMode::AckSequential { ack_timeout } => (Some(ack_timeout.nanos), 1),
            EmitterMode::AckParallel { max, ack_timeout } => (
                Some(ack_timeout.nanos),
                u32::try_from(max).unwrap_or(u32::MAX),
            ),
        };
        self.plan.emitters.push(EmitterPlan {
            name: create.name.name.clone(),
            collect: create.collect.as_ref().map(collect_policy),
            state,
            fields: sink_fields.clone(),
            inputs,
            route,
            sink,
            sensitive: sink_fields.iter().map(|f| f.ty.sensitive).collect(),
            detached: create.attachment == Some(Attachment::Detached),
            ack_timeout_ns,
            max_in_flight,
            retry_backoff_ms: create.sink.retry.backoff.nanos / 1_000_000,
            retry_max_ms: create.sink.retry.max.nanos / 1_000_000,
        });
        Ok(())
    }
}

/// `COLLECT FOR d [MAX BATCH SIZE b]` releases on FLUSH EACH terms; without a byte bound only
/// the interval releases.
fn collect_policy(collect: &nervix_nspl::ast::Collect) -> FlushPolicy {
    FlushPolicy::Each {
        interval_ns: collect.interval.nanos,
        max_batch_bytes: collect.max_batch_size.map_or(u64::MAX, |size| size.bytes),
    }
}

/// A stable identity of an ingestor's endpoint contract: its canonical text with every route's
/// FLUSH left out (spec: the contract is the ingestor as producers see it, without FLUSH).
fn contract_identity(definition: &Statement) -> u64 {
    let mut contract = definition.clone();
    if let Statement::Ingestor(IngestorStmt::Create(create)) = &mut contract {
        for route in &mut create.routes {
            route.flush = None;
        }
    }
    let text = nervix_nspl::render_statement(&contract);
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}
