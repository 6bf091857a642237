//! `serve --watch`: polls the tools folders and files, and reloads components
//! that were added, changed or removed.
//!
//! Polling (rather than inotify) works the same on every filesystem, bind
//! mounts and network shares included, and lets a file settle: a component is
//! loaded only once its size and modification time held still for one poll,
//! so a half-copied file is never read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use wasm_agent::policy::{ConfigFile, PolicyLayer};
use wasm_agent::{CancellationToken, LoadOptions, ToolHost};

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

/// Reloads the components under a set of files and folders as they change.
pub struct Watcher {
    paths: Vec<PathBuf>,
    host: ToolHost,
    layer: PolicyLayer,
    config: Option<ConfigFile>,
}

impl Watcher {
    /// Watches `paths` (component files, and folders of them) for `host`.
    pub fn new(
        paths: Vec<PathBuf>,
        host: ToolHost,
        layer: PolicyLayer,
        config: Option<ConfigFile>,
    ) -> Self {
        Self {
            paths,
            host,
            layer,
            config,
        }
    }

    /// Polls until `stop`, calling `changed` after each round that changed the
    /// tool list.
    pub async fn run(self, stop: CancellationToken, changed: impl Fn()) {
        let mut applied = self.scan();
        // The component name each file was loaded under.
        let mut names: BTreeMap<PathBuf, String> = applied
            .keys()
            .map(|path| (path.clone(), self.component_name(path)))
            .collect();
        let mut previous = applied.clone();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(POLL_EVERY) => {}
            }
            let current = self.scan();
            // Act only on files that held still since the previous poll.
            let settled: Snapshot = current
                .iter()
                .filter(|(path, stamp)| previous.get(*path) == Some(stamp))
                .map(|(path, stamp)| (path.clone(), *stamp))
                .collect();
            let mut any = false;
            for (path, stamp) in &settled {
                if applied.get(path) != Some(stamp) {
                    if let Some(name) = self.reload(path).await {
                        names.insert(path.clone(), name);
                        any = true;
                    }
                    applied.insert(path.clone(), *stamp);
                }
            }
            let gone: Vec<PathBuf> = applied
                .keys()
                .filter(|path| !current.contains_key(*path))
                .cloned()
                .collect();
            for path in gone {
                applied.remove(&path);
                if let Some(name) = names.remove(&path) {
                    any |= self.unload(&path, &name);
                }
            }
            if any {
                changed();
            }
            previous = current;
        }
    }

    /// Every `.wasm` file under the watched paths, with its stamp.
    fn scan(&self) -> Snapshot {
        let mut snapshot = Snapshot::new();
        for path in &self.paths {
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

    fn component_name(&self, path: &Path) -> String {
        file_target(path.to_path_buf(), self.config.as_ref()).name
    }

    /// Loads a new or changed component and returns its name; a failure
    /// keeps the old version.
    async fn reload(&self, path: &Path) -> Option<String> {
        let target = file_target(path.to_path_buf(), self.config.as_ref());
        let mut options = LoadOptions::new(self.layer.apply_to(target.policy)).name(&target.name);
        options.prefix = target.prefix;
        match self.host.reload_with(path.to_path_buf(), options).await {
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
                    "wasm-agent: cannot load {}: {error}; keeping what was loaded",
                    path.display()
                );
                None
            }
        }
    }

    /// Removes the tools of a component whose file is gone.
    fn unload(&self, path: &Path, name: &str) -> bool {
        let removed = self.host.remove_component(name);
        if removed > 0 {
            eprintln!("wasm-agent: unloaded {name} ({} is gone)", path.display());
        }
        removed > 0
    }
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
