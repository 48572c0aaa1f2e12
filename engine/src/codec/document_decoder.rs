//! [`DocumentDecoder`]: one shard's decoder of a document wire format (WIRE JSON, WIRE CBOR)
//! for one ingestor. The two formats share its state (the plan, the buffered rows, a scratch
//! buffer) and the public face around it, as they share their plan; each format's `decode`
//! module walks its own payloads in `decode_payload`.

use std::sync::Arc;

use arrow_array::RecordBatch;

use super::document_plan::{DocumentFormat, DocumentPlan};
use super::document_rows::DocumentRows;

/// One decoder per shard per ingestor of format `F`: owns the reusable builders.
#[derive(Debug)]
pub struct DocumentDecoder<F> {
    pub(crate) plan: Arc<DocumentPlan<F>>,
    pub(crate) buffered: DocumentRows,
    /// Reused for a key or text that must be decoded before it is looked at.
    pub(crate) scratch: Vec<u8>,
}

impl<F: DocumentFormat> DocumentDecoder<F> {
    pub fn new(plan: Arc<DocumentPlan<F>>) -> DocumentDecoder<F> {
        DocumentDecoder {
            buffered: DocumentRows::new(&plan),
            plan,
            scratch: Vec::new(),
        }
    }

    /// Rows decoded since the last [`DocumentDecoder::finish`].
    pub fn buffered_rows(&self) -> usize {
        self.buffered.rows()
    }

    /// The buffered rows as one `RecordBatch` in `plan.schema()`; the builders are reused.
    pub fn finish(&mut self) -> RecordBatch {
        self.buffered.finish(self.plan.schema())
    }
}
