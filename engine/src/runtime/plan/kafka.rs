//! KAFKA TOPIC ingestors and emitters resolved for the shards (spec: "Kafka"; DESIGN §3: Kafka
//! runs on the shards themselves): the `TYPE KAFKA` client's settings passed through to
//! librdkafka (`{{ resource }}` placeholders resolved to the mounted version's directory), the
//! topic, how offsets are kept, the delivery mode and the codec; for emitters the KEY and
//! `write_header` programs and the row encoding.
//!
//! OFFSET BY DOMAIN keeps next offsets in the node's runtime state (`state_store`) and assigns
//! partitions to the instances statically; there are no state replicas and no leader-committed
//! assignment yet (one node runs each ingestor). Refused here: a JAQ codec that unfolds ON
//! INGESTION (a Kafka record would have to wait for the extension workers on the shard's poll
//! loop, which does not exist yet).

use nervix_nspl::ast::catalog::CreateClient;
use nervix_nspl::ast::emitter::CreateEmitter;
use nervix_nspl::ast::ingestor::KafkaOffset;
use nervix_nspl::ast::{CatalogStmt, DeliveryMode, Expr, Ident, QuiesceMode};
use nervix_nspl::{ObjectKind, Statement};

use super::{AckWindow, Builder, IntakeCodec, PlanError, RowBody, TypedIndex};
use crate::validate::route::Field;
use crate::vm::Program;

/// The most consumers one KAFKA TOPIC ingestor runs on a node (INSTANCES).
pub const MAX_KAFKA_INSTANCES: u32 = 64;

/// One KAFKA TOPIC ingestor's source.
pub struct KafkaSourcePlan {
    /// The client's CONFIG, passed through to librdkafka.
    pub config: Vec<(String, String)>,
    pub topic: String,
    pub offsets: KafkaOffsets,
    /// Consumers in the group on this node.
    pub instances: u32,
    pub codec: IntakeCodec,
    /// `None`: MODE NO ACK (the consumer's auto-commit).
    pub ack: Option<KafkaAck>,
}

impl std::fmt::Debug for KafkaSourcePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The CONFIG may hold credentials: never printed.
        f.debug_struct("KafkaSourcePlan")
            .field("topic", &self.topic)
            .field("offsets", &self.offsets)
            .field("instances", &self.instances)
            .finish_non_exhaustive()
    }
}

/// Who keeps a KAFKA TOPIC ingestor's positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KafkaOffsets {
    /// `OFFSET BY CONSUMER GROUP '<group>'`: Kafka does, for the named group.
    ConsumerGroup(String),
    /// `OFFSET BY DOMAIN`: the node's runtime state does, under this key
    /// (`state_store::kafka_key`); partitions are assigned to the instances statically.
    Domain { key: String },
}

/// An ACK mode's terms for a Kafka consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KafkaAck {
    /// Records that may await their acknowledgement at once (SEQUENTIAL: 1).
    pub max_outstanding: u32,
    /// BATCH TIMEOUT: the longest an ingest group waits for more records (SEQUENTIAL: 0).
    pub batch_timeout_ns: u64,
    /// ACK TIMEOUT: a record without an acknowledgement this long is rejected and read again.
    pub ack_timeout_ns: u64,
    /// RETRY POLICY: after a rejection the partition is read again after BACKOFF, doubling up
    /// to MAX while rejections continue.
    pub retry_backoff_ms: u64,
    pub retry_max_ms: u64,
}

/// What a KAFKA TOPIC emitter produces for each row.
pub struct KafkaSinkPlan {
    pub config: Vec<(String, String)>,
    pub topic: String,
    /// `KEY <expr>`; a non-STRING key is written as its text.
    pub key: Option<Program>,
    /// `INVOKE write_header(name, value)`, in written order.
    pub headers: Vec<(Program, Program)>,
    pub body: RowBody,
}

impl std::fmt::Debug for KafkaSinkPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSinkPlan")
            .field("topic", &self.topic)
            .field("headers", &self.headers.len())
            .finish_non_exhaustive()
    }
}

/// A KAFKA TOPIC ingestor's delivery terms from its MODE.
fn kafka_ack(mode: &DeliveryMode) -> (AckWindow, Option<KafkaAck>) {
    let ack = match mode {
        DeliveryMode::NoAck => return (AckWindow::NO_ACK, None),
        DeliveryMode::AckSequential { ack_timeout, retry } => KafkaAck {
            max_outstanding: 1,
            batch_timeout_ns: 0,
            ack_timeout_ns: ack_timeout.nanos,
            retry_backoff_ms: retry.backoff.nanos / 1_000_000,
            retry_max_ms: retry.max.nanos / 1_000_000,
        },
        DeliveryMode::AckParallel {
            max,
            batch_timeout,
            ack_timeout,
            retry,
        } => KafkaAck {
            max_outstanding: u32::try_from(*max).unwrap_or(u32::MAX).max(1),
            batch_timeout_ns: batch_timeout.map_or(0, |timeout| timeout.nanos),
            ack_timeout_ns: ack_timeout.nanos,
            retry_backoff_ms: retry.backoff.nanos / 1_000_000,
            retry_max_ms: retry.max.nanos / 1_000_000,
        },
    };
    let window = AckWindow {
        max_outstanding: ack.max_outstanding,
        ack_timeout_ns: ack.ack_timeout_ns,
        retry_backoff_ms: ack.retry_backoff_ms,
        retry_max_ms: ack.retry_max_ms,
    };
    (window, Some(ack))
}

