//! Branch keys and branch → shard placement (DESIGN §4, "Branch keys").
//!
//! This module owns how a row's branch is named and which shard owns it. A branch key is the
//! tuple of the branch schema's fields encoded with arrow-row: order-preserving bytes, so keys
//! compare like the tuples they encode and equal tuples give equal bytes. The shard of a key is
//! `xxh3_64_with_seed(key bytes, BRANCH_SHARD_SEED) % shard_count`.
//!
//! Why it is correct:
//!
//! - **Stable placement.** The seed is a named constant, and the encoding options are fixed
//!   (ascending, nulls first), so the same tuple lands on the same shard in every process and
//!   version. Placement decides where persisted state lives; the golden tests pin a few keys'
//!   bytes and shards so any change to the seed, the options or arrow-row's format fails the build
//!   instead of silently moving state.
//! - **Unbranched is its own root.** [`BranchKey::Unbranched`] is an enum variant, never an empty
//!   key; an encoder needs at least one field, and arrow-row gives every field at least one byte,
//!   so no encoded key is empty or equal to the unbranched root.
//! - **Batch-shaped.** [`BranchKeyEncoder::encode`] converts a whole batch's key columns with one
//!   arrow-row conversion into a reused buffer; nothing is allocated per row.
//! - **No panics on input.** Missing columns, mismatched types, an empty field list, zero shards
//!   (unrepresentable: [`NonZeroUsize`]) and batches too large for `u32` row indices are errors.

use std::collections::HashMap;
use std::num::NonZeroUsize;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_row::{RowConverter, Rows, SortField};
use arrow_schema::{ArrowError, DataType, FieldRef, SortOptions};
use thiserror::Error;
use xxhash_rust::xxh3::xxh3_64_with_seed;

pub use crate::key_bytes::KeyBytes;

/// Seed of the branch → shard hash. Stable across processes and versions: it decides branch
/// placement and therefore where persisted branch state lives. Never change it (the bytes spell
/// "nervix" followed by a format number).
pub const BRANCH_SHARD_SEED: u64 = 0x6e65_7276_6978_0001;

/// Shard of the unbranched root. Unbranched work has no key to spread by, so it has one fixed
/// home.
pub const UNBRANCHED_SHARD: usize = 0;

/// The branch a row belongs to. `B` is the key's byte storage: `&[u8]` borrowed from an encoded
/// batch, or [`KeyBytes`] (the default) when kept.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BranchKey<B = KeyBytes> {
    /// The root of a relay or route without a branch schema.
    Unbranched,
    /// arrow-row bytes of the branch schema's fields, never empty.
    Key(B),
}

impl<B: AsRef<[u8]>> BranchKey<B> {
    /// A kept copy of this key.
    pub fn to_owned_key(&self) -> BranchKey {
        match self {
            Self::Unbranched => BranchKey::Unbranched,
            Self::Key(bytes) => BranchKey::Key(KeyBytes::new(bytes.as_ref())),
        }
    }

    /// The key's bytes; None for the unbranched root.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Self::Unbranched => None,
            Self::Key(bytes) => Some(bytes.as_ref()),
        }
    }
}

/// How maps keyed by branch keys (or their bytes) hash on the data path: foldhash, seeded per
/// process. std's SipHash cost a shard several percent of its time on branch-heavy graphs (every
/// frame looks its branch up in a few maps); foldhash is a fraction of that on short keys and
/// its random seed still keeps keys an outsider picks from being aimed at one bucket chain.
pub type KeyHashState = foldhash::fast::RandomState;

/// A map from a branch key to per-branch state, hashed with [`KeyHashState`].
pub type BranchMap<V> = HashMap<BranchKey, V, KeyHashState>;

/// Errors of branch key encoding and partitioning.
#[derive(Debug, Error)]
pub enum BranchKeyError {
    /// A branch schema needs at least one field; no fields means unbranched.
    #[error("a branch key needs at least one field (no fields is BranchKey::Unbranched)")]
    NoFields,
    /// The batch lacks a key column.
    #[error("batch has no branch key column `{field}`")]
    MissingColumn {
        /// The missing field.
        field: String,
    },
    /// A key column's type differs from the branch schema's.
    #[error("branch key column `{field}` is {actual}, expected {expected}")]
    TypeMismatch {
        /// The field.
        field: String,
        /// The branch schema's type.
        expected: DataType,
        /// The batch's type.
        actual: DataType,
    },
    /// Row indices are `u32`; a larger batch cannot be partitioned.
    #[error("batch of {rows} rows exceeds the u32 row index range")]
    TooManyRows {
        /// The batch's row count.
        rows: usize,
    },
    /// arrow-row refused the fields or columns.
    #[error("arrow-row: {0}")]
    Arrow(#[from] ArrowError),
}

/// Encodes a branch schema's fields of whole batches into branch keys.
#[derive(Debug)]
pub struct BranchKeyEncoder {
    fields: Vec<FieldRef>,
    converter: RowConverter,
    rows: Rows,
    columns: Vec<ArrayRef>,
}

impl BranchKeyEncoder {
    /// An encoder for the branch schema's fields, in key order.
    pub fn new(fields: &[FieldRef]) -> Result<Self, BranchKeyError> {
        if fields.is_empty() {
            return Err(BranchKeyError::NoFields);
        }
        let sort_fields = fields
            .iter()
            .map(|field| SortField::new_with_options(field.data_type().clone(), KEY_SORT_OPTIONS))
            .collect();
        let converter = RowConverter::new(sort_fields)?;
        let rows = converter.empty_rows(0, 0);
        Ok(Self {
            fields: fields.to_vec(),
            converter,
            rows,
            columns: Vec::with_capacity(fields.len()),
        })
    }

