//! upkeep as a GitHub Actions step: step outputs in the exact format the runner parses, the job
//! summary, annotations, the `issues` `labeled` event selecting its issue, `upkeep init`, and
//! (in `actions/workflows.rs`) the action's metadata and the workflows: actionlint and zizmor
//! check them in `.ci/run`; those tests check what neither does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::support::agents::line;
use super::support::{RunOutput, Script, TestRepo, Upkeep, finish, reply, run_replay};

/// action.yml and the workflows, parsed: the rules of DESIGN.md section 8, "Workflows".
mod workflows;

/// GitHub's parser for `$GITHUB_OUTPUT` (actions/runner `FileCommandManager.cs`), rewritten:
/// lines are split on `\n`; empty lines are skipped; a line whose first `=` comes before any
/// `<<` is `name=value`; a line whose first `<<` comes first opens a heredoc `name<<DELIMITER`
/// whose value is every following line up to the first line equal to the delimiter, joined
/// with `\n`. A missing delimiter or any other line fails the step (here: panics). A later
/// value for the same name replaces an earlier one.
fn parse_github_output(text: &str) -> BTreeMap<String, String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut outputs = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line.is_empty() {
            continue;
        }
        let equals = line.find('=');
        let heredoc = line.find("<<");
        match (equals, heredoc) {
            (Some(e), h) if h.is_none_or(|h| e < h) => {
                let (name, value) = (&line[..e], &line[e + 1..]);
                assert!(!name.is_empty(), "empty output name: {line:?}");
                outputs.insert(name.to_owned(), value.to_owned());
            }
            (_, Some(h)) => {
                let (name, delimiter) = (&line[..h], &line[h + 2..]);
                assert!(
                    !name.is_empty() && !delimiter.is_empty(),
                    "invalid heredoc line: {line:?}"
                );
                let mut value = Vec::new();
                loop {
                    assert!(i < lines.len(), "matching delimiter not found: {delimiter:?}");
                    let next = lines[i];
                    i += 1;
                    if next == delimiter {
                        break;
                    }
                    value.push(next);
                }
                outputs.insert(name.to_owned(), value.join("\n"));
            }
            _ => panic!("invalid output line: {line:?}"),
        }
    }
    outputs
}

#[test]
fn the_output_parser_follows_githubs_rules() {
    let parsed = parse_github_output("a=1\n\nb=x=y<<z\nc<<EOF\nline 1\n\nline=3\nEOF\nd<<D\nD\na=2\n");
    assert_eq!(parsed["a"], "2");
    assert_eq!(parsed["b"], "x=y<<z");
    assert_eq!(parsed["c"], "line 1\n\nline=3");
    assert_eq!(parsed["d"], "");
}

/// The files the runner gives a step, in a temporary directory.
struct Runner {
    dir: tempfile::TempDir,
}

