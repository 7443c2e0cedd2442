//! upkeep: an autonomous maintenance bot for git repositories.
//!
//! The binary (`src/main.rs`) is a thin shell over this library: it parses the command line,
//! runs [`run::run`] and maps the outcome to an exit code. Everything a run does lives
//! here, so that tests and other front ends can drive it the same way.

#![warn(unreachable_pub)]
// The code's documentation is built with its private items (`cargo doc --document-private-items`,
// as CI does): a public item's docs may name the private parts it is built from.
#![allow(rustdoc::private_intra_doc_links)]

pub(crate) mod actions;
pub mod agent;
pub(crate) mod briefing;
pub(crate) mod ci_workflows;
pub mod cli;
pub mod commands;
pub mod config;
pub(crate) mod conversation;
pub mod dashboard;
pub mod demo;
pub(crate) mod events;
pub mod exec;
pub mod exit;
pub mod fleet;
pub mod forge;
pub(crate) mod http;
pub mod init;
pub(crate) mod instructions;
pub(crate) mod kinds;
pub(crate) mod limits;
pub mod llm;
pub mod logging;
pub(crate) mod outcome;
pub(crate) mod preflight;
pub(crate) mod progress;
pub mod repo;
pub(crate) mod repo_outcome;
pub(crate) mod run;
pub mod secrets;
pub(crate) mod settings;
pub mod signals;
pub(crate) mod startup;
pub(crate) mod subagents;
pub(crate) mod summary;
pub mod text;
pub mod tools;
