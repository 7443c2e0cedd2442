//! How a run is configured: `upkeep.toml` below flags, environment variables, bad flags and
//! keys as usage errors, the base branch and the commit identity, and `--help`.

use serde_json::json;

use super::super::support::{Script, TestRepo, Upkeep, finish, reply, run_local};
use super::pr_replies;

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
fn help_text() {
    // Without the harness's UPKEEP_NO_REVIEW, which help would show as the flag's value.
    let out = Upkeep::new().with_review().args(["run", "--help"]).run();
    out.assert_code(0);
    insta::assert_snapshot!(out.stdout);
}
