//! The application side of replication: the [`StateMachine`] trait and its views of the `state`
//! database, [`StateTxn`] (read-write, during apply) and [`StateReadTxn`] (read-only, during load).
//!
//! Why this is correct: the raft crate opens one LMDB write transaction per apply batch, hands it
//! to [`StateMachine::apply`] wrapped in a [`StateTxn`], then records the batch's last log id and
//! membership in the *same* transaction before committing it. A crash therefore leaves either the
//! whole batch (state and applied id) or none of it, and replay after restart resumes exactly at
//! the first unapplied entry. The application never sees LMDB types, so it cannot commit, abort
//! or open other databases behind the crate's back.
//!
//! Size limits that LMDB would reject are checked first and reported as deterministic errors
//! ([`StateError::KeyLength`], [`StateError::ValueTooLarge`]): every replica refuses the same write
//! the same way, so the application may handle them. Any other LMDB failure is not deterministic
//! (disk full, I/O error); it poisons the transaction, and the crate aborts the batch and stops
//! the node instead of letting this replica diverge from the others.

use std::cell::RefCell;

use heed::types::Bytes;
use heed::{Database, RoIter, RoPrefix, RoTxn, RwTxn, WithoutTls};

use crate::config::MAX_STATE_VALUE_BYTES;
use crate::error::StateError;

/// Longest key of the `state` database: LMDB's compiled-in maximum key size.
pub const MAX_STATE_KEY_BYTES: usize = 511;

/// The application's key-value database inside the raft environment.
pub(crate) type StateDb = Database<'static, Bytes, Bytes>;

/// The state machine replicated by Raft. Implementations must be deterministic: the same
/// commands applied to the same state produce the same state and responses on every replica.
pub trait StateMachine: Send + Sync + 'static {
    /// Applies one committed command. May read and write the `state` database through `txn`;
    /// the raft crate records the applied log id in the same write transaction, so an apply is
    /// atomic and durable together with its state changes. The returned bytes answer the
    /// [`crate::RaftNode::write`] that proposed the command (on the node that proposed it).
    fn apply(&mut self, txn: &mut StateTxn<'_>, command: &[u8]) -> Vec<u8>;

    /// Rebuilds in-memory state from the `state` database, at open and after a snapshot was
    /// installed. Replaces whatever the state machine held before.
    fn load(&mut self, txn: &StateReadTxn<'_>) -> Result<(), String>;
}

/// Read-write view of the `state` database during [`StateMachine::apply`].
pub struct StateTxn<'e> {
    txn: RwTxn<'e>,
    db: StateDb,
    poison: RefCell<Option<String>>,
}

/// Read-only view of the `state` database during [`StateMachine::load`].
pub struct StateReadTxn<'e> {
    txn: RoTxn<'e, WithoutTls>,
    db: StateDb,
    poison: RefCell<Option<String>>,
}

/// Iterator over the `(key, value)` pairs of the `state` database whose key starts with a
/// prefix, in key order.
pub struct StatePrefixIter<'t> {
    inner: PrefixInner<'t>,
    poison: &'t RefCell<Option<String>>,
}

enum PrefixInner<'t> {
    All(RoIter<'t, Bytes, Bytes>),
    Prefix(RoPrefix<'t, Bytes, Bytes>),
}

impl<'t> Iterator for StatePrefixIter<'t> {
    type Item = Result<(&'t [u8], &'t [u8]), StateError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = match &mut self.inner {
            PrefixInner::All(iter) => iter.next(),
            PrefixInner::Prefix(iter) => iter.next(),
        };
        next.map(|item| item.map_err(|e| poison(self.poison, e)))
    }
}

fn poison(cell: &RefCell<Option<String>>, e: heed::Error) -> StateError {
    let message = e.to_string();
    let mut slot = cell.borrow_mut();
    if slot.is_none() {
        *slot = Some(message.clone());
    }
    StateError::Storage(message)
}

fn check_poison(cell: &RefCell<Option<String>>) -> Result<(), StateError> {
    match &*cell.borrow() {
        Some(message) => Err(StateError::Poisoned(message.clone())),
        None => Ok(()),
    }
}

