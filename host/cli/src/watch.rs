//! `serve --watch`: polls the tools folders and files, and reloads components
//! that were added, changed or removed.
//!
//! Polling (rather than inotify) works the same on every filesystem, bind
//! mounts and network shares included, and lets a file settle: a component is
//! loaded only once its size and modification time held still for one poll,
//! so a half-copied file is never read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use wasm_agent::mcp::ToolsChanged;
use wasm_agent::policy::{ConfigFile, PolicyLayer};
use wasm_agent::{CancellationToken, ToolHost};

use super::components::{self, Pins};
use super::file_target;

/// How often the folders are polled.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// What a file looked like at one poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

type Snapshot = BTreeMap<PathBuf, Stamp>;

/// What the watcher knows between polls.
struct Seen {
    /// The stamp of each file as last acted on.
    applied: Snapshot,
    /// The previous poll.
    previous: Snapshot,
    /// The component each file was loaded as.
    names: BTreeMap<PathBuf, String>,
}

/// Reloads the components under a set of files and folders as they change.
pub struct Watcher {
    paths: Arc<[PathBuf]>,
    layer: PolicyLayer,
    config: Option<ConfigFile>,
    /// The lock file's pins (`--locked`): a changed file that differs is
    /// refused, and the loaded version kept.
    pins: Option<Pins>,
    /// The first look, taken before the host loaded the components.
    initial: Snapshot,
}

impl Watcher {
    /// Watches `paths` (component files, and folders of them); call it before
    /// loading them, so that nothing changed in between goes unseen.
    pub fn new(paths: Vec<PathBuf>, layer: PolicyLayer, config: Option<ConfigFile>) -> Self {
        let paths: Arc<[PathBuf]> = paths.into();
        Self {
            initial: scan(&paths),
            paths,
            layer,
            config,
            pins: None,
        }
    }

    /// Holds reloads to the lock file's pins.
    pub fn pinned(mut self, pins: Option<Pins>) -> Self {
        self.pins = pins;
        self
    }

    /// Polls until `stop`, loading, reloading and unloading components of
    /// `host`, and tells clients through `changed` after each round that
    /// changed the tool list.
    pub async fn run(self, host: ToolHost, stop: CancellationToken, changed: ToolsChanged) {
        // A file is known as the source of a component only if that
        // component was loaded from it (not from a registry, or another file).
        let names = self
            .initial
            .keys()
            .map(|path| (path.clone(), self.component_name(path)))
            .filter(|(path, name)| loaded_from(&host, name, path))
            .collect();
        let mut seen = Seen {
            applied: self.initial.clone(),
            previous: self.initial.clone(),
            names,
        };
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(POLL_EVERY) => {}
            }
            if self.poll(&host, &mut seen).await {
                changed.notify();
            }
        }
    }

    /// One look at the files; true if the tool list changed.
    async fn poll(&self, host: &ToolHost, seen: &mut Seen) -> bool {
        // Many stat calls: on the blocking pool, not an async worker.
        let paths = self.paths.clone();
        let current = match tokio::task::spawn_blocking(move || scan(&paths)).await {
            Ok(current) => current,
            Err(error) => {
                // No look this round; the next one tries again.
                if error.is_panic() {
                    tracing::warn!("cannot scan the watched paths: {error}");
                }
                return false;
            }
        };
        let mut changed = false;
        // Act only on files that held still since the previous poll.
        for (path, stamp) in &current {
            if seen.previous.get(path) != Some(stamp) || seen.applied.get(path) == Some(stamp) {
                continue;
            }
            // A new version of this file's component, or of one loaded at
            // startup from this very file, is replaced; anything else is
            // loaded beside the rest, or refused if its names clash: a file
            // never replaces a component it did not load (a registry's, a
            // config alias's of another file, a signed or pinned one).
            let name = self.component_name(path);
            let replace = seen.names.get(path) == Some(&name) || loaded_from(host, &name, path);
            if let Some(name) = self.load(host, path, replace).await {
                seen.names.insert(path.clone(), name);
                changed = true;
            }
            seen.applied.insert(path.clone(), *stamp);
        }
        // Gone for two polls in a row: not just being rewritten.
        let gone: Vec<PathBuf> = seen
            .applied
            .keys()
            .filter(|path| !current.contains_key(*path) && !seen.previous.contains_key(*path))
            .cloned()
            .collect();
        for path in gone {
            seen.applied.remove(&path);
            if let Some(name) = seen.names.remove(&path) {
                changed |= unload(host, &path, &name);
            }
        }
        seen.previous = current;
        changed
    }

    fn component_name(&self, path: &Path) -> String {
        file_target(path.to_path_buf(), self.config.as_ref()).name
    }

    /// Loads a new component, or a new version of one this watcher loaded
    /// (`replace`), and returns its name. A new file never displaces another
    /// file's component, and a failed reload keeps the old version.
    async fn load(&self, host: &ToolHost, path: &Path, replace: bool) -> Option<String> {
        let target = file_target(path.to_path_buf(), self.config.as_ref());
        let prepared = components::prepare(
            target,
            None,
            self.pins.as_ref(),
            &Default::default(),
            &self.layer,
        )
        .await;
        let loaded = match prepared {
            Ok((source, options)) if replace => host
                .reload_with(source, options)
                .await
                .map_err(anyhow::Error::from),
            Ok((source, options)) => host
                .load_with(source, options)
                .await
                .map_err(anyhow::Error::from),
            Err(error) => Err(error),
        };
        match loaded {
            Ok(report) => {
                eprintln!(
                    "wasm-agent: loaded {} from {}: {}",
                    report.component,
                    path.display(),
                    report.tools.join(", ")
                );
                Some(report.component)
            }
            Err(error) => {
                eprintln!(
                    "wasm-agent: cannot load {}: {}; keeping what was loaded",
                    path.display(),
                    wasm_agent::text::one_line(&crate::error_chain(&error))
                );
                None
            }
        }
    }
}

