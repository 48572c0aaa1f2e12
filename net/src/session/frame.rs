//! The frames of the session protocol, producer and consumer side, and their encoding
//! (DESIGN §8; spec: Client Ingestors, "Outcomes" and "Producers").
//!
//! Type codes: 1 open producer, 2 producer opened, 3 open refused, 4 submit batch, 5 batch
//! outcome, 6 producer ended, 7 admission changed, 8 open consumer, 9 consumer opened,
//! 10 consumer refused, 11 delivery, 12 delivery ack, 13 consumer ended, 14 close producer,
//! 15 close consumer.
//!
//! This module owns the bytes of every session frame: a frame is a `u32` big-endian length,
//! then a `u8` frame type, then the body; the length counts the type byte and the body and is
//! at most [`MAX_SESSION_FRAME_BYTES`]. Bodies are written by hand, field by field: integers
//! big-endian (`u8`, `u32`, `u64`), booleans one byte `0` or `1`, strings a `u32` byte length
//! and UTF-8 bounded per field ([`MAX_NAME_BYTES`], [`MAX_TYPE_TEXT_BYTES`],
//! [`MAX_DETAIL_BYTES`]), byte bodies a `u32` length and the bytes, enumerations one code byte.
//!
//! Why it is correct:
//!
//! - The declared length is checked against [`MAX_SESSION_FRAME_BYTES`] as soon as the five
//!   four length bytes are in, before a body is decoded; the [`FrameDecoder`] holds only the
//!   bytes it was fed and has not yet returned as frames (so its memory is bounded by the
//!   caller's read size plus one bounded frame), and releases everything once it fails.
//! - Every read goes through one cursor that checks the remaining length first, so a length
//!   prefix can never make it read, or allocate, past the frame it is in: a string or byte
//!   field is copied only after its whole length is known to be present, and a list
//!   pre-allocates at most what the remaining bytes could hold.
//! - A body must be consumed exactly: bytes left over are [`FrameError::TrailingBytes`]; an
//!   unknown frame type, enumeration code or flag bit is an error, never ignored.
//! - Encoding refuses what decoding would refuse (an over-long string or frame), so every
//!   frame [`Frame::encode`] writes decodes back to itself.
//!
//! After a [`FrameDecoder`] reports an error the stream has lost its framing: the decoder
//! keeps reporting that error, and the session is closed.

use crate::batch::BatchDefect;

use super::wire::{Code, Reader, Writer};

/// The most bytes one session frame may declare: its type byte and body (32 MiB).
pub const MAX_SESSION_FRAME_BYTES: usize = 32 << 20;

/// The bytes of a frame's length prefix.
pub const FRAME_LENGTH_BYTES: usize = 4;

/// The most bytes a name (domain, ingestor, field) may take in a frame.
pub const MAX_NAME_BYTES: usize = 1024;

/// The most bytes an NSPL type text of an expected field may take in a frame.
pub const MAX_TYPE_TEXT_BYTES: usize = 4096;

/// The most bytes a free-text detail (an invalid batch's defect detail) may take in a frame.
pub const MAX_DETAIL_BYTES: usize = 4096;

/// Why a frame could not be decoded or encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The declared frame length exceeds the bound.
    #[error("frame too large: {len_bytes} bytes declared, at most {max_bytes} allowed")]
    TooLarge {
        /// The declared length.
        len_bytes: u64,
        /// The bound.
        max_bytes: usize,
    },
    /// The declared frame length is zero: not even a type byte.
    #[error("empty frame: no frame type")]
    Empty,
    /// The frame type byte names no frame.
    #[error("unknown frame type {0}")]
    UnknownType(u8),
    /// A body field runs past the end of the frame.
    #[error("truncated frame: field {field} runs past the end of the frame")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// A string field is not UTF-8.
    #[error("field {field} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A string field is longer than its bound.
    #[error("field {field} is {len_bytes} bytes, at most {max_bytes} allowed")]
    FieldTooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        len_bytes: u64,
        /// Its bound.
        max_bytes: usize,
    },
    /// An enumeration code, boolean or flag byte has no meaning.
    #[error("field {field} has unknown code {code}")]
    UnknownCode {
        /// The field.
        field: &'static str,
        /// The code read.
        code: u8,
    },
    /// Bytes remain after the last field of the body.
    #[error("{extra_bytes} trailing bytes after a frame of type {frame_type}")]
    TrailingBytes {
        /// The frame type.
        frame_type: u8,
        /// How many bytes were left.
        extra_bytes: usize,
    },
}

