//! action.yml, the repository's workflows and the workflow `upkeep init` writes, read the way
//! GitHub reads them: YAML parsed (`yaml-rust2`), `${{ }}` expressions parsed and evaluated with
//! GitHub's rules (`github-actions-expressions`, the parser zizmor itself uses). These tests check
//! what actionlint and zizmor (both run by `.ci/run`) do not:
//! - event text and inputs reach `run:` scripts only through `env:`, and every script quotes
//!   the variables that carry them (`the_checker_*` tests show each hostile shape is caught);
//! - the job guard of `upkeep init`'s workflow admits exactly maintainers: evaluated on event
//!   payloads of each kind;
//! - permissions per job, each with a comment; checkouts without persisted credentials;
//!   third-party actions pinned to a commit with the version in a comment; no trigger that runs
//!   pull request code with secrets.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

/// Event text and inputs on their way to scripts; who may start a run.
mod untrusted_text;

fn project_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn parse_yaml(name: &str, text: &str) -> Yaml {
    let mut docs = YamlLoader::load_from_str(text).unwrap_or_else(|e| panic!("{name}: invalid YAML: {e}"));
    assert_eq!(docs.len(), 1, "{name}: one YAML document");
    docs.remove(0)
}

/// Every file these rules apply to: name, text.
fn shipped_files() -> Vec<(String, String)> {
    let mut files = vec![
        ("action.yml".to_owned(), project_file("action.yml")),
        (
            "upkeep init's workflow".to_owned(),
            upkeep::init::workflow().expect("pinned"),
        ),
        (
            "upkeep init --fleet's workflow".to_owned(),
            upkeep::init::fleet_workflow().expect("pinned"),
        ),
    ];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/workflows");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("workflows")
        .map(|entry| entry.expect("entry").path())
        .collect();
    paths.sort();
    for path in paths {
        let name = format!(
            ".github/workflows/{}",
            path.file_name().expect("name").to_string_lossy()
        );
        files.push((name, std::fs::read_to_string(&path).expect("read")));
    }
    assert!(
        files.len() >= 7,
        "action.yml, the template and five workflows: {}",
        files.len()
    );
    files
}

fn hash_entries(yaml: &Yaml) -> Vec<(&str, &Yaml)> {
    yaml.as_hash()
        .map(|hash| hash.iter().filter_map(|(k, v)| Some((k.as_str()?, v))).collect())
        .unwrap_or_default()
}

/// The jobs of a workflow, or action.yml's `runs` as one pseudo-job: (name, job).
fn jobs(doc: &Yaml) -> Vec<(&str, &Yaml)> {
    if doc["runs"].as_hash().is_some() {
        return vec![("runs", &doc["runs"])];
    }
    hash_entries(&doc["jobs"])
}

// ---- permissions, checkouts, pins, triggers ----

/// The trimmed lines of `text` that start with `prefix`.
fn lines_starting<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines()
        .map(str::trim)
        .filter(|line| line.starts_with(prefix))
        .collect()
}

#[test]
fn permissions_are_granted_per_job_each_with_its_reason() {
    for (name, text) in shipped_files().into_iter().filter(|(name, _)| name != "action.yml") {
        let doc = parse_yaml(&name, &text);
        // The workflow level grants nothing (or reads only).
        let top = &doc["permissions"];
        let grants_nothing = top.as_hash().is_some_and(|h| h.is_empty())
            || hash_entries(top)
                .iter()
                .all(|(_, level)| level.as_str() == Some("read"));
        assert!(grants_nothing, "{name}: workflow-level permissions: {top:?}");
        for (job_name, job) in jobs(&doc) {
            let permissions = hash_entries(&job["permissions"]);
            assert!(!permissions.is_empty(), "{name}: job {job_name} says what it needs");
            for (scope, level) in permissions {
                let level = level.as_str().expect("a level");
                for line in lines_starting(&text, &format!("{scope}: {level}")) {
                    let reason = line.split_once(" # ").map(|(_, r)| r.trim()).unwrap_or("");
                    assert!(reason.len() > 10, "{name}: `{line}` needs a comment saying why");
                }
            }
        }
    }
}

