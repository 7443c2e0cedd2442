//! One repository of a fleet: its run options (the fleet's, the entry's own overrides, a folder
//! of its own for `--keep-clone`, its share of `--fleet-max-cost`) resolved exactly as
//! `upkeep run` would resolve them, and its run.

use tokio_util::sync::CancellationToken;

use super::budget::Share;
use super::list::FleetEntry;
use super::report;
use crate::cli::RunArgs;
use crate::config::{ConfigError, Purpose, Resolved};
use crate::repo_outcome::RepoOutcome;
use crate::startup::RunStart;

/// The fleet's options as this entry's `upkeep run` gets them, before its overrides.
fn member_args(entry: &FleetEntry, defaults: &RunArgs) -> RunArgs {
    let mut args = defaults.clone();
    args.repo.clone_from(&entry.repo_arg);
    // `--keep-clone DIR` keeps each repository's clones in a folder of its own under DIR.
    if let Some(dir) = args.keep_clone.take() {
        let folder: String = entry
            .key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        args.keep_clone = Some(dir.join(folder.trim_start_matches('.')));
    }
    args
}

/// One repository's run, as `upkeep run` with the fleet's options, the entry's own, and the
/// fleet budget's share.
pub(super) async fn run(
    entry: &FleetEntry,
    defaults: &RunArgs,
    share: Share,
    cancel: CancellationToken,
) -> RepoOutcome {
    let mut args = member_args(entry, defaults);
    let applied = entry.overrides.apply(&args.options).map(|options| {
        args.options = options;
        if let Share::Capped(cap) = share {
            args.options.max_cost = Some(args.options.max_cost.map_or(cap, |own| own.min(cap)));
        }
    });
    let start = RunStart {
        purpose: Purpose::Run,
        actions: None,
        fleet_member: Some(entry.display.clone()),
    };
    let resolved = match applied {
        Ok(()) => crate::startup::resolve(&args, start).await,
        Err(error) => Err(error),
    };
    let config = match resolved {
        // Without an Actions event every repository has work to try.
        Ok(Resolved::Run(config) | Resolved::NothingToDo(config, _)) => config,
        Err(error) => {
            let summary = crate::summary::RunSummary::usage_error(&error);
            report::repository_usage_error(&args, &entry.display, &summary);
            return summary.outcome_for(&entry.display);
        }
    };
    if let Share::Capped(cap) = share {
        eprintln!(
            "[{}] upkeep: --fleet-max-cost: this repository may spend up to ${cap:.4} (as its --max-cost)",
            crate::text::escape_terminal(&entry.display)
        );
    }
    for warning in crate::preflight::local_warnings(&config) {
        eprintln!(
            "[{}] upkeep: warning: {}",
            crate::text::escape_terminal(&entry.display),
            crate::text::escape_terminal(&warning)
        );
    }
    let summary = crate::run::run(config, cancel).await;
    summary.outcome_for(&entry.display)
}

/// The configuration error of every entry, when they all fail to resolve with the same one
/// (checked as each run will resolve it); `None` as soon as one resolves or two differ.
pub(super) fn shared_usage_error(entries: &[FleetEntry], defaults: &RunArgs) -> Option<ConfigError> {
    let mut shared: Option<ConfigError> = None;
    for entry in entries {
        let mut args = member_args(entry, defaults);
        let error = entry
            .overrides
            .apply(&args.options)
            .and_then(|options| {
                args.options = options;
                crate::config::check_command_line(&args)
            })
            .err()?;
        match &shared {
            Some(first) if *first != error => return None,
            Some(_) => {}
            None => shared = Some(error),
        }
    }
    shared
}
