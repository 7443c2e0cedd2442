//! One cycle's loop: the pull request it opens on the local forge, the events it prints, batches
//! that stop at a failing call, invalid replies asked again, the turn limit, and the end of a
//! script; continuous mode over several tasks; traces replayed into the same pull request.

use serde_json::json;

use super::super::support::{Script, TestRepo, finish, reply, run_local};
use super::pr_replies;

#[test]
fn single_cycle_opens_a_local_pull_request_and_leaves_the_base_alone() {
    let repo = TestRepo::new();
    let main_before = repo.git(&["rev-parse", "main"]);
    let script = Script::new(&pr_replies("docs/NOTES.md", "notes\n", "Add notes"));
    let out = run_local(&repo, &script, &["--task", "add notes"]);
    out.assert_code(0);

    assert_eq!(repo.bot_branches(), vec!["upkeep/add-notes"]);
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before, "base branch unchanged");
    assert_eq!(repo.git(&["show", "upkeep/add-notes:docs/NOTES.md"]), "notes");
    assert_eq!(repo.git(&["log", "--format=%s", "-1", "upkeep/add-notes"]), "Add notes");
    assert_eq!(
        repo.git(&["rev-parse", "upkeep/add-notes~1"]),
        main_before,
        "one commit on top of main"
    );
    assert_eq!(repo.description("upkeep/add-notes"), "Add notes\n\nAdds docs/NOTES.md.");

    let prs = out.events_of("pull_request");
    assert_eq!(prs.len(), 1);
    assert_eq!(prs[0]["branch"], "upkeep/add-notes");
    let finished = out.events_of("run_finished");
    assert_eq!(finished[0]["outcome"], "pull_request");
    assert_eq!(finished[0]["exit_code"], 0);
    assert_eq!(out.leftover_temp_entries, 0, "temporary clone removed");
}

#[test]
fn every_event_carries_run_id_timestamp_and_scope() {
    let repo = TestRepo::new();
    let script = Script::new(&[finish("no_tasks")]);
    let out = run_local(&repo, &script, &[]);
    out.assert_code(0);
    let events = out.events();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap_or("")).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "cycle_started",
            "context",
            "model_response",
            "plan",
            "tool_call",
            "tool_result",
            "cycle_finished",
            "run_finished"
        ]
    );
    let run_id = events[0]["run_id"].as_str().expect("run_id").to_owned();
    for event in &events {
        assert_eq!(event["run_id"], run_id.as_str());
        let ts = event["ts"].as_str().expect("ts");
        assert!(ts.parse::<jiff::Timestamp>().is_ok(), "RFC 3339 timestamp: {ts}");
    }
    assert_eq!(events[5]["cycle"], 1);
    assert_eq!(events[5]["turn"], 1);
    assert_eq!(events[2]["turn"], 1, "the context event is scoped to its turn");
    assert!(events[2]["estimated_tokens"].as_u64().is_some_and(|tokens| tokens > 0));
    assert_eq!(events[0]["dangerous_tools"], false);
}

#[test]
fn a_failing_call_stops_its_batch_and_the_model_recovers() {
    let repo = TestRepo::new();
    let script = Script::new(&[
        reply(
            "three calls; the second fails",
            &[
                ("write_file", json!({"path": "a.txt", "content": "a"})),
                (
                    "edit_file",
                    json!({"path": "missing.txt", "old_text": "x", "new_text": "y"}),
                ),
                ("write_file", json!({"path": "b.txt", "content": "b"})),
            ],
        ),
        reply(
            "recover: write b, propose",
            &[
                ("write_file", json!({"path": "c.txt", "content": "c"})),
                ("create_pull_request", json!({"title": "Add files", "body": "a and c"})),
                ("finish", json!({"status": "completed", "summary": "ok"})),
            ],
        ),
    ]);
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let turn_one_calls: Vec<_> = out
        .events_of("tool_call")
        .into_iter()
        .filter(|e| e["turn"] == 1)
        .collect();
    assert_eq!(turn_one_calls.len(), 2, "the call after the failing one never ran");
    let failed: Vec<_> = out
        .events_of("tool_result")
        .into_iter()
        .filter(|e| e["ok"] == false)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["tool"], "edit_file");
    let files = repo.git(&["ls-tree", "--name-only", "upkeep/add-files"]);
    assert!(files.contains("a.txt") && files.contains("c.txt"), "{files}");
    assert!(!files.contains("b.txt"), "skipped call did not run: {files}");
}

#[test]
fn an_invalid_reply_is_asked_again_and_the_run_succeeds() {
    let repo = TestRepo::new();
    let script = Script::new(&[
        "Sure! I will look at the repository first.".to_owned(),
        "{'plan': 'lenient', 'tool_calls': [{'tool_name': 'finish', 'arguments': {'status': 'no_tasks', 'summary': 'nothing',},},],}".to_owned(),
    ]);
    let out = run_local(&repo, &script, &[]);
    out.assert_code(0);
    assert_eq!(out.events_of("model_response").len(), 2, "the retry counts as a turn");
    assert_eq!(out.events_of("run_finished")[0]["outcome"], "no_tasks");
}

#[test]
fn max_turns_ends_the_cycle_with_exit_4() {
    let repo = TestRepo::new();
    let read = reply("read", &[("read_file", json!({"path": "README.md"}))]);
    let script = Script::new(&[read.clone(), read.clone(), read]);
    let out = run_local(&repo, &script, &["--task", "t", "--max-turns", "2"]);
    out.assert_code(4);
    assert_eq!(out.events_of("model_response").len(), 2);
    assert!(out.stderr.contains("--max-turns 2"), "{}", out.stderr);
    assert_eq!(out.events_of("cycle_finished")[0]["outcome"], "limit");
    assert_eq!(out.leftover_temp_entries, 0);
}

