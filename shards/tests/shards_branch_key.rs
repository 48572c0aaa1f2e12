//! Branch key encoding and placement: determinism, order preservation, distribution, the distinct
//! unbranched root, and golden values that pin the seed and encoding.

use std::num::NonZeroUsize;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, FieldRef, Schema};
use nervix_shards::branch_key::{
    partition_by_shard, shard_of, BranchKey, BranchKeyEncoder, BranchKeyError, UNBRANCHED_SHARD,
};
use proptest::prelude::*;

fn shards(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

fn key_fields() -> Vec<FieldRef> {
    vec![
        Arc::new(Field::new("region", DataType::Utf8, true)),
        Arc::new(Field::new("id", DataType::Int64, false)),
    ]
}

/// A batch with the key columns plus an unrelated payload column in front.
fn batch(regions: Vec<Option<&str>>, ids: Vec<i64>) -> RecordBatch {
    let payload: ArrayRef = Arc::new(Int32Array::from(vec![0; ids.len()]));
    let schema = Schema::new(vec![
        Field::new("payload", DataType::Int32, false),
        Field::new("id", DataType::Int64, false),
        Field::new("region", DataType::Utf8, true),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            payload,
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(regions)),
        ],
    )
    .unwrap()
}

fn encode_all(encoder: &mut BranchKeyEncoder, batch: &RecordBatch) -> Vec<Vec<u8>> {
    let rows = encoder.encode(batch).unwrap();
    rows.iter().map(|row| row.as_ref().to_vec()).collect()
}

fn int_encoder() -> BranchKeyEncoder {
    BranchKeyEncoder::new(&[Arc::new(Field::new("id", DataType::Int64, false))]).unwrap()
}

fn int_batch(ids: Vec<i64>) -> RecordBatch {
    batch(vec![Some("x"); ids.len()], ids)
}

#[test]
fn same_values_give_same_bytes_and_shard_across_encoders() {
    let input = batch(
        vec![Some("eu"), None, Some("us"), Some("eu")],
        vec![1, 2, 3, 1],
    );
    let mut first = BranchKeyEncoder::new(&key_fields()).unwrap();
    let mut second = BranchKeyEncoder::new(&key_fields()).unwrap();
    let a = encode_all(&mut first, &input);
    // Reuse of the buffer must not leak rows of an earlier batch.
    encode_all(&mut second, &batch(vec![Some("zz"); 7], vec![9; 7]));
    let b = encode_all(&mut second, &input);
    assert_eq!(a, b);
    assert_eq!(a[0], a[3]);
    assert_ne!(a[0], a[1]);
    for bytes in &a {
        let key = BranchKey::Key(bytes.as_slice());
        assert_eq!(
            shard_of(&key, shards(8)),
            shard_of(&key.to_owned_key(), shards(8))
        );
    }
}

#[test]
fn unbranched_is_distinct_from_every_key() {
    let mut encoder = BranchKeyEncoder::new(&key_fields()).unwrap();
    let keys = encode_all(
        &mut encoder,
        &batch(vec![Some(""), None, Some("a")], vec![0, 0, i64::MIN]),
    );
    for bytes in keys {
        assert!(!bytes.is_empty());
        let key: BranchKey = BranchKey::Key(bytes.into());
        assert_ne!(key, BranchKey::Unbranched);
    }
    assert_eq!(
        shard_of(&BranchKey::<&[u8]>::Unbranched, shards(4)),
        UNBRANCHED_SHARD
    );
    assert!(matches!(
        BranchKeyEncoder::new(&[]),
        Err(BranchKeyError::NoFields)
    ));
}

#[test]
fn keys_spread_evenly_over_four_shards() {
    let mut encoder = BranchKeyEncoder::new(&key_fields()).unwrap();
    let ids: Vec<i64> = (0..100_000).collect();
    let input = batch(vec![Some("tenant"); ids.len()], ids);
    let rows = encoder.encode(&input).unwrap();
    let partitions = partition_by_shard(rows, shards(4)).unwrap();
    assert_eq!(partitions.len(), 4);
    assert_eq!(partitions.iter().map(Vec::len).sum::<usize>(), 100_000);
    for partition in &partitions {
        let share = partition.len() as f64 / 100_000.0;
        assert!((0.15..=0.35).contains(&share), "shard share {share}");
        assert!(partition.windows(2).all(|pair| pair[0] < pair[1]));
    }
    for (shard, partition) in partitions.iter().enumerate() {
        for &row in partition.iter().take(50) {
            let key = BranchKey::Key(rows.row(row as usize));
            assert_eq!(shard_of(&key, shards(4)), shard);
        }
    }
}

