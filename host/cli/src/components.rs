//! Where each component comes from: a file, or an `oci://` reference pulled
//! into the local store; each checked against `wasm-agent.lock` (under
//! `--locked`) and its configured signature key before it is loaded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use wasm_agent::oci::{
    ComponentRef, Digest, LockFile, Pulled, Registry, RegistryOptions, VerifyKey,
};
use wasm_agent::policy::{ComponentLocation, ConfigFile, Policy, PolicyLayer};
use wasm_agent::sandbox::CompileCache;
use wasm_agent::{ComponentSource, LoadOptions};

use super::args::{HostFlags, RegistryFlags};

/// Where one component comes from.
#[derive(Clone, Debug)]
pub enum Location {
    /// A `.wasm` file.
    File(PathBuf),
    /// A component in an OCI registry.
    Registry(ComponentRef),
}

impl Location {
    /// A config's component, its reference parsed.
    pub fn of(component: &ComponentLocation, alias: &str) -> anyhow::Result<Self> {
        Ok(match component {
            ComponentLocation::File(path) => Location::File(path.clone()),
            ComponentLocation::Registry(text) => Location::Registry(
                text.parse()
                    .with_context(|| format!("tools.{alias}.component"))?,
            ),
        })
    }
}

/// A component to load, with its name, prefix, policy and checks.
pub struct Target {
    pub name: String,
    /// The config alias, which its session state is kept under; components
    /// named by path alone keep state under their content digest.
    pub alias: Option<String>,
    pub location: Location,
    pub prefix: Option<String>,
    pub policy: Policy,
    /// The public key its signature must verify with.
    pub verify: Option<PathBuf>,
}

/// The store pulled components go to: `oci/` in the cache folder.
pub fn store_dir(cache_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match cache_dir {
        Some(dir) => dir.to_path_buf(),
        None => CompileCache::default_dir().context(
            "cannot find a cache folder for pulled components: set --cache-dir or WASM_AGENT_CACHE_DIR",
        )?,
    };
    Ok(dir.join("oci"))
}

/// A registry client as the flags say.
pub fn registry(flags: &RegistryFlags, cache_dir: Option<&Path>) -> anyhow::Result<Registry> {
    let mut options = RegistryOptions::new(store_dir(cache_dir)?);
    options.offline = flags.offline;
    options.insecure = flags.insecure_registry.clone();
    options.timeout = flags.registry_timeout;
    options.max_component_size = flags.max_component_size.bytes();
    Ok(Registry::new(options)?)
}

/// The digests `wasm-agent.lock` pins, when `--locked` or `locked = true`.
pub struct Pins {
    path: PathBuf,
    lock: LockFile,
}

impl Pins {
    /// The lock file beside the config, when locking is asked for.
    pub fn open(flags: &HostFlags, config: Option<&ConfigFile>) -> anyhow::Result<Option<Self>> {
        let locked = flags.locked || config.is_some_and(|c| c.locked);
        if !locked {
            return Ok(None);
        }
        let Some(config) = config else {
            bail!("--locked needs --config: the lock file (wasm-agent.lock) is the one beside it");
        };
        let path = LockFile::beside(&config.path);
        let lock = LockFile::load(&path)?.with_context(|| {
            format!(
                "{} does not exist; write it with `wasm-agent lock --config {}`",
                path.display(),
                config.path.display()
            )
        })?;
        Ok(Some(Self { path, lock }))
    }