/// The fields of a KAFKA TOPIC ingestor's source body.
pub(super) struct KafkaSourceBody<'a> {
    pub client: &'a Ident,
    pub topic: &'a str,
    pub offset: &'a KafkaOffset,
    pub instances: Option<u64>,
    pub mode: &'a DeliveryMode,
    pub quiesce: &'a QuiesceMode,
    /// The ingestor's name (OFFSET BY DOMAIN keys its state by domain and ingestor).
    pub ingestor: &'a str,
}

impl<'d> Builder<'d> {
    /// The settings of client `name` as text, `{{ resource }}` placeholders resolved to the
    /// mounted version's directory on this node.
    pub(super) fn client_entries(
        &self,
        name: &str,
        owner: &str,
    ) -> Result<Vec<(String, String)>, PlanError> {
        let Some(Statement::Catalog(CatalogStmt::CreateClient(CreateClient {
            config,
            mounts,
            ..
        }))) = self.entity(ObjectKind::Client, name).map(|e| &e.definition)
        else {
            return Err(PlanError::Missing {
                entity: owner.to_string(),
                what: format!("client '{name}'"),
            });
        };
        crate::control::mounts::resolve_config(
            config,
            mounts,
            self.resources,
            &self.data_dir.join("resources"),
        )
        .map_err(|error| PlanError::Compile {
            entity: owner.to_string(),
            message: format!("client '{name}': {error}"),
        })
    }

    /// A KAFKA TOPIC ingestor's source and its acknowledgement window.
    pub(super) fn kafka_source(
        &self,
        body: KafkaSourceBody<'_>,
        codec: Option<&Ident>,
        fields: &[Field],
        owner: &str,
    ) -> Result<(AckWindow, KafkaSourcePlan), PlanError> {
        let unsupported = |what: &str| PlanError::Unsupported {
            entity: owner.to_string(),
            what: what.to_string(),
        };
        let offsets = match body.offset {
            KafkaOffset::ConsumerGroup(group) => KafkaOffsets::ConsumerGroup(group.clone()),
            KafkaOffset::Domain => KafkaOffsets::Domain {
                key: crate::runtime::state_store::kafka_key(&self.plan.name, body.ingestor),
            },
        };
        if !matches!(body.quiesce, QuiesceMode::Suspend) {
            return Err(unsupported(
                "a quiesce mode other than SUSPEND on KAFKA TOPIC",
            ));
        }
        let codec = codec.ok_or_else(|| PlanError::Missing {
            entity: owner.to_string(),
            what: "DECODE USING".to_string(),
        })?;
        let codec = self.intake_codec(&codec.name, fields, owner)?;
        if codec.unfolds_on_workers() {
            return Err(unsupported(
                "a JAQ codec that unfolds ON INGESTION on a KAFKA TOPIC ingestor",
            ));
        }
        let instances = body.instances.unwrap_or(1);
        if instances == 0 || instances > u64::from(MAX_KAFKA_INSTANCES) {
            return Err(unsupported(&format!(
                "INSTANCES {instances} (a node runs 1 to {MAX_KAFKA_INSTANCES} consumers of one \
                 ingestor)"
            )));
        }
        let (window, ack) = kafka_ack(body.mode);
        Ok((
            window,
            KafkaSourcePlan {
                config: self.client_entries(&body.client.name, owner)?,
                topic: body.topic.to_string(),
                offsets,
                instances: instances as u32,
                codec,
                ack,
            },
        ))
    }

    /// A KAFKA TOPIC emitter's sink writing `sink` fields.
    pub(super) fn kafka_sink(
        &self,
        typed: &TypedIndex<'_>,
        create: &CreateEmitter,
        (client, topic, key): (&Ident, &str, Option<&Expr>),
        sink: &[Field],
        owner: &str,
    ) -> Result<KafkaSinkPlan, PlanError> {
        let exprs = super::sink_expr::SinkExprs::new(typed, create, sink, owner);
        Ok(KafkaSinkPlan {
            config: self.client_entries(&client.name, owner)?,
            topic: topic.to_string(),
            key: key.map(|key| exprs.compile(key, "KEY")).transpose()?,
            headers: exprs.headers()?,
            body: self.row_body(create, sink, owner)?,
        })
    }
}
