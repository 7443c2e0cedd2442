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

use std::collections::BTreeSet;
use std::path::Path;

use github_actions_expressions::{Evaluation, Expr};
use serde_json::{Value, json};
use yaml_rust2::{Yaml, YamlLoader};

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
            upkeep::init::WORKFLOW_TEMPLATE.to_owned(),
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

/// The text of every `${{ }}` in `text`, without the braces. Quotes inside an expression are
/// skipped, so `'}}'` in a string literal does not end it.
fn expressions(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let body = &rest[start + 3..];
        let bytes = body.as_bytes();
        let (mut i, mut quoted) = (0, false);
        let end = loop {
            if i + 1 >= bytes.len() {
                break None;
            }
            match bytes[i] {
                b'\'' => quoted = !quoted,
                b'}' if !quoted && bytes[i + 1] == b'}' => break Some(i),
                _ => {}
            }
            i += 1;
        };
        let Some(end) = end else {
            found.push(body);
            break;
        };
        found.push(&body[..end]);
        rest = &body[end + 2..];
    }
    found
}

/// Whether an expression can carry text that someone outside the maintainers wrote or chose:
/// the event payload (titles, bodies, comments, reviews, labels, branch names), the branch
/// and ref names, inputs, and whatever other steps, jobs or variables were given from them.
/// What is left is fixed by the repository or the runner (`github.repository`, `secrets`,
/// `vars`, `matrix`, `runner`...).
fn carries_untrusted_text(expression: &str) -> bool {
    let parsed = Expr::parse(expression).unwrap_or_else(|e| panic!("invalid expression {expression:?}: {e}"));
    parsed.contexts().iter().any(|(context, _)| {
        let Some(pattern) = context.as_pattern() else {
            return true; // `fromJSON(...).x` and the like: assume the worst
        };
        let pattern = pattern.to_ascii_lowercase();
        let parts: Vec<&str> = pattern.split('.').collect();
        match parts.as_slice() {
            ["github", field, ..] => ["event", "head_ref", "base_ref", "ref", "ref_name"].contains(field),
            [root, ..] => ["inputs", "steps", "needs", "jobs", "env"].contains(root),
            [] => true,
        }
    })
}

/// Expansions of `names` in a bash script that are not inside double quotes, where word
/// splitting and globbing would act on the text. A small lexer: backslash escapes, single
/// quotes, double quotes, `$(...)` (a new quoting level, also inside double quotes) and
/// comments. Heredoc bodies are read as plain text (stricter than bash, which does not split
/// them).
fn unquoted_expansions(script: &str, names: &BTreeSet<String>) -> Vec<String> {
    #[derive(Clone, Copy, PartialEq)]
    enum Level {
        Plain,
        Double,
        Substitution,
    }
    let chars: Vec<char> = script.chars().collect();
    let mut levels = vec![Level::Plain];
    let mut found = Vec::new();
    let mut word_start = true;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let level = *levels.last().expect("the plain level is never popped");
        let unquoted = level != Level::Double;
        match c {
            '\\' => i += 1,
            '\'' if unquoted => {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            '#' if unquoted && word_start => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' if unquoted => levels.push(Level::Double),
            '"' => {
                levels.pop();
            }
            ')' if level == Level::Substitution => {
                levels.pop();
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                levels.push(Level::Substitution);
                i += 1;
            }
            '$' => {
                let braced = chars.get(i + 1) == Some(&'{');
                let start = i + 1 + usize::from(braced);
                let name: String = chars[start..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .collect();
                if unquoted && names.contains(&name) {
                    found.push(name);
                }
            }
            _ => {}
        }
        word_start = c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | '`');
        i += 1;
    }
    found
}