    /// The content digest pinned for `target`; only configured tools whose
    /// component is the one the lock was written for have one.
    pub fn digest_for(&self, target: &Target) -> anyhow::Result<Digest> {
        let lock = self.path.display();
        let Some(alias) = &target.alias else {
            bail!(
                "{}: not in {lock}, which pins configured tools only: give it a [tools.NAME] \
                 section and run `wasm-agent lock`",
                describe(&target.location)
            );
        };
        let Some(locked) = self.lock.tools.get(alias) else {
            bail!("tools.{alias}: not in {lock}; run `wasm-agent lock` to pin it");
        };
        if !same_component(&self.path, &locked.component, &target.location) {
            bail!(
                "tools.{alias}: the config names {}, but {lock} was written for {}; run \
                 `wasm-agent lock` again",
                describe(&target.location),
                locked.component
            );
        }
        Ok(locked.digest)
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How the lock file records a component: a path relative to its folder
/// where possible, or the reference.
pub fn lock_text(lock_path: &Path, location: &Location) -> String {
    match location {
        Location::Registry(reference) => reference.to_string(),
        Location::File(path) => {
            let dir = lock_path.parent().unwrap_or(Path::new("."));
            let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
            let (dir, file) = (canonical(dir), canonical(path));
            file.strip_prefix(&dir)
                .unwrap_or(&file)
                .display()
                .to_string()
        }
    }
}

fn same_component(lock_path: &Path, locked: &str, location: &Location) -> bool {
    match location {
        Location::Registry(reference) => reference.to_string() == locked,
        Location::File(path) => {
            let dir = lock_path.parent().unwrap_or(Path::new("."));
            let recorded = dir.join(locked).canonicalize().ok();
            recorded.is_some() && recorded == path.canonicalize().ok()
        }
    }
}

/// A location in messages.
pub fn describe(location: &Location) -> String {
    match location {
        Location::File(path) => path.display().to_string(),
        Location::Registry(reference) => reference.to_string(),
    }
}

/// What to load for each target, with the command line's policy on top:
/// references pulled (in parallel), pins and signatures checked.
pub async fn load_list(
    targets: Vec<Target>,
    flags: &HostFlags,
    config: Option<&ConfigFile>,
) -> anyhow::Result<Vec<(ComponentSource, LoadOptions)>> {
    let pins = Pins::open(flags, config)?;
    let needs_registry = targets
        .iter()
        .any(|t| matches!(t.location, Location::Registry(_)));
    let registry = if needs_registry {
        Some(registry(&flags.registry, flags.cache_dir.as_deref())?)
    } else {
        None
    };
    let mut keys = BTreeMap::new();
    for path in targets.iter().filter_map(|t| t.verify.as_ref()) {
        if !keys.contains_key(path) {
            keys.insert(path.clone(), VerifyKey::from_file(path)?);
        }
    }
    let layer = flags.policy.layer();
    let prepared = targets
        .into_iter()
        .map(|target| prepare(target, registry.as_ref(), pins.as_ref(), &keys, &layer));
    futures::future::try_join_all(prepared).await
}

/// One target's source and load options (see [`load_list`]).
pub async fn prepare(
    target: Target,
    registry: Option<&Registry>,
    pins: Option<&Pins>,
    keys: &BTreeMap<PathBuf, VerifyKey>,
    layer: &PolicyLayer,
) -> anyhow::Result<(ComponentSource, LoadOptions)> {
    let pinned = pins.map(|p| p.digest_for(&target)).transpose()?;
    let pin_context = || match pins {
        Some(pins) => format!(
            "{} is pinned in {} (--locked); run `wasm-agent lock` to accept another version",
            target.name,
            pins.path().display()
        ),
        None => target.name.clone(),
    };
    let mut options = LoadOptions::new(layer.apply_to(target.policy.clone())).name(&target.name);
    options.prefix = target.prefix.clone();
    options.state_scope = target.alias.clone();
    let source = match &target.location {
        Location::File(path) => {
            if let Some(key) = &target.verify {
                bail!(
                    "{}: a signature key is configured (verify = {{ key = {:?} }}), and only \
                     oci:// components carry signatures; publish it to a registry and sign it",
                    path.display(),
                    key.display()
                );
            }
            if let Some(pinned) = pinned {
                // Checked here for a message naming the lock; the sandbox
                // checks the bytes it compiles again.
                let actual = Digest::of_file(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                if actual != pinned {
                    return Err(anyhow::anyhow!(
                        "{}: its content is {actual}, but {pinned} is pinned",
                        path.display()
                    )
                    .context(pin_context()));
                }
                options.expected_digest = Some(pinned.to_string());
            }
            ComponentSource::File(path.clone())
        }
        Location::Registry(reference) => {
            let registry = registry.context("a registry client for oci:// components")?;
            let pulled: Pulled = registry
                .pull(reference, pinned.as_ref())
                .await
                .with_context(pin_context)?;
            if let Some(path) = &target.verify {
                let key = keys.get(path).context("the configured public key")?;
                registry.verify(&pulled, key).await?;
            }
            options.expected_digest = Some(pulled.digest.to_string());
            ComponentSource::File(pulled.path)
        }
    };
    Ok((source, options))
}
