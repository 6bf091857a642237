//! Which digest a component file had, remembered by the file's identity so
//! an unchanged file is loaded without being read or hashed.
//!
//! The identity is the device, inode, size, modification and status-change
//! times. Any write to a file sets its status-change time to the current time
//! (and no call can set it back), and replacing the file gives another inode
//! or time. The one way a change could keep the identity is a write within
//! the same clock tick as the times recorded, so an identity is only
//! remembered once its times are [`SETTLED`] in the past (as Git does for its
//! index): a later write then always shows a later time.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// How old a file's times must be before its identity is trusted; far more
/// than any file system's timestamp granularity.
const SETTLED: Duration = Duration::from_secs(2);

/// The folder of remembered identities, inside the cache folder.
const FOLDER: &str = "files";

/// The digest the file described by `metadata` had, if remembered.
pub fn known_digest(dir: &Path, metadata: &fs::Metadata) -> Option<[u8; 32]> {
    let path = dir.join(FOLDER).join(identity_key(metadata)?);
    let entry = fs::symlink_metadata(&path).ok()?;
    if !entry.is_file() || !super::owner_only(&entry) {
        return None;
    }
    fs::read(&path).ok()?.try_into().ok()
}

/// Remembers `digest` for a file read between the `before` and `after`
/// looks at it, if its identity held meanwhile and its times are settled;
/// does nothing otherwise.
pub fn remember_digest(
    dir: &Path,
    before: &fs::Metadata,
    after: &fs::Metadata,
    digest: &[u8; 32],
) -> std::io::Result<()> {
    let key = identity_key(after)
        .filter(|key| identity_key(before).as_ref() == Some(key) && settled(after));
    let Some(key) = key else {
        return Ok(());
    };
    let folder = dir.join(FOLDER);
    super::create_private_dir(&folder)?;
    let path = folder.join(key);
    let tmp = path.with_extension(super::unique_tmp_suffix());
    let mut file = super::private_file(&tmp)?;
    file.write_all(digest)?;
    fs::rename(&tmp, &path)
}

/// Records the identity of a cache entry just written, beside it.
pub fn record_written(entry: &Path) -> std::io::Result<()> {
    let metadata = fs::symlink_metadata(entry)?;
    let Some(key) = identity_key(&metadata) else {
        return Ok(());
    };
    let mut file = super::private_file(&written_identity(entry))?;
    file.write_all(key.as_bytes())
}

/// Whether a cache entry still has the identity recorded when it was
/// written: any write to it since would show in its status-change time.
pub fn unchanged_since_written(entry: &Path, metadata: &fs::Metadata) -> bool {
    match identity_key(metadata) {
        Some(key) => {
            fs::read(written_identity(entry)).is_ok_and(|recorded| recorded == key.as_bytes())
        }
        // No identity to compare on this platform.
        None => true,
    }
}

/// Where an entry's identity is recorded: its name and `.id`.
fn written_identity(entry: &Path) -> std::path::PathBuf {
    let mut name = entry.as_os_str().to_owned();
    name.push(".id");
    name.into()
}

/// Whether both of the file's times are older than [`SETTLED`].
fn settled(metadata: &fs::Metadata) -> bool {
    let Some((modified, changed)) = times(metadata) else {
        return false;
    };
    let now = SystemTime::now();
    [modified, changed]
        .iter()
        .all(|t| now.duration_since(*t).is_ok_and(|age| age > SETTLED))
}

#[cfg(unix)]
fn times(metadata: &fs::Metadata) -> Option<(SystemTime, SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let changed = SystemTime::UNIX_EPOCH.checked_add(Duration::new(
        u64::try_from(metadata.ctime()).ok()?,
        u32::try_from(metadata.ctime_nsec()).ok()?,
    ))?;
    Some((metadata.modified().ok()?, changed))
}

/// The name an identity is remembered under: a hash of its parts.
#[cfg(unix)]
fn identity_key(metadata: &fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if !metadata.is_file() {
        return None;
    }
    let mut sha = Sha256::new();
    sha.update(b"file-identity-1");
    for part in [
        metadata.dev(),
        metadata.ino(),
        metadata.size(),
        metadata.mtime() as u64,
        metadata.mtime_nsec() as u64,
        metadata.ctime() as u64,
        metadata.ctime_nsec() as u64,
    ] {
        sha.update(part.to_le_bytes());
    }
    Some(hex::encode(sha.finalize()))
}

/// Elsewhere there is no status-change time to rely on: never remember.
#[cfg(not(unix))]
fn identity_key(_: &fs::Metadata) -> Option<String> {
    None
}

#[cfg(not(unix))]
fn times(_: &fs::Metadata) -> Option<(SystemTime, SystemTime)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settled_file(dir: &Path, name: &str, contents: &[u8]) -> std::path::PathBuf {
        let path = dir.join(name);
        fs::write(&path, contents).unwrap();
        let old = SystemTime::now() - Duration::from_secs(60);
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        path
    }

    #[test]
    fn an_unchanged_file_is_known_and_a_rewritten_one_is_not() {
        let cache = tempfile::tempdir().unwrap();
        let files = tempfile::tempdir().unwrap();
        let path = settled_file(files.path(), "tool.wasm", b"one");
        let other = settled_file(files.path(), "other.wasm", b"one");
        let digest = [7u8; 32];
        // The status-change time is now: too fresh to remember.
        let fresh = fs::metadata(&path).unwrap();
        remember_digest(cache.path(), &fresh, &fresh, &digest).unwrap();
        assert_eq!(
            known_digest(cache.path(), &fs::metadata(&path).unwrap()),
            None
        );

        std::thread::sleep(SETTLED + Duration::from_millis(100));
        let metadata = fs::metadata(&path).unwrap();
        // A file replaced while it was read (another inode) is not remembered.
        let replaced = fs::metadata(&other).unwrap();
        remember_digest(cache.path(), &replaced, &metadata, &digest).unwrap();
        assert_eq!(known_digest(cache.path(), &metadata), None);
        remember_digest(cache.path(), &metadata, &metadata, &digest).unwrap();
        assert_eq!(known_digest(cache.path(), &metadata), Some(digest));

        // Same size, and the modification time put back: the change still shows.
        let modified = metadata.modified().unwrap();
        fs::write(&path, b"two").unwrap();
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        assert_eq!(
            known_digest(cache.path(), &fs::metadata(&path).unwrap()),
            None
        );
    }
}
