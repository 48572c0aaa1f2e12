//! openraft's log storage (`RaftLogStorage` + `RaftLogReader`) over the `log`, `vote` and `meta`
//! databases.
//!
//! Why this is correct: openraft requires that an append is durable before its `LogFlushed`
//! callback fires, that a saved vote is durable before `save_vote` returns, and that truncate and
//! purge leave a gap-free log. Each operation here is one LMDB write transaction, committed
//! (fsynced) before the method returns or the callback fires, so all three hold; appends run on
//! the caller's task in call order, so durability order is call order. Purge removes the prefix
//! and records the new `last_purged` in the same transaction, so `get_log_state` never reports a
//! purged id beyond what is gone nor an entry that is not there.
//!
//! The committed log id is optional state for openraft (it only speeds up replay at restart, and
//! openraft takes the larger of it and the applied log id). Persisting it in a transaction of its
//! own would cost one more fsync per write, so `save_committed` keeps it in memory and the next
//! log transaction (append, truncate, purge or vote) writes it along. A stored value can thus lag
//! the true one, which is safe: anything at or below a committed id is committed.

use std::fmt::Debug;
use std::ops::RangeBounds;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    Entry, LogId, LogState, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote,
};

use super::{decode, encode, Store, StoreError, META_COMMITTED, META_LAST_PURGED, VOTE_KEY};
use crate::{NodeId, TypeConfig};

/// The log half of the store. Clones share the environment; openraft uses a clone as its
/// `LogReader` for replication.
#[derive(Clone)]
pub(crate) struct LogStore {
    store: Store,
    /// Committed log id reported by openraft and not yet written (see the module docs).
    pending_committed: Option<Option<LogId<NodeId>>>,
}

impl LogStore {
    pub(crate) fn new(store: Store) -> Self {
        LogStore {
            store,
            pending_committed: None,
        }
    }

