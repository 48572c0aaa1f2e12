//! HTTP REQUEST emitters: one request per row (DESIGN §7; issue: "2xx delivers at complete
//! response headers; 401/403/407/408/425/429/5xx retried on the backoff with Retry-After;
//! other 4xx go to ON MESSAGE ERROR").
//!
//! The shard builds each frame's requests with the sink's programs (METHOD, PATH, every
//! `write_header`) over the whole batch and its bodies with the codec into one buffer (a JAQ
//! codec's ON EMITTING runs on the extension workers instead: the job carries the rows there
//! and waits for their bodies, see [`super::sink_body`]), then hands the frame as one job to
//! the connector runtime, which sends its rows concurrently (at most
//! [`MAX_CONCURRENT_REQUESTS`] per job) and retries each retryable failure on the emitter's
//! RETRY POLICY — `Retry-After` when the server sent one, else BACKOFF doubling up to MAX —
//! until the row is delivered, refused, or its emitter's ACK TIMEOUT has passed. A row the
//! encoder refused is not sent: it fails with the encoder's reason. The job
//! completes with one outcome per row; the shard then acknowledges delivered rows and applies
//! ON MESSAGE ERROR to the others (IGNORE acknowledges them, LOG logs and negatively
//! acknowledges their payloads). At most MAX n (ACK PARALLEL) frames are in flight, so a slow
//! or failing server backpressures the graph instead of growing a queue.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use nervix_connectors::http::{Attempt, HttpClient, RequestSpec};
use nervix_connectors::runtime::ConnectorRuntime;
use nervix_connectors::ConnectorError;
use nervix_shards::workers::WorkerClass;

use super::sink_body::{refusal, FrameBodies};
use super::ShardState;
use crate::codec::EncodedRows;
use crate::runtime::frame::Frame;
use crate::runtime::plan::{EmitterPlan, ErrorPlan, HttpSinkPlan, SinkPlan};
use crate::vm::{EvalContext, Program};

/// Requests of one job in flight at once.
pub const MAX_CONCURRENT_REQUESTS: usize = 64;

/// One row's outcome: delivered, or why not.
pub type RowOutcome = Result<(), String>;

/// A frame's requests (a row whose request could not be built carries its error), without
/// bodies yet, and the bodies.
struct HttpJob {
    job: u64,
    requests: Vec<Result<RequestSpec, String>>,
    bodies: FrameBodies,
}

/// A job finished: one outcome per row, in row order.
pub struct HttpCompletion {
    pub job: u64,
    pub rows: Vec<RowOutcome>,
}

/// How retries are paced, from the emitter's RETRY POLICY and ACK TIMEOUT.
#[derive(Debug, Clone, Copy)]
struct Retry {
    backoff: Duration,
    max: Duration,
    /// How long one row may take in all (`None`: NO ACK, retried without a deadline).
    deadline: Option<Duration>,
}

/// The shard's side of one HTTP REQUEST emitter.
pub struct HttpSinkHandle {
    plan: Arc<HttpSinkPlan>,
    jobs: async_channel::Sender<HttpJob>,
    pub completions: Option<async_channel::Receiver<HttpCompletion>>,
    in_flight: HashMap<u64, Frame>,
    next_job: u64,
    /// The extension workers, when the body runs there (JAQ ON EMITTING).
    workers: Option<Arc<WorkerClass>>,
}

impl HttpSinkHandle {
    pub fn start(
        runtime: &ConnectorRuntime,
        plan: Arc<HttpSinkPlan>,
        emitter: &EmitterPlan,
        workers: Option<Arc<WorkerClass>>,
    ) -> Result<HttpSinkHandle, ConnectorError> {
        let client = HttpClient::new(plan.client.clone())?;
        let slots = emitter.in_flight_slots();
        let (jobs, receiver) = async_channel::bounded::<HttpJob>(slots);
        let (done, completions) = async_channel::bounded::<HttpCompletion>(slots);
        let retry = Retry {
            backoff: Duration::from_millis(emitter.retry_backoff_ms.max(1)),
            max: Duration::from_millis(emitter.retry_max_ms.max(emitter.retry_backoff_ms).max(1)),
            deadline: emitter.ack_timeout_ns.map(Duration::from_nanos),
        };
        runtime.spawn(async move {
            while let Ok(job) = receiver.recv().await {
                let (client, done) = (client.clone(), done.clone());
                tokio::spawn(async move {
                    let bodies = match job.bodies {
                        FrameBodies::Ready(bodies) => bodies,
                        FrameBodies::OnWorkers(bodies) => Some(bodies.wait().await),
                    };
                    let mut requests = job.requests;
                    attach_bodies(&mut requests, bodies);
                    let rows = run_job(&client, requests, retry).await;
                    let _ = done.send(HttpCompletion { job: job.job, rows }).await;
                });
            }
        });
        Ok(HttpSinkHandle {
            plan,
            jobs,
            completions: Some(completions),
            in_flight: HashMap::new(),
            next_job: 1,
            workers,
        })
    }
}

