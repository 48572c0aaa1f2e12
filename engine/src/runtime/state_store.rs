//! The node's runtime state that must survive a restart (DESIGN §6 "Runtime state"): the next
//! offsets of KAFKA TOPIC ingestors under OFFSET BY DOMAIN, and stateful processors' branch
//! snapshots (deduplication keyspaces, windows, reorder buffers, correlators' pending rows), in
//! an LMDB environment (heed) under `<data-dir>/runtime-state`.
//!
//! Shards do not wait for the disk (a stopping domain excepted, below): they hand snapshots to
//! one writer thread through a bounded queue ([`RuntimeState::save_kafka_offsets`] never
//! blocks and says whether the snapshot was taken, so the caller keeps it dirty and offers it
//! again), and the writer commits them in
//! queue order, each whole: the snapshots that queued while its last commit synced go in one
//! LMDB transaction (at most [`MAX_SNAPSHOTS_PER_COMMIT`]), so the sync is paid once per group
//! — at dense processor state the writer, not the shard, set the pace, one sync per pass
//! (perf/RESULTS.md, session 27). A group whose transaction fails is committed snapshot by
//! snapshot. Reads happen when a consumer starts (a memory-mapped lookup).
//! [`RuntimeState::close`] waits for the queue to drain, so a graceful stop persists the last
//! snapshot. A stopping domain's last state goes through the same queue and its shard waits
//! for it ([`RuntimeState::write_processor_state_in_order`]): it commits after every snapshot
//! offered before it, so no older state of a branch lands over it. Its last Kafka offsets wait
//! for room in the queue rather than being dropped
//! ([`RuntimeState::save_kafka_offsets_waiting`]). A crash loses at most the snapshots not yet
//! written — the spec's "slightly stale persisted offset snapshot", from which at-least-once
//! delivery replays.
//!
//! Keys are `kafka/<domain>/<ingestor>/` followed by the partition number as 4 big-endian
//! bytes; values the next offset as 8 big-endian bytes. A snapshot writes the partitions it
//! names and leaves the others alone (several instances of one ingestor share its key, each
//! with its own partitions).
//!
//! Processor snapshots live in their own database under `proc/<domain>/<processor>/` followed
//! by the branch's part (`graph::snapshot` lays it out); a value is the branch's encoded state,
//! and an empty value deletes the entry (the branch holds nothing). A batch of them is written
//! in one transaction and may carry a ticket: the writer sends it back on the shard's channel
//! marked durable once the transaction committed — when the shard may acknowledge the rows the
//! snapshot covers — or marked failed, so the shard writes those states again.
//!
//! Every key fits LMDB's [`MAX_STORED_KEY_BYTES`]: a longer one fails its put and the whole
//! transaction with it (every branch of that snapshot). Prefixes longer than
//! [`MAX_PLAIN_PREFIX_BYTES`] are stored under a digest of the names, and a branch part that
//! would not fit is stored under a digest too (`graph::snapshot`).
//!
//! [`backup`] copies the whole store into one file (an LMDB compacted copy, consistent while a
//! node runs) and [`restore`] installs such a file into a stopped node's data directory: the
//! deduplication keyspaces come back with every key's first sighting, so archived duplicates
//! are suppressed and keys expire MAX TIME after their archived first sighting (spec
//! "Deduplicator"); windows, reorder buffers, pending correlator rows and OFFSET BY DOMAIN
//! offsets come back too.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvOpenOptions, RwTxn, WithoutTls};
use sha2::Digest;

/// Snapshots waiting for the writer at most; a full queue makes the sender try again later.
pub const STATE_QUEUE_SNAPSHOTS: usize = 256;
/// Snapshots the writer commits in one transaction at most: those that queued while its last
/// commit synced, so a slow sync is paid once per group rather than once per snapshot.
pub const MAX_SNAPSHOTS_PER_COMMIT: usize = 64;
/// The LMDB map size by default (`nervix serve --state-map-bytes`): the most runtime state
/// the store holds. Offsets are a few bytes per partition; processor snapshots are bounded by
/// their processors' state caps. A commit that would outgrow it fails (counted in
/// `nervix_snapshot_failed_total`, logged) and its rows wait, unacknowledged, for a rewrite
/// that fits.
pub const DEFAULT_STATE_MAP_BYTES: usize = 4 << 30;
/// The smallest map size accepted.
pub const MIN_STATE_MAP_BYTES: usize = 1 << 20;
/// The directory under the data dir.
const STATE_DIR: &str = "runtime-state";

