//! The run from its start to its last cycle: the checks before any work, the first clone and
//! `run_started`, then the loop of cycles that continuous mode repeats until a question,
//! nothing to do, a budget or `--max-cycles`.

use crate::config::{ConfigError, Mode, RepoSource};
use crate::events::{Event, Scope};
use crate::repo::StopReason;
use crate::repo::questions::LocalQuestion;

use super::clones::{Carried, CycleClone};
use super::ending::{RunError, RunFailure};
use super::record::{CycleRecord, RunRecord};
use super::shared::{Asking, Run};
use crate::outcome::Outcome;

impl Run<'_> {
    /// The run from its checks to its last cycle.
    pub(super) async fn whole(
        &self,
        asking: &Asking,
        pending: Option<Vec<LocalQuestion>>,
        carried: &mut Carried,
        record: &mut RunRecord,
    ) -> Result<Outcome, RunError> {
        if let Some(end) = self.start(asking, pending, carried, record).await? {
            return Ok(end);
        }
        self.cycles_until_done(asking, carried, record).await
    }

    /// Makes the first clone and emits `run_started`, which names the agent instructions the
    /// clone holds. `run_started` is emitted whether or not the clone succeeded, so every run
    /// that got past its settings reports that it started. A run that a waiting local question
    /// or the operator's schedule holds back ends here (`Some`), with nothing cloned.
    async fn start(
        &self,
        asking: &Asking,
        pending: Option<Vec<LocalQuestion>>,
        carried: &mut Carried,
        record: &mut RunRecord,
    ) -> Result<Option<Outcome>, RunError> {
        let config = self.config;
        let held = match pending {
            Some(_) => None,
            None => self.outside_operator_schedule(),
        };
        let first = match (&pending, &held) {
            (None, None) => Some(self.first_clone(carried).await),
            _ => None,
        };
        let first_clone = first.as_ref().and_then(|first| first.as_ref().ok());
        let instructions_files = first_clone
            .and_then(|first| first.workspace.files(&[]).ok())
            .and_then(|tree| crate::instructions::read(&tree, &|_| {}))
            .map(|found| vec![found.file])
            .unwrap_or_default();
        let (base, base_from) = match first_clone {
            Some(first) => (
                Some(first.workspace.base_branch().to_owned()),
                Some(self.base_origin(&first.workspace, &first.settings, carried)),
            ),
            None => (None, None),
        };
        self.events.emit(
            Scope::default(),
            Event::RunStarted {
                repo: config.source.display_name(),
                mode: config.mode.as_str().into(),
                provider: asking.provider.name().into(),
                model: asking.provider.model().into(),
                dangerous_tools: config.dangerous_tools,
                sandbox: self
                    .commands
                    .sandbox
                    .map(|plan| crate::exec::SandboxReport::new(&plan, &config.commands.limits)),
                declared_tools: crate::briefing::exposed_declared_tools(config, &config.operator.tools),
                instructions_files,
                base,
                base_from,
            },
        );
        if let Some(pending) = pending {
            if let RepoSource::Local(path) = &config.source {
                self.events
                    .say(&crate::conversation::local::describe_pending(path, &pending));
            }
            record.question = pending.first().map(|q| q.question.clone());
            return Ok(Some(Outcome::Question));
        }
        if let Some(held) = held {
            return Ok(Some(self.held(held)));
        }
        if let Some(first) = first {
            carried.first = Some(first?);
        }
        Ok(None)
    }

    /// One cycle, then another in continuous mode while the model completes work, up to
    /// `--max-cycles`.
    async fn cycles_until_done(
        &self,
        asking: &Asking,
        carried: &mut Carried,
        record: &mut RunRecord,
    ) -> Result<Outcome, RunError> {
        let config = self.config;
        loop {
            let cycle = record.cycles + 1;
            let mut done = CycleRecord::default();
            let end = self
                .cycle(cycle, asking, carried, &record.pull_requests, &mut done)
                .await;
            let findings = done.findings.clone();
            record.add(done);
            if let Some(held) = end.as_ref().ok().copied().filter(|outcome| outcome.is_held_back()) {
                // The cycle never started: no model call, nothing opened.
                return Ok(held);
            }
            record.cycles = cycle;
            let outcome = match &end {
                Ok(end) => *end,
                // An interrupted cycle is `error`; the run's outcome says `interrupted`.
                Err(RunError::Stopped(StopReason::Deadline)) => Outcome::Limit,
                Err(_) => Outcome::Error,
            };
            self.events.emit(
                Scope {
                    cycle: Some(cycle),
                    turn: None,
                },
                Event::CycleFinished {
                    outcome,
                    unresolved_findings: findings,
                },
            );
            let end = end.map_err(|error| match error {
                // After the first cycle the work has started: what was a usage error before
                // (a base branch deleted on the remote, a broken .upkeep.toml merged) is a failure.
                RunError::Usage(error) if cycle > 1 => RunError::Failure(RunFailure::Settings(error)),
                RunError::Unworkable(error) if cycle > 1 => RunError::Failure(RunFailure::Git(error)),
                other => other,
            })?;
            match (config.mode, end) {
                (Mode::Continuous, Outcome::PullRequest | Outcome::Completed) if cycle < config.max_cycles => continue,
                (Mode::Continuous, Outcome::PullRequest | Outcome::Completed) => {
                    self.events
                        .say(&format!("upkeep: --max-cycles {} reached", config.max_cycles));
                    return Ok(Outcome::MaxCycles);
                }
                (_, end) => return Ok(end),
            }
        }
    }

    /// The first cycle's clone and settings, for the run and for `upkeep prompt` alike: a
    /// pull request to follow up is checked first, then the repository is cloned and read.
    pub(super) async fn first_clone(&self, carried: &mut Carried) -> Result<CycleClone, RunError> {
        carried.pull_request_base = self.check_pull_request().await?;
        self.prepare(1, carried).await
    }

    /// `--pr N`: refuses, before any work, a pull request the bot did not open or that is not
    /// open (exit 2); the branch it targets is the base every cycle clones.
    async fn check_pull_request(&self) -> Result<Option<String>, RunError> {
        let Some(number) = self.config.pull_request else {
            return Ok(None);
        };
        let feedback = self
            .forge
            .pull_request_feedback(number)
            .await
            .map_err(|error| RunError::Failure(RunFailure::Forge(error)))?;
        crate::conversation::follow_up::check_workable(&feedback.pull_request)
            .map_err(|reason| RunError::Usage(ConfigError::key("--pr", reason)))?;
        Ok(Some(feedback.pull_request.base))
    }
}
