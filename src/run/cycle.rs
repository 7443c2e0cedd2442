//! One cycle: the limits and the schedule checked, the conversation and the briefing read, the
//! agent run on the clone, and its outcome turned into how the cycle ended (a question posted,
//! the clone kept for the next cycle or removed).

use crate::agent::budget::{Budget, Limit};
use crate::agent::{Agent, CycleError, CycleOutcome};
use crate::briefing::{Briefing, BriefingError, brief};
use crate::config::{Mode, RepoSettings};
use crate::conversation::CycleWork;
use crate::conversation::fix::{ChecksPlan, ChecksReport, GiveUp};
use crate::dashboard::DashboardPlan;
use crate::events::{Event, Scope};
use crate::forge::Forge;
use crate::limits::Held;
use crate::llm::{Provider, pricing};
use crate::repo::{WorkTree, Workspace};
use crate::tools::{CyclePullRequests, FinishStatus, PullRequestScope, ToolContext};

use super::clones::CycleClone;
use super::ending::RunError;
use super::runner::Runner;
use crate::outcome::Outcome;

/// What a cycle starts from, or why it has nothing to do.
pub(super) enum CycleBrief {
    Ready {
        files: WorkTree,
        briefing: Box<Briefing>,
        /// Bot pull requests whose checks upkeep stops working: the run says so on each.
        gave_up: Vec<GiveUp>,
    },
    /// Nothing to do, and why (no feedback waits on the pull request): no model is asked.
    Nothing(String),
    /// The pull request's checks leave no fix cycle to run (DESIGN section 14).
    Checks {
        report: Option<ChecksReport>,
        plan: Box<ChecksPlan>,
    },
}

/// What the agent of a cycle works with.
struct CycleInputs<'c> {
    cycle: u32,
    workspace: &'c Workspace,
    settings: &'c RepoSettings,
    files: &'c WorkTree,
    briefing: &'c Briefing,
    provider: &'c dyn Provider,
    models: &'c crate::subagents::Models,
    forge: &'c dyn Forge,
}