/// Why runtime state could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum StateStoreError {
    #[error("runtime state in {dir}: {source}")]
    Lmdb {
        dir: PathBuf,
        #[source]
        source: heed::Error,
    },
    #[error("no runtime state in {dir} (has a node run with this data directory?)")]
    Missing { dir: PathBuf },
    #[error(
        "runtime state in {dir}: the writer could not commit the snapshot (its error is logged)"
    )]
    NotWritten { dir: PathBuf },
    #[error("runtime state in {dir}: {source}")]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A ticket the writer hands back once a processor snapshot committed or failed to.
pub type Ticket = (async_channel::Sender<TicketOutcome>, u64);

/// What became of a ticketed processor snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketOutcome {
    pub ticket: u64,
    /// Committed; false when the writer could not commit it (its error is logged).
    pub durable: bool,
}

/// One processor branch entry: full key and encoded state (empty: delete).
pub type ProcessorEntry = (Vec<u8>, Vec<u8>);

/// What the writer commits.
enum Snapshot {
    /// One ingestor's next offsets, by partition.
    Offsets(String, Vec<(i32, i64)>),
    /// Processor branch entries, in one transaction.
    Processors(Vec<ProcessorEntry>, Option<Ticket>),
}

/// The node's runtime-state store; cheap to share (`Arc`).
pub struct RuntimeState {
    env: Env<WithoutTls>,
    offsets: Database<'static, Bytes, Bytes>,
    processors: Database<'static, Bytes, Bytes>,
    dir: PathBuf,
    queue: async_channel::Sender<Snapshot>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for RuntimeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeState")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The longest key LMDB stores (its compile-time `MDB_MAXKEYSIZE`, which heed's build keeps
/// at the default): a put of a longer key fails, and with it the whole transaction.
pub const MAX_STORED_KEY_BYTES: usize = 511;
/// The longest per-processor or per-ingestor key prefix stored as written; a longer one (very
/// long domain and node names) is stored under its digest, so the prefix never takes more
/// than this share of [`MAX_STORED_KEY_BYTES`] and a key stays storable.
pub const MAX_PLAIN_PREFIX_BYTES: usize = 256;

/// The key prefix of one processor's branch snapshots.
pub fn processor_key(domain: &str, processor: &str) -> String {
    bounded_prefix("proc", domain, processor)
}

/// `<kind>/<domain>/<node>/`, or `<kind>/#<hex SHA-256 of domain/node>/` when that is longer
/// than [`MAX_PLAIN_PREFIX_BYTES`]. Names are identifiers, which hold neither `/` nor `#`, so
/// neither form is the other's prefix and distinct names never share one.
fn bounded_prefix(kind: &str, domain: &str, node: &str) -> String {
    let plain = format!("{kind}/{domain}/{node}/");
    if plain.len() <= MAX_PLAIN_PREFIX_BYTES {
        return plain;
    }
    let digest = sha2::Sha256::digest(format!("{domain}/{node}").as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{kind}/#{hex}/")
}

/// The environment in `dir` (an existing directory) with its two databases.
#[allow(clippy::type_complexity)]
fn open_env(
    dir: &Path,
    map_bytes: usize,
) -> Result<
    (
        Env<WithoutTls>,
        Database<'static, Bytes, Bytes>,
        Database<'static, Bytes, Bytes>,
    ),
    StateStoreError,
> {
    let lmdb = |source| StateStoreError::Lmdb {
        dir: dir.to_path_buf(),
        source,
    };
    let mut options = EnvOpenOptions::new().read_txn_without_tls();
    options.map_size(map_bytes).max_dbs(2);
    // SAFETY: heed marks opening unsafe because the memory map is undefined behaviour if the
    // file is modified other than through LMDB. This directory belongs to this store alone
    // (one environment per process; LMDB's lock file coordinates processes), no unsafe flags
    // are set, and the data directory is documented as local storage.
    #[allow(unsafe_code)]
    let env = unsafe { options.open(dir) }.map_err(lmdb)?;
    let wtxn = env.write_txn().map_err(lmdb)?;
    let (offsets, processors) = env
        .create_databases_and_commit(wtxn, |opener, wtxn| -> Result<_, heed::Error> {
            let offsets = opener.create_database::<Bytes, Bytes>(wtxn, Some("kafka_offsets"))?;
            let processors =
                opener.create_database::<Bytes, Bytes>(wtxn, Some("processor_state"))?;
            Ok(CommitOrAbort::<_, ()>::Commit((offsets, processors)))
        })
        .map_err(lmdb)?
        .unwrap_commit();
    Ok((env, offsets, processors))
}

/// What a backup holds: Kafka partitions with a stored next offset, and processor branch
/// snapshots (deduplication keyspaces with every key's first sighting, windows, reorder
/// buffers, pending correlator rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupSummary {
    pub kafka_partitions: u64,
    pub processor_branches: u64,
}

/// Counts what the environment in `dir` holds; returns it open for further use.
fn summarize(dir: &Path) -> Result<(BackupSummary, Env<WithoutTls>), StateStoreError> {
    // LMDB grows a smaller map to the size of the file it opens.
    let (env, offsets, processors) = open_env(dir, MIN_STATE_MAP_BYTES)?;
    let lmdb = |source| StateStoreError::Lmdb {
        dir: dir.to_path_buf(),
        source,
    };
    let rtxn = env.read_txn().map_err(lmdb)?;
    let summary = BackupSummary {
        kafka_partitions: offsets.len(&rtxn).map_err(lmdb)?,
        processor_branches: processors.len(&rtxn).map_err(lmdb)?,
    };
    drop(rtxn);
    Ok((summary, env))
}

/// Writes the runtime state of the node in `data_dir` to the file `to` (which must not exist):
/// one compacted LMDB copy, taken in one read transaction, so it is consistent even while the
/// node runs (up to its last committed snapshot).
pub fn backup(data_dir: &Path, to: &Path) -> Result<BackupSummary, StateStoreError> {
    let dir = data_dir.join(STATE_DIR);
    if !dir.join("data.mdb").is_file() {
        return Err(StateStoreError::Missing { dir });
    }
    let (summary, env) = summarize(&dir)?;
    env.copy_to_path(to, heed::CompactionOption::Enabled)
        .map_err(|source| StateStoreError::Lmdb {
            dir: to.to_path_buf(),
            source,
        })?;
    Ok(summary)
}

/// Makes the backup file `from` the runtime state of `data_dir`, replacing what it held. The
/// node must be stopped: a running node keeps its own state open and would overwrite it. The
/// file is checked (opened as a runtime state, counted) in a staging directory first, so a
/// bad file leaves the current state untouched.
pub fn restore(data_dir: &Path, from: &Path) -> Result<BackupSummary, StateStoreError> {
    let io = |dir: &Path| {
        let dir = dir.to_path_buf();
        move |source| StateStoreError::Io { dir, source }
    };
    let dir = data_dir.join(STATE_DIR);
    let staging = data_dir.join(format!("{STATE_DIR}.restoring"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    std::fs::copy(from, staging.join("data.mdb")).map_err(io(from))?;
    // The staging environment is closed (dropped) before its directory moves.
    let summary = match summarize(&staging) {
        Ok((summary, env)) => {
            drop(env);
            summary
        }
        Err(error) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(error);
        }
    };
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
    }
    std::fs::rename(&staging, &dir).map_err(io(&dir))?;
    Ok(summary)
}

/// The key prefix of one ingestor's offsets.
pub fn kafka_key(domain: &str, ingestor: &str) -> String {
    bounded_prefix("kafka", domain, ingestor)
}

impl RuntimeState {
    /// Opens (creating) the store under `data_dir`, holding at most `map_bytes`
    /// ([`DEFAULT_STATE_MAP_BYTES`]), and starts its writer thread.
    pub fn open(data_dir: &Path, map_bytes: usize) -> Result<Arc<RuntimeState>, StateStoreError> {
        let dir = data_dir.join(STATE_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| StateStoreError::Io {
            dir: dir.clone(),
            source,
        })?;
        let (env, offsets, processors) = open_env(&dir, map_bytes.max(MIN_STATE_MAP_BYTES))?;
        let (queue, snapshots) = async_channel::bounded::<Snapshot>(STATE_QUEUE_SNAPSHOTS);
        let writer_env = env.clone();
        let writer = std::thread::Builder::new()
            .name("nervix-state".to_string())
            .spawn(move || {
                let mut group = Vec::with_capacity(MAX_SNAPSHOTS_PER_COMMIT);
                while let Ok(first) = snapshots.recv_blocking() {
                    group.push(first);
                    while group.len() < MAX_SNAPSHOTS_PER_COMMIT {
                        let Ok(next) = snapshots.try_recv() else {
                            break;
                        };
                        group.push(next);
                    }
                    commit_group(&writer_env, offsets, processors, &mut group);
                }
            })
            .map_err(|source| StateStoreError::Io {
                dir: dir.clone(),
                source,
            })?;
        Ok(Arc::new(RuntimeState {
            env,
            offsets,
            processors,
            dir,
            queue,
            writer: Mutex::new(Some(writer)),
        }))
    }

