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