/// Every way event text or an input could reach a shell script other than through a quoted
/// environment variable. Empty when the file follows the rule.
fn script_injection_findings(name: &str, text: &str) -> Vec<String> {
    let doc = parse_yaml(name, text);
    let mut findings = Vec::new();
    let workflow_env = &doc["env"];
    for (job_name, job) in jobs(&doc) {
        for (index, step) in job["steps"]
            .as_vec()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let at = format!("{name}: {job_name}, step {}", index + 1);
            let uses = step["uses"].as_str().unwrap_or_default();
            // Code in a string: a script, a shell command line, github-script's `script`.
            let mut code = vec![("run", &step["run"]), ("shell", &step["shell"])];
            if uses.starts_with("actions/github-script@") {
                code.push(("with.script", &step["with"]["script"]));
            }
            for (key, value) in code {
                if let Some(text) = value.as_str() {
                    for expression in expressions(text) {
                        findings.push(format!("{at}: `${{{{{expression}}}}}` pasted into `{key}`"));
                    }
                }
            }
            let Some(script) = step["run"].as_str() else { continue };
            // Variables that carry untrusted text, from every `env:` the step sees.
            let untrusted: BTreeSet<String> = [workflow_env, &job["env"], &step["env"]]
                .into_iter()
                .flat_map(hash_entries)
                .filter(|(_, value)| {
                    value
                        .as_str()
                        .is_some_and(|v| expressions(v).into_iter().any(carries_untrusted_text))
                })
                .map(|(variable, _)| variable.to_owned())
                .collect();
            for variable in unquoted_expansions(script, &untrusted) {
                findings.push(format!("{at}: ${variable} carries event text and is not quoted"));
            }
        }
    }
    findings
}

#[test]
fn every_script_gets_event_text_only_through_quoted_env() {
    for (name, text) in shipped_files() {
        let findings = script_injection_findings(&name, &text);
        assert!(findings.is_empty(), "{}", findings.join("\n"));
    }
    // What the rule has to work on: the template hands its inputs to the action, which hands
    // them to scripts through quoted variables.
    let action = parse_yaml("action.yml", &project_file("action.yml"));
    let steps = action["runs"]["steps"].as_vec().expect("steps");
    assert!(
        steps
            .iter()
            .any(|s| s["env"]["UPKEEP_TASK"].as_str() == Some("${{ inputs.task }}")),
        "the task input reaches upkeep as UPKEEP_TASK"
    );
}

/// The template with one more step appended to its job.
fn template_with_step(step: &str) -> String {
    let template = upkeep::init::WORKFLOW_TEMPLATE.trim_end();
    let indented: String = step.lines().map(|line| format!("      {line}\n")).collect();
    format!("{template}\n{indented}")
}

#[test]
fn the_checker_catches_each_way_event_text_reaches_a_script() {
    let hostile = [
        // The classic: a title pasted into the script.
        "- run: echo \"${{ github.event.issue.title }}\"",
        // A folded block scalar is still a script.
        "- run: >-\n    echo ${{ inputs.task }}",
        "- name: Comment\n  run: |\n    body='${{ github.event.comment.body }}'\n    echo \"$body\"",
        // Through env, but unquoted: word splitting and globbing act on the text.
        "- env:\n    TITLE: ${{ github.event.pull_request.title }}\n  run: echo $TITLE",
        "- env:\n    BRANCH: ${{ github.head_ref }}\n  run: git checkout ${BRANCH}",
        "- env:\n    LABEL: ${{ github.event.label.name }}\n  run: |\n    echo \"$(printf '%s' $LABEL)\"",
        // github-script's `script` is JavaScript source.
        "- uses: actions/github-script@0000000000000000000000000000000000000000 # v7\n  with:\n    script: console.log(\"${{ github.event.review.body }}\")",
        // `shell:` is a command line too.
        "- shell: bash -c \"${{ inputs.task }}\" {0}\n  run: true",
    ];
    for step in hostile {
        let workflow = template_with_step(step);
        let findings = script_injection_findings("hostile", &workflow);
        assert_eq!(findings.len(), 1, "{step}\n{findings:#?}");
    }
    // And what is fine: quoted, in a comment, inside single quotes (no expansion), and values
    // that no outsider chooses.
    let fine = [
        "- env:\n    TITLE: ${{ github.event.issue.title }}\n  run: |\n    # echo $TITLE would split it\n    printf '%s\\n' \"$TITLE\" 'literal $TITLE'",
        "- env:\n    TITLE: ${{ github.event.issue.title }}\n  run: echo \"$(printf '%s' \"${TITLE}\")\"",
        "- env:\n    REPOSITORY: ${{ github.repository }}\n  run: echo $REPOSITORY",
    ];
    for step in fine {
        let findings = script_injection_findings("fine", &template_with_step(step));
        assert!(findings.is_empty(), "{step}\n{findings:#?}");
    }
}

