//! Snapshots of one REORDERER branch's ordering buffer (DESIGN §6 "Runtime state"), so held
//! rows survive a crash or a stop and still leave in BY order afterwards.
//!
//! A buffer is encoded as: a version byte, the reorderer's model tag (input schema and BY
//! expressions, `NodeWork::Reorder::model`), the chunk count, then per chunk its row count,
//! whether it carries event times, and one Arrow IPC batch of its input columns, its BY
//! values, its per-row arrival instants and, when present, its event times. Chunks are written
//! in their buffer order, so the release order — BY, then arrival, then position — is the same
//! after a restore. An empty buffer encodes as nothing, which deletes its entry.
//!
//! Acknowledgements: encoding takes every held run; the caller acknowledges them once the
//! snapshot is durable, and the rows then wait (and leave) without units. A buffer that fails
//! to encode keeps its runs. A stored buffer whose model tag differs is not restored
//! ([`SnapshotError::OtherStateModel`]): its BY values belong to other expressions.

use arrow_array::{Array, ArrayRef};
use arrow_schema::SchemaRef;

use super::reorder::{Chunk, OrderBuffer};
use super::state_codec::{check_size, header, put_columns, put_u32, Cursor};
use super::window::SnapshotError;
use crate::runtime::frame::AckRun;

/// The format version (first byte of an encoded buffer).
const SNAPSHOT_VERSION: u8 = 1;

/// Encodes `buffer` under `model` and takes its held runs (see the module doc). Empty bytes:
/// the buffer holds nothing.
pub fn snapshot_buffer(
    buffer: &mut OrderBuffer,
    model: u64,
) -> Result<(Vec<u8>, Vec<AckRun>), SnapshotError> {
    match encode(buffer, model) {
        Ok(bytes) => Ok((bytes, buffer.take_acks())),
        Err(error) => {
            buffer.mark_clean();
            Err(error)
        }
    }
}

fn encode(buffer: &OrderBuffer, model: u64) -> Result<Vec<u8>, SnapshotError> {
    if buffer.held_rows() == 0 {
        return Ok(Vec::new());
    }
    let mut out = header(SNAPSHOT_VERSION, model);
    let chunks = buffer.chunks();
    put_u32(&mut out, chunks.len())?;
    for chunk in &chunks {
        put_u32(&mut out, chunk.arrival.len())?;
        out.push(u8::from(chunk.times.is_some()));
        let columns: Vec<ArrayRef> = chunk
            .columns
            .iter()
            .chain(&chunk.keys)
            .chain(std::iter::once(&chunk.arrival))
            .chain(chunk.times.iter())
            .cloned()
            .collect();
        put_columns(&mut out, &columns)?;
    }
    check_size(out.len())?;
    Ok(out)
}

