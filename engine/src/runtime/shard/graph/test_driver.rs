//! A one-shard test harness (tests only): a reingestor regroups readings by sensor into a
//! 10 s tumbling count per sensor, driven at instants a test chooses, with the emitter's
//! rows collected.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use nervix_shards::ack::AckSlab;
use nervix_shards::branch_key::BranchKey;
use nervix_shards::flush::Now;

use super::{DeliveryBudget, Graph, Instant, PayloadToken};
use crate::catalog::plan::{plan_statement, StatementContext};
use crate::catalog::Catalog;
use crate::runtime::clock::DomainPace;
use crate::runtime::frame::Frame;
use crate::runtime::plan::DomainPlan;
use crate::runtime::shard::mesh::{Ctx, Outbox, ROOT_SHARD};

/// A reingestor regroups readings by sensor (FLUSH IMMEDIATE) into a 10 s tumbling count
/// per sensor, which a consumer emitter receives.
pub(super) const SCRIPT: &str = "
    CREATE DOMAIN d;
    CREATE SCHEMA reading (sensor STRING, ts DATETIME);
    CREATE SCHEMA tally (sensor STRING, n I64);
    CREATE SCHEMA sensor_key (sensor STRING);
    CREATE BRANCH by_sensor SCHEMA sensor_key TTL 5m;
    CREATE RELAY readings SCHEMA reading UNBRANCHED;
    CREATE RELAY keyed SCHEMA reading BRANCHED BY by_sensor;
    CREATE RELAY tallies SCHEMA tally BRANCHED BY by_sensor;
    CREATE REINGESTOR regroup
      FROM readings
      TO keyed
        INHERIT ALL
        BRANCHED BY by_sensor SET sensor = message.sensor
        FLUSH IMMEDIATE
        ON MESSAGE ERROR LOG;
    CREATE WINDOW PROCESSOR tally_by_sensor
      FROM keyed
      WIDTH 10s DURATION
      STEP 10s DURATION
      BRANCHED BY by_sensor
      TO tallies
        SET sensor = branch.sensor, n = COUNT(input.sensor)
        ON MESSAGE ERROR LOG;
    CREATE CLIENT CONSUMER EMITTER tallies_out
      FROM tallies
      TO SCHEMA tally
        MODE ACK PARALLEL MAX 16 ACK TIMEOUT 30s
        RETRY POLICY BACKOFF 10ms MAX 100ms
      FLUSH IMMEDIATE
      ON MESSAGE ERROR LOG
      ON GENERAL ERROR LOG;
";

pub(super) const S: i64 = 1_000_000_000;

pub(super) fn graph() -> Graph {
    Graph::new(Arc::new(plan_of(SCRIPT)))
}

/// The plan of domain `d` as `script` (statements separated by `;`) defines it.
pub(super) fn plan_of(script: &str) -> DomainPlan {
    let mut catalog = Catalog::default();
    for statement in script.split_inclusive(';').map(str::trim) {
        if statement.is_empty() {
            continue;
        }
        let parsed = nervix_nspl::parse_statement(statement)
            .unwrap_or_else(|e| panic!("{statement}: does not parse: {e:?}"));
        let context = StatementContext {
            domain: Some("d"),
            span: nervix_nspl::Span::default(),
            wall_ns: 0,
        };
        let planned = plan_statement(&catalog, context, &parsed)
            .unwrap_or_else(|e| panic!("{statement}: refused: {e}"));
        for change in &planned.changes {
            catalog.apply_change(change);
        }
    }
    crate::runtime::plan::build(
        &catalog.domains["d"],
        &catalog,
        std::path::Path::new("."),
        DomainPace::Unpaced,
    )
    .expect("the plan builds")
}

/// An instant `physical_ns` into the run; the domain clock stays at the epoch, so only
/// event time (the watermark) closes windows.
pub(super) fn at(physical_ns: u64) -> Instant {
    Instant {
        now: Now::new(0, physical_ns),
        snapshot_ns: 0,
    }
}

