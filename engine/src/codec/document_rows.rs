//! [`DocumentRows`]: the rows a document decoder (WIRE JSON, WIRE CBOR) has buffered, in one
//! reusable builder per schema column, and the per-record bookkeeping both formats share —
//! which wire fields a record held, the required ones it lacks, the nulls of the rest.
//!
//! Why it is correct: every record ends through [`DocumentRows::end_record`], which ends the
//! row in every column (a null where no held field fed it), so the columns never disagree on
//! length; a refused payload truncates every column back to the rows before it
//! (`decoding::decode_atomically`). A record's fields are told apart by a stamp per record rather
//! than by clearing a flag per field, and the stamps are reset when the counter wraps.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use super::document_plan::{DocumentPlan, WireSlot};
use super::json::columns::{Column, ColumnSet};

/// One document decoder's buffered rows; see the module docs.
#[derive(Debug)]
pub(crate) struct DocumentRows {
    columns: ColumnSet,
    /// Per wire field: the stamp of the last record that held its key.
    seen: Vec<u32>,
    stamp: u32,
}

impl DocumentRows {
    pub fn new<F>(plan: &DocumentPlan<F>) -> DocumentRows {
        DocumentRows {
            columns: ColumnSet::new(plan.columns.iter().map(|(ty, _)| ty)),
            seen: vec![0; plan.wire.len()],
            stamp: 0,
        }
    }

    /// Rows buffered since the last [`DocumentRows::finish`].
    pub fn rows(&self) -> usize {
        self.columns.rows()
    }

    /// Schema column `c`'s builder.
    pub fn column(&mut self, c: usize) -> &mut Column {
        self.columns.column(c)
    }

    /// The column builders, for `decoding::decode_atomically` to cut a refused payload's rows.
    pub fn column_set(&mut self) -> &mut ColumnSet {
        &mut self.columns
    }

    /// Starts a record: no wire field is held yet.
    pub fn begin_record(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.fill(0);
            self.stamp = 1;
        }
    }

    /// Notes that the record holds wire field `w`; `false` when it already did (a key twice).
    pub fn hold(&mut self, w: usize) -> bool {
        let first = self.seen[w] != self.stamp;
        self.seen[w] = self.stamp;
        first
    }

    /// Takes a `null` of wire field `slot`: a null row in the column it feeds, if any. `false`,
    /// taking nothing, when the field is required.
    pub fn push_null(&mut self, slot: &WireSlot) -> bool {
        if !slot.optional {
            return false;
        }
        if let Some(c) = slot.column {
            self.columns.column(c).push_null();
        }
        true
    }

    /// Ends the record: the columns no held field fed get a null and the row counts. `Err`
    /// names the first required wire field the record lacks (nothing is pushed then; the
    /// caller refuses the payload, which truncates the fields already pushed).
    pub fn end_record<F>(&mut self, plan: &DocumentPlan<F>) -> Result<(), usize> {
        if let Some(&missing) = plan.required.iter().find(|&&w| self.seen[w] != self.stamp) {
            return Err(missing);
        }
        let (seen, stamp) = (&self.seen, self.stamp);
        self.columns
            .end_row(|c| plan.columns[c].1.is_some_and(|w| seen[w] == stamp));
        Ok(())
    }

    /// Sets the stamp as if the previous record, stamped `stamp`, held every wire field.
    #[cfg(test)]
    pub fn wind_stamp_to(&mut self, stamp: u32) {
        self.stamp = stamp;
        self.seen.fill(stamp);
    }

    #[cfg(test)]
    pub fn stamp(&self) -> u32 {
        self.stamp
    }

    #[cfg(test)]
    pub fn columns(&self) -> &[Column] {
        self.columns.columns()
    }

    /// The buffered rows as one `RecordBatch` in `schema` (the plan's); the builders are
    /// reused.
    pub fn finish(&mut self, schema: SchemaRef) -> RecordBatch {
        self.columns.finish(schema)
    }
}
