//! Snapshots: the file format, building one from the `state` database, and installing one.
//!
//! A snapshot file is the whole `state` database at one applied log id:
//!
//! ```text
//! magic "NVXSNAP1" (8 bytes)
//! header length (u32 BE) | header (postcard SnapshotHeader: format, last log id, membership)
//! repeated: tag 1 (u8) | key length (u32 BE) | key | value length (u32 BE) | value
//! tag 0 (u8) | record count (u64 BE) | CRC-32 of every byte before it (u32 BE)
//! ```
//!
//! Why this is correct:
//! - *Consistency.* A build reads the applied log id, the membership and every key/value in one
//!   LMDB read transaction, so the file is exactly the state at that log id, while applies go on.
//! - *Atomic install.* Installing clears and refills `state`, sets the applied log id and
//!   membership, and records the new current snapshot, all in one write transaction; the file
//!   is validated (lengths bounded, count and CRC checked, header equal to openraft's meta)
//!   while streaming, and any failure aborts the transaction, leaving the old state intact.
//! - *Durable files.* A file is fsynced and renamed to its final name (directory fsynced) before
//!   the transaction that points at it commits; a crash in between leaves an orphan file that
//!   [`super::Store::open`] removes. The previous snapshot file is deleted only after the commit.
//! - *No regression.* Builds and installs hold one mutex from reading the state to recording the
//!   result, so a build can never record an older snapshot over a newer installed one.

use std::fs;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use openraft::{BasicNode, LogId, SnapshotMeta, StoredMembership};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use super::{
    decode, encode, fsync_dir, Store, StoreError, META_APPLIED, META_MEMBERSHIP, META_SNAPSHOT,
    META_SNAPSHOT_SEQ,
};
use crate::config::MAX_STATE_VALUE_BYTES;
use crate::state::MAX_STATE_KEY_BYTES;
use crate::NodeId;

const SNAPSHOT_MAGIC: [u8; 8] = *b"NVXSNAP1";
const SNAPSHOT_FORMAT_VERSION: u32 = 1;
/// Largest header (log id + membership) a snapshot file may declare.
const MAX_SNAPSHOT_HEADER_BYTES: u32 = 1024 * 1024;
const TAG_RECORD: u8 = 1;
const TAG_END: u8 = 0;
/// Buffer size for reading and writing snapshot files.
const SNAPSHOT_IO_BUFFER_BYTES: usize = 256 * 1024;

/// The data of a snapshot: a file in the data directory's `snapshots/` folder, readable,
/// writable and seekable as openraft's chunked transfer needs.
#[derive(Debug)]
pub struct SnapshotFile {
    file: tokio::fs::File,
    path: PathBuf,
}

impl SnapshotFile {
    /// Where the file lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) async fn open(path: PathBuf) -> io::Result<SnapshotFile> {
        let file = tokio::fs::File::open(&path).await?;
        Ok(SnapshotFile { file, path })
    }

    pub(crate) async fn create(path: PathBuf) -> io::Result<SnapshotFile> {
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await?;
        Ok(SnapshotFile { file, path })
    }

    /// Flushes and fsyncs what was written, and gives the path back.
    pub(crate) async fn finish(mut self) -> io::Result<PathBuf> {
        use tokio::io::AsyncWriteExt;
        self.file.flush().await?;
        self.file.sync_all().await?;
        Ok(self.path)
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_read(cx, buf)
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().file).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_shutdown(cx)
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(self: Pin<&mut Self>, position: io::SeekFrom) -> io::Result<()> {
        Pin::new(&mut self.get_mut().file).start_seek(position)
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Pin::new(&mut self.get_mut().file).poll_complete(cx)
    }
}

/// The `meta` record of the current snapshot: openraft's meta and the file holding the data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SnapshotRecord {
    pub(crate) meta: SnapshotMeta<NodeId, BasicNode>,
    pub(crate) file_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SnapshotHeader {
    format_version: u32,
    last_log_id: Option<LogId<NodeId>>,
    last_membership: StoredMembership<NodeId, BasicNode>,
}

