//! The raft crate's on-disk state: one heed (LMDB) environment under the data directory, plus a
//! `snapshots/` folder for snapshot files.
//!
//! Databases of the environment:
//!
//! | name    | key                    | value (postcard)                                   |
//! |---------|------------------------|----------------------------------------------------|
//! | `log`   | log index, u64 BE      | `Entry<TypeConfig>`                                |
//! | `vote`  | `"vote"`               | `Vote<NodeId>`                                     |
//! | `meta`  | see the `META_*` names | format version, node id, committed, last purged, last applied, membership, current snapshot, snapshot sequence |
//! | `state` | application bytes      | application bytes (written only through `StateTxn`) |
//!
//! Why this is correct: every mutation is one LMDB write transaction committed with LMDB's
//! default durable commit (fsync of data and meta pages; no `NO_SYNC`-style flags are set), so
//! each is atomic and survives a crash once `commit` returned. Big-endian index keys make LMDB's
//! byte order the log order, so "last entry" is the last key and range deletes are range scans.
//! The log store and the state machine store share the environment but touch disjoint keys,
//! except that both read `meta`, which LMDB's MVCC keeps consistent per transaction.

mod log;
mod machine;
mod snapshot;

use std::fs;
use std::path::{Path, PathBuf};

use heed::byteorder::BigEndian;
use heed::types::{Bytes, Str, U64};
use heed::{CommitOrAbort, Database, Env, EnvOpenOptions, RoTxn, RwTxn, WithoutTls};
use openraft::{StorageError, StorageIOError};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::RaftError;
use crate::state::{StateDb, MAX_STATE_KEY_BYTES};
use crate::NodeId;

pub(crate) use log::LogStore;
pub(crate) use machine::{load_state_machine, StateMachineStore};
pub use snapshot::SnapshotFile;

/// Version of the layout above; a directory written by another version is refused.
const FORMAT_VERSION: u32 = 1;
/// Number of named databases in the environment.
const DATABASE_COUNT: u32 = 4;
/// Folder of snapshot files, inside the data directory.
const SNAPSHOT_DIR: &str = "snapshots";

const META_FORMAT_VERSION: &str = "format_version";
const META_NODE_ID: &str = "node_id";
const META_COMMITTED: &str = "committed";
const META_LAST_PURGED: &str = "last_purged";
const META_APPLIED: &str = "applied";
const META_MEMBERSHIP: &str = "membership";
const META_SNAPSHOT: &str = "snapshot";
const META_SNAPSHOT_SEQ: &str = "snapshot_seq";
const VOTE_KEY: &str = "vote";

/// Failure inside the store; converted to openraft's `StorageError` or to [`RaftError`] at the
/// boundary.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("LMDB: {0}")]
    Lmdb(#[from] heed::Error),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot decode {what}: {source}")]
    Decode {
        what: String,
        source: postcard::Error,
    },
    #[error("cannot encode {what}: {source}")]
    Encode {
        what: String,
        source: postcard::Error,
    },
    #[error("corrupt: {0}")]
    Corrupt(String),
    #[error("state machine: {0}")]
    StateMachine(String),
    #[error("blocking task failed: {0}")]
    Join(String),
}

impl StoreError {
    /// Converts to openraft's error, classified by `kind` (which operation failed).
    pub(crate) fn into_storage(
        self,
        kind: impl FnOnce(openraft::AnyError) -> StorageIOError<NodeId>,
    ) -> StorageError<NodeId> {
        StorageError::from(kind(openraft::AnyError::new(&self)))
    }

    /// Converts to the public error, naming the directory and what was being done.
    pub(crate) fn into_raft(self, dir: &Path, context: &str) -> RaftError {
        match self {
            StoreError::Lmdb(source) => RaftError::storage(context, source),
            StoreError::Io(source) => RaftError::io(context, source),
            StoreError::StateMachine(reason) => RaftError::StateMachineLoad {
                dir: dir.to_path_buf(),
                reason,
            },
            other => RaftError::Corrupt {
                dir: dir.to_path_buf(),
                reason: format!("{context}: {other}"),
            },
        }
    }
}

pub(crate) fn encode<T: Serialize>(what: &str, value: &T) -> Result<Vec<u8>, StoreError> {
    postcard::to_allocvec(value).map_err(|source| StoreError::Encode {
        what: what.to_string(),
        source,
    })
}

pub(crate) fn decode<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, StoreError> {
    postcard::from_bytes(bytes).map_err(|source| StoreError::Decode {
        what: what.to_string(),
        source,
    })
}