impl Runner<'_> {
    pub(super) async fn cycle(
        &mut self,
        cycle: u32,
        provider: &dyn Provider,
        models: &crate::subagents::Models,
        forge: &dyn Forge,
    ) -> Result<Outcome, RunError> {
        let config = self.config;
        // Outside the operator's schedule nothing is cloned either.
        if let Some(end) = self
            .outside_operator_schedule()
            .and_then(|held| self.hold_or_pass(held))
        {
            return Ok(end);
        }
        let CycleClone {
            workspace,
            settings,
            reusable,
        } = match self.conversation.first.take() {
            Some(first) => first,
            None => self.prepare(cycle).await?,
        };
        let base = workspace.base_branch().to_owned();
        if let Some(held) = self.check_limits(&settings, &base, forge).await? {
            return Ok(held);
        }
        self.events.emit(
            Scope {
                cycle: Some(cycle),
                turn: None,
            },
            Event::CycleStarted {
                base: base.clone(),
                declared_tools: crate::briefing::exposed_declared_tools(config, &settings.declared_tools),
            },
        );

        let (files, briefing) = match self.brief_cycle(cycle, forge, &workspace, &settings).await? {
            CycleBrief::Ready {
                files,
                briefing,
                gave_up,
            } => {
                for give_up in gave_up {
                    self.say_gave_up(give_up, forge).await;
                }
                (files, briefing)
            }
            CycleBrief::Nothing(reason) => {
                self.events.say(&format!("nothing to do: {reason}"));
                return Ok(Outcome::NoTasks);
            }
            CycleBrief::Checks { report, plan } => {
                if let Some(report) = &report {
                    self.emit_checks(cycle, report.pr, &report.sha, &report.state);
                }
                return Ok(self.stop_on_checks(*plan, forge).await);
            }
        };
        if let Some((number, fix)) = briefing
            .continued
            .as_ref()
            .and_then(|continued| continued.fix.as_deref().map(|fix| (continued.number, fix)))
        {
            let state = crate::forge::checks::ChecksState::Failing(fix.failing.clone());
            self.emit_checks(cycle, number, &fix.attempt.sha, &state);
            self.events.emit(
                Scope {
                    cycle: Some(cycle),
                    turn: None,
                },
                Event::FixAttempt {
                    pr: number,
                    attempt: fix.attempt.attempt,
                    max: fix.max,
                },
            );
            self.fix_attempts.push(crate::summary::FixAttemptReport {
                pr: number,
                attempt: fix.attempt.attempt,
                max: fix.max,
                gave_up: false,
            });
        }

        let opened_before = self.pull_requests.len();
        let outcome = self
            .work(CycleInputs {
                cycle,
                workspace: &workspace,
                settings: &settings,
                files: &files,
                briefing: &briefing,
                provider,
                models,
                forge,
            })
            .await?;
        let opened_pull_request = self.pull_requests.len() > opened_before;
        if !opened_pull_request {
            if let Some(continued) = briefing.continued.as_ref() {
                self.record_empty_fix_attempt(continued, &outcome, forge).await;
            }
        }
        self.settle_answered_question(&outcome).await;
        // Only a cycle that continuous mode follows with another keeps its clone; every other end
        // (and every error above) drops it here, which removes the temporary directory.
        let continues = matches!(
            outcome,
            CycleOutcome::Finished {
                status: FinishStatus::Completed,
                ..
            }
        );
        if reusable && continues && config.mode == Mode::Continuous && cycle < config.max_cycles {
            self.kept = Some(workspace);
        }
        Ok(self.end_of_cycle(cycle, outcome, opened_pull_request, forge).await)
    }

    /// What the cycle's first model call is sent, from its clone and settings: the gate opened
    /// on the clone, the conversation on the forge read (the clone checked out on a branch it
    /// continues) and the briefing built. `upkeep prompt` prints exactly this for cycle 1, so
    /// the prompt it shows is by construction what the run's first cycle sends.
    pub(super) async fn brief_cycle(
        &self,
        cycle: u32,
        forge: &dyn Forge,
        workspace: &Workspace,
        settings: &RepoSettings,
    ) -> Result<CycleBrief, RunError> {
        let files = workspace.files(&settings.protected_paths).map_err(RunError::from)?;
        let conversation = match self.conversation(cycle, forge, workspace, settings).await? {
            CycleWork::Work(conversation) => conversation,
            CycleWork::Nothing(reason) => return Ok(CycleBrief::Nothing(reason)),
            CycleWork::Checks { report, plan } => return Ok(CycleBrief::Checks { report, plan }),
        };
        let briefing = brief(
            self.config,
            settings,
            &files,
            workspace.base_branch(),
            forge,
            &self.pull_requests,
            &conversation,
            &|text| self.events.alert(text),
            self.cancel,
        )
        .await
        .map_err(|error| match error {
            BriefingError::Config(error) => RunError::Usage(error),
            BriefingError::Forge(error) => RunError::Failure(error.into()),
            BriefingError::Stopped(reason) => RunError::Stopped(reason),
        })?;
        Ok(CycleBrief::Ready {
            files,
            briefing: Box::new(briefing),
            gave_up: conversation.gave_up,
        })
    }

    /// `pr_limit` and `pr_hourly_limit`, counted on the forge: `Some` when they hold the cycle
    /// back. Also notes, for after the run, that the repository keeps a dashboard.
    async fn check_limits(
        &mut self,
        settings: &RepoSettings,
        base: &str,
        forge: &dyn Forge,
    ) -> Result<Option<Outcome>, RunError> {
        if settings.dashboard {
            self.dashboard = Some(DashboardPlan {
                base: base.to_owned(),
                label: settings.label.clone(),
                limits: settings.limits.clone(),
            });
        }
        let held = settings
            .limits
            .check(forge, base, &self.pull_requests, jiff::Timestamp::now())
            .await
            .map_err(|error| {
                RunError::Failure(anyhow::Error::new(error).context("checking pr_limit and pr_hourly_limit"))
            })?;
        Ok(held.and_then(|held| self.hold_or_pass(held)))
    }

    /// Limits hold back the work the bot picks itself (DESIGN section 13). An explicit request —
    /// `--task`, `--issue`, `--pr` or the event that named them — is the operator's own and runs,
    /// with a note that the limit was passed over.
    fn hold_or_pass(&self, held: Held) -> Option<Outcome> {
        let config = self.config;
        let request = match (&config.task, config.issue, config.pull_request) {
            (Some(_), _, _) => "the task given is".to_owned(),
            (None, Some(issue), _) => format!("issue #{issue} was asked for, which is"),
            (None, None, Some(number)) => format!("pull request #{number} was asked for, which is"),
            (None, None, None) => return Some(self.held(held)),
        };
        self.events.say(&format!(
            "note: {}; passed over because {request} an explicit request",
            held.message
        ));
        None
    }

    /// The agent's turns on the clone, until `finish`, a question, a budget or an error. Work a
    /// cycle that did not finish leaves behind is reported, and `--keep-clone` served, whatever
    /// the ending.
    async fn work(&mut self, inputs: CycleInputs<'_>) -> Result<CycleOutcome, RunError> {
        let config = self.config;
        let CycleInputs {
            cycle,
            workspace,
            settings,
            files,
            briefing,
            provider,
            models,
            forge,
        } = inputs;
        let budget = self.budget.get_or_insert_with(|| Budget::new(config.budgets, None));
        let price = pricing::price_for(provider.model(), &settings.prices);
        if price.is_none() && config.budgets.max_cost.is_some() && provider.name() != "replay" {
            tracing::warn!(
                "no price known for model {}; --max-cost counts it as free (add [prices] to --config)",
                provider.model()
            );
        }
        budget.set_price(price);

        let task_key = config.task.as_deref().map(crate::forge::task::task_key);
        let published = CyclePullRequests::default();
        let pull_request = PullRequestScope {
            forge,
            identity: &config.identity,
            open_pull_requests: &briefing.open_pull_requests,
            task_key: task_key.as_deref(),
            continued: briefing.continued.as_ref(),
            published: &published,
        };
        let ctx = ToolContext {
            workspace,
            tree: files,
            commands: &self.commands,
            redactor: self.events.redactor(),
            cancel: self.cancel,
            targets: &briefing.targets,
            pull_request: &pull_request,
            agents: None,
        };
        // Said once: every cycle builds the same team.
        let events = self.events;
        let team_notice = |text: &str| {
            if cycle == 1 {
                events.alert(text);
            }
        };
        let team = crate::subagents::Team::new(crate::subagents::team::TeamParts {
            config,
            settings,
            registry: &briefing.registry,
            provider,
            models,
            agent_instructions: briefing.agent_instructions.as_ref(),
            notice: &team_notice,
        })?;
        let agent = Agent {
            provider,
            registry: &briefing.registry,
            events: self.events,
            cancel: self.cancel,
            max_turns: settings.max_turns,
            cycle,
            context_window: crate::llm::window::window_for(&config.provider, provider.model()),
            masking: !config.full_history,
            team: Some(&team),
        };
        let outcome: Result<CycleOutcome, CycleError> = agent
            .run_cycle(
                &briefing.system,
                briefing.first_message.clone(),
                &briefing.reply_schema,
                &ctx,
                budget,
            )
            .await;
        // The cycle's pull requests go to the run's summary whichever way it ended (a question
        // or a budget after a pull request included).
        self.pull_requests.extend(published.into_inner());
        // A cycle that did not end with `finish` (a budget, a question, an error, an interrupt)
        // may leave work no pull request carries: it is reported, never dropped silently.
        if !matches!(outcome, Ok(CycleOutcome::Finished { .. })) {
            self.report_unsaved(cycle, workspace).await;
        }
        self.keep_clone(cycle, workspace).await;
        self.cycle_findings = team.unresolved_findings();
        Ok(outcome?)
    }

    /// The answered question reached a cycle that ended: it is settled (a budget keeps it for
    /// the next run, which resumes it).
    async fn settle_answered_question(&mut self, outcome: &CycleOutcome) {
        if matches!(outcome, CycleOutcome::Limit(_)) {
            return;
        }
        if let Some(resumed) = self.conversation.resumed.take() {
            if let Err(error) = crate::conversation::local::settle(self.config, &resumed).await {
                self.events.say(&format!("upkeep: {error}"));
            }
        }
    }

    /// How the cycle ended, said to people (and a question posted where the forge keeps them).
    async fn end_of_cycle(
        &mut self,
        cycle: u32,
        outcome: CycleOutcome,
        opened_pull_request: bool,
        forge: &dyn Forge,
    ) -> Outcome {
        match outcome {
            CycleOutcome::Finished {
                status: FinishStatus::NoTasks,
                summary,
            } => {
                self.events.say(&format!("nothing to do: {summary}"));
                Outcome::NoTasks
            }
            CycleOutcome::Finished {
                status: FinishStatus::Completed,
                summary,
            } => {
                if !summary.is_empty() {
                    self.events.say(&format!("done: {summary}"));
                }
                if opened_pull_request {
                    Outcome::PullRequest
                } else {
                    Outcome::Completed
                }
            }
            CycleOutcome::Question { question, issue } => {
                self.question = Some(question.clone());
                match forge.post_question(issue, &question).await {
                    Ok(Some(place)) => self.events.alert(&place),
                    Ok(None) => {}
                    Err(error) => self
                        .events
                        .alert(&format!("upkeep: could not post the question: {error}")),
                }
                self.events.emit(
                    Scope {
                        cycle: Some(cycle),
                        turn: None,
                    },
                    Event::Question { question, issue },
                );
                Outcome::Question
            }
            CycleOutcome::Limit(limit) => {
                self.events.alert(&format!("upkeep: stopped: {limit}"));
                if let Some(hint) = limit.hint() {
                    self.events.alert(&hint);
                }
                match limit {
                    Limit::Turns { .. } => Outcome::Limit,
                    Limit::Stuck { .. } => Outcome::Stuck,
                    _ => Outcome::Limit,
                }
            }
        }
    }
}