/// One input batch of readings, `(sensor, event time in s)`.
pub(super) fn readings(rows: &[(&str, i64)]) -> Frame {
    let schema = Arc::new(Schema::new(vec![
        Field::new("sensor", DataType::Utf8, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
    ]));
    let times: Vec<i64> = rows.iter().map(|(_, s)| s * S).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|(k, _)| *k))),
        Arc::new(TimestampNanosecondArray::from(times.clone()).with_timezone("UTC")),
    ];
    Frame {
        groups: None,
        batch: RecordBatch::try_new(schema, columns).expect("a batch"),
        key: BranchKey::Unbranched,
        acks: crate::runtime::frame::AckRuns::new(),
        times: Some(Arc::new(Int64Array::from(times))),
    }
}

/// Drives a graph on one shard at instants the test chooses, collecting the emitter's
/// rows as `(sensor, n)`.
pub(super) struct Driver {
    pub(super) graph: Graph,
    pub(super) slab: AckSlab<PayloadToken>,
    pub(super) outbox: Outbox,
    pub(super) progressed: Vec<nervix_shards::ack::AckHandle>,
    pub(super) watches: crate::runtime::shard::watch::Watches,
    pub(super) tallies: Vec<(String, i64)>,
}

impl Driver {
    pub(super) fn new() -> Driver {
        Driver::with_graph(graph())
    }

    /// A driver of `script`'s domain `d`, which must read `readings` and emit `(sensor, n)`
    /// rows as [`SCRIPT`] does.
    pub(super) fn with_script(script: &str) -> Driver {
        Driver::with_graph(Graph::new(Arc::new(plan_of(script))))
    }

    fn with_graph(graph: Graph) -> Driver {
        Driver {
            graph,
            slab: AckSlab::new(1_024).expect("a slab"),
            outbox: Outbox::new(1),
            progressed: Vec::new(),
            watches: Default::default(),
            tallies: Vec::new(),
        }
    }

    pub(super) fn with_ctx(&mut self, step: impl FnOnce(&mut Graph, &mut Ctx<'_>)) {
        let mut cx = Ctx {
            shard: ROOT_SHARD,
            shards: 1,
            slab: &mut self.slab,
            outbox: &mut self.outbox,
            progressed: &mut self.progressed,
            watches: &mut self.watches,
        };
        step(&mut self.graph, &mut cx);
        for queue in &mut self.graph.emitter_queues {
            for frame in queue.ready.drain(..) {
                let sensors = frame.batch.column(0).as_string::<i32>().clone();
                let counts = frame.batch.column(1).as_primitive::<Int64Type>().clone();
                for (sensor, n) in sensors.iter().zip(counts.values()) {
                    self.tallies
                        .push((sensor.unwrap_or_default().to_string(), *n));
                }
            }
        }
    }

    /// An input batch arrives and moves as far as it can, without a tick.
    pub(super) fn send(&mut self, rows: &[(&str, i64)], physical_ns: u64) {
        self.with_ctx(|graph, cx| {
            graph.receive_relay_frame("readings", readings(rows), at(physical_ns), cx);
            graph.pump(at(physical_ns), cx);
        });
    }

    pub(super) fn tick(&mut self, physical_ns: u64) {
        self.with_ctx(|graph, cx| graph.tick(at(physical_ns), cx));
    }

    /// A tick whose pump may hand on what `budget` allows; returns whether it left
    /// relay frames for later.
    pub(super) fn tick_within(&mut self, physical_ns: u64, budget: DeliveryBudget) -> bool {
        self.graph.deliver_budget = budget;
        self.graph.deferred = false;
        self.tick(physical_ns);
        self.graph.deliver_budget = DeliveryBudget::UNBOUNDED;
        self.graph.deferred
    }
}
