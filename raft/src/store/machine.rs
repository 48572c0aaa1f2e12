//! openraft's state machine storage (`RaftStateMachine` + `RaftSnapshotBuilder`): applies
//! committed entries to the application's [`StateMachine`] inside LMDB write transactions, and
//! builds, installs and serves snapshots.
//!
//! Why this is correct: one apply batch is one write transaction holding the application's
//! writes, the batch's last log id and any membership it carried; it commits (fsync) before the
//! responses are returned to openraft, so a response is only ever sent for durable state and
//! a crash replays exactly the unapplied suffix. If LMDB fails mid-batch the transaction is
//! aborted, the in-memory state machine is reloaded from the (unchanged) database, and the error
//! goes to openraft, which stops the node: no replica continues from state it could not persist.
//! Snapshot work runs on blocking threads under one mutex (see `snapshot`), and the in-memory
//! state machine is reloaded from the database after every install.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use openraft::storage::RaftStateMachine;
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership,
};

use super::snapshot::{self, SnapshotFile};
use super::{Store, StoreError, META_APPLIED, META_MEMBERSHIP};
use crate::state::{StateMachine, StateReadTxn, StateTxn};
use crate::{NodeId, Response, TypeConfig};

/// The applied log id and the membership it established, as openraft asks for them.
type AppliedState = (Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>);

/// The state machine half of the store, shared with [`crate::RaftNode`] through `sm`.
pub(crate) struct StateMachineStore<SM: StateMachine> {
    store: Store,
    sm: Arc<RwLock<SM>>,
    snapshot_lock: Arc<Mutex<()>>,
    receive_seq: AtomicU64,
}

/// Builds snapshots off the runtime thread; openraft runs it concurrently with applies.
pub(crate) struct SnapshotBuilder {
    store: Store,
    snapshot_lock: Arc<Mutex<()>>,
}

fn write_lock<SM>(sm: &RwLock<SM>) -> std::sync::RwLockWriteGuard<'_, SM> {
    sm.write()
        .expect("state machine lock poisoned: an apply or load panicked")
}

/// Rebuilds `sm` from the `state` database.
pub(crate) fn load_state_machine<SM: StateMachine>(
    store: &Store,
    sm: &RwLock<SM>,
) -> Result<(), StoreError> {
    let rtxn = store.env.read_txn()?;
    let txn = StateReadTxn::new(rtxn, store.state);
    write_lock(sm).load(&txn).map_err(StoreError::StateMachine)
}

async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Join(e.to_string()))?
}

impl<SM: StateMachine> StateMachineStore<SM> {
    pub(crate) fn new(store: Store, sm: Arc<RwLock<SM>>) -> Self {
        StateMachineStore {
            store,
            sm,
            snapshot_lock: Arc::new(Mutex::new(())),
            receive_seq: AtomicU64::new(0),
        }
    }

    fn applied_state_blocking(&self) -> Result<AppliedState, StoreError> {
        let rtxn = self.store.env.read_txn()?;
        let applied = self
            .store
            .get_meta::<Option<LogId<NodeId>>>(&rtxn, META_APPLIED)?
            .flatten();
        let membership = self
            .store
            .get_meta(&rtxn, META_MEMBERSHIP)?
            .unwrap_or_default();
        Ok((applied, membership))
    }

