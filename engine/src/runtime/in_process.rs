//! In-process clients: producers and consumers that live in the same process as the node
//! (benchmarks, `nervix demo`, embedding applications). They follow the session protocol's
//! rules exactly — open with the expected fields, credit in batches and bytes, one terminal
//! outcome per batch, consumer credit and acks — but skip the socket and Arrow IPC: batches
//! move by reference (`Arc` buffers) through the shard's command queue.

use std::sync::Arc;

use arrow_array::RecordBatch;
use nervix_net::session::frame::{
    ConsumerRefusal, ExpectedField, Frame as SessionFrame, OpenRefusal, Outcome, ProducerEndReason,
};

use super::driver::Command;
use super::shard::InProcessEvent;
use super::DataPlane;

/// Why an in-process client call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InProcessError {
    #[error("the open was refused: {0:?}")]
    Refused(OpenRefusal),
    #[error("the consumer open was refused: {0:?}")]
    ConsumerRefused(ConsumerRefusal),
    #[error("the producer ended: {0:?}")]
    Ended(ProducerEndReason),
    #[error("the data plane stopped")]
    Stopped,
}

/// A producer in this process.
pub struct InProcessProducer {
    data_plane: Arc<DataPlane>,
    id: u64,
    events: async_channel::Receiver<InProcessEvent>,
    next_seq: u64,
    outstanding: u32,
    granted_batches: u32,
    granted_bytes: u64,
    /// The bytes each outstanding batch holds of the credit (as the shard charges them).
    outstanding_bytes: std::collections::HashMap<u64, u64>,
    held_bytes: u64,
    ready: std::collections::VecDeque<(u64, Outcome)>,
}

impl InProcessProducer {
    pub async fn open(
        data_plane: Arc<DataPlane>,
        domain: &str,
        ingestor: &str,
        fields: Vec<ExpectedField>,
        credit_batches: u32,
        credit_bytes: u64,
    ) -> Result<InProcessProducer, InProcessError> {
        let (tx, events) = async_channel::unbounded();
        data_plane
            .send(Command::OpenProducer {
                domain: domain.to_string(),
                ingestor: ingestor.to_string(),
                fields,
                credit_batches,
                credit_bytes,
                events: tx,
            })
            .await
            .map_err(|_| InProcessError::Stopped)?;
        match events.recv().await {
            Ok(InProcessEvent::Frame(SessionFrame::ProducerOpened {
                producer_id,
                granted_batches,
                granted_bytes,
                ..
            })) => Ok(InProcessProducer {
                data_plane,
                id: producer_id,
                events,
                next_seq: 1,
                outstanding: 0,
                granted_batches,
                granted_bytes,
                outstanding_bytes: Default::default(),
                held_bytes: 0,
                ready: Default::default(),
            }),
            Ok(InProcessEvent::Frame(SessionFrame::OpenRefused { reason, .. })) => {
                Err(InProcessError::Refused(reason))
            }
            _ => Err(InProcessError::Stopped),
        }
    }