#[test]
fn encoding_errors_are_reported_not_panicked() {
    let mut encoder = BranchKeyEncoder::new(&key_fields()).unwrap();
    let missing = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
        vec![Arc::new(Int64Array::from(vec![1]))],
    )
    .unwrap();
    assert!(matches!(
        encoder.encode(&missing),
        Err(BranchKeyError::MissingColumn { field }) if field == "region"
    ));
    let mistyped = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("region", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int32Array::from(vec![1])),
            Arc::new(StringArray::from(vec!["a"])),
        ],
    )
    .unwrap();
    assert!(matches!(
        encoder.encode(&mistyped),
        Err(BranchKeyError::TypeMismatch { .. })
    ));
    let empty = encoder.encode(&batch(vec![], vec![])).unwrap();
    assert_eq!(
        partition_by_shard(empty, shards(3)).unwrap(),
        vec![Vec::<u32>::new(); 3]
    );
}

/// Pinned bytes and shards: a change of seed, sort options or arrow-row's format moves persisted
/// branch state and must be a deliberate, migrated decision, not a dependency bump.
#[test]
fn golden_keys_are_pinned() {
    let mut encoder = BranchKeyEncoder::new(&key_fields()).unwrap();
    let keys = encode_all(
        &mut encoder,
        &batch(vec![Some("eu"), None, Some("")], vec![1, -1, 0]),
    );
    let rendered: Vec<(String, usize, usize)> = keys
        .iter()
        .map(|bytes| {
            let key = BranchKey::Key(bytes.as_slice());
            (
                hex(bytes),
                shard_of(&key, shards(4)),
                shard_of(&key, shards(7)),
            )
        })
        .collect();
    assert_eq!(rendered, golden());
}

fn golden() -> Vec<(String, usize, usize)> {
    [
        ("02657500000000000002018000000000000001", 2, 5),
        ("00017fffffffffffffff", 1, 6),
        ("01018000000000000000", 3, 6),
    ]
    .into_iter()
    .map(|(bytes, of_4, of_7)| (bytes.to_owned(), of_4, of_7))
    .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

proptest! {
    #[test]
    fn int_keys_preserve_order(a in any::<i64>(), b in any::<i64>()) {
        let mut encoder = int_encoder();
        let keys = encode_all(&mut encoder, &int_batch(vec![a, b]));
        prop_assert_eq!(keys[0].cmp(&keys[1]), a.cmp(&b));
    }

    #[test]
    fn string_keys_preserve_order(a in ".{0,40}", b in ".{0,40}") {
        let mut encoder =
            BranchKeyEncoder::new(&[Arc::new(Field::new("region", DataType::Utf8, true))]).unwrap();
        let keys = encode_all(&mut encoder, &batch(vec![Some(&a), Some(&b)], vec![0, 0]));
        prop_assert_eq!(keys[0].cmp(&keys[1]), a.as_bytes().cmp(b.as_bytes()));
    }

    #[test]
    fn tuple_keys_preserve_lexicographic_order(
        a in (proptest::option::of("[a-c]{0,3}"), any::<i64>()),
        b in (proptest::option::of("[a-c]{0,3}"), any::<i64>()),
    ) {
        let mut encoder = BranchKeyEncoder::new(&key_fields()).unwrap();
        let keys = encode_all(
            &mut encoder,
            &batch(vec![a.0.as_deref(), b.0.as_deref()], vec![a.1, b.1]),
        );
        // Nulls sort first, as the fixed encoding options say.
        prop_assert_eq!(keys[0].cmp(&keys[1]), (a.0.as_deref(), a.1).cmp(&(b.0.as_deref(), b.1)));
        prop_assert_eq!(keys[0] == keys[1], a == b);
    }
}

#[test]
fn many_keys_decode_in_one_call_to_the_values_they_were_encoded_from() {
    let input = batch(
        vec![Some("eu"), None, Some("us"), Some("eu")],
        vec![1, 2, 3, -4],
    );
    let mut encoder = BranchKeyEncoder::new(&key_fields()).unwrap();
    let keys = encode_all(&mut encoder, &input);
    let columns = encoder
        .decode_many(keys.iter().map(|key| key.as_slice()))
        .unwrap();
    // Key order: region, then id; row i is key i.
    assert_eq!(columns.len(), 2);
    let regions = columns[0].as_any().downcast_ref::<StringArray>().unwrap();
    let ids = columns[1].as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(
        regions.iter().collect::<Vec<_>>(),
        vec![Some("eu"), None, Some("us"), Some("eu")]
    );
    assert_eq!(ids.values().to_vec(), vec![1, 2, 3, -4]);
    // One key at a time gives the same values.
    for (row, key) in keys.iter().enumerate() {
        let single = encoder.decode(key).unwrap();
        let id = single[1].as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(id.value(0), ids.value(row));
    }
}
