//! `upkeep init`: the config and the workflow written, the current directory by default, an
//! existing file never overwritten, and nothing written through a symlink or outside a git work
//! tree's root.

use std::path::Path;

use super::super::support::{RunOutput, Script, TestRepo, Upkeep, finish, git, run_replay};
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
    assert_eq!(workflow, upkeep::init::workflow().expect("pinned"));
    // Dependabot keeps the pinned action current.
    let dependabot = std::fs::read_to_string(repo.path().join(".github/dependabot.yml")).expect("dependabot written");
    assert_eq!(dependabot, upkeep::init::DEPENDABOT_TEMPLATE);
    assert!(dependabot.contains("package-ecosystem: github-actions"), "{dependabot}");
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
    // Failing checks on upkeep's own pull requests: other CI apps' check suites, and the runs
    // of the Actions workflows the user names (GitHub starts no check_suite workflow for
    // suites GitHub Actions itself creates).
    assert!(
        workflow.contains("  check_suite:\n    types: [completed]\n"),
        "{workflow}"
    );
    assert!(
        workflow.contains("  workflow_run: # zizmor: ignore[dangerous-triggers]\n")
            && workflow.contains("    workflows: [CI]\n    types: [completed]\n    branches: [\"upkeep/**\"]\n"),
        "{workflow}"
    );
    assert!(
        workflow.contains("docs/actions.md, \"Pushes that"),
        "the Setup points to the token docs"
    );
    workflows::check_upkeep_workflow("upkeep init's workflow", &workflow);

    // The files work: upkeep reads the written .upkeep.toml without complaint.
    repo.commit("upkeep init");
    let script = Script::with_usage(&[finish("no_tasks")], 1200, 345);
    run_replay(Upkeep::new(), &repo, &script, &[]).assert_code(0);
}