impl Runner {
    fn new() -> Self {
        let runner = Self {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        // Another step's leftovers: upkeep must append, not truncate.
        std::fs::write(runner.output_path(), "earlier=kept\n").expect("write");
        std::fs::write(runner.summary_path(), "# Earlier step\n\n").expect("write");
        runner
    }

    fn output_path(&self) -> PathBuf {
        self.dir.path().join("github_output")
    }

    fn summary_path(&self) -> PathBuf {
        self.dir.path().join("step_summary")
    }

    fn event_path(&self) -> PathBuf {
        self.dir.path().join("event.json")
    }

    fn upkeep(&self) -> Upkeep {
        Upkeep::new()
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", self.output_path())
            .env("GITHUB_STEP_SUMMARY", self.summary_path())
    }

    fn with_event(&self, upkeep: Upkeep, name: &str, payload: &Value) -> Upkeep {
        std::fs::write(self.event_path(), payload.to_string()).expect("write event");
        upkeep
            .env("GITHUB_EVENT_NAME", name)
            .env("GITHUB_EVENT_PATH", self.event_path())
    }

    fn outputs(&self) -> BTreeMap<String, String> {
        let text = std::fs::read_to_string(self.output_path()).expect("outputs written");
        let outputs = parse_github_output(&text);
        assert_eq!(outputs.get("earlier").map(String::as_str), Some("kept"), "{text}");
        outputs
    }

    fn summary(&self) -> String {
        let text = std::fs::read_to_string(self.summary_path()).expect("summary written");
        assert!(
            text.starts_with("# Earlier step\n\n"),
            "appended, not replaced:\n{text}"
        );
        text
    }
}

fn propose(title: &str) -> Vec<String> {
    vec![reply(
        "write and propose",
        &[
            ("write_file", json!({"path": "docs/USAGE.md", "content": "Run it.\n"})),
            (
                "create_pull_request",
                json!({"title": title, "body": "Adds a usage section."}),
            ),
            ("finish", json!({"status": "completed", "summary": title})),
        ],
    )]
}

/// The stop-commands token and the position of the line that resumes command processing.
fn paused_span(stderr: &str) -> (usize, usize) {
    let start = stderr
        .find("::stop-commands::")
        .expect("commands paused during the run");
    let token = stderr[start + "::stop-commands::".len()..]
        .lines()
        .next()
        .expect("token")
        .to_owned();
    assert!(token.len() >= 32, "the token is random: {token}");
    let end = stderr.find(&format!("::{token}::")).expect("commands resumed");
    assert!(start < end);
    (start, end)
}

#[test]
fn a_pull_request_run_writes_every_output_and_a_readable_summary() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let script = Script::with_usage(&propose("Add a usage section"), 1200, 345);
    let out = run_replay(runner.upkeep(), &repo, &script, &["--task", "add usage docs"]);
    out.assert_code(0);
    // --json keeps stdout pure JSON Lines even in Actions: workflow commands go to stderr.
    assert!(!out.events_of("run_finished").is_empty());

    let url = format!(
        "file://{}#upkeep/add-a-usage-section",
        repo.path().canonicalize().expect("path").display()
    );
    let outputs = runner.outputs();
    assert_eq!(outputs["outcome"], "pull_request");
    assert_eq!(outputs["exit-code"], "0");
    assert_eq!(outputs["pull-request-url"], url);
    assert_eq!(outputs["pull-request-urls"], url);
    assert_eq!(outputs["question"], "");
    assert_eq!(outputs["unresolved-findings"], "");

    let summary = runner.summary();
    assert!(summary.contains("### upkeep opened a pull request"), "{summary}");
    assert!(!summary.contains("Unresolved"), "{summary}");
    assert!(
        summary.contains("**Outcome:** `pull_request` (exit code 0)"),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("[Add a usage section](<{url}>)")),
        "{summary}"
    );
    assert!(
        summary.contains("**Tokens:** 1200 input + 345 output = 1545"),
        "{summary}"
    );
    assert!(
        summary.contains("**Cycles:** 1") && summary.contains("**Turns:** 1"),
        "{summary}"
    );
    assert!(summary.contains("**Cost:** $0.0000"), "{summary}");

    paused_span(&out.stderr);
    assert!(!out.stderr.contains("::error::"), "{}", out.stderr);
}

/// A pull request that opened after the last review round still failed: the findings are a
/// step output (one per line) and a section of the job summary, escaped for Markdown.
#[test]
fn unresolved_review_findings_reach_the_outputs_and_the_summary() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let verdict = |findings: &[&str]| {
        reply(
            "verdict",
            &[(
                "complete_task",
                json!({"answer": {"verdict": "fail", "findings": findings}}),
            )],
        )
    };
    let lines = [
        line("root", propose("Add a usage section").remove(0)),
        line("root>reviewer", verdict(&["USAGE.md has no example"])),
        line("root", propose("Add a usage section").remove(0)),
        line(
            "root>reviewer",
            verdict(&["USAGE.md has no example", "the title says *usage* twice"]),
        ),
        line("root", finish("completed")),
    ];
    let script = Script::from_lines(lines.into_iter());
    let out = run_replay(
        runner.upkeep().with_review(),
        &repo,
        &script,
        &["--task", "add usage docs"],
    );
    out.assert_code(0);
    let outputs = runner.outputs();
    assert_eq!(
        outputs["unresolved-findings"],
        "USAGE.md has no example\nthe title says *usage* twice"
    );
    let summary = runner.summary();
    assert!(summary.contains("#### Unresolved review findings"), "{summary}");
    assert!(
        summary.contains("- USAGE.md has no example\n- the title says \\*usage\\* twice\n"),
        "{summary}"
    );
}

