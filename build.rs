//! Embeds the commit upkeep was built from, so `upkeep init` can pin upkeep's own action to it
//! (`uses: upkeep-bot/upkeep@<40-hex> # v0.1.0`): a release tag can be moved by whoever controls
//! the repository, a commit cannot (DESIGN section 8, "Workflows").
//!
//! Where the commit comes from, first found wins:
//! 1. `UPKEEP_RELEASE_COMMIT`, which the release workflow sets to the tagged commit it builds;
//! 2. `.cargo_vcs_info.json`, which `cargo package` writes into a published crate (the commit it
//!    was packaged from);
//! 3. `git rev-parse HEAD`, when the source is a git checkout whose top level is this package
//!    (not a package vendored inside another repository, whose HEAD is someone else's).
//!
//! With none of them the build embeds nothing, and `upkeep init` refuses to write a workflow
//! (exit 2) rather than write an unpinned or made-up reference. `UPKEEP_ACTION_COMMIT_SOURCE`
//! says which one it was (`release`, `crate`, `checkout` or `none`).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=UPKEEP_RELEASE_COMMIT");
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    let manifest_dir = Path::new(&manifest_dir);
    watch(&manifest_dir.join(".cargo_vcs_info.json"));

    let (commit, source) = if let Some(value) = std::env::var("UPKEEP_RELEASE_COMMIT").ok().filter(|v| !v.is_empty()) {
        if !is_commit(&value) {
            eprintln!("UPKEEP_RELEASE_COMMIT must be a full 40-hex commit, not {value:?}");
            std::process::exit(1);
        }
        (value, "release")
    } else if let Some(commit) = packaged_commit(manifest_dir) {
        (commit, "crate")
    } else if let Some(commit) = checkout_commit(manifest_dir) {
        (commit, "checkout")
    } else {
        (String::new(), "none")
    };
    println!("cargo:rustc-env=UPKEEP_ACTION_COMMIT={commit}");
    println!("cargo:rustc-env=UPKEEP_ACTION_COMMIT_SOURCE={source}");
}

/// Runs this script again when `path` changes. Only for a file that exists: cargo treats a
/// missing one as changed on every build.
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn is_commit(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `git.sha1` of the `.cargo_vcs_info.json` that `cargo package` writes.
fn packaged_commit(manifest_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(manifest_dir.join(".cargo_vcs_info.json")).ok()?;
    let after = text.split("\"sha1\"").nth(1)?;
    let value = after.split('"').nth(1)?;
    is_commit(value).then(|| value.to_owned())
}

/// HEAD of the checkout whose top level is `manifest_dir`; also tells cargo to run this script
/// again when HEAD moves.
fn checkout_commit(manifest_dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git")
            .arg("-C")
            .arg(manifest_dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let same = Path::new(&top).canonicalize().ok()? == manifest_dir.canonicalize().ok()?;
    if !same {
        return None;
    }
    // HEAD itself, the branch it names, and packed refs: any of them changes when HEAD moves.
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in &watched {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            watch(&manifest_dir.join(path));
        }
    }
    let head = git(&["rev-parse", "HEAD"])?;
    is_commit(&head).then_some(head)
}
