//! The sinks behind emitters: CLIENT CONSUMER (applications attached over the session
//! protocol) and FILE APPEND (a writer thread per file), and how their success boundaries
//! resolve acknowledgements (DESIGN §5 item 6).
//!
//! - A consumer has credit: at most that many deliveries unacknowledged. A delivery's rows
//!   are acked when the consumer acks it and nacked when it nacks it; when the consumer goes
//!   away, its unacknowledged deliveries go back to the front of the emitter's queue and are
//!   delivered again (at least once). A delivery carries at most the session protocol's
//!   65,536 rows (`MAX_BATCH_ROWS`) and fits one session frame, as consumers check: a larger
//!   flush leaves as several consecutive deliveries, its acknowledgement runs split with its
//!   rows.
//! - A file sink writes each frame, then `fdatasync`s, on its own thread (file I/O must not
//!   stall the shard), and only then acks the frame's rows. A failed write is logged with the
//!   path and the cause and tried again on the emitter's RETRY POLICY (BACKOFF doubling up to
//!   MAX); its rows stay unacknowledged meanwhile, so the graph backpressures and the source's
//!   ACK TIMEOUT, not the sink, decides when a batch has failed.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use arrow_array::RecordBatch;
use nervix_net::batch::MAX_BATCH_ROWS;
use nervix_net::session::frame::{
    ConsumerEndReason, ConsumerRefusal, Frame as SessionFrame, MAX_FRAME_IPC_BYTES,
};
use nervix_nspl::ast::emitter::FileFormat;

use super::http_sink::hand_over;
use super::ingest::expected_fields;
use super::{Outbound, ShardState};
use crate::runtime::frame::Frame;
use crate::runtime::plan::SinkPlan;

/// The most deliveries one consumer may ask to have unacknowledged.
pub const MAX_CONSUMER_CREDIT_BATCHES: u32 = 1_024;
/// Consumers one shard serves at once.
pub const MAX_CONSUMERS_PER_SHARD: usize = 4_096;
/// Frames a file sink's writer thread may have queued.
pub const FILE_SINK_QUEUE_FRAMES: usize = 16;

/// One attached consumer.
pub struct ConsumerState {
    pub domain: String,
    pub emitter: usize,
    pub outbound: Outbound,
    pub credit: u32,
    pub in_flight: HashMap<u64, Frame>,
    next_seq: u64,
    pub connection: u64,
}

/// A file write finished.
pub struct FileCompletion {
    pub job: u64,
    pub result: Result<(), String>,
}

/// The shard's side of one file sink's writer thread.
pub struct FileSinkHandle {
    jobs: std::sync::mpsc::SyncSender<(u64, RecordBatch)>,
    pub completions: Option<async_channel::Receiver<FileCompletion>>,
    in_flight: HashMap<u64, Frame>,
    next_job: u64,
    /// The next retry's delay, and when writing may resume (0: not waiting).
    backoff_ms: u64,
    retry_at_ns: u64,
}

impl FileSinkHandle {
    /// Opens (creating directories and the file) for appending and starts the writer thread.
    pub fn start(path: PathBuf, format: FileFormat, emitter: String) -> std::io::Result<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let (jobs, receiver) =
            std::sync::mpsc::sync_channel::<(u64, RecordBatch)>(FILE_SINK_QUEUE_FRAMES);
        let (done, completions) = async_channel::bounded(FILE_SINK_QUEUE_FRAMES);
        let thread_path = path.clone();
        std::thread::Builder::new()
            .name(format!("nervix-file-{emitter}"))
            .spawn(move || write_loop(file, format, thread_path, receiver, done))?;
        Ok(FileSinkHandle {
            jobs,
            completions: Some(completions),
            in_flight: HashMap::new(),
            next_job: 1,
            backoff_ms: 0,
            retry_at_ns: 0,
        })
    }
}

fn write_loop(
    mut file: File,
    format: FileFormat,
    path: PathBuf,
    jobs: std::sync::mpsc::Receiver<(u64, RecordBatch)>,
    done: async_channel::Sender<FileCompletion>,
) {
    let mut ipc: Option<arrow_ipc::writer::StreamWriter<File>> = None;
    while let Ok((job, batch)) = jobs.recv() {
        let result = match format {
            FileFormat::Ndjson => write_ndjson(&mut file, &batch),
            FileFormat::Arrow => write_ipc(&mut ipc, &file, &batch),
        }
        .map_err(|e| format!("cannot append to {}: {e}", path.display()));
        if done.send_blocking(FileCompletion { job, result }).is_err() {
            return;
        }
    }
}