    /// The stored next offsets of an ingestor (empty when none were stored).
    pub fn kafka_offsets(&self, key: &str) -> Result<Vec<(i32, i64)>, StateStoreError> {
        let lmdb = |source| StateStoreError::Lmdb {
            dir: self.dir.clone(),
            source,
        };
        let rtxn = self.env.read_txn().map_err(lmdb)?;
        let mut found = Vec::new();
        for entry in self
            .offsets
            .prefix_iter(&rtxn, key.as_bytes())
            .map_err(lmdb)?
        {
            let (stored_key, value) = entry.map_err(lmdb)?;
            let partition = stored_key
                .get(key.len()..)
                .and_then(|bytes| <[u8; 4]>::try_from(bytes).ok())
                .map(i32::from_be_bytes);
            let offset = <[u8; 8]>::try_from(value).ok().map(i64::from_be_bytes);
            if let (Some(partition), Some(offset)) = (partition, offset) {
                found.push((partition, offset));
            }
        }
        Ok(found)
    }

    /// Offers a snapshot of an ingestor's next offsets to the writer; false when its queue is
    /// full (keep the snapshot and offer it again).
    pub fn save_kafka_offsets(&self, key: &str, positions: Vec<(i32, i64)>) -> bool {
        self.queue
            .try_send(Snapshot::Offsets(key.to_string(), positions))
            .is_ok()
    }

