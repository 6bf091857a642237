//! The WASI context of one call: exactly what the policy grants.
//!
//! No inherited environment, arguments, stdin or network; stdout and stderr
//! go to capped in-memory sinks; directories are preopened with the granted
//! permissions (wasmtime-wasi confines paths to them: no `..`, no absolute
//! paths outside a grant, no symlinks leading out).

use tracing::Instrument;
use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use crate::runtime::asks::Asks;
use crate::runtime::denials::{DenialKind, Denials};
use crate::runtime::net::NetworkPolicy;
use crate::runtime::output::CappedOutput;
use crate::runtime::scratch::{self, Scratch};
use wasm_agent_policy::{DirGrant, DirMode, Policy};

/// Builds the WASI context for `policy`.
pub fn build(
    policy: &Policy,
    asked_folders: &[DirGrant],
    network: NetworkPolicy,
    asks: Asks,
    (stdout, stderr): (CappedOutput, CappedOutput),
    denials: Denials,
    scratch: Option<&Scratch>,
) -> Result<WasiCtx, String> {
    let sockets = network.has_scheme("tcp") || network.has_scheme("udp");
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(stdout)
        .stderr(stderr)
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
    for (key, value) in &policy.env {
        builder.env(key, value);
    }
    for grant in policy.dirs.iter().chain(asked_folders) {
        let perms = match grant.mode {
            DirMode::Ro => FsPerms::ReadOnly,
            DirMode::Rw => FsPerms::ReadWrite,
        };
        builder
            .preopened_dir(&grant.host, grant.guest_path(), perms)
            .map_err(|e| {
                format!(
                    "cannot open granted directory {}: {e}",
                    grant.host.display()
                )
            })?;
    }
    if let Some(folder) = scratch {
        builder
            .preopened_dir(folder.path(), scratch::GUEST_PATH, FsPerms::ReadWrite)
            .map_err(|e| format!("cannot open the scratch folder: {e}"))?;
    }
    Ok(builder.build())
}