/// One field a producer declares it expects (spec: "a producer must declare exactly those
/// fields, including which are SENSITIVE").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedField {
    /// The field's name.
    pub name: String,
    /// The field's type spelled as NSPL type text, e.g. `STRING` or `I64`.
    pub type_text: String,
    /// Whether the field may be null.
    pub optional: bool,
    /// Whether the field is declared SENSITIVE.
    pub sensitive: bool,
}

/// Why an open was refused (spec: "Producers"); nothing is left attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenRefusal {
    /// The domain does not exist.
    DomainNotFound,
    /// The domain is stopped.
    DomainStopped,
    /// The ingestor does not exist.
    IngestorNotFound,
    /// The ingestor reads a transport rather than admitting client batches.
    NotClientIngestor,
    /// The ingestor is not running on its scheduled node.
    IngestorNotRunning,
    /// The expected fields differ from the ingestor's input schema.
    FieldsDiffer,
    /// The credit asked for is larger than one producer may ask for.
    CreditTooLarge,
    /// The session or the node has no room left for another producer.
    NoRoom,
    /// The session holds a transaction.
    InTransaction,
}

/// Why the server ended a producer; the last event about it (spec: "Producers").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerEndReason {
    /// The producer broke the protocol, e.g. sent a batch beyond its credit.
    ProtocolViolation,
    /// The ingestor's endpoint contract no longer holds.
    ContractChanged,
    /// The ingestor was stopped or dropped.
    IngestorStopped,
    /// The domain was stopped or dropped.
    DomainStopped,
    /// The node that executes the ingestor died or stopped answering.
    OwnerLost,
    /// A planned ownership handoff moved the ingestor to another node.
    Relocated,
    /// The client closed the producer ([`Frame::CloseProducer`]).
    Closed,
}

/// Why an open of a consumer was refused; nothing is left attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerRefusal {
    /// The domain does not exist.
    DomainNotFound,
    /// The domain is stopped.
    DomainStopped,
    /// The emitter does not exist.
    EmitterNotFound,
    /// The emitter is not a CLIENT CONSUMER emitter.
    NotClientEmitter,
    /// The credit asked for is larger than one consumer may ask for.
    CreditTooLarge,
    /// The session or the node has no room left for another consumer.
    NoRoom,
}

/// Why the server ended a consumer; the last event about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerEndReason {
    /// The consumer broke the protocol, e.g. acknowledged a delivery it was never sent.
    ProtocolViolation,
    /// The emitter was stopped or dropped.
    EmitterStopped,
    /// The domain was stopped or dropped.
    DomainStopped,
    /// The client closed the consumer ([`Frame::CloseConsumer`]).
    Closed,
}

/// Why an admitted batch failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureCause {
    /// The batch made no acknowledgement progress for ACK TIMEOUT.
    AckTimeout,
}

/// Why a batch's outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownCause {
    /// The node executing the ingestor was lost after the batch was cleared for admission.
    OwnerLost,
    /// The producer ended while the batch's acknowledgement was unresolved.
    ProducerEnded,
}

/// The spec's eight defects of an invalid batch, as words without their detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefectKind {
    /// `malformed`.
    Malformed,
    /// `unexpected message`.
    UnexpectedMessage,
    /// `compressed`.
    Compressed,
    /// `schema mismatch`.
    SchemaMismatch,
    /// `not one batch`.
    NotOneBatch,
    /// `too many rows`.
    TooManyRows,
    /// `too large`.
    TooLarge,
    /// `invalid data`.
    InvalidData,
}

impl From<&BatchDefect> for DefectKind {
    fn from(defect: &BatchDefect) -> Self {
        match defect {
            BatchDefect::Malformed(_) => Self::Malformed,
            BatchDefect::UnexpectedMessage(_) => Self::UnexpectedMessage,
            BatchDefect::Compressed(_) => Self::Compressed,
            BatchDefect::SchemaMismatch(_) => Self::SchemaMismatch,
            BatchDefect::NotOneBatch(_) => Self::NotOneBatch,
            BatchDefect::TooManyRows { .. } => Self::TooManyRows,
            BatchDefect::TooLarge { .. } => Self::TooLarge,
            BatchDefect::InvalidData(_) => Self::InvalidData,
        }
    }
}

