//! Validation before a pull request (DESIGN section 12): checks and the reviewer run before
//! `create_pull_request` commits; a failing round is the call's result and nothing is pushed;
//! after `--max-reviews` rounds the pull request opens with the unresolved findings in its body.

use super::support::agents::{OperatorConfig, line};
use super::support::conformance::{Api, assert_requests_conform};
use super::support::model_api::model_requests;
use super::support::model_api::openai_sequence;
use super::support::{RunOutput, Script, TestRepo, Upkeep, finish, reply, run_replay};
use serde_json::{Value, json};

const TITLE: &str = "Add notes";

fn write_and_propose(path: &str, content: &str) -> String {
    reply(
        "write and propose",
        &[
            ("write_file", json!({"path": path, "content": content})),
            ("create_pull_request", json!({"title": TITLE, "body": "Adds notes."})),
        ],
    )
}

fn verdict(verdict: &str, findings: &[&str]) -> String {
    reply(
        "verdict",
        &[(
            "complete_task",
            json!({"answer": {"verdict": verdict, "findings": findings}}),
        )],
    )
}

fn the_branch(out: &RunOutput) -> String {
    let opened = out.events_of("pull_request");
    assert_eq!(opened.len(), 1, "one pull request: {}", out.stdout);
    opened[0]["branch"].as_str().expect("branch").to_owned()
}

/// Commits the bot branch holds over `main`.
fn commits_over_main(repo: &TestRepo, branch: &str) -> String {
    repo.git(&["rev-list", "--count", &format!("main..{branch}")])
}

/// Seen from the model API: the reviewer (on the cheaper `--review-model`) gets the task, the
/// repository's instructions and the diff; its `fail` makes `create_pull_request` fail with the
/// findings, nothing is pushed, and the model's second attempt passes.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_review_holds_the_push_back_and_the_fixed_change_passes() {
    let repo = TestRepo::with_files(&[
        ("README.md", "# Sample\n"),
        (
            ".upkeep.toml",
            "instructions = \"Every change updates CHANGELOG.md.\"\n",
        ),
        ("AGENTS.md", "Notes are written in British English.\n"),
    ]);
    let finding = "CHANGELOG.md is not updated, as the repository's instructions require";
    let replies = [
        write_and_propose("NOTES.md", "draft notes\n"),
        verdict("fail", &[finding]),
        write_and_propose("CHANGELOG.md", "- Add notes\n"),
        verdict("pass", &[]),
        finish("completed"),
    ];
    let server = openai_sequence(&replies).await;
    let out = Upkeep::new()
        .with_review()
        .args(["run", "--json", "--provider", "openai", "--model", "gpt-4.1"])
        .args(["--review-model", "gpt-4.1-mini", "--task", "Add a notes file"])
        .args(["--base-url", &format!("{}/v1", server.uri()), "--repo"])
        .args([repo.path()])
        .run_async()
        .await;
    out.assert_code(0);

    let recorded = model_requests(&server).await;
    assert_requests_conform(Api::OpenAi, &recorded);
    let requests: Vec<Value> = recorded
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("JSON"))
        .collect();
    assert_eq!(requests.len(), 5);
    assert_eq!(requests[0]["model"], "gpt-4.1");
    assert_eq!(requests[1]["model"], "gpt-4.1-mini", "the reviewer's own model");
    let review = requests[1]["messages"][1]["content"].as_str().expect("text");
    assert!(review.starts_with("# Review this change"), "{review}");
    assert!(
        review.contains("```task\nAdd a notes file\n```"),
        "the task, fenced: {review}"
    );
    assert!(
        review.contains("Every change updates CHANGELOG.md."),
        "the instructions: {review}"
    );
    assert!(
        review.contains("From AGENTS.md:\nNotes are written in British English."),
        "the agent instructions file: {review}"
    );
    assert!(
        review.contains("```diff\n") && review.contains("+draft notes"),
        "the diff, fenced: {review}"
    );
    let second_review = requests[3]["messages"][1]["content"].as_str().expect("text");
    assert!(
        second_review.contains("+- Add notes"),
        "the fixed diff: {second_review}"
    );

    let attempts = out.results_of("create_pull_request");
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["ok"], false);
    let held = attempts[0]["output"].as_str().expect("output");
    assert!(
        held.contains(finding) && held.contains("round 1 of 2") && held.contains("nothing was committed"),
        "{held}"
    );
    assert_eq!(attempts[1]["ok"], true);
    let reviews: Vec<(u64, String)> = out
        .events_of("review")
        .iter()
        .map(|e| {
            (
                e["round"].as_u64().expect("round"),
                e["verdict"].as_str().expect("verdict").to_owned(),
            )
        })
        .collect();
    assert_eq!(reviews, [(1, "fail".to_owned()), (2, "pass".to_owned())]);
    assert!(out.events_of("review").iter().all(|e| e["agent"] == "root"));

    let branch = the_branch(&out);
    assert_eq!(
        commits_over_main(&repo, &branch),
        "1",
        "the failed round pushed nothing"
    );
    assert_eq!(repo.git(&["show", &format!("{branch}:CHANGELOG.md")]), "- Add notes");
    assert!(!repo.description(&branch).contains("Unresolved"));

    // The reviewer's calls are priced at its model's rates: gpt-4.1-mini $0.40/$1.60 per Mtok.
    let reviewer_cost = out
        .events_of("model_response")
        .iter()
        .find(|e| e["agent"] == "root>reviewer")
        .and_then(|e| e["cost_usd"].as_f64())
        .expect("a reviewer call");
    assert!((reviewer_cost - 0.000_096).abs() < 1e-12, "{reviewer_cost}");
}

