mod commands;
mod core;
mod github;
mod git_http_server;
mod model_loop;
mod secrets;
pub mod support;
