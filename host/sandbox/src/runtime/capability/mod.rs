//! What a tool can reach beyond its own memory, one module per capability,
//! each granted only by the call's validated policy: folders (`wasi`,
//! `writes`, `scratch`), the network (`net`: grants and address classes;
//! `http`: outgoing wasi:http under them), session state
//! (`session_state`), logs and events (`log`, `emit`), other agents
//! (`delegate`) and other tools (`tool_calls`).

pub(in crate::runtime) mod delegate;
pub(in crate::runtime) mod emit;
pub(in crate::runtime) mod http;
pub(in crate::runtime) mod log;
pub(in crate::runtime) mod net;
pub(in crate::runtime) mod scratch;
pub(in crate::runtime) mod session_state;
pub(in crate::runtime) mod tool_calls;
pub(in crate::runtime) mod wasi;
pub(in crate::runtime) mod writes;
