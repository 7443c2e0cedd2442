//! Which branch a pull request goes on.
//!
//! The branch is the pull request's identity: pushing to a branch updates whatever pull request
//! is open for it. So a branch is reused only for the same work: within one cycle (a second
//! `create_pull_request` updates the first), for the same issue (`upkeep/<N>-...`, whatever
//! title the model picks this time), or for the same task text (`--task`, recognised by a key
//! the forge keeps with the pull request: a hidden marker in a GitHub body, a git config value
//! beside a local branch's description). Any other task whose title slugs to a taken name
//! gets a distinct one (`-2`, `-3`...), so two tasks never overwrite each other's work. A task
//! without an issue never gets a name that reads as an issue's (`upkeep/task-8-...`, not
//! `upkeep/8-...`).

use crate::forge::OpenPullRequest;
use crate::repo::BOT_BRANCH_PREFIX;

/// Longest slug kept in a branch name; long titles make unwieldy branch names.
const MAX_SLUG_CHARS: usize = 48;

pub(crate) fn branch_name(issue: Option<u64>, title: &str) -> String {
    let mut slug = slug::slugify(title);
    if slug.len() > MAX_SLUG_CHARS {
        slug.truncate(MAX_SLUG_CHARS);
        slug = slug.trim_end_matches('-').to_owned();
    }
    if slug.is_empty() {
        slug = "change".into();
    }
    match issue {
        Some(number) => format!("{BOT_BRANCH_PREFIX}{number}-{slug}"),
        // `upkeep/<N>-...` means "the work of issue N" to every later run (its open pull
        // request, its closing memory, its follow-ups): a title must not claim that name.
        None if slug
            .split('-')
            .next()
            .is_some_and(|first| first.bytes().all(|b| b.is_ascii_digit())) =>
        {
            format!("{BOT_BRANCH_PREFIX}task-{slug}")
        }
        None => format!("{BOT_BRANCH_PREFIX}{slug}"),
    }
}

/// What decides the branch of one `create_pull_request`.
pub(crate) struct BranchChoice<'a> {
    /// The branch this cycle already published, if any.
    pub cycle_branch: Option<&'a str>,
    pub issue: Option<u64>,
    pub title: &'a str,
    /// The task's key, when the task text is known (`--task`).
    pub task_key: Option<&'a str>,
    /// The bot's open pull requests, this run's included.
    pub open: &'a [OpenPullRequest],
}

impl BranchChoice<'_> {
    pub(crate) fn pick(&self) -> String {
        if let Some(branch) = self.cycle_branch {
            return branch.to_owned();
        }
        if let Some(number) = self.issue {
            let prefix = format!("{BOT_BRANCH_PREFIX}{number}-");
            if let Some(existing) = self.open.iter().find(|pr| pr.branch.starts_with(&prefix)) {
                return existing.branch.clone();
            }
        }
        if let Some(key) = self.task_key {
            if let Some(existing) = self.open.iter().find(|pr| pr.task_key.as_deref() == Some(key)) {
                return existing.branch.clone();
            }
        }
        let wanted = branch_name(self.issue, self.title);
        let taken = |name: &str| self.open.iter().any(|pr| pr.branch == name);
        if !taken(&wanted) {
            return wanted;
        }
        (2..)
            .map(|n| format!("{wanted}-{n}"))
            .find(|name| !taken(name))
            .unwrap_or(wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::task::task_key;

    fn open(branch: &str, task_key: Option<&str>) -> OpenPullRequest {
        OpenPullRequest {
            number: Some(9),
            branch: branch.into(),
            title: "t".into(),
            url: "u".into(),
            task_key: task_key.map(str::to_owned),
            head_sha: None,
        }
    }

    fn pick(
        cycle: Option<&str>,
        issue: Option<u64>,
        title: &str,
        key: Option<&str>,
        open: &[OpenPullRequest],
    ) -> String {
        BranchChoice {
            cycle_branch: cycle,
            issue,
            title,
            task_key: key,
            open,
        }
        .pick()
    }

    #[test]
    fn branch_names_follow_the_contract() {
        assert_eq!(
            branch_name(Some(12), "Fix the typo in README!"),
            "upkeep/12-fix-the-typo-in-readme"
        );
        assert_eq!(branch_name(None, "Add CONTRIBUTING.md"), "upkeep/add-contributing-md");
        assert_eq!(branch_name(None, "???"), "upkeep/change");
        assert_eq!(branch_name(None, "8 notes"), "upkeep/task-8-notes");
        assert_eq!(branch_name(None, "2024"), "upkeep/task-2024");
        assert_eq!(branch_name(None, "v2 notes"), "upkeep/v2-notes");
        assert!(branch_name(None, &"very long title ".repeat(20)).len() <= BOT_BRANCH_PREFIX.len() + MAX_SLUG_CHARS);
    }

    #[test]
    fn the_same_issue_or_task_reuses_its_branch() {
        let issue = [open("upkeep/12-first-title", None)];
        assert_eq!(
            pick(None, Some(12), "Another title", None, &issue),
            "upkeep/12-first-title"
        );
        assert_eq!(
            pick(None, Some(13), "Another title", None, &issue),
            "upkeep/13-another-title"
        );
        assert_eq!(pick(Some("upkeep/x"), Some(12), "t", None, &issue), "upkeep/x");
        let key = task_key("Fix the typos");
        let task = [open("upkeep/fix-typos", Some(&key))];
        assert_eq!(pick(None, None, "Typos, again", Some(&key), &task), "upkeep/fix-typos");
    }

    /// Two tasks whose titles slug alike once shared a branch, and the second overwrote the
    /// first's pull request.
    #[test]
    fn different_tasks_never_share_a_branch() {
        let taken = [open("upkeep/update-docs", None), open("upkeep/update-docs-2", None)];
        assert_eq!(pick(None, None, "Update docs", None, &taken), "upkeep/update-docs-3");
        let other_task = [open("upkeep/update-docs", Some(&task_key("one task")))];
        assert_eq!(
            pick(None, None, "Update docs", Some(&task_key("another task")), &other_task),
            "upkeep/update-docs-2"
        );
    }
}