/// Reads a buffer stored under `model` for input rows of `schema` with `key_width` BY values.
pub fn restore_buffer(
    bytes: &[u8],
    model: u64,
    schema: &SchemaRef,
    key_width: usize,
) -> Result<OrderBuffer, SnapshotError> {
    let mut cursor = Cursor::new(bytes);
    cursor.header(SNAPSHOT_VERSION, model)?;
    let width = schema.fields().len();
    let count = cursor.u32()?;
    let mut buffer = OrderBuffer::default();
    for _ in 0..count {
        let rows = cursor.u32()?;
        let timed = cursor.u8()? != 0;
        let mut columns = cursor.columns(width + key_width + 1 + usize::from(timed), rows)?;
        let types_match = columns
            .iter()
            .zip(schema.fields())
            .all(|(column, field)| column.data_type() == field.data_type());
        if !types_match {
            return Err(SnapshotError::OtherStateModel);
        }
        let times = if timed { columns.pop() } else { None };
        let arrival = columns.pop().ok_or(SnapshotError::Malformed)?;
        if arrival.data_type() != &arrow_schema::DataType::Int64 || arrival.null_count() > 0 {
            return Err(SnapshotError::Malformed);
        }
        let keys = columns.split_off(width);
        buffer.push_chunk(Chunk {
            columns,
            keys,
            arrival,
            acks: Vec::new(),
            times,
        });
    }
    if !cursor.is_done() {
        return Err(SnapshotError::Malformed);
    }
    buffer.mark_clean();
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use nervix_shards::ack::AckHandle;

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("tenant", DataType::Utf8, true),
            Field::new("seq", DataType::Int64, true),
        ]))
    }

    fn run(index: u32, rows: u32) -> Vec<AckRun> {
        vec![AckRun {
            root: AckHandle {
                index,
                generation: 0,
            },
            rows,
        }]
    }

    /// Holds rows (tenant or null, seq) ordered BY seq, arriving at `arrival_ns`.
    fn hold(
        buffer: &mut OrderBuffer,
        rows: &[(Option<&str>, i64)],
        times: Option<&[i64]>,
        arrival_ns: i64,
        acks: Vec<AckRun>,
    ) {
        let tenants: ArrayRef = Arc::new(StringArray::from_iter(rows.iter().map(|r| r.0)));
        let seqs: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1)));
        let times = times.map(|t| Arc::new(Int64Array::from(t.to_vec())) as ArrayRef);
        buffer.hold(
            (vec![tenants, seqs.clone()], times),
            vec![seqs],
            rows.len(),
            arrival_ns,
            acks,
        );
    }

    /// A buffer holding (acme, 3) at 30 and (null, 1) at 10, arrived at 100, one payload.
    fn two_timed_rows() -> OrderBuffer {
        let mut buffer = OrderBuffer::default();
        hold(
            &mut buffer,
            &[(Some("acme"), 3), (None, 1)],
            Some(&[30, 10]),
            100,
            run(1, 2),
        );
        buffer
    }

    fn ints(array: &ArrayRef) -> Vec<i64> {
        array
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .values()
            .to_vec()
    }

    #[test]
    fn held_rows_round_trip_and_leave_in_by_order_without_units() {
        let mut buffer = two_timed_rows();
        hold(
            &mut buffer,
            &[(Some("acme"), 2)],
            Some(&[20]),
            150,
            run(2, 1),
        );
        assert!(buffer.is_dirty());
        let (bytes, acks) = snapshot_buffer(&mut buffer, 9).expect("snapshot");
        assert_eq!(acks.iter().map(|r| r.rows).sum::<u32>(), 3);
        assert!(!buffer.is_dirty());
        let mut restored = restore_buffer(&bytes, 9, &schema(), 1).expect("restore");
        assert_eq!(restored.held_rows(), 3);
        assert_eq!(restored.due_ns(50), Some(150));
        assert!(!restored.is_dirty());
        let out = restored.release(0, 0, true).expect("release");
        assert_eq!(out.len(), 1);
        assert_eq!(ints(&out[0].columns[1]), vec![1, 2, 3]);
        assert_eq!(
            ints(out[0].times.as_ref().expect("times")),
            vec![10, 20, 30]
        );
        let tenants = out[0].columns[0]
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert!(tenants.is_null(0));
        assert!(out[0].acks.is_empty(), "restored rows carry no unit");
    }

    #[test]
    fn a_damaged_snapshot_is_refused_or_read_never_a_panic() {
        let mut buffer = two_timed_rows();
        let (bytes, _) = snapshot_buffer(&mut buffer, 9).expect("snapshot");
        for (torn, damaged) in super::super::state_codec::damaged_copies(&bytes) {
            let Ok(mut restored) = restore_buffer(&damaged, 9, &schema(), 1) else {
                continue;
            };
            assert!(!torn, "a torn snapshot of {} bytes was read", damaged.len());
            // What was read can be released whole, as a stop's pause would.
            let released: usize = restored
                .release(0, 0, true)
                .expect("release")
                .iter()
                .map(|piece| piece.columns[1].len())
                .sum();
            assert_eq!(released, restored_rows(&damaged));
        }
    }

    /// The rows a restorable snapshot holds, read again.
    fn restored_rows(bytes: &[u8]) -> usize {
        restore_buffer(bytes, 9, &schema(), 1)
            .expect("restore")
            .held_rows()
    }

    #[test]
    fn rows_with_and_without_units_leave_in_order_as_separate_pieces() {
        let mut buffer = OrderBuffer::default();
        hold(&mut buffer, &[(Some("a"), 4)], None, 10, run(1, 1));
        let (_, acks) = snapshot_buffer(&mut buffer, 1).expect("snapshot");
        assert_eq!(acks, run(1, 1));
        hold(&mut buffer, &[(Some("a"), 3)], None, 10, run(2, 1));
        hold(&mut buffer, &[(Some("a"), 1)], None, 0, run(3, 1));
        // Only 1 is due; 3 (with its unit) and 4 (whose unit the snapshot took) stay.
        let first = buffer.release(5, 5, false).expect("release");
        assert_eq!(first.len(), 1);
        assert_eq!(ints(&first[0].columns[1]), vec![1]);
        assert_eq!(first[0].acks, run(3, 1));
        let rest = buffer.release(0, 0, true).expect("release");
        let seqs: Vec<Vec<i64>> = rest.iter().map(|p| ints(&p.columns[1])).collect();
        assert_eq!(seqs, vec![vec![3], vec![4]]);
        assert_eq!(rest[0].acks, run(2, 1));
        assert!(rest[1].acks.is_empty());
    }

    #[test]
    fn a_restored_buffer_merges_with_new_rows_in_by_order() {
        let mut buffer = OrderBuffer::default();
        hold(
            &mut buffer,
            &[(Some("a"), 5), (Some("a"), 2)],
            None,
            0,
            run(1, 2),
        );
        let (bytes, _) = snapshot_buffer(&mut buffer, 1).expect("snapshot");
        let mut restored = restore_buffer(&bytes, 1, &schema(), 1).expect("restore");
        hold(&mut restored, &[(Some("a"), 3)], None, 20, run(3, 1));
        let out = restored.release(0, 0, true).expect("release");
        let seqs: Vec<Vec<i64>> = out.iter().map(|p| ints(&p.columns[1])).collect();
        assert_eq!(seqs, vec![vec![2], vec![3], vec![5]]);
        assert!(out[0].acks.is_empty() && out[2].acks.is_empty());
        assert_eq!(out[1].acks, run(3, 1));
    }

    #[test]
    fn another_model_or_schema_is_refused() {
        let mut buffer = OrderBuffer::default();
        hold(&mut buffer, &[(Some("a"), 1)], None, 0, Vec::new());
        let (bytes, _) = snapshot_buffer(&mut buffer, 3).expect("snapshot");
        assert!(matches!(
            restore_buffer(&bytes, 4, &schema(), 1),
            Err(SnapshotError::OtherStateModel)
        ));
        let other = Arc::new(Schema::new(vec![
            Field::new("tenant", DataType::Int64, true),
            Field::new("seq", DataType::Int64, true),
        ]));
        assert!(matches!(
            restore_buffer(&bytes, 3, &other, 1),
            Err(SnapshotError::OtherStateModel)
        ));
        assert!(restore_buffer(&bytes[..bytes.len() - 1], 3, &schema(), 1).is_err());
        assert!(snapshot_buffer(&mut OrderBuffer::default(), 3)
            .expect("empty")
            .0
            .is_empty());
    }
}
