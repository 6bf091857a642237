//! `max_write`: the bytes one call may write into its read-write grants.
//!
//! wasmtime-wasi writes files through two doors: `descriptor.write`
//! (positional) and the output streams of `write-via-stream` and
//! `append-via-stream`. Both are wrapped here (the linker's definitions are
//! shadowed by ones that call the originals): every byte is charged to the
//! call's budget before it reaches the file, and a write past the budget is
//! refused (`insufficient-space` to the tool, `capability_denied` naming
//! `max_write` for the call). New directory entries (files opened with
//! `create`, directories, symlinks, hard links) cost [`ENTRY_COST`] each plus
//! their name, so a call cannot fill the disk's inodes either.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, Host, HostDescriptor, OpenFlags, PathFlags,
};
use wasmtime_wasi::p2::{DynOutputStream, OutputStream, Pollable, StreamError, StreamResult};

use super::{Capability, Preparing};
use crate::result::CallError;
use crate::runtime::denials::{DenialKind, Denials};
use crate::runtime::store::CallState;
use wasm_agent_policy::{ByteSize, ValidPolicy};

/// The filesystem interface as this wasmtime-wasi registers it.
const FILESYSTEM: &str = "wasi:filesystem/types@0.2.12";
/// What a new directory entry costs against `max_write` (a block).
pub const ENTRY_COST: usize = 4096;

/// What one call may still write, shared by all its files and streams.
#[derive(Clone, Debug)]
pub struct WriteBudget {
    left: Arc<AtomicU64>,
    max: ByteSize,
    denials: Denials,
}

impl WriteBudget {
    /// A budget of `max` bytes; refusals are recorded in `denials`.
    pub fn new(max: ByteSize, denials: Denials) -> Self {
        Self {
            left: Arc::new(AtomicU64::new(max.bytes())),
            max,
            denials,
        }
    }

    /// Takes `bytes` from the budget, or refuses (and records why).
    fn charge(&self, bytes: usize) -> Result<(), String> {
        let bytes = bytes as u64;
        let taken = self
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(bytes)
            });
        match taken {
            Ok(_) => Ok(()),
            Err(_) => Err(self.refuse(bytes)),
        }
    }

    /// Whether `bytes` more would fit, without taking them.
    fn fits(&self, bytes: usize) -> Result<(), String> {
        self.fits_for(bytes, || format!("to write {bytes} bytes to a file"))
    }

    /// Whether a new directory entry costing `bytes` would fit.
    fn fits_entry(&self, bytes: usize) -> Result<(), String> {
        self.fits_for(bytes, || {
            format!("to create a file, folder or link (it counts {bytes} bytes)")
        })
    }

    fn fits_for(&self, bytes: usize, attempt: impl FnOnce() -> String) -> Result<(), String> {
        if self.left.load(Ordering::Acquire) >= bytes as u64 {
            Ok(())
        } else {
            Err(self.refuse_with(attempt()))
        }
    }

    /// Takes what a write really wrote (after it succeeded).
    fn spend(&self, bytes: u64) {
        let _ = self
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                Some(left.saturating_sub(bytes))
            });
    }

    /// Records a refused write of `bytes` and says why.
    fn refuse(&self, bytes: u64) -> String {
        self.refuse_with(format!("to write {bytes} bytes to a file"))
    }

    /// Records a refused `attempt` and says why.
    fn refuse_with(&self, attempt: String) -> String {
        let reason = format!(
            "that would take the call past the {} its policy lets it write into its read-write \
             folders (max_write); raise --max-write to allow more",
            self.max
        );
        self.denials
            .record(DenialKind::MaxWrite, attempt, reason.clone());
        reason
    }
}

/// A file's output stream, charged to the call's budget.
struct ChargedStream {
    inner: DynOutputStream,
    budget: WriteBudget,
}

#[async_trait::async_trait]
impl OutputStream for ChargedStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.budget.charge(bytes.len()).map_err(|reason| {
            StreamError::LastOperationFailed(wasmtime::format_err!("{reason}"))
        })?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[async_trait::async_trait]
impl Pollable for ChargedStream {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

/// Wraps the stream behind `stream` so its writes are charged.
fn charge_stream(
    state: &mut CallState,
    stream: &Resource<DynOutputStream>,
) -> wasmtime::Result<()> {
    let budget = state.writes.clone();
    let slot = state.table.get_mut(stream)?;
    let inner = std::mem::replace(slot, Box::new(Closed));
    *slot = Box::new(ChargedStream { inner, budget });
    Ok(())
}

/// A placeholder while a stream is being wrapped; never written to.
struct Closed;

#[async_trait::async_trait]
impl OutputStream for Closed {
    fn write(&mut self, _: Bytes) -> StreamResult<()> {
        Err(StreamError::Closed)
    }
    fn flush(&mut self) -> StreamResult<()> {
        Err(StreamError::Closed)
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        Err(StreamError::Closed)
    }
}

#[async_trait::async_trait]
impl Pollable for Closed {
    async fn ready(&mut self) {}
}

impl Capability for WriteBudget {
    /// `max_write`.
    type Config = ByteSize;

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        add_to_linker(linker)
    }