// ---- who may start a run ----

/// A GitHub expression evaluated against `contexts` (`{"github": {...}, "vars": {...}}`): each
/// context reference becomes a literal of its value, then the crate evaluates the constant
/// expression with GitHub's semantics (case-insensitive comparison, `||` returning a value).
fn evaluate(expression: &str, contexts: &Value) -> Evaluation {
    let parsed = Expr::parse(expression).unwrap_or_else(|e| panic!("invalid expression: {e}"));
    let mut spans: Vec<_> = parsed
        .contexts()
        .into_iter()
        .map(|(context, origin)| (origin.span.start, origin.span.end, context.as_pattern()))
        .collect();
    spans.sort_by_key(|(start, end, _)| (*start, std::cmp::Reverse(*end)));
    let mut substituted = String::new();
    let mut done = 0;
    for (start, end, pattern) in spans {
        if start < done {
            continue; // inside a context already replaced
        }
        let pattern = pattern.unwrap_or_else(|| panic!("unsupported context in {expression}"));
        // Context names are case-insensitive (`vars.X` is `vars.x`).
        let value = pattern
            .split('.')
            .try_fold(contexts, |value, key| {
                value
                    .as_object()?
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(key))
                    .map(|(_, v)| v)
            })
            .unwrap_or(&Value::Null);
        let literal = match value {
            Value::String(s) => format!("'{}'", s.replace('\'', "''")),
            Value::Array(_) | Value::Object(_) => format!("fromJSON('{}')", value.to_string().replace('\'', "''")),
            other => other.to_string(),
        };
        substituted.push_str(&expression[done..start]);
        substituted.push_str(&literal);
        done = end;
    }
    substituted.push_str(&expression[done..]);
    Expr::parse(&substituted)
        .unwrap_or_else(|e| panic!("{substituted}: {e}"))
        .consteval()
        .unwrap_or_else(|| panic!("not constant: {substituted}"))
}

fn the_template_job_runs(event_name: &str, event: Value, vars: Value) -> bool {
    let doc = parse_yaml("template", upkeep::init::WORKFLOW_TEMPLATE);
    let condition = doc["jobs"]["upkeep"]["if"].as_str().expect("the job has a guard");
    let contexts = json!({"github": {"event_name": event_name, "event": event}, "vars": vars});
    evaluate(condition, &contexts).as_boolean()
}

fn comment(association: &str, login: &str, user_type: &str) -> Value {
    json!({"action": "created", "issue": {"number": 7, "title": "x"},
           "comment": {"body": "@upkeep please", "author_association": association,
                       "user": {"login": login, "type": user_type}}})
}

fn review(association: &str, login: &str, user_type: &str) -> Value {
    json!({"action": "submitted", "pull_request": {"number": 9},
           "review": {"body": "please rename", "state": "changes_requested",
                      "author_association": association, "user": {"login": login, "type": user_type}}})
}

