//! Never lose work: `finish` is refused while the clone holds changes no pull request of the
//! cycle carries, and a cycle that ends any other way reports them instead of dropping them.

use serde_json::json;

use super::support::{Script, TestRepo, finish, reply, run_local};

fn write(path: &str, content: &str) -> String {
    reply("write", &[("write_file", json!({"path": path, "content": content}))])
}

/// Before, `finish` after an edit ended the cycle and the clone, edit and all, was removed.
#[test]
fn finish_with_unsaved_edits_is_refused_and_names_the_files() {
    let repo = TestRepo::new();
    let script = Script::new(&[
        write("NOTES.md", "notes\n"),
        finish("completed"),
        reply(
            "propose",
            &[
                (
                    "create_pull_request",
                    json!({"title": "Add notes", "body": "Adds notes."}),
                ),
                ("write_file", json!({"path": "NOTES.md", "content": "more notes\n"})),
                ("finish", json!({"status": "completed", "summary": "done"})),
            ],
        ),
        reply(
            "propose the rest",
            &[
                (
                    "create_pull_request",
                    json!({"title": "Add notes", "body": "Adds notes."}),
                ),
                ("finish", json!({"status": "completed", "summary": "done"})),
            ],
        ),
    ]);
    let out = run_local(&repo, &script, &["--task", "Add notes"]);
    out.assert_code(0);
    let finishes = out.results_of("finish");
    assert_eq!(finishes.len(), 3, "{finishes:?}");
    for refused in &finishes[..2] {
        assert_eq!(refused["ok"], false, "{refused}");
        let output = refused["output"].as_str().unwrap_or_default();
        assert!(
            output.contains("NOTES.md") && output.contains("create_pull_request"),
            "{output}"
        );
    }
    assert_eq!(finishes[2]["ok"], true);
    assert_eq!(repo.git(&["show", "upkeep/add-notes:NOTES.md"]), "more notes");
    assert!(out.events_of("unsaved_changes").is_empty());
}

/// A cycle cut short by a budget keeps nothing, but says what it had, with the diff.
#[test]
fn a_cycle_ended_by_a_budget_reports_its_unsaved_changes() {
    let repo = TestRepo::new();
    let script = Script::new(&[
        reply(
            "change",
            &[
                ("write_file", json!({"path": "NEW.md", "content": "brand new\n"})),
                (
                    "edit_file",
                    json!({"path": "README.md", "old_text": "Hello.", "new_text": "Hello there."}),
                ),
            ],
        ),
        write("ignored.md", "never reached\n"),
    ]);
    let out = run_local(&repo, &script, &["--task", "Change things", "--max-turns", "1"]);
    out.assert_code(4);
    let unsaved = out.events_of("unsaved_changes");
    assert_eq!(unsaved.len(), 1, "{}", out.stdout);
    assert_eq!(unsaved[0]["files"], json!(["NEW.md", "README.md"]));
    let diff = unsaved[0]["diff"].as_str().unwrap_or_default();
    assert!(diff.contains("+brand new") && diff.contains("+Hello there."), "{diff}");
    assert!(out.stderr.contains("changes no pull request carries"), "{}", out.stderr);
    assert!(out.stderr.contains("+Hello there."), "{}", out.stderr);
}

/// The check reads the index's record of each file's size and time: an edit that keeps the size,
/// made within the same second as the clone's checkout (so its time may match too), and a file
/// deleted by a command after a pull request was committed must still count as unsaved.
#[test]
fn same_size_edits_and_deletions_count_before_and_after_a_commit() {
    let repo = TestRepo::new();
    let script = Script::new(&[
        reply(
            "same size",
            &[
                (
                    "edit_file",
                    json!({"path": "README.md", "old_text": "Hello.", "new_text": "Jello."}),
                ),
                ("finish", json!({"status": "completed", "summary": "done"})),
            ],
        ),
        reply(
            "propose, then delete",
            &[
                ("create_pull_request", json!({"title": "Jello", "body": "Says jello."})),
                ("run_shell_command", json!({"command": "rm README.md"})),
                ("finish", json!({"status": "completed", "summary": "done"})),
            ],
        ),
        reply(
            "give up",
            &[("ask_question", json!({"question_text": "Delete the README too?"}))],
        ),
    ]);
    let out = run_local(&repo, &script, &["--task", "Jello", "--allow-dangerous-tools"]);
    out.assert_code(3);
    let finishes = out.results_of("finish");
    assert_eq!(finishes.len(), 2, "{finishes:?}");
    for refused in &finishes {
        assert_eq!(refused["ok"], false, "{refused}");
        assert!(
            refused["output"].as_str().unwrap_or_default().contains("README.md"),
            "{refused}"
        );
    }
    let unsaved = out.events_of("unsaved_changes");
    assert_eq!(unsaved.len(), 1, "{}", out.stdout);
    assert_eq!(unsaved[0]["files"], json!(["README.md"]));
    assert!(
        unsaved[0]["diff"].as_str().unwrap_or_default().contains("-Jello."),
        "{}",
        unsaved[0]
    );
}