    /// Applies a batch in one write transaction. Synchronous: no await while the transaction and
    /// the state machine lock are held.
    fn apply_batch(&self, entries: Vec<Entry<TypeConfig>>) -> Result<Vec<Response>, StoreError> {
        let Some(last) = entries.last().map(|e| e.log_id) else {
            return Ok(Vec::new());
        };
        let wtxn = self.store.env.write_txn()?;
        let mut txn = StateTxn::new(wtxn, self.store.state);
        let mut responses = Vec::with_capacity(entries.len());
        let mut membership = None;
        {
            let mut sm = write_lock(&self.sm);
            for entry in entries {
                match entry.payload {
                    EntryPayload::Blank => responses.push(Response::default()),
                    EntryPayload::Normal(command) => {
                        responses.push(Response(sm.apply(&mut txn, &command.0)));
                    }
                    EntryPayload::Membership(m) => {
                        membership = Some(StoredMembership::new(Some(entry.log_id), m));
                        responses.push(Response::default());
                    }
                }
            }
        }
        let (mut wtxn, poisoned) = txn.into_parts();
        let result = match poisoned {
            Some(message) => Err(StoreError::Corrupt(format!(
                "state database write failed during apply: {message}"
            ))),
            None => (|| {
                self.store.put_meta(&mut wtxn, META_APPLIED, &Some(last))?;
                if let Some(membership) = &membership {
                    self.store
                        .put_meta(&mut wtxn, META_MEMBERSHIP, membership)?;
                }
                wtxn.commit()?;
                Ok(())
            })(),
        };
        match result {
            Ok(()) => Ok(responses),
            Err(e) => {
                // The transaction is gone (aborted on drop); bring the in-memory state back to
                // what is on disk before reporting, so reads through `with_state` stay truthful.
                if let Err(reload) = load_state_machine(&self.store, &self.sm) {
                    tracing::error!(error = %reload, "cannot reload the state machine after a failed apply");
                }
                Err(e)
            }
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let store = self.store.clone();
        let lock = self.snapshot_lock.clone();
        let (meta, path) = run_blocking(move || snapshot::build_snapshot(&store, &lock))
            .await
            .map_err(|e| e.into_storage(|e| StorageIOError::write_snapshot(None, e)))?;
        let file = SnapshotFile::open(path).await.map_err(|e| {
            StoreError::from(e)
                .into_storage(|e| StorageIOError::read_snapshot(Some(meta.signature()), e))
        })?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(file),
        })
    }
}

impl<SM: StateMachine> RaftStateMachine<TypeConfig> for StateMachineStore<SM> {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<AppliedState, StorageError<NodeId>> {
        self.applied_state_blocking()
            .map_err(|e| e.into_storage(StorageIOError::read_state_machine))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        let last = entries.last().map(|e| e.log_id);
        self.apply_batch(entries).map_err(|e| match last {
            Some(last) => e.into_storage(|e| StorageIOError::apply(last, e)),
            None => e.into_storage(StorageIOError::write_state_machine),
        })
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            store: self.store.clone(),
            snapshot_lock: self.snapshot_lock.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<SnapshotFile>, StorageError<NodeId>> {
        let seq = self.receive_seq.fetch_add(1, Ordering::Relaxed);
        let path = self.store.snapshot_dir().join(format!("recv-{seq}.tmp"));
        let file = SnapshotFile::create(path).await.map_err(|e| {
            StoreError::from(e).into_storage(|e| StorageIOError::write_snapshot(None, e))
        })?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StorageError<NodeId>> {
        let signature = meta.signature();
        let to_storage = |e: StoreError| {
            e.into_storage(|e| StorageIOError::write_snapshot(Some(signature.clone()), e))
        };
        let tmp = snapshot.finish().await.map_err(|e| to_storage(e.into()))?;
        let store = self.store.clone();
        let lock = self.snapshot_lock.clone();
        let sm = self.sm.clone();
        let meta = meta.clone();
        run_blocking(move || {
            let result = snapshot::install_snapshot(&store, &lock, &meta, &tmp);
            if result.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            result?;
            load_state_machine(&store, &sm)
        })
        .await
        .map_err(to_storage)
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let record = snapshot::current_snapshot(&self.store)
            .map_err(|e| e.into_storage(|e| StorageIOError::read_snapshot(None, e)))?;
        let Some(record) = record else {
            return Ok(None);
        };
        let path = self.store.snapshot_dir().join(&record.file_name);
        let file = SnapshotFile::open(path).await.map_err(|e| {
            StoreError::from(e)
                .into_storage(|e| StorageIOError::read_snapshot(Some(record.meta.signature()), e))
        })?;
        Ok(Some(Snapshot {
            meta: record.meta,
            snapshot: Box::new(file),
        }))
    }
}
