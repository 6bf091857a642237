//! A finished call's store, dropped once its caller has gone on.
//!
//! Dropping a store frees its instance, and the pooling allocator then
//! resets the instance's memory: a page-map scan, a copy of the pages it
//! keeps resident and a decommit of the rest. For an interpreter's image
//! that takes about 0.1 ms, which the caller would otherwise wait for before
//! it has its answer. A task of its own drops the store instead, and then
//! the call's slot: a slot is free again only once its instance is gone, so
//! the slots still bound the instances alive, and a retired store holds its
//! descriptors within its slot's share until then.
//!
//! The task is spawned on the runtime's thread that ran the call, which runs
//! it when the caller's task next waits (for a server, once the answer is
//! written): the drop's work stays on that thread, rather than being handed
//! to another, whose wake-up and cross-core page-table flushes cost more
//! than the drop.
//!
//! When a residency pass is due (`engine::resident`), it runs first, while
//! the store still holds the pages its call wrote, on a blocking thread
//! (once in dozens of calls), the store dropped there after it.

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;

use super::store::CallState;
use crate::runtime::resident::Pass;

/// Drops `store`, then gives `slot` back, after the caller goes on, and
/// then runs `next` (making the next call's instance); at once outside an
/// async runtime, and then without `next`. A residency `pass` due runs
/// before the store is dropped.
pub(in crate::runtime) fn retire(
    store: Store<CallState>,
    slot: OwnedSemaphorePermit,
    next: Option<impl Future<Output = ()> + Send + 'static>,
    pass: Option<Pass>,
) {
    let passing = pass.is_some();
    let free = move || {
        if let Some(pass) = pass {
            pass.run();
        }
        drop(store);
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(async move {
            // A pass reads every slot's page map, which with many slots
            // takes milliseconds: on a blocking thread, so that the
            // runtime's thread goes on serving calls meanwhile.
            if passing {
                let _ = tokio::task::spawn_blocking(free).await;
            } else {
                free();
            }
            drop(slot);
            if let Some(next) = next {
                next.await;
            }
        })),
        Err(_) => {
            free();
            drop(slot);
        }
    }
}
