//! Shared test setup: git repositories made with the git CLI, scripted model replies, and the
//! `upkeep` binary run with an isolated environment.

#![allow(dead_code)]

pub mod agents;
pub mod conformance;
pub mod git_http;
pub mod github;
pub mod github_bodies;
pub mod github_conformance;
pub mod github_fleet;
// The same reading of a prompt's headings as the unit tests use.
#[path = "../../../src/agent/markdown_headings.rs"]
mod markdown_headings;
pub mod model_api;

pub use markdown_headings::sections_outside_fences;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// Runs git with no user or system configuration, so the machine's settings never leak in.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim_end().to_owned()
}

/// A bare copy of `origin` at `bare`, for a git server to serve.
pub fn bare_copy(origin: &TestRepo, bare: &Path) {
    let origin = origin.path().to_str().expect("utf-8 path");
    let bare = bare.to_str().expect("utf-8 path");
    git(Path::new("/"), &["clone", "-q", "--bare", origin, bare]);
}

/// A real repository on disk with a `main` branch.
pub struct TestRepo {
    dir: tempfile::TempDir,
}

impl TestRepo {
    /// A repository whose first commit holds `files`.
    pub fn with_files(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        git(dir.path(), &["init", "-q", "-b", "main"]);
        let repo = Self { dir };
        for (path, content) in files {
            repo.write(path, content);
        }
        repo.commit("Initial commit");
        repo
    }

    pub fn new() -> Self {
        Self::with_files(&[
            ("README.md", "# Sample\n\nHello.\n"),
            ("src/lib.rs", "pub fn one() -> u32 { 1 }\n"),
        ])
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, path: &str, content: &str) {
        let full = self.path().join(path);
        std::fs::create_dir_all(full.parent().expect("has parent")).expect("mkdir");
        std::fs::write(full, content).expect("write");
    }

    /// A symbolic link at `link` (relative to the repository) pointing at `target`, as git
    /// stores one: committed, it is recreated by every clone.
    pub fn symlink(&self, link: &str, target: impl AsRef<Path>) {
        let full = self.path().join(link);
        std::fs::create_dir_all(full.parent().expect("has parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, full).expect("symlink");
    }

    pub fn commit(&self, message: &str) {
        git(self.path(), &["add", "-A"]);
        git(self.path(), &["commit", "-q", "-m", message]);
    }

    pub fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }

    /// Local branch names under `upkeep/`.
    pub fn bot_branches(&self) -> Vec<String> {
        let out = self.git(&["for-each-ref", "--format=%(refname:short)", "refs/heads/upkeep/"]);
        out.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
    }

    pub fn description(&self, branch: &str) -> String {
        self.git(&["config", "--get", &format!("branch.{branch}.description")])
    }

    /// Every ref and its target: compare before and after to prove nothing changed.
    pub fn refs(&self) -> String {
        self.git(&["for-each-ref", "--format=%(refname) %(objectname)"])
    }
}

/// One scripted model reply: `{plan, tool_calls}` from (tool, arguments) pairs.
pub fn reply(plan: &str, calls: &[(&str, Value)]) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(tool, args)| json!({"tool_name": tool, "arguments": args}))
        .collect();
    json!({"plan": plan, "tool_calls": calls}).to_string()
}

/// A replay file holding the given raw replies, one per line.
pub struct Script {
    dir: tempfile::TempDir,
}

impl Script {
    pub fn new(replies: &[String]) -> Self {
        Self::from_lines(replies.iter().map(|content| json!({"content": content})))
    }

