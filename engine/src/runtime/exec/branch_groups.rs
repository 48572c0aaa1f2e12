//! A route's output split into one group per concrete branch (spec "Branching"; DESIGN §5
//! item 2): the outgoing branch key of every row, the rows of each key together, in order of
//! first appearance, each group's rows in input order.
//!
//! A branch key is the arrow-row encoding of its fields ([`BranchKeyEncoder`]). Grouping needs
//! only to know which rows share a key, so when every key field is a fixed-width integer-like
//! value without nulls, 16 bytes at most in all, each row's key is packed into one `u128` and
//! rows are grouped by that, and only each group's first row is encoded. Why it is the same
//! grouping: such a value's arrow-row encoding is a one-to-one function of its bytes, so two
//! rows have equal encodings exactly when every field holds the same bytes, which is exactly
//! when their packed words are equal (each field takes its own fixed bit range). Floats are
//! left to the encoder (their encoding orders values; grouping by bits would hold only as long
//! as that order never merges two bit patterns). Any other key takes the general path: every
//! row encoded, grouped by its bytes.
//!
//! Why: a fan-out over hundreds of branches per batch (Nexmark q5's reingestor, five routes of
//! two `I64` fields) otherwise encodes every row into 18 bytes, hashes them as a byte string
//! and compares with `memcmp` on every probe.
//!
//! The rows are then put in group order with one `take` per column (a counting sort by group,
//! stable, so each group keeps its row order), and each group is a range of that batch: a
//! fan-out over thousands of branches costs one copy of the batch, not a `take` with its own
//! buffers per group and column (nor, until a branch's rows travel alone, a slice per group).

use std::collections::HashMap;

use arrow_array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow_schema::{DataType, SchemaRef};
use arrow_select::take::{take, take_record_batch};
use nervix_shards::branch_key::{BranchKey, BranchKeyEncoder, KeyHashState};

use super::route::RouteGroup;

/// Groups a batch's grouping map and lists are sized for before its first row, in groups: a
/// batch spread over a thousand branches never grows them, and a batch of fewer rows sizes
/// them for its rows.
const MAX_PRESIZED_GROUPS: usize = 1_024;

/// Largest packed key, in bytes: one `u128`.
const MAX_PACKED_KEY_BYTES: usize = 16;

/// Which rows share a branch key.
struct Grouping {
    /// Each group's key, in order of first appearance.
    keys: Vec<BranchKey>,
    /// Each group's row count; empty when every row is in the one group.
    sizes: Vec<u32>,
    /// Each row's group; empty when every row is in the one group.
    row_group: Vec<u32>,
}

/// Splits a batch into one group per distinct branch key, in order of first appearance (module
/// docs): returns the rows in group order, each group's range of them, and, when `track_rows`
/// asks for each group's input rows, those of all groups in group order. `keys` are the key
/// fields' columns in `key_schema` order; `rows` is the input row of each of the batch's rows,
/// and `identity` says it is 0, 1, 2, ….
pub fn group_by_key(
    encoder: &mut BranchKeyEncoder,
    key_schema: &SchemaRef,
    keys: Vec<ArrayRef>,
    batch: RecordBatch,
    rows: UInt32Array,
    identity: bool,
    track_rows: bool,
) -> Result<(RecordBatch, Vec<RouteGroup>, Option<UInt32Array>), String> {
    let key_batch =
        RecordBatch::try_new(key_schema.clone(), keys).map_err(|e| format!("branch key: {e}"))?;
    let grouping = match packed_keys(key_batch.columns()) {
        Some(packed) => group_packed(encoder, &key_batch, &packed)?,
        None => group_encoded(encoder, &key_batch)?,
    };
    if grouping.row_group.is_empty() {
        let key = grouping.keys.into_iter().next().ok_or("no branch key")?;
        let group = RouteGroup {
            key,
            offset: 0,
            rows: batch.num_rows(),
            input_rows: rows,
        };
        return Ok((batch, vec![group], None));
    }
    // Counting sort: `next[g]` is where group g's next row goes.
    let mut next: Vec<u32> = Vec::with_capacity(grouping.sizes.len());
    let mut start = 0u32;
    for count in &grouping.sizes {
        next.push(start);
        start += count;
    }
    let mut order = vec![0u32; grouping.row_group.len()];
    for (row, group) in grouping.row_group.iter().enumerate() {
        let slot = &mut next[*group as usize];
        order[*slot as usize] = row as u32;
        *slot += 1;
    }
    let order = UInt32Array::from(order);
    let grouped = take_record_batch(&batch, &order).map_err(|e| e.to_string())?;
    let grouped_rows = if !track_rows {
        None
    } else if identity {
        // The sort's order is the input rows.
        Some(order)
    } else {
        let taken = take(&rows, &order, None).map_err(|e| e.to_string())?;
        let taken = taken
            .as_any()
            .downcast_ref::<UInt32Array>()
            .cloned()
            .ok_or("input rows are not UInt32")?;
        Some(taken)
    };
    let mut groups = Vec::with_capacity(grouping.keys.len());
    let untracked = UInt32Array::from(Vec::<u32>::new());
    let mut offset = 0usize;
    for (key, count) in grouping.keys.into_iter().zip(grouping.sizes) {
        let count = count as usize;
        let input_rows = match &grouped_rows {
            Some(rows) => rows.slice(offset, count),
            None => untracked.clone(),
        };
        groups.push(RouteGroup {
            key,
            offset,
            rows: count,
            input_rows,
        });
        offset += count;
    }
    Ok((grouped, groups, grouped_rows))
}

