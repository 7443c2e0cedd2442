//! The documentation is what people run unattended work from, so what it shows must be real:
//! every `upkeep ...` command in a shell block of README.md and docs/*.md parses with upkeep's
//! own command line, every relative link leads to a file (and a heading) that exists, the
//! configuration examples are accepted by upkeep, and the README's test command is the one CI
//! runs. Each checker is also fed a broken case, so these tests can fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use regex::Regex;

use super::support::{TestRepo, Upkeep};

/// Shell commands shown in the docs that are not meant to parse as written, each with why.
/// Empty today: every command the docs show is concrete. A page that must show a placeholder
/// (`<REPO>`) does it in an untyped block (a synopsis), which is not checked.
const NOT_RUNNABLE: &[(&str, &str)] = &[];

/// Languages of the fenced blocks whose lines are shell commands.
const SHELL_LANGUAGES: &[&str] = &["sh", "bash", "shell", "console"];

fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page of docs/, as (path relative to the project, text).
fn pages() -> Vec<(String, String)> {
    let root = project_root();
    let mut names = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.expect("a docs/ entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root.join(&name)).unwrap_or_else(|e| panic!("reading {name}: {e}"));
            (name, text)
        })
        .collect()
}

/// A fenced code block: its language, the line number of its first content line, its lines
/// (with the fence's indentation removed).
#[derive(Debug)]
struct Block {
    language: String,
    first_line: usize,
    lines: Vec<String>,
}

/// The fenced code blocks of a Markdown text, and the text outside them (blank lines in their
/// place, so line numbers stay right).
fn split_fences(text: &str) -> (Vec<Block>, Vec<String>) {
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    // (indentation, fence length, block)
    let mut open: Option<(usize, usize, Block)> = None;
    for (index, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim_start();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        match &mut open {
            None if ticks >= 3 => {
                let language = trimmed[ticks..].split_whitespace().next().unwrap_or("").to_owned();
                open = Some((
                    indent,
                    ticks,
                    Block {
                        language,
                        first_line: index + 2,
                        lines: Vec::new(),
                    },
                ));
                prose.push(String::new());
            }
            None => prose.push(line.to_owned()),
            Some((_, fence, _)) if ticks >= *fence && trimmed[ticks..].trim().is_empty() => {
                if let Some((_, _, block)) = open.take() {
                    blocks.push(block);
                }
                prose.push(String::new());
            }
            Some((fence_indent, _, block)) => {
                let strip = indent.min(*fence_indent);
                block.lines.push(line[strip..].to_owned());
                prose.push(String::new());
            }
        }
    }
    (blocks, prose)
}

/// A command line shown in a page: where, and the text (continuations joined).
#[derive(Debug, Clone)]
struct Shown {
    page: String,
    line: usize,
    command: String,
}

/// Every `upkeep ...` (or `cargo run -- ...`, `./target/release/upkeep ...`) command in the
/// shell blocks of a page. Lines ending in `\` continue on the next line; in `console` blocks
/// only lines after a `$ ` prompt are commands.
fn upkeep_commands(page: &str, text: &str) -> Vec<Shown> {
    let invocation = Regex::new(
        r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:upkeep|cargo\s+run|\./target/(?:release|debug)/upkeep)(?:\s|$)",
    )
    .expect("the pattern compiles");
    let mut found = Vec::new();
    let (blocks, _) = split_fences(text);
    for block in blocks.iter().filter(|b| SHELL_LANGUAGES.contains(&b.language.as_str())) {
        let console = block.language == "console";
        let mut pending: Option<(usize, String)> = None;
        for (offset, raw) in block.lines.iter().enumerate() {
            let number = block.first_line + offset;
            let (start, mut text) = match pending.take() {
                Some((start, so_far)) => (start, format!("{so_far} {}", raw.trim())),
                None if console => match raw.trim_start().strip_prefix("$ ") {
                    Some(command) => (number, command.trim().to_owned()),
                    None => continue,
                },
                None => (number, raw.trim().to_owned()),
            };
            if let Some(head) = text.strip_suffix('\\') {
                text = head.trim_end().to_owned();
                pending = Some((start, text));
                continue;
            }
            if invocation.is_match(&text) {
                found.push(Shown {
                    page: page.to_owned(),
                    line: start,
                    command: text,
                });
            }
        }
    }
    found
}