    /// Replies that carry token usage, as a trace records them.
    pub fn with_usage(replies: &[String], input_tokens: u64, output_tokens: u64) -> Self {
        Self::from_lines(replies.iter().map(|content| {
            json!({"type": "model_response", "content": content,
                   "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}})
        }))
    }

    /// A script of raw JSON lines (replies that name their agent, usage, trace events).
    pub fn from_lines(lines: impl Iterator<Item = Value>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let lines: Vec<String> = lines.map(|line| line.to_string()).collect();
        std::fs::write(dir.path().join("script.jsonl"), lines.join("\n") + "\n").expect("write script");
        Self { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("script.jsonl")
    }
}

/// The `finish` reply most scripts end with.
pub fn finish(status: &str) -> String {
    reply("done", &[("finish", json!({"status": status, "summary": "done"}))])
}

/// `upkeep` with an environment of its own: no UPKEEP_* or credential variables from the
/// machine, a private HOME and TMPDIR (so leftover temporary directories can be counted).
pub struct Upkeep {
    pub tmp: tempfile::TempDir,
    command: Command,
}

impl Upkeep {
    pub fn new() -> Self {
        Self::with_command(Command::new(assert_cmd::cargo::cargo_bin!("upkeep")))
    }

    /// upkeep started through `examples/restricted_machine.rs` with `restrictions` (`--user
    /// UID`, `--no-user-namespaces`, `--no-landlock`): the kernel refuses what such a machine
    /// refuses. With `--user`, the test's directories belong to that user.
    pub fn on_restricted_machine(restrictions: &[&str]) -> Self {
        let examples = std::env::current_exe()
            .ok()
            .and_then(|test| Some(test.parent()?.parent()?.join("examples/restricted_machine")))
            .filter(|path| path.is_file())
            .expect("examples/restricted_machine is built by `cargo test`");
        let mut command = Command::new(examples);
        command
            .args(restrictions)
            .arg("--")
            .arg(assert_cmd::cargo::cargo_bin!("upkeep"));
        let upkeep = Self::with_command(command);
        if let Some(uid) = user_of(restrictions) {
            give_to(upkeep.tmp.path(), uid);
        }
        upkeep
    }

    fn with_command(mut command: Command) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        command.env_clear();
        for name in ["PATH", "LANG", "USER"] {
            if let Ok(value) = std::env::var(name) {
                command.env(name, value);
            }
        }
        let home = tmp.path().join("home");
        let temp = tmp.path().join("tmp");
        std::fs::create_dir_all(&home).expect("mkdir");
        std::fs::create_dir_all(&temp).expect("mkdir");
        command
            .env("HOME", &home)
            .env("TMPDIR", &temp)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            // The reviewer asks the model before every push; scripts written for other features
            // leave it out, and the tests of the reviewer turn it back on (`with_review`).
            .env("UPKEEP_NO_REVIEW", "true");
        Self { tmp, command }
    }

    /// The reviewer on, as upkeep runs by default.
    pub fn with_review(mut self) -> Self {
        self.command.env_remove("UPKEEP_NO_REVIEW");
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command.args(args);
        self
    }

    pub fn current_dir(mut self, dir: &Path) -> Self {
        self.command.current_dir(dir);
        self
    }

    pub fn env(mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.command.env(name, value);
        self
    }

    /// The temporary directory upkeep sees as TMPDIR.
    pub fn temp_dir(&self) -> PathBuf {
        self.tmp.path().join("tmp")
    }

    pub fn run(mut self) -> RunOutput {
        let output = self
            .command
            .stdin(std::process::Stdio::null())
            .output()
            .expect("upkeep runs");
        let leftovers = self.leftover_temp_entries();
        RunOutput {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            leftover_temp_entries: leftovers,
        }
    }

    /// Entries left in upkeep's TMPDIR (its clones live there while it runs).
    pub fn leftover_temp_entries(&self) -> usize {
        std::fs::read_dir(self.temp_dir()).map(|d| d.count()).unwrap_or(0)
    }

    /// Starts upkeep without waiting, output captured, for tests that signal it.
    pub fn spawn(&mut self) -> std::process::Child {
        self.command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("upkeep starts")
    }

    /// Runs on a blocking thread, for async tests whose local servers must keep serving.
    pub async fn run_async(self) -> RunOutput {
        tokio::task::spawn_blocking(move || self.run())
            .await
            .expect("run finished")
    }
}

/// Sends `signal` to a spawned upkeep and waits for it to end (on a blocking thread, so local
/// servers keep serving meanwhile).
pub async fn signal_and_wait(child: std::process::Child, signal: nix::sys::signal::Signal) -> std::process::Output {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    nix::sys::signal::kill(pid, signal).expect("signal sent");
    tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("joined")
        .expect("waited")
}

#[derive(Debug)]
pub struct RunOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub leftover_temp_entries: usize,
}

impl RunOutput {
    /// The JSON Lines events on stdout (`--json`). Every line must be JSON.
    pub fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}")))
            .collect()
    }

    pub fn events_of(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|event| event["type"] == kind)
            .collect()
    }

    /// Standard output as one JSON document (`--json` of `upkeep prompt`, `upkeep tools`...).
    #[track_caller]
    pub fn stdout_json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).expect("standard output is JSON")
    }

    /// The `tool_result` events of one tool, in order.
    pub fn results_of(&self, tool: &str) -> Vec<Value> {
        self.events_of("tool_result")
            .into_iter()
            .filter(|event| event["tool"] == tool)
            .collect()
    }

    #[track_caller]
    pub fn assert_code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(expected),
            "exit code\n--- stderr:\n{}\n--- stdout:\n{}",
            self.stderr,
            self.stdout
        );
        self
    }
}

/// `upkeep run` on a local repository with a replay script, JSON events on stdout.
/// `upkeep prompt --json` on a local repository: the system prompt and first message exactly
/// as a model would get them.
pub fn local_prompt(repo: &TestRepo) -> RunOutput {
    Upkeep::new()
        .args(["prompt", "--json", "--repo"])
        .args([repo.path()])
        .run()
}

pub fn run_local(repo: &TestRepo, script: &Script, extra: &[&str]) -> RunOutput {
    run_replay(Upkeep::new(), repo, script, extra)
}

/// The same with an `Upkeep` prepared by the caller (extra environment).
pub fn run_replay(upkeep: Upkeep, repo: &TestRepo, script: &Script, extra: &[&str]) -> RunOutput {
    upkeep
        .args(["run", "--repo"])
        .args([repo.path()])
        .args(["--replay"])
        .args([script.path()])
        .args(["--json"])
        .args(extra)
        .run()
}

/// Whether this kernel enforces Landlock's filesystem rules (the sandbox's first layer): asks
/// the kernel to create (not apply) a ruleset, which restricts nothing.
#[cfg(target_os = "linux")]
pub fn landlock_available() -> bool {
    use landlock::{ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr};
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|ruleset| ruleset.create())
        .is_ok()
}

/// Landlock is Linux's: other systems never confine commands' writes.
#[cfg(not(target_os = "linux"))]
pub fn landlock_available() -> bool {
    false
}

/// The `--user UID` of a restricted machine's restrictions.
pub fn user_of(restrictions: &[&str]) -> Option<u32> {
    let at = restrictions.iter().position(|arg| *arg == "--user")?;
    restrictions.get(at + 1)?.parse().ok()
}

/// Hands `dir` and everything in it to user and group `uid`, for a test that runs upkeep as
/// that user.
pub fn give_to(dir: &Path, uid: u32) {
    std::os::unix::fs::lchown(dir, Some(uid), Some(uid)).expect("chown");
    if dir.is_dir() && !dir.is_symlink() {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            give_to(&entry.expect("entry").path(), uid);
        }
    }
}
