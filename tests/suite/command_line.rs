//! The command line says what is true: what `upkeep tools` and `upkeep prompt` print is what a
//! run offers and sends.

use super::support::{TestRepo, Upkeep};

const DECLARED: &str = r#"
[[tools]]
name = "cargo_test"
description = "Run the test suite"
cmd = "cargo"
args = ["test", "{{filter}}"]
[tools.parameters.filter]
type = "string"
optional = true
"#;

#[test]
fn upkeep_tools_shows_declared_tools_and_whether_they_are_offered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("upkeep.toml");
    std::fs::write(&config, DECLARED).expect("write");
    let out = Upkeep::new().args(["tools", "--config"]).args([&config]).run();
    out.assert_code(0);
    assert!(!out.stdout.contains("## cargo_test"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("declared but not offered: cargo_test; a run offers it with --allow-tool cargo_test"),
        "{}",
        out.stdout
    );
    let out = Upkeep::new()
        .args(["tools", "--json", "--allow-tool", "cargo_test", "--config"])
        .args([&config])
        .run();
    out.assert_code(0);
    let value: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let names: Vec<&str> = value["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|tool| tool["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&"cargo_test"), "{names:?}");
    assert!(!names.contains(&"run_shell_command"), "{names:?}");
}

#[test]
fn upkeep_prompt_needs_no_key_and_names_a_local_repository_by_its_folder() {
    let repo = TestRepo::new();
    let out = Upkeep::new()
        .args(["prompt", "--repo"])
        .args([repo.path()])
        .args(["--task", "Fix the typo"])
        .run();
    out.assert_code(0);
    let folder = repo
        .path()
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    assert!(
        out.stdout.contains(&format!("Repository: {folder}\n")),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains(&repo.path().display().to_string()),
        "no absolute path"
    );
    assert!(out.stdout.contains("```task\nFix the typo\n```"), "{}", out.stdout);
}

/// A consumer of `--json` always learns how a run ended, a usage error included.
#[test]
fn every_json_run_ends_with_run_finished_even_on_a_usage_error() {
    let out = Upkeep::new()
        .args([
            "run",
            "--json",
            "--repo",
            "/nonexistent/upkeep/repo",
            "--replay",
            "Cargo.toml",
        ])
        .run();
    out.assert_code(2);
    let finished = out.events_of("run_finished");
    assert_eq!(finished.len(), 1, "{}", out.stdout);
    assert_eq!(finished[0]["outcome"], "usage_error");
    assert_eq!(finished[0]["exit_code"], 2);
    assert!(
        finished[0]["error"].as_str().unwrap_or("").contains("--repo"),
        "{}",
        finished[0]
    );
    let repo = TestRepo::new();
    let trace_dir = tempfile::tempdir().expect("tempdir");
    let out = Upkeep::new()
        .args(["run", "--json", "--repo"])
        .args([repo.path()])
        .args(["--replay", "Cargo.toml", "--trace"])
        .args([trace_dir.path()])
        .run();
    out.assert_code(2);
    assert_eq!(out.events_of("run_finished").len(), 1, "{}", out.stdout);
}

/// Mistakes a user makes on the command line are usage errors (exit 2) said before any work,
/// with what to do instead.
#[test]
fn usage_mistakes_exit_2_before_any_work_and_say_what_to_do() {
    let repo = TestRepo::new();
    let script = super::support::Script::new(&[super::support::finish("no_tasks")]);
    let run = |extra: &[&str]| {
        Upkeep::new()
            .args(["run", "--json", "--replay"])
            .args([script.path()])
            .args(extra)
            .run()
    };

    let repo_arg = repo.path().to_str().expect("utf-8").to_owned();
    let out = run(&["--repo", &repo_arg, "--continuous", "--task", "x"]);
    out.assert_code(2);
    assert!(out.stderr.contains("--continuous"), "{}", out.stderr);
    assert!(out.events_of("model_response").is_empty(), "no work before the error");

    let empty = tempfile::tempdir().expect("tempdir");
    super::support::git(empty.path(), &["init", "-q", "-b", "main"]);
    let out = run(&["--repo", empty.path().to_str().expect("utf-8")]);
    out.assert_code(2);
    assert!(out.stderr.contains("no commits yet"), "{}", out.stderr);

    let detached = TestRepo::new();
    detached.git(&["checkout", "-q", "--detach"]);
    let out = run(&["--repo", detached.path().to_str().expect("utf-8")]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("detached HEAD") && out.stderr.contains("--base"),
        "{}",
        out.stderr
    );

    // `src/nope` looks like owner/name, but `src` is a folder here.
    let out = Upkeep::new()
        .current_dir(repo.path())
        .args(["run", "--repo", "src/nope", "--replay"])
        .args([script.path()])
        .run();
    out.assert_code(2);
    assert!(out.stderr.contains("mistyped local path"), "{}", out.stderr);
}

