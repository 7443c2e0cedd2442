//! upkeep: an autonomous maintenance bot for git repositories.
//!
//! The binary (`src/main.rs`) is a thin shell over this library: it parses the command line,
//! runs [`run::run`] and maps the outcome to an exit code. Everything a run does lives
//! here, so that tests and other front ends can drive it the same way.

pub mod actions;
pub mod agent;
pub mod briefing;
pub mod cli;
pub mod commands;
pub mod config;
pub mod conversation;
pub mod dashboard;
pub mod demo;
pub mod events;
pub mod exec;
pub mod exit;
pub mod fleet;
pub mod forge;
pub mod http;
pub mod init;
pub mod instructions;
pub mod kinds;
pub mod limits;
pub mod llm;
pub mod logging;
pub mod outcome;
pub mod preflight;
pub mod progress;
pub mod repo;
pub mod repo_outcome;
pub mod run;
pub mod secrets;
pub mod settings;
pub mod signals;
pub mod startup;
pub mod subagents;
pub mod summary;
pub mod text;
pub mod tools;