/// The outcome of one submitted batch (spec: "Outcomes"). Every variant but
/// [`Outcome::Suspended`] and [`Outcome::Busy`] is terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every row was resolved under the acknowledgement rules.
    Completed,
    /// Admitted, but a row was negatively acknowledged: the batch failed processing.
    Rejected,
    /// Admitted, but failed, e.g. with `ack_timeout`.
    Failed(FailureCause),
    /// Refused whole by validation, with one of the eight defects.
    Invalid {
        /// The defect.
        defect: DefectKind,
        /// A human-readable detail, at most [`MAX_DETAIL_BYTES`].
        detail: String,
    },
    /// Sent beyond the producer's credit; it never reached the graph.
    CreditExceeded,
    /// Queued when its producer ended; it never reached the graph.
    ProducerEnded,
    /// Arrived at a former owner during a planned handoff; it never reached the graph.
    Draining,
    /// Admitted, but its acknowledgement is unresolved and will never be known.
    Unknown(UnknownCause),
    /// Temporary: admission is suspended; send it again once admission reopens.
    Suspended,
    /// Temporary: no room now; send it again after the retry backoff.
    Busy,
}

impl Outcome {
    /// The outcome for a batch refused by validation with `defect`, its detail cut to
    /// [`MAX_DETAIL_BYTES`] on a character boundary.
    pub fn invalid(defect: &BatchDefect) -> Self {
        let full = defect.to_string();
        let mut end = full.len().min(MAX_DETAIL_BYTES);
        while !full.is_char_boundary(end) {
            end -= 1;
        }
        Self::Invalid {
            defect: defect.into(),
            detail: full[..end].to_owned(),
        }
    }

    /// Whether sending the same batch again on the same producer may succeed: only
    /// suspended and busy.
    pub fn is_temporary(&self) -> bool {
        matches!(self, Self::Suspended | Self::Busy)
    }

    /// Whether this outcome ends the batch's attempt for good.
    pub fn is_terminal(&self) -> bool {
        !self.is_temporary()
    }
}

/// One frame of the session protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Client → server: open a producer on an ingestor.
    OpenProducer {
        /// Chosen by the client; echoed by the answer.
        request_id: u64,
        /// The explicit domain.
        domain: String,
        /// The client ingestor.
        ingestor: String,
        /// The fields the producer expects, in order.
        expected_fields: Vec<ExpectedField>,
        /// The batches it asks to have outstanding.
        credit_batches: u32,
        /// The bytes it asks to have outstanding.
        credit_bytes: u64,
    },
    /// Server → client: the producer is open.
    ProducerOpened {
        /// The open's request id.
        request_id: u64,
        /// The producer's id on this session.
        producer_id: u64,
        /// The domain's START generation.
        start_generation: u64,
        /// The identity of the ingestor's endpoint contract.
        contract_id: u64,
        /// The batches granted.
        granted_batches: u32,
        /// The bytes granted.
        granted_bytes: u64,
        /// Whether admission is open now.
        admission_open: bool,
        /// The retry policy's BACKOFF, in milliseconds.
        retry_backoff_ms: u64,
        /// The retry policy's MAX, in milliseconds.
        retry_max_ms: u64,
    },
    /// Server → client: the open was refused; nothing is attached.
    OpenRefused {
        /// The open's request id.
        request_id: u64,
        /// Why.
        reason: OpenRefusal,
    },
    /// Client → server: one batch, a canonical Arrow IPC stream.
    SubmitBatch {
        /// The producer.
        producer_id: u64,
        /// The batch's sequence number, chosen by the client.
        batch_seq: u64,
        /// The Arrow IPC stream.
        ipc: Vec<u8>,
    },
    /// Server → client: a batch's outcome.
    BatchOutcome {
        /// The producer.
        producer_id: u64,
        /// The batch.
        batch_seq: u64,
        /// Its outcome.
        outcome: Outcome,
    },
    /// Server → client: the producer ended; the last event about it.
    ProducerEnded {
        /// The producer.
        producer_id: u64,
        /// Why.
        reason: ProducerEndReason,
    },
    /// Server → client: admission was suspended or reopened.
    AdmissionChanged {
        /// The producer.
        producer_id: u64,
        /// Whether admission is open now.
        open: bool,
    },
    /// Client → server: attach a consumer to a CLIENT CONSUMER emitter.
    OpenConsumer {
        /// Chosen by the client; echoed by the answer.
        request_id: u64,
        /// The explicit domain.
        domain: String,
        /// The client emitter.
        emitter: String,
        /// The deliveries it asks to have unacknowledged at once.
        credit_batches: u32,
    },
    /// Server → client: the consumer is attached.
    ConsumerOpened {
        /// The open's request id.
        request_id: u64,
        /// The consumer's id on this session.
        consumer_id: u64,
        /// The emitter's TO SCHEMA, in order: every delivery carries exactly these fields.
        fields: Vec<ExpectedField>,
        /// The deliveries granted.
        granted_batches: u32,
    },
    /// Server → client: the consumer open was refused; nothing is attached.
    ConsumerRefused {
        /// The open's request id.
        request_id: u64,
        /// Why.
        reason: ConsumerRefusal,
    },
    /// Server → client: one batch, a canonical Arrow IPC stream (schema, one batch, end of
    /// stream), as [`crate::batch::encode_batch`] writes it. It holds one batch of the
    /// consumer's credit until the client acknowledges it.
    Delivery {
        /// The consumer.
        consumer_id: u64,
        /// The delivery's sequence number, chosen by the server.
        delivery_seq: u64,
        /// The Arrow IPC stream.
        ipc: Vec<u8>,
    },
    /// Client → server: a delivery's rows are acknowledged (`accepted`) or negatively
    /// acknowledged; either returns its batch of credit.
    DeliveryAck {
        /// The consumer.
        consumer_id: u64,
        /// The delivery.
        delivery_seq: u64,
        /// `true` acknowledges the rows, `false` negatively acknowledges them.
        accepted: bool,
    },
    /// Server → client: the consumer ended; the last event about it.
    ConsumerEnded {
        /// The consumer.
        consumer_id: u64,
        /// Why.
        reason: ConsumerEndReason,
    },
    /// Client → server: detach a producer; the server answers with
    /// [`Frame::ProducerEnded`] ([`ProducerEndReason::Closed`]) after the outcomes of the
    /// batches it holds.
    CloseProducer {
        /// The producer.
        producer_id: u64,
    },
    /// Client → server: detach a consumer; the server answers with
    /// [`Frame::ConsumerEnded`] ([`ConsumerEndReason::Closed`]).
    CloseConsumer {
        /// The consumer.
        consumer_id: u64,
    },
}