fn check_key(key: &[u8]) -> Result<(), StateError> {
    if key.is_empty() || key.len() > MAX_STATE_KEY_BYTES {
        return Err(StateError::KeyLength {
            len: key.len(),
            max: MAX_STATE_KEY_BYTES,
        });
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<(), StateError> {
    if value.len() > MAX_STATE_VALUE_BYTES {
        return Err(StateError::ValueTooLarge {
            len: value.len(),
            max: MAX_STATE_VALUE_BYTES,
        });
    }
    Ok(())
}

fn get<'t>(
    db: &StateDb,
    txn: &'t RoTxn,
    poison_cell: &RefCell<Option<String>>,
    key: &[u8],
) -> Result<Option<&'t [u8]>, StateError> {
    check_poison(poison_cell)?;
    check_key(key)?;
    db.get(txn, key).map_err(|e| poison(poison_cell, e))
}

fn prefix<'t>(
    db: &StateDb,
    txn: &'t RoTxn,
    poison_cell: &'t RefCell<Option<String>>,
    prefix: &[u8],
) -> Result<StatePrefixIter<'t>, StateError> {
    check_poison(poison_cell)?;
    if prefix.len() > MAX_STATE_KEY_BYTES {
        return Err(StateError::KeyLength {
            len: prefix.len(),
            max: MAX_STATE_KEY_BYTES,
        });
    }
    let inner = if prefix.is_empty() {
        PrefixInner::All(db.iter(txn).map_err(|e| poison(poison_cell, e))?)
    } else {
        PrefixInner::Prefix(
            db.prefix_iter(txn, prefix)
                .map_err(|e| poison(poison_cell, e))?,
        )
    };
    Ok(StatePrefixIter {
        inner,
        poison: poison_cell,
    })
}

impl<'e> StateTxn<'e> {
    pub(crate) fn new(txn: RwTxn<'e>, db: StateDb) -> Self {
        StateTxn {
            txn,
            db,
            poison: RefCell::new(None),
        }
    }

    /// Gives the write transaction back, with the first storage error met, if any.
    pub(crate) fn into_parts(self) -> (RwTxn<'e>, Option<String>) {
        (self.txn, self.poison.into_inner())
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<&[u8]>, StateError> {
        get(&self.db, &self.txn, &self.poison, key)
    }

    /// Stores `value` under `key`, replacing any previous value.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        check_poison(&self.poison)?;
        check_key(key)?;
        check_value(value)?;
        self.db
            .put(&mut self.txn, key, value)
            .map_err(|e| poison(&self.poison, e))
    }

    /// Removes `key`; answers whether it was present.
    pub fn delete(&mut self, key: &[u8]) -> Result<bool, StateError> {
        check_poison(&self.poison)?;
        check_key(key)?;
        self.db
            .delete(&mut self.txn, key)
            .map_err(|e| poison(&self.poison, e))
    }

    /// Iterates the pairs whose key starts with `prefix` (all pairs for an empty prefix).
    pub fn prefix(&self, prefix_bytes: &[u8]) -> Result<StatePrefixIter<'_>, StateError> {
        prefix(&self.db, &self.txn, &self.poison, prefix_bytes)
    }

    /// Removes every pair whose key starts with `prefix`; answers how many were removed.
    pub fn delete_prefix(&mut self, prefix_bytes: &[u8]) -> Result<u64, StateError> {
        let keys: Vec<Vec<u8>> = self
            .prefix(prefix_bytes)?
            .map(|item| item.map(|(key, _)| key.to_vec()))
            .collect::<Result<_, _>>()?;
        for key in &keys {
            self.delete(key)?;
        }
        Ok(keys.len() as u64)
    }
}

impl<'e> StateReadTxn<'e> {
    pub(crate) fn new(txn: RoTxn<'e, WithoutTls>, db: StateDb) -> Self {
        StateReadTxn {
            txn,
            db,
            poison: RefCell::new(None),
        }
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<&[u8]>, StateError> {
        get(&self.db, &self.txn, &self.poison, key)
    }

    /// Iterates the pairs whose key starts with `prefix` (all pairs for an empty prefix).
    pub fn prefix(&self, prefix_bytes: &[u8]) -> Result<StatePrefixIter<'_>, StateError> {
        prefix(&self.db, &self.txn, &self.poison, prefix_bytes)
    }

    /// Number of pairs in the `state` database.
    pub fn len(&self) -> Result<u64, StateError> {
        self.db
            .len(&self.txn)
            .map_err(|e| StateError::Storage(e.to_string()))
    }

    /// Whether the `state` database is empty.
    pub fn is_empty(&self) -> Result<bool, StateError> {
        Ok(self.len()? == 0)
    }
}
