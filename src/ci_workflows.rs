//! The repository's own CI workflows, as `upkeep init` finds them: their names go into the
//! `workflow_run` trigger of the workflow it writes, so upkeep hears when they fail on its pull
//! requests without the user editing the list (GitHub matches `workflow_run.workflows` by a
//! workflow's `name`). Where none is found the template's placeholder stays, with its comment
//! saying what to write.
//!
//! What counts: a file of `.github/workflows/` (`.yml` or `.yaml`, read through the directory
//! capability `init` writes with, never through a symlink, at most [`MAX_WORKFLOW_BYTES`]) that
//! parses, has a `name`, and runs on pull requests or on branch pushes (a push filtered to tags
//! only is a release, not a check). upkeep's own workflows are left out: listening to itself
//! would start a run for each of its own. A name is written as one double-quoted YAML string,
//! so no character in it can end the list or start a comment.

use cap_fs_ext::DirExt as _;
use cap_std::fs::Dir;
use yaml_rust2::{Yaml, YamlLoader};

/// Largest workflow file read.
const MAX_WORKFLOW_BYTES: u64 = 256 * 1024;
/// Workflow files read at most.
const MAX_WORKFLOW_FILES: usize = 50;
/// The template's line the names replace.
const PLACEHOLDER: &str = "    workflows: [CI]\n";

/// The names of the CI workflows in `root`'s `.github/workflows/`, sorted; empty when there is
/// no such folder or nothing in it counts.
pub(crate) fn ci_workflow_names(root: &Dir) -> Vec<String> {
    let Ok(dir) = root
        .open_dir_nofollow(".github")
        .and_then(|github| github.open_dir_nofollow("workflows"))
    else {
        return Vec::new();
    };
    let Ok(entries) = dir.entries() else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .take(MAX_WORKFLOW_FILES)
        .filter_map(|entry| {
            let file = entry.file_name().into_string().ok()?;
            let is_workflow = file.ends_with(".yml") || file.ends_with(".yaml");
            let meta = entry.metadata().ok()?;
            // `entries` does not follow symlinks: a symlink is not a file here.
            if !is_workflow || !meta.is_file() || meta.len() > MAX_WORKFLOW_BYTES || is_upkeeps(&file) {
                return None;
            }
            ci_name(&dir.read_to_string(&file).ok()?)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `workflow` (the template, pinned) with `names` in its `workflow_run` trigger; unchanged
/// when there are none.
pub(crate) fn with_ci_workflows(workflow: String, names: &[String]) -> String {
    if names.is_empty() {
        return workflow;
    }
    let quoted: Vec<String> = names
        .iter()
        .filter_map(|name| serde_json::to_string(name).ok())
        .collect();
    workflow.replacen(PLACEHOLDER, &format!("    workflows: [{}]\n", quoted.join(", ")), 1)
}

/// upkeep's own workflow files (`upkeep.yml`, `upkeep-fleet.yml`, `upkeep-nightly.yml`...).
fn is_upkeeps(file: &str) -> bool {
    file.starts_with("upkeep.") || file.starts_with("upkeep-")
}

/// The workflow's name, when the file is a CI workflow of someone else's.
fn ci_name(text: &str) -> Option<String> {
    let docs = YamlLoader::load_from_str(text).ok()?;
    let doc = docs.first()?;
    let name = doc["name"].as_str()?.trim();
    // An expression is not a name GitHub can match (and has no business in a trigger list).
    if name.is_empty() || name.eq_ignore_ascii_case("upkeep") || name.contains("${{") {
        return None;
    }
    runs_on_changes(&doc["on"]).then(|| name.to_owned())
}

/// Whether `on` starts the workflow for pull requests or branch pushes.
fn runs_on_changes(on: &Yaml) -> bool {
    let is_change = |event: &str| event == "pull_request" || event == "push";
    match on {
        Yaml::String(event) => is_change(event),
        Yaml::Array(events) => events.iter().filter_map(Yaml::as_str).any(is_change),
        Yaml::Hash(events) => events.iter().any(|(event, filters)| match event.as_str() {
            Some("pull_request") => true,
            // A push filtered to tags only runs for releases, not for a branch's commits.
            Some("push") => !matches!(filters, Yaml::Hash(filters)
                if filters.keys().any(|key| matches!(key.as_str(), Some("tags" | "tags-ignore")))
                    && !filters.keys().any(|key| matches!(key.as_str(), Some("branches" | "branches-ignore")))),
            _ => false,
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_workflows_that_check_changes_count() {
        for (text, expected) in [
            ("name: CI\non: push\n", Some("CI")),
            ("name: CI\non: [pull_request]\n", Some("CI")),
            (
                "name: CI\non:\n  push:\n    branches: [main]\n    tags: ['v*']\n",
                Some("CI"),
            ),
            ("name: Release\non:\n  push:\n    tags: ['v*']\n", None),
            ("name: Nightly\non:\n  schedule:\n    - cron: '0 0 * * *'\n", None),
            ("on: pull_request\n", None),
            ("name: ${{ github.ref }}\non: pull_request\n", None),
            ("name: [unclosed\n", None),
        ] {
            assert_eq!(ci_name(text).as_deref(), expected, "{text}");
        }
    }

    #[test]
    fn names_are_one_quoted_string_each() {
        let template = "on:\n  workflow_run:\n    workflows: [CI]\n    types: [completed]\n".to_owned();
        let written = with_ci_workflows(template.clone(), &["a\"] # b".to_owned(), "Tests".to_owned()]);
        let doc = &YamlLoader::load_from_str(&written).expect("YAML")[0];
        let names: Vec<&str> = doc["on"]["workflow_run"]["workflows"]
            .as_vec()
            .expect("list")
            .iter()
            .filter_map(Yaml::as_str)
            .collect();
        assert_eq!(names, ["a\"] # b", "Tests"]);
        assert_eq!(with_ci_workflows(template.clone(), &[]), template);
    }
}
