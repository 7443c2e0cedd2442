//! Per-repository run options in a TOML fleet list (`[[repos]]` tables).
//!
//! The keys are `upkeep run`'s long options with `_` for `-` (`max_cost`, `allow_tool`...), with
//! the option's value type; a key given here replaces the fleet's value for that repository
//! only (a `false` switches a fleet-wide flag off). Options that belong to the fleet as a
//! whole (`--json`, `--trace`, `--quiet`, the commit author) are not per repository. Unknown
//! keys are errors, so a typo does not silently do nothing. The list is the operator's file,
//! as trusted as the command line.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cli::{ForgeKind, ProviderKind, RunArgs};
use crate::config::ConfigError;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOverrides {
    pub task: Option<String>,
    pub task_file: Option<PathBuf>,
    pub continuous: Option<bool>,
    pub max_cycles: Option<u32>,
    pub max_turns: Option<u32>,
    pub allow_dangerous_tools: Option<bool>,
    pub provider: Option<ProviderKind>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub request_timeout: Option<u64>,
    pub replay: Option<PathBuf>,
    pub forge: Option<ForgeName>,
    pub base: Option<String>,
    pub dry_run: Option<bool>,
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
    /// A duration such as `30m`.
    pub timeout: Option<String>,
    pub label: Option<String>,
    pub config: Option<PathBuf>,
    pub depth: Option<u32>,
    pub draft: Option<bool>,
    pub shell_timeout: Option<u64>,
    pub env: Option<Vec<String>>,
    pub allow_tool: Option<Vec<String>>,
    pub require_sandbox: Option<bool>,
    pub allow_network: Option<bool>,
    pub structured_output: Option<crate::kinds::StructuredOutputMode>,
    pub max_reply_tokens: Option<u64>,
}

/// `--forge` as written in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeName {
    Github,
    Local,
    None,
}

impl From<ForgeName> for ForgeKind {
    fn from(name: ForgeName) -> Self {
        match name {
            ForgeName::Github => ForgeKind::Github,
            ForgeName::Local => ForgeKind::Local,
            ForgeName::None => ForgeKind::None,
        }
    }
}

impl RunOverrides {
    /// Paths in the list are relative to the list file's directory.
    pub fn relative_to(mut self, dir: &Path) -> Self {
        for path in [&mut self.task_file, &mut self.replay, &mut self.config]
            .into_iter()
            .flatten()
        {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
        self
    }

    /// Applies these options over the fleet's defaults.
    pub fn apply(&self, args: &mut RunArgs) -> Result<(), ConfigError> {
        fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
            if let Some(value) = value {
                *slot = value.clone();
            }
        }
        fn set_some<T: Clone>(slot: &mut Option<T>, value: &Option<T>) {
            if value.is_some() {
                slot.clone_from(value);
            }
        }
        if self.task.is_some() || self.task_file.is_some() {
            // One replaces the other, as on a command line that gives only one of them.
            args.task.clone_from(&self.task);
            args.task_file.clone_from(&self.task_file);
        }
        set(&mut args.continuous, &self.continuous);
        set_some(&mut args.max_cycles, &self.max_cycles);
        set_some(&mut args.max_turns, &self.max_turns);
        set(&mut args.allow_dangerous_tools, &self.allow_dangerous_tools);
        set_some(&mut args.provider, &self.provider);
        set_some(&mut args.model, &self.model);
        set_some(&mut args.base_url, &self.base_url);
        set_some(&mut args.request_timeout, &self.request_timeout);
        set_some(&mut args.replay, &self.replay);
        if let Some(forge) = self.forge {
            args.forge = Some(forge.into());
        }
        set_some(&mut args.base, &self.base);
        set(&mut args.dry_run, &self.dry_run);
        set_some(&mut args.max_tokens, &self.max_tokens);
        set_some(&mut args.max_cost, &self.max_cost);
        if let Some(timeout) = &self.timeout {
            let parsed = timeout
                .parse::<humantime::Duration>()
                .map_err(|error| ConfigError::key("timeout", format!("{timeout:?}: {error}")))?;
            args.timeout = Some(parsed);
        }
        set_some(&mut args.label, &self.label);
        set_some(&mut args.config, &self.config);
        set_some(&mut args.depth, &self.depth);
        set(&mut args.draft, &self.draft);
        set_some(&mut args.shell_timeout, &self.shell_timeout);
        set(&mut args.pass_env, &self.env);
        set(&mut args.allow_tool, &self.allow_tool);
        set(&mut args.require_sandbox, &self.require_sandbox);
        set(&mut args.allow_network, &self.allow_network);
        set_some(&mut args.structured_output, &self.structured_output);
        set_some(&mut args.max_reply_tokens, &self.max_reply_tokens);
        Ok(())
    }
}
