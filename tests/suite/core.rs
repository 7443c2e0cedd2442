//! The core pipeline end to end on local repositories: replies, batches, tools, path
//! confinement, pull requests on the local forge, continuous mode, questions, traces.

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

#[test]
fn every_path_escape_is_refused_and_nothing_is_written_outside() {
    let outside = tempfile::tempdir().expect("tempdir");
    let repo = TestRepo::new();
    std::os::unix::fs::symlink(outside.path(), repo.path().join("escape")).expect("symlink");
    repo.commit("add a symlink that points outside");
    let attempts = [
        json!({"path": "../outside.txt", "content": "x"}),
        json!({"path": "src/../../outside.txt", "content": "x"}),
        json!({"path": outside.path().join("abs.txt").display().to_string(), "content": "x"}),
        json!({"path": ".git/config", "content": "x"}),
        json!({"path": ".git/hooks/pre-commit", "content": "x"}),
        json!({"path": "escape/through-link.txt", "content": "x"}),
        json!({"path": ".github/workflows/ci.yml", "content": "x"}),
    ];
    let mut replies: Vec<String> = attempts
        .iter()
        .map(|args| reply("escape", &[("write_file", args.clone())]))
        .collect();
    replies.push(reply(
        "read outside",
        &[("read_file", json!({"path": "escape/secret.txt"}))],
    ));
    replies.push(finish("no_tasks"));
    std::fs::write(outside.path().join("secret.txt"), "outside secret").expect("write");
    let out = run_local(&repo, &Script::new(&replies), &["--task", "t"]);
    out.assert_code(0);
    let results = out.events_of("tool_result");
    let writes: Vec<_> = results.iter().filter(|e| e["tool"] == "write_file").collect();
    assert_eq!(writes.len(), attempts.len());
    for result in &writes {
        assert_eq!(result["ok"], false, "{result}");
    }
    let read = results
        .iter()
        .find(|e| e["tool"] == "read_file")
        .expect("read attempted");
    assert_eq!(read["ok"], false);
    assert!(!read["output"].as_str().unwrap_or("").contains("outside secret"));
    let outside_entries: Vec<_> = std::fs::read_dir(outside.path())
        .expect("read")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        outside_entries,
        vec![std::ffi::OsString::from("secret.txt")],
        "nothing written outside"
    );
    assert!(!repo.path().parent().expect("parent").join("outside.txt").exists());
}

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
    let replayed = super::support::Upkeep::new()
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
fn a_broken_upkeep_toml_is_a_usage_error_naming_the_key() {
    let repo = TestRepo::with_files(&[(".upkeep.toml", "max_turns = \"lots\"\n")]);
    let out = run_local(&repo, &Script::new(&[finish("no_tasks")]), &[]);
    out.assert_code(2);
    assert!(out.stderr.contains("max_turns"), "{}", out.stderr);
    assert!(
        out.events_of("model_response").is_empty(),
        "no model call before the error"
    );
}

#[test]
fn upkeep_toml_settings_apply_below_flags() {
    let repo = TestRepo::with_files(&[
        (".upkeep.toml", "max_turns = 1\ntasks_file = \"BACKLOG.md\"\n"),
        ("BACKLOG.md", "- x\n"),
    ]);
    let read = reply("read", &[("read_file", json!({"path": "README.md"}))]);
    let out = run_local(&repo, &Script::new(&[read.clone(), read.clone()]), &[]);
    out.assert_code(4);
    assert_eq!(out.events_of("model_response").len(), 1, "max_turns from the file");
    // The flag wins over the file; the environment too.
    let out = run_local(
        &repo,
        &Script::new(&[read.clone(), finish("no_tasks")]),
        &["--max-turns", "2"],
    );
    out.assert_code(0);
}

#[test]
fn bad_flags_exit_2_before_any_work() {
    let repo = TestRepo::new();
    let out = Upkeep::new()
        .args(["run", "--max-turns", "zero", "--repo"])
        .args([repo.path()])
        .run();
    out.assert_code(2);
    assert!(out.stderr.contains("--max-turns"), "{}", out.stderr);
    let out = Upkeep::new().args(["run", "--repo"]).args([repo.path()]).run();
    out.assert_code(2);
    assert!(out.stderr.contains("OPENAI_API_KEY"), "{}", out.stderr);
    let out = Upkeep::new()
        .env("UPKEEP_MAX_TURNS", "-3")
        .args(["run", "--repo"])
        .args([repo.path()])
        .run();
    out.assert_code(2);
    assert!(
        out.stderr.to_lowercase().contains("max-turns") || out.stderr.contains("MAX_TURNS"),
        "{}",
        out.stderr
    );
}