fn write_ndjson(file: &mut File, batch: &RecordBatch) -> Result<(), String> {
    let mut buffer = Vec::new();
    {
        let mut writer = arrow_json::LineDelimitedWriter::new(&mut buffer);
        writer.write(batch).map_err(|e| e.to_string())?;
        writer.finish().map_err(|e| e.to_string())?;
    }
    file.write_all(&buffer).map_err(|e| e.to_string())?;
    file.sync_data().map_err(|e| e.to_string())
}

/// ARROW files are written as an Arrow IPC stream (schema once, then one message per frame) so
/// every fsynced prefix is readable; see docs/decisions.md.
fn write_ipc(
    writer: &mut Option<arrow_ipc::writer::StreamWriter<File>>,
    file: &File,
    batch: &RecordBatch,
) -> Result<(), String> {
    if writer.is_none() {
        let handle = file.try_clone().map_err(|e| e.to_string())?;
        *writer = Some(
            arrow_ipc::writer::StreamWriter::try_new(handle, &batch.schema())
                .map_err(|e| e.to_string())?,
        );
    }
    let Some(stream) = writer.as_mut() else {
        return Err("no writer".into());
    };
    stream.write(batch).map_err(|e| e.to_string())?;
    stream.flush().map_err(|e| e.to_string())?;
    stream.get_ref().sync_data().map_err(|e| e.to_string())
}

impl ShardState {
    /// Attaches a consumer to a CLIENT CONSUMER emitter; answers ConsumerOpened or refused.
    pub fn open_consumer(
        &mut self,
        connection: u64,
        outbound: &Outbound,
        request_id: u64,
        domain: &str,
        emitter: &str,
        credit_batches: u32,
    ) {
        let refuse = |reason| {
            outbound.try_send(SessionFrame::ConsumerRefused { request_id, reason });
        };
        let Some(started) = self.known.get(domain).copied() else {
            return refuse(ConsumerRefusal::DomainNotFound);
        };
        let Some(run) = self.runs.get(domain).filter(|_| started) else {
            return refuse(ConsumerRefusal::DomainStopped);
        };
        let Some(index) = run.graph.plan.emitter(emitter) else {
            return refuse(ConsumerRefusal::EmitterNotFound);
        };
        let plan = &run.graph.plan.emitters[index];
        if !matches!(plan.sink, SinkPlan::ClientConsumer) {
            return refuse(ConsumerRefusal::NotClientEmitter);
        }
        if credit_batches == 0 || credit_batches > MAX_CONSUMER_CREDIT_BATCHES {
            return refuse(ConsumerRefusal::CreditTooLarge);
        }
        if self.consumers.len() >= MAX_CONSUMERS_PER_SHARD {
            return refuse(ConsumerRefusal::NoRoom);
        }
        let fields = expected_fields(&plan.fields);
        let consumer_id = self.next_id();
        self.consumers.insert(
            consumer_id,
            ConsumerState {
                domain: domain.to_string(),
                emitter: index,
                outbound: outbound.clone(),
                credit: credit_batches,
                in_flight: HashMap::new(),
                next_seq: 1,
                connection,
            },
        );
        outbound.try_send(SessionFrame::ConsumerOpened {
            request_id,
            consumer_id,
            fields,
            granted_batches: credit_batches,
        });
        self.step();
    }

    /// A consumer acknowledged (or negatively acknowledged) a delivery.
    pub fn consumer_ack(&mut self, consumer: u64, delivery_seq: u64, accepted: bool) {
        let Some(state) = self.consumers.get_mut(&consumer) else {
            return;
        };
        let Some(frame) = state.in_flight.remove(&delivery_seq) else {
            return;
        };
        let (domain, emitter) = (state.domain.clone(), state.emitter);
        if let Some(run) = self.runs.get_mut(&domain) {
            let queue = &mut run.graph.emitter_queues[emitter];
            queue.in_flight = queue.in_flight.saturating_sub(1);
            queue.delivered_rows += frame.num_rows() as u64;
        }
        self.counters.rows_delivered += frame.num_rows() as u64;
        self.resolve_frame(&frame, accepted);
        self.step();
    }

    pub(super) fn resolve_frame(&mut self, frame: &Frame, accepted: bool) {
        for run in &frame.acks {
            self.progressed.push(run.root);
            let result = if accepted {
                self.slab.ack(run.root, run.rows as u64)
            } else {
                self.slab.nack(run.root)
            };
            if result.is_err() {
                self.counters.stale_acks += 1;
            }
        }
    }

