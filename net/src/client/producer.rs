//! A producer: submits batches to a CLIENT PRODUCER ingestor within its credit, resends the
//! batches refused temporarily, and reports every batch's terminal outcome.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use tokio::sync::mpsc::{self, error::TryRecvError};
use tokio::time::{sleep_until, Instant};

use super::error::ClientError;
use super::session::{Outgoing, ProducerEvent, Shared};
use crate::batch::encode_batch;
use crate::session::frame::{
    submit_batch_header, ExpectedField, Frame, Outcome, ProducerEndReason, UnknownCause,
    MAX_FRAME_IPC_BYTES,
};

/// The most terminal outcomes a producer keeps unread; beyond it `submit` refuses with
/// [`ClientError::UnreadOutcomes`] until the application reads them.
pub const MAX_UNREAD_OUTCOMES: usize = 4096;

/// What a producer asks for when it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerOptions {
    /// The explicit domain.
    pub domain: String,
    /// The CLIENT PRODUCER ingestor.
    pub ingestor: String,
    /// Exactly the ingestor's input schema's fields, in order, with SENSITIVE marked.
    pub expected_fields: Vec<ExpectedField>,
    /// How many batches it asks to have outstanding.
    pub credit_batches: u32,
    /// How many bytes it asks to have outstanding.
    pub credit_bytes: u64,
}

/// The server's answer to a producer open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerOpenedInfo {
    /// The producer's id on its session.
    pub producer_id: u64,
    /// The domain's START generation.
    pub start_generation: u64,
    /// The identity of the ingestor's endpoint contract.
    pub contract_id: u64,
    /// The batches granted.
    pub granted_batches: u32,
    /// The bytes granted.
    pub granted_bytes: u64,
    /// Whether admission was open when the producer opened.
    pub admission_open: bool,
    /// The retry policy's BACKOFF.
    pub retry_backoff: Duration,
    /// The retry policy's MAX.
    pub retry_max: Duration,
}

/// Where a batch without a terminal outcome is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchState {
    /// Sent; its outcome is awaited.
    InFlight,
    /// Refused busy (or suspended while admission looked open); resent at a deadline.
    Backoff,
    /// Waiting for admission to reopen.
    Suspended,
}

struct Unresolved {
    ipc: Arc<Vec<u8>>,
    state: BatchState,
    /// How many times it was refused temporarily.
    refusals: u32,
}

