//! The errors of the Rust client library, and whether retrying can help.

use std::sync::Arc;

use crate::session::frame::{
    ConsumerEndReason, ConsumerRefusal, FrameError, OpenRefusal, ProducerEndReason,
};

/// Why a client operation failed.
///
/// Every variant says whether a retry can help; [`ClientError::is_retryable`] answers the
/// same question in code. "Retry" means doing the same thing again: reconnecting and opening a
/// new producer or consumer with the same options, or calling the same method again.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// Reading or writing the session's connection failed; the session is over. Retryable:
    /// a new session may connect.
    #[error("session i/o failed: {0}")]
    Io(Arc<std::io::Error>),
    /// The server closed the connection; the session is over. Retryable: a new session may
    /// connect.
    #[error("the server closed the session")]
    Disconnected,
    /// The server broke the session protocol (a frame that does not decode, a client frame, an
    /// outcome for a batch that is not in flight, a delivery beyond the credit …); the session
    /// is over. Not retryable: the server is broken or speaks another protocol version.
    #[error("the server broke the session protocol: {0}")]
    Protocol(String),
    /// The server refused to open the producer; nothing is attached. Retryable when the
    /// refusal may pass with time ([`ClientError::is_retryable`] says which).
    #[error("producer open refused: {0:?}")]
    Refused(OpenRefusal),
    /// The server refused to open the consumer; nothing is attached. Retryable when the
    /// refusal may pass with time.
    #[error("consumer open refused: {0:?}")]
    ConsumerRefused(ConsumerRefusal),
    /// The encoded batch is larger than one submission may carry (the smaller of the granted
    /// bytes and what one session frame holds); it was never sent. Not retryable: split the
    /// batch.
    #[error(
        "batch of {bytes} bytes is larger than the {max_bytes} bytes one submission may carry"
    )]
    BatchTooLarge {
        /// The encoded batch's bytes.
        bytes: u64,
        /// The most bytes one submission may carry.
        max_bytes: u64,
    },
    /// The producer was granted no batches of credit, so it can never submit. Not retryable
    /// on this producer.
    #[error("the producer was granted no credit")]
    NoCredit,
    /// Too many terminal outcomes wait to be read with `next_outcome` or `drain`; the batch
    /// was not sent. Retryable once the outcomes are read.
    #[error("{unread} outcomes wait to be read; read them before submitting more")]
    UnreadOutcomes {
        /// The outcomes waiting.
        unread: usize,
    },
    /// The batch could not be encoded as Arrow IPC; it was never sent. Not retryable.
    #[error("the batch could not be encoded: {0}")]
    Encode(String),
    /// A request field is outside the protocol's bounds (e.g. an over-long name); nothing was
    /// sent. Not retryable.
    #[error("invalid request: {0}")]
    InvalidRequest(FrameError),
    /// The server ended the producer; it accepts no more batches (outcomes already received
    /// can still be read). Retryable for reasons that pass with time (owner lost, relocated,
    /// contract changed): open a new producer.
    #[error("the producer ended: {0:?}")]
    Ended(ProducerEndReason),
    /// The server ended the consumer. Retryable for reasons that pass with time: open a new
    /// consumer.
    #[error("the consumer ended: {0:?}")]
    ConsumerEnded(ConsumerEndReason),
    /// A delivery does not decode as one canonical Arrow IPC batch with the consumer's fields.
    /// It still holds its credit: nack it (or ack it) to return it. Not retryable.
    #[error("delivery {seq} is invalid: {detail}")]
    InvalidDelivery {
        /// The delivery.
        seq: u64,
        /// What is wrong with it.
        detail: String,
    },
    /// An ack or nack for a delivery that is not unacknowledged on this consumer. Not
    /// retryable.
    #[error("delivery {seq} is not awaiting an acknowledgement")]
    NotOutstanding {
        /// The delivery.
        seq: u64,
    },
}

impl ClientError {
    /// Whether doing the same thing again (on a new session, producer or consumer where this
    /// one is over) may succeed without changing the request.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Io(_) | Self::Disconnected | Self::UnreadOutcomes { .. } => true,
            Self::Refused(reason) => matches!(
                reason,
                OpenRefusal::DomainStopped | OpenRefusal::IngestorNotRunning | OpenRefusal::NoRoom
            ),
            Self::ConsumerRefused(reason) => {
                matches!(
                    reason,
                    ConsumerRefusal::DomainStopped | ConsumerRefusal::NoRoom
                )
            }
            Self::Ended(reason) => matches!(
                reason,
                ProducerEndReason::OwnerLost
                    | ProducerEndReason::Relocated
                    | ProducerEndReason::ContractChanged
            ),
            Self::ConsumerEnded(reason) => matches!(reason, ConsumerEndReason::EmitterStopped),
            Self::Protocol(_)
            | Self::BatchTooLarge { .. }
            | Self::NoCredit
            | Self::Encode(_)
            | Self::InvalidRequest(_)
            | Self::InvalidDelivery { .. }
            | Self::NotOutstanding { .. } => false,
        }
    }
}

impl From<std::io::Error> for ClientError {
    fn from(err: std::io::Error) -> Self {
        Self::Io(Arc::new(err))
    }
}
