//! On-disk cache of compiled components, keyed by the SHA-256 of the component
//! bytes and the engine's compatibility hash.
//!
//! Loading native code from disk is only as safe as the file: entries are
//! written atomically with owner-only permissions and read back and compared
//! before they are published, so their integrity is checked once, when
//! written; a load then maps the entry into memory (no copy, no hashing),
//! unless the entry's identity shows it was changed after it was written.
//! Anything foreign or too permissive is recompiled instead of trusted. The
//! folder itself must belong to the current user and be writable by nobody
//! else; otherwise it is not used at all (components compile in memory).
//!
//! So that loading an unchanged component file needs neither reading nor
//! hashing it, the cache also remembers which digest a file had, keyed by
//! what changes whenever its contents do (see [`files`]).

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

mod files;

use super::compile::compile;

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
    /// Held while one component compiles: compiles take turns, each with
    /// every core (wasmtime compiles a component's functions in parallel),
    /// so a small component loaded beside a large one is ready in its own
    /// compile time, not in theirs together. Loads from the cache never wait.
    compiling: Arc<Mutex<()>>,
}

/// Part of every entry's key: entries of an older layout are never read.
const ENTRY_FORMAT: &[u8] = b"cwasm-3";

/// The largest tool listing kept (within the policy's default bounds, 128
/// tools of at most 80 KiB each); a larger one is listed by loading.
const MAX_LISTING: u64 = 16 << 20;

impl CompileCache {
    /// A cache in `dir`, or none.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            compiling: Arc::default(),
        }
    }

    /// `compile`, in its turn among the compiles of this cache.
    pub(in crate::runtime) fn in_turn<T>(&self, compile: impl FnOnce() -> T) -> T {
        let _turn = self
            .compiling
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        compile()
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

    /// The folder for one load, when the cache is on and the folder is
    /// trusted (said once per folder when it is not). A load asks once and
    /// does all its cache work through the answer.
    pub(in crate::runtime) fn folder(&self) -> Option<CacheFolder<'_>> {
        let dir = self.dir.as_deref()?;
        match create_private_dir(dir).and_then(|()| trusted_dir(dir)) {
            Ok(()) => Some(CacheFolder { dir }),
            Err(reason) => {
                warn_untrusted(dir, &reason);
                None
            }
        }
    }
}

/// Compiles `bytes` (whose SHA-256 is `digest`), through `folder` when
/// there is one: from a valid entry, or into a new one (a folder that
/// cannot be written is skipped with a warning); in memory otherwise.
pub(in crate::runtime) fn load_or_compile(
    cache: &CompileCache,
    folder: Option<CacheFolder<'_>>,
    engine: &Engine,
    bytes: &[u8],
    digest: &[u8; 32],
) -> wasmtime::Result<(Component, CacheOutcome)> {
    match folder {
        Some(folder) => folder.load_or_compile(cache, engine, bytes, digest),
        None => {
            let component = cache.in_turn(|| compile(bytes, |b| Component::new(engine, b)))?;
            Ok((component, CacheOutcome::Compiled))
        }
    }
}

/// A cache folder found trusted for one load.
#[derive(Clone, Copy, Debug)]
pub(in crate::runtime) struct CacheFolder<'a> {
    dir: &'a Path,
}

