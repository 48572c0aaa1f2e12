//! A consumer: receives deliveries from a CLIENT CONSUMER emitter, checks each against the
//! emitter's fields, and acknowledges or negatively acknowledges them.

use std::collections::HashSet;
use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::StreamReader;
use arrow_schema::{DataType, TimeUnit};
use tokio::sync::mpsc;

use super::error::ClientError;
use super::session::{ConsumerEvent, ConsumerOpenedInfo, Outgoing, Shared};
use crate::batch::{validate_batch, BatchLimits};
use crate::session::frame::{ConsumerEndReason, ExpectedField, Frame, MAX_FRAME_IPC_BYTES};

/// What a consumer asks for when it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerOptions {
    /// The explicit domain.
    pub domain: String,
    /// The CLIENT CONSUMER emitter.
    pub emitter: String,
    /// How many deliveries it asks to have unacknowledged at once.
    pub credit_batches: u32,
}

/// One delivery, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The delivery's sequence number: acknowledge it with [`Consumer::ack`] or
    /// [`Consumer::nack`].
    pub seq: u64,
    /// The rows, with exactly the consumer's fields.
    pub batch: RecordBatch,
}

/// One consumer on a [`super::Session`].
///
/// Every delivery holds one batch of credit until it is acknowledged or negatively
/// acknowledged; the server sends no more than the granted credit unacknowledged, and a server
/// that does ends the session with [`ClientError::Protocol`].
pub struct Consumer {
    shared: Arc<Shared>,
    consumer_id: u64,
    fields: Vec<ExpectedField>,
    granted_batches: u32,
    events: mpsc::Receiver<ConsumerEvent>,
    unacked: HashSet<u64>,
    ended: Option<ConsumerEndReason>,
    failed: Option<ClientError>,
    closing: bool,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("consumer_id", &self.consumer_id)
            .field("fields", &self.fields)
            .field("granted_batches", &self.granted_batches)
            .field("unacked", &self.unacked.len())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Consumer {
    pub(crate) fn new(
        shared: Arc<Shared>,
        info: ConsumerOpenedInfo,
        events: mpsc::Receiver<ConsumerEvent>,
    ) -> Self {
        Self {
            shared,
            consumer_id: info.consumer_id,
            fields: info.fields,
            granted_batches: info.granted_batches,
            events,
            unacked: HashSet::new(),
            ended: None,
            failed: None,
            closing: false,
        }
    }

    /// The consumer's id on its session.
    pub fn id(&self) -> u64 {
        self.consumer_id
    }

    /// The emitter's TO SCHEMA fields, in order: every delivery carries exactly these.
    pub fn fields(&self) -> &[ExpectedField] {
        &self.fields
    }

    /// The deliveries the server may have unacknowledged at once.
    pub fn granted_batches(&self) -> u32 {
        self.granted_batches
    }

    /// The deliveries received and not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.unacked.len()
    }

    /// Why the server ended the consumer, once it did.
    pub fn ended_reason(&self) -> Option<ConsumerEndReason> {
        self.ended
    }

    /// The next delivery, decoded and checked against [`Consumer::fields`]; `None` once the
    /// server ended the consumer (the reason is then [`Consumer::ended_reason`]). A delivery
    /// that does not decode or does not match is [`ClientError::InvalidDelivery`] and still
    /// holds its credit: nack it.
    pub async fn next(&mut self) -> Result<Option<Delivery>, ClientError> {
        if self.ended.is_some() {
            return Ok(None);
        }
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        match self.events.recv().await {
            Some(ConsumerEvent::Delivery(seq, ipc)) => {
                if self.unacked.len() >= self.granted_batches as usize {
                    return Err(self.violation(format!(
                        "consumer {}: delivery {seq} beyond the credit of {} batches",
                        self.consumer_id, self.granted_batches
                    )));
                }
                if !self.unacked.insert(seq) {
                    return Err(self.violation(format!(
                        "consumer {}: delivery {seq} sent again while unacknowledged",
                        self.consumer_id
                    )));
                }
                match decode_delivery(&ipc, &self.fields) {
                    Ok(batch) => Ok(Some(Delivery { seq, batch })),
                    Err(detail) => Err(ClientError::InvalidDelivery { seq, detail }),
                }
            }
            Some(ConsumerEvent::Ended(reason)) => {
                self.ended = Some(reason);
                Ok(None)
            }
            None => {
                let err = self.shared.error();
                self.failed = Some(err.clone());
                Err(err)
            }
        }
    }

    /// Acknowledges delivery `delivery_seq`'s rows; returns its batch of credit.
    pub async fn ack(&mut self, delivery_seq: u64) -> Result<(), ClientError> {
        self.answer(delivery_seq, true).await
    }