/// One producer on a [`super::Session`].
///
/// Its batches and their bytes count against the granted credit from `submit` until their
/// terminal outcome arrives, which is also how long it keeps their IPC bytes for resending.
pub struct Producer {
    shared: Arc<Shared>,
    info: ProducerOpenedInfo,
    events: mpsc::Receiver<ProducerEvent>,
    events_closed: bool,
    next_seq: u64,
    unresolved: HashMap<u64, Unresolved>,
    unresolved_bytes: u64,
    ready: VecDeque<(u64, Outcome)>,
    backoff: BTreeSet<(Instant, u64)>,
    suspended: Vec<u64>,
    admission_open: bool,
    ended: Option<ProducerEndReason>,
    failed: Option<ClientError>,
    closing: bool,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("info", &self.info)
            .field("unresolved", &self.unresolved.len())
            .field("unresolved_bytes", &self.unresolved_bytes)
            .field("unread", &self.ready.len())
            .field("admission_open", &self.admission_open)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Producer {
    pub(crate) fn new(
        shared: Arc<Shared>,
        info: ProducerOpenedInfo,
        events: mpsc::Receiver<ProducerEvent>,
    ) -> Self {
        Self {
            shared,
            admission_open: info.admission_open,
            info,
            events,
            events_closed: false,
            next_seq: 0,
            unresolved: HashMap::new(),
            unresolved_bytes: 0,
            ready: VecDeque::new(),
            backoff: BTreeSet::new(),
            suspended: Vec::new(),
            ended: None,
            failed: None,
            closing: false,
        }
    }

    /// The server's answer to the open: ids, granted credit, retry policy, and whether
    /// admission was open then.
    pub fn opened(&self) -> &ProducerOpenedInfo {
        &self.info
    }

    /// Whether admission is open as far as the server last said.
    pub fn admission_open(&self) -> bool {
        self.admission_open
    }

    /// Why the server ended the producer, once it did.
    pub fn ended_reason(&self) -> Option<ProducerEndReason> {
        self.ended
    }

    /// The batches submitted whose terminal outcome has not arrived.
    pub fn unresolved_batches(&self) -> usize {
        self.unresolved.len()
    }

    /// Encodes the batch ([`encode_batch`]), waits for credit (batches and bytes), sends it
    /// with the next sequence number and returns that number. A batch larger than one
    /// submission may carry is [`ClientError::BatchTooLarge`] and is never sent. While
    /// admission is suspended the batch is kept and sent once admission reopens.
    pub async fn submit(&mut self, batch: &RecordBatch) -> Result<u64, ClientError> {
        self.usable()?;
        let ipc = encode_batch(batch).map_err(|e| ClientError::Encode(e.to_string()))?;
        let bytes = ipc.len() as u64;
        let max_bytes = self.info.granted_bytes.min(MAX_FRAME_IPC_BYTES as u64);
        if bytes > max_bytes {
            return Err(ClientError::BatchTooLarge { bytes, max_bytes });
        }
        if self.info.granted_batches == 0 {
            return Err(ClientError::NoCredit);
        }
        loop {
            self.poll_now().await?;
            self.usable()?;
            if self.ready.len() >= MAX_UNREAD_OUTCOMES {
                return Err(ClientError::UnreadOutcomes {
                    unread: self.ready.len(),
                });
            }
            let batches_fit = self.unresolved.len() < self.info.granted_batches as usize;
            // `bytes <= granted_bytes` and the sum never exceeds it, so no overflow.
            let bytes_fit = self.unresolved_bytes + bytes <= self.info.granted_bytes;
            if batches_fit && bytes_fit {
                break;
            }
            self.wait_event().await?;
        }
        let seq = self.next_seq;
        let header = submit_batch_header(self.info.producer_id, seq, ipc.len())
            .map_err(ClientError::InvalidRequest)?;
        let ipc = Arc::new(ipc);
        // Reserve the writer's room first: from here on nothing awaits, so a cancelled submit
        // leaves no batch recorded but unsent.
        let shared = Arc::clone(&self.shared);
        let permit = if self.admission_open {
            match shared.reserve().await {
                Ok(permit) => Some(permit),
                Err(err) => return Err(self.failed.get_or_insert(err).clone()),
            }
        } else {
            None
        };
        self.next_seq = seq.wrapping_add(1);
        let state = match permit {
            Some(permit) => {
                permit.send(Outgoing::Submit {
                    header,
                    ipc: Arc::clone(&ipc),
                });
                BatchState::InFlight
            }
            None => {
                self.suspended.push(seq);
                BatchState::Suspended
            }
        };
        self.unresolved.insert(
            seq,
            Unresolved {
                ipc,
                state,
                refusals: 0,
            },
        );
        self.unresolved_bytes += bytes;
        Ok(seq)
    }

    /// The next terminal outcome, as `(seq, outcome)`, in arrival order; `None` when no
    /// submitted batch is without one. Temporary outcomes (busy, suspended) are never returned:
    /// the batch is resent, busy after the retry backoff (BACKOFF doubling per refusal up to
    /// MAX), suspended once admission reopens. When the server ends the producer, batches it
    /// gave no outcome are reported here as well: those never sent again as
    /// [`Outcome::ProducerEnded`], those in flight as [`Outcome::Unknown`].
    pub async fn next_outcome(&mut self) -> Result<Option<(u64, Outcome)>, ClientError> {
        loop {
            self.poll_now().await?;
            if let Some(outcome) = self.ready.pop_front() {
                return Ok(Some(outcome));
            }
            if let Some(err) = &self.failed {
                return Err(err.clone());
            }
            if self.unresolved.is_empty() {
                return Ok(None);
            }
            self.wait_event().await?;
        }
    }

    /// Waits until every submitted batch has a terminal outcome and returns the ones not read
    /// yet, in arrival order.
    pub async fn drain(&mut self) -> Result<Vec<(u64, Outcome)>, ClientError> {
        let mut out = Vec::new();
        while let Some(outcome) = self.next_outcome().await? {
            out.push(outcome);
        }
        Ok(out)
    }

    /// Detaches the producer: asks the server to close it and waits for its end. Batches
    /// waiting to be resent are not resent; read outcomes with [`Producer::drain`] first to
    /// keep them.
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.ended.is_some() {
            return Ok(());
        }
        self.usable()?;
        self.closing = true;
        let frame = Frame::CloseProducer {
            producer_id: self.info.producer_id,
        }
        .encode()
        .map_err(ClientError::InvalidRequest)?;
        self.shared.send(Outgoing::Frame(frame)).await?;
        while self.ended.is_none() {
            if let Some(err) = &self.failed {
                return Err(err.clone());
            }
            self.wait_event().await?;
        }
        Ok(())
    }

