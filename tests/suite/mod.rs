mod core;
mod git_http_server;
pub mod support;