#[test]
fn the_run_guard_admits_maintainers_and_nobody_else() {
    let none = json!({});
    let runs = |event_name: &str, event: Value| the_template_job_runs(event_name, event, json!({}));
    // What starts a run today.
    assert!(runs("workflow_dispatch", json!({"inputs": {"task": "x"}})));
    assert!(runs(
        "issues",
        json!({"action": "labeled", "label": {"name": "upkeep"}})
    ));
    assert!(!runs("issues", json!({"action": "labeled", "label": {"name": "bug"}})));
    // Comments and reviews (the triggers a workflow adds to answer questions and reviews):
    // authors with write access only.
    for association in ["OWNER", "MEMBER", "COLLABORATOR", "owner"] {
        assert!(
            runs("issue_comment", comment(association, "alice", "User")),
            "{association}"
        );
        assert!(
            runs("pull_request_review", review(association, "alice", "User")),
            "{association}"
        );
        assert!(runs(
            "pull_request_review_comment",
            comment(association, "alice", "User")
        ));
    }
    for association in [
        "CONTRIBUTOR",
        "FIRST_TIME_CONTRIBUTOR",
        "FIRST_TIMER",
        "NONE",
        "MANNEQUIN",
        "",
    ] {
        assert!(
            !runs("issue_comment", comment(association, "mallory", "User")),
            "{association}"
        );
        assert!(
            !runs("pull_request_review", review(association, "mallory", "User")),
            "{association}"
        );
        assert!(!runs(
            "pull_request_review_comment",
            comment(association, "mallory", "User")
        ));
    }
    // Never the bot itself: an app's account, the default token's account, or the user account
    // whose token upkeep holds (named by the repository variable).
    assert!(!runs("issue_comment", comment("OWNER", "upkeep-app[bot]", "Bot")));
    assert!(!runs("issue_comment", comment("MEMBER", "github-actions[bot]", "User")));
    let bot_user = json!({"UPKEEP_BOT_LOGIN": "upkeep-machine"});
    assert!(!the_template_job_runs(
        "issue_comment",
        comment("COLLABORATOR", "upkeep-machine", "User"),
        bot_user.clone()
    ));
    assert!(the_template_job_runs(
        "issue_comment",
        comment("COLLABORATOR", "alice", "User"),
        bot_user
    ));
    // Events it is not written for start nothing, whoever sends them.
    assert!(!runs("pull_request_target", json!({"pull_request": {"number": 1}})));
    assert!(!runs("push", none));
}

#[test]
fn the_evaluator_follows_githubs_rules() {
    let contexts = json!({"github": {"event": {"a": "It's", "n": null, "list": ["X"]}}});
    assert_eq!(
        evaluate("github.event.a == 'it''s'", &contexts),
        Evaluation::Boolean(true)
    );
    assert_eq!(
        evaluate("github.event.n || 'fallback'", &contexts),
        Evaluation::String("fallback".into())
    );
    assert_eq!(
        evaluate("contains(github.event.list, 'x')", &contexts),
        Evaluation::Boolean(true)
    );
    assert_eq!(evaluate("github.event.missing.deeper", &contexts), Evaluation::Null);
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
                if uses.starts_with("./") || uses.starts_with("upkeep-bot/upkeep@") {
                    continue; // this repository's own code (docs/actions-security.md)
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
        for dangerous in ["pull_request_target", "workflow_run"] {
            assert!(!triggers.contains(&dangerous), "{name}: {dangerous}");
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
        [("contents", "write"), ("pull-requests", "write"), ("issues", "write")],
        "{name}: exactly what upkeep needs"
    );
    assert_eq!(
        job["environment"].as_str(),
        Some("upkeep"),
        "{name}: the secrets' environment"
    );
    let steps = job["steps"].as_vec().expect("steps");
    assert_eq!(
        steps[0]["uses"].as_str(),
        Some("upkeep-bot/upkeep@v0"),
        "{name}: as users copy it"
    );
    let key = steps[0]["with"]["api-key"].as_str().unwrap_or("");
    assert!(key.starts_with("${{ secrets."), "{name}: the key from a secret: {key}");
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
    assert_eq!(
        on_issue["jobs"]["upkeep"]["if"].as_str(),
        Some("github.event.label.name == 'upkeep'")
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
    ] {
        assert_eq!(
            run["env"][variable].as_str(),
            Some(format!("${{{{ inputs.{input} }}}}").as_str()),
            "{input} -> {variable}"
        );
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