    fn usable(&self) -> Result<(), ClientError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        if let Some(reason) = self.ended {
            return Err(ClientError::Ended(reason));
        }
        Ok(())
    }

    /// Resends the suspended batches, lowest sequence number first. Each leaves the suspended
    /// list only once the writer has room for it, so a cancelled call loses none.
    async fn resend_suspended(&mut self) -> Result<(), ClientError> {
        self.suspended.sort_unstable_by(|a, b| b.cmp(a));
        let shared = Arc::clone(&self.shared);
        while let Some(&seq) = self.suspended.last() {
            let permit = match shared.reserve().await {
                Ok(permit) => permit,
                Err(err) => return Err(self.failed.get_or_insert(err).clone()),
            };
            self.suspended.pop();
            let Some(batch) = self.unresolved.get_mut(&seq) else {
                continue;
            };
            let header = submit_batch_header(self.info.producer_id, seq, batch.ipc.len())
                .map_err(ClientError::InvalidRequest)?;
            batch.state = BatchState::InFlight;
            permit.send(Outgoing::Submit {
                header,
                ipc: Arc::clone(&batch.ipc),
            });
        }
        Ok(())
    }

    /// Handles every event already queued, then resends what is due.
    async fn poll_now(&mut self) -> Result<(), ClientError> {
        while !self.events_closed {
            match self.events.try_recv() {
                Ok(event) => self.handle(event),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => self.on_closed(),
            }
        }
        self.resend_due().await
    }

    /// Waits for one event or the next resend deadline, and handles it.
    async fn wait_event(&mut self) -> Result<(), ClientError> {
        let deadline = if self.closing || self.ended.is_some() {
            None
        } else {
            self.backoff.first().map(|(at, _)| *at)
        };
        if self.events_closed {
            match deadline {
                Some(at) => sleep_until(at).await,
                None => return Err(self.failed.clone().unwrap_or_else(|| self.shared.error())),
            }
            return self.resend_due().await;
        }
        tokio::select! {
            event = self.events.recv() => match event {
                Some(event) => self.handle(event),
                None => self.on_closed(),
            },
            () = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {}
        }
        self.resend_due().await
    }

    fn on_closed(&mut self) {
        self.events_closed = true;
        if self.ended.is_none() && self.failed.is_none() {
            self.failed = Some(self.shared.error());
        }
    }

    fn protocol_violation(&mut self, text: String) {
        let err = ClientError::Protocol(text);
        self.shared.fail(err.clone());
        self.failed.get_or_insert(err);
    }

    fn handle(&mut self, event: ProducerEvent) {
        match event {
            ProducerEvent::Outcome(seq, outcome) => {
                let state = self.unresolved.get(&seq).map(|b| b.state);
                if state != Some(BatchState::InFlight) {
                    self.protocol_violation(format!(
                        "producer {}: outcome {outcome:?} for batch {seq}, which is not in flight",
                        self.info.producer_id
                    ));
                    return;
                }
                match outcome {
                    Outcome::Busy => self.schedule_backoff(seq),
                    Outcome::Suspended if self.admission_open => self.schedule_backoff(seq),
                    Outcome::Suspended => {
                        if let Some(batch) = self.unresolved.get_mut(&seq) {
                            batch.state = BatchState::Suspended;
                            batch.refusals = batch.refusals.saturating_add(1);
                        }
                        self.suspended.push(seq);
                    }
                    terminal => self.resolve(seq, terminal),
                }
            }
            ProducerEvent::Admission(open) => self.admission_open = open,
            ProducerEvent::Ended(reason) => {
                self.ended = Some(reason);
                self.events_closed = true;
                self.backoff.clear();
                self.suspended.clear();
                let mut left: Vec<(u64, BatchState)> =
                    self.unresolved.iter().map(|(s, b)| (*s, b.state)).collect();
                left.sort_unstable_by_key(|(seq, _)| *seq);
                for (seq, state) in left {
                    let outcome = match state {
                        BatchState::InFlight => Outcome::Unknown(UnknownCause::ProducerEnded),
                        BatchState::Backoff | BatchState::Suspended => Outcome::ProducerEnded,
                    };
                    self.resolve(seq, outcome);
                }
            }
        }
    }

    fn schedule_backoff(&mut self, seq: u64) {
        let Some(batch) = self.unresolved.get_mut(&seq) else {
            return;
        };
        batch.state = BatchState::Backoff;
        let doublings = batch.refusals.min(31);
        batch.refusals = batch.refusals.saturating_add(1);
        let base = self.info.retry_backoff;
        let cap = self.info.retry_max.max(base);
        let delay = base.saturating_mul(1u32 << doublings).min(cap);
        self.backoff.insert((Instant::now() + delay, seq));
    }

    fn resolve(&mut self, seq: u64, outcome: Outcome) {
        if let Some(batch) = self.unresolved.remove(&seq) {
            self.unresolved_bytes = self.unresolved_bytes.saturating_sub(batch.ipc.len() as u64);
        }
        self.ready.push_back((seq, outcome));
    }

    /// Resends the batches whose backoff passed and, while admission is open, the suspended
    /// ones; a busy batch due while admission is suspended waits for it to reopen.
    async fn resend_due(&mut self) -> Result<(), ClientError> {
        if self.closing || self.ended.is_some() || self.failed.is_some() {
            return Ok(());
        }
        let now = Instant::now();
        while let Some(&(at, seq)) = self.backoff.first() {
            if at > now {
                break;
            }
            self.backoff.pop_first();
            if let Some(batch) = self.unresolved.get_mut(&seq) {
                batch.state = BatchState::Suspended;
                self.suspended.push(seq);
            }
        }
        if self.admission_open && !self.suspended.is_empty() {
            self.resend_suspended().await?;
        }
        Ok(())
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if self.ended.is_none() && !self.closing && self.shared.failed().is_none() {
            self.shared.forget_producer(self.info.producer_id);
            self.shared.try_send_frame(&Frame::CloseProducer {
                producer_id: self.info.producer_id,
            });
        }
    }
}
