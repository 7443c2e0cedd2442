//! One cycle: the limits and the schedule checked, the conversation and the briefing read, the
//! agent run on the clone, and its outcome turned into how the cycle ended (a question posted,
//! the clone kept for the next cycle or removed).

use crate::agent::budget::Limit;
use crate::agent::{Agent, CycleError, CycleOutcome};
use crate::briefing::{Briefing, BriefingError, brief};
use crate::config::{ConfigError, Mode, RepoSettings};
use crate::conversation::fix::{ChecksReport, ChecksStop, GiveUp};
use crate::conversation::{ConversationError, CycleWork};
use crate::dashboard::DashboardPlan;
use crate::events::{Event, Scope};
use crate::forge::PullRequest;
use crate::llm::pricing;
use crate::outcome::Outcome;
use crate::repo::WorkTree;
use crate::repo::questions::LocalQuestion;
use crate::tools::{CyclePullRequests, FinishStatus, PullRequestScope, ToolContext};

use super::clones::{Carried, CycleClone};
use super::ending::{RunError, RunFailure};
use super::record::CycleRecord;
use super::shared::{Asking, Run};

/// One cycle, ready to work: its number, its clone (the workspace and the settings read from
/// it), the gate opened once on the clone, and its briefing, which says what the cycle is for
/// (the task, the pull request it continues) and which targets it may touch.
pub(super) struct Cycle {
    pub(super) number: u32,
    pub(super) clone: CycleClone,
    pub(super) files: WorkTree,
    pub(super) briefing: Briefing,
}

/// What a cycle starts from, or why it has nothing to do.
pub(super) enum CycleBrief {
    Ready {
        cycle: Box<Cycle>,
        /// Bot pull requests whose checks upkeep stops working: the run says so on each.
        gave_up: Vec<GiveUp>,
        /// Conflicting bot pull requests upkeep leaves as they are: the run says so on each.
        mergeable_notes: Vec<crate::conversation::mergeable::Note>,
    },
    /// Nothing to do, and why (no feedback waits on the pull request): no model is asked.
    Nothing(String),
    /// The pull request's checks leave no fix cycle to run (DESIGN section 14).
    Checks {
        report: Option<ChecksReport>,
        stop: Box<ChecksStop>,
    },
    /// A conflicting pull request settled without a model (DESIGN section 14, "Mergeable"), in
    /// the clone that decided it.
    Mergeable {
        settled: Box<crate::conversation::mergeable::Settled>,
        clone: Box<CycleClone>,
    },
}

