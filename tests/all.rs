#![recursion_limit = "256"]
//! One integration-test binary: every suite module runs the real `upkeep` binary or library
//! against real git repositories made in temporary directories and local HTTP servers.

mod suite;