const TYPE_OPEN_PRODUCER: u8 = 1;
const TYPE_PRODUCER_OPENED: u8 = 2;
const TYPE_OPEN_REFUSED: u8 = 3;
const TYPE_SUBMIT_BATCH: u8 = 4;
const TYPE_BATCH_OUTCOME: u8 = 5;
const TYPE_PRODUCER_ENDED: u8 = 6;
const TYPE_ADMISSION_CHANGED: u8 = 7;
const TYPE_OPEN_CONSUMER: u8 = 8;
const TYPE_CONSUMER_OPENED: u8 = 9;
const TYPE_CONSUMER_REFUSED: u8 = 10;
const TYPE_DELIVERY: u8 = 11;
const TYPE_DELIVERY_ACK: u8 = 12;
const TYPE_CONSUMER_ENDED: u8 = 13;
const TYPE_CLOSE_PRODUCER: u8 = 14;
const TYPE_CLOSE_CONSUMER: u8 = 15;

/// The bytes of a [`Frame::SubmitBatch`] before its IPC bytes: the length prefix, the type
/// byte, the producer id, the batch sequence number and the IPC length.
pub const SUBMIT_HEADER_BYTES: usize = FRAME_LENGTH_BYTES + 1 + 8 + 8 + 4;

/// The most IPC bytes one [`Frame::SubmitBatch`] (or [`Frame::Delivery`]) can carry.
pub const MAX_FRAME_IPC_BYTES: usize =
    MAX_SESSION_FRAME_BYTES - (SUBMIT_HEADER_BYTES - FRAME_LENGTH_BYTES);

/// The bytes [`Frame::encode`] writes for a [`Frame::SubmitBatch`] before its `ipc_len` IPC
/// bytes, so a client can send the header and bytes it already holds without copying them into
/// one buffer. Refuses IPC bytes that would make the frame too large.
pub fn submit_batch_header(
    producer_id: u64,
    batch_seq: u64,
    ipc_len: usize,
) -> Result<[u8; SUBMIT_HEADER_BYTES], FrameError> {
    let ipc = match u32::try_from(ipc_len) {
        Ok(n) if ipc_len <= MAX_FRAME_IPC_BYTES => n,
        _ => {
            return Err(FrameError::TooLarge {
                len_bytes: (ipc_len as u64)
                    .saturating_add((SUBMIT_HEADER_BYTES - FRAME_LENGTH_BYTES) as u64),
                max_bytes: MAX_SESSION_FRAME_BYTES,
            })
        }
    };
    // `ipc_len <= MAX_FRAME_IPC_BYTES` keeps the sum within `MAX_SESSION_FRAME_BYTES`.
    let declared = ipc + (SUBMIT_HEADER_BYTES - FRAME_LENGTH_BYTES) as u32;
    let mut out = [0u8; SUBMIT_HEADER_BYTES];
    out[..4].copy_from_slice(&declared.to_be_bytes());
    out[4] = TYPE_SUBMIT_BATCH;
    out[5..13].copy_from_slice(&producer_id.to_be_bytes());
    out[13..21].copy_from_slice(&batch_seq.to_be_bytes());
    out[21..25].copy_from_slice(&ipc.to_be_bytes());
    Ok(out)
}

