//! The run as a whole: what it holds between cycles ([`Runner`]), how it starts (the checks
//! before any work, the first clone, `run_started`) and the loop of cycles that continuous mode
//! repeats until a question, nothing to do, a budget or `--max-cycles`.

use tokio_util::sync::CancellationToken;

use crate::agent::budget::Budget;
use crate::config::{Config, ConfigError, Mode, RepoSource};
use crate::conversation::local::LocalResume;
use crate::conversation::{ConversationError, CycleWork};
use crate::dashboard::DashboardPlan;
use crate::events::{Event, EventSink, Scope};
use crate::forge::Forge;
use crate::limits::{Held, Limits};
use crate::llm;
use crate::repo::cleanup;
use crate::repo::questions::LocalQuestion;
use crate::repo::{Stop, StopReason, Workspace};
use crate::summary::RunSummary;
use crate::tools::CommandSettings;

use super::build_forge;
use super::clones::CycleClone;
use super::ending::RunError;
use crate::outcome::Outcome;

pub(super) struct Runner<'a> {
    pub(super) config: &'a Config,
    pub(super) events: &'a EventSink,
    pub(super) cancel: &'a CancellationToken,
    pub(super) cycles: u32,
    pub(super) budget: Option<Budget>,
    pub(super) pull_requests: Vec<crate::forge::PullRequest>,
    pub(super) question: Option<String>,
    /// Continuous mode: the clone the last cycle ended in, refreshed in place for the next one
    /// instead of cloning again. Only held between cycles; dropping it removes the directory.
    pub(super) kept: Option<Workspace>,
    /// The run's temporary directories, waited for before the run reports.
    pub(super) scope: cleanup::Scope,
    /// Changes left in clones that no pull request carries, for the run's summary.
    pub(super) unsaved: Vec<crate::repo::UnsavedChanges>,
    /// The operator's command settings plus the sandbox decided for this run.
    pub(super) commands: CommandSettings,
    /// What the conversation on the forge gives the run (see [`crate::conversation`]).
    pub(super) conversation: ConversationState,
    /// Review findings the last cycle's pull request opened with (section 12).
    pub(super) cycle_findings: Vec<String>,
    /// Every cycle's, for the run's summary.
    pub(super) run_findings: Vec<String>,
    /// Set once a cycle read `dashboard = true`: what the dashboard after the run needs.
    pub(super) dashboard: Option<DashboardPlan>,
    /// The fix attempts made and the pull requests given up on, for the run's summary.
    pub(super) fix_attempts: Vec<crate::summary::FixAttemptReport>,
}

/// What every cycle of a run works with, built once before any work.
struct RunParts {
    provider: Box<dyn llm::Provider>,
    forge: Box<dyn Forge>,
    models: crate::subagents::Models,
    sandbox: Option<crate::exec::SandboxPlan>,
}

/// The run's part of the conversation: the local question it resumes until a cycle settles
/// it, the first cycle's clone (made before `run_started`, which names the agent instructions
/// it holds), and the base of the pull request a `--pr` run follows up.
#[derive(Default)]
pub(super) struct ConversationState {
    pub(super) resumed: Option<LocalQuestion>,
    pub(super) first: Option<CycleClone>,
    pub(super) pull_request_base: Option<String>,
}

impl<'a> Runner<'a> {
    /// A run that has not started.
    pub(super) fn new(config: &'a Config, events: &'a EventSink, cancel: &'a CancellationToken) -> Self {
        let resumed = match &config.local_questions {
            LocalResume::Resume(question) => Some(question.clone()),
            LocalResume::Nothing | LocalResume::Pending(_) => None,
        };
        Runner {
            config,
            events,
            cancel,
            cycles: 0,
            budget: None,
            pull_requests: Vec::new(),
            question: None,
            kept: None,
            scope: cleanup::Scope::new(),
            unsaved: Vec::new(),
            commands: config.commands.clone(),
            conversation: ConversationState {
                resumed,
                ..ConversationState::default()
            },
            cycle_findings: Vec::new(),
            run_findings: Vec::new(),
            dashboard: None,
            fix_attempts: Vec::new(),
        }
    }
}