#[test]
fn checkouts_keep_no_credentials_and_actions_are_pinned_to_commits() {
    for (name, text) in shipped_files() {
        let doc = parse_yaml(&name, &text);
        for (job_name, job) in jobs(&doc) {
            for step in job["steps"].as_vec().map(Vec::as_slice).unwrap_or_default() {
                let Some(uses) = step["uses"].as_str() else { continue };
                if uses.starts_with("actions/checkout@") {
                    assert_eq!(
                        step["with"]["persist-credentials"],
                        Yaml::Boolean(false),
                        "{name}: {job_name}: no step here pushes with the checkout's token"
                    );
                }
                if uses.starts_with("./") {
                    continue; // this repository's own code, at the workflow's own commit
                }
                let (_, reference) = uses.split_once('@').expect("action@ref");
                assert!(
                    reference.len() == 40 && reference.bytes().all(|b| b.is_ascii_hexdigit()),
                    "{name}: {uses} is not pinned to a full commit SHA"
                );
                let line = lines_starting(&text, &format!("uses: {uses}"))
                    .into_iter()
                    .chain(lines_starting(&text, &format!("- uses: {uses}")))
                    .next()
                    .expect("the line");
                let version = line.split_once(" # v").map(|(_, v)| v).unwrap_or("");
                assert!(
                    version.starts_with(|c: char| c.is_ascii_digit()) && version.contains('.'),
                    "{name}: `{line}` names its version in a comment (`# v1.2.3`), for readers and Dependabot"
                );
            }
        }
        // No trigger that runs pull request code with the repository's secrets.
        let triggers: Vec<&str> = match &doc["on"] {
            Yaml::String(one) => vec![one.as_str()],
            Yaml::Array(many) => many.iter().filter_map(Yaml::as_str).collect(),
            other => hash_entries(other).into_iter().map(|(k, _)| k).collect(),
        };
        assert!(
            !triggers.contains(&"pull_request_target"),
            "{name}: pull_request_target"
        );
        // `workflow_run` only where the job guard admits nothing but a run of this very
        // repository (never a fork's) on upkeep's own branches, and no step checks out code.
        if triggers.contains(&"workflow_run") {
            for (job_name, job) in jobs(&doc) {
                let guard = job["if"].as_str().unwrap_or_default();
                assert!(
                    guard.contains("github.event.workflow_run.head_repository.full_name == github.repository")
                        && guard.contains("startsWith(github.event.workflow_run.head_branch, 'upkeep/')"),
                    "{name}: {job_name}: workflow_run unguarded: {guard}"
                );
                for step in job["steps"].as_vec().map(Vec::as_slice).unwrap_or_default() {
                    let uses = step["uses"].as_str().unwrap_or_default();
                    assert!(
                        !uses.starts_with("actions/checkout@"),
                        "{name}: {job_name} checks out code"
                    );
                }
            }
        }
    }
}

#[test]
fn dependabot_keeps_the_actions_and_the_crates_current() {
    let config = parse_yaml("dependabot.yml", &project_file(".github/dependabot.yml"));
    let ecosystems: Vec<&str> = config["updates"]
        .as_vec()
        .expect("updates")
        .iter()
        .map(|update| update["package-ecosystem"].as_str().expect("ecosystem"))
        .collect();
    assert_eq!(ecosystems, ["github-actions", "cargo"]);
}

