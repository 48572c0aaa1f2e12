//! [`EncodedRows`]: a frame's rows encoded back to back into one buffer, each row's byte range
//! recorded as it is written, for the emitters that send one message per row (HTTP REQUEST,
//! KAFKA TOPIC).
//!
//! Every row encoder writes through [`EncodedRows::push_row`], which notes where the row
//! starts, lets the encoder append it, and records either its range or — when the encoder
//! refuses the row — the reason, after cutting the partial bytes off. So ranges never depend
//! on a separator (binary formats have none), a refused row leaves nothing behind for the next
//! one, and a frame costs one buffer plus one entry per row, whatever the format.

use std::ops::Range;

/// One frame's encoded rows.
#[derive(Debug, Default)]
pub struct EncodedRows {
    bytes: Vec<u8>,
    rows: Vec<Result<Range<usize>, String>>,
}

impl EncodedRows {
    /// An empty frame with room for `rows` row entries.
    pub fn with_rows(rows: usize) -> EncodedRows {
        EncodedRows {
            bytes: Vec::new(),
            rows: Vec::with_capacity(rows),
        }
    }

    /// A frame of `rows` rows all refused for `reason` (the encoding itself could not run).
    pub fn refused(rows: usize, reason: &str) -> EncodedRows {
        EncodedRows {
            bytes: Vec::new(),
            rows: vec![Err(reason.to_string()); rows],
        }
    }

    /// Appends one row: `write` appends its bytes, or refuses it (its partial bytes are cut).
    pub fn push_row<E: std::fmt::Display>(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) {
        let start = self.bytes.len();
        match write(&mut self.bytes) {
            Ok(()) => self.rows.push(Ok(start..self.bytes.len())),
            Err(reason) => {
                self.bytes.truncate(start);
                self.rows.push(Err(reason.to_string()));
            }
        }
    }

    /// Appends rows already encoded back to back: row `r` of them is
    /// `bytes[bounds[r]..bounds[r + 1]]` (`bounds` starts at 0 and ends at `bytes.len()`).
    pub fn append_contiguous(&mut self, bytes: Vec<u8>, bounds: &[usize]) {
        let base = self.bytes.len();
        if base == 0 {
            // The usual case, a fresh frame: the buffer is taken, not copied.
            self.bytes = bytes;
        } else {
            self.bytes.extend_from_slice(&bytes);
        }
        self.rows.extend(
            bounds
                .windows(2)
                .map(|pair| Ok(base + pair[0]..base + pair[1])),
        );
    }

    /// Rows pushed so far.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Row `row`'s bytes, or why it has none (refused, or never written).
    pub fn row(&self, row: usize) -> Result<&[u8], &str> {
        match self.rows.get(row) {
            Some(Ok(range)) => Ok(&self.bytes[range.clone()]),
            Some(Err(reason)) => Err(reason),
            None => Err("the encoder wrote no body for this row"),
        }
    }

    /// The buffer and each row's range or refusal, for a sink that hands the buffer on whole.
    pub fn into_parts(self) -> (Vec<u8>, Vec<Result<Range<usize>, String>>) {
        (self.bytes, self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_row_leaves_no_bytes_and_later_rows_keep_their_ranges() {
        let mut rows = EncodedRows::with_rows(3);
        rows.push_row(|out| {
            out.extend_from_slice(b"one");
            Ok::<(), String>(())
        });
        rows.push_row(|out| {
            out.extend_from_slice(b"partial");
            Err("no symbol")
        });
        rows.push_row(|out| {
            out.extend_from_slice(b"three");
            Ok::<(), String>(())
        });
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.row(0), Ok(&b"one"[..]));
        assert_eq!(rows.row(1), Err("no symbol"));
        assert_eq!(rows.row(2), Ok(&b"three"[..]));
        assert!(rows.row(3).is_err());
        let (bytes, ranges) = rows.into_parts();
        assert_eq!(bytes, b"onethree");
        assert_eq!(ranges[2], Ok(3..8));
    }
}