#[test]
fn environment_variables_set_options() {
    let repo = TestRepo::new();
    let script = Script::new(&[finish("no_tasks")]);
    let out = Upkeep::new()
        .env("UPKEEP_REPO", repo.path())
        .env("UPKEEP_REPLAY", script.path())
        .env("UPKEEP_JSON", "true")
        .args(["run"])
        .run();
    out.assert_code(0);
    assert_eq!(out.events_of("run_started")[0]["provider"], "replay");
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
    let description = super::support::git(
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
    let readme = super::support::git(&dir, &["show", "main:README.md"]);
    assert!(readme.contains("recieve"), "base branch unchanged");
}

#[test]
fn base_flag_picks_the_branch_and_the_author_is_configurable() {
    let repo = TestRepo::new();
    repo.git(&["checkout", "-q", "-b", "develop"]);
    repo.write("DEVELOP.md", "only on develop\n");
    repo.commit("develop work");
    repo.git(&["checkout", "-q", "main"]);
    let develop_before = repo.git(&["rev-parse", "develop"]);
    let script = Script::new(&pr_replies("new.txt", "n\n", "Add new"));
    let out = run_local(
        &repo,
        &script,
        &[
            "--task",
            "t",
            "--base",
            "develop",
            "--author-name",
            "Maint Bot",
            "--author-email",
            "bot@example.org",
        ],
    );
    out.assert_code(0);
    assert_eq!(out.events_of("cycle_started")[0]["base"], "develop");
    assert_eq!(
        repo.git(&["rev-parse", "upkeep/add-new~1"]),
        develop_before,
        "branched from develop"
    );
    assert_eq!(repo.git(&["rev-parse", "develop"]), develop_before, "develop unchanged");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>", "upkeep/add-new"]),
        "Maint Bot <bot@example.org>"
    );
}

#[test]
fn the_default_identity_is_upkeeps_own() {
    let repo = TestRepo::new();
    let out = run_local(
        &repo,
        &Script::new(&pr_replies("n.txt", "n\n", "Add n")),
        &["--task", "t"],
    );
    out.assert_code(0);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>", "upkeep/add-n"]),
        "upkeep <upkeep@users.noreply.github.com>"
    );
}

#[test]
fn list_files_honours_gitignore() {
    let repo = TestRepo::with_files(&[(".gitignore", "build/\n*.log\n"), ("src/a.rs", "a\n")]);
    std::fs::create_dir_all(repo.path().join("build")).expect("mkdir");
    let script = Script::new(&[
        reply(
            "list",
            &[
                ("write_file", json!({"path": "build/out.bin", "content": "x"})),
                ("write_file", json!({"path": "debug.log", "content": "x"})),
                ("list_files", json!({})),
                ("search_files", json!({"pattern": "^a$"})),
            ],
        ),
        finish("no_tasks"),
    ]);
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let results = out.events_of("tool_result");
    let listing = results.iter().find(|e| e["tool"] == "list_files").expect("listed")["output"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(
        listing.contains("src/a.rs") && listing.contains(".gitignore"),
        "{listing}"
    );
    assert!(
        !listing.contains("build/out.bin") && !listing.contains("debug.log"),
        "{listing}"
    );
    let search = results.iter().find(|e| e["tool"] == "search_files").expect("searched")["output"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_eq!(search, "src/a.rs:1: a");
}

#[test]
fn help_text() {
    let out = Upkeep::new().args(["run", "--help"]).run();
    out.assert_code(0);
    insta::assert_snapshot!(out.stdout);
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
        super::support::git(&dir, &["show", "upkeep/keep-it-local:kept.txt"]),
        "only in the clone"
    );
    assert_eq!(
        super::support::git(&dir, &["status", "--porcelain"]),
        "",
        "a clean, ordinary clone"
    );
    assert_eq!(out.leftover_temp_entries, 0);
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
