//! The cycle's clone: made (or, in continuous mode, the last one refreshed in place), its
//! `.upkeep.toml` read through the gate and combined with the operator's settings, and, before
//! it is removed, what it holds that no pull request carries reported and `--keep-clone` served.
//! What passes from the start of the run and from one cycle to the next (the kept clone among
//! it) is named in one place, [`Carried`].

use crate::config::{ConfigError, FileConfig, Mode, REPO_CONFIG_FILE, RepoSettings, RepoSource};
use crate::conversation::local::LocalResume;
use crate::events::{BaseOrigin, Event, Scope};
use crate::repo::questions::LocalQuestion;
use crate::repo::{CloneRequest, GitAuth, UnsavedChanges, Workspace};

use super::ending::{RunError, RunFailure};
use super::shared::Run;

/// Largest `.upkeep.toml` read.
const MAX_REPO_CONFIG_BYTES: u64 = 256 * 1024;

/// A cycle's clone: its workspace, the repository's settings read from it, and whether the next
/// cycle of continuous mode may refresh it in place.
pub(super) struct CycleClone {
    pub(super) workspace: Workspace,
    pub(super) settings: RepoSettings,
    /// Not when the base came from the default branch's `.upkeep.toml`, which a refresh of the
    /// base alone would not see change.
    pub(super) reusable: bool,
}

impl CycleClone {
    fn new(workspace: Workspace, settings: RepoSettings, reusable: bool) -> Self {
        CycleClone {
            workspace,
            settings,
            reusable,
        }
    }
}

/// What the start of the run and each cycle hand the next cycle.
#[derive(Default)]
pub(super) struct Carried {
    /// The local question the run resumes, until a cycle settles it.
    pub(super) resumed: Option<LocalQuestion>,
    /// The base of the pull request a `--pr` run follows up: every cycle clones it.
    pub(super) pull_request_base: Option<String>,
    /// The first cycle's clone, made before `run_started` (which names the agent instructions
    /// it holds).
    pub(super) first: Option<CycleClone>,
    /// Continuous mode: the clone the last cycle ended in, refreshed in place for the next one
    /// instead of cloning again. Only held between cycles; dropping it removes the directory.
    pub(super) kept: Option<Workspace>,
}

impl Carried {
    /// What a run starts with: the local question it resumes, if any.
    pub(super) fn new(resume: &LocalResume) -> Self {
        let resumed = match resume {
            LocalResume::Resume(question) => Some(question.clone()),
            LocalResume::Nothing | LocalResume::Pending(_) => None,
        };
        Carried {
            resumed,
            ..Carried::default()
        }
    }
}