/// How bash reads a shown command, with `upkeep` and `cargo run` standing in as functions that
/// print their arguments: real quoting, comments, `~` and variables, nothing run. `set -u` makes
/// an unset `$VARIABLE` (a placeholder) an error.
const SHELL_PRELUDE: &str = r#"set -u
upkeep() { printf '%s\0' "$@"; }
cargo() {
  [ "$1" = run ] || { echo "only cargo run starts upkeep" >&2; return 97; }
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do shift; done
  [ "$#" -gt 0 ] && shift
  printf '%s\0' "$@"
}
"#;

/// The arguments bash would give upkeep for `command`, or why it cannot.
fn shell_words(command: &str, scratch: &Path) -> Result<Vec<String>, String> {
    let command = Regex::new(r"\./target/(?:release|debug)/upkeep")
        .expect("the pattern compiles")
        .replace(command, "upkeep");
    let output = Command::new("bash")
        .args(["--noprofile", "--norc", "-c"])
        .arg(format!("{SHELL_PRELUDE}{command}"))
        .current_dir(scratch)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/home/reader")
        .output()
        .map_err(|error| format!("bash did not run: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "bash could not read it: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let stdout = String::from_utf8(output.stdout).map_err(|error| format!("not UTF-8: {error}"))?;
    Ok(stdout.split_terminator('\0').map(str::to_owned).collect())
}

/// Parses a shown command with upkeep's real command line; `Err` says what is wrong.
fn check_command(shown: &Shown, scratch: &Path) -> Result<(), String> {
    let words = shell_words(&shown.command, scratch)?;
    match upkeep::cli::Cli::try_parse_from(std::iter::once("upkeep".to_owned()).chain(words)) {
        Ok(_) => Ok(()),
        Err(error)
            if matches!(
                error.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            Ok(())
        }
        Err(error) => Err(error.render().to_string()),
    }
}

fn failures_of_commands(commands: &[Shown]) -> Vec<String> {
    let scratch = tempfile::tempdir().expect("tempdir");
    commands
        .iter()
        .filter(|shown| !NOT_RUNNABLE.iter().any(|(command, _)| *command == shown.command))
        .filter_map(|shown| {
            check_command(shown, scratch.path())
                .err()
                .map(|why| format!("{}:{}: `{}`\n    {}", shown.page, shown.line, shown.command, why.trim()))
        })
        .collect()
}

#[test]
fn every_upkeep_command_in_the_docs_parses() {
    let commands: Vec<Shown> = pages()
        .iter()
        .flat_map(|(page, text)| upkeep_commands(page, text))
        .collect();
    // The extractor must be finding the commands, the README's included.
    assert!(
        commands.len() >= 30,
        "only {} commands found: {commands:#?}",
        commands.len()
    );
    let readme: Vec<&str> = commands
        .iter()
        .filter(|shown| shown.page == "README.md")
        .map(|shown| shown.command.as_str())
        .collect();
    assert!(
        readme
            .iter()
            .any(|command| command.starts_with("cargo run --release -- demo")),
        "{readme:?}"
    );
    for (command, why) in NOT_RUNNABLE {
        assert!(
            commands.iter().any(|shown| shown.command == *command),
            "NOT_RUNNABLE lists `{command}` ({why}), which no page shows any more"
        );
    }
    let failures = failures_of_commands(&commands);
    assert!(
        failures.is_empty(),
        "commands in the docs that upkeep would refuse:\n{}",
        failures.join("\n")
    );
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces as `-`; a repeated anchor gets `-1`, `-2`...
fn anchors(text: &str) -> BTreeSet<String> {
    let heading = Regex::new(r"^#{1,6}\s+(.*?)\s*#*\s*$").expect("the pattern compiles");
    let link = Regex::new(r"\[([^\]]*)\]\([^)]*\)").expect("the pattern compiles");
    let (_, prose) = split_fences(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for line in &prose {
        let Some(captures) = heading.captures(line) else {
            continue;
        };
        let title = link.replace_all(&captures[1], "$1");
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let count = seen.entry(slug.clone()).or_insert(0);
        anchors.insert(if *count == 0 {
            slug.clone()
        } else {
            format!("{slug}-{count}")
        });
        *count += 1;
    }
    anchors
}

/// The relative links of a page outside code: (line, target).
fn relative_links(text: &str) -> Vec<(usize, String)> {
    let code = Regex::new(r"`[^`]*`").expect("the pattern compiles");
    let link = Regex::new(r#"\]\(([^)\s]+)(?:\s+"[^"]*")?\)"#).expect("the pattern compiles");
    let (_, prose) = split_fences(text);
    let mut links = Vec::new();
    for (index, line) in prose.iter().enumerate() {
        let line = code.replace_all(line, "");
        for captures in link.captures_iter(&line) {
            let target = captures[1].to_owned();
            let external = ["http://", "https://", "mailto:"]
                .iter()
                .any(|scheme| target.starts_with(scheme));
            if !external {
                links.push((index + 1, target));
            }
        }
    }
    links
}

/// What is wrong with each relative link of `page` (its path relative to `root`).
fn broken_links(root: &Path, page: &str, text: &str) -> Vec<String> {
    let canonical_root = root.canonicalize().expect("the project root");
    let directory = Path::new(page).parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    for (line, target) in relative_links(text) {
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let (file, file_text) = if path.is_empty() {
            (root.join(page), Some(text.to_owned()))
        } else {
            let file = root.join(directory).join(path);
            let Ok(resolved) = file.canonicalize() else {
                problems.push(format!("{page}:{line}: {target}: {} does not exist", file.display()));
                continue;
            };
            if !resolved.starts_with(&canonical_root) {
                problems.push(format!("{page}:{line}: {target}: leads outside the project"));
                continue;
            }
            let text = if path.ends_with(".md") {
                std::fs::read_to_string(&resolved).ok()
            } else {
                None
            };
            (resolved, text)
        };
        if let (Some(anchor), Some(file_text)) = (anchor, file_text) {
            if !anchors(&file_text).contains(anchor) {
                problems.push(format!(
                    "{page}:{line}: {target}: {} has no heading with the anchor #{anchor}",
                    file.display()
                ));
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_in_the_docs_leads_somewhere() {
    let root = project_root();
    let pages = pages();
    let links: usize = pages.iter().map(|(_, text)| relative_links(text).len()).sum();
    assert!(links >= 100, "only {links} relative links found");
    let problems: Vec<String> = pages
        .iter()
        .flat_map(|(page, text)| broken_links(&root, page, text))
        .collect();
    assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
    // Every page of docs/ is reachable from the map.
    let index = std::fs::read_to_string(root.join("docs/index.md")).expect("docs/index.md");
    let listed: BTreeSet<String> = relative_links(&index)
        .into_iter()
        .map(|(_, target)| target.split('#').next().unwrap_or_default().to_owned())
        .collect();
    for (page, _) in &pages {
        if let Some(name) = page.strip_prefix("docs/") {
            assert!(
                name == "index.md" || listed.contains(name),
                "docs/index.md does not link {page}"
            );
        }
    }
}

#[test]
fn the_checks_catch_a_broken_command_and_a_broken_link() {
    let page = "Intro.\n\n```sh\nupkeep run --repo . --no-such-flag\nupkeep run --repo $REPO\nupkeep demo \\\n  --dir ./greet   # fine\n```\n\n```console\n$ upkeep tools --json\n{\"tools\": []}\n```\n\n## Usage\n\n[here](#usage), [gone](#nowhere), [missing](no-such-page.md), [up](../../etc/passwd), `[code](not-a-link.md)`\n";
    let commands = upkeep_commands("page.md", page);
    let shown: Vec<&str> = commands.iter().map(|shown| shown.command.as_str()).collect();
    assert_eq!(
        shown,
        [
            "upkeep run --repo . --no-such-flag",
            "upkeep run --repo $REPO",
            "upkeep demo --dir ./greet   # fine",
            "upkeep tools --json",
        ]
    );
    let failures = failures_of_commands(&commands);
    assert_eq!(failures.len(), 2, "{failures:#?}");
    assert!(failures[0].contains("--no-such-flag"), "{}", failures[0]);
    assert!(failures[1].contains("REPO: unbound variable"), "{}", failures[1]);

    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(root.path().join("docs")).expect("mkdir");
    let problems = broken_links(root.path(), "docs/page.md", page);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("#nowhere"), "{}", problems[0]);
    assert!(problems[1].contains("no-such-page.md"), "{}", problems[1]);
    assert!(problems[2].contains("../../etc/passwd"), "{}", problems[2]);
}

/// Every TOML example headed `# .upkeep.toml` is accepted as a repository's file, and every one
/// headed `# operator config` as the operator's, by `upkeep prompt` (which reads both before it
/// builds the prompt, and needs no model).
#[test]
fn the_configuration_examples_in_the_docs_are_accepted() {
    let mut checked = 0;
    for (page, text) in pages() {
        let (blocks, _) = split_fences(&text);
        for block in blocks.iter().filter(|block| block.language == "toml") {
            let content = block.lines.join("\n") + "\n";
            let out = match block.lines.first().map(String::as_str) {
                Some("# .upkeep.toml") => {
                    let repo = TestRepo::with_files(&[("README.md", "# r\n"), (".upkeep.toml", content.as_str())]);
                    Upkeep::new().args(["prompt", "--repo"]).args([repo.path()]).run()
                }
                Some("# operator config") => {
                    let repo = TestRepo::new();
                    let config = tempfile::NamedTempFile::new().expect("a temporary file");
                    std::fs::write(config.path(), &content).expect("write");
                    Upkeep::new()
                        .args(["prompt", "--repo"])
                        .args([repo.path()])
                        .args(["--config"])
                        .args([config.path()])
                        .run()
                }
                _ => continue,
            };
            assert_eq!(
                out.code,
                Some(0),
                "{page}:{}: the example is refused:\n{}",
                block.first_line,
                out.stderr
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} configuration examples found");
}

/// CI (`.ci/run`) runs the README's setup and test command: they must stay the same.
#[test]
fn the_readme_gives_the_test_command_ci_runs() {
    let root = project_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let ci: Vec<String> = std::fs::read_to_string(root.join(".ci/run"))
        .expect(".ci/run")
        .lines()
        .map(|line| line.trim().to_owned())
        .collect();
    let (blocks, _) = split_fences(&readme);
    let commands = |block: &Block| -> Vec<String> {
        block
            .lines
            .iter()
            .map(|line| line.split(" #").next().unwrap_or_default().trim().to_owned())
            .filter(|line| !line.is_empty())
            .collect()
    };
    let first = blocks.first().expect("the README starts with a code block");
    assert_eq!(commands(first), ["cargo run --release -- demo", "cargo test"]);
    let development = readme
        .find("## Development")
        .and_then(|at| {
            blocks
                .iter()
                .find(|block| block.first_line > readme[..at].lines().count())
        })
        .expect("the README has a Development section with a code block");
    let development = commands(development);
    for command in ["bash .ci/setup", "cargo test"] {
        assert!(development.iter().any(|line| line == command), "{development:?}");
        assert!(
            ci.iter().any(|line| line == command),
            ".ci/run does not run `{command}`"
        );
    }
}