/// upkeep works from the committed HEAD; uncommitted work in a local repository is not seen,
/// and it says so instead of silently ignoring it.
#[test]
fn uncommitted_changes_and_an_untracked_task_file_are_warned_about() {
    let repo = TestRepo::new();
    repo.write("README.md", "# Changed but not committed\n");
    repo.write("TODO.md", "- [ ] something\n");
    let script = super::support::Script::new(&[super::support::finish("no_tasks")]);
    let out = super::support::run_local(&repo, &script, &["--max-cycles", "3"]);
    out.assert_code(0);
    assert!(
        out.stderr.contains("1 other file(s) with uncommitted changes"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("TODO.md is not committed"), "{}", out.stderr);
    assert!(
        out.stderr.contains("--max-cycles has no effect without --continuous"),
        "{}",
        out.stderr
    );
}

/// Every declared tool the model is offered is named with the program it runs and who declared
/// it: the operator (`--config`) or the repository (`.upkeep.toml`).
#[test]
fn run_and_cycle_start_name_each_exposed_declared_tool_and_its_origin() {
    let repo = TestRepo::with_files(&[(
        ".upkeep.toml",
        "[[tools]]\nname = \"lint\"\ndescription = \"Lint\"\ncmd = \"true\"\n",
    )]);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("operator.toml");
    std::fs::write(&config, DECLARED).expect("write");
    let script = super::support::Script::new(&[super::support::finish("no_tasks")]);
    let config_arg = config.to_str().expect("utf-8").to_owned();
    let out = super::support::run_local(
        &repo,
        &script,
        &[
            "--config",
            &config_arg,
            "--allow-tool",
            "cargo_test",
            "--allow-tool",
            "lint",
        ],
    );
    out.assert_code(0);
    let started = &out.events_of("run_started")[0];
    assert_eq!(
        started["declared_tools"],
        serde_json::json!([{"name": "cargo_test", "program": "cargo", "declared_in": format!("--config {config_arg}")}])
    );
    let cycle = &out.events_of("cycle_started")[0];
    assert_eq!(
        cycle["declared_tools"],
        serde_json::json!([
            {"name": "cargo_test", "program": "cargo", "declared_in": format!("--config {config_arg}")},
            {"name": "lint", "program": "true", "declared_in": ".upkeep.toml"},
        ])
    );
    assert!(
        out.stderr
            .contains("declared tool lint runs `true` (declared in .upkeep.toml)"),
        "{}",
        out.stderr
    );
}

/// A base branch that does not exist is a usage error, naming the default branch to use.
#[test]
fn a_missing_base_branch_is_a_usage_error_that_names_the_default() {
    let repo = TestRepo::new();
    let script = super::support::Script::new(&[super::support::finish("no_tasks")]);
    let out = super::support::run_local(&repo, &script, &["--base", "develop"]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("`develop` does not exist") && out.stderr.contains("--base main"),
        "{}",
        out.stderr
    );
    assert!(out.events_of("model_response").is_empty());
}

/// Boolean variables take what people write in CI files and shells: `UPKEEP_NO_REVIEW=1` was a
/// usage error, because only `true` and `false` were accepted.
#[test]
fn boolean_variables_accept_one_zero_yes_no_on_off() {
    use super::support::{Script, finish};
    let repo = TestRepo::new();
    let script = Script::new(&[finish("no_tasks")]);
    for (value, json) in [
        ("1", true),
        ("yes", true),
        ("on", true),
        ("TRUE", true),
        ("0", false),
        ("no", false),
        ("off", false),
        ("false", false),
    ] {
        let out = Upkeep::new()
            .env("UPKEEP_JSON", value)
            .env("UPKEEP_NO_REVIEW", value)
            .args(["run", "--task", "tidy", "--repo"])
            .args([repo.path()])
            .args(["--replay"])
            .args([script.path()])
            .run();
        out.assert_code(0);
        let first = out.stdout.lines().next().unwrap_or_default();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(first).is_ok(),
            json,
            "UPKEEP_JSON={value}: stdout {:?}",
            out.stdout
        );
    }
}

