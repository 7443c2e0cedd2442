//! What every cycle of a run shares ([`Run`]): the immutable [`Config`], the event sink, the
//! cancellation token, the forge, the command settings with the sandbox decided for this run,
//! the run's one budget and its temporary directories. Built once before any work and never
//! changed after (cycles take it by shared reference): what a run learns as it goes lives
//! elsewhere, in [`super::record::RunRecord`] (what it did, for the summary) and
//! [`super::clones::Carried`] (what one cycle hands the next).

use tokio_util::sync::CancellationToken;

use crate::agent::budget::{Budget, RunBudget};
use crate::config::{Config, ConfigError};
use crate::events::{Event, EventSink, Scope};
use crate::forge::Forge;
use crate::limits::{Held, Limits};
use crate::llm::Provider;
use crate::outcome::Outcome;
use crate::repo::{Stop, cleanup};
use crate::subagents::Models;
use crate::tools::CommandSettings;

use super::build_forge;
use super::ending::RunError;

/// What every cycle of a run works with.
pub(super) struct Run<'a> {
    pub(super) config: &'a Config,
    pub(super) events: &'a EventSink,
    pub(super) cancel: &'a CancellationToken,
    pub(super) forge: Box<dyn Forge>,
    /// The operator's command settings plus the sandbox decided for this run.
    pub(super) commands: CommandSettings,
    /// Every model call of the run spends from it, across cycles.
    pub(super) budget: RunBudget,
    /// The run's temporary directories, waited for before the run reports.
    pub(super) scope: cleanup::Scope,
}

/// The models a run asks: the main one and the table sub-agents pick from. `upkeep prompt`
/// asks none, so they are kept apart from [`Run`].
pub(super) struct Asking {
    pub(super) provider: Box<dyn Provider>,
    pub(super) models: Models,
}

impl<'a> Run<'a> {
    /// A run for `upkeep prompt`: the forge, no sandbox decided (no command runs).
    pub(super) fn for_prompt(
        config: &'a Config,
        events: &'a EventSink,
        cancel: &'a CancellationToken,
    ) -> Result<Self, ConfigError> {
        Ok(Run {
            config,
            events,
            cancel,
            forge: build_forge(config)?,
            commands: config.commands.clone(),
            budget: RunBudget::new(Budget::new(config.budgets, None)),
            scope: cleanup::Scope::new(),
        })
    }

    /// What every cycle of the run uses, built before any work: a bad provider, forge, model
    /// table or a sandbox `--require-sandbox` cannot have is a usage error here.
    pub(super) async fn equip(
        config: &'a Config,
        events: &'a EventSink,
        cancel: &'a CancellationToken,
        scope: cleanup::Scope,
    ) -> Result<(Self, Asking), RunError> {
        let provider = crate::llm::build(&config.provider)?;
        crate::llm::tokens::preload(provider.name(), provider.model());
        let forge = build_forge(config)?;
        let models = Models::build(config)?;
        let mut commands = config.commands.clone();
        let commands_enabled =
            config.dangerous_tools || !config.allow_tools.is_empty() || !config.agents.checks.is_empty();
        if commands_enabled {
            commands.sandbox = Some(decide_sandbox(&commands).await?);
        }
        let run = Run {
            config,
            events,
            cancel,
            forge,
            commands,
            budget: RunBudget::new(Budget::new(config.budgets, None)),
            scope,
        };
        Ok((run, Asking { provider, models }))
    }

    /// What ends git work early: the interrupt and the run's `--timeout` deadline.
    pub(super) fn git_stop(&self) -> Stop {
        Stop::new(self.cancel.clone(), self.budget.with(|budget| budget.deadline()))
    }

    /// Whether the operator's `schedule` holds work back now (the repository's own schedule is
    /// read from its clone, in [`Run::cycle`]).
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

    /// Limits hold back the work the bot picks itself (DESIGN section 13). An explicit request —
    /// `--task`, `--issue`, `--pr` or the event that named them — is the operator's own and runs,
    /// with a note that the limit was passed over.
    pub(super) fn hold_or_pass(&self, held: Held) -> Option<Outcome> {
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
}

/// Finds out which sandbox commands get on this machine, before any work: `--require-sandbox`
/// refuses to start without filesystem confinement or network isolation, and without it what
/// is missing is a warning.
async fn decide_sandbox(commands: &CommandSettings) -> Result<crate::exec::SandboxPlan, RunError> {
    let probe = crate::exec::probe().await;
    let plan = crate::exec::SandboxPlan::decide(&probe, commands.allow_network);
    if let Some(missing) = plan.missing_requirements() {
        if commands.require_sandbox {
            return Err(ConfigError(format!("--require-sandbox: this system cannot give commands {missing}")).into());
        }
        tracing::warn!("commands the model runs will have no {missing}");
    }
    Ok(plan)
}