impl Code for OpenRefusal {
    const ALL: &'static [Self] = &[
        Self::DomainNotFound,
        Self::DomainStopped,
        Self::IngestorNotFound,
        Self::NotClientIngestor,
        Self::IngestorNotRunning,
        Self::FieldsDiffer,
        Self::CreditTooLarge,
        Self::NoRoom,
        Self::InTransaction,
    ];
    const FIELD: &'static str = "reason";
}

impl Code for ProducerEndReason {
    const ALL: &'static [Self] = &[
        Self::ProtocolViolation,
        Self::ContractChanged,
        Self::IngestorStopped,
        Self::DomainStopped,
        Self::OwnerLost,
        Self::Relocated,
        Self::Closed,
    ];
    const FIELD: &'static str = "reason";
}

impl Code for ConsumerRefusal {
    const ALL: &'static [Self] = &[
        Self::DomainNotFound,
        Self::DomainStopped,
        Self::EmitterNotFound,
        Self::NotClientEmitter,
        Self::CreditTooLarge,
        Self::NoRoom,
    ];
    const FIELD: &'static str = "reason";
}

impl Code for ConsumerEndReason {
    const ALL: &'static [Self] = &[
        Self::ProtocolViolation,
        Self::EmitterStopped,
        Self::DomainStopped,
        Self::Closed,
    ];
    const FIELD: &'static str = "reason";
}

impl Code for FailureCause {
    const ALL: &'static [Self] = &[Self::AckTimeout];
    const FIELD: &'static str = "failure cause";
}

impl Code for UnknownCause {
    const ALL: &'static [Self] = &[Self::OwnerLost, Self::ProducerEnded];
    const FIELD: &'static str = "unknown cause";
}

impl Code for DefectKind {
    const ALL: &'static [Self] = &[
        Self::Malformed,
        Self::UnexpectedMessage,
        Self::Compressed,
        Self::SchemaMismatch,
        Self::NotOneBatch,
        Self::TooManyRows,
        Self::TooLarge,
        Self::InvalidData,
    ];
    const FIELD: &'static str = "defect";
}

impl OpenRefusal {
    /// Every refusal, in code order.
    pub const ALL: &'static [Self] = <Self as Code>::ALL;
}

impl ProducerEndReason {
    /// Every end reason, in code order.
    pub const ALL: &'static [Self] = <Self as Code>::ALL;
}

impl DefectKind {
    /// Every defect, in code order.
    pub const ALL: &'static [Self] = <Self as Code>::ALL;
}

impl ConsumerRefusal {
    /// Every refusal, in code order.
    pub const ALL: &'static [Self] = <Self as Code>::ALL;
}

impl ConsumerEndReason {
    /// Every end reason, in code order.
    pub const ALL: &'static [Self] = <Self as Code>::ALL;
}

const OUTCOME_COMPLETED: u8 = 0;
const OUTCOME_REJECTED: u8 = 1;
const OUTCOME_FAILED: u8 = 2;
const OUTCOME_INVALID: u8 = 3;
const OUTCOME_CREDIT_EXCEEDED: u8 = 4;
const OUTCOME_PRODUCER_ENDED: u8 = 5;
const OUTCOME_DRAINING: u8 = 6;
const OUTCOME_UNKNOWN: u8 = 7;
const OUTCOME_SUSPENDED: u8 = 8;
const OUTCOME_BUSY: u8 = 9;

impl Frame {
    /// The frame's type byte.
    pub fn frame_type(&self) -> u8 {
        match self {
            Self::OpenProducer { .. } => TYPE_OPEN_PRODUCER,
            Self::ProducerOpened { .. } => TYPE_PRODUCER_OPENED,
            Self::OpenRefused { .. } => TYPE_OPEN_REFUSED,
            Self::SubmitBatch { .. } => TYPE_SUBMIT_BATCH,
            Self::BatchOutcome { .. } => TYPE_BATCH_OUTCOME,
            Self::ProducerEnded { .. } => TYPE_PRODUCER_ENDED,
            Self::AdmissionChanged { .. } => TYPE_ADMISSION_CHANGED,
            Self::OpenConsumer { .. } => TYPE_OPEN_CONSUMER,
            Self::ConsumerOpened { .. } => TYPE_CONSUMER_OPENED,
            Self::ConsumerRefused { .. } => TYPE_CONSUMER_REFUSED,
            Self::Delivery { .. } => TYPE_DELIVERY,
            Self::DeliveryAck { .. } => TYPE_DELIVERY_ACK,
            Self::ConsumerEnded { .. } => TYPE_CONSUMER_ENDED,
            Self::CloseProducer { .. } => TYPE_CLOSE_PRODUCER,
            Self::CloseConsumer { .. } => TYPE_CLOSE_CONSUMER,
        }
    }