    /// Starts a log write transaction, carrying any pending committed log id along.
    fn write_txn(&self) -> Result<heed::RwTxn<'_>, StoreError> {
        let mut wtxn = self.store.env.write_txn()?;
        if let Some(committed) = &self.pending_committed {
            self.store.put_meta(&mut wtxn, META_COMMITTED, committed)?;
        }
        Ok(wtxn)
    }

    /// Records that the pending committed log id is on disk (after a successful commit).
    fn committed_written(&mut self) {
        self.pending_committed = None;
    }

    fn read_range<RB: RangeBounds<u64>>(
        &self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StoreError> {
        let rtxn = self.store.env.read_txn()?;
        let mut entries = Vec::new();
        for item in self.store.log.range(&rtxn, &range)? {
            let (index, bytes) = item?;
            let entry: Entry<TypeConfig> = decode("log entry", bytes)?;
            if entry.log_id.index != index {
                return Err(StoreError::Corrupt(format!(
                    "log key {index} holds the entry of index {}",
                    entry.log_id.index
                )));
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    fn log_state(&self) -> Result<LogState<TypeConfig>, StoreError> {
        let rtxn = self.store.env.read_txn()?;
        let last_purged: Option<LogId<NodeId>> = self.store.get_meta(&rtxn, META_LAST_PURGED)?;
        let last_log_id = match self.store.log.last(&rtxn)? {
            Some((_, bytes)) => Some(decode::<Entry<TypeConfig>>("log entry", bytes)?.log_id),
            None => last_purged,
        };
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id,
        })
    }

    fn append_blocking(&mut self, entries: Vec<Entry<TypeConfig>>) -> Result<(), StoreError> {
        let mut wtxn = self.write_txn()?;
        for entry in &entries {
            let bytes = encode("log entry", entry)?;
            self.store.log.put(&mut wtxn, &entry.log_id.index, &bytes)?;
        }
        wtxn.commit()?;
        self.committed_written();
        Ok(())
    }

    fn truncate_blocking(&mut self, from_index: u64) -> Result<(), StoreError> {
        let mut wtxn = self.write_txn()?;
        self.store.log.delete_range(&mut wtxn, &(from_index..))?;
        wtxn.commit()?;
        self.committed_written();
        Ok(())
    }

    fn purge_blocking(&mut self, upto: LogId<NodeId>) -> Result<(), StoreError> {
        let mut wtxn = self.write_txn()?;
        self.store.put_meta(&mut wtxn, META_LAST_PURGED, &upto)?;
        self.store.log.delete_range(&mut wtxn, &(..=upto.index))?;
        wtxn.commit()?;
        self.committed_written();
        Ok(())
    }

    fn put_vote_meta<T: serde::Serialize>(
        &mut self,
        key: &str,
        value: &T,
    ) -> Result<(), StoreError> {
        let mut wtxn = self.write_txn()?;
        let bytes = encode(key, value)?;
        self.store.vote.put(&mut wtxn, key, &bytes)?;
        wtxn.commit()?;
        self.committed_written();
        Ok(())
    }

    fn read_vote_blocking(&self) -> Result<Option<Vote<NodeId>>, StoreError> {
        let rtxn = self.store.env.read_txn()?;
        match self.store.vote.get(&rtxn, VOTE_KEY)? {
            Some(bytes) => Ok(Some(decode("vote", bytes)?)),
            None => Ok(None),
        }
    }

    fn read_committed_blocking(&self) -> Result<Option<LogId<NodeId>>, StoreError> {
        if let Some(pending) = self.pending_committed {
            return Ok(pending);
        }
        let rtxn = self.store.env.read_txn()?;
        Ok(self
            .store
            .get_meta::<Option<LogId<NodeId>>>(&rtxn, META_COMMITTED)?
            .flatten())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        self.read_range(range)
            .map_err(|e| e.into_storage(StorageIOError::read_logs))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        self.log_state()
            .map_err(|e| e.into_storage(StorageIOError::read_logs))
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.put_vote_meta(VOTE_KEY, vote)
            .map_err(|e| e.into_storage(StorageIOError::write_vote))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        self.read_vote_blocking()
            .map_err(|e| e.into_storage(StorageIOError::read_vote))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        // Written by the next log transaction; see the module docs.
        self.pending_committed = Some(committed);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        self.read_committed_blocking()
            .map_err(|e| e.into_storage(StorageIOError::read))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        match self.append_blocking(entries) {
            Ok(()) => {
                // Committed, hence fsynced: only now may openraft count these entries as flushed.
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(e.into_storage(StorageIOError::write_logs))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.truncate_blocking(log_id.index)
            .map_err(|e| e.into_storage(StorageIOError::write_logs))
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.purge_blocking(log_id)
            .map_err(|e| e.into_storage(StorageIOError::write_logs))
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;
    use crate::Command;

    fn entry(term: u64, index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(Command(index.to_be_bytes().to_vec())),
        }
    }

    #[test]
    fn append_truncate_purge_keep_the_log_contiguous() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1, 16 * 1024 * 1024).unwrap();
        let mut log = LogStore::new(store);
        log.append_blocking((1..=10).map(|i| entry(1, i)).collect())
            .unwrap();
        let state = log.log_state().unwrap();
        assert_eq!(state.last_log_id.unwrap().index, 10);
        assert_eq!(state.last_purged_log_id, None);

        log.truncate_blocking(8).unwrap();
        assert_eq!(log.log_state().unwrap().last_log_id.unwrap().index, 7);

        log.purge_blocking(entry(1, 3).log_id).unwrap();
        let state = log.log_state().unwrap();
        assert_eq!(state.last_purged_log_id.unwrap().index, 3);
        let entries = log.read_range(0..100).unwrap();
        let indexes: Vec<u64> = entries.iter().map(|e| e.log_id.index).collect();
        assert_eq!(indexes, vec![4, 5, 6, 7]);

        // Purging everything leaves last_log_id at the purged id.
        log.purge_blocking(entry(1, 7).log_id).unwrap();
        let state = log.log_state().unwrap();
        assert_eq!(state.last_log_id, state.last_purged_log_id);
    }

    #[test]
    fn vote_and_committed_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1, 16 * 1024 * 1024).unwrap();
        let mut log = LogStore::new(store);
        assert_eq!(log.read_vote_blocking().unwrap(), None);
        let vote = Vote::new(3, 1);
        log.put_vote_meta(VOTE_KEY, &vote).unwrap();
        assert_eq!(log.read_vote_blocking().unwrap(), Some(vote));
        assert_eq!(log.read_committed_blocking().unwrap(), None);
        let committed = Some(entry(2, 5).log_id);
        log.pending_committed = Some(committed);
        log.append_blocking(vec![entry(2, 1)]).unwrap();
        assert_eq!(log.pending_committed, None, "written along with the append");
        let reopened = LogStore::new(log.store.clone());
        assert_eq!(reopened.read_committed_blocking().unwrap(), committed);
    }
}
