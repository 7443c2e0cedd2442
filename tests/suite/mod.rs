mod core;
mod git_http_server;
mod model_loop;
mod secrets;
pub mod support;