    /// Writes the whole frame: length prefix, type byte and body. Refuses a field longer
    /// than its bound or a frame longer than [`MAX_SESSION_FRAME_BYTES`], so whatever it
    /// writes decodes back to `self`.
    pub fn encode(&self) -> Result<Vec<u8>, FrameError> {
        let mut w = Writer {
            out: vec![0; FRAME_LENGTH_BYTES],
        };
        w.u8(self.frame_type());
        match self {
            Self::OpenProducer {
                request_id,
                domain,
                ingestor,
                expected_fields,
                credit_batches,
                credit_bytes,
            } => {
                w.u64(*request_id);
                w.str("domain", domain, MAX_NAME_BYTES)?;
                w.str("ingestor", ingestor, MAX_NAME_BYTES)?;
                w.fields("expected fields", expected_fields)?;
                w.u32(*credit_batches);
                w.u64(*credit_bytes);
            }
            Self::ProducerOpened {
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
                w.u64(*request_id);
                w.u64(*producer_id);
                w.u64(*start_generation);
                w.u64(*contract_id);
                w.u32(*granted_batches);
                w.u64(*granted_bytes);
                w.bool(*admission_open);
                w.u64(*retry_backoff_ms);
                w.u64(*retry_max_ms);
            }
            Self::OpenRefused { request_id, reason } => {
                w.u64(*request_id);
                w.u8(reason.code());
            }
            Self::SubmitBatch {
                producer_id,
                batch_seq,
                ipc,
            } => {
                w.u64(*producer_id);
                w.u64(*batch_seq);
                w.bytes("ipc", ipc)?;
            }
            Self::BatchOutcome {
                producer_id,
                batch_seq,
                outcome,
            } => {
                w.u64(*producer_id);
                w.u64(*batch_seq);
                match outcome {
                    Outcome::Completed => w.u8(OUTCOME_COMPLETED),
                    Outcome::Rejected => w.u8(OUTCOME_REJECTED),
                    Outcome::Failed(cause) => {
                        w.u8(OUTCOME_FAILED);
                        w.u8(cause.code());
                    }
                    Outcome::Invalid { defect, detail } => {
                        w.u8(OUTCOME_INVALID);
                        w.u8(defect.code());
                        w.str("detail", detail, MAX_DETAIL_BYTES)?;
                    }
                    Outcome::CreditExceeded => w.u8(OUTCOME_CREDIT_EXCEEDED),
                    Outcome::ProducerEnded => w.u8(OUTCOME_PRODUCER_ENDED),
                    Outcome::Draining => w.u8(OUTCOME_DRAINING),
                    Outcome::Unknown(cause) => {
                        w.u8(OUTCOME_UNKNOWN);
                        w.u8(cause.code());
                    }
                    Outcome::Suspended => w.u8(OUTCOME_SUSPENDED),
                    Outcome::Busy => w.u8(OUTCOME_BUSY),
                }
            }
            Self::ProducerEnded {
                producer_id,
                reason,
            } => {
                w.u64(*producer_id);
                w.u8(reason.code());
            }
            Self::AdmissionChanged { producer_id, open } => {
                w.u64(*producer_id);
                w.bool(*open);
            }
            Self::OpenConsumer {
                request_id,
                domain,
                emitter,
                credit_batches,
            } => {
                w.u64(*request_id);
                w.str("domain", domain, MAX_NAME_BYTES)?;
                w.str("emitter", emitter, MAX_NAME_BYTES)?;
                w.u32(*credit_batches);
            }
            Self::ConsumerOpened {
                request_id,
                consumer_id,
                fields,
                granted_batches,
            } => {
                w.u64(*request_id);
                w.u64(*consumer_id);
                w.fields("fields", fields)?;
                w.u32(*granted_batches);
            }
            Self::ConsumerRefused { request_id, reason } => {
                w.u64(*request_id);
                w.u8(reason.code());
            }
            Self::Delivery {
                consumer_id,
                delivery_seq,
                ipc,
            } => {
                w.u64(*consumer_id);
                w.u64(*delivery_seq);
                w.bytes("ipc", ipc)?;
            }
            Self::DeliveryAck {
                consumer_id,
                delivery_seq,
                accepted,
            } => {
                w.u64(*consumer_id);
                w.u64(*delivery_seq);
                w.bool(*accepted);
            }
            Self::ConsumerEnded {
                consumer_id,
                reason,
            } => {
                w.u64(*consumer_id);
                w.u8(reason.code());
            }
            Self::CloseProducer { producer_id } => w.u64(*producer_id),
            Self::CloseConsumer { consumer_id } => w.u64(*consumer_id),
        }
        let len = w.out.len() - FRAME_LENGTH_BYTES;
        let declared = match u32::try_from(len) {
            Ok(n) if len <= MAX_SESSION_FRAME_BYTES => n,
            _ => {
                return Err(FrameError::TooLarge {
                    len_bytes: len as u64,
                    max_bytes: MAX_SESSION_FRAME_BYTES,
                })
            }
        };
        w.out[..FRAME_LENGTH_BYTES].copy_from_slice(&declared.to_be_bytes());
        Ok(w.out)
    }