    /// A consumer detached: its unacknowledged deliveries go back to its emitter, first.
    pub fn close_consumer(&mut self, consumer: u64, reason: Option<ConsumerEndReason>) {
        let Some(state) = self.consumers.remove(&consumer) else {
            return;
        };
        if let Some(reason) = reason {
            state.outbound.try_send(SessionFrame::ConsumerEnded {
                consumer_id: consumer,
                reason,
            });
        }
        if let Some(run) = self.runs.get_mut(&state.domain) {
            let queue = &mut run.graph.emitter_queues[state.emitter];
            let mut returned: Vec<(u64, Frame)> = state.in_flight.into_iter().collect();
            returned.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
            for (_, frame) in returned {
                queue.in_flight = queue.in_flight.saturating_sub(1);
                queue.ready.push_front(frame);
            }
        }
        self.step();
    }

    pub(super) fn end_consumers(&mut self, domain: &str) {
        let ids: Vec<u64> = self
            .consumers
            .iter()
            .filter(|(_, c)| c.domain == domain)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.close_consumer(id, Some(ConsumerEndReason::DomainStopped));
        }
    }

    /// Hands ready emitter frames to consumers with credit and to file writers.
    pub(super) fn dispatch_sinks(&mut self) -> bool {
        let mut moved = false;
        let mut acked: Vec<Frame> = Vec::new();
        let mut http: Vec<(String, usize)> = Vec::new();
        let mut kafka: Vec<(String, usize)> = Vec::new();
        for (domain, run) in self.runs.iter_mut() {
            let plan = run.graph.plan.clone();
            for (index, emitter) in plan.emitters.iter().enumerate() {
                let queue = &mut run.graph.emitter_queues[index];
                if queue.ready.is_empty() {
                    continue;
                }
                match &emitter.sink {
                    SinkPlan::ClientConsumer => {
                        // Round-robin over the attached consumers with credit.
                        let mut ids: Vec<u64> = self
                            .consumers
                            .iter()
                            .filter(|(_, c)| &c.domain == domain && c.emitter == index)
                            .map(|(id, _)| *id)
                            .collect();
                        ids.sort_unstable();
                        'frames: while !queue.ready.is_empty() {
                            let mut sent = false;
                            for id in &ids {
                                let Some(consumer) = self.consumers.get_mut(id) else {
                                    continue;
                                };
                                if consumer.in_flight.len() as u32 >= consumer.credit {
                                    continue;
                                }
                                let Some(mut frame) = queue.ready.pop_front() else {
                                    break 'frames;
                                };
                                // A flush can gather more than one delivery may carry
                                // (the session protocol's batch bounds): the rest waits at
                                // the front for the next delivery.
                                let rows = delivery_rows(&frame.batch);
                                if frame.num_rows() > rows {
                                    let (head, rest) = frame.split_at(rows);
                                    queue.ready.push_front(rest);
                                    frame = head;
                                }
                                let seq = consumer.next_seq;
                                consumer.next_seq += 1;
                                if let Err(error) =
                                    consumer.outbound.deliver(*id, seq, &frame.batch)
                                {
                                    tracing::warn!(
                                        "emitter '{}': delivery {seq} not sent: {error}",
                                        emitter.name
                                    );
                                }
                                consumer.in_flight.insert(seq, frame);
                                queue.in_flight += 1;
                                sent = true;
                                moved = true;
                            }
                            if !sent {
                                break;
                            }
                        }
                    }
                    SinkPlan::HttpRequest(_) => http.push((domain.clone(), index)),
                    SinkPlan::Kafka(_) => kafka.push((domain.clone(), index)),
                    SinkPlan::FileAppend { .. } => {
                        let Some(file) = run.files.get_mut(&index) else {
                            continue;
                        };
                        if file.retry_at_ns > crate::runtime::clock::physical_ns() {
                            continue;
                        }
                        while file.in_flight.len() < emitter.in_flight_slots() {
                            let Some(mut frame) = queue.ready.pop_front() else {
                                break;
                            };
                            let job = file.next_job;
                            if file.jobs.try_send((job, frame.batch.clone())).is_err() {
                                queue.ready.push_front(frame);
                                break;
                            }
                            file.next_job += 1;
                            if emitter.resolves_at_handoff() {
                                // Resolved once the writer holds it; a retried write holds
                                // nothing any more.
                                hand_over(&mut frame, &mut acked);
                            }
                            file.in_flight.insert(job, frame);
                            queue.in_flight += 1;
                            moved = true;
                        }
                    }
                }
            }
        }
        self.resolve_handed_over(acked);
        for (domain, index) in http {
            moved |= self.dispatch_http(&domain, index);
        }
        for (domain, index) in kafka {
            moved |= self.dispatch_kafka(&domain, index);
        }
        moved
    }

    /// A file writer finished a job.
    pub fn file_done(&mut self, domain: &str, emitter: usize, completion: FileCompletion) {
        let Some(run) = self.runs.get_mut(domain) else {
            return;
        };
        let plan = &run.graph.plan.emitters[emitter];
        let resolves_here = !plan.resolves_at_handoff();
        let name = plan.name.clone();
        let Some(file) = run.files.get_mut(&emitter) else {
            return;
        };
        let Some(frame) = file.in_flight.remove(&completion.job) else {
            return;
        };
        let (base_ms, max_ms) = (plan.retry_backoff_ms.max(1), plan.retry_max_ms.max(1));
        let queue = &mut run.graph.emitter_queues[emitter];
        queue.in_flight = queue.in_flight.saturating_sub(1);
        if let Err(error) = &completion.result {
            // Retried, never dropped: the frame goes back first in line.
            let delay_ms = file.backoff_ms.clamp(base_ms, max_ms.max(base_ms));
            file.backoff_ms = delay_ms.saturating_mul(2).min(max_ms.max(base_ms));
            file.retry_at_ns = crate::runtime::clock::physical_ns() + delay_ms * 1_000_000;
            self.counters.file_write_failures += 1;
            tracing::error!("emitter '{name}': {error}; retrying in {delay_ms} ms");
            queue.ready.push_front(frame);
            self.step();
            return;
        }
        file.backoff_ms = 0;
        file.retry_at_ns = 0;
        queue.delivered_rows += frame.num_rows() as u64;
        self.counters.rows_delivered += frame.num_rows() as u64;
        if resolves_here {
            self.resolve_frame(&frame, true);
        }
        self.step();
    }
}

