//! `wasm-agent pull`, `lock` and `sign`: registry components ahead of time,
//! pinned, and signed.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use wasm_agent::oci::{ComponentRef, Digest, LockFile, Locked, SigningKey, VerifyKey};
use wasm_agent::policy::ConfigFile;

use super::args::RegistryFlags;
use super::components::{self, Location, lock_text};

fn references(texts: &[String]) -> anyhow::Result<Vec<ComponentRef>> {
    texts
        .iter()
        .map(|text| text.parse().map_err(anyhow::Error::from))
        .collect()
}

/// Pulls each reference into the store (verifying it with `verify_key`)
/// and prints its digests.
pub async fn pull(
    texts: &[String],
    json: bool,
    verify_key: Option<&Path>,
    cache_dir: Option<&Path>,
    flags: &RegistryFlags,
) -> anyhow::Result<ExitCode> {
    let references = references(texts)?;
    let registry = components::registry(flags, cache_dir)?;
    let key = verify_key.map(VerifyKey::from_file).transpose()?;
    let mut pulled = Vec::new();
    for reference in &references {
        let component = registry.pull(reference, None).await?;
        if let Some(key) = &key {
            registry.verify(&component, key).await?;
        }
        pulled.push(component);
    }
    if json {
        let list: Vec<_> = pulled
            .iter()
            .map(|p| {
                serde_json::json!({
                    "reference": p.reference.to_string(),
                    "manifest": p.manifest.to_string(),
                    "digest": p.digest.to_string(),
                    "path": p.path,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        for p in &pulled {
            println!("{}", p.reference);
            println!(
                "  manifest  {}  (pin: {})",
                p.manifest,
                p.reference.with_digest(p.manifest)
            );
            println!(
                "  component {}  (the content digest wasm-agent.lock pins)",
                p.digest
            );
            if key.is_some() {
                println!("  signature verified");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Resolves every component of the config to its content digest (pulling
/// references, checking configured signatures) and writes the lock file.
pub async fn lock(
    config_path: &Path,
    cache_dir: Option<&Path>,
    flags: &RegistryFlags,
) -> anyhow::Result<ExitCode> {
    let config = ConfigFile::load(config_path)?;
    let lock_path = LockFile::beside(config_path);
    let mut registry = None;
    let mut lock = LockFile::new();
    for (alias, tool) in &config.tools {
        let location = Location::of(&tool.component, alias)?;
        let (digest, manifest) = match &location {
            Location::File(path) => {
                if tool.verify.is_some() {
                    anyhow::bail!(
                        "tools.{alias}: a signature key is configured, and only oci:// \
                         components carry signatures"
                    );
                }
                let digest = Digest::of_file(path)
                    .with_context(|| format!("tools.{alias}: cannot read {}", path.display()))?;
                (digest, None)
            }
            Location::Registry(reference) => {
                if registry.is_none() {
                    registry = Some(components::registry(flags, cache_dir)?);
                }
                let registry = registry.as_ref().expect("just made");
                let pulled = registry
                    .pull(reference, None)
                    .await
                    .with_context(|| format!("tools.{alias}"))?;
                if let Some(verify) = &tool.verify {
                    let key = VerifyKey::from_file(&verify.key)?;
                    registry
                        .verify(&pulled, &key)
                        .await
                        .with_context(|| format!("tools.{alias}"))?;
                }
                (pulled.digest, Some(pulled.manifest))
            }
        };
        println!("{alias:<20} {digest}  {}", components::describe(&location));
        lock.tools.insert(
            alias.clone(),
            Locked {
                component: lock_text(&lock_path, &location),
                manifest,
                digest,
            },
        );
    }
    lock.save(&lock_path)?;
    eprintln!(
        "wasm-agent: wrote {} ({} components)",
        lock_path.display(),
        lock.tools.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Signs each reference's manifest and prints the signature's tag.
pub async fn sign(
    texts: &[String],
    key: &Path,
    cache_dir: Option<&Path>,
    flags: &RegistryFlags,
) -> anyhow::Result<ExitCode> {
    let references = references(texts)?;
    let key = SigningKey::from_file(key)?;
    let registry = components::registry(flags, cache_dir)?;
    for reference in &references {
        let signature = registry.sign(reference, &key).await?;
        println!("signed {reference}: {signature}");
    }
    Ok(ExitCode::SUCCESS)
}