    /// Negatively acknowledges delivery `delivery_seq`'s rows; returns its batch of credit.
    pub async fn nack(&mut self, delivery_seq: u64) -> Result<(), ClientError> {
        self.answer(delivery_seq, false).await
    }

    /// Detaches the consumer: asks the server to close it and waits for its end. Deliveries
    /// that arrive meanwhile are dropped unacknowledged.
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.ended.is_some() {
            return Ok(());
        }
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        self.closing = true;
        let frame = Frame::CloseConsumer {
            consumer_id: self.consumer_id,
        }
        .encode()
        .map_err(ClientError::InvalidRequest)?;
        self.shared.send(Outgoing::Frame(frame)).await?;
        loop {
            match self.events.recv().await {
                Some(ConsumerEvent::Delivery(..)) => {}
                Some(ConsumerEvent::Ended(reason)) => {
                    self.ended = Some(reason);
                    return Ok(());
                }
                None => return Err(self.shared.error()),
            }
        }
    }

    async fn answer(&mut self, delivery_seq: u64, accepted: bool) -> Result<(), ClientError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        if let Some(reason) = self.ended {
            return Err(ClientError::ConsumerEnded(reason));
        }
        if !self.unacked.remove(&delivery_seq) {
            return Err(ClientError::NotOutstanding { seq: delivery_seq });
        }
        let frame = Frame::DeliveryAck {
            consumer_id: self.consumer_id,
            delivery_seq,
            accepted,
        }
        .encode()
        .map_err(ClientError::InvalidRequest)?;
        self.shared.send(Outgoing::Frame(frame)).await
    }

    fn violation(&mut self, text: String) -> ClientError {
        let err = ClientError::Protocol(text);
        self.shared.fail(err.clone());
        self.failed = Some(err.clone());
        err
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if self.ended.is_none() && !self.closing && self.shared.failed().is_none() {
            self.shared.forget_consumer(self.consumer_id);
            self.shared.try_send_frame(&Frame::CloseConsumer {
                consumer_id: self.consumer_id,
            });
        }
    }
}

/// Decodes one delivery: exactly one canonical Arrow IPC batch (validated as strictly as a
/// submitted batch, against its own schema), whose columns are `fields` in order.
fn decode_delivery(ipc: &[u8], fields: &[ExpectedField]) -> Result<RecordBatch, String> {
    // Only the schema message is read here; `validate_batch` then walks and checks the whole
    // stream. arrow's reader is not trusted not to panic on hostile bytes.
    let schema = catch_unwind(AssertUnwindSafe(|| {
        StreamReader::try_new(Cursor::new(ipc), None).map(|reader| reader.schema())
    }))
    .map_err(|_| "malformed: the schema message could not be read".to_owned())?
    .map_err(|e| format!("malformed: {e}"))?;
    let batch = validate_batch(ipc, &schema, BatchLimits::new(MAX_FRAME_IPC_BYTES))
        .map_err(|defect| defect.to_string())?;
    check_fields(&batch, fields)?;
    Ok(batch)
}

/// Checks the batch's columns against the consumer's fields: the same count, each with the
/// field's name and a type that represents the field's NSPL type, and no nulls in a field that
/// is not OPTIONAL.
fn check_fields(batch: &RecordBatch, fields: &[ExpectedField]) -> Result<(), String> {
    let schema = batch.schema();
    if schema.fields().len() != fields.len() {
        return Err(format!(
            "schema mismatch: {} columns, the consumer's fields are {}",
            schema.fields().len(),
            fields.len()
        ));
    }
    for (i, (got, want)) in schema.fields().iter().zip(fields).enumerate() {
        if got.name() != &want.name {
            return Err(format!(
                "schema mismatch: column {i} is {:?}, the field is {:?}",
                got.name(),
                want.name
            ));
        }
        if !type_matches(&want.type_text, got.data_type()) {
            return Err(format!(
                "schema mismatch: column {:?} is {}, the field is {}",
                want.name,
                got.data_type(),
                want.type_text
            ));
        }
        let nulls = batch.column(i).null_count();
        if !want.optional && nulls > 0 {
            return Err(format!(
                "invalid data: column {:?} is not OPTIONAL but has {nulls} nulls",
                want.name
            ));
        }
    }
    Ok(())
}

