//! One session connection: the reader task that routes frames to producers and consumers, the
//! writer task that writes frames, and the registry that connects them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use super::consumer::{Consumer, ConsumerOptions};
use super::error::ClientError;
use super::producer::{Producer, ProducerOpenedInfo, ProducerOptions};
use crate::session::frame::{
    ConsumerEndReason, ExpectedField, Frame, FrameDecoder, Outcome, ProducerEndReason,
    SUBMIT_HEADER_BYTES,
};

/// The frames the writer channel holds before a sender waits.
const WRITE_QUEUE_FRAMES: usize = 64;

/// The writer's buffer: small frames (acks, opens) are gathered into one write.
const WRITE_BUFFER_BYTES: usize = 64 << 10;

/// The reader's read size.
const READ_CHUNK_BYTES: usize = 256 << 10;

/// Room in a producer's or consumer's event channel beyond its credit, for control frames
/// (admission changes, the end).
const CONTROL_SLACK: usize = 16;

/// One frame on its way to the writer.
pub(crate) enum Outgoing {
    /// A whole encoded frame.
    Frame(Vec<u8>),
    /// A submit frame: its header and the IPC bytes the producer keeps for resending.
    Submit {
        header: [u8; SUBMIT_HEADER_BYTES],
        ipc: Arc<Vec<u8>>,
    },
}

/// What the reader routes to a producer.
#[derive(Debug)]
pub(crate) enum ProducerEvent {
    Outcome(u64, Outcome),
    Admission(bool),
    Ended(ProducerEndReason),
}

/// What the reader routes to a consumer.
#[derive(Debug)]
pub(crate) enum ConsumerEvent {
    Delivery(u64, Vec<u8>),
    Ended(ConsumerEndReason),
}

/// A consumer's open answer, as the reader hands it over.
pub(crate) struct ConsumerOpenedInfo {
    pub(crate) consumer_id: u64,
    pub(crate) fields: Vec<ExpectedField>,
    pub(crate) granted_batches: u32,
}

type ProducerAnswer = Result<(ProducerOpenedInfo, mpsc::Receiver<ProducerEvent>), ClientError>;
type ConsumerAnswer = Result<(ConsumerOpenedInfo, mpsc::Receiver<ConsumerEvent>), ClientError>;

enum PendingOpen {
    Producer(oneshot::Sender<ProducerAnswer>),
    Consumer(oneshot::Sender<ConsumerAnswer>),
}

#[derive(Default)]
struct Registry {
    failed: Option<ClientError>,
    pending: HashMap<u64, PendingOpen>,
    producers: HashMap<u64, mpsc::Sender<ProducerEvent>>,
    consumers: HashMap<u64, mpsc::Sender<ConsumerEvent>>,
}

/// The state a session's handles and its tasks share.
pub(crate) struct Shared {
    out: mpsc::Sender<Outgoing>,
    registry: Mutex<Registry>,
    next_request: AtomicU64,
    reader: Mutex<Option<AbortHandle>>,
}

impl Shared {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        // No code panics while holding the lock; a poisoned lock's state is still consistent.
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The error that ended the session, or [`ClientError::Disconnected`] if none was kept.
    pub(crate) fn error(&self) -> ClientError {
        self.registry()
            .failed
            .clone()
            .unwrap_or(ClientError::Disconnected)
    }

    /// The error that ended the session, if it ended.
    pub(crate) fn failed(&self) -> Option<ClientError> {
        self.registry().failed.clone()
    }

    /// Ends the session with `err` (the first error wins): every pending open answers it, and
    /// every producer and consumer sees its channel close.
    pub(crate) fn fail(&self, err: ClientError) {
        let (pending, producers, consumers) = {
            let mut reg = self.registry();
            if reg.failed.is_none() {
                reg.failed = Some(err);
            }
            (
                std::mem::take(&mut reg.pending),
                std::mem::take(&mut reg.producers),
                std::mem::take(&mut reg.consumers),
            )
        };
        let err = self.error();
        for (_, open) in pending {
            match open {
                PendingOpen::Producer(tx) => drop(tx.send(Err(err.clone()))),
                PendingOpen::Consumer(tx) => drop(tx.send(Err(err.clone()))),
            }
        }
        drop((producers, consumers));
        let reader = self
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(reader) = reader {
            reader.abort();
        }
    }

    /// Queues a frame for the writer, waiting while its queue is full.
    pub(crate) async fn send(&self, out: Outgoing) -> Result<(), ClientError> {
        if let Some(err) = self.failed() {
            return Err(err);
        }
        self.out.send(out).await.map_err(|_| self.error())
    }

