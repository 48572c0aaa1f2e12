//! Snapshots of one CORRELATOR branch's pending rows (DESIGN §6 "Runtime state"), so a
//! restart — a crash, a stop, a model change — neither loses nor double-counts them.
//!
//! A branch is encoded as: a version byte, the correlator's model tag (`CorrelatePlan::model`:
//! side schemas, CORRELATE WHERE, MATCH), the processor's two side watermarks, then per side
//! (LEFT, RIGHT) its row count and, when it holds rows, one Arrow IPC batch of the side's
//! columns followed by each row's time, equality-key hash (null when a key value was null)
//! and matched flag (MATCH ALL). Rows are written in the side's time order, which
//! [`PendingRows::append`] keeps when they are read back, so arrival order among equal times
//! survives too. A branch with no pending rows encodes as nothing, which deletes its entry.
//!
//! Acknowledgements: encoding takes every pending row's root; the caller acknowledges those
//! units once the snapshot is durable (as windows do), and the restored rows carry none. A
//! branch that fails to encode keeps its roots, so its rows stay unacknowledged until a later
//! snapshot holds them or they leave. A stored branch whose model tag differs is not restored
//! ([`SnapshotError::OtherStateModel`]): its key hashes and matched flags belong to another
//! condition.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, UInt64Array};
use arrow_schema::SchemaRef;
use nervix_shards::ack::AckHandle;

use super::correlate::{BranchState, MAX_PENDING_ROWS_PER_SIDE};
use super::state_codec::{check_size, header, put_columns, put_opt_i64, put_u32, Cursor};
use super::window::SnapshotError;
use crate::runtime::frame::AckRun;

/// The format version (first byte of an encoded branch).
const SNAPSHOT_VERSION: u8 = 1;
/// Columns each stored side row carries after the side's own: time, key hash, matched.
const DETAIL_COLUMNS: usize = 3;

/// Encodes `state` under `model` with the processor's side `watermarks_ns`, and takes the
/// acknowledgement runs of its pending rows (see the module doc). Empty bytes: the branch
/// holds nothing.
pub fn snapshot_branch(
    state: &mut BranchState,
    model: u64,
    watermarks_ns: [Option<i64>; 2],
) -> Result<(Vec<u8>, Vec<AckRun>), SnapshotError> {
    let encoded = encode(state, model, watermarks_ns);
    let sides = state.sides_mut();
    let bytes = encoded?;
    let mut acks: Vec<AckRun> = Vec::new();
    for side in sides.iter_mut() {
        append_roots(&mut acks, side.take_roots());
    }
    Ok((bytes, acks))
}

fn encode(
    state: &mut BranchState,
    model: u64,
    watermarks_ns: [Option<i64>; 2],
) -> Result<Vec<u8>, SnapshotError> {
    if state.pending_rows() == 0 {
        return Ok(Vec::new());
    }
    let mut out = header(SNAPSHOT_VERSION, model);
    for watermark in watermarks_ns {
        put_opt_i64(&mut out, watermark);
    }
    for side in state.sides_mut().iter() {
        put_u32(&mut out, side.len())?;
        if side.is_empty() {
            continue;
        }
        let mut columns = side.columns_at(&side.live_positions())?;
        columns.push(Arc::new(Int64Array::from_iter_values(
            side.rows().map(|row| row.time_ns),
        )));
        columns.push(Arc::new(UInt64Array::from_iter(
            side.rows().map(|row| row.key),
        )));
        columns.push(Arc::new(BooleanArray::from_iter(
            side.rows().map(|row| Some(row.matched)),
        )));
        put_columns(&mut out, &columns)?;
    }
    check_size(out.len())?;
    Ok(out)
}

/// One unit per root, neighbours on one root merged into one run.
fn append_roots(acks: &mut Vec<AckRun>, roots: Vec<AckHandle>) {
    for root in roots {
        match acks.last_mut() {
            Some(last) if last.root == root => last.rows += 1,
            _ => acks.push(AckRun { root, rows: 1 }),
        }
    }
}

/// A branch read back from [`snapshot_branch`]'s bytes, with the side watermarks stored with
/// it.
pub struct Restored {
    pub state: BranchState,
    pub watermarks_ns: [Option<i64>; 2],
}

