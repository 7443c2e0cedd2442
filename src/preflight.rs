//! Warnings before a run about work upkeep will not see.
//!
//! upkeep works from the committed tip of a branch, in a clone. A local repository with edits
//! nobody committed, or a task file that was never added, looks to its owner like part of the
//! repository; silently working without them would mislead. So the run says so up front (it
//! still runs: the operator may mean exactly that).

use crate::config::file::REPO_CONFIG_FILE;
use crate::config::{Config, DEFAULT_TASKS_FILE, RepoSource};

/// What a person should hear before the run starts, one line each.
pub(crate) fn local_warnings(config: &Config) -> Vec<String> {
    let RepoSource::Local(path) = &config.source else {
        return Vec::new();
    };
    let Ok(repo) = crate::repo::setup::open_repository(path) else {
        return Vec::new();
    };
    let mut options = git2::StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(false)
        .include_ignored(false)
        .exclude_submodules(true);
    let Ok(statuses) = repo.statuses(Some(&mut options)) else {
        return Vec::new();
    };
    let tasks_file = config
        .operator
        .tasks_file
        .clone()
        .unwrap_or_else(|| DEFAULT_TASKS_FILE.to_owned());
    // The files that steer a run: each that differs from HEAD is named, since a run that
    // ignores an edited `.upkeep.toml` or AGENTS.md (exactly what `upkeep init` leaves behind)
    // looks to its owner like a run that ignored them.
    let steering: Vec<&str> = [REPO_CONFIG_FILE, tasks_file.as_str()]
        .into_iter()
        .chain(crate::instructions::CANDIDATES.iter().copied())
        .collect();
    let mut warnings = Vec::new();
    let mut changed = 0;
    for entry in statuses.iter() {
        let status = entry.status();
        let path = entry.path().unwrap_or_default();
        // An untracked folder is listed once, as `folder/`, for whatever it holds.
        let named = steering.iter().find(|file| {
            **file == path || (path.ends_with('/') && status.contains(git2::Status::WT_NEW) && file.starts_with(path))
        });
        match named {
            Some(file) => warnings.push(differs_from_head(file, status, file == &tasks_file.as_str())),
            None if !status.contains(git2::Status::WT_NEW) => changed += 1,
            None => {}
        }
    }
    if changed > 0 {
        warnings.push(format!(
            "{} has {changed} other file(s) with uncommitted changes; upkeep works from the committed HEAD and does not see them",
            path.display()
        ));
    }
    warnings
}

/// The warning for one steering file whose working copy differs from HEAD.
fn differs_from_head(file: &str, status: git2::Status, is_tasks_file: bool) -> String {
    let how = if status.intersects(git2::Status::WT_NEW | git2::Status::INDEX_NEW) {
        "is not committed"
    } else if status.intersects(git2::Status::WT_DELETED | git2::Status::INDEX_DELETED) {
        "is deleted but the deletion is not committed"
    } else {
        "has uncommitted changes"
    };
    let consequence = if is_tasks_file && how == "is not committed" {
        ", so upkeep does not see it (it works from the committed HEAD); commit it to give the model its tasks"
    } else {
        ": upkeep works from the committed HEAD and reads the committed version; commit it for a run to see it"
    };
    format!("{file} {how}{consequence}")
}