    /// Offers processor branch entries to the writer; `ticket` comes back on its channel once
    /// they are durable. False when the queue is full (offer them again later).
    pub fn save_processor_state(
        &self,
        entries: Vec<ProcessorEntry>,
        ticket: Option<Ticket>,
    ) -> bool {
        self.queue
            .try_send(Snapshot::Processors(entries, ticket))
            .is_ok()
    }

    /// Offers an ingestor's next offsets and waits for room in the queue if it is full: a
    /// domain stopping must not drop its last offsets because the writer is behind (a restart
    /// would replay from older ones). Once the writer has stopped they are written on the
    /// caller's thread.
    pub fn save_kafka_offsets_waiting(
        &self,
        key: &str,
        positions: Vec<(i32, i64)>,
    ) -> Result<(), StateStoreError> {
        self.offer_waiting(Snapshot::Offsets(key.to_string(), positions))
    }

    /// Writes processor branch entries and waits until they are durable (a domain stopping
    /// acknowledges what its state covers only then). They go through the writer's queue
    /// like every snapshot, so they commit after the snapshots offered before them: written
    /// beside the queue, an older snapshot still queued would commit after them and put a
    /// branch's earlier state (or a deletion) back over its last one. Blocks the caller while
    /// the writer works through what is queued ahead. Once the writer has stopped (the node is
    /// shutting down and the queue is drained), the entries are written on the caller's thread.
    pub fn write_processor_state_in_order(
        &self,
        entries: Vec<ProcessorEntry>,
    ) -> Result<(), StateStoreError> {
        // The writer hands the ticket back marked durable or failed (it logged why); written
        // on this thread, the entries are durable when the offer returns. The channel, not the
        // ticket number, says which write this is.
        let (done, outcome) = async_channel::bounded(1);
        self.offer_waiting(Snapshot::Processors(entries, Some((done, 0))))?;
        match outcome.recv_blocking() {
            Ok(TicketOutcome { durable: true, .. }) => Ok(()),
            _ => Err(StateStoreError::NotWritten {
                dir: self.dir.clone(),
            }),
        }
    }