/// Arrow bytes one delivery aims to stay under: half of what a session frame's IPC holds,
/// leaving the IPC stream's framing and padding far inside the bound.
const MAX_DELIVERY_ARROW_BYTES: usize = MAX_FRAME_IPC_BYTES / 2;

/// How many leading rows of `batch` one consumer delivery carries: at most the protocol's
/// [`MAX_BATCH_ROWS`], and, for rows whose Arrow bytes would overrun a session frame, that
/// share of them (at least one row; a single row larger than a frame is refused by the
/// consumer as too large, as any oversized batch is).
fn delivery_rows(batch: &RecordBatch) -> usize {
    let rows = batch.num_rows().min(MAX_BATCH_ROWS);
    let bytes: usize = batch
        .columns()
        .iter()
        .map(|column| {
            column
                .to_data()
                .get_slice_memory_size()
                .unwrap_or(usize::MAX)
        })
        .fold(0, usize::saturating_add);
    if bytes <= MAX_DELIVERY_ARROW_BYTES {
        return rows;
    }
    let fitting =
        (batch.num_rows() as u128 * MAX_DELIVERY_ARROW_BYTES as u128 / bytes as u128) as usize;
    fitting.clamp(1, rows)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch, StringArray};

    use super::{delivery_rows, MAX_BATCH_ROWS, MAX_DELIVERY_ARROW_BYTES};

    #[test]
    fn a_delivery_holds_at_most_the_protocols_rows_and_what_a_frame_holds() {
        let small = RecordBatch::try_from_iter([(
            "n",
            Arc::new(Int64Array::from_iter_values(0..100_000)) as _,
        )])
        .expect("a batch");
        assert_eq!(delivery_rows(&small), MAX_BATCH_ROWS);
        assert_eq!(delivery_rows(&small.slice(0, 10)), 10);
        // Four rows of a quarter of the byte bound each, and a little more: three fit.
        let wide = "x".repeat(MAX_DELIVERY_ARROW_BYTES / 4 + 1);
        let large = RecordBatch::try_from_iter([(
            "s",
            Arc::new(StringArray::from(vec![wide.as_str(); 4])) as _,
        )])
        .expect("a batch");
        assert_eq!(delivery_rows(&large), 3);
        assert_eq!(delivery_rows(&large.slice(0, 1)), 1);
    }
}
