//! Engine plumbing, shared by every call: the wasmtime engine and its
//! instance pool (`config`), the epoch ticker, the turns long calls take,
//! admission of calls into slots, compiling (`compile`: relinked first) and
//! the on-disk compile cache, and the live counters metrics read.

pub(in crate::runtime) mod admission;
pub(in crate::runtime) mod cache;
mod compile;
mod config;
pub(in crate::runtime) mod epoch;
pub(in crate::runtime) mod gauges;
pub(in crate::runtime) mod resident;
pub(in crate::runtime) mod turns;

pub use config::*;