#[test]
fn a_multi_line_question_survives_the_output_file_intact() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    // Everything that could confuse a naive writer: `=` and `<<` on a line, a line that looks
    // like a delimiter, an empty line, a percent sign.
    let question = "Which license should the project use?\nname=value << EOF\nEOF\nghadelimiter_0000\n\n100% sure: MIT or Apache-2.0?";
    let script = Script::with_usage(
        &[reply("ask", &[("ask_question", json!({"question_text": question}))])],
        1200,
        345,
    );
    let out = run_replay(runner.upkeep(), &repo, &script, &["--task", "pick a license"]);
    out.assert_code(3);

    let outputs = runner.outputs();
    assert_eq!(outputs["outcome"], "question");
    assert_eq!(outputs["exit-code"], "3");
    assert_eq!(outputs["question"], question);
    assert_eq!(outputs["pull-request-url"], "");

    let summary = runner.summary();
    assert!(
        summary.contains("#### Question\n\n> Which license should the project use?\n> name=value &lt;&lt; EOF\n"),
        "{summary}"
    );
    assert!(summary.contains("> 100% sure: MIT or Apache-2.0?"), "{summary}");

    // A question is a notice, on one line, escaped as the toolkit escapes data.
    let notice = out
        .stderr
        .lines()
        .find(|l| l.starts_with("::notice::"))
        .expect("a notice");
    assert!(
        notice.contains("Which license should the project use?%0Aname=value"),
        "{notice}"
    );
    assert!(notice.contains("100%25 sure"), "{notice}");
    assert!(!out.stderr.contains("::error::"));
}

/// Regression: pull requests were only kept when the cycle ended with `finish`, so one opened
/// before a question (or a budget stop) was missing from the outputs and the summary.
#[test]
fn a_pull_request_opened_before_a_question_is_still_reported() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let script = Script::with_usage(
        &[reply(
            "propose, then ask",
            &[
                ("write_file", json!({"path": "docs/USAGE.md", "content": "Run it.\n"})),
                (
                    "create_pull_request",
                    json!({"title": "Add usage", "body": "Adds usage."}),
                ),
                ("ask_question", json!({"question_text": "Document the CLI flags too?"})),
            ],
        )],
        1200,
        345,
    );
    let out = run_replay(runner.upkeep(), &repo, &script, &["--task", "add usage docs"]);
    out.assert_code(3);
    let outputs = runner.outputs();
    assert_eq!(outputs["outcome"], "question");
    assert!(
        outputs["pull-request-url"].ends_with("#upkeep/add-usage"),
        "{outputs:?}"
    );
    assert_eq!(outputs["question"], "Document the CLI flags too?");
}

#[test]
fn a_labelled_issue_event_makes_the_run_work_exactly_that_issue() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let event = json!({
        "action": "labeled",
        "label": {"id": 7, "name": "upkeep", "color": "0e8a16"},
        "issue": {
            "number": 42,
            "title": "Document how to run it",
            "body": "The README says nothing about running the tool.",
            "state": "open",
            "labels": [{"name": "docs"}, {"name": "upkeep"}],
            "user": {"login": "alice"},
        },
        "repository": {"full_name": "octo/sample", "name": "sample", "owner": {"login": "octo"}},
        "sender": {"login": "alice"},
    });
    let script = Script::with_usage(&propose("Add a usage section"), 1200, 345);
    let upkeep = runner.with_event(runner.upkeep(), "issues", &event);
    // No --task: the issue is the task.
    let out = run_replay(upkeep, &repo, &script, &[]);
    out.assert_code(0);

    assert_eq!(repo.bot_branches(), vec!["upkeep/42-add-a-usage-section"]);
    let description = repo.description("upkeep/42-add-a-usage-section");
    assert!(description.contains("Closes #42"), "{description}");
    assert!(out.stderr.contains("working issue #42"), "{}", out.stderr);
    assert!(runner.summary().contains("**Issue:** #42"));
    assert!(runner.outputs()["pull-request-url"].ends_with("#upkeep/42-add-a-usage-section"));
}

