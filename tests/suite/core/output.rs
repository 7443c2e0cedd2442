//! What a person sees: the dry run, the offline demo, quiet mode, `--forge none` showing the
//! diff, and a failed clone still reporting that the run started.

use serde_json::json;

use super::super::support::{Script, TestRepo, Upkeep, finish, reply, run_local};
use super::pr_replies;

#[test]
fn dry_run_prints_the_pull_request_and_changes_nothing() {
    let repo = TestRepo::new();
    let before = repo.refs();
    let config_before = repo.git(&["config", "--list", "--local"]);
    let script = Script::new(&pr_replies("NEW.md", "fresh content\n", "Add NEW"));
    let out = run_local(&repo, &script, &["--task", "t", "--dry-run"]);
    out.assert_code(0);
    assert_eq!(repo.refs(), before, "no branch pushed");
    assert_eq!(
        repo.git(&["config", "--list", "--local"]),
        config_before,
        "no description recorded"
    );
    assert!(out.stderr.contains("title:  Add NEW"), "{}", out.stderr);
    assert!(out.stderr.contains("+fresh content"), "diff shown: {}", out.stderr);
}

#[test]
fn the_demo_runs_offline_and_opens_a_local_pull_request() {
    let keep = tempfile::tempdir().expect("tempdir");
    let dir = keep.path().join("demo");
    let out = Upkeep::new().args(["demo", "--dir"]).args([&dir]).run();
    out.assert_code(0);
    // The result on stdout, progress on stderr.
    assert!(
        out.stdout
            .starts_with("── the pull request, as the local forge recorded it in"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("branch: upkeep/fix-readme-typo-and-add-a-usage-section"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("+A tiny greeter. Run it and receive a friendly greeting."),
        "{}",
        out.stdout
    );
    assert!(!out.stderr.contains("+A tiny greeter"), "{}", out.stderr);
    assert!(out.stderr.contains("the model is scripted"), "{}", out.stderr);
    let description = super::super::support::git(
        &dir,
        &[
            "config",
            "branch.upkeep/fix-readme-typo-and-add-a-usage-section.description",
        ],
    );
    assert!(
        description.starts_with("Fix README typo and add a usage section"),
        "{description}"
    );
    let readme = super::super::support::git(&dir, &["show", "main:README.md"]);
    assert!(readme.contains("recieve"), "base branch unchanged");
}

#[test]
fn quiet_mode_still_shows_a_question_and_the_summary() {
    let repo = TestRepo::new();
    let script = Script::new(&[reply(
        "ask",
        &[("ask_question", json!({"question_text": "Which license?"}))],
    )]);
    let out = run_local(&repo, &script, &["--quiet"]);
    out.assert_code(3);
    assert!(out.stderr.contains("Which license?"), "{}", out.stderr);
    assert!(out.stderr.contains("upkeep finished: question"), "{}", out.stderr);
    assert!(
        !out.stderr.contains("── cycle 1"),
        "progress lines are quiet: {}",
        out.stderr
    );
}

/// `--quiet` prints the final summary and nothing else when all goes well (before, "done: ..."
/// and similar progress lines got through).
#[test]
fn quiet_mode_prints_only_the_summary_when_nothing_needs_a_person() {
    let repo = TestRepo::new();
    let script = Script::new(&pr_replies("notes.txt", "notes\n", "Add notes"));
    let out = run_local(&repo, &script, &["--task", "t", "--quiet"]);
    out.assert_code(0);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(lines[0].starts_with("upkeep finished: pull_request"), "{}", out.stderr);
}

#[test]
fn forge_none_keeps_the_change_in_the_clone_and_shows_the_diff() {
    let repo = TestRepo::new();
    let before = repo.refs();
    let script = Script::new(&pr_replies("kept.txt", "only in the clone\n", "Keep it local"));
    let out = run_local(&repo, &script, &["--task", "t", "--forge", "none"]);
    out.assert_code(0);
    assert_eq!(repo.refs(), before, "nothing pushed anywhere");
    assert!(out.stderr.contains("+only in the clone"), "{}", out.stderr);
    assert_eq!(out.events_of("pull_request")[0]["branch"], "upkeep/keep-it-local");
    assert_eq!(out.leftover_temp_entries, 0);
    // It says the truth about the clone: it is removed, unless --keep-clone copies it.
    assert!(
        out.stderr.contains("removed at the end of the run unless --keep-clone"),
        "{}",
        out.stderr
    );
    let keep = tempfile::tempdir().expect("tempdir");
    let dir = keep.path().join("kept");
    let script = Script::new(&pr_replies("kept.txt", "only in the clone\n", "Keep it local"));
    let dir_arg = dir.to_str().expect("utf-8").to_owned();
    let out = run_local(
        &repo,
        &script,
        &["--task", "t", "--forge", "none", "--keep-clone", &dir_arg],
    );
    out.assert_code(0);
    assert!(out.stderr.contains(&format!("kept at {dir_arg}")), "{}", out.stderr);
    assert_eq!(
        super::super::support::git(&dir, &["show", "upkeep/keep-it-local:kept.txt"]),
        "only in the clone"
    );
    assert_eq!(
        super::super::support::git(&dir, &["status", "--porcelain"]),
        "",
        "a clean, ordinary clone"
    );
    assert_eq!(out.leftover_temp_entries, 0);
}

#[test]
fn a_clone_that_fails_still_reports_that_the_run_started() {
    let repo = TestRepo::new();
    // A repository with a missing object: the history cannot be copied, so the clone fails
    // after the run's settings were accepted.
    let blob = repo.git(&["rev-parse", "HEAD:README.md"]);
    let object = repo.path().join(".git/objects").join(&blob[..2]).join(&blob[2..]);
    std::fs::remove_file(&object).expect("remove a loose object");
    let out = run_local(&repo, &Script::new(&[finish("no_tasks")]), &[]);
    out.assert_code(1);
    let kinds: Vec<String> = out
        .events()
        .iter()
        .map(|event| event["type"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(kinds, ["run_started", "run_finished"], "{}", out.stderr);
    assert_eq!(out.events_of("run_finished")[0]["outcome"], "error");
    assert_eq!(out.leftover_temp_entries, 0, "the failed clone's directory removed");
}

/// A local pull request was printed as a `file://…#branch` link, which opens nothing. The
/// commands printed instead review, merge and close it, and they work as printed.
#[test]
fn a_local_pull_request_is_printed_with_commands_that_review_and_merge_it() {
    let repo = TestRepo::new();
    let script = Script::new(&pr_replies("NEW.md", "fresh content\n", "Add NEW"));
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let command = |label: &str| -> String {
        out.stderr
            .lines()
            .find_map(|line| line.trim_start().strip_prefix(label))
            .map(|rest| rest.trim().to_owned())
            .unwrap_or_else(|| panic!("no {label:?} line in {}", out.stderr))
    };
    let run = |command: &str| {
        let output = std::process::Command::new("sh")
            .args(["-c", command])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .output()
            .expect("sh runs");
        assert!(
            output.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    assert!(
        run(&command("review:")).contains("+fresh content"),
        "the review shows the change"
    );
    run(&command("merge:"));
    assert_eq!(
        std::fs::read_to_string(repo.path().join("NEW.md")).expect("merged into the checked-out branch"),
        "fresh content\n"
    );
    run(&command("close:"));
    assert!(
        repo.bot_branches().is_empty(),
        "the branch is gone: {:?}",
        repo.bot_branches()
    );
}
