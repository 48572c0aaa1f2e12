//! A sink frame's message bodies (HTTP REQUEST, KAFKA TOPIC): encoded on the shard in one
//! bounded pass for WIRE JSON, CBOR, AVRO and plain JSON, or — for a JAQ codec's ON EMITTING,
//! whose cost is unbounded — on the node's extension workers, so the shard never runs a
//! program and never blocks.
//!
//! A JAQ frame is handed to the workers as one job (its rows, encoded into one buffer, come
//! back together); the sink sends the frame's rows once the bodies are back. While it waits
//! the frame holds one of its emitter's in-flight slots (ACK PARALLEL MAX n, SEQUENTIAL 1).
//! When the extension class is full — every worker busy and its wait queue full — the
//! submission is tried again every [`WORKERS_RETRY_US`] until the class admits it: the frame
//! is never refused or dropped for it. The frames behind it stay in the emitter queue, which
//! fills and backpressures the graph exactly as a slow sink does (spec "When The Extension
//! Workers Are Full" for ingestion; decisions.md "JAQ ON EMITTING on the extension workers").
//!
//! A row the encoder refuses carries its reason in [`EncodedRows`]; the sinks turn it into
//! that row's failure, which follows ON MESSAGE ERROR. A job that panicked or was cancelled
//! refuses every row of its frame with the job's error.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arrow_array::RecordBatch;
use nervix_shards::workers::{JobHandle, WorkerClass};

use crate::codec::{jaq_emit_rows, EncodedRows, JaqCodecPlan};
use crate::runtime::plan::RowBody;

/// How long a frame whose bodies found the extension workers full waits before it asks again.
pub const WORKERS_RETRY_US: u64 = 200;

/// The failure of a row its encoder refused, as ON MESSAGE ERROR sees it (`error.message`).
pub fn refusal(reason: &str) -> String {
    format!("cannot encode the row: {reason}")
}

/// A frame's bodies as its sink receives them.
pub enum FrameBodies {
    /// Encoded on the shard; `None` for WITHOUT BODY.
    Ready(Option<EncodedRows>),
    /// JAQ ON EMITTING: being encoded on the extension workers.
    OnWorkers(WorkerBodies),
}

impl FrameBodies {
    /// The bodies of `batch`'s rows: encoded now, or handed to `workers` when `body` runs
    /// there. A shard without extension workers (outside a node) refuses every row of a body
    /// that needs them.
    pub fn of(body: &RowBody, batch: &RecordBatch, workers: Option<&Arc<WorkerClass>>) -> Self {
        match (body, workers) {
            (RowBody::Jaq(plan), Some(workers)) => FrameBodies::OnWorkers(WorkerBodies {
                plan: plan.clone(),
                batch: batch.clone(),
                workers: workers.clone(),
                job: None,
            }),
            (RowBody::Jaq(_), None) => FrameBodies::Ready(Some(EncodedRows::refused(
                batch.num_rows(),
                "no extension workers run ON EMITTING on this node",
            ))),
            _ => FrameBodies::Ready(body.encode(batch)),
        }
    }
}

/// A JAQ frame's encoding on the extension workers: not yet admitted, or running.
pub struct WorkerBodies {
    plan: Arc<JaqCodecPlan>,
    batch: RecordBatch,
    workers: Arc<WorkerClass>,
    job: Option<JobHandle<EncodedRows>>,
}

impl WorkerBodies {
    /// Submits the job unless it runs already: `Ok(true)` running, `Ok(false)` the class is
    /// full (ask again), `Err` the class is shut down (every row refused with why).
    fn admit(&mut self) -> Result<bool, EncodedRows> {
        if self.job.is_some() {
            return Ok(true);
        }
        let (plan, batch) = (self.plan.clone(), self.batch.clone());
        let job = move || {
            let mut out = EncodedRows::with_rows(batch.num_rows());
            jaq_emit_rows(&plan, &batch, &mut out);
            out
        };
        match self.workers.try_submit(job) {
            Ok(handle) => {
                self.job = Some(handle);
                Ok(true)
            }
            Err(refused) if refused.closed => Err(EncodedRows::refused(
                self.batch.num_rows(),
                &refused.to_string(),
            )),
            Err(_) => Ok(false),
        }
    }

