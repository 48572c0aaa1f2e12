//! Resource bundles as tar archives: packing a client's directory ([`pack_directory`]),
//! unpacking an uploaded archive safely ([`unpack_archive`]), and installing a new version
//! directory atomically ([`install_version`]).
//!
//! An upload is untrusted input written under the node's data directory, so unpacking admits
//! only what a resource can be — regular files and directories under relative paths — and
//! refuses, naming the entry, an absolute path, a `..` component, a symbolic or hard link, a
//! device, a FIFO, any other entry type, a name that is not UTF-8, and a name given twice (or a
//! file standing where a directory is needed). Files are created with `create_new` inside a
//! staging directory this module made itself and that holds nothing but what it wrote, so no
//! write can follow a link or land outside it. Sizes are bounded by the archive, which is
//! bounded by [`MAX_RESOURCE_UPLOAD_BYTES`] before it is read; counts by
//! [`MAX_RESOURCE_FILES`] and [`MAX_UPLOAD_ENTRIES`].
//!
//! A version appears only complete: [`install_version`] fills `<resource dir>/.staging-<n>-…`
//! and renames it to `<resource dir>/<n>` only when filling succeeded; on any failure the
//! staging directory is removed, so a failed upload leaves no version behind. File contents
//! are never logged or echoed: messages name entries only.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::execute::{MAX_RESOURCE_BYTES, MAX_RESOURCE_FILES};

/// The most bytes one uploaded archive may hold: the bulk budget of
/// `spec/capacity-planning.md` (32 MiB).
pub const MAX_RESOURCE_UPLOAD_BYTES: u64 = 32 << 20;

/// The most entries (files and directories) one uploaded archive may hold.
pub const MAX_UPLOAD_ENTRIES: usize = 4 * MAX_RESOURCE_FILES;

/// The longest entry path accepted, in bytes (Linux's PATH_MAX).
pub const MAX_ENTRY_PATH_BYTES: usize = 4096;

/// Where staging directories start their names; never a version number.
const STAGING_PREFIX: &str = ".staging-";

/// Tar's block size: headers and padded contents come in these.
const TAR_BLOCK: u64 = 512;

