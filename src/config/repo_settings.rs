//! The operator's settings combined with the repository's `.upkeep.toml`, once it is read from
//! the clone: [`RunSettings::repo_settings`] -> [`RepoSettings`].
//!
//! Layers, highest first: flags and environment ([`RunSettings::overrides`]), the operator's file,
//! the repository's file, built-in defaults. Guarantees: the repository cannot loosen the
//! operator's policy. Its `protected_paths` are added to the operator's (or the defaults),
//! never replace them; its `max_turns`, used only where the operator set none, can lower the
//! default but not raise it; its `max_fix_attempts` only lowers the operator's; its declared
//! tools never shadow the operator's; its limits only tighten (see [`crate::limits`]); prices
//! are the operator's alone.

use super::file::{DeclaredToolConfig, FileConfig, REPO_CONFIG_FILE};
use super::{
    DEFAULT_LABEL, DEFAULT_MAX_FIX_ATTEMPTS, DEFAULT_MAX_TURNS, DEFAULT_PROTECTED_PATHS, DEFAULT_TASKS_FILE,
    RepoSettings, RunSettings,
};
use crate::limits::Limits;

impl RunSettings {
    /// Combines flags/environment, the operator's file, the repository's file and defaults.
    pub fn repo_settings(&self, repo_file: &FileConfig) -> RepoSettings {
        let layers = [&self.overrides, &self.operator, repo_file];
        let pick = |get: &dyn Fn(&FileConfig) -> Option<String>| layers.iter().find_map(|layer| get(layer));
        RepoSettings {
            base: pick(&|f| f.base.clone()),
            label: pick(&|f| f.label.clone()).unwrap_or_else(|| DEFAULT_LABEL.into()),
            tasks_file: pick(&|f| f.tasks_file.clone()).unwrap_or_else(|| DEFAULT_TASKS_FILE.into()),
            instructions: pick(&|f| f.instructions.clone()),
            protected_paths: protected_paths(&self.operator, repo_file),
            max_turns: self.max_turns(repo_file),
            max_fix_attempts: self.max_fix_attempts(repo_file),
            declared_tools: declared_tools(&self.operator, repo_file),
            // Prices are the operator's alone (a repository file that sets them is refused).
            prices: self.operator.prices.clone(),
            limits: Limits::resolve(self.operator.limit_keys(), repo_file.limit_keys()),
            dashboard: self.operator.dashboard.or(repo_file.dashboard).unwrap_or(false),
        }
    }

    /// The base branch the operator chose (flag, environment or `--config`), before any
    /// repository is read: a clone starts from it, and the repository's `.upkeep.toml` may name
    /// a base only where the operator named none.
    pub fn operator_base(&self) -> Option<String> {
        [&self.overrides, &self.operator]
            .iter()
            .find_map(|layer| layer.base.clone())
    }

    /// The task label as far as it is known before a clone (flag, environment, `--config`,
    /// else the default): what an Actions `issues` event is checked against. The repository's
    /// `.upkeep.toml` can only be read from a clone; workflows check the label in `if:` anyway.
    pub fn operator_label(&self) -> String {
        [&self.overrides, &self.operator]
            .iter()
            .find_map(|layer| layer.label.clone())
            .unwrap_or_else(|| DEFAULT_LABEL.into())
    }

    /// The flag's or the operator's `max_turns`; else the repository's, capped at the default,
    /// so an untrusted file cannot make a cycle longer than the operator expects.
    fn max_turns(&self, repo_file: &FileConfig) -> u32 {
        [&self.overrides, &self.operator]
            .iter()
            .find_map(|layer| layer.max_turns)
            .unwrap_or_else(|| {
                repo_file
                    .max_turns
                    .map_or(DEFAULT_MAX_TURNS, |asked| asked.min(DEFAULT_MAX_TURNS))
            })
    }
}

impl RunSettings {
    /// The operator's `max_fix_attempts` (else the default), lowered by the repository's: an
    /// untrusted file may spend less on fixing, never more.
    fn max_fix_attempts(&self, repo_file: &FileConfig) -> u32 {
        let operator = [&self.overrides, &self.operator]
            .iter()
            .find_map(|layer| layer.max_fix_attempts)
            .unwrap_or(DEFAULT_MAX_FIX_ATTEMPTS);
        repo_file.max_fix_attempts.map_or(operator, |asked| asked.min(operator))
    }
}

/// The operator's protected paths (or the defaults) plus the repository's: a repository may
/// protect more, never less (it could otherwise publish a workflow or rewrite its own policy).
fn protected_paths(operator: &FileConfig, repo_file: &FileConfig) -> Vec<String> {
    let mut paths = operator
        .protected_paths
        .clone()
        .unwrap_or_else(|| DEFAULT_PROTECTED_PATHS.iter().map(|s| (*s).to_owned()).collect());
    for added in repo_file.protected_paths.iter().flatten() {
        if !paths.contains(added) {
            paths.push(added.clone());
        }
    }
    paths
}

/// The operator's declared tools, then the repository's under names the operator did not
/// declare: the operator's declaration of a name wins, so a repository cannot swap the program
/// behind a tool the operator allowed.
fn declared_tools(operator: &FileConfig, repo_file: &FileConfig) -> Vec<DeclaredToolConfig> {
    let mut declared_tools = operator.tools.clone();
    for tool in &repo_file.tools {
        if !declared_tools.iter().any(|t| t.name == tool.name) {
            declared_tools.push(DeclaredToolConfig {
                declared_in: REPO_CONFIG_FILE.to_owned(),
                ..tool.clone()
            });
        }
    }
    declared_tools
}
