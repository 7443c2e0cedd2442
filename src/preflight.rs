//! Warnings before a run about work upkeep will not see.
//!
//! upkeep works from the committed tip of a branch, in a clone. A local repository with edits
//! nobody committed, or a task file that was never added, looks to its owner like part of the
//! repository; silently working without them would mislead. So the run says so up front (it
//! still runs: the operator may mean exactly that).

use std::path::Path;

use crate::config::{Config, DEFAULT_TASKS_FILE, RepoSource};

/// What a person should hear before the run starts, one line each.
pub fn local_warnings(config: &Config) -> Vec<String> {
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
    let mut warnings = Vec::new();
    let mut changed = 0;
    for entry in statuses.iter() {
        let status = entry.status();
        let path = entry.path().unwrap_or_default();
        if Path::new(path) == Path::new(&tasks_file) && status.contains(git2::Status::WT_NEW) {
            warnings.push(format!(
                "{tasks_file} is not committed, so upkeep does not see it (it works from the committed HEAD); commit it to give the model its tasks"
            ));
        } else if !status.contains(git2::Status::WT_NEW) {
            changed += 1;
        }
    }
    if changed > 0 {
        warnings.push(format!(
            "{} has {changed} file(s) with uncommitted changes; upkeep works from the committed HEAD and does not see them",
            path.display()
        ));
    }
    warnings
}