/// Gives each request its row's body (one shared buffer, sliced), or the row's refusal.
fn attach_bodies(requests: &mut [Result<RequestSpec, String>], bodies: Option<EncodedRows>) {
    let Some(bodies) = bodies else {
        return;
    };
    let (bytes, rows) = bodies.into_parts();
    let bytes = bytes::Bytes::from(bytes);
    for (request, row) in requests.iter_mut().zip(rows) {
        let Ok(spec) = request else {
            continue;
        };
        match row {
            Ok(range) => spec.body = Some(bytes.slice(range)),
            Err(reason) => *request = Err(refusal(&reason)),
        }
    }
}

async fn run_job(
    client: &HttpClient,
    requests: Vec<Result<RequestSpec, String>>,
    retry: Retry,
) -> Vec<RowOutcome> {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_REQUESTS));
    let mut rows = tokio::task::JoinSet::new();
    let count = requests.len();
    for (row, request) in requests.into_iter().enumerate() {
        let (client, permits) = (client.clone(), permits.clone());
        rows.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let outcome = match request {
                Ok(spec) => deliver(&client, &spec, retry).await,
                Err(error) => Err(error),
            };
            (row, outcome)
        });
    }
    let mut outcomes: Vec<RowOutcome> = vec![Err("not sent".to_string()); count];
    while let Some(joined) = rows.join_next().await {
        if let Ok((row, outcome)) = joined {
            outcomes[row] = outcome;
        }
    }
    outcomes
}

/// Sends one row until it is delivered, refused, or out of time.
async fn deliver(client: &HttpClient, spec: &RequestSpec, retry: Retry) -> RowOutcome {
    let started = Instant::now();
    let mut backoff = retry.backoff;
    loop {
        match client.send(spec).await {
            Attempt::Delivered { .. } => return Ok(()),
            Attempt::Refused { cause } => return Err(cause),
            Attempt::Retry { cause, retry_after } => {
                let wait = retry_after.unwrap_or(backoff);
                if let Some(deadline) = retry.deadline {
                    if started.elapsed() + wait > deadline {
                        return Err(format!(
                            "not delivered within the ACK TIMEOUT of {} ms; last attempt: {cause}",
                            deadline.as_millis()
                        ));
                    }
                }
                tracing::debug!(
                    "{} {}: {cause}; retrying in {wait:?}",
                    spec.method,
                    spec.path
                );
                tokio::time::sleep(wait).await;
                backoff = (backoff * 2).min(retry.max);
            }
        }
    }
}

/// A sink program over a frame's finalized records: one value per row, and the rows whose
/// evaluation failed with why.
pub(super) fn eval_rows(
    program: &Program,
    columns: &[ArrayRef],
    rows: usize,
    now_ns: i64,
) -> (ArrayRef, HashMap<u32, String>) {
    let sources: [&[ArrayRef]; 2] = [&[], columns];
    let evaluated = program.eval(&EvalContext {
        sources: &sources,
        num_rows: rows,
        now_ns,
        envelope: None,
    });
    let errors = evaluated
        .errors
        .iter()
        .map(|(row, message)| (row, message.to_string()))
        .collect();
    (evaluated.values, errors)
}