#[test]
fn a_failing_check_blocks_the_push_and_its_output_reaches_the_model() {
    let config = OperatorConfig::new(
        r#"
checks = ["needs_fixed"]

[[tools]]
name = "needs_fixed"
description = "Fails until fixed.txt exists"
cmd = "sh"
args = ["-c", "test -f fixed.txt || { echo 'CHECK-OUTPUT: fixed.txt is missing'; exit 1; }"]
"#,
    );
    let repo = TestRepo::new();
    let script = Script::new(&[
        write_and_propose("a.txt", "a\n"),
        write_and_propose("fixed.txt", "fixed\n"),
        finish("completed"),
    ]);
    let out = run_replay(
        Upkeep::new(),
        &repo,
        &script,
        &["--task", "t", "--config", &config.arg()],
    );
    out.assert_code(0);
    let checks: Vec<(String, bool)> = out
        .events_of("check")
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().expect("tool").to_owned(),
                e["ok"].as_bool().expect("ok"),
            )
        })
        .collect();
    assert_eq!(
        checks,
        [("needs_fixed".to_owned(), false), ("needs_fixed".to_owned(), true)]
    );
    let attempts = out.results_of("create_pull_request");
    assert_eq!(attempts[0]["ok"], false);
    let held = attempts[0]["output"].as_str().expect("output");
    assert!(
        held.contains("CHECK-OUTPUT: fixed.txt is missing") && held.contains("nothing was committed or pushed"),
        "{held}"
    );
    let branch = the_branch(&out);
    assert_eq!(commits_over_main(&repo, &branch), "1");
    assert_eq!(repo.git(&["show", &format!("{branch}:fixed.txt")]), "fixed");
}