/// The general path: every row's key encoded, rows grouped by the encoded bytes.
fn group_encoded(
    encoder: &mut BranchKeyEncoder,
    key_batch: &RecordBatch,
) -> Result<Grouping, String> {
    let encoded = encoder.encode(key_batch).map_err(|e| e.to_string())?;
    let num_rows = encoded.num_rows();
    let first = encoded.row(0);
    // Every row in one branch: one comparison per row, no map.
    if (1..num_rows).all(|i| encoded.row(i) == first) {
        return Ok(Grouping {
            keys: vec![BranchKey::Key(first.data().into())],
            sizes: Vec::new(),
            row_group: Vec::new(),
        });
    }
    let expected_groups = num_rows.min(MAX_PRESIZED_GROUPS);
    let mut group_of: HashMap<&[u8], u32, KeyHashState> =
        HashMap::with_capacity_and_hasher(expected_groups, KeyHashState::default());
    let mut keys: Vec<BranchKey> = Vec::with_capacity(expected_groups);
    let mut sizes: Vec<u32> = Vec::with_capacity(expected_groups);
    let mut row_group: Vec<u32> = Vec::with_capacity(num_rows);
    for i in 0..num_rows {
        let key = encoded.row(i).data();
        let group = *group_of.entry(key).or_insert_with(|| {
            keys.push(BranchKey::Key(key.into()));
            sizes.push(0);
            (keys.len() - 1) as u32
        });
        sizes[group as usize] += 1;
        row_group.push(group);
    }
    Ok(Grouping {
        keys,
        sizes,
        row_group,
    })
}

/// The packed path: rows grouped by their packed keys, then one row per group encoded.
fn group_packed(
    encoder: &mut BranchKeyEncoder,
    key_batch: &RecordBatch,
    packed: &[u128],
) -> Result<Grouping, String> {
    let num_rows = packed.len();
    let first = packed.first().copied().unwrap_or_default();
    let (representatives, sizes, row_group) = if packed.iter().all(|key| *key == first) {
        (vec![0u32], Vec::new(), Vec::new())
    } else {
        let expected_groups = num_rows.min(MAX_PRESIZED_GROUPS);
        let mut group_of: HashMap<u128, u32, KeyHashState> =
            HashMap::with_capacity_and_hasher(expected_groups, KeyHashState::default());
        let mut representatives: Vec<u32> = Vec::with_capacity(expected_groups);
        let mut sizes: Vec<u32> = Vec::with_capacity(expected_groups);
        let mut row_group: Vec<u32> = Vec::with_capacity(num_rows);
        for (row, key) in packed.iter().enumerate() {
            let group = *group_of.entry(*key).or_insert_with(|| {
                representatives.push(row as u32);
                sizes.push(0);
                (representatives.len() - 1) as u32
            });
            sizes[group as usize] += 1;
            row_group.push(group);
        }
        (representatives, sizes, row_group)
    };
    let firsts = take_record_batch(key_batch, &UInt32Array::from(representatives))
        .map_err(|e| e.to_string())?;
    let encoded = encoder.encode(&firsts).map_err(|e| e.to_string())?;
    let keys = (0..encoded.num_rows())
        .map(|i| BranchKey::Key(encoded.row(i).data().into()))
        .collect();
    Ok(Grouping {
        keys,
        sizes,
        row_group,
    })
}

