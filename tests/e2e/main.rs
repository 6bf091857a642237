//! End-to-end tests: real components, the real CLI binary, the library API.
//!
//! They need the built components (`make setup`); `make test` builds them.

mod access;
mod agent;
mod agent_cli;
mod agent_routers;
mod agent_runs;
mod architecture;
mod ask_terminal;
mod audit;
mod audit_durability;
mod audit_postgres;
mod cli;
mod cli_reference;
mod code_mode;
mod code_mode_run;
mod code_mode_task;
mod common;
mod concurrency;
mod docs_examples;
mod docs_links;
mod entries;
mod error_kinds;
mod fair_use;
mod grants;
mod hardening;
mod hardening_cli;
mod health;
mod hot_code;
mod http_threads;
mod identity;
mod in_flight;
mod interpreters;
mod kept_listing;
mod kept_resident;
mod loading;
mod made_ahead;
mod mcp;
mod metrics;
mod network;
mod notebook;
mod oauth;
mod oci;
mod oci_entry;
mod oci_hostile;
mod oci_trust;
mod otlp;
mod otlp_receiver;
mod pipeline_promises;
mod policy;
mod polyglot;
#[path = "../support/postgres.rs"]
mod postgres;
mod provider_server;
mod providers;
#[path = "../support/redis.rs"]
mod redis;
#[path = "../support/registry.rs"]
mod registry;
mod remote_mcp;
mod remote_mcp_live;
mod sandbox;
mod scaffold;
mod scripts;
mod secrets;
mod shared_cache;
mod shared_store;
mod threat_model;
mod tools_mcp;
mod wat_tool;
mod what_models_write;
