//! The WASI context of one call: exactly what the policy grants.
//!
//! No inherited environment, arguments, stdin or network; stdout and stderr
//! go to capped in-memory sinks; directories are preopened with the granted
//! permissions (wasmtime-wasi confines paths to them: no `..`, no absolute
//! paths outside a grant, no symlinks leading out).

use std::sync::Arc;

use tracing::Instrument;
use wasmtime::component::Linker;
use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use super::{Capability, Preparing};
use crate::result::{CallError, ErrorKind};
use crate::runtime::denials::DenialKind;
use crate::runtime::net::NetworkPolicy;
use crate::runtime::scratch;
use crate::runtime::store::CallState;
use wasm_agent_policy::{DirGrant, DirMode, FolderId, ValidPolicy};

/// What the WASI context of a call is made of.
pub(in crate::runtime) struct WasiConfig {
    /// The environment variables granted.
    env: Vec<(String, String)>,
    /// The folders granted (those asked about come with each call).
    dirs: Vec<DirGrant>,
    /// The network grants sockets are checked against.
    network: NetworkPolicy,
}

impl Capability for WasiCtx {
    type Config = WasiConfig;

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        wasmtime_wasi::p2::add_to_linker_async(linker)
    }

    fn configure(policy: &Arc<ValidPolicy>) -> WasiConfig {
        WasiConfig {
            env: policy
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            dirs: policy.dirs.clone(),
            network: NetworkPolicy::new(policy.network.clone()),
        }
    }

    fn prepare(config: &WasiConfig, call: &Preparing<'_>) -> Result<Self, CallError> {
        build(config, call).map_err(|e| CallError::new(ErrorKind::CapabilityDenied, e))
    }
}

/// A granted folder, opened and checked to be the folder the policy named.
struct GrantedFolder<'a> {
    grant: &'a DirGrant,
    /// Held until the WASI context has opened it again through this
    /// descriptor (never by the path, which could lead elsewhere by then).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    opened: std::fs::File,
}

impl<'a> GrantedFolder<'a> {
    /// Opens `grant`'s folder; refused when its path no longer leads to the
    /// folder the policy was resolved with (a tool with a read-write grant
    /// can rename folders and make links inside it).
    fn open(grant: &'a DirGrant) -> Result<Self, String> {
        let opened = std::fs::File::open(&grant.host).map_err(|e| {
            format!(
                "cannot open granted directory {}: {e}",
                grant.host.display()
            )
        })?;
        let metadata = opened.metadata().map_err(|e| {
            format!(
                "cannot read granted directory {}: {e}",
                grant.host.display()
            )
        })?;
        let same = metadata.is_dir()
            && grant
                .identity
                .is_none_or(|identity| FolderId::of(&metadata) == Some(identity));
        if !same {
            return Err(format!(
                "the granted directory {} is no longer the folder the policy named: it was                  moved, replaced or linked elsewhere since the tool was loaded, so the grant                  is refused (reload the tool to grant what is there now)",
                grant.host.display()
            ));
        }
        Ok(Self { grant, opened })
    }

    /// The path the WASI context opens it by: the checked descriptor where
    /// the system has one to name (Linux), else the granted path.
    fn path(&self) -> std::path::PathBuf {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // Whether /proc is mounted does not change: asked once.
            static PROC_FD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            if *PROC_FD.get_or_init(|| std::path::Path::new("/proc/self/fd").is_dir()) {
                return format!("/proc/self/fd/{}", self.opened.as_raw_fd()).into();
            }
        }
        self.grant.host.clone()
    }
}

/// Builds the WASI context of one call.
fn build(config: &WasiConfig, call: &Preparing<'_>) -> Result<WasiCtx, String> {
    let network = config.network.clone();
    let (denials, asks) = (call.denials.clone(), call.asks.clone());
    let sockets = network.has_scheme("tcp") || network.has_scheme("udp");
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(call.output.0.clone())
        .stderr(call.output.1.clone())
        .allow_ip_name_lookup(sockets)
        // Sockets are "allowed" so that every attempt reaches the check
        // below, which lets through only what the grants name.
        .allow_tcp(true)
        .allow_udp(true)
        .socket_addr_check(move |addr, usage| {
            let (network, denials, asks) = (network.clone(), denials.clone(), asks.clone());
            Box::pin(async move {
                let (scheme, attempt) = match usage {
                    // Binding an ephemeral port on the wildcard address is
                    // what every connect does implicitly; the connect itself
                    // is checked next.
                    SocketAddrUse::TcpBind | SocketAddrUse::UdpBind
                        if addr.ip().is_unspecified() && addr.port() == 0 =>
                    {
                        return true;
                    }
                    SocketAddrUse::UdpReceive => {
                        return network.check_socket("udp", addr).await.is_ok();
                    }
                    SocketAddrUse::TcpConnect => ("tcp", format!("connect to tcp {addr}")),
                    SocketAddrUse::UdpSend => ("udp", format!("send udp to {addr}")),
                    SocketAddrUse::TcpBind | SocketAddrUse::TcpListen => {
                        denials.record(
                            DenialKind::Listen,
                            format!("listen on tcp {addr}"),
                            "tools may not accept connections".into(),
                        );
                        return false;
                    }
                    _ => {
                        denials.record(
                            DenialKind::Listen,
                            format!("use a socket at {addr}"),
                            "tools may not bind or receive on sockets".into(),
                        );
                        return false;
                    }
                };
                let span = crate::spans::connect(scheme, addr);
                let mut checked = network
                    .check_socket(scheme, addr)
                    .instrument(span.clone())
                    .await;
                if checked.is_err() {
                    let host = addr.ip().to_string();
                    if let Some(pattern) = asks.pattern_for(scheme, &host, addr.port()) {
                        // On a task of its own: this future must be Sync,
                        // and asking is not.
                        let denied = denials.clone();
                        let asking = tokio::spawn(async move {
                            asks.destination(scheme, &host, addr.port(), &pattern, &denied)
                                .await
                        });
                        checked = match asking.await {
                            Ok(Ok(grant)) => network.with(grant).check_socket(scheme, addr).await,
                            Ok(Err(reason)) => Err(reason),
                            Err(_) => Err("the question was not answered".into()),
                        };
                    }
                }
                span.record(
                    "wasm_agent.decision",
                    if checked.is_ok() { "allowed" } else { "denied" },
                );
                match checked {
                    Ok(()) => {
                        denials.allowed(&attempt);
                        true
                    }
                    Err(reason) => {
                        denials.record(DenialKind::Network, attempt, reason);
                        false
                    }
                }
            })
        });
    for (key, value) in &config.env {
        builder.env(key, value);
    }
    for grant in config.dirs.iter().chain(call.asked_folders) {
        let perms = match grant.mode {
            DirMode::Ro => FsPerms::ReadOnly,
            DirMode::Rw => FsPerms::ReadWrite,
        };
        let folder = GrantedFolder::open(grant)?;
        builder
            .preopened_dir(folder.path(), grant.guest_path(), perms)
            .map_err(|e| {
                format!(
                    "cannot open granted directory {}: {e}",
                    grant.host.display()
                )
            })?;
    }
    if let Some(folder) = call.scratch.and_then(scratch::Scratch::path) {
        builder
            .preopened_dir(folder, scratch::GUEST_PATH, FsPerms::ReadWrite)
            .map_err(|e| format!("cannot open the scratch folder: {e}"))?;
    }
    Ok(builder.build())
}