impl CacheFolder<'_> {
    fn load_or_compile(
        self,
        cache: &CompileCache,
        engine: &Engine,
        bytes: &[u8],
        digest: &[u8; 32],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        if let Some(component) = self.load_cached(engine, digest) {
            return Ok((component, CacheOutcome::Hit));
        }
        // Loaded once from memory before it is kept: what the engine checks
        // only when loading (that the instances fit its pool) falls back to
        // the component as given too.
        let (compiled, loaded) = cache.in_turn(|| {
            compile(bytes, |b| {
                let compiled = engine.precompile_component(b)?;
                // SAFETY: these bytes were produced just now by this engine.
                let loaded = unsafe { Component::deserialize(engine, &compiled)? };
                Ok((compiled, loaded))
            })
        })?;
        if let Err(e) = write_entry(&self.entry(engine, digest), &compiled) {
            tracing::warn!(cache = %self.dir.display(), "cannot write the compile cache: {e}");
        }
        // Mapped from the entry, the code is shared with the page cache
        // rather than held in memory of its own.
        let component = self.load_cached(engine, digest).unwrap_or(loaded);
        Ok((component, CacheOutcome::Compiled))
    }

    fn entry(self, engine: &Engine, digest: &[u8; 32]) -> PathBuf {
        self.dir
            .join(format!("{}.cwasm", cache_key(engine, digest)))
    }

    /// The compiled component whose source has SHA-256 `digest`, mapped from
    /// its cache entry, if there is a usable one.
    pub(in crate::runtime) fn load_cached(
        self,
        engine: &Engine,
        digest: &[u8; 32],
    ) -> Option<Component> {
        let entry = self.entry(engine, digest);
        let metadata = fs::symlink_metadata(&entry).ok()?;
        if !metadata.is_file() || !owner_only(&metadata) {
            return None;
        }
        if !files::unchanged_since_written(&entry, &metadata) {
            tracing::warn!(entry = %entry.display(), "compile-cache entry changed since it was written; recompiling");
            return None;
        }
        // SAFETY: the entry was written by this program for this engine
        // configuration (its key), checked when written, unchanged since,
        // and is owner-only in an owner-only folder; wasmtime checks its
        // header and settings.
        match unsafe { Component::deserialize_file(engine, &entry) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(entry = %entry.display(), "unusable compile-cache entry ({e}); recompiling");
                None
            }
        }
    }

    /// Whether a usable-looking entry holds the compiled code of the
    /// component with SHA-256 `digest` (what [`load_cached`](Self::load_cached)
    /// maps, checked without mapping it).
    pub(in crate::runtime) fn has_entry(self, engine: &Engine, digest: &[u8; 32]) -> bool {
        let entry = self.entry(engine, digest);
        fs::symlink_metadata(&entry).is_ok_and(|metadata| {
            metadata.is_file()
                && owner_only(&metadata)
                && files::unchanged_since_written(&entry, &metadata)
        })
    }

    /// The tool listing kept for the component with SHA-256 `digest`, if
    /// this program wrote one and it is unchanged since.
    pub(in crate::runtime) fn listing(self, engine: &Engine, digest: &[u8; 32]) -> Option<Vec<u8>> {
        let path = self.listing_path(engine, digest);
        let metadata = fs::symlink_metadata(&path).ok()?;
        let usable = metadata.is_file()
            && metadata.len() <= MAX_LISTING
            && owner_only(&metadata)
            && files::unchanged_since_written(&path, &metadata);
        usable.then(|| fs::read(&path).ok()).flatten()
    }

    /// Keeps `listing` for the component with SHA-256 `digest`, unless the
    /// same is kept already.
    pub(in crate::runtime) fn keep_listing(
        self,
        engine: &Engine,
        digest: &[u8; 32],
        listing: &[u8],
    ) {
        if listing.len() as u64 > MAX_LISTING
            || self.listing(engine, digest).as_deref() == Some(listing)
        {
            return;
        }
        if let Err(e) = write_entry(&self.listing_path(engine, digest), listing) {
            tracing::debug!(cache = %self.dir.display(), "cannot keep a component's tool listing: {e}");
        }
    }

    fn listing_path(self, engine: &Engine, digest: &[u8; 32]) -> PathBuf {
        self.dir
            .join(format!("{}.tools.json", cache_key(engine, digest)))
    }

    /// The SHA-256 the file described by `metadata` had when last read, if
    /// it cannot have changed since.
    pub(in crate::runtime) fn known_digest(self, metadata: &fs::Metadata) -> Option<[u8; 32]> {
        files::known_digest(self.dir, metadata)
    }

    /// Remembers that a file has SHA-256 `digest`, read between the
    /// `before` and `after` looks at it: only if it did not change meanwhile
    /// and a later change is sure to look different.
    pub(in crate::runtime) fn remember_digest(
        self,
        before: &fs::Metadata,
        after: &fs::Metadata,
        digest: &[u8; 32],
    ) {
        if let Err(e) = files::remember_digest(self.dir, before, after, digest) {
            tracing::debug!(cache = %self.dir.display(), "cannot remember a component's digest: {e}");
        }
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
    sha.update(ENTRY_FORMAT);
    // What is compiled is the component relinked: a relink that rewrites
    // differently makes other entries.
    sha.update(wasm_agent_relink::FORMAT.to_le_bytes());
    hex::encode(sha.finalize())
}

/// Writes an entry under a temporary name, reads it back, and publishes it
/// only if it holds exactly `compiled`; then records its identity, so a
/// later change to it is seen.
fn write_entry(entry: &Path, compiled: &[u8]) -> std::io::Result<()> {
    let tmp = entry.with_extension(unique_tmp_suffix());
    let written = (|| {
        let mut file = private_file(&tmp)?;
        file.write_all(compiled)?;
        file.sync_all()?;
        if fs::read(&tmp)? != compiled {
            return Err(std::io::Error::other(
                "the entry read back differs from what was written",
            ));
        }
        fs::rename(&tmp, entry)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    files::record_written(entry)
}

/// A temporary file's extension no other writer uses at the same time
/// (other processes, or other threads of this one).
fn unique_tmp_suffix() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("tmp{}-{n}", std::process::id())
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

#[cfg(test)]
mod tests {
    use wasmtime::component::Linker;
    use wasmtime::{Config, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

    use super::*;

    /// A component whose relinked form (its shim merged into its main
    /// module, which then defines two tables) this engine's pool refuses.
    #[test]
    fn a_relinked_component_the_pool_refuses_at_load_falls_back_to_the_one_as_given() {
        let bytes = wat::parse_str(include_str!("../../../../relink/testdata/shim.wat")).unwrap();
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(1)
            .total_core_instances(4)
            .total_memories(1)
            .total_tables(4)
            .total_stacks(1)
            .max_tables_per_module(1);
        let mut config = Config::new();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::new(Some(dir.path().join("cache")));
        let digest = [7; 32];

        let load = || load_or_compile(&cache, cache.folder(), &engine, &bytes, &digest);
        let (component, outcome) = load().expect("falls back to the component as given");
        assert_eq!(outcome, CacheOutcome::Compiled);
        let (_, outcome) = load().expect("kept in the cache");
        assert_eq!(outcome, CacheOutcome::Hit);

        let mut linker = Linker::new(&engine);
        linker
            .root()
            .func_wrap("len", |_, (s,): (String,)| Ok((s.len() as u32,)))
            .unwrap();
        let mut store = Store::new(&engine, ());
        let instance = linker.instantiate(&mut store, &component).unwrap();
        let run = instance
            .get_typed_func::<(u32,), (u32,)>(&mut store, "run")
            .unwrap();
        assert_eq!(run.call(&mut store, (1,)).unwrap(), (5 + 4,));
    }
}
