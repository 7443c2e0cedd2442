//! A local repository is cloned at git's speed: `--depth` is honoured (default 1, 0 = the whole
//! history) and the history is never repacked into the clone; the bot branch still goes back
//! into the source, and the source's own object store is never written but for that branch.
//! Histories are made with `git fast-import`, hundreds of commits in a moment.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use upkeep::repo::{CloneRequest, GitAuth, Stop, Workspace};

use super::support::{RunOutput, Script, TestRepo, Upkeep, git, reply, run_replay};

/// Commits in the generated history (on top of the first one).
const COMMITS: usize = 300;

/// A repository whose `main` has `COMMITS` commits after the first, each rewriting one of a few
/// files, made with `git fast-import`.
fn long_history() -> TestRepo {
    let repo = TestRepo::new();
    let head = repo.git(&["rev-parse", "HEAD"]);
    let mut stream = String::new();
    for n in 1..=COMMITS {
        let content = format!("line {n}\n");
        let message = format!("commit {n}\n");
        stream.push_str(&format!(
            "commit refs/heads/main\ncommitter Test <test@example.com> {} +0000\ndata {}\n{message}",
            1_700_000_000 + n,
            message.len()
        ));
        if n == 1 {
            stream.push_str(&format!("from {head}\n"));
        }
        stream.push_str(&format!(
            "M 100644 inline src/file{}.txt\ndata {}\n{content}\n",
            n % 7,
            content.len()
        ));
    }
    let mut import = Command::new("git")
        .current_dir(repo.path())
        .args(["fast-import", "--quiet"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import runs");
    import
        .stdin
        .take()
        .expect("stdin")
        .write_all(stream.as_bytes())
        .expect("feed fast-import");
    assert!(import.wait().expect("fast-import ends").success());
    repo.git(&["reset", "-q", "--hard", "main"]);
    repo
}

/// Runs a shell command in the clone, then proposes a change: what the command printed, and the
/// run's output.
fn run_then_propose(repo: &TestRepo, command: &str, extra: &[&str]) -> (String, RunOutput) {
    let script = Script::new(&[reply(
        "look, then propose",
        &[
            ("run_shell_command", json!({"command": command})),
            ("write_file", json!({"path": "NOTES.md", "content": "notes\n"})),
            ("create_pull_request", json!({"title": "Add notes", "body": "notes"})),
            ("finish", json!({"status": "completed", "summary": "notes"})),
        ],
    )]);
    let mut args = vec!["--allow-dangerous-tools"];
    args.extend_from_slice(extra);
    let out = run_replay(Upkeep::new(), repo, &script, &args);
    let result = out
        .events_of("tool_result")
        .into_iter()
        .find(|event| event["tool"] == "run_shell_command")
        .unwrap_or_else(|| panic!("no command result\n{}\n{}", out.stdout, out.stderr));
    assert_eq!(result["ok"], Value::Bool(true), "{result}");
    (result["output"].as_str().unwrap_or("").to_owned(), out)
}

/// The bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| {
            let entry = entry.expect("entry");
            let meta = entry.metadata().expect("metadata");
            if meta.is_dir() {
                bytes_under(&entry.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

/// The bot branch went back into the source, one commit on top of `main`.
fn assert_pushed_on_main(repo: &TestRepo, out: &RunOutput) {
    out.assert_code(0);
    assert_eq!(repo.bot_branches(), vec!["upkeep/add-notes"]);
    assert_eq!(
        repo.git(&["rev-parse", "upkeep/add-notes~1"]),
        repo.git(&["rev-parse", "main"]),
        "one commit on top of main"
    );
    assert_eq!(repo.git(&["show", "upkeep/add-notes:NOTES.md"]), "notes");
    repo.git(&["fsck", "--strict"]);
    assert_eq!(out.leftover_temp_entries, 0);
}

/// Fails on code that clones a local path in full whatever `--depth` says.
#[test]
fn a_local_clone_at_the_default_depth_has_one_commit_of_history() {
    let repo = long_history();
    let (output, out) = run_then_propose(&repo, "git rev-list --count HEAD", &[]);
    assert_eq!(output.lines().next(), Some("1"), "depth 1 by default: {output}");
    assert_pushed_on_main(&repo, &out);
}

#[test]
fn a_local_clone_at_depth_3_has_three_commits_of_history() {
    let repo = long_history();
    let (output, out) = run_then_propose(&repo, "git rev-list --count HEAD", &["--depth", "3"]);
    assert_eq!(output.lines().next(), Some("3"), "{output}");
    assert_pushed_on_main(&repo, &out);
}

/// `--depth 0` gives the whole history, and the clone does not hold a copy of it: its own object
/// store stays a small fraction of the source's. Fails on code that packs the history into the
/// clone.
#[test]
fn a_full_local_clone_has_the_whole_history_without_copying_it() {
    let repo = long_history();
    let source_bytes = bytes_under(&repo.path().join(".git/objects"));
    let command = "git rev-list --count HEAD; \
                   find \"$GIT_DIR/objects\" -type f ! -path '*/info/*' -printf '%s\\n' | awk '{s+=$1} END {print s+0}'";
    let (output, out) = run_then_propose(&repo, command, &["--depth", "0"]);
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.first().copied(), Some(&*(COMMITS + 1).to_string()), "{output}");
    let clone_bytes: u64 = lines
        .get(1)
        .and_then(|line| line.trim().parse().ok())
        .expect("a byte count");
    assert!(
        clone_bytes * 10 < source_bytes,
        "the clone's own objects ({clone_bytes} bytes) are a copy of the source's ({source_bytes} bytes)"
    );
    assert_pushed_on_main(&repo, &out);
}

/// Every file under `dir` with its size: compare before and after to prove nothing was written
/// there. (Not modification times: writing an object the clone shares refreshes the shared
/// copy's time, as git does, so that a `gc` of the source keeps it.)
fn snapshot(dir: &Path) -> Vec<String> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let entry = entry.expect("entry");
        let meta = entry.metadata().expect("metadata");
        if meta.is_dir() {
            entries.extend(snapshot(&entry.path()));
        } else {
            entries.push(format!("{} {}", entry.path().display(), meta.len()));
        }
    }
    entries.sort();
    entries
}

/// The source's own alternates are read as git reads them (its history may live there), but
/// nothing is ever written there: not the clone's objects, not the bot branch's.
#[test]
fn a_local_source_whose_alternates_point_elsewhere_gets_no_writes_there() {
    let elsewhere = TestRepo::new();
    let repo = TestRepo::new();
    let objects = elsewhere.path().join(".git/objects");
    std::fs::write(
        repo.path().join(".git/objects/info/alternates"),
        format!("{}\n", objects.display()),
    )
    .expect("write alternates");
    let before = snapshot(elsewhere.path());
    let (_, out) = run_then_propose(&repo, "git rev-list --count HEAD", &[]);
    out.assert_code(0);
    assert_eq!(repo.bot_branches(), vec!["upkeep/add-notes"]);
    assert_eq!(
        snapshot(elsewhere.path()),
        before,
        "nothing written into the other repository"
    );
    assert_eq!(out.leftover_temp_entries, 0);
}

/// The clone reads the source's objects, but a command cannot write into them: the sandbox
/// lets it write only the work tree and its scratch directory.
#[test]
fn a_command_cannot_write_into_the_source_objects_the_clone_reads() {
    if !super::support::landlock_available() {
        eprintln!("SKIP: Landlock is not available, so commands may write anywhere upkeep can");
        return;
    }
    let repo = long_history();
    let before = snapshot(&repo.path().join(".git/objects"));
    let command = "for dir in $(cat \"$GIT_DIR/objects/info/alternates\" 2>/dev/null) \"$GIT_DIR/objects\"; do \
                   if touch \"$dir/planted\" 2>/dev/null; then echo WROTE \"$dir\"; else echo refused; fi; done";
    let (output, out) = run_then_propose(&repo, command, &[]);
    assert!(!output.contains("WROTE"), "{output}");
    assert!(output.contains("refused"), "{output}");
    out.assert_code(0);
    let after: Vec<String> = snapshot(&repo.path().join(".git/objects"));
    assert!(
        before.iter().all(|entry| after.contains(entry)),
        "no object file of the source changed or went away"
    );
    assert!(!after.iter().any(|entry| entry.contains("planted")), "{after:?}");
}

/// Continuous mode's refresh brings a shallow local clone to the source's new tip, still one
/// commit deep, as a fresh clone would be.
#[test]
fn a_refreshed_local_clone_is_shallow_at_the_new_tip() {
    let repo = long_history();
    let request = CloneRequest::new(repo.path().display().to_string(), true);
    let mut workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("clone");
    repo.write("src/new.txt", "new\n");
    repo.commit("One more");
    workspace
        .refresh_blocking(&GitAuth::default(), &Stop::never())
        .expect("refresh");
    let git_dir = workspace.git_dir().to_str().expect("utf-8 path");
    let history = |args: &[&str]| {
        let mut full = vec!["--git-dir", git_dir];
        full.extend_from_slice(args);
        git(workspace.root(), &full)
    };
    assert_eq!(history(&["rev-parse", "HEAD"]), repo.git(&["rev-parse", "main"]));
    assert_eq!(history(&["rev-list", "--count", "HEAD"]), "1");
    assert_eq!(
        std::fs::read_to_string(workspace.root().join("src/new.txt")).expect("refreshed file"),
        "new\n"
    );
}
