//! The local content-addressed store that pulled components, manifests and
//! signatures live in, under the cache folder:
//!
//! ```text
//! oci/blobs/sha256/HEX                        content, named by its digest
//! oci/refs/REGISTRY/REPOSITORY/@tags/TAG      the manifest digest TAG last named
//! ```
//!
//! A blob is written to a temporary file beside its place and renamed there
//! only once its digest checks, so a blob that exists is whole and right
//! (readers of small blobs check again). A tag file is a hint for offline use;
//! what it names is still checked against its digest.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::RegistryError;
use crate::digest::Digest;
use crate::reference::ComponentRef;

/// The store's folder and what it holds.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The store in `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Where the store is.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blobs(&self) -> PathBuf {
        self.root.join("blobs").join("sha256")
    }

    /// Where the blob with `digest` is (whether or not it is there).
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.blobs().join(digest.hex())
    }

    /// True if the blob is stored.
    pub fn has_blob(&self, digest: &Digest) -> bool {
        self.blob_path(digest).is_file()
    }

    /// A small stored blob (a manifest, a signature payload), checked
    /// against its digest; `None` when it is not stored or does not check.
    pub fn read_small(&self, digest: &Digest, limit: u64) -> Option<Vec<u8>> {
        let path = self.blob_path(digest);
        let len = std::fs::metadata(&path).ok()?.len();
        if len > limit {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        (Digest::of(&bytes) == *digest).then_some(bytes)
    }

    /// Stores small bytes under their digest.
    pub fn write_small(&self, bytes: &[u8]) -> Result<Digest, RegistryError> {
        let digest = Digest::of(bytes);
        if self.read_small(&digest, bytes.len() as u64).is_some() {
            return Ok(digest);
        }
        let mut writer = self.blob_writer()?;
        writer.write(bytes)?;
        writer.finish(&digest)?;
        Ok(digest)
    }

    /// A writer for a blob that arrives in pieces.
    pub fn blob_writer(&self) -> Result<BlobWriter, RegistryError> {
        let dir = self.blobs();
        std::fs::create_dir_all(&dir).map_err(|reason| store_error(&dir, reason))?;
        let file = tempfile::Builder::new()
            .prefix(".partial-")
            .tempfile_in(&dir)
            .map_err(|reason| store_error(&dir, reason))?;
        Ok(BlobWriter {
            store: self.clone(),
            file,
            sha: Sha256::new(),
            written: 0,
        })
    }

    fn tag_path(&self, reference: &ComponentRef, tag: &str) -> PathBuf {
        // `@` is in no registry or repository name, so tags never collide
        // with a nested repository's folder.
        let mut path = self.root.join("refs").join(&reference.registry);
        for part in reference.repository.split('/') {
            path.push(part);
        }
        path.join("@tags").join(tag)
    }

    /// The manifest digest `tag` named when last pulled.
    pub fn tag(&self, reference: &ComponentRef, tag: &str) -> Option<Digest> {
        let text = std::fs::read_to_string(self.tag_path(reference, tag)).ok()?;
        text.trim().parse().ok()
    }

    /// Records what `tag` names now.
    pub fn set_tag(
        &self,
        reference: &ComponentRef,
        tag: &str,
        digest: &Digest,
    ) -> Result<(), RegistryError> {
        let path = self.tag_path(reference, tag);
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir).map_err(|reason| store_error(dir, reason))?;
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|r| store_error(dir, r))?;
        file.write_all(format!("{digest}\n").as_bytes())
            .map_err(|reason| store_error(&path, reason))?;
        file.persist(&path)
            .map_err(|e| store_error(&path, e.error))?;
        Ok(())
    }
}

/// A blob being written; dropped unfinished, it leaves nothing behind.
pub struct BlobWriter {
    store: Store,
    file: tempfile::NamedTempFile,
    sha: Sha256,
    written: u64,
}

impl BlobWriter {
    /// Appends a piece.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), RegistryError> {
        self.sha.update(bytes);
        self.written += bytes.len() as u64;
        self.file
            .write_all(bytes)
            .map_err(|reason| store_error(self.file.path(), reason))
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Checks the digest of what was written and moves it into place.
    pub fn finish(self, expected: &Digest) -> Result<PathBuf, RegistryError> {
        let actual = Digest::from_sha256(self.sha);
        if actual != *expected {
            return Err(RegistryError::WrongContent {
                what: "the blob written".into(),
                expected: *expected,
                actual,
            });
        }
        let path = self.store.blob_path(expected);
        self.file
            .as_file()
            .sync_all()
            .map_err(|reason| store_error(&path, reason))?;
        self.file
            .persist(&path)
            .map_err(|e| store_error(&path, e.error))?;
        Ok(path)
    }
}

fn store_error(path: &Path, reason: std::io::Error) -> RegistryError {
    RegistryError::Store {
        path: path.to_path_buf(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_stored_only_when_their_digest_checks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let digest = store.write_small(b"manifest").unwrap();
        assert_eq!(store.read_small(&digest, 100).unwrap(), b"manifest");
        assert!(store.read_small(&digest, 3).is_none(), "over the limit");

        let mut writer = store.blob_writer().unwrap();
        writer.write(b"not what was promised").unwrap();
        let promised = Digest::of(b"component");
        assert!(matches!(
            writer.finish(&promised),
            Err(RegistryError::WrongContent { .. })
        ));
        assert!(!store.has_blob(&promised));
        let leftovers = std::fs::read_dir(dir.path().join("blobs/sha256"))
            .unwrap()
            .count();
        assert_eq!(leftovers, 1, "only the manifest: no partial file is left");

        // A stored blob changed on disk no longer reads.
        std::fs::write(store.blob_path(&digest), b"tampered").unwrap();
        assert!(store.read_small(&digest, 100).is_none());
    }

    #[test]
    fn tags_are_kept_apart_from_nested_repositories() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let outer: ComponentRef = "oci://r:5000/a:b".parse().unwrap();
        let inner: ComponentRef = "oci://r:5000/a/b:c".parse().unwrap();
        let (one, two) = (Digest::of(b"1"), Digest::of(b"2"));
        store.set_tag(&outer, "b", &one).unwrap();
        store.set_tag(&inner, "c", &two).unwrap();
        assert_eq!(store.tag(&outer, "b"), Some(one));
        assert_eq!(store.tag(&inner, "c"), Some(two));
        assert_eq!(store.tag(&outer, "c"), None);
    }
}
