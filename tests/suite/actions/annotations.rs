//! Errors as annotations after commands resume, usage errors too; secrets never reach outputs,
//! summary or annotations; outside Actions nothing is written.

use serde_json::json;

use super::super::support::{Script, TestRepo, Upkeep, finish, reply, run_replay};
use super::{Runner, paused_span};

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
