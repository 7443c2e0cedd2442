//! The one error of configuration: a problem with the command line, the environment or a
//! config file, found before any work started (or, for `.upkeep.toml`, before the first model
//! call).
//!
//! It is a leaf: every module that checks a setting can return it without depending on how a
//! whole [`crate::config::Config`] is resolved. Its message names the offending flag or key, and the
//! caller maps it to exit code 2. It is for the operator's input only: a failure at run time
//! (a file that cannot be written, a clone that cannot be read) has its own error type with
//! its source, and exits 1.
//!
//! Two are equal when they say the same (a fleet says an error every repository shares once).

/// A problem with the command line or a config file, found before any work started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl ConfigError {
    pub fn key(key: &str, problem: impl std::fmt::Display) -> Self {
        ConfigError(format!("invalid `{key}`: {problem}"))
    }
}