/// The repository's CI workflows are named in the `workflow_run` trigger, so upkeep hears their
/// failures without the user editing the list: a workflow that runs on pull requests or branch
/// pushes counts; a tag-only release, one without a name, upkeep's own and one that does not
/// parse do not. A name that could break the YAML stays one quoted string.
#[test]
fn init_names_the_repositorys_ci_workflows_in_the_checks_trigger() {
    let repo = TestRepo::new();
    let workflows = repo.path().join(".github/workflows");
    std::fs::create_dir_all(&workflows).expect("workflows dir");
    let write = |name: &str, text: &str| std::fs::write(workflows.join(name), text).expect("workflow");
    write(
        "ci.yml",
        "name: Tests & lint\non: [push, pull_request]\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make test\n",
    );
    write(
        "docs.yaml",
        "name: 'Docs: build, \"check\" ] #1'\non:\n  pull_request:\n    paths: [docs/**]\njobs: {}\n",
    );
    write(
        "release.yml",
        "name: Release\non:\n  push:\n    tags: ['v*']\njobs: {}\n",
    );
    write("nameless.yml", "on: pull_request\njobs: {}\n");
    write("broken.yml", "name: [unclosed\non: pull_request\n");
    write("nightly.yml", "name: upkeep\non: pull_request\njobs: {}\n");
    let out = init(repo.path());
    out.assert_code(0);
    let workflow = std::fs::read_to_string(workflows.join("upkeep.yml")).expect("workflow written");
    let doc = &yaml_rust2::YamlLoader::load_from_str(&workflow).expect("the workflow is YAML")[0];
    let named: Vec<&str> = doc["on"]["workflow_run"]["workflows"]
        .as_vec()
        .expect("a list of workflows")
        .iter()
        .filter_map(|name| name.as_str())
        .collect();
    assert_eq!(named, ["Docs: build, \"check\" ] #1", "Tests & lint"], "{workflow}");
    // Everything else is the template's.
    let placeholder = upkeep::init::workflow().expect("pinned");
    assert_eq!(
        workflow
            .lines()
            .filter(|line| !line.trim_start().starts_with("workflows:"))
            .collect::<Vec<_>>(),
        placeholder
            .lines()
            .filter(|line| !line.trim_start().starts_with("workflows:"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn init_defaults_to_the_current_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    git(dir.path(), &["init", "-q"]);
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

/// Every file under `dir`, recursively (symlinks not followed), relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).expect("readable") {
            let entry = entry.expect("entry");
            let kind = entry.file_type().expect("type");
            if kind.is_dir() {
                pending.push(entry.path());
            } else {
                found.push(entry.path().strip_prefix(dir).expect("under").display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// Reproduces `upkeep init` following a `.github` that is a symlink to a directory elsewhere
/// (a repository can commit one): the workflow landed outside the repository. init must write
/// nothing, anywhere, and say why (exit 2).
#[test]
fn init_refuses_a_github_directory_that_is_a_symlink_to_elsewhere() {
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(outside.path(), repo.path().join(".github")).expect("symlink");
    let out = init(repo.path());
    out.assert_code(2);
    assert!(
        out.stderr.contains(".github") && out.stderr.contains("symlink"),
        "{}",
        out.stderr
    );
    assert_eq!(
        files_under(outside.path()),
        Vec::<String>::new(),
        "nothing written outside"
    );
    assert!(!repo.path().join(".upkeep.toml").exists(), "nothing written at all");

    // The same with `init --fleet`, which writes only under .github.
    let out = Upkeep::new()
        .args(["init", "--fleet", "--repo-dir"])
        .args([repo.path()])
        .run();
    out.assert_code(2);
    assert_eq!(files_under(outside.path()), Vec::<String>::new());
}

/// Reproduces the same one level down: `.github/workflows` a symlink (here to a directory
/// inside the repository: still refused, a symlinked ancestor is never followed).
#[test]
fn init_refuses_a_workflows_directory_that_is_a_symlink() {
    let repo = TestRepo::new();
    std::fs::create_dir_all(repo.path().join(".github")).expect("mkdir");
    std::fs::create_dir_all(repo.path().join("elsewhere")).expect("mkdir");
    std::os::unix::fs::symlink("../elsewhere", repo.path().join(".github/workflows")).expect("symlink");
    let out = init(repo.path());
    out.assert_code(2);
    assert!(
        out.stderr.contains(".github/workflows") && out.stderr.contains("symlink"),
        "{}",
        out.stderr
    );
    assert_eq!(files_under(&repo.path().join("elsewhere")), Vec::<String>::new());
    assert!(!repo.path().join(".upkeep.toml").exists());
}

/// Reproduces init writing into whatever directory it is given: a subfolder of a work tree (the
/// workflow would sit where GitHub never reads it) or a directory that is no repository at all.
/// Both are refused with exit 2 and nothing written.
#[test]
fn init_refuses_a_directory_that_is_not_a_work_trees_root() {
    let repo = TestRepo::new();
    let sub = repo.path().join("src");
    let out = init(&sub);
    out.assert_code(2);
    assert!(out.stderr.contains("not the root of a git work tree"), "{}", out.stderr);
    assert_eq!(files_under(&sub), ["lib.rs"]);

    let plain = tempfile::tempdir().expect("tempdir");
    let out = init(plain.path());
    out.assert_code(2);
    assert!(out.stderr.contains("not the root of a git work tree"), "{}", out.stderr);
    assert_eq!(files_under(plain.path()), Vec::<String>::new());
}

/// The commit upkeep's sources are at, as the build embeds it: the release's commit when the
/// release process says so, else the checkout's HEAD (these tests run from a checkout).
fn source_commit() -> String {
    if let Some(release) = std::env::var("UPKEEP_RELEASE_COMMIT").ok().filter(|v| !v.is_empty()) {
        return release;
    }
    git(Path::new(env!("CARGO_MANIFEST_DIR")), &["rev-parse", "HEAD"])
        .trim()
        .to_owned()
}

/// Reproduces the workflows `upkeep init` writes naming upkeep's own action by a movable tag
/// (`@v0`), which whoever controls the tag can point at any code that then runs next to the
/// job's token. The `uses:` line must be a full commit (the one this upkeep was built from)
/// with the version in a comment, with no zizmor suppression.
#[test]
fn init_pins_upkeeps_own_action_to_the_built_commit() {
    let repo = TestRepo::new();
    init(repo.path()).assert_code(0);
    let fleet = TestRepo::new();
    Upkeep::new()
        .args(["init", "--fleet", "--repo-dir"])
        .args([fleet.path()])
        .run()
        .assert_code(0);
    let expected = format!(
        "- uses: upkeep-bot/upkeep@{} # v{}",
        source_commit(),
        env!("CARGO_PKG_VERSION")
    );
    for written in [
        repo.path().join(".github/workflows/upkeep.yml"),
        fleet.path().join(".github/workflows/upkeep-fleet.yml"),
    ] {
        let text = std::fs::read_to_string(&written).expect("written");
        let uses: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("- uses: "))
            .collect();
        assert_eq!(uses, [expected.as_str()], "{}", written.display());
        assert!(!text.contains("zizmor: ignore[unpinned-uses]"), "{text}");
    }
}