/// Each row's key fields packed into one `u128`, first field in the highest bits, when every
/// field is a fixed-width integer-like value without nulls and all fit (module docs); None
/// otherwise.
fn packed_keys(columns: &[ArrayRef]) -> Option<Vec<u128>> {
    let num_rows = columns.first()?.len();
    let mut width_total = 0usize;
    for column in columns {
        width_total += packable_width(column.data_type())?;
        if column.null_count() > 0 {
            return None;
        }
    }
    if width_total > MAX_PACKED_KEY_BYTES {
        return None;
    }
    let mut packed = vec![0u128; num_rows];
    for column in columns {
        let width = packable_width(column.data_type())?;
        let data = column.to_data();
        let buffer = data.buffers().first()?;
        let values = buffer
            .as_slice()
            .get(data.offset() * width..(data.offset() + num_rows) * width)?;
        match width {
            1 => shift_in::<1>(&mut packed, values),
            2 => shift_in::<2>(&mut packed, values),
            4 => shift_in::<4>(&mut packed, values),
            8 => shift_in::<8>(&mut packed, values),
            16 => shift_in::<16>(&mut packed, values),
            _ => return None,
        }
    }
    Some(packed)
}

/// The byte width of a key field whose value the packed path can take as its bytes.
fn packable_width(data_type: &DataType) -> Option<usize> {
    match data_type {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Timestamp(_, _)
        | DataType::Date32
        | DataType::Date64
        | DataType::Time32(_)
        | DataType::Time64(_)
        | DataType::Duration(_)
        | DataType::Decimal32(_, _)
        | DataType::Decimal64(_, _)
        | DataType::Decimal128(_, _) => data_type.primitive_width(),
        _ => None,
    }
}