    /// Decodes one frame from its type byte and its body (everything after the length).
    pub fn decode_body(frame_type: u8, body: &[u8]) -> Result<Self, FrameError> {
        let mut r = Reader { rest: body };
        let frame = match frame_type {
            TYPE_OPEN_PRODUCER => {
                let request_id = r.u64("request id")?;
                let domain = r.str("domain", MAX_NAME_BYTES)?;
                let ingestor = r.str("ingestor", MAX_NAME_BYTES)?;
                let expected_fields = r.fields("expected fields")?;
                Self::OpenProducer {
                    request_id,
                    domain,
                    ingestor,
                    expected_fields,
                    credit_batches: r.u32("credit batches")?,
                    credit_bytes: r.u64("credit bytes")?,
                }
            }
            TYPE_PRODUCER_OPENED => Self::ProducerOpened {
                request_id: r.u64("request id")?,
                producer_id: r.u64("producer id")?,
                start_generation: r.u64("start generation")?,
                contract_id: r.u64("contract id")?,
                granted_batches: r.u32("granted batches")?,
                granted_bytes: r.u64("granted bytes")?,
                admission_open: r.bool("admission open")?,
                retry_backoff_ms: r.u64("retry backoff")?,
                retry_max_ms: r.u64("retry max")?,
            },
            TYPE_OPEN_REFUSED => Self::OpenRefused {
                request_id: r.u64("request id")?,
                reason: r.code()?,
            },
            TYPE_SUBMIT_BATCH => Self::SubmitBatch {
                producer_id: r.u64("producer id")?,
                batch_seq: r.u64("batch seq")?,
                ipc: r.bytes("ipc")?,
            },
            TYPE_BATCH_OUTCOME => {
                let producer_id = r.u64("producer id")?;
                let batch_seq = r.u64("batch seq")?;
                let outcome = match r.u8("outcome")? {
                    OUTCOME_COMPLETED => Outcome::Completed,
                    OUTCOME_REJECTED => Outcome::Rejected,
                    OUTCOME_FAILED => Outcome::Failed(r.code()?),
                    OUTCOME_INVALID => Outcome::Invalid {
                        defect: r.code()?,
                        detail: r.str("detail", MAX_DETAIL_BYTES)?,
                    },
                    OUTCOME_CREDIT_EXCEEDED => Outcome::CreditExceeded,
                    OUTCOME_PRODUCER_ENDED => Outcome::ProducerEnded,
                    OUTCOME_DRAINING => Outcome::Draining,
                    OUTCOME_UNKNOWN => Outcome::Unknown(r.code()?),
                    OUTCOME_SUSPENDED => Outcome::Suspended,
                    OUTCOME_BUSY => Outcome::Busy,
                    code => {
                        return Err(FrameError::UnknownCode {
                            field: "outcome",
                            code,
                        })
                    }
                };
                Self::BatchOutcome {
                    producer_id,
                    batch_seq,
                    outcome,
                }
            }
            TYPE_PRODUCER_ENDED => Self::ProducerEnded {
                producer_id: r.u64("producer id")?,
                reason: r.code()?,
            },
            TYPE_ADMISSION_CHANGED => Self::AdmissionChanged {
                producer_id: r.u64("producer id")?,
                open: r.bool("open")?,
            },
            TYPE_OPEN_CONSUMER => Self::OpenConsumer {
                request_id: r.u64("request id")?,
                domain: r.str("domain", MAX_NAME_BYTES)?,
                emitter: r.str("emitter", MAX_NAME_BYTES)?,
                credit_batches: r.u32("credit batches")?,
            },
            TYPE_CONSUMER_OPENED => Self::ConsumerOpened {
                request_id: r.u64("request id")?,
                consumer_id: r.u64("consumer id")?,
                fields: r.fields("fields")?,
                granted_batches: r.u32("granted batches")?,
            },
            TYPE_CONSUMER_REFUSED => Self::ConsumerRefused {
                request_id: r.u64("request id")?,
                reason: r.code()?,
            },
            TYPE_DELIVERY => Self::Delivery {
                consumer_id: r.u64("consumer id")?,
                delivery_seq: r.u64("delivery seq")?,
                ipc: r.bytes("ipc")?,
            },
            TYPE_DELIVERY_ACK => Self::DeliveryAck {
                consumer_id: r.u64("consumer id")?,
                delivery_seq: r.u64("delivery seq")?,
                accepted: r.bool("accepted")?,
            },
            TYPE_CONSUMER_ENDED => Self::ConsumerEnded {
                consumer_id: r.u64("consumer id")?,
                reason: r.code()?,
            },
            TYPE_CLOSE_PRODUCER => Self::CloseProducer {
                producer_id: r.u64("producer id")?,
            },
            TYPE_CLOSE_CONSUMER => Self::CloseConsumer {
                consumer_id: r.u64("consumer id")?,
            },
            other => return Err(FrameError::UnknownType(other)),
        };
        if !r.rest.is_empty() {
            return Err(FrameError::TrailingBytes {
                frame_type,
                extra_bytes: r.rest.len(),
            });
        }
        Ok(frame)
    }

