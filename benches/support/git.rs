//! git for the benchmarks: building their repositories, and the git side of each comparison,
//! run with no user or system configuration so the machine's settings neither help nor hurt
//! the floor upkeep is held to. Shared by every benchmark (included by `#[path]`).

#![allow(dead_code, reason = "each benchmark uses its own part")]

use std::path::Path;
use std::process::Command;

/// git with no user or system configuration, so the machine's settings do not skew the floor.
pub fn git_command(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com");
    command
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = git_command(dir).args(args).output().expect("run git");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim_end().to_owned()
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("benchmark paths are UTF-8")
}