    /// Submits (when not admitted yet) and collects: `Pending` while the workers run the
    /// frame or are full. Never blocks; a full class is asked again on the next poll.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<EncodedRows> {
        match self.admit() {
            Ok(true) => {}
            Ok(false) => return Poll::Pending,
            Err(refused) => return Poll::Ready(refused),
        }
        let rows = self.batch.num_rows();
        let Some(job) = self.job.as_mut() else {
            return Poll::Pending;
        };
        match Pin::new(job).poll(cx) {
            Poll::Ready(result) => {
                self.job = None;
                Poll::Ready(
                    result.unwrap_or_else(|error| EncodedRows::refused(rows, &error.to_string())),
                )
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Waits (on a connector task) until the workers admitted and encoded the frame.
    pub async fn wait(mut self) -> EncodedRows {
        loop {
            match self.admit() {
                Ok(true) => return std::future::poll_fn(|cx| self.poll(cx)).await,
                Ok(false) => tokio::time::sleep(Duration::from_micros(WORKERS_RETRY_US)).await,
                Err(refused) => return refused,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field as ArrowField, Schema};
    use nervix_nspl::ast::CatalogStmt;
    use nervix_nspl::Statement;
    use nervix_shards::workers::{WorkerClassConfig, DEFAULT_WORKER_STACK_BYTES};

    use crate::types::FieldType;
    use crate::validate::route::Field;

    fn plan() -> Arc<JaqCodecPlan> {
        let script = nervix_nspl::parse_script(
            "CREATE CODEC c FROM JSON TO SCHEMA s WITH JAQ TRANSFORMATIONS ON EMITTING \
             '{n: (.id * 10)}';",
        );
        let Some(Statement::Catalog(CatalogStmt::CreateCodec(codec))) =
            script.statements.into_iter().next().map(|s| s.statement)
        else {
            panic!("a codec")
        };
        let fields = [Field {
            name: "id".to_string(),
            ty: FieldType {
                data_type: crate::types::DataType::I64,
                nullable: false,
                sensitive: false,
            },
        }];
        Arc::new(JaqCodecPlan::build(&codec, &fields).expect("plan builds"))
    }

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![ArrowField::new(
            "id",
            DataType::Int64,
            false,
        )]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2]))]).expect("batch")
    }

    #[test]
    fn a_full_class_keeps_the_frame_waiting_until_a_worker_frees() {
        let workers = Arc::new(
            WorkerClass::start(WorkerClassConfig {
                name: "test-emit".to_string(),
                workers: 1,
                queue_jobs: 0,
                stack_bytes: DEFAULT_WORKER_STACK_BYTES,
            })
            .expect("workers"),
        );
        // One job holds the only slot until released.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let busy = workers
            .try_submit(move || held.recv().is_ok())
            .expect("the busy job");
        let mut bodies = match FrameBodies::of(&RowBody::Jaq(plan()), &batch(), Some(&workers)) {
            FrameBodies::OnWorkers(bodies) => bodies,
            FrameBodies::Ready(_) => panic!("a JAQ body runs on the workers"),
        };
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(bodies.poll(&mut cx).is_pending(), "the class is full");
        assert_eq!(workers.counters().refused, 1);
        release.send(()).expect("release");
        futures_lite::future::block_on(busy).expect("the busy job ran");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let rows = loop {
            if let Poll::Ready(rows) = bodies.poll(&mut cx) {
                break rows;
            }
            assert!(std::time::Instant::now() < deadline, "encoded in time");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(rows.row(0), Ok(&br#"{"n":10}"#[..]));
        assert_eq!(rows.row(1), Ok(&br#"{"n":20}"#[..]));
        workers.shutdown();
    }

    #[test]
    fn a_shut_down_class_refuses_the_rows_instead_of_waiting_forever() {
        let workers =
            Arc::new(WorkerClass::start(WorkerClassConfig::new("test-emit", 1)).expect("workers"));
        workers.shutdown();
        let bodies = match FrameBodies::of(&RowBody::Jaq(plan()), &batch(), Some(&workers)) {
            FrameBodies::OnWorkers(bodies) => bodies,
            FrameBodies::Ready(_) => panic!("a JAQ body runs on the workers"),
        };
        let rows = futures_lite::future::block_on(bodies.wait());
        assert_eq!(rows.len(), 2);
        assert_eq!(rows.row(1), Err("worker class 'test-emit' is shut down"));
    }
}