    /// Decodes exactly one whole frame, length prefix included, with nothing after it.
    pub fn decode(bytes: &[u8]) -> Result<Self, FrameError> {
        let mut decoder = FrameDecoder::new();
        decoder.push(bytes);
        match decoder.next_frame()? {
            Some(frame) if decoder.buffered_bytes() == 0 => Ok(frame),
            Some(frame) => Err(FrameError::TrailingBytes {
                frame_type: frame.frame_type(),
                extra_bytes: decoder.buffered_bytes(),
            }),
            None => Err(FrameError::Truncated { field: "frame" }),
        }
    }
}

/// Reads a declared frame length from the first [`FRAME_LENGTH_BYTES`] of `header`, checked
/// against the bound.
fn declared_len(header: [u8; FRAME_LENGTH_BYTES]) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(header);
    match usize::try_from(len) {
        Ok(0) => Err(FrameError::Empty),
        Ok(n) if n <= MAX_SESSION_FRAME_BYTES => Ok(n),
        _ => Err(FrameError::TooLarge {
            len_bytes: u64::from(len),
            max_bytes: MAX_SESSION_FRAME_BYTES,
        }),
    }
}

/// Turns a byte stream, fed in arbitrary chunks, into frames.
///
/// Feed it with [`FrameDecoder::push`], then take frames with [`FrameDecoder::next_frame`]
/// until it answers `Ok(None)`. The length is checked as soon as it is in, before the body is
/// buffered. After an error the decoder is failed and answers that error forever.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
    failed: Option<FrameError>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a chunk of the stream. A failed decoder drops it.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The bytes fed but not yet taken as frames.
    pub fn buffered_bytes(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Whether the decoder sits at a frame boundary (nothing buffered, not failed).
    pub fn is_idle(&self) -> bool {
        self.failed.is_none() && self.buffered_bytes() == 0
    }

    /// The next complete frame, `Ok(None)` when more bytes are needed, or the error that
    /// broke the stream.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        match self.try_next() {
            Ok(frame) => Ok(frame),
            Err(err) => {
                self.buf = Vec::new();
                self.start = 0;
                self.failed = Some(err.clone());
                Err(err)
            }
        }
    }

    fn try_next(&mut self) -> Result<Option<Frame>, FrameError> {
        let pending = &self.buf[self.start..];
        let Some(header) = pending.first_chunk::<FRAME_LENGTH_BYTES>() else {
            return Ok(None);
        };
        let len = declared_len(*header)?;
        let Some(frame) = pending.get(FRAME_LENGTH_BYTES..FRAME_LENGTH_BYTES + len) else {
            return Ok(None);
        };
        let (frame_type, body) = match frame.split_first() {
            Some((t, body)) => (*t, body),
            None => return Err(FrameError::Empty),
        };
        let decoded = Frame::decode_body(frame_type, body)?;
        self.start += FRAME_LENGTH_BYTES + len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(decoded))
    }
}
