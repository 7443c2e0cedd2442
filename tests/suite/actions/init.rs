//! `upkeep init`: the config and the workflow written, the current directory by default, and an
//! existing file never overwritten.

use std::path::Path;

use super::super::support::{RunOutput, Script, TestRepo, Upkeep, finish, run_replay};
use super::workflows;

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