impl Run<'_> {
    /// Cycle `number`: what the cycle did besides its ending goes to `done`, whichever way it
    /// ends. `opened`: the pull requests earlier cycles of the run opened.
    pub(super) async fn cycle(
        &self,
        number: u32,
        asking: &Asking,
        carried: &mut Carried,
        opened: &[PullRequest],
        done: &mut CycleRecord,
    ) -> Result<Outcome, RunError> {
        let config = self.config;
        // Outside the operator's schedule nothing is cloned either.
        if let Some(end) = self
            .outside_operator_schedule()
            .and_then(|held| self.hold_or_pass(held))
        {
            return Ok(end);
        }
        let clone = match carried.first.take() {
            Some(first) => first,
            None => self.prepare(number, carried).await?,
        };
        let base = clone.workspace.base_branch().to_owned();
        if clone.settings.dashboard {
            done.dashboard = Some(DashboardPlan {
                base: base.clone(),
                label: clone.settings.label.clone(),
                limits: clone.settings.limits.clone(),
            });
        }
        if let Some(held) = self.check_limits(&clone.settings, &base, opened).await? {
            return Ok(held);
        }
        self.events.emit(
            Scope {
                cycle: Some(number),
                turn: None,
            },
            Event::CycleStarted {
                base: base.clone(),
                declared_tools: crate::briefing::exposed_declared_tools(config, &clone.settings.declared_tools),
            },
        );

        let cycle = match self
            .brief_cycle(number, clone, carried.resumed.as_ref(), opened)
            .await?
        {
            CycleBrief::Ready {
                cycle,
                gave_up,
                mergeable_notes,
            } => {
                for give_up in gave_up {
                    self.say_gave_up(give_up, done).await;
                }
                self.leave_mergeable_notes(mergeable_notes).await;
                cycle
            }
            CycleBrief::Nothing(reason) => {
                self.events.say(&format!("nothing to do: {reason}"));
                return Ok(Outcome::NoTasks);
            }
            CycleBrief::Checks { report, stop } => {
                if let Some(report) = &report {
                    self.emit_checks(number, report.pr, &report.sha, &report.state);
                }
                return Ok(self.stop_on_checks(*stop, done).await);
            }
            CycleBrief::Mergeable { settled, clone } => {
                return self.settle_mergeable(number, *settled, &clone, done).await;
            }
        };
        self.emit_redo(number, &cycle.briefing);
        if let Some((pr, fix)) = cycle
            .briefing
            .continued
            .as_ref()
            .and_then(|continued| continued.fix.as_deref().map(|fix| (continued.number, fix)))
        {
            let state = crate::forge::checks::ChecksState::Failing(fix.failing.clone());
            self.emit_checks(number, pr, &fix.attempt.sha, &state);
            self.events.emit(
                Scope {
                    cycle: Some(number),
                    turn: None,
                },
                Event::FixAttempt {
                    pr,
                    attempt: fix.attempt.attempt,
                    max: fix.max,
                },
            );
            done.fix_attempts.push(crate::summary::FixAttemptReport {
                pr,
                attempt: fix.attempt.attempt,
                max: fix.max,
                gave_up: false,
                why: None,
            });
        }

        let outcome = self.work(&cycle, asking, done).await?;
        let opened_pull_request = !done.pull_requests.is_empty();
        if !opened_pull_request {
            if let Some(continued) = cycle.briefing.continued.as_ref() {
                self.record_empty_fix_attempt(continued, &outcome).await;
            }
            self.record_empty_redo(&cycle.briefing).await;
        }
        self.settle_answered_question(&outcome, carried).await;
        // Only a cycle that continuous mode follows with another keeps its clone; every other end
        // (and every error above) drops it here, which removes the temporary directory.
        let continues = matches!(
            outcome,
            CycleOutcome::Finished {
                status: FinishStatus::Completed,
                ..
            }
        );
        if cycle.clone.reusable && continues && config.mode == Mode::Continuous && number < config.max_cycles {
            carried.kept = Some(cycle.clone.workspace);
        }
        Ok(self.end_of_cycle(number, outcome, opened_pull_request, done).await)
    }

    /// What the cycle's first model call is sent, from its clone and settings: the gate opened
    /// on the clone, the conversation on the forge read (the clone checked out on a branch it
    /// continues) and the briefing built. `upkeep prompt` prints exactly this for cycle 1, so
    /// the prompt it shows is by construction what the run's first cycle sends.
    pub(super) async fn brief_cycle(
        &self,
        number: u32,
        clone: CycleClone,
        resumed: Option<&LocalQuestion>,
        opened: &[PullRequest],
    ) -> Result<CycleBrief, RunError> {
        let files = clone
            .workspace
            .files(&clone.settings.protected_paths)
            .map_err(RunError::from)?;
        let conversation = match self.conversation(number, &clone, resumed).await? {
            CycleWork::Work(conversation) => conversation,
            CycleWork::Nothing(reason) => return Ok(CycleBrief::Nothing(reason)),
            CycleWork::Checks { report, stop } => return Ok(CycleBrief::Checks { report, stop }),
            CycleWork::Mergeable(settled) => {
                return Ok(CycleBrief::Mergeable {
                    settled,
                    clone: Box::new(clone),
                });
            }
        };
        let briefing = brief(
            self.config,
            &clone.settings,
            &files,
            clone.workspace.base_branch(),
            self.forge.as_ref(),
            opened,
            &conversation,
            &|text| self.events.alert(text),
            self.cancel,
        )
        .await
        .map_err(|error| match error {
            BriefingError::Config(error) => RunError::Usage(error),
            BriefingError::Forge(error) => RunError::Failure(RunFailure::Forge(error)),
            BriefingError::Stopped(reason) => RunError::Stopped(reason),
        })?;
        Ok(CycleBrief::Ready {
            cycle: Box::new(Cycle {
                number,
                clone,
                files,
                briefing,
            }),
            gave_up: conversation.gave_up,
            mergeable_notes: conversation.mergeable_notes,
        })
    }

    /// The cycle's conversation on the forge; checks the clone out on the branch it continues.
    async fn conversation(
        &self,
        number: u32,
        clone: &CycleClone,
        resumed: Option<&LocalQuestion>,
    ) -> Result<CycleWork, RunError> {
        crate::conversation::for_cycle(
            self.config,
            &clone.settings,
            self.forge.as_ref(),
            &clone.workspace,
            resumed,
            &|text| self.events.say(text),
        )
        .await
        .map_err(|error| match error {
            ConversationError::Refused(reason) if number == 1 => RunError::Usage(ConfigError(reason)),
            ConversationError::Refused(reason) => RunError::Failure(RunFailure::Refused(reason)),
            ConversationError::Workspace(error) => RunError::from(error),
            ConversationError::Forge(crate::forge::ForgeError::Workspace(error)) => RunError::from(error),
            ConversationError::Forge(error) => RunError::Failure(RunFailure::Forge(error)),
        })
    }

    /// `pr_limit` and `pr_hourly_limit`, counted on the forge: `Some` when they hold the cycle
    /// back. `opened`: the pull requests the run opened so far.
    async fn check_limits(
        &self,
        settings: &RepoSettings,
        base: &str,
        opened: &[PullRequest],
    ) -> Result<Option<Outcome>, RunError> {
        let held = settings
            .limits
            .check(self.forge.as_ref(), base, opened, jiff::Timestamp::now())
            .await
            .map_err(|error| RunError::Failure(RunFailure::Limits(error)))?;
        Ok(held.and_then(|held| self.hold_or_pass(held)))
    }

    /// The agent's turns on the clone, until `finish`, a question, a budget or an error. Work a
    /// cycle that did not finish leaves behind is reported, and `--keep-clone` served, whatever
    /// the ending.
    async fn work(&self, cycle: &Cycle, asking: &Asking, done: &mut CycleRecord) -> Result<CycleOutcome, RunError> {
        let config = self.config;
        let Cycle {
            number,
            clone: CycleClone {
                workspace, settings, ..
            },
            files,
            briefing,
        } = cycle;
        let (number, provider, models) = (*number, asking.provider.as_ref(), &asking.models);
        let forge = self.forge.as_ref();
        let price = pricing::price_for(provider.model(), &settings.prices);
        if price.is_none() && config.budgets.max_cost.is_some() && provider.name() != "replay" {
            tracing::warn!(
                "no price known for model {}; --max-cost counts it as free (add [prices] to --config)",
                provider.model()
            );
        }
        self.budget.with(|budget| budget.set_price(price));

        let task_key = config.task.as_deref().map(crate::forge::task::task_key);
        let published = CyclePullRequests::default();
        let pull_request = PullRequestScope {
            forge,
            identity: &config.identity,
            open_pull_requests: &briefing.open_pull_requests,
            task_key: task_key.as_deref(),
            continued: briefing.continued.as_ref(),
            published: &published,
            redo: briefing.redo.as_deref(),
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
            if number == 1 {
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
            cycle: number,
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
                &self.budget,
            )
            .await;
        // The cycle's pull requests go to the run's summary whichever way it ended (a question
        // or a budget after a pull request included).
        done.pull_requests = published.into_inner();
        // A cycle that did not end with `finish` (a budget, a question, an error, an interrupt)
        // may leave work no pull request carries: it is reported, never dropped silently.
        if !matches!(outcome, Ok(CycleOutcome::Finished { .. })) {
            done.unsaved = self.report_unsaved(number, workspace).await;
        }
        self.keep_clone(number, workspace).await;
        done.findings = team.unresolved_findings();
        Ok(outcome?)
    }

    /// The answered question reached a cycle that ended: it is settled (a budget keeps it for
    /// the next run, which resumes it).
    async fn settle_answered_question(&self, outcome: &CycleOutcome, carried: &mut Carried) {
        if matches!(outcome, CycleOutcome::Limit(_)) {
            return;
        }
        if let Some(resumed) = carried.resumed.take() {
            if let Err(error) = crate::conversation::local::settle(self.config, &resumed).await {
                self.events.say(&format!("upkeep: {error}"));
            }
        }
    }

    /// How the cycle ended, said to people (and a question posted where the forge keeps them).
    async fn end_of_cycle(
        &self,
        number: u32,
        outcome: CycleOutcome,
        opened_pull_request: bool,
        done: &mut CycleRecord,
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
                done.question = Some(question.clone());
                match self.forge.post_question(issue, &question).await {
                    Ok(Some(place)) => self.events.alert(&place),
                    Ok(None) => {}
                    Err(error) => self
                        .events
                        .alert(&format!("upkeep: could not post the question: {error}")),
                }
                self.events.emit(
                    Scope {
                        cycle: Some(number),
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
