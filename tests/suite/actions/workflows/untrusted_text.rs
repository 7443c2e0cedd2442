//! Text that someone outside the maintainers wrote (titles, bodies, comments, reviews, branch
//! and label names, inputs) and the workflows that handle it: it reaches `run:` scripts only
//! through `env:` variables that every script quotes, and the job guard of `upkeep init`'s
//! workflow lets only maintainers start a run. Both are checked on the parsed YAML and parsed
//! expressions; hostile templates show that each shape of the mistake is caught.

use std::collections::BTreeSet;

use github_actions_expressions::{Evaluation, Expr};
use serde_json::{Value, json};

use super::{hash_entries, jobs, parse_yaml, project_file, shipped_files};

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
    let template = upkeep::init::workflow().expect("pinned");
    let template = template.trim_end();
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
    let doc = parse_yaml("template", &upkeep::init::workflow().expect("pinned"));
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

/// Whether the job of `upkeep init`'s workflow runs for a checks event of this repository.
fn the_template_job_runs_for_checks(event_name: &str, event: Value) -> bool {
    let doc = parse_yaml("template", &upkeep::init::workflow().expect("pinned"));
    let condition = doc["jobs"]["upkeep"]["if"].as_str().expect("the job has a guard");
    let contexts = json!({"github": {"event_name": event_name, "event": event, "repository": "owner/name"},
                          "vars": {}});
    evaluate(condition, &contexts).as_boolean()
}

fn check_suite(branch: Option<&str>, conclusion: &str) -> Value {
    json!({"action": "completed",
           "check_suite": {"head_branch": branch, "conclusion": conclusion, "status": "completed",
                           "pull_requests": []},
           "repository": {"full_name": "owner/name"}})
}

fn workflow_run(branch: &str, head_repository: &str, conclusion: &str) -> Value {
    json!({"action": "completed",
           "workflow_run": {"head_branch": branch, "conclusion": conclusion, "status": "completed",
                            "head_repository": {"full_name": head_repository}, "pull_requests": []},
           "repository": {"full_name": "owner/name"}})
}

/// Checks that completed start a run only when they failed on an `upkeep/` branch of this
/// repository: never on another branch, never for a fork's branch of the same name, never for a
/// success or a cancellation.
#[test]
fn the_checks_guard_admits_only_failures_on_upkeeps_own_branches() {
    let runs = the_template_job_runs_for_checks;
    for conclusion in ["failure", "timed_out"] {
        assert!(
            runs("check_suite", check_suite(Some("upkeep/7-greeting"), conclusion)),
            "{conclusion}"
        );
        assert!(
            runs(
                "workflow_run",
                workflow_run("upkeep/7-greeting", "owner/name", conclusion)
            ),
            "{conclusion}"
        );
    }
    for conclusion in [
        "success",
        "cancelled",
        "skipped",
        "neutral",
        "action_required",
        "stale",
        "",
    ] {
        assert!(
            !runs("check_suite", check_suite(Some("upkeep/7-greeting"), conclusion)),
            "{conclusion}"
        );
        assert!(
            !runs(
                "workflow_run",
                workflow_run("upkeep/7-greeting", "owner/name", conclusion)
            ),
            "{conclusion}"
        );
    }
    // Another branch, or a fork's (no head branch here; another head repository).
    assert!(!runs("check_suite", check_suite(Some("main"), "failure")));
    assert!(!runs("check_suite", check_suite(Some("feature/upkeep/x"), "failure")));
    assert!(!runs("check_suite", check_suite(None, "failure")));
    assert!(!runs("workflow_run", workflow_run("main", "owner/name", "failure")));
    assert!(!runs(
        "workflow_run",
        workflow_run("upkeep/7-greeting", "mallory/name", "failure")
    ));
    // A checks payload under another event's name starts nothing.
    assert!(!runs("push", check_suite(Some("upkeep/7-greeting"), "failure")));
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
