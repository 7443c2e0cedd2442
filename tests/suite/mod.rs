mod actions;
mod agents;
mod agents_config;
mod branches;
mod budgets;
mod command_line;
mod commands;
mod conformance;
mod context;
mod continuation;
mod conversation;
mod core;
mod docs;
mod encodings;
mod fleet;
mod git_boundary;
mod git_http_server;
mod git_proxy;
mod git_transport;
mod github;
mod hostile_repos;
mod local_clone;
mod model_loop;
mod providers;
mod refresh;
mod review;
// Linux's sandbox, tried from outside (through /proc among others); other systems' side is
// covered by unit tests in src/exec (plan_tests, sys_other_tests).
#[cfg(target_os = "linux")]
mod restricted_machines;
mod sandbox;
mod secrets;
mod small_models;
mod streaming;
pub mod support;
mod unsaved;
