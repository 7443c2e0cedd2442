//! What a run is started with besides its command line -> one immutable [`Config`].
//!
//! [`Config::resolve`] is the only way to a `Config`. It reads the command line
//! ([`super::resolve`]), then what the GitHub Actions event that started the run asks of it
//! (judged by [`crate::actions`], which may ask the forge who the bot is), then the local
//! repository's questions (`--answer`, [`crate::conversation::local`]), and notes fleet
//! membership. Each of those once rewrote the resolved settings afterwards; here they are
//! inputs, so `upkeep run`, `upkeep prompt` and a fleet's repository see the same settings for
//! the same inputs, and nothing changes them once the run holds them.

use super::resolve::command_line;
use super::{Config, ConfigError, Mode};
use crate::cli::RunArgs;
use crate::conversation::local::LocalResume;

/// What the settings are resolved for: a run needs credentials, printing the prompt does not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Purpose {
    #[default]
    Run,
    /// `upkeep prompt`, which calls no model and publishes nothing, and so needs no API key and
    /// no write token (public repositories are read without one).
    Prompt,
}

/// What a run is started with besides its command line.
#[derive(Default)]
pub struct RunStart<'a> {
    pub purpose: Purpose,
    /// The GitHub Actions step the run is, whose event may say what to work.
    pub actions: Option<&'a crate::actions::Actions>,
    /// `upkeep fleet` runs this repository as one of many, under this name.
    pub fleet_member: Option<String>,
}

/// What the event that started the run asks of it, judged by [`crate::actions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventWork {
    /// No event, or one that leaves the run as configured.
    AsConfigured,
    /// An issue labelled for the bot: work it; `task` is its text where the forge cannot read
    /// the issue back (`None` keeps the task given).
    LabelledIssue { number: u64, task: Option<String> },
    /// A maintainer answered the bot's question on this issue: resume it.
    AnsweredIssue(u64),
    /// Feedback on the bot's pull request: work it.
    PullRequest(u64),
    /// The event does not concern upkeep, and why: the run does nothing.
    NothingToDo(String),
}

/// A resolved run, or an event that gives it nothing to do.
pub enum Resolved {
    Run(Config),
    /// The event that started the run does not concern upkeep (a comment by someone without
    /// write access...): the reason, and the settings to report it with.
    NothingToDo(Config, String),
}

impl Config {
    /// The settings of a run: the command line checked as far as it can be before any work,
    /// then what the Actions event and the local repository's questions ask of the run, and
    /// its fleet membership. Reading the event may ask the forge who the bot is and whether a
    /// question waits; nothing here calls a model, clones, or writes anywhere (an answer given
    /// with `--answer` is recorded by the run, not here).
    pub async fn resolve(args: &RunArgs, start: RunStart<'_>) -> Result<Resolved, ConfigError> {
        let mut settings = command_line(args, start.purpose)?;
        settings.fleet_member = start.fleet_member;
        let event = match start.actions {
            Some(actions) => actions.judge_event(&settings).await?,
            None => EventWork::AsConfigured,
        };
        match event {
            EventWork::AsConfigured => {}
            EventWork::NothingToDo(why) => return Ok(Resolved::NothingToDo(Config { settings }, why)),
            EventWork::LabelledIssue { number, task } => {
                settings.issue = Some(number);
                if settings.task.is_none() {
                    settings.task = task;
                }
            }
            EventWork::AnsweredIssue(number) => {
                settings.issue = Some(number);
                settings.mode = Mode::Single;
            }
            EventWork::PullRequest(number) => {
                settings.pull_request = Some(number);
                settings.mode = Mode::Single;
            }
        }
        // A resumed question's task and issue become the run's (unless given), and a task
        // makes the run a single one.
        settings.local_questions = crate::conversation::local::read(&settings)
            .await
            .map_err(|error| match error {
                crate::conversation::local::ResumeError::Usage(error) => error,
                // The repository's git config cannot be read: said before any work, with why.
                other => ConfigError(other.to_string()),
            })?;
        if let LocalResume::Resume(question) = &settings.local_questions {
            if settings.task.is_none() {
                settings.task.clone_from(&question.task);
            }
            if settings.issue.is_none() {
                settings.issue = question.issue;
            }
            if settings.task.is_some() {
                settings.mode = Mode::Single;
            }
        }
        Ok(Resolved::Run(Config { settings }))
    }

    /// [`Config::resolve`] for a run with no Actions event and no fleet, which always has work
    /// to try (tests and the demo).
    pub async fn for_run(args: &RunArgs, purpose: Purpose) -> Result<Config, ConfigError> {
        match Self::resolve(
            args,
            RunStart {
                purpose,
                ..RunStart::default()
            },
        )
        .await?
        {
            Resolved::Run(config) | Resolved::NothingToDo(config, _) => Ok(config),
        }
    }
}

/// The command line's errors, as [`Config::resolve`] reports them, without reading anything
/// the run starts from (the event, the repository's questions): what every repository of a
/// fleet shares.
pub(crate) fn check_command_line(args: &RunArgs) -> Result<(), ConfigError> {
    command_line(args, Purpose::Run).map(drop)
}
