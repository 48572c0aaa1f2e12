//! The byte layout shared by the snapshots of held rows (`correlate_snapshot`,
//! `reorder_snapshot`): little-endian integers and length-prefixed Arrow IPC streams, read back
//! through a cursor that refuses to run past the end.
//!
//! Why it is correct: every variable-length part is written behind its exact length, and the
//! [`Cursor`] checks each read against what is left, so a truncated or foreign value is refused
//! as [`SnapshotError::Malformed`] instead of being misread. The IPC streams are read by
//! `nervix_net::batch::decode_stream`, which checks every batch header and column before arrow
//! slices them (arrow's own reader panics on a buffer range outside the body): a value damaged
//! on disk is refused, never a panic (`damaged_copies` in the tests). Columns travel as one
//! IPC record batch whose fields are named by position and nullable, so any column (nulls,
//! nested types) survives as it was; the caller checks the decoded types against its model.
//! (No NSPL type maps to an Arrow dictionary, and `decode_stream` reads none.)

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema};

use super::window::SnapshotError;

/// The most bytes one encoded branch may take. Held rows are bounded by their processors'
/// row caps already; this keeps one value well inside the store's map, and a branch over it
/// is refused (logged, its rows stay unacknowledged).
pub const MAX_ENCODED_BRANCH_BYTES: usize = 512 << 20;

/// Appends `columns` (equal lengths, at least one) as a length-prefixed IPC stream.
pub fn put_columns(out: &mut Vec<u8>, columns: &[ArrayRef]) -> Result<(), SnapshotError> {
    let fields: Vec<Field> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns.to_vec())?;
    let mut ipc = Vec::new();
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(&mut ipc, &batch.schema())?;
    writer.write(&batch)?;
    writer.finish()?;
    drop(writer);
    put_u32(out, ipc.len())?;
    out.extend_from_slice(&ipc);
    check_size(out.len())
}

/// Appends `value` as 4 bytes; a value over `u32::MAX` cannot be encoded.
pub fn put_u32(out: &mut Vec<u8>, value: usize) -> Result<(), SnapshotError> {
    let value = u32::try_from(value).map_err(|_| SnapshotError::TooLarge {
        bytes: value,
        limit: u32::MAX as usize,
    })?;
    out.extend_from_slice(&value.to_le_bytes());
    Ok(())
}

/// Appends an optional instant: a presence byte, then 8 bytes.
pub fn put_opt_i64(out: &mut Vec<u8>, value: Option<i64>) {
    out.push(u8::from(value.is_some()));
    out.extend_from_slice(&value.unwrap_or(0).to_le_bytes());
}

/// Refuses an encoding past [`MAX_ENCODED_BRANCH_BYTES`].
pub fn check_size(bytes: usize) -> Result<(), SnapshotError> {
    if bytes > MAX_ENCODED_BRANCH_BYTES {
        return Err(SnapshotError::TooLarge {
            bytes,
            limit: MAX_ENCODED_BRANCH_BYTES,
        });
    }
    Ok(())
}

/// A snapshot's header: its format `version`, then the processor `model` it was taken under
/// (read back by [`Cursor::header`]).
pub fn header(version: u8, model: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    out.push(version);
    out.extend_from_slice(&model.to_le_bytes());
    out
}

/// Reads an encoded value front to back.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, at: 0 }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        let end = self.at.checked_add(n).ok_or(SnapshotError::Malformed)?;
        let slice = self
            .bytes
            .get(self.at..end)
            .ok_or(SnapshotError::Malformed)?;
        self.at = end;
        Ok(slice)
    }

    /// Reads a [`header`]: a snapshot of another format is malformed, one taken under another
    /// processor model cannot be restored under this one.
    pub fn header(&mut self, version: u8, model: u64) -> Result<(), SnapshotError> {
        if self.u8()? != version {
            return Err(SnapshotError::Malformed);
        }
        if self.u64()? != model {
            return Err(SnapshotError::OtherStateModel);
        }
        Ok(())
    }

    pub fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<usize, SnapshotError> {
        let word: [u8; 4] = self
            .take(4)?
            .try_into()
            .map_err(|_| SnapshotError::Malformed)?;
        Ok(u32::from_le_bytes(word) as usize)
    }

    pub fn u64(&mut self) -> Result<u64, SnapshotError> {
        let word: [u8; 8] = self
            .take(8)?
            .try_into()
            .map_err(|_| SnapshotError::Malformed)?;
        Ok(u64::from_le_bytes(word))
    }

    pub fn opt_i64(&mut self) -> Result<Option<i64>, SnapshotError> {
        let present = self.u8()? != 0;
        let value = self.u64()? as i64;
        Ok(present.then_some(value))
    }

    /// The columns of one [`put_columns`] stream; `width` columns of `rows` rows each.
    pub fn columns(&mut self, width: usize, rows: usize) -> Result<Vec<ArrayRef>, SnapshotError> {
        let len = self.u32()?;
        let ipc = self.take(len)?;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(width);
        for batch in nervix_net::batch::decode_stream(ipc)? {
            if batch.num_rows() != rows || !columns.is_empty() {
                return Err(SnapshotError::Malformed);
            }
            columns.extend(batch.columns().iter().cloned());
        }
        if columns.len() != width {
            return Err(SnapshotError::Malformed);
        }
        Ok(columns)
    }

    /// Whether every byte was read.
    pub fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// Every damaged copy of `bytes` a torn write or a bad disk could leave, each marked torn
/// (a strict prefix) or not (one byte replaced by its complement): the snapshot decoders'
/// tests restore them all, since a shard restores whatever its store holds and must refuse
/// what it cannot read rather than panic.
#[cfg(test)]
pub fn damaged_copies(bytes: &[u8]) -> impl Iterator<Item = (bool, Vec<u8>)> + '_ {
    let torn = (0..bytes.len()).map(|length| (true, bytes[..length].to_vec()));
    let flipped = (0..bytes.len()).map(|at| {
        let mut copy = bytes.to_vec();
        copy[at] = !copy[at];
        (false, copy)
    });
    torn.chain(flipped)
}