    /// Puts `snapshot` in the writer's queue, waiting for room; once the writer has stopped
    /// (the queue is closed and drained), commits it on the caller's thread instead.
    fn offer_waiting(&self, snapshot: Snapshot) -> Result<(), StateStoreError> {
        let Err(async_channel::SendError(snapshot)) = self.queue.send_blocking(snapshot) else {
            return Ok(());
        };
        write_snapshots(
            &self.env,
            self.offsets,
            self.processors,
            std::slice::from_ref(&snapshot),
        )
        .map_err(|source| StateStoreError::Lmdb {
            dir: self.dir.clone(),
            source,
        })?;
        // Written here: hand back its ticket as the writer would.
        if let Snapshot::Processors(_, Some(ticket)) = snapshot {
            hand_back(ticket, true);
        }
        Ok(())
    }

    /// The most bytes the store holds (its memory map).
    pub fn map_bytes(&self) -> usize {
        self.env.info().map_size
    }

    /// Every stored branch entry under `prefix`: (the key after the prefix, the state).
    pub fn processor_state(&self, prefix: &str) -> Result<Vec<ProcessorEntry>, StateStoreError> {
        let lmdb = |source| StateStoreError::Lmdb {
            dir: self.dir.clone(),
            source,
        };
        let rtxn = self.env.read_txn().map_err(lmdb)?;
        let mut found = Vec::new();
        for entry in self
            .processors
            .prefix_iter(&rtxn, prefix.as_bytes())
            .map_err(lmdb)?
        {
            let (key, value) = entry.map_err(lmdb)?;
            found.push((key[prefix.len()..].to_vec(), value.to_vec()));
        }
        Ok(found)
    }