/// Whether `data_type` is Nervix's Arrow representation of the NSPL type `text` (DESIGN §4):
/// scalars exactly, `VEC<T>` and `LIST<T>` as a list of `T`, `ARRAY<T, d…>` as fixed-size lists
/// nested in dimension order (or flattened to one of the dimensions' product). Type words are
/// matched without regard to case or spaces; an unknown type text matches nothing.
pub(crate) fn type_matches(text: &str, data_type: &DataType) -> bool {
    let text: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let text = text.to_ascii_uppercase();
    matches_compact(&text, data_type)
}

fn matches_compact(text: &str, data_type: &DataType) -> bool {
    let inner = |prefix: &str| {
        text.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix('>'))
    };
    if let Some(element) = inner("VEC<").or_else(|| inner("LIST<")) {
        return match data_type {
            DataType::List(item) => matches_compact(element, item.data_type()),
            _ => false,
        };
    }
    if let Some(args) = inner("ARRAY<") {
        let mut parts = args.split(',');
        let element = parts.next().unwrap_or_default();
        let mut dims = Vec::new();
        for part in parts {
            match part.parse::<i32>() {
                Ok(d) if d > 0 => dims.push(d),
                _ => return false,
            }
        }
        if dims.is_empty() {
            return false;
        }
        return array_matches(element, &dims, data_type)
            || dims
                .iter()
                .try_fold(1i32, |acc, d| acc.checked_mul(*d))
                .is_some_and(|product| array_matches(element, &[product], data_type));
    }
    match text {
        "U8" => *data_type == DataType::UInt8,
        "I8" => *data_type == DataType::Int8,
        "U16" => *data_type == DataType::UInt16,
        "I16" => *data_type == DataType::Int16,
        "U32" => *data_type == DataType::UInt32,
        "I32" => *data_type == DataType::Int32,
        "U64" => *data_type == DataType::UInt64,
        "I64" => *data_type == DataType::Int64,
        "F32" => *data_type == DataType::Float32,
        "F64" => *data_type == DataType::Float64,
        "BOOL" => *data_type == DataType::Boolean,
        "STRING" => *data_type == DataType::Utf8,
        "BYTES" => *data_type == DataType::Binary,
        "DATETIME" => matches!(
            data_type,
            DataType::Timestamp(TimeUnit::Nanosecond, Some(tz)) if tz.as_ref() == "UTC" || tz.as_ref() == "+00:00"
        ),
        _ => false,
    }
}

fn array_matches(element: &str, dims: &[i32], data_type: &DataType) -> bool {
    match (dims.split_first(), data_type) {
        (None, _) => matches_compact(element, data_type),
        (Some((d, rest)), DataType::FixedSizeList(item, n)) => {
            n == d && array_matches(element, rest, item.data_type())
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, TimeUnit};

    use super::type_matches;

    #[test]
    fn nspl_type_texts_match_their_arrow_representation() {
        let item = |t: DataType| Arc::new(Field::new("item", t, false));
        let cases: Vec<(&str, DataType, bool)> = vec![
            ("I64", DataType::Int64, true),
            ("i64", DataType::Int64, true),
            ("I64", DataType::Int32, false),
            ("STRING", DataType::Utf8, true),
            ("STRING", DataType::LargeUtf8, false),
            ("BYTES", DataType::Binary, true),
            (
                "DATETIME",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
                true,
            ),
            (
                "DATETIME",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            (
                "DATETIME",
                DataType::Timestamp(TimeUnit::Nanosecond, None),
                false,
            ),
            ("VEC<F64>", DataType::List(item(DataType::Float64)), true),
            ("LIST<STRING>", DataType::List(item(DataType::Utf8)), true),
            ("VEC<F64>", DataType::List(item(DataType::Float32)), false),
            (
                "ARRAY<I32, 2>",
                DataType::FixedSizeList(item(DataType::Int32), 2),
                true,
            ),
            (
                "ARRAY<F32, 2, 3>",
                DataType::FixedSizeList(
                    item(DataType::FixedSizeList(item(DataType::Float32), 3)),
                    2,
                ),
                true,
            ),
            (
                "ARRAY<F32, 2, 3>",
                DataType::FixedSizeList(item(DataType::Float32), 6),
                true,
            ),
            (
                "ARRAY<F32, 2, 3>",
                DataType::FixedSizeList(item(DataType::Float32), 5),
                false,
            ),
            (
                "ARRAY<F32>",
                DataType::FixedSizeList(item(DataType::Float32), 1),
                false,
            ),
            (
                "ARRAY<F32, x>",
                DataType::FixedSizeList(item(DataType::Float32), 1),
                false,
            ),
            ("WIDGET", DataType::Int64, false),
            ("", DataType::Null, false),
        ];
        for (text, data_type, want) in cases {
            assert_eq!(
                type_matches(text, &data_type),
                want,
                "{text} vs {data_type}"
            );
        }
    }
}