/// Handles on the environment and its databases; cheap to clone (the environment is shared).
#[derive(Clone)]
pub(crate) struct Store {
    pub(crate) env: Env<WithoutTls>,
    pub(crate) log: Database<'static, U64<BigEndian>, Bytes>,
    pub(crate) vote: Database<'static, Str, Bytes>,
    pub(crate) meta: Database<'static, Str, Bytes>,
    pub(crate) state: StateDb,
    pub(crate) dir: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the environment in `dir`, checks the format version and that
    /// the directory belongs to `node_id`, and removes snapshot files no record points at.
    pub(crate) fn open(dir: &Path, node_id: NodeId, map_size: usize) -> Result<Store, RaftError> {
        let snapshot_dir = dir.join(SNAPSHOT_DIR);
        fs::create_dir_all(&snapshot_dir)
            .map_err(|e| RaftError::io(format!("creating {}", snapshot_dir.display()), e))?;
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options.map_size(map_size).max_dbs(DATABASE_COUNT);
        // SAFETY: heed marks opening unsafe because the memory map is undefined behaviour if the
        // file is modified other than through LMDB. This directory is owned by the raft crate:
        // only this environment writes it (heed refuses a second open in-process, LMDB's lock
        // file coordinates processes), no unsafe flags (NO_LOCK, NO_SYNC, WRITE_MAP) are set, and
        // the data directory is documented as local storage, not a network file system.
        #[allow(unsafe_code)]
        let env = unsafe { options.open(dir) }.map_err(|e| match e {
            heed::Error::EnvAlreadyOpened => RaftError::AlreadyOpen {
                dir: dir.to_path_buf(),
            },
            e => RaftError::storage(format!("opening LMDB environment {}", dir.display()), e),
        })?;
        assert!(
            env.max_key_size() >= MAX_STATE_KEY_BYTES,
            "LMDB was built with a maximum key size below {MAX_STATE_KEY_BYTES} bytes"
        );
        let wtxn = env
            .write_txn()
            .map_err(|e| RaftError::storage("starting the database-creation transaction", e))?;
        let (log, vote, meta, state) = env
            .create_databases_and_commit(wtxn, |opener, wtxn| -> Result<_, heed::Error> {
                let log = opener.create_database::<U64<BigEndian>, Bytes>(wtxn, Some("log"))?;
                let vote = opener.create_database::<Str, Bytes>(wtxn, Some("vote"))?;
                let meta = opener.create_database::<Str, Bytes>(wtxn, Some("meta"))?;
                let state = opener.create_database::<Bytes, Bytes>(wtxn, Some("state"))?;
                Ok(CommitOrAbort::<_, ()>::Commit((log, vote, meta, state)))
            })
            .map_err(|e| RaftError::storage("creating the raft databases", e))?
            .unwrap_commit();
        let store = Store {
            env,
            log,
            vote,
            meta,
            state,
            dir: dir.to_path_buf(),
        };
        store.check_identity(node_id).map_err(|e| match e {
            Identity::Mismatch(stored) => RaftError::NodeIdMismatch {
                dir: dir.to_path_buf(),
                stored,
                configured: node_id,
            },
            Identity::Store(e) => e.into_raft(dir, "checking the format version and node id"),
        })?;
        store
            .remove_orphan_snapshots()
            .map_err(|e| e.into_raft(dir, "removing orphan snapshot files"))?;
        Ok(store)
    }

    fn check_identity(&self, node_id: NodeId) -> Result<(), Identity> {
        let mut wtxn = self.env.write_txn().map_err(StoreError::from)?;
        match self.get_meta::<u32>(&wtxn, META_FORMAT_VERSION)? {
            Some(FORMAT_VERSION) => {}
            Some(other) => {
                return Err(Identity::Store(StoreError::Corrupt(format!(
                    "format version {other}, this build reads version {FORMAT_VERSION}"
                ))))
            }
            None => self.put_meta(&mut wtxn, META_FORMAT_VERSION, &FORMAT_VERSION)?,
        }
        match self.get_meta::<NodeId>(&wtxn, META_NODE_ID)? {
            Some(stored) if stored == node_id => {}
            Some(stored) => return Err(Identity::Mismatch(stored)),
            None => self.put_meta(&mut wtxn, META_NODE_ID, &node_id)?,
        }
        wtxn.commit().map_err(StoreError::from)?;
        Ok(())
    }

    pub(crate) fn snapshot_dir(&self) -> PathBuf {
        self.dir.join(SNAPSHOT_DIR)
    }

    pub(crate) fn get_meta<T: DeserializeOwned>(
        &self,
        txn: &RoTxn,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        match self.meta.get(txn, key)? {
            Some(bytes) => Ok(Some(decode(key, bytes)?)),
            None => Ok(None),
        }
    }

    pub(crate) fn put_meta<T: Serialize>(
        &self,
        txn: &mut RwTxn,
        key: &str,
        value: &T,
    ) -> Result<(), StoreError> {
        let bytes = encode(key, value)?;
        self.meta.put(txn, key, &bytes)?;
        Ok(())
    }

    /// Deletes every file of `snapshots/` except the current snapshot's: leftovers of builds or
    /// transfers interrupted by a crash. Runs at open, before anything else uses the folder.
    fn remove_orphan_snapshots(&self) -> Result<(), StoreError> {
        let rtxn = self.env.read_txn()?;
        let current: Option<snapshot::SnapshotRecord> = self.get_meta(&rtxn, META_SNAPSHOT)?;
        drop(rtxn);
        let keep = current.map(|record| record.file_name);
        for entry in fs::read_dir(self.snapshot_dir())? {
            let entry = entry?;
            let name = entry.file_name();
            if keep.as_deref() != name.to_str() {
                tracing::info!(file = ?entry.path(), "removing orphan snapshot file");
                fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }
}

enum Identity {
    Mismatch(NodeId),
    Store(StoreError),
}

impl From<StoreError> for Identity {
    fn from(e: StoreError) -> Self {
        Identity::Store(e)
    }
}

/// Makes a rename or file creation in `dir` durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), std::io::Error> {
    fs::File::open(dir)?.sync_all()
}
