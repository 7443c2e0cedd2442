//! What a run starts from, gathered into one [`Config`]: the command line, the GitHub Actions
//! event that started it, a local repository's questions (`--answer`) and fleet membership.
//!
//! The config module builds a `Config` from values ([`Config::resolve`]); judging the event
//! ([`crate::actions`], which may ask the forge who the bot is) and reading the questions
//! ([`crate::conversation::local`]) happen here, above both, so `upkeep run`, `upkeep prompt`
//! and a fleet's repository resolve the same settings the same way, and config imports
//! neither of the modules that read its settings.

use crate::cli::RunArgs;
use crate::config::{Config, ConfigError, EventWork, LocalResume, Purpose, Resolved, command_line};
use crate::conversation::local::ResumeError;

/// What a run is started with besides its command line.
#[derive(Default)]
pub(crate) struct RunStart<'a> {
    pub purpose: Purpose,
    /// The GitHub Actions step the run is, whose event may say what to work.
    pub actions: Option<&'a crate::actions::Actions>,
    /// `upkeep fleet` runs this repository as one of many, under this name.
    pub fleet_member: Option<String>,
}

/// The settings of a run: the command line checked as far as it can be before any work, then
/// what the Actions event and the local repository's questions ask of the run, and its fleet
/// membership. Reading the event may ask the forge who the bot is and whether a question waits;
/// nothing here calls a model, clones, or writes anywhere (an answer given with `--answer` is
/// recorded by the run, not here).
pub(crate) async fn resolve(args: &RunArgs, start: RunStart<'_>) -> Result<Resolved, ConfigError> {
    let mut settings = command_line(args, start.purpose)?;
    settings.fleet_member = start.fleet_member;
    let event = match start.actions {
        Some(actions) => actions.judge_event(&settings).await?,
        None => EventWork::AsConfigured,
    };
    let settings = match settings.with_event(event) {
        Ok(settings) => settings,
        Err(nothing) => {
            let (settings, why) = *nothing;
            return Ok(Resolved::NothingToDo(
                Config::resolve(settings, LocalResume::Nothing),
                why,
            ));
        }
    };
    let local_questions = crate::conversation::local::read(&settings)
        .await
        .map_err(|error| match error {
            ResumeError::Usage(error) => error,
            // The repository's git config cannot be read: said before any work, with why.
            ResumeError::Repository { action, path, source } => {
                ConfigError(format!("{action} in {}: {source}", path.display()))
            }
        })?;
    Ok(Resolved::Run(Config::resolve(settings, local_questions)))
}

/// [`resolve`] for a run with no Actions event and no fleet, which always has work to try
/// (`upkeep prompt`, the demo).
pub(crate) async fn for_run(args: &RunArgs, purpose: Purpose) -> Result<Config, ConfigError> {
    match resolve(
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
