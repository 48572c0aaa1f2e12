//! [`DocumentRows`]: the rows a document decoder (WIRE JSON, WIRE CBOR) has buffered, in one
//! reusable builder per schema column, and the per-record bookkeeping both formats share —
//! which wire fields a record held, the required ones it lacks, the nulls of the rest.
//!
//! Why it is correct: every record ends through [`DocumentRows::end_record`], which pushes
//! exactly one value (or null) into every column before counting the row, so the columns never
//! disagree on length; a refused payload truncates every column back to the rows before it
//! ([`DocumentRows::truncate`]). A record's fields are told apart by a stamp per record rather
//! than by clearing a flag per field, and the stamps are reset when the counter wraps.

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::SchemaRef;

use super::document_plan::DocumentPlan;
use super::json::columns::Column;

/// One document decoder's buffered rows; see the module docs.
#[derive(Debug)]
pub(crate) struct DocumentRows {
    columns: Vec<Column>,
    rows: usize,
    /// Per wire field: the stamp of the last record that held its key.
    seen: Vec<u32>,
    stamp: u32,
}

impl DocumentRows {
    pub fn new<F>(plan: &DocumentPlan<F>) -> DocumentRows {
        DocumentRows {
            columns: plan.columns.iter().map(|(ty, _)| Column::new(ty)).collect(),
            rows: 0,
            seen: vec![0; plan.wire.len()],
            stamp: 0,
        }
    }

    /// Rows buffered since the last [`DocumentRows::finish`].
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Schema column `c`'s builder.
    pub fn column(&mut self, c: usize) -> &mut Column {
        &mut self.columns[c]
    }

    /// Drops every row after the first `rows` (a refused payload's).
    pub fn truncate(&mut self, rows: usize) {
        for column in &mut self.columns {
            column.truncate(rows);
        }
        self.rows = rows;
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

    /// Ends the record: the columns no held field fed get a null and the row counts. `Err`
    /// names the first required wire field the record lacks (nothing is pushed then; the
    /// caller refuses the payload, which truncates the fields already pushed).
    pub fn end_record<F>(&mut self, plan: &DocumentPlan<F>) -> Result<(), usize> {
        if let Some(&missing) = plan.required.iter().find(|&&w| self.seen[w] != self.stamp) {
            return Err(missing);
        }
        for (column, (_, wire)) in self.columns.iter_mut().zip(&plan.columns) {
            if wire.is_none_or(|w| self.seen[w] != self.stamp) {
                column.push_null();
            }
        }
        self.rows += 1;
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
        &self.columns
    }

    /// The buffered rows as one `RecordBatch` in `schema` (the plan's); the builders are
    /// reused.
    pub fn finish(&mut self, schema: SchemaRef) -> RecordBatch {
        let arrays = self
            .columns
            .iter_mut()
            .zip(schema.fields().iter())
            .map(|(column, field)| column.finish(field.data_type()))
            .collect();
        let options = RecordBatchOptions::new().with_row_count(Some(self.rows));
        self.rows = 0;
        RecordBatch::try_new_with_options(schema, arrays, &options)
            .unwrap_or_else(|e| unreachable!("columns follow the plan's schema: {e}"))
    }
}