    fn configure(policy: &Arc<ValidPolicy>) -> ByteSize {
        policy.max_write
    }

    fn prepare(max: &ByteSize, call: &Preparing<'_>) -> Result<Self, CallError> {
        Ok(Self::new(*max, call.denials.clone()))
    }
}

/// Shadows the linker's file-writing functions with charged ones.
fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(FILESYSTEM)?;
    types.func_wrap(
        "[method]descriptor.write-via-stream",
        |mut store, (fd, offset): (Resource<Descriptor>, u64)| {
            let state = store.data_mut();
            let opened = HostDescriptor::write_via_stream(&mut state.filesystem(), fd, offset);
            stream_result(state, opened)
        },
    )?;
    types.func_wrap(
        "[method]descriptor.append-via-stream",
        |mut store, (fd,): (Resource<Descriptor>,)| {
            let state = store.data_mut();
            let opened = HostDescriptor::append_via_stream(&mut state.filesystem(), fd);
            stream_result(state, opened)
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.write",
        |mut store, (fd, buffer, offset): (Resource<Descriptor>, Vec<u8>, u64)| {
            Box::new(async move {
                let state = store.data_mut();
                if state.writes.fits(buffer.len()).is_err() {
                    return Ok((Err(ErrorCode::InsufficientSpace),));
                }
                let budget = state.writes.clone();
                let mut view = state.filesystem();
                let written = HostDescriptor::write(&mut view, fd, buffer, offset).await;
                // What a short write wrote, not what it was given.
                settle(&mut view, &budget, |written| *written, written)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store,
         (fd, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                let state = store.data_mut();
                let cost = if open_flags.contains(OpenFlags::CREATE) {
                    ENTRY_COST + path.len()
                } else {
                    0
                };
                let budget = state.writes.clone();
                if budget.fits_entry(cost).is_err() {
                    return Ok((Err(ErrorCode::InsufficientSpace),));
                }
                let mut view = state.filesystem();
                let opened =
                    HostDescriptor::open_at(&mut view, fd, path_flags, path, open_flags, flags)
                        .await;
                settle(&mut view, &budget, |_| cost as u64, opened)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.create-directory-at",
        |mut store, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                let state = store.data_mut();
                let cost = ENTRY_COST + path.len();
                let budget = state.writes.clone();
                if budget.fits_entry(cost).is_err() {
                    return Ok((Err(ErrorCode::InsufficientSpace),));
                }
                let mut view = state.filesystem();
                let made = HostDescriptor::create_directory_at(&mut view, fd, path).await;
                settle(&mut view, &budget, |_| cost as u64, made)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store, (fd, target, path): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                let state = store.data_mut();
                let cost = ENTRY_COST + target.len() + path.len();
                let budget = state.writes.clone();
                if budget.fits_entry(cost).is_err() {
                    return Ok((Err(ErrorCode::InsufficientSpace),));
                }
                let mut view = state.filesystem();
                let made = HostDescriptor::symlink_at(&mut view, fd, target, path).await;
                settle(&mut view, &budget, |_| cost as u64, made)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store,
         (fd, old_flags, old_path, new_fd, new_path): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let state = store.data_mut();
                let cost = ENTRY_COST + new_path.len();
                let budget = state.writes.clone();
                if budget.fits_entry(cost).is_err() {
                    return Ok((Err(ErrorCode::InsufficientSpace),));
                }
                let mut view = state.filesystem();
                let made =
                    HostDescriptor::link_at(&mut view, fd, old_flags, old_path, new_fd, new_path)
                        .await;
                settle(&mut view, &budget, |_| cost as u64, made)
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The guest's view of a charged filesystem call: on success, `cost` of what
/// it returned is taken from the budget (checked before, charged after, so a
/// call that fails costs nothing; a call runs one guest at a time, so nothing
/// spends in between).
fn settle<T>(
    view: &mut wasmtime_wasi::filesystem::WasiFilesystemCtxView<'_>,
    budget: &WriteBudget,
    cost: impl FnOnce(&T) -> u64,
    done: wasmtime_wasi::p2::FsResult<T>,
) -> wasmtime::Result<(Result<T, ErrorCode>,)> {
    match done {
        Ok(value) => {
            budget.spend(cost(&value));
            Ok((Ok(value),))
        }
        Err(error) => Ok((Err(view.convert_error_code(error)?),)),
    }
}

type Opened = Result<(Result<Resource<DynOutputStream>, ErrorCode>,), wasmtime::Error>;

fn stream_result(
    state: &mut CallState,
    opened: wasmtime_wasi::p2::FsResult<Resource<DynOutputStream>>,
) -> Opened {
    match opened {
        Ok(stream) => {
            charge_stream(state, &stream)?;
            Ok((Ok(stream),))
        }
        Err(error) => Ok((Err(state.filesystem().convert_error_code(error)?),)),
    }
}