/// Writes through to `inner` and keeps a CRC-32 of everything written.
struct CrcWriter<W> {
    inner: W,
    hasher: crc32fast::Hasher,
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads from `inner` and keeps a CRC-32 of everything read.
struct CrcReader<R> {
    inner: R,
    hasher: crc32fast::Hasher,
}

impl<R: Read> Read for CrcReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

fn corrupt(reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt(format!("snapshot file: {}", reason.into()))
}

fn read_u8(r: &mut impl Read) -> Result<u8, StoreError> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

fn read_u32(r: &mut impl Read) -> Result<u32, StoreError> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u64(r: &mut impl Read) -> Result<u64, StoreError> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

fn read_bounded(r: &mut impl Read, max: usize, what: &str) -> Result<Vec<u8>, StoreError> {
    let len = read_u32(r)? as usize;
    if len > max {
        return Err(corrupt(format!(
            "{what} of {len} bytes exceeds {max} bytes"
        )));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    Ok(buf)
}

/// Streams `header` and `pairs` into a new file at `path`, fsynced. Answers the record count.
fn write_snapshot_file<'a>(
    path: &Path,
    header: &SnapshotHeader,
    pairs: impl Iterator<Item = Result<(&'a [u8], &'a [u8]), heed::Error>>,
) -> Result<u64, StoreError> {
    let file = fs::File::create(path)?;
    let mut w = CrcWriter {
        inner: BufWriter::with_capacity(SNAPSHOT_IO_BUFFER_BYTES, file),
        hasher: crc32fast::Hasher::new(),
    };
    w.write_all(&SNAPSHOT_MAGIC)?;
    let header_bytes = encode("snapshot header", header)?;
    w.write_all(&(header_bytes.len() as u32).to_be_bytes())?;
    w.write_all(&header_bytes)?;
    let mut count = 0u64;
    for pair in pairs {
        let (key, value) = pair?;
        // The state database only ever holds keys and values within these bounds (StateTxn
        // checks them), so the u32 length prefixes cannot overflow.
        debug_assert!(key.len() <= MAX_STATE_KEY_BYTES && value.len() <= MAX_STATE_VALUE_BYTES);
        w.write_all(&[TAG_RECORD])?;
        w.write_all(&(key.len() as u32).to_be_bytes())?;
        w.write_all(key)?;
        w.write_all(&(value.len() as u32).to_be_bytes())?;
        w.write_all(value)?;
        count += 1;
    }
    w.write_all(&[TAG_END])?;
    w.write_all(&count.to_be_bytes())?;
    let crc = w.hasher.clone().finalize();
    let mut inner = w.inner;
    inner.write_all(&crc.to_be_bytes())?;
    let file = inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(count)
}

/// Reads and validates a snapshot file, handing each pair to `visit`. Answers the header.
fn read_snapshot_file(
    path: &Path,
    mut visit: impl FnMut(&[u8], &[u8]) -> Result<(), StoreError>,
) -> Result<SnapshotHeader, StoreError> {
    let file = fs::File::open(path)?;
    let mut r = CrcReader {
        inner: BufReader::with_capacity(SNAPSHOT_IO_BUFFER_BYTES, file),
        hasher: crc32fast::Hasher::new(),
    };
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)?;
    if magic != SNAPSHOT_MAGIC {
        return Err(corrupt("bad magic"));
    }
    let header_bytes = read_bounded(&mut r, MAX_SNAPSHOT_HEADER_BYTES as usize, "header")?;
    let header: SnapshotHeader = decode("snapshot header", &header_bytes)?;
    if header.format_version != SNAPSHOT_FORMAT_VERSION {
        return Err(corrupt(format!(
            "format version {} (expected {SNAPSHOT_FORMAT_VERSION})",
            header.format_version
        )));
    }
    let mut count = 0u64;
    loop {
        match read_u8(&mut r)? {
            TAG_RECORD => {
                let key = read_bounded(&mut r, MAX_STATE_KEY_BYTES, "key")?;
                if key.is_empty() {
                    return Err(corrupt("empty key"));
                }
                let value = read_bounded(&mut r, MAX_STATE_VALUE_BYTES, "value")?;
                visit(&key, &value)?;
                count += 1;
            }
            TAG_END => break,
            tag => return Err(corrupt(format!("unknown record tag {tag}"))),
        }
    }
    let declared = read_u64(&mut r)?;
    if declared != count {
        return Err(corrupt(format!(
            "declares {declared} records, holds {count}"
        )));
    }
    let computed = r.hasher.clone().finalize();
    let mut inner = r.inner;
    let mut crc = [0u8; 4];
    inner.read_exact(&mut crc)?;
    if u32::from_be_bytes(crc) != computed {
        return Err(corrupt("CRC mismatch"));
    }
    let mut rest = [0u8; 1];
    if inner.read(&mut rest)? != 0 {
        return Err(corrupt("trailing bytes after the CRC"));
    }
    Ok(header)
}

fn snapshot_file_name(seq: u64) -> String {
    format!("snap-{seq:020}.bin")
}

/// Points `meta`'s current-snapshot record at `tmp` (renamed to its final name) within `wtxn`,
/// commits, and deletes the previous snapshot file. Caller holds the snapshot mutex.
fn commit_snapshot(
    store: &Store,
    mut wtxn: heed::RwTxn<'_>,
    tmp: &Path,
    meta: SnapshotMeta<NodeId, BasicNode>,
) -> Result<PathBuf, StoreError> {
    let seq = store
        .get_meta::<u64>(&wtxn, META_SNAPSHOT_SEQ)?
        .unwrap_or(0)
        + 1;
    let previous: Option<SnapshotRecord> = store.get_meta(&wtxn, META_SNAPSHOT)?;
    let file_name = snapshot_file_name(seq);
    let final_path = store.snapshot_dir().join(&file_name);
    fs::rename(tmp, &final_path)?;
    fsync_dir(&store.snapshot_dir())?;
    store.put_meta(&mut wtxn, META_SNAPSHOT_SEQ, &seq)?;
    store.put_meta(
        &mut wtxn,
        META_SNAPSHOT,
        &SnapshotRecord { meta, file_name },
    )?;
    wtxn.commit()?;
    if let Some(previous) = previous {
        let old = store.snapshot_dir().join(previous.file_name);
        if let Err(e) = fs::remove_file(&old) {
            // Harmless: the next open removes it as an orphan.
            tracing::warn!(file = ?old, error = %e, "cannot remove the previous snapshot file");
        }
    }
    Ok(final_path)
}