#[test]
fn an_event_for_another_label_does_not_select_the_issue() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let event = json!({
        "action": "labeled",
        "label": {"name": "bug"},
        "issue": {"number": 42, "title": "Crash", "body": null, "state": "open", "labels": [{"name": "bug"}]},
        "repository": {"full_name": "octo/sample"},
    });
    let script = Script::with_usage(&propose("Add a usage section"), 1200, 345);
    let upkeep = runner.with_event(runner.upkeep(), "issues", &event);
    let out = run_replay(upkeep, &repo, &script, &["--task", "add usage docs"]);
    out.assert_code(0);
    assert_eq!(repo.bot_branches(), vec!["upkeep/add-a-usage-section"]);
    assert!(out.stderr.contains("not the task label `upkeep`"), "{}", out.stderr);
}

#[test]
fn a_failing_run_writes_an_error_annotation_after_commands_resume() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    // The model's plan tries to smuggle a workflow command into the log.
    let script = Script::with_usage(
        &[reply(
            "::error::forged by the model",
            &[("read_file", json!({"path": "README.md"}))],
        )],
        1200,
        345,
    );
    let out = run_replay(runner.upkeep(), &repo, &script, &["--task", "t"]);
    out.assert_code(1);

    let (_, resumed) = paused_span(&out.stderr);
    let error = out
        .stderr
        .find("::error::upkeep failed (exit code 1)")
        .expect("an error annotation");
    assert!(
        error > resumed,
        "the annotation comes after commands resume:\n{}",
        out.stderr
    );
    let annotation = out.stderr[error..].lines().next().expect("line");
    assert!(annotation.contains("replay script exhausted"), "{annotation}");
    // The forged line only ever appears inside the paused span.
    for (at, _) in out.stderr.match_indices("forged by the model") {
        assert!(at < resumed, "{}", out.stderr);
    }

    let outputs = runner.outputs();
    assert_eq!(outputs["outcome"], "error");
    assert_eq!(outputs["exit-code"], "1");
    let summary = runner.summary();
    assert!(
        summary.contains("### upkeep failed") && summary.contains("#### Error"),
        "{summary}"
    );
    assert!(summary.contains("replay script exhausted"), "{summary}");
}

#[test]
fn a_usage_error_in_actions_is_reported_too() {
    let runner = Runner::new();
    let out = runner
        .upkeep()
        .args(["run", "--repo", "/nonexistent/repository", "--provider", "ollama"])
        .run();
    out.assert_code(2);
    let outputs = runner.outputs();
    assert_eq!(outputs["outcome"], "usage_error");
    assert_eq!(outputs["exit-code"], "2");
    assert!(
        out.stderr
            .contains("::error::upkeep configuration error (exit code 2): invalid `--repo`"),
        "{}",
        out.stderr
    );
}

#[test]
fn secrets_never_reach_the_outputs_the_summary_or_annotations() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let secret = format!("sk-{}", uuid::Uuid::new_v4().simple());
    let script = Script::with_usage(
        &[reply(
            "ask",
            &[(
                "ask_question",
                json!({"question_text": format!("Is {secret} the key?\nReally?")}),
            )],
        )],
        1200,
        345,
    );
    let out = run_replay(
        runner.upkeep().env("OPENAI_API_KEY", &secret),
        &repo,
        &script,
        &["--task", "t"],
    );
    out.assert_code(3);
    let outputs = std::fs::read_to_string(runner.output_path()).expect("outputs");
    let summary = runner.summary();
    for (what, text) in [("outputs", &outputs), ("summary", &summary), ("stderr", &out.stderr)] {
        assert!(!text.contains(&secret), "{what} leaks the secret:\n{text}");
    }
    assert!(runner.outputs()["question"].contains("[REDACTED]"));
}

#[test]
fn outside_actions_nothing_is_written() {
    let repo = TestRepo::new();
    let runner = Runner::new();
    let script = Script::with_usage(&[finish("no_tasks")], 1200, 345);
    let out = run_replay(
        Upkeep::new()
            .env("GITHUB_OUTPUT", runner.output_path())
            .env("GITHUB_STEP_SUMMARY", runner.summary_path()),
        &repo,
        &script,
        &[],
    );
    out.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(runner.output_path()).expect("file"),
        "earlier=kept\n"
    );
    assert!(!out.stderr.contains("::stop-commands::"));
}

// ---- upkeep init ----

