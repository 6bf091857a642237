//! On-disk cache of compiled components, keyed by the SHA-256 of the component
//! bytes and the engine's compatibility hash.
//!
//! Loading native code from disk is only as safe as the file: entries carry a
//! checksum, are written atomically with owner-only permissions, and anything
//! corrupt, foreign or too permissive is recompiled instead of trusted. The
//! folder itself must belong to the current user and be writable by nobody
//! else; otherwise it is not used at all (components compile in memory).

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a compiled component came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheOutcome {
    /// Loaded from the cache.
    Hit,
    /// Compiled now (and stored, when the cache is on).
    Compiled,
}

/// The compiled-component cache (`None` directory: always compile).
#[derive(Clone, Debug)]
pub struct CompileCache {
    dir: Option<PathBuf>,
}

const CHECKSUM_LEN: usize = 32;

impl CompileCache {
    /// A cache in `dir`, or none.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// The default folder: `$XDG_CACHE_HOME/wasm-agent` or `~/.cache/wasm-agent`.
    pub fn default_dir() -> Option<PathBuf> {
        std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|d| d.join("wasm-agent"))
    }

    /// The cache folder, when the cache is on.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Returns the compiled component for `bytes` (whose SHA-256 is
    /// `digest`), from the cache when a valid entry exists; a cache that
    /// cannot be written is skipped with a warning.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &[u8; 32],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, bytes)?, CacheOutcome::Compiled));
        };
        if let Err(reason) = create_private_dir(dir).and_then(|()| trusted_dir(dir)) {
            warn_untrusted(dir, &reason);
            return Ok((Component::new(engine, bytes)?, CacheOutcome::Compiled));
        }
        let entry = dir.join(format!("{}.cwasm", cache_key(engine, digest)));
        if let Some(component) = read_entry(engine, &entry) {
            return Ok((component, CacheOutcome::Hit));
        }
        let compiled = engine.precompile_component(bytes)?;
        // SAFETY: these bytes were produced just now by this engine.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        if let Err(e) = write_entry(&entry, &compiled) {
            tracing::warn!(cache = %dir.display(), "cannot write the compile cache: {e}");
        }
        Ok((component, CacheOutcome::Compiled))
    }
}

/// Feeds `Hash` output into SHA-256.
struct ShaHasher<'a>(&'a mut Sha256);

impl Hasher for ShaHasher<'_> {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

fn cache_key(engine: &Engine, digest: &[u8; 32]) -> String {
    let mut sha = Sha256::new();
    sha.update(digest);
    engine
        .precompile_compatibility_hash()
        .hash(&mut ShaHasher(&mut sha));
    sha.update(env!("CARGO_PKG_VERSION").as_bytes());
    hex::encode(sha.finalize())
}

fn read_entry(engine: &Engine, entry: &Path) -> Option<Component> {
    let metadata = fs::symlink_metadata(entry).ok()?;
    if !metadata.is_file() || !owner_only(&metadata) {
        return None;
    }
    let data = fs::read(entry).ok()?;
    let (code, checksum) = data.split_at_checked(data.len().checked_sub(CHECKSUM_LEN)?)?;
    if Sha256::digest(code).as_slice() != checksum {
        tracing::warn!(entry = %entry.display(), "corrupt compile-cache entry; recompiling");
        return None;
    }
    Engine::detect_precompiled(code)?;
    // SAFETY: the entry was written by this program for this engine
    // configuration (key), is owner-only, and its checksum matches.
    match unsafe { Component::deserialize(engine, code) } {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::warn!(entry = %entry.display(), "unusable compile-cache entry ({e}); recompiling");
            None
        }
    }
}

fn write_entry(entry: &Path, compiled: &[u8]) -> std::io::Result<()> {
    let tmp = entry.with_extension(format!("tmp{}", std::process::id()));
    let mut file = private_file(&tmp)?;
    file.write_all(compiled)?;
    file.write_all(&Sha256::digest(compiled))?;
    file.sync_all()?;
    fs::rename(&tmp, entry)
}

/// Says once per folder why it is not used.
fn warn_untrusted(dir: &Path, reason: &std::io::Error) {
    static WARNED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut warned = WARNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !warned.iter().any(|d| d == dir) {
        warned.push(dir.to_path_buf());
        tracing::warn!(
            cache = %dir.display(),
            "not using the compile cache: {reason}; compiling in memory (fix the folder's owner \
             and mode, or pass --cache-dir / --no-cache)"
        );
    }
}

/// Owned by the current user and writable by nobody else.
#[cfg(unix)]
fn owner_only(metadata: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    metadata.uid() == unsafe { libc::geteuid() } && metadata.mode() & 0o022 == 0
}

#[cfg(not(unix))]
fn owner_only(_: &fs::Metadata) -> bool {
    true
}

/// Checks that the cache folder is a folder of the current user that no one
/// else can write to (so no one else can plant native code in it).
fn trusted_dir(dir: &Path) -> std::io::Result<()> {
    let metadata = fs::metadata(dir)?;
    if !metadata.is_dir() {
        return Err(std::io::Error::other("it is not a folder"));
    }
    if !owner_only(&metadata) {
        return Err(std::io::Error::other(
            "it is owned by another user or writable by group or others",
        ));
    }
    Ok(())
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<fs::File> {
    fs::File::create(path)
}
