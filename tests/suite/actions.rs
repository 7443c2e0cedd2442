//! upkeep as a GitHub Actions step: step outputs in the exact format the runner parses, the job
//! summary, annotations, the `issues` `labeled` event selecting its issue, `upkeep init`, and
//! (in `actions/workflows.rs`) the action's metadata and the workflows: actionlint and zizmor
//! check them in `.ci/run`; those tests check what neither does.
//!
//! This module holds the runner stand-in and the output parser the suites share; the tests live
//! in its submodules by subject.

mod annotations;
mod events;
mod init;
mod outputs;
/// action.yml and the workflows, parsed: the rules of DESIGN.md section 8, "Workflows".
mod workflows;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::support::{TestRepo, Upkeep, reply};

/// GitHub's parser for `$GITHUB_OUTPUT` (actions/runner `FileCommandManager.cs`), rewritten:
/// lines are split on `\n`; empty lines are skipped; a line whose first `=` comes before any
/// `<<` is `name=value`; a line whose first `<<` comes first opens a heredoc `name<<DELIMITER`
/// whose value is every following line up to the first line equal to the delimiter, joined
/// with `\n`. A missing delimiter or any other line fails the step (here: panics). A later
/// value for the same name replaces an earlier one.
fn parse_github_output(text: &str) -> BTreeMap<String, String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut outputs = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line.is_empty() {
            continue;
        }
        let equals = line.find('=');
        let heredoc = line.find("<<");
        match (equals, heredoc) {
            (Some(e), h) if h.is_none_or(|h| e < h) => {
                let (name, value) = (&line[..e], &line[e + 1..]);
                assert!(!name.is_empty(), "empty output name: {line:?}");
                outputs.insert(name.to_owned(), value.to_owned());
            }
            (_, Some(h)) => {
                let (name, delimiter) = (&line[..h], &line[h + 2..]);
                assert!(
                    !name.is_empty() && !delimiter.is_empty(),
                    "invalid heredoc line: {line:?}"
                );
                let mut value = Vec::new();
                loop {
                    assert!(i < lines.len(), "matching delimiter not found: {delimiter:?}");
                    let next = lines[i];
                    i += 1;
                    if next == delimiter {
                        break;
                    }
                    value.push(next);
                }
                outputs.insert(name.to_owned(), value.join("\n"));
            }
            _ => panic!("invalid output line: {line:?}"),
        }
    }
    outputs
}

#[test]
fn the_output_parser_follows_githubs_rules() {
    let parsed = parse_github_output("a=1\n\nb=x=y<<z\nc<<EOF\nline 1\n\nline=3\nEOF\nd<<D\nD\na=2\n");
    assert_eq!(parsed["a"], "2");
    assert_eq!(parsed["b"], "x=y<<z");
    assert_eq!(parsed["c"], "line 1\n\nline=3");
    assert_eq!(parsed["d"], "");
}

/// The files the runner gives a step, in a temporary directory.
struct Runner {
    dir: tempfile::TempDir,
}

impl Runner {
    fn new() -> Self {
        let runner = Self {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        // Another step's leftovers: upkeep must append, not truncate.
        std::fs::write(runner.output_path(), "earlier=kept\n").expect("write");
        std::fs::write(runner.summary_path(), "# Earlier step\n\n").expect("write");
        runner
    }

    fn output_path(&self) -> PathBuf {
        self.dir.path().join("github_output")
    }

    fn summary_path(&self) -> PathBuf {
        self.dir.path().join("step_summary")
    }

    fn event_path(&self) -> PathBuf {
        self.dir.path().join("event.json")
    }

    fn upkeep(&self) -> Upkeep {
        self.on(Upkeep::new())
    }

    /// `upkeep` as a step of this runner.
    fn on(&self, upkeep: Upkeep) -> Upkeep {
        upkeep
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", self.output_path())
            .env("GITHUB_STEP_SUMMARY", self.summary_path())
    }

    fn with_event(&self, upkeep: Upkeep, name: &str, payload: &Value) -> Upkeep {
        std::fs::write(self.event_path(), payload.to_string()).expect("write event");
        upkeep
            .env("GITHUB_EVENT_NAME", name)
            .env("GITHUB_EVENT_PATH", self.event_path())
    }

    fn outputs(&self) -> BTreeMap<String, String> {
        let text = std::fs::read_to_string(self.output_path()).expect("outputs written");
        let outputs = parse_github_output(&text);
        assert_eq!(outputs.get("earlier").map(String::as_str), Some("kept"), "{text}");
        outputs
    }

    fn summary(&self) -> String {
        let text = std::fs::read_to_string(self.summary_path()).expect("summary written");
        assert!(
            text.starts_with("# Earlier step\n\n"),
            "appended, not replaced:\n{text}"
        );
        text
    }
}

fn propose(title: &str) -> Vec<String> {
    vec![reply(
        "write and propose",
        &[
            ("write_file", json!({"path": "docs/USAGE.md", "content": "Run it.\n"})),
            (
                "create_pull_request",
                json!({"title": title, "body": "Adds a usage section."}),
            ),
            ("finish", json!({"status": "completed", "summary": title})),
        ],
    )]
}

/// The stop-commands token and the position of the line that resumes command processing.
fn paused_span(stderr: &str) -> (usize, usize) {
    let start = stderr
        .find("::stop-commands::")
        .expect("commands paused during the run");
    let token = stderr[start + "::stop-commands::".len()..]
        .lines()
        .next()
        .expect("token")
        .to_owned();
    assert!(token.len() >= 32, "the token is random: {token}");
    let end = stderr.find(&format!("::{token}::")).expect("commands resumed");
    assert!(start < end);
    (start, end)
}