/// Reads a branch stored under `model` for sides of `side_schemas` (left, right).
pub fn restore_branch(
    bytes: &[u8],
    model: u64,
    side_schemas: &[SchemaRef; 2],
) -> Result<Restored, SnapshotError> {
    let mut cursor = Cursor::new(bytes);
    cursor.header(SNAPSHOT_VERSION, model)?;
    let watermarks_ns = [cursor.opt_i64()?, cursor.opt_i64()?];
    let mut state = BranchState::new(side_schemas);
    for (side, schema) in state.sides_mut().iter_mut().zip(side_schemas) {
        let rows = cursor.u32()?;
        if rows == 0 {
            continue;
        }
        if rows > MAX_PENDING_ROWS_PER_SIDE {
            return Err(SnapshotError::Malformed);
        }
        let width = schema.fields().len();
        let mut columns = cursor.columns(width + DETAIL_COLUMNS, rows)?;
        let types_match = columns
            .iter()
            .zip(schema.fields())
            .all(|(column, field)| column.data_type() == field.data_type());
        if !types_match {
            return Err(SnapshotError::OtherStateModel);
        }
        let detail = columns.split_off(width);
        let times = downcast::<Int64Array>(&detail[0])?;
        let keys = downcast::<UInt64Array>(&detail[1])?;
        let matched = downcast::<BooleanArray>(&detail[2])?;
        if times.null_count() > 0 {
            return Err(SnapshotError::Malformed);
        }
        let picked: Vec<u32> = (0..rows as u32).collect();
        side.append(&columns, &picked, |row| {
            let row = row as usize;
            (
                times.value(row),
                keys.is_valid(row).then(|| keys.value(row)),
                None,
                matched.is_valid(row) && matched.value(row),
            )
        })?;
    }
    if !cursor.is_done() {
        return Err(SnapshotError::Malformed);
    }
    Ok(Restored {
        state,
        watermarks_ns,
    })
}

fn downcast<T: Clone + 'static>(array: &ArrayRef) -> Result<T, SnapshotError> {
    array
        .as_any()
        .downcast_ref::<T>()
        .cloned()
        .ok_or(SnapshotError::Malformed)
}

#[cfg(test)]
mod tests {
    use arrow_array::StringArray;
    use arrow_schema::{DataType, Field, Schema};

    use super::*;
    use crate::runtime::exec::pending_rows::{PendingRows, MAX_SEGMENTS};