/// Shifts each row's `WIDTH`-byte little-endian value into the low bits of its packed word.
fn shift_in<const WIDTH: usize>(packed: &mut [u128], values: &[u8]) {
    for (word, value) in packed.iter_mut().zip(values.chunks_exact(WIDTH)) {
        let mut bytes = [0u8; 16];
        bytes[..WIDTH].copy_from_slice(value);
        // A 16-byte field is the only field, so its word is still zero and the shift drops it.
        *word = word.checked_shl(8 * WIDTH as u32).unwrap_or(0) | u128::from_le_bytes(bytes);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Float64Array, Int32Array, Int64Array, StringArray, UInt8Array};
    use arrow_schema::{Field, Schema};
    use proptest::prelude::*;

    use super::*;

    /// The groups' keys, their rows' `row` values and the tracked input rows.
    type Split = (Vec<BranchKey>, Vec<Vec<i64>>, Option<Vec<u32>>);

    fn split(key_columns: Vec<ArrayRef>, packed: bool) -> Split {
        let key_schema: SchemaRef = Arc::new(Schema::new(
            key_columns
                .iter()
                .enumerate()
                .map(|(i, c)| Field::new(format!("k{i}"), c.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        let num_rows = key_columns[0].len();
        let row_numbers: ArrayRef = Arc::new(Int64Array::from_iter_values(0..num_rows as i64));
        let batch = RecordBatch::try_from_iter([("row", row_numbers)]).expect("batch");
        let rows = UInt32Array::from_iter_values(0..num_rows as u32);
        let mut encoder = BranchKeyEncoder::new(key_schema.fields()).expect("encoder");
        let key_batch = RecordBatch::try_new(key_schema.clone(), key_columns.clone()).unwrap();
        assert_eq!(
            packed_keys(key_batch.columns()).is_some(),
            packed,
            "which path the keys take"
        );
        let (grouped, groups, tracked) = group_by_key(
            &mut encoder,
            &key_schema,
            key_columns,
            batch,
            rows,
            true,
            true,
        )
        .expect("grouped");
        let keys = groups.iter().map(|g| g.key.clone()).collect();
        let members = groups
            .iter()
            .map(|g| {
                let rows = grouped.slice(g.offset, g.rows);
                let column = rows.column(0).as_any().downcast_ref::<Int64Array>();
                column.expect("row numbers").values().to_vec()
            })
            .collect();
        (keys, members, tracked.map(|t| t.values().to_vec()))
    }

    /// What grouping by every row's encoded key gives, the reference.
    fn by_encoding(key_columns: &[ArrayRef]) -> (Vec<BranchKey>, Vec<Vec<i64>>) {
        let fields: Vec<Field> = key_columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("k{i}"), c.data_type().clone(), true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let mut encoder = BranchKeyEncoder::new(schema.fields()).expect("encoder");
        let batch = RecordBatch::try_new(schema, key_columns.to_vec()).expect("keys");
        let encoded = encoder.encode(&batch).expect("encoded");
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut members: Vec<Vec<i64>> = Vec::new();
        for row in 0..encoded.num_rows() {
            let key = encoded.row(row).data().to_vec();
            match keys.iter().position(|k| *k == key) {
                Some(group) => members[group].push(row as i64),
                None => {
                    keys.push(key);
                    members.push(vec![row as i64]);
                }
            }
        }
        let keys = keys.iter().map(|k| BranchKey::Key(k[..].into())).collect();
        (keys, members)
    }

    #[test]
    fn keys_that_do_not_pack_take_the_encoder() {
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "a"]));
        let (keys, members, _) = split(vec![strings.clone()], false);
        assert_eq!((keys, members), by_encoding(&[strings]));
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![0.0, -0.0, 0.0]));
        let (keys, members, _) = split(vec![floats.clone()], false);
        assert_eq!((keys, members), by_encoding(&[floats]));
        let with_null: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(1)]));
        let (keys, members, _) = split(vec![with_null.clone()], false);
        assert_eq!((keys, members), by_encoding(&[with_null]));
        // Three I64 fields take 24 bytes, past one word.
        let wide: Vec<ArrayRef> = (0..3)
            .map(|_| Arc::new(Int64Array::from(vec![1, 2, 1])) as ArrayRef)
            .collect();
        let (keys, members, _) = split(wide.clone(), false);
        assert_eq!((keys, members), by_encoding(&wide));
    }

    #[test]
    fn one_branch_is_one_group_of_every_row() {
        let same: ArrayRef = Arc::new(Int64Array::from(vec![7; 5]));
        let (keys, members, tracked) = split(vec![same.clone()], true);
        assert_eq!((keys, members), by_encoding(&[same]));
        // One group leaves the rows as they came: nothing to track in group order.
        assert_eq!(tracked, None);
    }

    proptest! {
        /// Packed keys group exactly as encoded keys do: the same groups with the same keys, in
        /// order of first appearance, each with its rows in input order. Small value ranges
        /// make rows share keys; negative values and a sliced column check the byte reading.
        #[test]
        fn packed_keys_group_as_encoded_keys_do(
            values in prop::collection::vec((-3i64..3, -2i32..2, 0u8..3), 1..200),
            offset in 0usize..3,
        ) {
            let firsts: ArrayRef = Arc::new(Int64Array::from_iter_values(
                std::iter::repeat_n(99, offset).chain(values.iter().map(|v| v.0)),
            ));
            let firsts = firsts.slice(offset, values.len());
            let seconds: ArrayRef =
                Arc::new(Int32Array::from_iter_values(values.iter().map(|v| v.1)));
            let thirds: ArrayRef =
                Arc::new(UInt8Array::from_iter_values(values.iter().map(|v| v.2)));
            let columns = vec![firsts, seconds, thirds];
            let (keys, members, tracked) = split(columns.clone(), true);
            let reference = by_encoding(&columns);
            if reference.0.len() > 1 {
                let in_group_order: Vec<u32> =
                    reference.1.iter().flatten().map(|row| *row as u32).collect();
                prop_assert_eq!(tracked, Some(in_group_order));
            }
            prop_assert_eq!((keys, members), reference);
        }
    }
}
