//! The server-side ledger of one producer's credit (spec: Client Ingestors, "Producers").
//!
//! This module owns the one rule the spec gives about credit: a batch holds its share of the
//! credit — one batch and its bytes — from the moment it is sent until its outcome is
//! observed; a batch sent beyond the credit is refused as credit exceeded without reaching the
//! graph, and the producer is ended as a protocol violation, while the batches it already
//! submitted still receive their outcomes. [`ProducerCredit`] is a pure state machine: events
//! in ([`ProducerCredit::on_submit`], [`ProducerCredit::on_outcome`]), refusals and the
//! [`CreditAction`] they call for out. It never panics.
//!
//! Why it is correct:
//!
//! - Outstanding batches are kept by sequence number with their bytes, and the two counters
//!   are only ever changed together with that map, so a returned share is exactly the share
//!   that was held; sums use checked arithmetic, so no input overflows them.
//! - A batch is admitted to the ledger only when one more batch and its bytes both fit; the
//!   check happens before anything changes, so a refused batch holds nothing.
//! - A sequence number already outstanding is a protocol violation (its outcomes could not be
//!   told apart). A number whose outcome was observed may be sent again: that is how a batch
//!   refused temporarily (suspended, busy) is resent.
//! - Once ended, nothing more is admitted, but outcomes of outstanding batches still return
//!   their credit.

use std::collections::HashMap;

use super::frame::{Outcome, ProducerEndReason};

/// What the session must do about a refused submission or a bad outcome report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditAction {
    /// The outcome to answer the offending batch with, if it gets one.
    pub answer: Option<Outcome>,
    /// The reason to end the producer with, if it must end now.
    pub end_producer: Option<ProducerEndReason>,
}

/// A submission or outcome report the ledger refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CreditError {
    /// The batch does not fit the remaining credit.
    #[error(
        "credit exceeded: batch {batch_seq} of {bytes} bytes with {outstanding_batches} \
         batches and {outstanding_bytes} bytes outstanding, granted {granted_batches} batches \
         and {granted_bytes} bytes"
    )]
    Exceeded {
        /// The refused batch.
        batch_seq: u64,
        /// Its bytes.
        bytes: u64,
        /// The batches outstanding when it was sent.
        outstanding_batches: u32,
        /// The bytes outstanding when it was sent.
        outstanding_bytes: u64,
        /// The granted batches.
        granted_batches: u32,
        /// The granted bytes.
        granted_bytes: u64,
    },
    /// The batch's sequence number is already outstanding.
    #[error("duplicate batch sequence {batch_seq}: it is already outstanding")]
    DuplicateSeq {
        /// The sequence number.
        batch_seq: u64,
    },
    /// The producer has ended; nothing more is admitted.
    #[error("producer ended: batch {batch_seq} refused")]
    Ended {
        /// The refused batch.
        batch_seq: u64,
    },
    /// An outcome was reported for a batch that is not outstanding.
    #[error("outcome for batch {batch_seq}, which is not outstanding")]
    UnknownSeq {
        /// The sequence number.
        batch_seq: u64,
    },
}

impl CreditError {
    /// What the session does about it: a batch beyond the credit is answered credit exceeded
    /// and ends the producer as a protocol violation; a duplicate sequence number cannot be
    /// answered apart from the outstanding batch, so it only ends the producer; a batch after
    /// the end is answered producer ended; an outcome for an unknown batch is the server's own
    /// inconsistency, reported to the caller and sent to no one.
    pub fn action(&self) -> CreditAction {
        match self {
            Self::Exceeded { .. } => CreditAction {
                answer: Some(Outcome::CreditExceeded),
                end_producer: Some(ProducerEndReason::ProtocolViolation),
            },
            Self::DuplicateSeq { .. } => CreditAction {
                answer: None,
                end_producer: Some(ProducerEndReason::ProtocolViolation),
            },
            Self::Ended { .. } => CreditAction {
                answer: Some(Outcome::ProducerEnded),
                end_producer: None,
            },
            Self::UnknownSeq { .. } => CreditAction {
                answer: None,
                end_producer: None,
            },
        }
    }
}

/// One producer's credit, as the server that admits its batches keeps it.
#[derive(Debug, Clone)]
pub struct ProducerCredit {
    granted_batches: u32,
    granted_bytes: u64,
    outstanding: HashMap<u64, u64>,
    outstanding_bytes: u64,
    ended: bool,
}

impl ProducerCredit {
    /// A ledger for a producer granted `granted_batches` batches and `granted_bytes` bytes,
    /// with nothing outstanding.
    pub fn new(granted_batches: u32, granted_bytes: u64) -> Self {
        Self {
            granted_batches,
            granted_bytes,
            outstanding: HashMap::new(),
            outstanding_bytes: 0,
            ended: false,
        }
    }

    /// The granted batches.
    pub fn granted_batches(&self) -> u32 {
        self.granted_batches
    }

    /// The granted bytes.
    pub fn granted_bytes(&self) -> u64 {
        self.granted_bytes
    }

    /// The batches sent whose outcome has not been observed yet.
    pub fn outstanding_batches(&self) -> u32 {
        // At most `granted_batches` entries are ever held.
        u32::try_from(self.outstanding.len()).unwrap_or(u32::MAX)
    }

    /// The bytes of those batches.
    pub fn outstanding_bytes(&self) -> u64 {
        self.outstanding_bytes
    }

    /// Whether batch `batch_seq` is outstanding.
    pub fn is_outstanding(&self, batch_seq: u64) -> bool {
        self.outstanding.contains_key(&batch_seq)
    }

    /// Whether the producer has ended.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Marks the producer ended (for any reason): later submissions are refused as producer
    /// ended; outstanding batches still return their credit.
    pub fn end(&mut self) {
        self.ended = true;
    }

    /// A batch of `bytes` bytes was sent as `batch_seq`. On success it holds one batch and
    /// its bytes until [`ProducerCredit::on_outcome`]. On refusal it holds nothing, and
    /// [`CreditError::action`] says what to answer; a refusal that ends the producer also
    /// marks this ledger ended.
    pub fn on_submit(&mut self, batch_seq: u64, bytes: u64) -> Result<(), CreditError> {
        if self.ended {
            return Err(CreditError::Ended { batch_seq });
        }
        if self.outstanding.contains_key(&batch_seq) {
            self.ended = true;
            return Err(CreditError::DuplicateSeq { batch_seq });
        }
        let batches_fit = self.outstanding_batches() < self.granted_batches;
        let bytes_fit = self
            .outstanding_bytes
            .checked_add(bytes)
            .is_some_and(|total| total <= self.granted_bytes);
        if !(batches_fit && bytes_fit) {
            self.ended = true;
            return Err(CreditError::Exceeded {
                batch_seq,
                bytes,
                outstanding_batches: self.outstanding_batches(),
                outstanding_bytes: self.outstanding_bytes,
                granted_batches: self.granted_batches,
                granted_bytes: self.granted_bytes,
            });
        }
        // `bytes_fit` proved the sum does not overflow.
        self.outstanding_bytes += bytes;
        self.outstanding.insert(batch_seq, bytes);
        Ok(())
    }

    /// The outcome of batch `batch_seq` was observed (terminal or temporary): its share of
    /// the credit returns. Returns the bytes it held.
    pub fn on_outcome(&mut self, batch_seq: u64) -> Result<u64, CreditError> {
        let bytes = self
            .outstanding
            .remove(&batch_seq)
            .ok_or(CreditError::UnknownSeq { batch_seq })?;
        self.outstanding_bytes = self.outstanding_bytes.saturating_sub(bytes);
        Ok(bytes)
    }
}
