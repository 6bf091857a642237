//! End-to-end tests: real components, the real CLI binary, the library API.
//!
//! They need the built components (`make setup`); `make test` builds them.

mod agent;
mod agent_cli;
mod cli;
mod code_mode;
mod common;
mod concurrency;
mod hardening;
mod hardening_cli;
mod interpreters;
mod loading;
mod mcp;
mod network;
mod policy;
mod polyglot;
mod provider_server;
mod providers;
mod sandbox;
mod scaffold;