fn init(dir: &Path) -> RunOutput {
    Upkeep::new().args(["init", "--repo-dir"]).args([dir]).run()
}

#[test]
fn init_writes_the_config_and_the_workflow() {
    let repo = TestRepo::new();
    let out = init(repo.path());
    out.assert_code(0);
    let config = std::fs::read_to_string(repo.path().join(".upkeep.toml")).expect("config written");
    let workflow = std::fs::read_to_string(repo.path().join(".github/workflows/upkeep.yml")).expect("workflow written");
    assert_eq!(config, upkeep::init::CONFIG_TEMPLATE);
    assert_eq!(workflow, upkeep::init::WORKFLOW_TEMPLATE);
    upkeep::config::FileConfig::parse(&config, ".upkeep.toml").expect("the written config parses");
    for key in [
        "base",
        "label",
        "tasks_file",
        "instructions",
        "protected_paths",
        "max_turns",
    ] {
        assert!(config.contains(&format!("# {key} = ")), "{key} documented:\n{config}");
    }
    assert!(
        out.stdout.contains("created") && out.stdout.contains(".upkeep.toml"),
        "{}",
        out.stdout
    );
    // What the workflow must do; actionlint (.ci/run) checks that it is a valid workflow.
    assert!(workflow.contains("  issues:\n    types: [labeled]\n"), "{workflow}");
    assert!(workflow.contains("  workflow_dispatch:\n"), "{workflow}");
    workflows::check_upkeep_workflow("upkeep init's workflow", &workflow);

    // The files work: upkeep reads the written .upkeep.toml without complaint.
    repo.commit("upkeep init");
    let script = Script::with_usage(&[finish("no_tasks")], 1200, 345);
    run_replay(Upkeep::new(), &repo, &script, &[]).assert_code(0);
}

#[test]
fn init_defaults_to_the_current_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin!("upkeep"))
        .arg("init")
        .current_dir(dir.path())
        .output()
        .expect("upkeep runs");
    assert!(output.status.success(), "{output:?}");
    assert!(dir.path().join(".upkeep.toml").is_file());
    assert!(dir.path().join(".github/workflows/upkeep.yml").is_file());
}

#[test]
fn init_refuses_to_overwrite_and_then_writes_nothing() {
    let repo = TestRepo::new();
    repo.write(".github/workflows/upkeep.yml", "name: mine\n");
    let out = init(repo.path());
    out.assert_code(2);
    assert!(out.stderr.contains(".github/workflows/upkeep.yml"), "{}", out.stderr);
    assert!(out.stderr.contains("already exists"), "{}", out.stderr);
    assert!(
        !repo.path().join(".upkeep.toml").exists(),
        "nothing written when one file exists"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join(".github/workflows/upkeep.yml")).expect("kept"),
        "name: mine\n"
    );

    let repo = TestRepo::new();
    repo.write(".upkeep.toml", "label = \"mine\"\n");
    let out = init(repo.path());
    out.assert_code(2);
    assert!(out.stderr.contains(".upkeep.toml"), "{}", out.stderr);
    assert!(
        !repo.path().join(".github").exists(),
        "nothing written when one file exists"
    );

    // A second init after a successful one changes nothing either.
    let repo = TestRepo::new();
    init(repo.path()).assert_code(0);
    let before = std::fs::read_to_string(repo.path().join(".upkeep.toml")).expect("config");
    init(repo.path()).assert_code(2);
    assert_eq!(
        std::fs::read_to_string(repo.path().join(".upkeep.toml")).expect("config"),
        before
    );

    init(&repo.path().join("no-such-dir")).assert_code(2);
}

// ---- on GitHub: the issue event end to end ----