    /// Waits for room in the writer's queue; the permit then queues one frame without waiting,
    /// so a caller can change its state and queue the frame with no await point between.
    pub(crate) async fn reserve(&self) -> Result<mpsc::Permit<'_, Outgoing>, ClientError> {
        if let Some(err) = self.failed() {
            return Err(err);
        }
        self.out.reserve().await.map_err(|_| self.error())
    }

    /// Queues an encoded frame without waiting; used from `Drop`, best effort.
    pub(crate) fn try_send_frame(&self, frame: &Frame) {
        if let Ok(bytes) = frame.encode() {
            let _ = self.out.try_send(Outgoing::Frame(bytes));
        }
    }

    /// Forgets a producer the application dropped.
    pub(crate) fn forget_producer(&self, producer_id: u64) {
        self.registry().producers.remove(&producer_id);
    }

    /// Forgets a consumer the application dropped.
    pub(crate) fn forget_consumer(&self, consumer_id: u64) {
        self.registry().consumers.remove(&consumer_id);
    }

    fn register_open(&self, request_id: u64, open: PendingOpen) -> Result<(), ClientError> {
        let mut reg = self.registry();
        if let Some(err) = &reg.failed {
            return Err(err.clone());
        }
        reg.pending.insert(request_id, open);
        Ok(())
    }

    fn forget_open(&self, request_id: u64) {
        self.registry().pending.remove(&request_id);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(reader) = self
            .reader
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            reader.abort();
        }
    }
}

/// One session connection to a node (DESIGN §8: default port 47392).
///
/// Producers and consumers opened on it keep the connection alive: it closes when the session
/// and every producer and consumer opened on it are dropped, or when it fails.
pub struct Session {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("failed", &self.shared.failed())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Connects to a node's session port over TCP (no TLS yet: see [`Session::from_stream`]).
    /// Must be called inside a tokio runtime; it spawns the session's reader and writer tasks.
    pub async fn connect(addr: impl ToSocketAddrs) -> Result<Session, ClientError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        Ok(Self::start(read, write))
    }

    /// Runs a session over an already connected byte stream, e.g. a TLS client stream.
    pub fn from_stream<S>(stream: S) -> Session
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read, write) = tokio::io::split(stream);
        Self::start(read, write)
    }

    fn start<R, W>(read: R, write: W) -> Session
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (out, rx) = mpsc::channel(WRITE_QUEUE_FRAMES);
        let shared = Arc::new(Shared {
            out,
            registry: Mutex::new(Registry::default()),
            next_request: AtomicU64::new(1),
            reader: Mutex::new(None),
        });
        let reader = tokio::spawn(run_reader(read, Arc::downgrade(&shared)));
        *shared.reader.lock().unwrap_or_else(PoisonError::into_inner) = Some(reader.abort_handle());
        tokio::spawn(run_writer(write, rx, Arc::downgrade(&shared)));
        Session { shared }
    }

    /// Whether the session has ended (its connection failed or the server closed it).
    pub fn is_closed(&self) -> bool {
        self.shared.failed().is_some()
    }

    /// Opens a producer on a CLIENT PRODUCER ingestor. A refusal is
    /// [`ClientError::Refused`]; nothing is then attached.
    pub async fn open_producer(&self, options: ProducerOptions) -> Result<Producer, ClientError> {
        let request_id = self.shared.next_request.fetch_add(1, Ordering::Relaxed);
        let frame = Frame::OpenProducer {
            request_id,
            domain: options.domain,
            ingestor: options.ingestor,
            expected_fields: options.expected_fields,
            credit_batches: options.credit_batches,
            credit_bytes: options.credit_bytes,
        }
        .encode()
        .map_err(ClientError::InvalidRequest)?;
        let (tx, rx) = oneshot::channel();
        self.shared
            .register_open(request_id, PendingOpen::Producer(tx))?;
        let answer = self.await_open(request_id, frame, rx).await?;
        let (info, events) = answer?;
        Ok(Producer::new(Arc::clone(&self.shared), info, events))
    }

    /// Opens a consumer on a CLIENT CONSUMER emitter. A refusal is
    /// [`ClientError::ConsumerRefused`]; nothing is then attached.
    pub async fn open_consumer(&self, options: ConsumerOptions) -> Result<Consumer, ClientError> {
        let request_id = self.shared.next_request.fetch_add(1, Ordering::Relaxed);
        let frame = Frame::OpenConsumer {
            request_id,
            domain: options.domain,
            emitter: options.emitter,
            credit_batches: options.credit_batches,
        }
        .encode()
        .map_err(ClientError::InvalidRequest)?;
        let (tx, rx) = oneshot::channel();
        self.shared
            .register_open(request_id, PendingOpen::Consumer(tx))?;
        let (info, events) = self.await_open(request_id, frame, rx).await??;
        Ok(Consumer::new(Arc::clone(&self.shared), info, events))
    }

    async fn await_open<T>(
        &self,
        request_id: u64,
        frame: Vec<u8>,
        rx: oneshot::Receiver<T>,
    ) -> Result<T, ClientError> {
        if let Err(err) = self.shared.send(Outgoing::Frame(frame)).await {
            self.shared.forget_open(request_id);
            return Err(err);
        }
        rx.await.map_err(|_| self.shared.error())
    }
}

