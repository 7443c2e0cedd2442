//! Step outputs and the job summary: every output in the runner's format, unresolved review
//! findings, multi-line questions intact, and a pull request opened before a question.

use serde_json::json;

use super::super::support::agents::line;
use super::super::support::github_fleet::{FleetHub, pull_request};
use super::super::support::{RunOutput, Script, TestRepo, finish, reply, run_replay};
use super::{Runner, paused_span, propose};

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
    assert_eq!(outputs["fix-attempts"], "", "no fix attempt was made");

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

/// The job summary's first line for a run that ended `outcome` (exit 0), with no "failed" in it.
fn held_back_headline(runner: &Runner, out: &RunOutput, outcome: &str) -> String {
    out.assert_code(0);
    assert_eq!(out.events_of("run_finished")[0]["outcome"], outcome);
    assert_eq!(runner.outputs()["outcome"], outcome);
    let summary = runner.summary();
    let headline = summary
        .lines()
        .find(|line| line.starts_with("### upkeep "))
        .expect("a headline")
        .to_owned();
    assert!(!summary.contains("failed"), "{summary}");
    assert!(!out.stderr.contains("::error::"), "{}", out.stderr);
    headline
}

/// Regression: the job summary matched outcomes as strings with no arm for `pr_limit`, so a run
/// the limit held back (exit 0, nothing wrong) was headlined "upkeep failed".
#[test]
fn a_run_held_by_pr_limit_is_not_headlined_as_a_failure() {
    let repo = TestRepo::with_files(&[("README.md", "hi\n"), (".upkeep.toml", "pr_limit = 1\n")]);
    let runner = Runner::new();
    let script = Script::new(&[propose("One").remove(0), propose("Two").remove(0)]);
    let out = run_replay(runner.upkeep(), &repo, &script, &["--continuous"]);
    let headline = held_back_headline(&runner, &out, "pr_limit");
    assert_eq!(headline, "### upkeep held back: `pr_limit` bot pull requests are open");
}

/// Regression: the same for the default hourly limit, which every busy repository reaches.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_held_by_pr_hourly_limit_is_not_headlined_as_a_failure() {
    let hub = FleetHub::start().await;
    hub.add_repo("octo/widgets", &[("README.md", "hi\n")]).await;
    let recent = (jiff::Timestamp::now() - jiff::SignedDuration::from_mins(10)).to_string();
    // Two bot pull requests this hour: the default `pr_hourly_limit` (2) is reached.
    hub.serve_pulls(
        "octo/widgets",
        vec![
            pull_request("octo/widgets", 7, "upkeep/seven", &recent, "closed"),
            pull_request("octo/widgets", 8, "upkeep/eight", &recent, "closed"),
        ],
    );
    let runner = Runner::new();
    let script = Script::new(&propose("Three"));
    let out = runner
        .on(hub.upkeep())
        .args(["run", "--repo", "octo/widgets", "--json", "--replay"])
        .args([script.path()])
        .run_async()
        .await;
    let headline = held_back_headline(&runner, &out, "pr_hourly_limit");
    assert_eq!(
        headline,
        "### upkeep held back: `pr_hourly_limit` pull requests were opened in the last hour"
    );
}

/// Regression: the same outside the repository's schedule.
#[test]
fn a_run_outside_its_schedule_is_not_headlined_as_a_failure() {
    // Three days from now is never today.
    let day = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(72))
        .to_zoned(jiff::tz::TimeZone::UTC)
        .weekday();
    let day = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][day.to_monday_zero_offset() as usize];
    let config = format!("schedule = [\"on {day}\"]\ntimezone = \"UTC\"\n");
    let repo = TestRepo::with_files(&[("README.md", "hi\n"), (".upkeep.toml", &config)]);
    let runner = Runner::new();
    let script = Script::new(&propose("One"));
    let out = run_replay(runner.upkeep(), &repo, &script, &[]);
    let headline = held_back_headline(&runner, &out, "outside_schedule");
    assert_eq!(headline, "### upkeep held back: outside its schedule");
}