/// The requests of `batch`'s rows.
fn build_requests(plan: &HttpSinkPlan, batch: &RecordBatch) -> Vec<Result<RequestSpec, String>> {
    let rows = batch.num_rows();
    let columns: Vec<ArrayRef> = batch.columns().to_vec();
    let now_ns = crate::runtime::clock::wall_ns();
    let eval = |program: &Program| eval_rows(program, &columns, rows, now_ns);
    let method = eval(&plan.method);
    let path = eval(&plan.path);
    let headers: Vec<_> = plan
        .headers
        .iter()
        .map(|(name, value)| (eval(name), eval(value)))
        .collect();
    let text = |values: &ArrayRef, row: usize| -> Option<String> {
        let strings = values.as_any().downcast_ref::<StringArray>()?;
        (!strings.is_null(row)).then(|| strings.value(row).to_string())
    };
    (0..rows)
        .map(|row| {
            let at = row as u32;
            for (_, errors) in [&method, &path] {
                if let Some(error) = errors.get(&at) {
                    return Err(error.clone());
                }
            }
            let method = text(&method.0, row).ok_or("METHOD is null")?;
            let path = text(&path.0, row).ok_or("PATH is null")?;
            let mut written = Vec::with_capacity(headers.len());
            for ((name, name_errors), (value, value_errors)) in &headers {
                if let Some(error) = name_errors.get(&at).or_else(|| value_errors.get(&at)) {
                    return Err(format!("write_header: {error}"));
                }
                // A null name or value writes no header.
                if let (Some(name), Some(value)) = (text(name, row), text(value, row)) {
                    written.push((name, value));
                }
            }
            Ok(RequestSpec {
                method,
                path,
                headers: written,
                body: None,
            })
        })
        .collect()
}

/// Moves `frame`'s acknowledgement runs onto a copy kept in `handed_over`, resolved once the
/// sink holds the frame: the sink's copy then carries no acknowledgement of its own.
pub(super) fn hand_over(frame: &mut Frame, handed_over: &mut Vec<Frame>) {
    handed_over.push(frame.clone());
    frame.acks.clear();
}

impl ShardState {
    /// Hands ready frames of HTTP REQUEST emitter `index` to its connector task.
    pub(super) fn dispatch_http(&mut self, domain: &str, index: usize) -> bool {
        let mut moved = false;
        let mut handed_over: Vec<Frame> = Vec::new();
        {
            let Some(run) = self.runs.get_mut(domain) else {
                return false;
            };
            let emitter = &run.graph.plan.emitters[index];
            let (resolves_at_handoff, slots) =
                (emitter.resolves_at_handoff(), emitter.in_flight_slots());
            let Some(sink) = run.http_sinks.get_mut(&index) else {
                return false;
            };
            let queue = &mut run.graph.emitter_queues[index];
            while sink.in_flight.len() < slots {
                let Some(mut frame) = queue.ready.pop_front() else {
                    break;
                };
                let job = sink.next_job;
                let requests = build_requests(&sink.plan, &frame.batch);
                let bodies = FrameBodies::of(&sink.plan.body, &frame.batch, sink.workers.as_ref());
                if sink
                    .jobs
                    .try_send(HttpJob {
                        job,
                        requests,
                        bodies,
                    })
                    .is_err()
                {
                    queue.ready.push_front(frame);
                    break;
                }
                sink.next_job += 1;
                if resolves_at_handoff {
                    hand_over(&mut frame, &mut handed_over);
                }
                sink.in_flight.insert(job, frame);
                queue.in_flight += 1;
                moved = true;
            }
        }
        self.resolve_handed_over(handed_over);
        moved
    }

    /// A job finished: delivered rows are acknowledged, the rest follow ON MESSAGE ERROR.
    pub fn http_done(&mut self, domain: &str, index: usize, completion: HttpCompletion) {
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let Some(sink) = run.http_sinks.get_mut(&index) else {
            return;
        };
        let Some(frame) = sink.in_flight.remove(&completion.job) else {
            return;
        };
        let emitter = &run.graph.plan.emitters[index];
        let ignore = matches!(emitter.route.on_error, ErrorPlan::Ignore);
        let failed: Vec<(usize, &String)> = completion
            .rows
            .iter()
            .enumerate()
            .filter_map(|(row, outcome)| outcome.as_ref().err().map(|e| (row, e)))
            .collect();
        if let Some((row, cause)) = failed.first() {
            if !ignore {
                tracing::warn!(
                    "emitter '{}': {} of {} requests failed; row {row}: {cause}",
                    emitter.name,
                    failed.len(),
                    completion.rows.len()
                );
            }
        }
        let delivered = (completion.rows.len() - failed.len()) as u64;
        let queue = &mut run.graph.emitter_queues[index];
        queue.in_flight = queue.in_flight.saturating_sub(1);
        queue.delivered_rows += delivered;
        self.counters.rows_delivered += delivered;
        self.settle_sink_frame(domain, index, &frame, &completion.rows, false);
        self.step();
    }

