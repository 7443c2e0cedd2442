mod core;
mod git_http_server;
mod model_loop;
pub mod support;