impl Run<'_> {
    pub(super) async fn clone(&self, base: Option<String>) -> Result<Workspace, RunError> {
        let config = self.config;
        let request = CloneRequest {
            url: config.source.clone_url(),
            is_local: matches!(config.source, RepoSource::Local(_)),
            base,
            depth: config.depth,
            auth: GitAuth {
                token: config.github.token.clone(),
            },
            stall_timeout: config.git_stall_timeout,
            scope: self.scope.clone(),
        };
        Ok(Workspace::clone_repo(request, self.git_stop()).await?)
    }

    /// Refreshes a kept clone in place (on a blocking thread, like a clone).
    pub(super) async fn refresh(&self, workspace: Workspace) -> Result<Workspace, RunError> {
        let auth = GitAuth {
            token: self.config.github.token.clone(),
        };
        Ok(workspace.refresh(auth, self.git_stop()).await?)
    }

    /// Clones (from cycle 2 of continuous mode: refreshes the kept clone), reads `.upkeep.toml`,
    /// and re-clones when the file names another base branch.
    pub(super) async fn prepare(&self, cycle: u32, carried: &mut Carried) -> Result<CycleClone, RunError> {
        let config = self.config;
        // A review follow-up works on its pull request's base, whatever else is configured.
        let explicit_base = carried.pull_request_base.clone().or_else(|| config.operator_base());
        if let Some(kept) = carried.kept.take() {
            match self.refresh(kept).await {
                Ok(workspace) => {
                    let settings = self.repo_settings(&workspace, cycle)?;
                    let same_base = settings
                        .base
                        .as_deref()
                        .is_none_or(|base| base == workspace.base_branch());
                    if explicit_base.is_some() || same_base {
                        return Ok(CycleClone::new(workspace, settings, true));
                    }
                    // `.upkeep.toml` now names another base: start over as cycle 1 does.
                }
                Err(error @ RunError::Stopped(_)) => return Err(error),
                // A refresh that fails leaves the clone in an unknown state (it is removed); a
                // fresh clone either works or reports the real problem (network, auth, base).
                Err(error) => tracing::warn!("could not refresh the clone in place ({error}); cloning afresh"),
            }
        }
        let workspace = self.clone(explicit_base.clone()).await?;
        let settings = self.repo_settings(&workspace, cycle)?;
        match &settings.base {
            Some(base) if explicit_base.is_none() && base != workspace.base_branch() => {
                drop(workspace);
                let workspace = self.clone(Some(base.clone())).await?;
                let settings = self.repo_settings(&workspace, cycle)?;
                Ok(CycleClone::new(workspace, settings, false))
            }
            _ => Ok(CycleClone::new(workspace, settings, true)),
        }
    }

    /// Why the first cycle's clone is on the base it is on, for `run_started.base_from`: the
    /// same order [`Self::prepare`] chooses in.
    pub(super) fn base_origin(&self, workspace: &Workspace, settings: &RepoSettings, carried: &Carried) -> BaseOrigin {
        let config = self.config;
        if carried.pull_request_base.is_some() {
            BaseOrigin::PullRequest
        } else if config.overrides.base.is_some() {
            BaseOrigin::Flag
        } else if config.operator.base.is_some() {
            BaseOrigin::OperatorConfig
        } else if settings.base.as_deref() == Some(workspace.base_branch()) {
            BaseOrigin::RepositoryConfig
        } else if matches!(config.source, RepoSource::Local(_)) {
            BaseOrigin::CheckedOut
        } else {
            BaseOrigin::RemoteDefault
        }
    }

    /// The repository's `.upkeep.toml`, read through the gate (a symlink out of the clone, a
    /// FIFO or an oversized file is refused like a broken file), combined with the operator's.
    pub(super) fn repo_settings(&self, workspace: &Workspace, cycle: u32) -> Result<RepoSettings, RunError> {
        // A clone that cannot be opened is a failure; what the file holds is the repository's.
        let tree = workspace.files(&[]).map_err(RunError::from)?;
        let parsed = tree
            .read_text(REPO_CONFIG_FILE, MAX_REPO_CONFIG_BYTES)
            .map_err(|error| ConfigError(format!("{REPO_CONFIG_FILE}: {error}")))
            .and_then(|text| {
                text.map_or_else(|| Ok(FileConfig::default()), |text| FileConfig::parse_repository(&text))
            });
        match parsed {
            Ok(file) => Ok(self.config.repo_settings(&file)),
            // Found before the first model call of the run: a usage error (exit 2). In a later
            // cycle the file changed under us (someone merged a broken one): a failure.
            Err(error) if cycle == 1 => Err(RunError::Usage(error)),
            Err(error) => Err(RunError::Failure(RunFailure::Settings(error))),
        }
    }

    /// `--keep-clone DIR`: copies the cycle's clone before it is removed (to `DIR`, or
    /// `DIR/cycle-N` in continuous mode) and says where.
    pub(super) async fn keep_clone(&self, cycle: u32, workspace: &Workspace) {
        let Some(dir) = &self.config.keep_clone else {
            return;
        };
        let dest = match self.config.mode {
            Mode::Single => dir.clone(),
            Mode::Continuous => dir.join(format!("cycle-{cycle}")),
        };
        match workspace.keep_at(&dest).await {
            Ok(()) => self.events.alert(&format!(
                "upkeep: the clone of cycle {cycle} is kept at {} (branches: git -C {} branch)",
                dest.display(),
                dest.display()
            )),
            Err(error) => self.events.alert(&format!(
                "upkeep: could not keep the clone at {}: {error}",
                dest.display()
            )),
        }
    }

    /// Reports the changes in the clone that no pull request of the cycle carries, before the
    /// clone is removed: an `unsaved_changes` event, and the files and diff for people; returns
    /// them for the run's summary.
    pub(super) async fn report_unsaved(&self, cycle: u32, workspace: &Workspace) -> Option<UnsavedChanges> {
        let changes = workspace.unsaved_for_report().await?;
        if changes.is_empty() {
            return None;
        }
        self.events.alert(&format!(
            "upkeep: the cycle ended with changes no pull request carries; they are not saved anywhere else:\n{}",
            changes.diff
        ));
        self.events.emit(
            Scope {
                cycle: Some(cycle),
                turn: None,
            },
            Event::UnsavedChanges {
                files: changes.files.clone(),
                diff: changes.diff.clone(),
            },
        );
        Some(changes)
    }
}
