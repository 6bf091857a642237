//! The WASI context of one call: exactly what the policy grants.
//!
//! No inherited environment, arguments, stdin or network; stdout and stderr
//! go to capped in-memory sinks; directories are preopened with the granted
//! permissions (wasmtime-wasi confines paths to them: no `..`, no absolute
//! paths outside a grant, no symlinks leading out).

use std::sync::{Arc, Mutex, PoisonError};

use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use super::output::CappedOutput;
use crate::policy::{DirMode, Policy};

/// Socket uses the sandbox refused during one call, for the error message.
#[derive(Clone, Debug, Default)]
pub struct Denials(Arc<Mutex<Vec<String>>>);

impl Denials {
    fn record(&self, what: String) {
        let mut list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if list.len() < 16 {
            list.push(what);
        }
    }

    /// The most telling refusal: a connection attempt if there was one.
    pub fn first(&self) -> Option<String> {
        let list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        list.iter()
            .find(|d| d.starts_with("connect") || d.starts_with("send"))
            .or_else(|| list.first())
            .cloned()
    }
}

/// Builds the WASI context for `policy`.
pub fn build(
    policy: &Policy,
    stdout: CappedOutput,
    stderr: CappedOutput,
    denials: Denials,
) -> Result<WasiCtx, String> {
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(stdout)
        .stderr(stderr)
        .allow_ip_name_lookup(false)
        // Sockets are "allowed" only so that every attempt reaches the check
        // below, which refuses it and records what was tried.
        .allow_tcp(true)
        .allow_udp(true)
        .socket_addr_check(move |addr, usage| {
            // Binding an ephemeral port on the wildcard address is what every
            // connect does implicitly; allowing it lets the connect itself
            // reach this check, so the refusal names the real destination.
            let implicit_bind = matches!(usage, SocketAddrUse::TcpBind | SocketAddrUse::UdpBind)
                && addr.ip().is_unspecified()
                && addr.port() == 0;
            if implicit_bind {
                return Box::pin(async { true });
            }
            let what = match usage {
                SocketAddrUse::TcpConnect => format!("connect to tcp {addr}"),
                SocketAddrUse::TcpBind => format!("bind tcp {addr}"),
                SocketAddrUse::TcpListen => format!("listen on tcp {addr}"),
                SocketAddrUse::UdpSend => format!("send udp to {addr}"),
                SocketAddrUse::UdpBind => format!("bind udp {addr}"),
                _ => format!("use a socket at {addr}"),
            };
            denials.record(what);
            Box::pin(async { false })
        });
    for (key, value) in &policy.env {
        builder.env(key, value);
    }
    for grant in &policy.dirs {
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
    Ok(builder.build())
}