/// Distinguishes staging directories made by one process.
static STAGING_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Why a bundle could not be packed, unpacked or installed.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error(
        "an upload holds at most {MAX_RESOURCE_UPLOAD_BYTES} bytes of archive; this one has {0}"
    )]
    TooLarge(u64),
    #[error("a resource version holds at most {MAX_RESOURCE_FILES} files")]
    TooManyFiles,
    #[error("an upload archive holds at most {MAX_UPLOAD_ENTRIES} entries")]
    TooManyEntries,
    #[error("the archive holds no files")]
    Empty,
    #[error("entry '{entry}': {reason}")]
    Entry { entry: String, reason: String },
    #[error("the archive is not a valid tar archive: {0}")]
    Malformed(String),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl BundleError {
    fn entry(entry: &str, reason: impl Into<String>) -> BundleError {
        BundleError::Entry {
            entry: shown(entry),
            reason: reason.into(),
        }
    }

    fn io(path: &Path) -> impl FnOnce(io::Error) -> BundleError + '_ {
        move |source| BundleError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// An entry name fit for a one-line message: control characters shown as `?`, and cut short.
fn shown(name: &str) -> String {
    const MAX_SHOWN_CHARS: usize = 200;
    name.chars()
        .take(MAX_SHOWN_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The relative paths with sizes of a version's files, sorted by path.
pub type BundleFiles = Vec<(String, u64)>;

/// Packs the regular files under `dir` (recursively, relative `/`-separated paths, sorted) into
/// a tar archive. A symbolic link or any other non-regular entry is refused, and so is an
/// archive that would exceed [`MAX_RESOURCE_UPLOAD_BYTES`] or [`MAX_RESOURCE_FILES`] files —
/// before any file is read.
pub fn pack_directory(dir: &Path) -> Result<Vec<u8>, BundleError> {
    let files = walk_regular_files(dir)?;
    if files.is_empty() {
        return Err(BundleError::Empty);
    }
    let estimate: u64 = files
        .iter()
        .map(|(relative, size)| {
            let long_name = if relative.len() >= 100 {
                TAR_BLOCK + padded(relative.len() as u64 + 1)
            } else {
                0
            };
            long_name + TAR_BLOCK + padded(*size)
        })
        .sum::<u64>()
        + 2 * TAR_BLOCK;
    if estimate > MAX_RESOURCE_UPLOAD_BYTES {
        return Err(BundleError::TooLarge(estimate));
    }
    let mut builder = tar::Builder::new(Vec::new());
    for (relative, _) in &files {
        let path = dir.join(relative);
        let data = fs::read(&path).map_err(BundleError::io(&path))?;
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.set_size(data.len() as u64);
        header.set_mtime(0);
        builder
            .append_data(&mut header, relative, data.as_slice())
            .map_err(|e| BundleError::entry(relative, e.to_string()))?;
    }
    let archive = builder
        .into_inner()
        .map_err(|e| BundleError::Malformed(e.to_string()))?;
    if archive.len() as u64 > MAX_RESOURCE_UPLOAD_BYTES {
        return Err(BundleError::TooLarge(archive.len() as u64));
    }
    Ok(archive)
}

/// `size` rounded up to whole tar blocks.
fn padded(size: u64) -> u64 {
    size.div_ceil(TAR_BLOCK) * TAR_BLOCK
}

/// The regular files under `dir` with their sizes, relative and sorted; links and special
/// files are refused, naming them.
fn walk_regular_files(dir: &Path) -> Result<BundleFiles, BundleError> {
    let mut files = Vec::new();
    let mut entries = 0usize;
    let mut pending = vec![PathBuf::new()];
    while let Some(relative_dir) = pending.pop() {
        let full = dir.join(&relative_dir);
        for entry in fs::read_dir(&full).map_err(BundleError::io(&full))? {
            let entry = entry.map_err(BundleError::io(&full))?;
            entries += 1;
            if entries > MAX_UPLOAD_ENTRIES {
                return Err(BundleError::TooManyEntries);
            }
            let name = entry.file_name();
            let relative = relative_dir.join(&name);
            let shown_name = relative.to_string_lossy().into_owned();
            let Some(text) = relative.to_str() else {
                return Err(BundleError::entry(&shown_name, "the name is not UTF-8"));
            };
            let kind = entry.file_type().map_err(BundleError::io(&entry.path()))?;
            if kind.is_dir() {
                pending.push(relative);
            } else if kind.is_file() {
                if files.len() >= MAX_RESOURCE_FILES {
                    return Err(BundleError::TooManyFiles);
                }
                let size = entry
                    .metadata()
                    .map_err(BundleError::io(&entry.path()))?
                    .len();
                files.push((text.to_owned(), size));
            } else if kind.is_symlink() {
                return Err(BundleError::entry(
                    text,
                    "is a symbolic link: a resource holds regular files only",
                ));
            } else {
                return Err(BundleError::entry(
                    text,
                    "is not a regular file: a resource holds regular files only",
                ));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Unpacks `archive` into `dir` (an empty directory the caller made): regular files and
/// directories only, see the module docs. Returns the files with their sizes, sorted.
pub fn unpack_archive(archive: &[u8], dir: &Path) -> Result<BundleFiles, BundleError> {
    if archive.len() as u64 > MAX_RESOURCE_UPLOAD_BYTES {
        return Err(BundleError::TooLarge(archive.len() as u64));
    }
    let mut reader = tar::Archive::new(archive);
    let entries = reader
        .entries()
        .map_err(|e| BundleError::Malformed(e.to_string()))?;
    let mut files: BundleFiles = Vec::new();
    let mut file_names = BTreeSet::new();
    let mut dir_names = BTreeSet::new();
    let mut total: u64 = 0;
    for (index, entry) in entries.enumerate() {
        if index >= MAX_UPLOAD_ENTRIES {
            return Err(BundleError::TooManyEntries);
        }
        let mut entry = entry.map_err(|e| BundleError::Malformed(e.to_string()))?;
        let raw = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&raw).into_owned();
        let kind = entry.header().entry_type();
        if kind.is_pax_global_extensions() {
            // Metadata for the whole archive (`git archive` writes one); nothing to unpack.
            continue;
        }
        let relative = entry_path(&raw, &name)?;
        if kind.is_dir() {
            if file_names.contains(&relative) {
                return Err(BundleError::entry(&name, "is given twice"));
            }
            claim_ancestors(&relative, &name, &file_names, &mut dir_names)?;
            dir_names.insert(relative.clone());
            let path = dir.join(&relative);
            fs::create_dir_all(&path).map_err(BundleError::io(&path))?;
            continue;
        }
        if !kind.is_file() {
            return Err(BundleError::entry(&name, refused_kind(kind)));
        }
        if file_names.contains(&relative) || dir_names.contains(&relative) {
            return Err(BundleError::entry(&name, "is given twice"));
        }
        if files.len() >= MAX_RESOURCE_FILES {
            return Err(BundleError::TooManyFiles);
        }
        claim_ancestors(&relative, &name, &file_names, &mut dir_names)?;
        let path = dir.join(&relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(BundleError::io(parent))?;
        }
        let mut file = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(BundleError::io(&path))?;
        let size = io::copy(&mut (&mut entry).take(MAX_RESOURCE_BYTES), &mut file)
            .map_err(|e| BundleError::entry(&name, format!("cannot be read: {e}")))?;
        file.flush().map_err(BundleError::io(&path))?;
        total += size;
        if total > MAX_RESOURCE_BYTES {
            return Err(BundleError::TooLarge(total));
        }
        file_names.insert(relative.clone());
        files.push((relative, size));
    }
    if files.is_empty() {
        return Err(BundleError::Empty);
    }
    files.sort();
    Ok(files)
}

/// An entry's path as a clean relative `a/b/c`, or the refusal naming it.
fn entry_path(raw: &[u8], name: &str) -> Result<String, BundleError> {
    if raw.len() > MAX_ENTRY_PATH_BYTES {
        return Err(BundleError::entry(
            name,
            format!("the path is longer than {MAX_ENTRY_PATH_BYTES} bytes"),
        ));
    }
    let Ok(text) = std::str::from_utf8(raw) else {
        return Err(BundleError::entry(name, "the path is not UTF-8"));
    };
    if text.starts_with('/') {
        return Err(BundleError::entry(
            name,
            "is an absolute path: entries must be relative",
        ));
    }
    let mut parts = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(BundleError::entry(
                    name,
                    "holds '..': entries must stay inside the resource",
                ))
            }
            part if part.contains(['\0', '\\']) => {
                return Err(BundleError::entry(
                    name,
                    "holds a NUL or backslash in a name",
                ))
            }
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err(BundleError::entry(name, "has an empty path"));
    }
    Ok(parts.join("/"))
}

/// Records `relative`'s ancestors as directories; refuses when one of them is a file.
fn claim_ancestors(
    relative: &str,
    name: &str,
    file_names: &BTreeSet<String>,
    dir_names: &mut BTreeSet<String>,
) -> Result<(), BundleError> {
    let mut end = 0;
    while let Some(slash) = relative[end..].find('/') {
        let ancestor = &relative[..end + slash];
        if file_names.contains(ancestor) {
            return Err(BundleError::entry(
                name,
                format!("lies under '{ancestor}', which is a file"),
            ));
        }
        dir_names.insert(ancestor.to_owned());
        end += slash + 1;
    }
    Ok(())
}

/// Why an entry type is not admitted.
fn refused_kind(kind: tar::EntryType) -> String {
    match kind {
        tar::EntryType::Symlink => "is a symbolic link: a resource holds regular files only".into(),
        tar::EntryType::Link => "is a hard link: a resource holds regular files only".into(),
        tar::EntryType::Char | tar::EntryType::Block => {
            "is a device: a resource holds regular files only".into()
        }
        tar::EntryType::Fifo => "is a FIFO: a resource holds regular files only".into(),
        other => format!(
            "has tar entry type {:?}: a resource holds regular files only",
            other.as_byte() as char
        ),
    }
}

/// Makes `<resource_dir>/<number>` from what `fill` writes into a fresh staging directory next
/// to it, renaming only when `fill` succeeded; see the module docs. A leftover directory of the
/// same number (a version whose replication failed, or of a dropped resource) and leftover
/// staging directories are removed first: the caller holds the writer lock, and the catalog,
/// which lists no such version, is the truth. Returns what `fill` returned.
pub fn install_version<T, E: From<BundleError>>(
    resource_dir: &Path,
    number: u64,
    fill: impl FnOnce(&Path) -> Result<T, E>,
) -> Result<T, E> {
    fs::create_dir_all(resource_dir).map_err(BundleError::io(resource_dir))?;
    remove_leftovers(resource_dir)?;
    let target = resource_dir.join(number.to_string());
    if target.exists() {
        fs::remove_dir_all(&target).map_err(BundleError::io(&target))?;
    }
    let staging = Staging::create(resource_dir, number)?;
    let value = fill(&staging.path)?;
    staging.rename_to(&target)?;
    Ok(value)
}

/// Removes `.staging-*` directories an interrupted upload left behind.
fn remove_leftovers(resource_dir: &Path) -> Result<(), BundleError> {
    for entry in fs::read_dir(resource_dir).map_err(BundleError::io(resource_dir))? {
        let entry = entry.map_err(BundleError::io(resource_dir))?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(STAGING_PREFIX)
        {
            let path = entry.path();
            fs::remove_dir_all(&path).map_err(BundleError::io(&path))?;
        }
    }
    Ok(())
}

/// fsyncs every file and directory under `dir` (a bundle holds at most
/// [`MAX_RESOURCE_FILES`] files, so the walk is bounded).
fn sync_tree(dir: &Path) -> Result<(), BundleError> {
    for entry in fs::read_dir(dir).map_err(BundleError::io(dir))? {
        let path = entry.map_err(BundleError::io(dir))?.path();
        if path.is_dir() {
            sync_tree(&path)?;
        } else {
            fs::File::open(&path)
                .and_then(|file| file.sync_all())
                .map_err(BundleError::io(&path))?;
        }
    }
    sync_dir(dir)
}

/// fsyncs a directory, so the entries created or renamed in it survive a crash.
fn sync_dir(dir: &Path) -> Result<(), BundleError> {
    fs::File::open(dir)
        .and_then(|file| file.sync_all())
        .map_err(BundleError::io(dir))
}

/// A staging directory, removed on drop unless renamed into place.
struct Staging {
    path: PathBuf,
    installed: bool,
}

impl Staging {
    fn create(resource_dir: &Path, number: u64) -> Result<Staging, BundleError> {
        let unique = STAGING_COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = resource_dir.join(format!(
            "{STAGING_PREFIX}{number}-{}-{unique}",
            std::process::id()
        ));
        fs::create_dir(&path).map_err(BundleError::io(&path))?;
        Ok(Staging {
            path,
            installed: false,
        })
    }

    /// Makes the staged files durable, renames the directory into place and makes the rename
    /// durable: a crash leaves either no version or a complete one.
    fn rename_to(mut self, target: &Path) -> Result<(), BundleError> {
        sync_tree(&self.path)?;
        fs::rename(&self.path, target).map_err(BundleError::io(target))?;
        self.installed = true;
        if let Some(parent) = target.parent() {
            sync_dir(parent)?;
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.installed {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
#[path = "bundle_tests.rs"]
mod tests;