impl Runner<'_> {
    /// What the run did, once it ended as `outcome`.
    pub(super) fn into_summary(self, outcome: Outcome, error: Option<String>) -> RunSummary {
        let (usage, cost_usd, turns) = self
            .budget
            .as_ref()
            .map(|budget| (budget.usage, budget.cost_usd, budget.turns))
            .unwrap_or_default();
        RunSummary {
            outcome,
            cycles: self.cycles,
            turns,
            usage,
            cost_usd,
            pull_requests: self.pull_requests,
            question: self.question,
            error,
            unsaved_changes: self.unsaved,
            unresolved_findings: self.run_findings,
            fix_attempts: self.fix_attempts,
        }
    }

    /// The run from its checks to its last cycle.
    pub(super) async fn run(&mut self) -> Result<Outcome, RunError> {
        let pending = match &self.config.local_questions {
            LocalResume::Pending(pending) => Some(pending.clone()),
            LocalResume::Resume(question) => {
                crate::conversation::local::record_answer(self.config, question).await?;
                None
            }
            LocalResume::Nothing => None,
        };
        let parts = self.equip().await?;
        if let Some(end) = self.start(&parts, pending).await? {
            return Ok(end);
        }
        self.cycles_until_done(&parts).await
    }

    /// What every cycle of the run uses, built before any work: a bad provider, forge, model
    /// table or a sandbox `--require-sandbox` cannot have is a usage error here.
    async fn equip(&mut self) -> Result<RunParts, RunError> {
        let config = self.config;
        let provider = llm::build(&config.provider)?;
        crate::llm::tokens::preload(provider.name(), provider.model());
        let forge = build_forge(config)?;
        let models = crate::subagents::Models::build(config)?;
        let commands_enabled =
            config.dangerous_tools || !config.allow_tools.is_empty() || !config.agents.checks.is_empty();
        let sandbox = if commands_enabled {
            Some(self.decide_sandbox().await?)
        } else {
            None
        };
        self.budget = Some(Budget::new(config.budgets, None));
        Ok(RunParts {
            provider,
            forge,
            models,
            sandbox,
        })
    }

    /// Makes the first clone and emits `run_started`, which names the agent instructions the
    /// clone holds. `run_started` is emitted whether or not the clone succeeded, so every run
    /// that got past its settings reports that it started. A run that a waiting local question
    /// or the operator's schedule holds back ends here (`Some`), with nothing cloned.
    async fn start(
        &mut self,
        parts: &RunParts,
        pending: Option<Vec<LocalQuestion>>,
    ) -> Result<Option<Outcome>, RunError> {
        let config = self.config;
        let held = match pending {
            Some(_) => None,
            None => self.outside_operator_schedule(),
        };
        let first = match (&pending, &held) {
            (None, None) => Some(self.first_clone(parts.forge.as_ref()).await),
            _ => None,
        };
        let instructions_files = first
            .as_ref()
            .and_then(|first| first.as_ref().ok())
            .and_then(|first| first.workspace.files(&[]).ok())
            .and_then(|tree| crate::instructions::read(&tree, &|_| {}))
            .map(|found| vec![found.file])
            .unwrap_or_default();
        let (base, base_from) = match first.as_ref().and_then(|first| first.as_ref().ok()) {
            Some(first) => (
                Some(first.workspace.base_branch().to_owned()),
                Some(self.base_origin(&first.workspace, &first.settings)),
            ),
            None => (None, None),
        };
        self.events.emit(
            Scope::default(),
            Event::RunStarted {
                repo: config.source.display_name(),
                mode: config.mode.as_str().into(),
                provider: parts.provider.name().into(),
                model: parts.provider.model().into(),
                dangerous_tools: config.dangerous_tools,
                sandbox: parts
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
            self.question = pending.first().map(|q| q.question.clone());
            return Ok(Some(Outcome::Question));
        }
        if let Some(held) = held {
            return Ok(Some(self.held(held)));
        }
        if let Some(first) = first {
            self.conversation.first = Some(first?);
        }
        Ok(None)
    }

    /// One cycle, then another in continuous mode while the model completes work, up to
    /// `--max-cycles`.
    async fn cycles_until_done(&mut self, parts: &RunParts) -> Result<Outcome, RunError> {
        let config = self.config;
        loop {
            self.cycles += 1;
            let cycle = self.cycles;
            let end = self
                .cycle(cycle, parts.provider.as_ref(), &parts.models, parts.forge.as_ref())
                .await;
            if let Some(held) = end.as_ref().ok().copied().filter(|outcome| outcome.is_held_back()) {
                // The cycle never started: no model call, nothing opened.
                self.cycles -= 1;
                return Ok(held);
            }
            let outcome = match &end {
                Ok(end) => *end,
                // An interrupted cycle is `error`; the run's outcome says `interrupted`.
                Err(RunError::Stopped(StopReason::Deadline)) => Outcome::Limit,
                Err(_) => Outcome::Error,
            };
            let findings = std::mem::take(&mut self.cycle_findings);
            self.run_findings.extend(findings.iter().cloned());
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
                RunError::Usage(error) if cycle > 1 => RunError::Failure(error.into()),
                RunError::Unworkable(error) if cycle > 1 => RunError::Failure(error.into()),
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
    pub(super) async fn first_clone(&mut self, forge: &dyn Forge) -> Result<CycleClone, RunError> {
        self.check_pull_request(forge).await?;
        self.prepare(1).await
    }

    /// `--pr N`: refuses, before any work, a pull request the bot did not open or that is not
    /// open (exit 2), and clones from the branch it targets.
    async fn check_pull_request(&mut self, forge: &dyn Forge) -> Result<(), RunError> {
        let Some(number) = self.config.pull_request else {
            return Ok(());
        };
        let feedback = forge
            .pull_request_feedback(number)
            .await
            .map_err(|error| RunError::Failure(error.into()))?;
        crate::conversation::follow_up::check_workable(&feedback.pull_request)
            .map_err(|reason| RunError::Usage(ConfigError::key("--pr", reason)))?;
        self.conversation.pull_request_base = Some(feedback.pull_request.base);
        Ok(())
    }

    /// The cycle's conversation on the forge; checks the clone out on the branch it continues.
    pub(super) async fn conversation(
        &self,
        cycle: u32,
        forge: &dyn Forge,
        workspace: &Workspace,
        settings: &crate::config::RepoSettings,
    ) -> Result<CycleWork, RunError> {
        crate::conversation::for_cycle(
            self.config,
            settings,
            forge,
            workspace,
            self.conversation.resumed.as_ref(),
            &|text| self.events.say(text),
        )
        .await
        .map_err(|error| match error {
            ConversationError::Refused(reason) if cycle == 1 => RunError::Usage(ConfigError(reason)),
            ConversationError::Refused(reason) => RunError::Failure(anyhow::anyhow!(reason)),
            ConversationError::Workspace(error) => RunError::from(error),
            ConversationError::Forge(crate::forge::ForgeError::Workspace(error)) => RunError::from(error),
            ConversationError::Forge(error) => RunError::Failure(error.into()),
        })
    }

    /// What ends git work early: the interrupt and the run's `--timeout` deadline.
    pub(super) fn git_stop(&self) -> Stop {
        Stop::new(self.cancel.clone(), self.budget.as_ref().and_then(Budget::deadline))
    }

    /// Finds out which sandbox commands get on this machine, before any work: `--require-sandbox`
    /// refuses to start without filesystem confinement or network isolation, and without it
    /// what is missing is a warning.
    pub(super) async fn decide_sandbox(&mut self) -> Result<crate::exec::SandboxPlan, RunError> {
        let commands = &self.config.commands;
        let probe = crate::exec::probe().await;
        let plan = crate::exec::SandboxPlan::decide(&probe, commands.allow_network);
        if let Some(missing) = plan.missing_requirements() {
            if commands.require_sandbox {
                return Err(
                    ConfigError(format!("--require-sandbox: this system cannot give commands {missing}")).into(),
                );
            }
            tracing::warn!("commands the model runs will have no {missing}");
        }
        self.commands.sandbox = Some(plan);
        Ok(plan)
    }

    /// Whether the operator's `schedule` holds work back now (the repository's own schedule is
    /// read from its clone, in [`Runner::cycle`]).
    pub(super) fn outside_operator_schedule(&self) -> Option<Held> {
        Limits::operator_only(self.config.operator.limit_keys()).outside_schedule(jiff::Timestamp::now())
    }

    /// A cycle held back by a limit: says why (`limit_reached`), opens nothing.
    pub(super) fn held(&self, held: Held) -> Outcome {
        self.events.emit(
            Scope::default(),
            Event::LimitReached {
                limit: held.by.as_str().to_owned(),
                message: held.message,
            },
        );
        Outcome::from(held.by)
    }
}