    fn schemas() -> [SchemaRef; 2] {
        let left = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("amount", DataType::Int64, true),
        ]));
        let right = Arc::new(Schema::new(vec![Field::new("paid", DataType::Int64, true)]));
        [left, right]
    }

    fn root(index: u32) -> AckHandle {
        AckHandle {
            index,
            generation: 0,
        }
    }

    /// Appends rows (id, amount or null) with their time, key, root and matched flag.
    type LeftRow<'a> = (&'a str, Option<i64>, i64, Option<u64>, Option<u32>, bool);

    fn add_left(side: &mut PendingRows, rows: &[LeftRow<'_>]) {
        let ids: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0)));
        let amounts: ArrayRef = Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1)));
        let picked: Vec<u32> = (0..rows.len() as u32).collect();
        side.append(&[ids, amounts], &picked, |row| {
            let r = rows[row as usize];
            (r.2, r.3, r.4.map(root), r.5)
        })
        .expect("append");
    }

    /// One left row as (id, amount, time, key, has root, matched).
    type LeftView = (String, Option<i64>, i64, Option<u64>, bool, bool);

    /// Each row of a left side, in time order.
    fn left_view(side: &PendingRows) -> Vec<LeftView> {
        let columns = side.columns_at(&side.live_positions()).expect("columns");
        let ids = columns[0].as_any().downcast_ref::<StringArray>().unwrap();
        let amounts = columns[1].as_any().downcast_ref::<Int64Array>().unwrap();
        side.rows()
            .enumerate()
            .map(|(i, row)| {
                (
                    ids.value(i).to_string(),
                    amounts.is_valid(i).then(|| amounts.value(i)),
                    row.time_ns,
                    row.key,
                    row.root.is_some(),
                    row.matched,
                )
            })
            .collect()
    }

    #[test]
    fn pending_rows_round_trip_with_nulls_times_keys_and_flags() {
        let [left, right] = schemas();
        let mut state = BranchState::new(&[left.clone(), right.clone()]);
        // Out of time order on purpose: the side keeps them sorted, ties in arrival order.
        add_left(
            &mut state.sides_mut()[0],
            &[
                ("o2", None, 30, Some(7), Some(1), false),
                ("o1", Some(100), 10, None, Some(1), true),
                ("o3", Some(5), 30, Some(9), Some(2), false),
            ],
        );
        let before = left_view(&state.sides_mut()[0]);
        let (bytes, acks) = snapshot_branch(&mut state, 42, [Some(30), None]).expect("snapshot");
        assert_eq!(
            acks,
            vec![
                AckRun {
                    root: root(1),
                    rows: 2
                },
                AckRun {
                    root: root(2),
                    rows: 1
                }
            ]
        );
        // The snapshot took the roots: the rows now wait without units.
        assert!(left_view(&state.sides_mut()[0]).iter().all(|r| !r.4));
        let restored = restore_branch(&bytes, 42, &[left, right]).expect("restore");
        assert_eq!(restored.watermarks_ns, [Some(30), None]);
        let mut restored_state = restored.state;
        let after = left_view(&restored_state.sides_mut()[0]);
        let strip = |rows: Vec<LeftView>| {
            rows.into_iter()
                .map(|(id, amount, time, key, _, matched)| (id, amount, time, key, matched))
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(after.clone()), strip(before));
        assert_eq!(after[0].0, "o1");
        assert_eq!(after[1].1, None);
        assert!(after.iter().all(|r| !r.4), "restored rows hold no unit");
        assert_eq!(restored_state.pending_rows(), 3);
        assert_eq!(restored_state.due_ns(5), Some(15));
    }

    #[test]
    fn a_branch_survives_compaction_and_an_empty_branch_deletes_its_entry() {
        let [left, right] = schemas();
        let mut state = BranchState::new(&[left.clone(), right.clone()]);
        assert!(snapshot_branch(&mut state, 1, [None, None])
            .expect("empty")
            .0
            .is_empty());
        let total = MAX_SEGMENTS as i64 + 8;
        for i in 0..total {
            let id = format!("o{i}");
            add_left(
                &mut state.sides_mut()[0],
                &[(&id, Some(i), i, None, None, false)],
            );
        }
        // Half leave: the side compacts its segments while rows stay addressed.
        let mut leaving = Vec::new();
        let side = &mut state.sides_mut()[0];
        let even: Vec<u32> = side
            .live_positions()
            .into_iter()
            .filter(|position| side.get(*position as usize).time_ns % 2 == 0)
            .collect();
        side.remove(&even, &mut leaving);
        let paid: ArrayRef = Arc::new(Int64Array::from(vec![None, Some(3)]));
        state.sides_mut()[1]
            .append(&[paid], &[0, 1], |row| {
                (i64::from(row) + 1, Some(5), None, false)
            })
            .expect("append");
        let (bytes, acks) = snapshot_branch(&mut state, 1, [Some(1), Some(2)]).expect("snap");
        assert!(acks.is_empty(), "rows without roots give no units");
        let mut restored = restore_branch(&bytes, 1, &[left, right])
            .expect("restore")
            .state;
        let expected: Vec<i64> = (0..total).filter(|i| i % 2 == 1).collect();
        let view = left_view(&restored.sides_mut()[0]);
        assert_eq!(view.iter().map(|r| r.2).collect::<Vec<_>>(), expected);
        assert_eq!(
            view.iter().map(|r| r.1).collect::<Vec<_>>(),
            expected.iter().map(|v| Some(*v)).collect::<Vec<_>>()
        );
        let right_side = &restored.sides_mut()[1];
        let columns = right_side.columns_at(&[0, 1]).expect("columns");
        let paid = columns[0].as_any().downcast_ref::<Int64Array>().unwrap();
        assert!(paid.is_null(0));
        assert_eq!(paid.value(1), 3);
        assert_eq!(
            right_side
                .rows()
                .map(|r| (r.time_ns, r.key))
                .collect::<Vec<_>>(),
            vec![(1, Some(5)), (2, Some(5))]
        );
    }

    #[test]
    fn a_damaged_snapshot_is_refused_or_read_never_a_panic() {
        let [left, right] = schemas();
        let mut state = BranchState::new(&[left.clone(), right.clone()]);
        add_left(
            &mut state.sides_mut()[0],
            &[
                ("o1", Some(1), 1, None, None, false),
                ("o2", None, 2, None, None, true),
            ],
        );
        let (bytes, _) = snapshot_branch(&mut state, 7, [Some(4), None]).expect("snapshot");
        for (torn, damaged) in super::super::state_codec::damaged_copies(&bytes) {
            let Ok(restored) = restore_branch(&damaged, 7, &[left.clone(), right.clone()]) else {
                continue;
            };
            assert!(!torn, "a torn snapshot of {} bytes was read", damaged.len());
            // What was read is a branch the runtime can go on with: it snapshots again.
            let mut branch = restored.state;
            snapshot_branch(&mut branch, 7, restored.watermarks_ns).expect("snapshots again");
        }
    }

    #[test]
    fn another_model_or_damaged_bytes_are_refused() {
        let [left, right] = schemas();
        let mut state = BranchState::new(&[left.clone(), right.clone()]);
        add_left(
            &mut state.sides_mut()[0],
            &[("o1", Some(1), 1, None, None, false)],
        );
        let (bytes, _) = snapshot_branch(&mut state, 7, [None, None]).expect("snapshot");
        assert!(matches!(
            restore_branch(&bytes, 8, &[left.clone(), right.clone()]),
            Err(SnapshotError::OtherStateModel)
        ));
        assert!(matches!(
            restore_branch(&bytes[..bytes.len() - 3], 7, &[left.clone(), right.clone()]),
            Err(SnapshotError::Malformed | SnapshotError::Arrow(_))
        ));
        // A side whose schema changed under the same tag is not misread.
        let other = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("amount", DataType::Int64, true),
        ]));
        assert!(matches!(
            restore_branch(&bytes, 7, &[other, right]),
            Err(SnapshotError::OtherStateModel)
        ));
    }
}