#[test]
fn after_max_reviews_the_pull_request_opens_with_the_unresolved_findings() {
    let repo = TestRepo::new();
    let script = Script::from_lines(
        [
            line("root", write_and_propose("NOTES.md", "draft\n")),
            // Model output is validated: a verdict that is neither pass nor fail goes back.
            line("root>reviewer", verdict("maybe", &[])),
            line("root>reviewer", verdict("fail", &["NOTES.md is a draft"])),
            line("root", write_and_propose("NOTES.md", "still a draft\n")),
            line("root>reviewer", verdict("fail", &["NOTES.md still says draft"])),
            line("root", finish("completed")),
        ]
        .into_iter(),
    );
    let out = run_replay(Upkeep::new().with_review(), &repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let reviewer_results: Vec<Value> = out
        .events_of("tool_result")
        .into_iter()
        .filter(|e| e["agent"] == "root>reviewer")
        .collect();
    assert_eq!(reviewer_results[0]["ok"], false);
    assert!(
        reviewer_results[0]["output"]
            .as_str()
            .expect("output")
            .contains("does not match the output schema")
    );
    let reviews = out.events_of("review");
    assert_eq!(reviews.len(), 2);
    assert_eq!(reviews[1]["round"], 2);
    assert_eq!(reviews[1]["opened_anyway"], true);
    let branch = the_branch(&out);
    let body = repo.description(&branch);
    assert!(
        body.contains("## Unresolved review findings") && body.contains("- NOTES.md still says draft"),
        "{body}"
    );
    let finished = &out.events_of("cycle_finished")[0];
    assert_eq!(finished["outcome"], "pull_request");
    assert_eq!(finished["unresolved_findings"], json!(["NOTES.md still says draft"]));
    assert!(out.stderr.contains("1 unresolved review finding"), "{}", out.stderr);
}

/// A reviewer (the same weak model) that spent its turns without a verdict let the change through
/// at once, and the message said the review rounds were spent after round 1 of 2. No verdict is
/// now a failed round: nothing is pushed, the model is told and may ask again, and only after
/// the last round does the pull request open, with the missing verdict said in its body.
#[test]
fn a_reviewer_without_a_verdict_fails_its_round() {
    let config = OperatorConfig::new(
        "[[agents]]\nname = \"reviewer\"\ndescription = \"Reviews\"\ninstructions = \"Review.\"\ntools = [\"read_file\"]\nmax_turns = 1\n",
    );
    let repo = TestRepo::new();
    let no_verdict = || reply("read", &[("read_file", json!({"path": "NOTES.md"}))]);
    let propose_again = reply(
        "ask again",
        &[("create_pull_request", json!({"title": TITLE, "body": "Adds notes."}))],
    );
    let script = Script::from_lines(
        [
            line("root", write_and_propose("NOTES.md", "notes\n")),
            line("root>reviewer", no_verdict()),
            line("root", propose_again),
            line("root>reviewer", no_verdict()),
            line("root", finish("completed")),
        ]
        .into_iter(),
    );
    let out = run_replay(
        Upkeep::new().with_review(),
        &repo,
        &script,
        &["--task", "t", "--config", &config.arg()],
    );
    out.assert_code(0);
    let proposals = out.results_of("create_pull_request");
    assert_eq!(proposals.len(), 2, "{}", out.stdout);
    assert_eq!(proposals[0]["ok"], false, "round 1 without a verdict holds the change");
    assert!(
        proposals[0]["output"]
            .as_str()
            .is_some_and(|output| output.contains("the review gave no verdict (round 1 of 2)")),
        "{}",
        proposals[0]
    );
    let reviews = out.events_of("review");
    assert_eq!(reviews.len(), 2);
    assert!(reviews[0].get("opened_anyway").is_none(), "{}", reviews[0]);
    assert_eq!(reviews[1]["opened_anyway"], true);
    let body = repo.description(&the_branch(&out));
    assert!(
        body.contains("the automatic review gave no verdict: the reviewer used its 1 turns"),
        "{body}"
    );
}

/// A secret the model assembles in the change (two edits, neither holding it whole), or writes
/// into a delegated task, reaches no prompt: the reviewer's diff and the explorer's task are
/// redacted like every prompt, and so is the model's own reply when it goes back in the history.
#[tokio::test(flavor = "multi_thread")]
async fn secrets_never_reach_a_sub_agents_prompt() {
    const TOKEN: &str = "ghp_upkeepSubAgentToken0123456789abcdef";
    let (first, second) = TOKEN.split_at(20);
    let repo = TestRepo::new();
    let replies = [
        reply(
            "leak",
            &[
                (
                    "write_file",
                    json!({"path": "leak.txt", "content": format!("token {first}\n")}),
                ),
                (
                    "edit_file",
                    json!({"path": "leak.txt", "old_text": "\n", "new_text": format!("{second}\n")}),
                ),
                (
                    "delegate",
                    json!({"agent": "explorer", "task": format!("is {TOKEN} valid?")}),
                ),
            ],
        ),
        reply("answer", &[("complete_task", json!({"answer": "cannot tell"}))]),
        reply(
            "propose",
            &[("create_pull_request", json!({"title": TITLE, "body": "Adds notes."}))],
        ),
        verdict("pass", &[]),
        reply("ask", &[("ask_question", json!({"question_text": "what now?"}))]),
    ];
    let server = openai_sequence(&replies).await;
    let out = Upkeep::new()
        .with_review()
        .env("GITHUB_TOKEN", TOKEN)
        .args(["run", "--json", "--provider", "openai", "--task", "t", "--base-url"])
        .args([format!("{}/v1", server.uri()), "--repo".to_owned()])
        .args([repo.path()])
        .run_async()
        .await;
    out.assert_code(3);
    let requests = model_requests(&server).await;
    assert_eq!(requests.len(), 5, "{}", out.stderr);
    let explorer = String::from_utf8_lossy(&requests[1].body);
    let reviewer = String::from_utf8_lossy(&requests[3].body);
    assert!(explorer.contains("is [REDACTED] valid?"), "{explorer}");
    assert!(reviewer.contains("+token [REDACTED]"), "{reviewer}");
    for (index, request) in requests.iter().enumerate() {
        let body = String::from_utf8_lossy(&request.body);
        assert!(!body.contains(TOKEN), "request {index}: {body}");
    }
    // And the commit after the review still refuses the secret.
    let held = &out.results_of("create_pull_request")[0];
    assert_eq!(held["ok"], false, "{}", out.stdout);
    assert!(held["output"].as_str().expect("output").contains("secret"), "{held}");
    assert!(repo.bot_branches().is_empty());
}