/// Builds a snapshot of the applied state and records it as current. Blocking: run it off the
/// runtime thread.
pub(crate) fn build_snapshot(
    store: &Store,
    lock: &Mutex<()>,
) -> Result<(SnapshotMeta<NodeId, BasicNode>, PathBuf), StoreError> {
    let _guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let rtxn = store.env.read_txn()?;
    let last_log_id = store
        .get_meta::<Option<LogId<NodeId>>>(&rtxn, META_APPLIED)?
        .flatten();
    let last_membership: StoredMembership<NodeId, BasicNode> =
        store.get_meta(&rtxn, META_MEMBERSHIP)?.unwrap_or_default();
    let seq = store
        .get_meta::<u64>(&rtxn, META_SNAPSHOT_SEQ)?
        .unwrap_or(0)
        + 1;
    let tmp = store.snapshot_dir().join(format!("build-{seq}.tmp"));
    let header = SnapshotHeader {
        format_version: SNAPSHOT_FORMAT_VERSION,
        last_log_id,
        last_membership: last_membership.clone(),
    };
    let count = write_snapshot_file(&tmp, &header, store.state.iter(&rtxn)?)?;
    drop(rtxn);

    let snapshot_id = match &last_log_id {
        Some(id) => format!("{}-{}-{seq}", id.leader_id, id.index),
        None => format!("none-{seq}"),
    };
    let meta = SnapshotMeta {
        last_log_id,
        last_membership,
        snapshot_id,
    };
    let wtxn = store.env.write_txn()?;
    let current: Option<SnapshotRecord> = store.get_meta(&wtxn, META_SNAPSHOT)?;
    if let Some(current) = current {
        assert!(
            current.meta.last_log_id <= meta.last_log_id,
            "snapshot regression: built {:?} while {:?} is current",
            meta.last_log_id,
            current.meta.last_log_id
        );
    }
    let path = commit_snapshot(store, wtxn, &tmp, meta.clone())?;
    tracing::info!(snapshot = %meta.snapshot_id, records = count, "built snapshot");
    Ok((meta, path))
}

/// Replaces the `state` database with the snapshot in `tmp`, sets the applied log id and
/// membership from `meta`, and records the snapshot as current, in one transaction. Blocking.
pub(crate) fn install_snapshot(
    store: &Store,
    lock: &Mutex<()>,
    meta: &SnapshotMeta<NodeId, BasicNode>,
    tmp: &Path,
) -> Result<(), StoreError> {
    let _guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut wtxn = store.env.write_txn()?;
    store.state.clear(&mut wtxn)?;
    let state = store.state;
    let header = read_snapshot_file(tmp, |key, value| {
        state.put(&mut wtxn, key, value)?;
        Ok(())
    })?;
    if header.last_log_id != meta.last_log_id || header.last_membership != meta.last_membership {
        return Err(corrupt(format!(
            "file holds state at {:?}, openraft installs {:?}",
            header.last_log_id, meta.last_log_id
        )));
    }
    store.put_meta(&mut wtxn, META_APPLIED, &meta.last_log_id)?;
    store.put_meta(&mut wtxn, META_MEMBERSHIP, &meta.last_membership)?;
    commit_snapshot(store, wtxn, tmp, meta.clone())?;
    tracing::info!(snapshot = %meta.snapshot_id, "installed snapshot");
    Ok(())
}

/// The current snapshot's record, if any.
pub(crate) fn current_snapshot(store: &Store) -> Result<Option<SnapshotRecord>, StoreError> {
    let rtxn = store.env.read_txn()?;
    store.get_meta(&rtxn, META_SNAPSHOT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trips_and_detects_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.bin");
        let header = SnapshotHeader {
            format_version: SNAPSHOT_FORMAT_VERSION,
            last_log_id: None,
            last_membership: StoredMembership::default(),
        };
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0u32..100)
            .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; i as usize]))
            .collect();
        let count = write_snapshot_file(
            &path,
            &header,
            pairs.iter().map(|(k, v)| Ok((k.as_slice(), v.as_slice()))),
        )
        .unwrap();
        assert_eq!(count, 100);
        let mut seen = Vec::new();
        let read = read_snapshot_file(&path, |k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(read, header);
        assert_eq!(seen, pairs);

        let mut bytes = fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        assert!(read_snapshot_file(&path, |_, _| Ok(())).is_err());

        bytes[middle] ^= 0xff;
        bytes.truncate(bytes.len() - 3);
        fs::write(&path, &bytes).unwrap();
        assert!(read_snapshot_file(&path, |_, _| Ok(())).is_err());
    }
}