/// `--repo .` run from a subfolder of a work tree was "not a git repository": a path anywhere
/// inside a work tree names that work tree, as it does for git itself.
#[test]
fn repo_dot_from_a_subfolder_finds_the_top_of_the_work_tree() {
    let repo = TestRepo::new();
    let folder = repo
        .path()
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default()
        .to_owned();
    for (cwd, spec) in [(repo.path().join("src"), "."), (repo.path().to_path_buf(), "src")] {
        let out = Upkeep::new()
            .current_dir(&cwd)
            .args(["prompt", "--repo", spec, "--task", "Fix the typo"])
            .run();
        out.assert_code(0);
        assert!(
            out.stdout.contains(&format!("Repository: {folder}\n")),
            "--repo {spec} from {}: {}{}",
            cwd.display(),
            out.stdout,
            out.stderr
        );
        assert!(
            out.stdout.contains("src/lib.rs"),
            "the whole tree is listed: {}",
            out.stdout
        );
    }
}

/// An uncommitted `.upkeep.toml` — exactly what `upkeep init` leaves — was silently ignored,
/// and an edited AGENTS.md only counted among "files with uncommitted changes". Each file that
/// steers a run and differs from HEAD is now named, also inside an untracked folder.
#[test]
fn each_steering_file_that_differs_from_head_is_named() {
    let repo = TestRepo::with_files(&[("README.md", "hi\n"), ("AGENTS.md", "Be brief.\n")]);
    repo.write(".upkeep.toml", "label = \"bot\"\n");
    repo.write("AGENTS.md", "Be thorough.\n");
    repo.write(".github/copilot-instructions.md", "Use tabs.\n");
    repo.write("README.md", "changed\n");
    let script = super::support::Script::new(&[super::support::finish("no_tasks")]);
    let out = super::support::run_local(&repo, &script, &[]);
    out.assert_code(0);
    for line in [
        ".upkeep.toml is not committed: upkeep works from the committed HEAD",
        "AGENTS.md has uncommitted changes: upkeep works from the committed HEAD",
        ".github/copilot-instructions.md is not committed: upkeep works from the committed HEAD",
        "1 other file(s) with uncommitted changes",
    ] {
        assert!(out.stderr.contains(line), "{line:?} in {}", out.stderr);
    }
}

/// With a feature branch checked out, pull requests targeted it without a word. The base stays
/// the checked-out branch (DESIGN section 4), and the first lines and `run_started` say which
/// branch and why; `--base` picks another and says so.
#[test]
fn the_base_and_why_are_said_before_any_work() {
    let repo = TestRepo::new();
    let default = repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]);
    repo.git(&["checkout", "-q", "-b", "feature"]);
    let script = super::support::Script::new(&[super::support::finish("no_tasks")]);
    let out = super::support::run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let started = &out.events_of("run_started")[0];
    assert_eq!(started["base"], "feature", "{started}");
    assert_eq!(started["base_from"], "checked_out", "{started}");
    assert!(
        out.stderr
            .contains("base: feature (the branch checked out in the repository; --base picks another)"),
        "{}",
        out.stderr
    );

    let script = super::support::Script::new(&[super::support::finish("no_tasks")]);
    let out = super::support::run_local(&repo, &script, &["--task", "t", "--base", &default]);
    out.assert_code(0);
    let started = &out.events_of("run_started")[0];
    assert_eq!(started["base"], default.as_str(), "{started}");
    assert_eq!(started["base_from"], "flag", "{started}");
}