    /// Applies a sink's per-row outcomes to `frame` by its emitter's ON MESSAGE ERROR: IGNORE
    /// acknowledges every row, LOG negatively acknowledges the payloads of failed rows, SEND TO
    /// turns failed rows into error records. `resolved` frames (NO ACK, DETACHED) hold no
    /// acknowledgement any more; SEND TO still records their failures.
    pub(super) fn settle_sink_frame(
        &mut self,
        domain: &str,
        index: usize,
        frame: &Frame,
        outcomes: &[RowOutcome],
        resolved: bool,
    ) {
        let Some(run) = self.runs.get(domain) else {
            return;
        };
        let on_error = &run.graph.plan.emitters[index].route.on_error;
        let (send_to, ignore) = (
            matches!(on_error, ErrorPlan::SendTo(_)),
            matches!(on_error, ErrorPlan::Ignore),
        );
        let failed: Vec<(u32, String)> = outcomes
            .iter()
            .enumerate()
            .filter_map(|(row, outcome)| outcome.as_ref().err().map(|e| (row as u32, e.clone())))
            .collect();
        if send_to && !failed.is_empty() {
            let at = self.instant();
            if let Some(run) = self.runs.get_mut(domain) {
                run.graph
                    .sink_failed(index, frame, &failed, at, super::cx!(self));
            }
            return;
        }
        if let Some(run) = self.runs.get_mut(domain) {
            run.graph.count_sink_errors(index, failed.len() as u64);
        }
        if !resolved {
            self.resolve_rows(frame, outcomes, ignore);
        }
    }

    /// Acknowledges the rows of frames a sink took under NO ACK or a detached boundary
    /// ([`hand_over`]): the handoff is their success.
    pub(super) fn resolve_handed_over(&mut self, frames: Vec<Frame>) {
        for frame in frames {
            self.resolve_frame(&frame, true);
        }
    }

    /// Acknowledges each acknowledgement run of `frame` by its rows' outcomes: a run with a
    /// failed row is negatively acknowledged unless failures are ignored.
    pub(super) fn resolve_rows(
        &mut self,
        frame: &Frame,
        outcomes: &[RowOutcome],
        ignore_failures: bool,
    ) {
        let mut row = 0usize;
        for run in &frame.acks {
            let end = row + run.rows as usize;
            let failed = outcomes
                .get(row..end.min(outcomes.len()))
                .is_some_and(|rows| rows.iter().any(Result::is_err));
            row = end;
            self.progressed.push(run.root);
            let result = if failed && !ignore_failures {
                self.slab.nack(run.root)
            } else {
                self.slab.ack(run.root, run.rows as u64)
            };
            if result.is_err() {
                self.counters.stale_acks += 1;
            }
        }
    }
}

/// Starts the HTTP sinks of a deployed plan's emitters (on the shard that runs sinks).
pub(super) fn start_http_sinks(
    runtime: &ConnectorRuntime,
    plan: &crate::runtime::plan::DomainPlan,
    extension: Option<&Arc<WorkerClass>>,
) -> HashMap<usize, HttpSinkHandle> {
    let mut sinks = HashMap::new();
    for (index, emitter) in plan.emitters.iter().enumerate() {
        if let SinkPlan::HttpRequest(http) = &emitter.sink {
            let workers = http
                .body
                .encodes_on_workers()
                .then(|| extension.cloned())
                .flatten();
            match HttpSinkHandle::start(runtime, http.clone(), emitter, workers) {
                Ok(handle) => {
                    sinks.insert(index, handle);
                }
                Err(error) => tracing::error!(
                    "domain '{}': emitter '{}' cannot start: {error}",
                    plan.name,
                    emitter.name
                ),
            }
        }
    }
    sinks
}
