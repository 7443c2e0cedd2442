mod budgets;
mod commands;
mod core;
mod git_http_server;
mod github;
mod model_loop;
mod providers;
mod secrets;
pub mod support;