/// Whether `component` is loaded, from the file at `path`.
fn loaded_from(host: &ToolHost, component: &str, path: &Path) -> bool {
    host.tools()
        .iter()
        .find(|t| t.component == component)
        .and_then(|t| host.component_of(&t.name))
        .is_some_and(|identity| Path::new(&*identity.source) == path)
}

/// Refuses to watch a folder or file that someone else could write to: a
/// folder (or a file's folder, or the file) owned by another user, or
/// writable by group or others, would let them replace the tools served.
pub fn check_watchable(paths: &[PathBuf]) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    for path in paths {
        let mut places = vec![path.clone()];
        if !path.is_dir()
            && let Some(parent) = path.parent()
        {
            places.push(if parent.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                parent.to_path_buf()
            });
        }
        for place in places {
            let Ok(metadata) = std::fs::metadata(&place) else {
                continue;
            };
            let why = if metadata.uid() != me {
                format!("it is owned by another user (uid {})", metadata.uid())
            } else if metadata.mode() & 0o022 != 0 {
                format!(
                    "group or others may write it (mode {:o})",
                    metadata.mode() & 0o7777
                )
            } else {
                continue;
            };
            anyhow::bail!(
                "--watch: {} is refused: {why}, so someone else could replace the tools \
                 served; make it yours and writable by you alone (chown, chmod go-w), or \
                 serve without --watch",
                place.display()
            );
        }
    }
    Ok(())
}

/// Removes the tools of a component whose file is gone.
fn unload(host: &ToolHost, path: &Path, name: &str) -> bool {
    let removed = host.remove_component(name);
    if removed > 0 {
        eprintln!("wasm-agent: unloaded {name} ({} is gone)", path.display());
    }
    removed > 0
}

/// Every `.wasm` file under the watched paths, with its stamp.
fn scan(paths: &[PathBuf]) -> Snapshot {
    let mut snapshot = Snapshot::new();
    for path in paths {
        if path.is_dir() {
            let Ok(entries) = std::fs::read_dir(path) else {
                continue;
            };
            for entry in entries.flatten() {
                let file = entry.path();
                if file.extension().is_some_and(|e| e == "wasm") {
                    stamp(&file, &mut snapshot);
                }
            }
        } else {
            stamp(path, &mut snapshot);
        }
    }
    snapshot
}

fn stamp(path: &Path, snapshot: &mut Snapshot) {
    if let Ok(meta) = std::fs::metadata(path)
        && meta.is_file()
    {
        snapshot.insert(
            path.to_path_buf(),
            Stamp {
                modified: meta.modified().ok(),
                len: meta.len(),
            },
        );
    }
}