/// Reads frames until the connection ends or breaks, routing each.
async fn run_reader<R: AsyncRead + Unpin>(mut read: R, shared: Weak<Shared>) {
    let mut decoder = FrameDecoder::new();
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    loop {
        let n = match read.read(&mut buf).await {
            Ok(0) => {
                let err = if decoder.is_idle() {
                    ClientError::Disconnected
                } else {
                    ClientError::Protocol("the connection closed inside a frame".into())
                };
                if let Some(shared) = shared.upgrade() {
                    shared.fail(err);
                }
                return;
            }
            Ok(n) => n,
            Err(err) => {
                if let Some(shared) = shared.upgrade() {
                    shared.fail(err.into());
                }
                return;
            }
        };
        decoder.push(buf.get(..n).unwrap_or_default());
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(err) => {
                    if let Some(shared) = shared.upgrade() {
                        shared.fail(ClientError::Protocol(format!("undecodable frame: {err}")));
                    }
                    return;
                }
            };
            let Some(shared) = shared.upgrade() else {
                return;
            };
            if let Err(err) = route(&shared, frame).await {
                shared.fail(err);
                return;
            }
        }
    }
}

fn violation(text: impl Into<String>) -> ClientError {
    ClientError::Protocol(text.into())
}

fn event_capacity(granted_batches: u32) -> usize {
    usize::try_from(granted_batches)
        .unwrap_or(usize::MAX)
        .saturating_add(CONTROL_SLACK)
        .min(1 << 24)
}