    /// The branch schema's fields.
    pub fn fields(&self) -> &[FieldRef] {
        &self.fields
    }

    /// Encodes the key columns (found by field name) of every row of `batch`, with one arrow-row
    /// conversion into a buffer reused across calls. Row `i` of the result is row `i`'s key.
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<&Rows, BranchKeyError> {
        self.columns.clear();
        for field in &self.fields {
            let column = batch.column_by_name(field.name()).ok_or_else(|| {
                BranchKeyError::MissingColumn {
                    field: field.name().clone(),
                }
            })?;
            if column.data_type() != field.data_type() {
                return Err(BranchKeyError::TypeMismatch {
                    field: field.name().clone(),
                    expected: field.data_type().clone(),
                    actual: column.data_type().clone(),
                });
            }
            self.columns.push(column.clone());
        }
        self.rows.clear();
        let appended = self.converter.append(&mut self.rows, &self.columns);
        self.columns.clear();
        appended?;
        Ok(&self.rows)
    }
}

impl BranchKeyEncoder {
    /// The key field values of one encoded `key`, one single-row array per field in key
    /// order. `key` must come from an encoder of the same fields.
    pub fn decode(&self, key: &[u8]) -> Result<Vec<ArrayRef>, BranchKeyError> {
        self.decode_many([key])
    }

    /// The key field values of many encoded `keys` in one conversion: one array per field in
    /// key order, row `i` holding key `i`'s value. Each key must come from an encoder of the
    /// same fields.
    pub fn decode_many<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
    ) -> Result<Vec<ArrayRef>, BranchKeyError> {
        let parser = self.converter.parser();
        Ok(self
            .converter
            .convert_rows(keys.into_iter().map(|key| parser.parse(key)))?)
    }
}

/// Options every key field is encoded with. Part of the stable placement: never change.
const KEY_SORT_OPTIONS: SortOptions = SortOptions {
    descending: false,
    nulls_first: true,
};

/// The shard that owns `key` among `shard_count` shards.
pub fn shard_of<B: AsRef<[u8]>>(key: &BranchKey<B>, shard_count: NonZeroUsize) -> usize {
    match key {
        BranchKey::Unbranched => UNBRANCHED_SHARD,
        BranchKey::Key(bytes) => shard_of_key_bytes(bytes.as_ref(), shard_count),
    }
}

/// The shard of encoded key bytes (the `Key` case of [`shard_of`]).
pub fn shard_of_key_bytes(key_bytes: &[u8], shard_count: NonZeroUsize) -> usize {
    let shards = shard_count.get() as u64;
    // The remainder is below `shard_count`, which is a `usize`.
    (xxh3_64_with_seed(key_bytes, BRANCH_SHARD_SEED) % shards) as usize
}

/// Row indices of an encoded batch per owning shard: element `s` lists, in row order, the rows
/// whose key hashes to shard `s`.
pub fn partition_by_shard(
    keys: &Rows,
    shard_count: NonZeroUsize,
) -> Result<Vec<Vec<u32>>, BranchKeyError> {
    let mut partitions = Vec::new();
    partition_by_shard_into(keys, shard_count, &mut partitions)?;
    Ok(partitions)
}

/// [`partition_by_shard`] into caller-owned vectors, reused across batches (cleared first).
pub fn partition_by_shard_into(
    keys: &Rows,
    shard_count: NonZeroUsize,
    partitions: &mut Vec<Vec<u32>>,
) -> Result<(), BranchKeyError> {
    let rows = keys.num_rows();
    if u32::try_from(rows).is_err() {
        return Err(BranchKeyError::TooManyRows { rows });
    }
    partitions.resize_with(shard_count.get(), Vec::new);
    partitions.truncate(shard_count.get());
    for partition in partitions.iter_mut() {
        partition.clear();
    }
    // Per-row loop: hashing variable-length row bytes has no Arrow kernel.
    for (index, row) in (0u32..).zip(keys.iter()) {
        partitions[shard_of_key_bytes(row.as_ref(), shard_count)].push(index);
    }
    Ok(())
}