    /// Waits until every offered snapshot is written, then stops the writer (a graceful stop).
    pub fn close(&self) {
        self.queue.close();
        let writer = self.writer.lock().ok().and_then(|mut writer| writer.take());
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        if let Err(error) = self.env.force_sync() {
            tracing::warn!(
                "cannot sync runtime state in {}: {error}",
                self.dir.display()
            );
        }
    }
}

/// Commits the snapshots of `group` (drained) in one transaction, then hands back the
/// processor snapshots' tickets. When that transaction fails, each snapshot is committed on
/// its own, so one that cannot be written does not hold back the others; a processor
/// snapshot that fails hands its ticket back marked failed (its rows stay unacknowledged and
/// the shard writes its states again).
fn commit_group(
    env: &Env<WithoutTls>,
    offsets: Database<'static, Bytes, Bytes>,
    processors: Database<'static, Bytes, Bytes>,
    group: &mut Vec<Snapshot>,
) {
    let together = group.len() > 1 && write_snapshots(env, offsets, processors, group).is_ok();
    for snapshot in group.drain(..) {
        let written = if together {
            Ok(())
        } else {
            write_snapshots(env, offsets, processors, std::slice::from_ref(&snapshot))
        };
        match (written, snapshot) {
            (Ok(()), Snapshot::Processors(_, Some(ticket))) => hand_back(ticket, true),
            (Ok(()), _) => {}
            (Err(error), Snapshot::Offsets(prefix, _)) => {
                tracing::error!("cannot persist runtime state {prefix}: {error}")
            }
            (Err(error), Snapshot::Processors(entries, ticket)) => {
                tracing::error!(
                    "cannot persist processor state ({} entries): {error}",
                    entries.len()
                );
                if let Some(ticket) = ticket {
                    hand_back(ticket, false);
                }
            }
        }
    }
}

/// Sends `ticket` back to its shard, marked `durable` or failed. The channel holds a slot for
/// every ticket the shard has in flight, so the send does not find it full.
fn hand_back((done, ticket): Ticket, durable: bool) {
    let _ = done.try_send(TicketOutcome { ticket, durable });
}

/// Writes `snapshots` in order in one transaction.
fn write_snapshots(
    env: &Env<WithoutTls>,
    offsets: Database<'static, Bytes, Bytes>,
    processors: Database<'static, Bytes, Bytes>,
    snapshots: &[Snapshot],
) -> Result<(), heed::Error> {
    let mut wtxn = env.write_txn()?;
    for snapshot in snapshots {
        match snapshot {
            Snapshot::Offsets(prefix, positions) => {
                put_offsets(&mut wtxn, offsets, prefix, positions)?
            }
            Snapshot::Processors(entries, _) => put_entries(&mut wtxn, processors, entries)?,
        }
    }
    wtxn.commit()
}

/// Puts `positions` under `prefix`.
fn put_offsets(
    wtxn: &mut RwTxn,
    db: Database<'static, Bytes, Bytes>,
    prefix: &str,
    positions: &[(i32, i64)],
) -> Result<(), heed::Error> {
    let mut key = Vec::with_capacity(prefix.len() + 4);
    for &(partition, offset) in positions {
        key.clear();
        key.extend_from_slice(prefix.as_bytes());
        key.extend_from_slice(&partition.to_be_bytes());
        db.put(wtxn, &key, &offset.to_be_bytes())?;
    }
    Ok(())
}

/// Puts (or, for an empty value, deletes) processor entries.
fn put_entries(
    wtxn: &mut RwTxn,
    db: Database<'static, Bytes, Bytes>,
    entries: &[ProcessorEntry],
) -> Result<(), heed::Error> {
    for (key, value) in entries {
        if value.is_empty() {
            db.delete(wtxn, key)?;
        } else {
            db.put(wtxn, key, value)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty directory for one test's store, named after the test and this process.
    fn scratch_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// Snapshots in flight in the group-commit test: more than one commit group holds.
    const MAX_PENDING: usize = MAX_SNAPSHOTS_PER_COMMIT * 2 + 2;

    #[test]
    fn offsets_survive_a_reopen_and_snapshots_update_their_partitions() {
        let dir = scratch_dir("nervix-state");
        let key = kafka_key("shop", "orders_in");
        let other = kafka_key("shop", "orders_in2");
        {
            let state = RuntimeState::open(&dir, DEFAULT_STATE_MAP_BYTES).expect("open");
            assert!(state.save_kafka_offsets(&key, vec![(0, 10), (1, 20), (2, 30)]));
            assert!(state.save_kafka_offsets(&other, vec![(0, 99)]));
            assert!(state.save_kafka_offsets(&key, vec![(0, 11), (1, 21)]));
            state.close();
        }
        let state = RuntimeState::open(&dir, DEFAULT_STATE_MAP_BYTES).expect("reopen");
        assert_eq!(
            state.kafka_offsets(&key).expect("read"),
            vec![(0, 11), (1, 21), (2, 30)]
        );
        assert_eq!(state.kafka_offsets(&other).expect("read"), vec![(0, 99)]);
        state.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn queued_processor_snapshots_commit_in_order_and_every_ticket_comes_back() {
        let dir = scratch_dir("nervix-state-group");
        let state = RuntimeState::open(&dir, DEFAULT_STATE_MAP_BYTES).expect("open");
        let (done_tx, done_rx) = async_channel::bounded(MAX_PENDING);
        // Offered back to back, most queue while the writer syncs an earlier commit and are
        // committed together; the store must end as the snapshots applied one by one would
        // leave it (later puts win, a deletion in between counts).
        let mut expected = std::collections::BTreeMap::new();
        for ticket in 0..MAX_PENDING as u64 {
            let value = ticket.to_be_bytes().to_vec();
            let entries: Vec<ProcessorEntry> = match ticket % 3 {
                0 => vec![
                    (b"p/kept".to_vec(), value.clone()),
                    (b"p/gone".to_vec(), value),
                ],
                1 => vec![(b"p/gone".to_vec(), Vec::new())],
                _ => vec![
                    (b"p/kept".to_vec(), value.clone()),
                    (b"p/back".to_vec(), value),
                ],
            };
            for (key, value) in &entries {
                let key = key[b"p/".len()..].to_vec();
                if value.is_empty() {
                    expected.remove(&key);
                } else {
                    expected.insert(key, value.clone());
                }
            }
            assert!(state.save_processor_state(entries, Some((done_tx.clone(), ticket))));
        }
        let mut tickets: Vec<u64> = (0..MAX_PENDING)
            .map(|_| {
                let outcome = done_rx.recv_blocking().expect("a ticket");
                assert!(outcome.durable);
                outcome.ticket
            })
            .collect();
        tickets.sort_unstable();
        assert_eq!(tickets, (0..MAX_PENDING as u64).collect::<Vec<_>>());
        let stored = state.processor_state("p/").expect("read");
        assert_eq!(stored, expected.into_iter().collect::<Vec<_>>());
        state.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stopping_domains_state_commits_after_every_snapshot_queued_before_it() {
        let dir = scratch_dir("nervix-state-stop");
        let state = RuntimeState::open(&dir, DEFAULT_STATE_MAP_BYTES).expect("open");
        let (done_tx, done_rx) = async_channel::bounded(MAX_PENDING);
        // A writer busy with large snapshots, then a periodic snapshot of the branch's older
        // state still queued when the domain stops and writes its last state.
        let queued = MAX_PENDING as u64 - 1;
        for ticket in 0..queued {
            let large = vec![(
                format!("p/other{ticket}").into_bytes(),
                vec![7u8; 256 << 10],
            )];
            assert!(state.save_processor_state(large, Some((done_tx.clone(), ticket))));
        }
        let older = vec![(b"p/window".to_vec(), b"older".to_vec())];
        assert!(state.save_processor_state(older, Some((done_tx.clone(), queued))));
        let last = vec![(b"p/window".to_vec(), b"last".to_vec())];
        state
            .write_processor_state_in_order(last)
            .expect("the stop's state is written");
        // Everything offered before it is durable by then: every ticket is back already.
        for _ in 0..=queued {
            done_rx
                .try_recv()
                .expect("a ticket back before the stop's write returned");
        }
        let stored = state.processor_state("p/window").expect("read");
        assert_eq!(stored, vec![(Vec::new(), b"last".to_vec())]);
        state.close();
        // With the writer stopped the state is written on the caller's thread.
        let after = vec![(b"p/window".to_vec(), b"after".to_vec())];
        state
            .write_processor_state_in_order(after)
            .expect("written without the writer");
        let stored = state.processor_state("p/window").expect("read");
        assert_eq!(stored, vec![(Vec::new(), b"after".to_vec())]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_snapshot_that_cannot_commit_comes_back_failed_without_holding_back_the_others() {
        let dir = scratch_dir("nervix-state-fail");
        let state = RuntimeState::open(&dir, DEFAULT_STATE_MAP_BYTES).expect("open");
        assert_eq!(
            state.env.max_key_size(),
            MAX_STORED_KEY_BYTES,
            "the key bound the snapshot layout relies on"
        );
        let (done_tx, done_rx) = async_channel::bounded(4);
        let too_long = vec![b'k'; MAX_STORED_KEY_BYTES + 1];
        // Queued together, so the writer tries them in one transaction first.
        let snapshots = [
            vec![(b"p/a".to_vec(), b"1".to_vec())],
            vec![(b"p/b".to_vec(), b"2".to_vec()), (too_long, b"3".to_vec())],
            vec![(b"p/c".to_vec(), b"4".to_vec())],
        ];
        for (ticket, entries) in snapshots.into_iter().enumerate() {
            assert!(state.save_processor_state(entries, Some((done_tx.clone(), ticket as u64))));
        }
        let mut outcomes: Vec<TicketOutcome> = (0..3)
            .map(|_| done_rx.recv_blocking().expect("every ticket comes back"))
            .collect();
        outcomes.sort_by_key(|outcome| outcome.ticket);
        let durable: Vec<bool> = outcomes.iter().map(|outcome| outcome.durable).collect();
        assert_eq!(durable, vec![true, false, true]);
        // The failed snapshot wrote none of its entries; the others are whole.
        let stored = state.processor_state("p/").expect("read");
        assert_eq!(
            stored,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"c".to_vec(), b"4".to_vec())
            ]
        );
        let refused = vec![(vec![b'k'; MAX_STORED_KEY_BYTES + 1], b"5".to_vec())];
        assert!(matches!(
            state.write_processor_state_in_order(refused),
            Err(StateStoreError::NotWritten { .. })
        ));
        state.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn long_names_get_a_bounded_prefix_of_their_own() {
        let short = processor_key("shop", "dedup");
        assert_eq!(short, "proc/shop/dedup/");
        let long_domain = "d".repeat(400);
        let first = processor_key(&long_domain, "window");
        let second = processor_key(&long_domain, "windows");
        assert!(first.len() <= MAX_PLAIN_PREFIX_BYTES && first.starts_with("proc/#"));
        assert_ne!(first, second);
        assert!(!second.starts_with(&first) && !first.starts_with(&second));
        assert_eq!(first, processor_key(&long_domain, "window"), "stable");
        let offsets = kafka_key(&long_domain, "orders_in");
        assert!(offsets.len() <= MAX_PLAIN_PREFIX_BYTES && offsets.starts_with("kafka/#"));
    }

    #[test]
    fn a_stops_offsets_are_kept_with_the_writer_running_or_stopped() {
        let dir = scratch_dir("nervix-state-offs");
        let key = kafka_key("shop", "orders_in");
        let state = RuntimeState::open(&dir, DEFAULT_STATE_MAP_BYTES).expect("open");
        state
            .save_kafka_offsets_waiting(&key, vec![(0, 5), (1, 6)])
            .expect("offered");
        state.close();
        // The writer committed what was queued before it stopped; now the caller writes.
        assert_eq!(
            state.kafka_offsets(&key).expect("read"),
            vec![(0, 5), (1, 6)]
        );
        state
            .save_kafka_offsets_waiting(&key, vec![(1, 7)])
            .expect("written without the writer");
        assert_eq!(
            state.kafka_offsets(&key).expect("read"),
            vec![(0, 5), (1, 7)]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn backup_needs_state_and_a_bad_restore_leaves_the_state_alone() {
        let dir = scratch_dir("nervix-state-br");
        std::fs::create_dir_all(&dir).expect("dir");
        let archive = dir.join("backup.mdb");
        assert!(matches!(
            backup(&dir, &archive),
            Err(StateStoreError::Missing { .. })
        ));
        let garbage = dir.join("garbage");
        std::fs::write(&garbage, b"not an LMDB file").expect("write");
        std::fs::create_dir_all(dir.join(STATE_DIR)).expect("state dir");
        std::fs::write(dir.join(STATE_DIR).join("marker"), b"kept").expect("marker");
        assert!(restore(&dir, &garbage).is_err());
        assert!(dir.join(STATE_DIR).join("marker").is_file());
        assert!(!dir.join(format!("{STATE_DIR}.restoring")).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
