//! The core pipeline end to end on local repositories: replies, batches, tools, path
//! confinement, pull requests on the local forge, continuous mode, questions, traces.
//!
//! This module holds the replies the suites share and the safe-mode tests of the shell tool; the
//! other tests live in its submodules by subject.

mod cycle;
mod options;
mod output;
mod tools;

use serde_json::json;

use super::support::{Script, TestRepo, Upkeep, finish, reply, run_local};

fn pr_replies(path: &str, content: &str, title: &str) -> Vec<String> {
    vec![reply(
        "write and propose",
        &[
            ("write_file", json!({"path": path, "content": content})),
            (
                "create_pull_request",
                json!({"title": title, "body": format!("Adds {path}.")}),
            ),
            ("finish", json!({"status": "completed", "summary": title})),
        ],
    )]
}

#[test]
fn safe_mode_rejects_run_shell_command_and_never_runs_it() {
    let repo = TestRepo::new();
    let replies = [
        reply(
            "try the shell",
            &[("run_shell_command", json!({"command": "echo made > marker.txt"}))],
        ),
        reply("look", &[("read_file", json!({"path": "marker.txt"}))]),
        finish("no_tasks"),
    ];
    let script = Script::new(&replies);
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let rejected = out.events_of("tool_rejected");
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0]["tool"], "run_shell_command");
    assert!(
        rejected[0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("--allow-dangerous-tools")
    );
    let read = out
        .events_of("tool_result")
        .into_iter()
        .find(|e| e["tool"] == "read_file")
        .expect("read ran");
    assert_eq!(read["ok"], false, "marker.txt was never created: {read}");

    // With the flag the same script runs the command (and then removes what it made, which
    // `finish` would otherwise refuse to drop).
    let mut replies = replies.to_vec();
    replies.insert(
        2,
        reply("tidy up", &[("run_shell_command", json!({"command": "rm marker.txt"}))]),
    );
    let script = Script::new(&replies);
    let out = run_local(&repo, &script, &["--task", "t", "--allow-dangerous-tools"]);
    out.assert_code(0);
    assert!(out.events_of("tool_rejected").is_empty());
    let read = out
        .events_of("tool_result")
        .into_iter()
        .find(|e| e["tool"] == "read_file")
        .expect("read ran");
    assert_eq!(read["ok"], true, "{read}");
    assert_eq!(read["output"], "made\n");
}

#[test]
fn the_tools_listing_hides_dangerous_tools_in_safe_mode() {
    let safe = Upkeep::new().args(["tools"]).run();
    safe.assert_code(0);
    assert!(safe.stdout.contains("write_file") && safe.stdout.contains("create_pull_request"));
    assert!(!safe.stdout.contains("run_shell_command"));
    let dangerous = Upkeep::new().args(["tools", "--allow-dangerous-tools", "--json"]).run();
    dangerous.assert_code(0);
    let listing: serde_json::Value = serde_json::from_str(&dangerous.stdout).expect("json");
    let names: Vec<&str> = listing["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"run_shell_command"), "{names:?}");
}
