//! What a run is started with besides its command line -> one immutable [`Config`].
//!
//! [`Config::resolve`] is the only way to a `Config`. Its inputs are the command line's
//! settings ([`super::resolve`]) with fleet membership and what the GitHub Actions event asks
//! of the run ([`EventWork`], applied by [`RunSettings::with_event`]), and what the local
//! repository's questions mean for it ([`LocalResume`]). Each of those once rewrote the
//! resolved settings afterwards; here they are inputs, gathered by [`crate::startup`] (which
//! asks the event and reads the questions, so config depends on neither), and nothing changes
//! a `Config` once the run holds it.

use super::{Config, Mode, RunSettings};
use crate::repo::questions::LocalQuestion;

/// What the settings are resolved for: a run needs credentials, printing the prompt does not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Purpose {
    #[default]
    Run,
    /// `upkeep prompt`, which calls no model and publishes nothing, and so needs no API key and
    /// no write token (public repositories are read without one).
    Prompt,
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

impl RunSettings {
    /// What the event that started the run asks of it, applied before any `Config` exists: the
    /// settings to run with, or (`Err`) the settings to report with and why there is nothing to
    /// do.
    pub fn with_event(mut self, event: EventWork) -> Result<RunSettings, Box<(RunSettings, String)>> {
        match event {
            EventWork::AsConfigured => {}
            EventWork::NothingToDo(why) => return Err(Box::new((self, why))),
            EventWork::LabelledIssue { number, task } => {
                self.issue = Some(number);
                if self.task.is_none() {
                    self.task = task;
                }
            }
            EventWork::AnsweredIssue(number) => {
                self.issue = Some(number);
                self.mode = Mode::Single;
            }
            EventWork::PullRequest(number) => {
                self.pull_request = Some(number);
                self.mode = Mode::Single;
            }
        }
        Ok(self)
    }
}

impl Config {
    /// The run's settings from all its inputs: the command line's `settings` (with the event
    /// applied, see [`RunSettings::with_event`]) and what the local repository's questions mean
    /// for it. A resumed question's task and issue become the run's (unless given), and a task
    /// makes the run a single one. Nothing changes a `Config` after this.
    pub fn resolve(mut settings: RunSettings, local_questions: LocalResume) -> Config {
        if let LocalResume::Resume(question) = &local_questions {
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
        settings.local_questions = local_questions;
        Config { settings }
    }
}

/// What the questions kept in the repository mean for this run.
#[derive(Debug, Clone, Default)]
pub enum LocalResume {
    /// No question concerns this run.
    #[default]
    Nothing,
    /// Resume this answered question.
    Resume(LocalQuestion),
    /// These questions wait for an answer: show them, do nothing else.
    Pending(Vec<LocalQuestion>),
}