#[test]
fn running_out_of_scripted_replies_is_a_runtime_error() {
    let repo = TestRepo::new();
    let script = Script::new(&[reply("read", &[("read_file", json!({"path": "README.md"}))])]);
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(1);
    assert!(out.stderr.contains("replay script exhausted"), "{}", out.stderr);
    assert_eq!(out.leftover_temp_entries, 0, "temporary clone removed after an error");
}

#[test]
fn continuous_mode_works_two_tasks_then_stops_on_no_tasks() {
    let repo = TestRepo::with_files(&[("TODO.md", "- [ ] add one.txt\n- [ ] add two.txt\n")]);
    let mut replies = pr_replies("one.txt", "1\n", "Add one");
    replies.extend(pr_replies("two.txt", "2\n", "Add two"));
    replies.push(finish("no_tasks"));
    let out = run_local(&repo, &Script::new(&replies), &["--continuous"]);
    out.assert_code(0);
    assert_eq!(repo.bot_branches(), vec!["upkeep/add-one", "upkeep/add-two"]);
    // Each cycle starts from a fresh copy of the base: cycle two's branch lacks cycle one's file.
    let second = repo.git(&["ls-tree", "--name-only", "upkeep/add-two"]);
    assert!(!second.contains("one.txt"), "{second}");
    let cycles: Vec<_> = out
        .events_of("cycle_finished")
        .iter()
        .map(|e| e["outcome"].clone())
        .collect();
    assert_eq!(
        cycles,
        vec![json!("pull_request"), json!("pull_request"), json!("no_tasks")]
    );
    assert_eq!(out.events_of("run_finished")[0]["cycles"], 3);
}

#[test]
fn continuous_mode_stops_at_max_cycles_with_exit_0() {
    let repo = TestRepo::new();
    let mut replies = pr_replies("one.txt", "1\n", "Add one");
    replies.extend(pr_replies("two.txt", "2\n", "Add two"));
    let out = run_local(&repo, &Script::new(&replies), &["--continuous", "--max-cycles", "1"]);
    out.assert_code(0);
    assert_eq!(repo.bot_branches(), vec!["upkeep/add-one"]);
    assert_eq!(out.events_of("run_finished")[0]["outcome"], "max_cycles");
}

#[test]
fn a_question_ends_a_continuous_run_with_exit_3() {
    let repo = TestRepo::new();
    let script = Script::new(&[reply(
        "unclear",
        &[
            (
                "ask_question",
                json!({"question_text": "Should the API stay backwards compatible?"}),
            ),
            ("write_file", json!({"path": "never.txt", "content": "x"})),
        ],
    )]);
    let out = run_local(&repo, &script, &["--continuous"]);
    out.assert_code(3);
    assert!(
        out.stderr.contains("Should the API stay backwards compatible?"),
        "{}",
        out.stderr
    );
    let questions = out.events_of("question");
    assert_eq!(questions[0]["question"], "Should the API stay backwards compatible?");
    assert_eq!(
        out.events_of("tool_call").len(),
        1,
        "the call after ask_question was skipped"
    );
    assert_eq!(out.events_of("run_finished")[0]["exit_code"], 3);
    assert_eq!(out.leftover_temp_entries, 0, "temporary clone removed after a question");
}

#[test]
fn a_trace_replays_into_the_same_pull_request() {
    let first = TestRepo::new();
    let trace_dir = tempfile::tempdir().expect("tempdir");
    let trace = trace_dir.path().join("trace.jsonl");
    let script = Script::new(&pr_replies("CHANGELOG.md", "# Changelog\n", "Start a changelog"));
    let out = run_local(
        &first,
        &script,
        &["--task", "t", "--trace", trace.to_str().expect("utf-8")],
    );
    out.assert_code(0);
    let trace_text = std::fs::read_to_string(&trace).expect("trace written");
    assert_eq!(
        trace_text.lines().count(),
        out.stdout.lines().count(),
        "trace holds the same events as stdout"
    );

    let second = TestRepo::new();
    let replayed = super::super::support::Upkeep::new()
        .args(["run", "--task", "t", "--json", "--repo"])
        .args([second.path()])
        .args(["--replay"])
        .args([&trace])
        .run();
    replayed.assert_code(0);
    assert_eq!(second.bot_branches(), first.bot_branches());
    let diff = |repo: &TestRepo| repo.git(&["diff", "main", "upkeep/start-a-changelog"]);
    assert_eq!(diff(&second), diff(&first));
    assert_eq!(
        second.description("upkeep/start-a-changelog"),
        first.description("upkeep/start-a-changelog")
    );
}

#[test]
fn a_trace_file_that_cannot_be_opened_is_a_usage_error() {
    let repo = TestRepo::new();
    let out = run_local(
        &repo,
        &Script::new(&[finish("no_tasks")]),
        &["--trace", "/nonexistent-dir/trace.jsonl"],
    );
    out.assert_code(2);
    assert!(out.stderr.contains("--trace"), "{}", out.stderr);
    let events = out.events();
    assert_eq!(events.len(), 1, "no run started, only its end: {}", out.stdout);
    assert_eq!(events[0]["type"], "run_finished");
    assert_eq!(events[0]["outcome"], "usage_error");
}