/// What every workflow that runs upkeep must say: one run per repository at a time, nothing
/// granted at the workflow level, the job's three write permissions, the key from a secret of
/// the `upkeep` environment, upkeep's action as users copy it.
pub(super) fn check_upkeep_workflow(name: &str, text: &str) {
    let doc = parse_yaml(name, text);
    assert_eq!(
        doc["permissions"],
        Yaml::Hash(Default::default()),
        "{name}: `permissions: {{}}`"
    );
    assert_eq!(
        doc["concurrency"]["group"].as_str(),
        Some("upkeep-${{ github.repository }}"),
        "{name}: one run per repository"
    );
    assert_eq!(doc["concurrency"]["cancel-in-progress"], Yaml::Boolean(false), "{name}");
    let job = &doc["jobs"]["upkeep"];
    let permissions: Vec<(&str, &str)> = hash_entries(&job["permissions"])
        .into_iter()
        .map(|(scope, level)| (scope, level.as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        permissions,
        [
            ("contents", "write"),
            ("pull-requests", "write"),
            ("issues", "write"),
            ("checks", "read"),
            ("statuses", "read"),
            ("actions", "read")
        ],
        "{name}: exactly what upkeep needs (the reads: its pull requests' checks and job logs)"
    );
    assert_eq!(
        job["environment"].as_str(),
        Some("upkeep"),
        "{name}: the secrets' environment"
    );
    let steps = job["steps"].as_vec().expect("steps");
    // Pinned to a full commit like every action (the generic check above reads the version
    // comment): never a movable tag.
    let uses = steps[0]["uses"].as_str().unwrap_or_default();
    let commit = uses.strip_prefix("upkeep-bot/upkeep@").unwrap_or_default();
    assert!(
        commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
        "{name}: upkeep's own action pinned to a commit: {uses}"
    );
    let key = steps[0]["with"]["api-key"].as_str().unwrap_or("");
    assert!(key.starts_with("${{ secrets."), "{name}: the key from a secret: {key}");
    // A GitHub App token cannot say whose it is, and without the bot's login upkeep refuses to
    // judge comments: the workflow passes the repository variable that names it.
    assert_eq!(
        steps[0]["with"]["bot-login"].as_str(),
        Some("${{ vars.UPKEEP_BOT_LOGIN }}"),
        "{name}: the bot's login from the repository variable"
    );
}

#[test]
fn the_example_workflows_use_the_action_with_least_privilege() {
    let on_issue = project_file(".github/workflows/upkeep-on-issue.yml");
    let nightly = project_file(".github/workflows/upkeep-nightly.yml");
    let dispatch = project_file(".github/workflows/upkeep-dispatch.yml");
    for (name, workflow) in [("on-issue", &on_issue), ("nightly", &nightly), ("dispatch", &dispatch)] {
        check_upkeep_workflow(name, workflow);
    }
    let on_issue = parse_yaml("on-issue", &on_issue);
    assert_eq!(on_issue["on"]["issues"]["types"][0].as_str(), Some("labeled"));
    assert_eq!(on_issue["on"]["issue_comment"]["types"][0].as_str(), Some("created"));
    assert_eq!(
        on_issue["on"]["pull_request_review"]["types"][0].as_str(),
        Some("submitted")
    );
    // Comments and reviews pass the same guard as in the workflow `upkeep init` writes (whose
    // logic the guard test evaluates against real payloads).
    let template = parse_yaml("init", &upkeep::init::workflow().expect("pinned"));
    let template_if = template["jobs"]["upkeep"]["if"].as_str().unwrap_or_default();
    let (_, comment_guard) = template_if
        .split_once("|| (contains(fromJSON('[\"issue_comment\"")
        .expect("the template guards comments");
    let on_issue_if = on_issue["jobs"]["upkeep"]["if"].as_str().unwrap_or_default();
    assert!(
        on_issue_if.starts_with("(github.event_name == 'issues' && github.event.label.name == 'upkeep')")
            && on_issue_if.ends_with(comment_guard),
        "{on_issue_if}"
    );
    let nightly = parse_yaml("nightly", &nightly);
    assert!(nightly["on"]["schedule"].as_vec().is_some());
    assert_eq!(
        nightly["jobs"]["upkeep"]["steps"][0]["with"]["continuous"],
        Yaml::Boolean(true)
    );
    let dispatch = parse_yaml("dispatch", &dispatch);
    assert!(
        dispatch["on"]["workflow_dispatch"]["inputs"]["task"]
            .as_hash()
            .is_some()
    );
    assert_eq!(
        dispatch["jobs"]["upkeep"]["steps"][0]["with"]["task"].as_str(),
        Some("${{ inputs.task }}")
    );

    let release = project_file(".github/workflows/release.yml");
    for target in [
        "x86_64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "x86_64-apple-darwin",
        "aarch64-apple-darwin",
    ] {
        assert!(
            release.contains(&format!("target: {target}\n")),
            "release builds {target}"
        );
    }
    // The name action.yml downloads.
    assert!(release.contains("archive=\"upkeep-$TARGET.tar.gz\""));
    let ci = project_file(".github/workflows/ci.yml");
    for step in [
        "cargo fmt --check",
        "cargo clippy --all-targets -- -D warnings",
        "bash .ci/run",
    ] {
        assert!(ci.contains(step), "CI runs {step}");
    }
}

// ---- the documentation ----

#[test]
fn the_documented_command_finds_the_commit_of_a_release_tag() {
    // docs/actions-security.md tells users how to pin upkeep's action to a release's commit;
    // its command runs here against a local copy of a repository instead of GitHub's.
    let docs = project_file("docs/actions-security.md");
    let command = lines_starting(&docs, "git ls-remote ")
        .into_iter()
        .next()
        .expect("the docs show the command");
    let upstream = super::TestRepo::new();
    upstream.git(&["tag", "-a", "v0.1.0", "-m", "upkeep 0.1.0"]); // annotated: a tag object
    upstream.write("CHANGELOG.md", "0.1.1\n");
    upstream.commit("Release 0.1.1");
    upstream.git(&["tag", "v0.1.1"]); // lightweight: the commit itself
    upstream.git(&["tag", "v0.1.0.1"]); // a tag the pattern must not match
    let copy = tempfile::tempdir().expect("tempdir");
    let bare = copy.path().join("upkeep.git");
    let bare = bare.to_str().expect("utf-8 path");
    upstream.git(&["clone", "-q", "--bare", ".", bare]);
    for tag in ["v0.1.0", "v0.1.1"] {
        let local = command
            .replace("https://github.com/upkeep-bot/upkeep", bare)
            .replace("v0.1.0", tag);
        let output = std::process::Command::new("bash")
            .args(["-c", &local])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("bash runs");
        assert!(output.status.success(), "{local}: {output:?}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let sha = stdout.split_whitespace().next().unwrap_or_default();
        let commit = upstream.git(&["rev-parse", &format!("{tag}^{{commit}}")]);
        assert_eq!(sha, commit.trim(), "{local} printed {stdout}");
    }
}

// ---- action.yml ----

#[test]
fn action_yml_declares_every_input_and_output() {
    // actionlint checks workflows, not action metadata, so action.yml is checked here.
    let action = parse_yaml("action.yml", &project_file("action.yml"));
    assert_eq!(action["runs"]["using"].as_str(), Some("composite"));
    let inputs: Vec<&str> = hash_entries(&action["inputs"]).into_iter().map(|(k, _)| k).collect();
    for name in [
        "task",
        "repo",
        "provider",
        "model",
        "base-url",
        "api-key",
        "github-token",
        "continuous",
        "max-cycles",
        "max-turns",
        "allow-dangerous-tools",
        "label",
        "dry-run",
        "max-depth",
        "max-reviews",
        "no-review",
        "review-model",
        "version",
        "fail-on-question",
    ] {
        assert!(inputs.contains(&name), "input {name} missing: {inputs:?}");
        assert!(
            action["inputs"][name]["description"].as_str().is_some(),
            "{name} described"
        );
    }
    assert_eq!(
        action["inputs"]["repo"]["default"].as_str(),
        Some("${{ github.repository }}")
    );
    assert_eq!(
        action["inputs"]["github-token"]["default"].as_str(),
        Some("${{ github.token }}")
    );
    for name in [
        "outcome",
        "exit-code",
        "pull-request-url",
        "pull-request-urls",
        "question",
        "unresolved-findings",
        "fix-attempts",
    ] {
        assert_eq!(
            action["outputs"][name]["value"].as_str(),
            Some(format!("${{{{ steps.run.outputs.{name} }}}}").as_str()),
            "output {name} comes from the run step"
        );
    }
    let steps = action["runs"]["steps"].as_vec().expect("steps");
    let run = steps
        .iter()
        .find(|s| s["id"].as_str() == Some("run"))
        .expect("the run step");
    // Every option-like input reaches upkeep as UPKEEP_<OPTION>.
    for (input, variable) in [
        ("repo", "UPKEEP_REPO"),
        ("task", "UPKEEP_TASK"),
        ("provider", "UPKEEP_PROVIDER"),
        ("model", "UPKEEP_MODEL"),
        ("base-url", "UPKEEP_BASE_URL"),
        ("continuous", "UPKEEP_CONTINUOUS"),
        ("max-cycles", "UPKEEP_MAX_CYCLES"),
        ("max-turns", "UPKEEP_MAX_TURNS"),
        ("allow-dangerous-tools", "UPKEEP_ALLOW_DANGEROUS_TOOLS"),
        ("label", "UPKEEP_LABEL"),
        ("dry-run", "UPKEEP_DRY_RUN"),
        ("max-depth", "UPKEEP_MAX_DEPTH"),
        ("max-reviews", "UPKEEP_MAX_REVIEWS"),
        ("no-review", "UPKEEP_NO_REVIEW"),
        ("review-model", "UPKEEP_REVIEW_MODEL"),
    ] {
        assert_eq!(
            run["env"][variable].as_str(),
            Some(format!("${{{{ inputs.{input} }}}}").as_str()),
            "{input} -> {variable}"
        );
    }
    // ...and every UPKEEP_* variable the step sets is one `upkeep run` or `upkeep fleet` reads
    // (UPKEEP_ACTION_* are the step's own).
    let cli = <upkeep::cli::Cli as clap::CommandFactory>::command();
    let read: Vec<String> = ["run", "fleet"]
        .into_iter()
        .filter_map(|name| cli.find_subcommand(name))
        .flat_map(|command| command.get_arguments())
        .filter_map(|arg| arg.get_env())
        .map(|env| env.to_string_lossy().into_owned())
        .collect();
    // UPKEEP_BOT_LOGIN is read from the environment only (docs/command-line.md), as tokens are.
    assert_eq!(run["env"]["UPKEEP_BOT_LOGIN"].as_str(), Some("${{ inputs.bot-login }}"));
    for (variable, _) in hash_entries(&run["env"]) {
        if variable.starts_with("UPKEEP_") && !variable.starts_with("UPKEEP_ACTION_") && variable != "UPKEEP_BOT_LOGIN"
        {
            assert!(
                read.iter().any(|known| known == variable),
                "{variable} is read by no flag"
            );
        }
    }
    for variable in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"] {
        let value = run["env"][variable]
            .as_str()
            .unwrap_or_else(|| panic!("{variable} set"));
        assert!(
            value.contains("inputs.api-key") && value.contains("inputs.provider =="),
            "{value}"
        );
    }
    let cache = steps
        .iter()
        .find(|s| s["id"].as_str() == Some("cache"))
        .expect("the cache step");
    assert_eq!(
        cache["uses"].as_str(),
        Some("actions/cache@cdf6c1fa76f9f475f3d7449005a359c84ca0f306")
    );
    let install = steps
        .iter()
        .find_map(|s| s["run"].as_str().filter(|r| r.contains("releases/download")))
        .expect("the install step");
    assert!(install.contains("releases/download/$tag/upkeep-$TARGET.tar.gz"));
    assert!(install.contains("cargo install --locked --git"));
}

#[test]
fn the_actions_scripts_are_valid_bash() {
    let action = parse_yaml("action.yml", &project_file("action.yml"));
    let scripts: Vec<&str> = action["runs"]["steps"]
        .as_vec()
        .expect("steps")
        .iter()
        .filter_map(|step| step["run"].as_str())
        .collect();
    assert_eq!(scripts.len(), 3, "plan, install, run");
    for script in scripts {
        let output = std::process::Command::new("bash")
            .args(["-n", "-c", script])
            .output()
            .expect("bash runs");
        assert!(
            output.status.success(),
            "{}\n{script}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Every `upkeep-bot/upkeep@` a reader can copy (README, docs, the example workflows) is pinned
/// to a full commit with the version in a comment, and all name the same commit, so they move
/// together when Dependabot or a release updates them. (The line `upkeep init` writes names
/// the commit its build was made from: tests/suite/actions/init.rs.)
#[test]
fn every_copyable_reference_to_upkeeps_action_is_pinned_alike() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", ".github/workflows"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("readable") {
            files.push(entry.expect("entry").path());
        }
    }
    let mut pins = std::collections::BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for line in text
            .lines()
            .filter(|line| line.trim_start().starts_with("- uses: upkeep-bot/upkeep@"))
        {
            let reference = line.trim_start().trim_start_matches("- uses: upkeep-bot/upkeep@");
            let (commit, version) = reference.split_once(" # v").unwrap_or((reference, ""));
            assert!(
                commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
                "{}: `{line}` is not pinned to a full commit",
                file.display()
            );
            assert!(
                version.starts_with(|c: char| c.is_ascii_digit()) && version.contains('.'),
                "{}: `{line}` names its version in a comment",
                file.display()
            );
            pins.insert(reference.to_owned());
        }
    }
    assert_eq!(pins.len(), 1, "one pin everywhere: {pins:?}");
}