/// The whole Actions scenario on the GitHub forge, offline: an `issues` `labeled` event for
/// owner/name#42, a git server that demands the token, a REST API stand-in that lists the issue
/// with a comment, and an OpenAI-compatible model stand-in that records what it was sent.
#[tokio::test(flavor = "multi_thread")]
async fn on_github_the_labelled_issue_and_its_comments_become_the_task() {
    use super::support::git_http::GitHttpServer;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let token = format!("ghp_{}", uuid::Uuid::new_v4().simple());
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("owner")).expect("mkdir");
    let bare = root.join("owner/name.git");
    let bare_arg = bare.to_str().expect("utf-8 path");
    super::support::git(tmp.path(), &["init", "-q", "--bare", "-b", "main", bare_arg]);
    TestRepo::new().git(&["push", "-q", bare_arg, "main:main"]);
    let git = GitHttpServer::start(&root, Some(&token));

    let api = MockServer::start().await;
    let issue = json!({
        "number": 42, "title": "Document how to run it", "body": "The README says nothing about running it.",
        "state": "open", "comments": 1, "user": {"login": "alice"},
        "labels": [{"name": "upkeep"}],
        "html_url": "https://github.com/owner/name/issues/42",
    });
    let respond = |status: u16, body: Value| ResponseTemplate::new(status).set_body_json(body);
    for (verb, route, status, body) in [
        ("GET", "/repos/owner/name/pulls", 200, json!([])),
        ("GET", "/repos/owner/name/issues", 200, json!([issue.clone()])),
        (
            "GET",
            "/repos/owner/name/issues/42/comments",
            200,
            json!([{"id": 1, "body": "Mention the --dry-run flag too.", "user": {"login": "bob"},
                    "created_at": "2024-01-01T00:00:00Z"}]),
        ),
        (
            "POST",
            "/repos/owner/name/pulls",
            201,
            json!({"number": 99, "html_url": "https://github.com/owner/name/pull/99", "state": "open",
                   "title": "Add a usage section", "head": {"ref": "upkeep/42-add-a-usage-section"},
                   "base": {"ref": "main"}}),
        ),
    ] {
        Mock::given(method(verb))
            .and(path(route))
            .respond_with(respond(status, body))
            .mount(&api)
            .await;
    }
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(respond(
            200,
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4.1",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": propose("Add a usage section")[0]}}],
                "usage": {"prompt_tokens": 900, "completion_tokens": 80, "total_tokens": 980},
            }),
        ))
        .mount(&model)
        .await;

    let runner = Runner::new();
    let event = json!({
        "action": "labeled",
        "label": {"name": "upkeep"},
        "issue": issue,
        "repository": {"full_name": "owner/name", "name": "name", "owner": {"login": "owner"}},
    });
    let upkeep = runner
        .with_event(runner.upkeep(), "issues", &event)
        .env("GITHUB_SERVER_URL", git.url())
        .env("GITHUB_API_URL", api.uri())
        .env("GITHUB_TOKEN", &token)
        .env("OPENAI_API_KEY", "sk-test-key-for-the-model-mock")
        // What the action sets from its inputs.
        .env("UPKEEP_REPO", "owner/name")
        .env("UPKEEP_BASE_URL", format!("{}/v1", model.uri()))
        .args(["run"]);
    let out = upkeep.run_async().await;
    out.assert_code(0);

    let sent = model.received_requests().await.unwrap_or_default();
    let first: Value = serde_json::from_slice(&sent[0].body).expect("JSON request");
    let prompt = first["messages"].to_string();
    assert!(prompt.contains("Issue #42: Document how to run it"), "{prompt}");
    assert!(prompt.contains("The README says nothing about running it."), "{prompt}");
    assert!(
        prompt.contains("comment by bob:\\n> Mention the --dry-run flag too."),
        "{prompt}"
    );

    let posts: Vec<_> = api
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.method.as_str() == "POST" && r.url.path() == "/repos/owner/name/pulls")
        .collect();
    assert_eq!(posts.len(), 1);
    let pull: Value = serde_json::from_slice(&posts[0].body).expect("JSON body");
    assert_eq!(pull["head"], "upkeep/42-add-a-usage-section");
    assert!(pull["body"].as_str().unwrap_or("").contains("Closes #42"), "{pull}");

    let outputs = runner.outputs();
    assert_eq!(outputs["outcome"], "pull_request");
    assert_eq!(outputs["pull-request-url"], "https://github.com/owner/name/pull/99");
    let summary = runner.summary();
    assert!(
        summary.contains("[Add a usage section](<https://github.com/owner/name/pull/99>)"),
        "{summary}"
    );
    assert!(summary.contains("**Tokens:** 900 input + 80 output = 980"), "{summary}");
    for text in [
        &summary,
        &out.stderr,
        &std::fs::read_to_string(runner.output_path()).expect("outputs"),
    ] {
        assert!(!text.contains(&token));
    }
}