    /// Submits a batch, waiting for its credit first — a batch and its bytes, counted as the
    /// shard charges them; returns its sequence number. A batch larger than all the granted
    /// bytes goes once nothing is outstanding, and the shard answers it credit exceeded.
    pub async fn submit(&mut self, batch: RecordBatch) -> Result<u64, InProcessError> {
        let bytes = super::logical_bytes::logical_bytes(&batch);
        while self.outstanding >= self.granted_batches
            || (self.outstanding > 0 && self.held_bytes + bytes > self.granted_bytes)
        {
            self.receive().await?;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.outstanding += 1;
        self.held_bytes += bytes;
        self.outstanding_bytes.insert(seq, bytes);
        self.data_plane
            .send(Command::Submit {
                producer: self.id,
                batch_seq: seq,
                batch,
            })
            .await
            .map_err(|_| InProcessError::Stopped)?;
        Ok(seq)
    }

    async fn receive(&mut self) -> Result<(), InProcessError> {
        match self.events.recv().await {
            Ok(InProcessEvent::Frame(SessionFrame::BatchOutcome {
                batch_seq, outcome, ..
            })) => {
                self.settle(batch_seq);
                self.ready.push_back((batch_seq, outcome));
                Ok(())
            }
            Ok(InProcessEvent::Frame(SessionFrame::ProducerEnded { reason, .. })) => {
                Err(InProcessError::Ended(reason))
            }
            Ok(_) => Ok(()),
            Err(_) => Err(InProcessError::Stopped),
        }
    }

    /// The next outcome (temporary ones included: the caller decides to resend).
    pub async fn next_outcome(&mut self) -> Result<(u64, Outcome), InProcessError> {
        loop {
            if let Some(outcome) = self.ready.pop_front() {
                return Ok(outcome);
            }
            self.receive().await?;
        }
    }

    /// Outcomes already received, without waiting.
    pub fn try_outcome(&mut self) -> Option<(u64, Outcome)> {
        while let Ok(event) = self.events.try_recv() {
            if let InProcessEvent::Frame(SessionFrame::BatchOutcome {
                batch_seq, outcome, ..
            }) = event
            {
                self.settle(batch_seq);
                self.ready.push_back((batch_seq, outcome));
            }
        }
        self.ready.pop_front()
    }

    /// Batch `batch_seq`'s outcome arrived: its batch and bytes of credit return.
    fn settle(&mut self, batch_seq: u64) {
        self.outstanding = self.outstanding.saturating_sub(1);
        if let Some(bytes) = self.outstanding_bytes.remove(&batch_seq) {
            self.held_bytes -= bytes;
        }
    }

    /// Batches sent whose outcome has not arrived.
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    pub async fn close(self) {
        let _ = self
            .data_plane
            .send(Command::CloseProducer { producer: self.id })
            .await;
    }
}

/// A consumer in this process.
pub struct InProcessConsumer {
    data_plane: Arc<DataPlane>,
    id: u64,
    events: async_channel::Receiver<InProcessEvent>,
}

impl InProcessConsumer {
    pub async fn open(
        data_plane: Arc<DataPlane>,
        domain: &str,
        emitter: &str,
        credit_batches: u32,
    ) -> Result<InProcessConsumer, InProcessError> {
        let (tx, events) = async_channel::unbounded();
        data_plane
            .send(Command::OpenConsumer {
                domain: domain.to_string(),
                emitter: emitter.to_string(),
                credit_batches,
                events: tx,
            })
            .await
            .map_err(|_| InProcessError::Stopped)?;
        match events.recv().await {
            Ok(InProcessEvent::Frame(SessionFrame::ConsumerOpened { consumer_id, .. })) => {
                Ok(InProcessConsumer {
                    data_plane,
                    id: consumer_id,
                    events,
                })
            }
            Ok(InProcessEvent::Frame(SessionFrame::ConsumerRefused { reason, .. })) => {
                Err(InProcessError::ConsumerRefused(reason))
            }
            _ => Err(InProcessError::Stopped),
        }
    }

    /// The next delivery; `None` once the consumer ended.
    pub async fn next(&mut self) -> Option<(u64, RecordBatch)> {
        loop {
            match self.events.recv().await {
                Ok(InProcessEvent::Delivery {
                    delivery_seq,
                    batch,
                    ..
                }) => return Some((delivery_seq, batch)),
                Ok(InProcessEvent::Frame(SessionFrame::ConsumerEnded { .. })) | Err(_) => {
                    return None
                }
                Ok(_) => {}
            }
        }
    }

    pub async fn ack(&self, delivery_seq: u64) -> Result<(), InProcessError> {
        self.data_plane
            .send(Command::Ack {
                consumer: self.id,
                delivery_seq,
                accepted: true,
            })
            .await
            .map_err(|_| InProcessError::Stopped)
    }

    pub async fn nack(&self, delivery_seq: u64) -> Result<(), InProcessError> {
        self.data_plane
            .send(Command::Ack {
                consumer: self.id,
                delivery_seq,
                accepted: false,
            })
            .await
            .map_err(|_| InProcessError::Stopped)
    }

    pub async fn close(self) {
        let _ = self
            .data_plane
            .send(Command::CloseConsumer { consumer: self.id })
            .await;
    }
}
