//! Which branch a pull request lands on: different tasks never share one, the same task or
//! issue keeps its own, and an update says it is one.

use serde_json::json;

use super::support::{Script, TestRepo, finish, reply, run_local};

fn propose(path: &str, content: &str, title: &str) -> String {
    reply(
        "change and propose",
        &[
            ("write_file", json!({"path": path, "content": content})),
            ("create_pull_request", json!({"title": title, "body": "A change."})),
            ("finish", json!({"status": "completed", "summary": "done"})),
        ],
    )
}

/// Two backlog tasks whose titles slug alike once shared `upkeep/update-docs`, and the second
/// force-pushed over the first one's pull request.
#[test]
fn two_tasks_with_the_same_title_in_one_run_give_two_pull_requests() {
    let repo = TestRepo::with_files(&[
        ("README.md", "# Sample\n"),
        ("TODO.md", "- [ ] document install\n- [ ] document usage\n"),
    ]);
    let script = Script::new(&[
        propose("INSTALL.md", "Install it.\n", "Update docs"),
        propose("USAGE.md", "Use it.\n", "Update docs"),
        finish("no_tasks"),
    ]);
    let out = run_local(&repo, &script, &["--continuous"]);
    out.assert_code(0);
    let mut branches = repo.bot_branches();
    branches.sort();
    assert_eq!(branches, ["upkeep/update-docs", "upkeep/update-docs-2"]);
    let first = repo.git(&["show", "upkeep/update-docs:INSTALL.md"]);
    assert_eq!(first, "Install it.");
    let second = repo.git(&["ls-tree", "--name-only", "upkeep/update-docs-2"]);
    assert!(second.contains("USAGE.md"), "{second}");
    let events = out.events_of("pull_request");
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|event| event["updated"] == false), "{events:?}");
}

/// The same task text, run again, updates its pull request and says so.
#[test]
fn the_same_task_run_again_updates_its_pull_request_and_says_so() {
    let repo = TestRepo::new();
    let task = ["--task", "Add a changelog"];
    let first = run_local(
        &repo,
        &Script::new(&[propose("CHANGELOG.md", "# Changes\n", "Add a changelog")]),
        &task,
    );
    first.assert_code(0);
    let second = run_local(
        &repo,
        &Script::new(&[propose("CHANGELOG.md", "# Changelog\n", "Start a changelog")]),
        &task,
    );
    second.assert_code(0);
    assert_eq!(repo.bot_branches(), ["upkeep/add-a-changelog"]);
    assert_eq!(
        repo.git(&["show", "upkeep/add-a-changelog:CHANGELOG.md"]),
        "# Changelog"
    );
    let event = &second.events_of("pull_request")[0];
    assert_eq!(event["updated"], true, "{event}");
    assert!(
        second.stderr.contains("✓ pull request updated: Start a changelog"),
        "{}",
        second.stderr
    );
    assert!(
        first.stderr.contains("✓ pull request opened: Add a changelog"),
        "{}",
        first.stderr
    );
}

/// The same task run again rebuilds its branch; a commit someone else added to that branch in
/// the local repository meanwhile is never dropped (before, the branch was simply moved).
#[test]
fn a_local_bot_branch_with_someone_elses_commit_is_not_moved() {
    let repo = TestRepo::new();
    let task = ["--task", "Add a changelog"];
    run_local(
        &repo,
        &Script::new(&[propose("CHANGELOG.md", "# Changes\n", "Add a changelog")]),
        &task,
    )
    .assert_code(0);
    repo.git(&["checkout", "-q", "upkeep/add-a-changelog"]);
    repo.write("CHANGELOG.md", "# Changes\n\n- a maintainer's note\n");
    repo.commit("Maintainer's note");
    repo.git(&["checkout", "-q", "main"]);
    let before = repo.git(&["rev-parse", "upkeep/add-a-changelog"]);
    let second = Script::new(&[
        reply(
            "redo",
            &[
                (
                    "write_file",
                    json!({"path": "CHANGELOG.md", "content": "# Changelog\n"}),
                ),
                (
                    "create_pull_request",
                    json!({"title": "Add a changelog", "body": "Adds one."}),
                ),
            ],
        ),
        reply(
            "stuck",
            &[("ask_question", json!({"question_text": "Build on their note?"}))],
        ),
    ]);
    let out = run_local(&repo, &second, &task);
    out.assert_code(3);
    let result = out
        .events_of("tool_result")
        .into_iter()
        .find(|result| result["tool"] == "create_pull_request")
        .expect("create_pull_request ran");
    assert_eq!(result["ok"], false, "{result}");
    assert!(
        result["output"].as_str().unwrap_or("").contains("test@example.com"),
        "{result}"
    );
    assert_eq!(
        repo.git(&["rev-parse", "upkeep/add-a-changelog"]),
        before,
        "the branch was not moved"
    );
}