/// Routes one frame from the server. Frames for producers or consumers the application has
/// dropped are ignored; anything that breaks the protocol is an error that ends the session.
async fn route(shared: &Shared, frame: Frame) -> Result<(), ClientError> {
    match frame {
        Frame::ProducerOpened {
            request_id,
            producer_id,
            start_generation,
            contract_id,
            granted_batches,
            granted_bytes,
            admission_open,
            retry_backoff_ms,
            retry_max_ms,
        } => {
            let (tx, rx) = mpsc::channel(event_capacity(granted_batches));
            let info = ProducerOpenedInfo {
                producer_id,
                start_generation,
                contract_id,
                granted_batches,
                granted_bytes,
                admission_open,
                retry_backoff: Duration::from_millis(retry_backoff_ms),
                retry_max: Duration::from_millis(retry_max_ms),
            };
            let open = {
                let mut reg = shared.registry();
                let open = match reg.pending.remove(&request_id) {
                    Some(PendingOpen::Producer(open)) => open,
                    Some(PendingOpen::Consumer(_)) => {
                        return Err(violation(format!(
                            "a producer opened for consumer request {request_id}"
                        )))
                    }
                    None => {
                        return Err(violation(format!(
                            "a producer opened for unknown request {request_id}"
                        )))
                    }
                };
                if reg.producers.contains_key(&producer_id) {
                    return Err(violation(format!("producer id {producer_id} reused")));
                }
                reg.producers.insert(producer_id, tx);
                open
            };
            if open.send(Ok((info, rx))).is_err() {
                // The open was abandoned: detach the producer nobody holds.
                shared.forget_producer(producer_id);
                shared.try_send_frame(&Frame::CloseProducer { producer_id });
            }
        }
        Frame::OpenRefused { request_id, reason } => {
            match shared.registry().pending.remove(&request_id) {
                Some(PendingOpen::Producer(open)) => drop(open.send(Err(ClientError::Refused(reason)))),
                _ => {
                    return Err(violation(format!(
                        "a producer open refused for request {request_id}, which is no pending producer open"
                    )))
                }
            }
        }
        Frame::ConsumerOpened {
            request_id,
            consumer_id,
            fields,
            granted_batches,
        } => {
            let (tx, rx) = mpsc::channel(event_capacity(granted_batches));
            let info = ConsumerOpenedInfo {
                consumer_id,
                fields,
                granted_batches,
            };
            let open = {
                let mut reg = shared.registry();
                let open = match reg.pending.remove(&request_id) {
                    Some(PendingOpen::Consumer(open)) => open,
                    _ => {
                        return Err(violation(format!(
                            "a consumer opened for request {request_id}, which is no pending consumer open"
                        )))
                    }
                };
                if reg.consumers.contains_key(&consumer_id) {
                    return Err(violation(format!("consumer id {consumer_id} reused")));
                }
                reg.consumers.insert(consumer_id, tx);
                open
            };
            if open.send(Ok((info, rx))).is_err() {
                shared.forget_consumer(consumer_id);
                shared.try_send_frame(&Frame::CloseConsumer { consumer_id });
            }
        }
        Frame::ConsumerRefused { request_id, reason } => {
            match shared.registry().pending.remove(&request_id) {
                Some(PendingOpen::Consumer(open)) => {
                    drop(open.send(Err(ClientError::ConsumerRefused(reason))))
                }
                _ => {
                    return Err(violation(format!(
                        "a consumer open refused for request {request_id}, which is no pending consumer open"
                    )))
                }
            }
        }
        Frame::BatchOutcome {
            producer_id,
            batch_seq,
            outcome,
        } => {
            to_producer(
                shared,
                producer_id,
                ProducerEvent::Outcome(batch_seq, outcome),
                false,
            )
            .await
        }
        Frame::AdmissionChanged { producer_id, open } => {
            to_producer(shared, producer_id, ProducerEvent::Admission(open), false).await
        }
        Frame::ProducerEnded {
            producer_id,
            reason,
        } => to_producer(shared, producer_id, ProducerEvent::Ended(reason), true).await,
        Frame::Delivery {
            consumer_id,
            delivery_seq,
            ipc,
        } => {
            to_consumer(
                shared,
                consumer_id,
                ConsumerEvent::Delivery(delivery_seq, ipc),
                false,
            )
            .await
        }
        Frame::ConsumerEnded {
            consumer_id,
            reason,
        } => to_consumer(shared, consumer_id, ConsumerEvent::Ended(reason), true).await,
        Frame::OpenProducer { .. }
        | Frame::SubmitBatch { .. }
        | Frame::OpenConsumer { .. }
        | Frame::DeliveryAck { .. }
        | Frame::CloseProducer { .. }
        | Frame::CloseConsumer { .. } => {
            return Err(violation(format!(
                "the server sent a client frame (type {})",
                frame.frame_type()
            )))
        }
    }
    Ok(())
}

async fn to_producer(shared: &Shared, producer_id: u64, event: ProducerEvent, last: bool) {
    let tx = {
        let mut reg = shared.registry();
        if last {
            reg.producers.remove(&producer_id)
        } else {
            reg.producers.get(&producer_id).cloned()
        }
    };
    if let Some(tx) = tx {
        // A dropped producer's events are ignored.
        let _ = tx.send(event).await;
    }
}

async fn to_consumer(shared: &Shared, consumer_id: u64, event: ConsumerEvent, last: bool) {
    let tx = {
        let mut reg = shared.registry();
        if last {
            reg.consumers.remove(&consumer_id)
        } else {
            reg.consumers.get(&consumer_id).cloned()
        }
    };
    if let Some(tx) = tx {
        let _ = tx.send(event).await;
    }
}

/// Writes queued frames until every sender is gone or a write fails; flushes whenever the
/// queue runs empty.
async fn run_writer<W: AsyncWrite + Unpin>(
    write: W,
    mut rx: mpsc::Receiver<Outgoing>,
    shared: Weak<Shared>,
) {
    let mut w = BufWriter::with_capacity(WRITE_BUFFER_BYTES, write);
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        let mut result = Ok(());
        while let Some(out) = next.take() {
            result = match out {
                Outgoing::Frame(bytes) => w.write_all(&bytes).await,
                Outgoing::Submit { header, ipc } => match w.write_all(&header).await {
                    Ok(()) => w.write_all(&ipc).await,
                    Err(err) => Err(err),
                },
            };
            if result.is_err() {
                break;
            }
            next = rx.try_recv().ok();
        }
        if result.is_ok() {
            result = w.flush().await;
        }
        if let Err(err) = result {
            if let Some(shared) = shared.upgrade() {
                shared.fail(err.into());
            }
            return;
        }
    }
    let _ = w.shutdown().await;
}
