//! The gate against hostile trees built for real: symlinks of every kind, FIFOs, hard links,
//! case variants of `.git`. Each case names the attack it reproduces.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A work tree with `src/lib.rs`, a `.git` directory (as a plain clone would have) and a
/// sibling `outside/` directory holding a secret.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("repo");
        let outside = dir.path().join("outside");
        for folder in [root.join("src"), root.join(".git"), outside.clone()] {
            std::fs::create_dir_all(folder).expect("mkdir");
        }
        std::fs::write(root.join("src/lib.rs"), "pub fn one() {}\n").expect("write");
        std::fs::write(root.join(".git/config"), "[core]\n").expect("write");
        std::fs::write(outside.join("secret"), "TOP SECRET\n").expect("write");
        Self {
            _dir: dir,
            root,
            outside,
        }
    }

    fn tree(&self) -> WorkTree {
        WorkTree::open(&self.root, &[".github/workflows/**".into(), ".upkeep.toml".into()]).expect("opens")
    }

    fn link(&self, link: &str, target: impl AsRef<Path>) {
        let path = self.root.join(link);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        symlink(target, path).expect("symlink");
    }
}

#[test]
fn lexical_escapes_are_refused_before_anything_is_opened() {
    let fixture = Fixture::new();
    let tree = fixture.tree();
    for (requested, expected) in [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("../outside/secret", "`..`"),
        ("src/../../outside/secret", "`..`"),
        (".git/config", "git directory"),
        (".GIT/config", "git directory"),
        ("src/.Git/x", "git directory"),
        ("a\0b", "NUL"),
    ] {
        let error = tree.read(requested, 1024).expect_err(requested).to_string();
        assert!(error.contains(expected), "{requested:?}: {error}");
        assert!(tree.write(requested, b"x").is_err(), "{requested:?} written");
    }
    assert!(!fixture.outside.join("x").exists());
}

#[test]
fn symlinks_inside_the_tree_work_as_users_expect() -> TestResult {
    let fixture = Fixture::new();
    fixture.link("lib-link.rs", "src/lib.rs");
    fixture.link("source", "src");
    fixture.link("nested/up", "../src/lib.rs");
    let tree = fixture.tree();
    let (path, read) = tree.read("lib-link.rs", 1024)?;
    assert_eq!(path.display(), "src/lib.rs");
    assert_eq!(read.bytes, b"pub fn one() {}\n");
    assert_eq!(tree.read("source/lib.rs", 1024)?.0.display(), "src/lib.rs");
    assert_eq!(tree.read("nested/up", 1024)?.0.display(), "src/lib.rs");
    // Writing through an in-tree link updates its target and keeps the link.
    tree.write("lib-link.rs", b"pub fn two() {}\n")?;
    assert_eq!(
        std::fs::read_to_string(fixture.root.join("src/lib.rs"))?,
        "pub fn two() {}\n"
    );
    assert!(std::fs::symlink_metadata(fixture.root.join("lib-link.rs"))?.is_symlink());
    Ok(())
}

/// A committed dangling symlink once let `write_file` create a file anywhere the user could.
#[test]
fn a_dangling_symlink_out_of_the_tree_is_never_written_through() {
    let fixture = Fixture::new();
    let target = fixture.outside.join("created-by-upkeep");
    fixture.link("docs/notes.md", &target);
    fixture.link("relative-out", "../outside/created-relative");
    let tree = fixture.tree();
    for requested in ["docs/notes.md", "relative-out"] {
        let error = tree.write(requested, b"pwned").expect_err(requested).to_string();
        assert!(error.contains("points outside the repository"), "{error}");
    }
    assert!(!target.exists());
    assert!(!fixture.outside.join("created-relative").exists());
}

#[test]
fn links_to_proc_dev_and_outside_files_are_never_read() {
    let fixture = Fixture::new();
    fixture.link("environ", "/proc/self/environ");
    fixture.link("zero", "/dev/zero");
    fixture.link("stdin", "/dev/stdin");
    fixture.link("secret", fixture.outside.join("secret"));
    fixture.link("chain1", "chain2");
    fixture.link("chain2", "../outside/secret");
    fixture.link("dir-out", &fixture.outside);
    let tree = fixture.tree();
    for requested in ["environ", "zero", "stdin", "secret", "chain1", "dir-out/secret"] {
        let error = tree.read(requested, 1024).expect_err(requested).to_string();
        assert!(error.contains("outside the repository"), "{requested}: {error}");
    }
}

#[test]
fn links_into_the_git_directory_are_refused_in_any_case() {
    let fixture = Fixture::new();
    fixture.link("gitlink", ".git");
    fixture.link("config-link", ".git/config");
    fixture.link("upper", ".GIT");
    let tree = fixture.tree();
    for requested in ["gitlink/config", "config-link", "upper/config"] {
        let error = tree.read(requested, 1024).expect_err(requested).to_string();
        assert!(error.contains("git directory"), "{requested}: {error}");
        assert!(
            tree.write(requested, b"[remote \"origin\"]\n\turl = http://attacker\n")
                .is_err()
        );
    }
    assert_eq!(
        std::fs::read_to_string(fixture.root.join(".git/config")).unwrap_or_default(),
        "[core]\n"
    );
}

#[test]
fn symlink_loops_end_with_a_clear_error() {
    let fixture = Fixture::new();
    fixture.link("loop-a", "loop-b");
    fixture.link("loop-b", "loop-a");
    let error = fixture.tree().read("loop-a", 10).expect_err("loops").to_string();
    assert!(error.contains("more than 40 symlinks"), "{error}");
}

/// A task file that is a FIFO once hung the run forever.
#[test]
fn a_fifo_is_refused_at_once_instead_of_blocking() -> TestResult {
    let fixture = Fixture::new();
    nix::unistd::mkfifo(
        &fixture.root.join("TODO.md"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )?;
    let started = Instant::now();
    let error = fixture.tree().read("TODO.md", 1024).expect_err("fifo").to_string();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(error.contains("FIFO"), "{error}");
    assert!(fixture.tree().write("TODO.md", b"x").is_err());
    Ok(())
}

#[test]
fn hard_links_are_not_read() -> TestResult {
    let fixture = Fixture::new();
    std::fs::hard_link(fixture.root.join("src/lib.rs"), fixture.root.join("twin.rs"))?;
    let error = fixture.tree().read("twin.rs", 1024).expect_err("hard link").to_string();
    assert!(error.contains("hard link"), "{error}");
    Ok(())
}

#[test]
fn the_read_cap_is_enforced_while_reading() -> TestResult {
    let fixture = Fixture::new();
    std::fs::write(fixture.root.join("big.txt"), vec![b'x'; 10_000])?;
    let (_, read) = fixture.tree().read("big.txt", 100)?;
    assert_eq!(read.bytes.len(), 100);
    assert!(read.truncated);
    assert_eq!(read.size, 10_000);
    Ok(())
}

/// A symlink once let a workflow be published despite `protected_paths`.
#[test]
fn protected_paths_are_refused_as_requested_and_as_resolved() {
    let fixture = Fixture::new();
    std::fs::create_dir_all(fixture.root.join(".github/workflows")).expect("mkdir");
    fixture.link("ci", ".github/workflows");
    fixture.link("ci-dangling", ".github/workflows/new.yml");
    let tree = fixture.tree();
    for requested in [
        ".github/workflows/ci.yml",
        ".GitHub/Workflows/ci.yml",
        "ci/evil.yml",
        "ci-dangling",
        ".upkeep.toml",
    ] {
        let error = tree.write(requested, b"on: push").expect_err(requested).to_string();
        assert!(error.contains("protected"), "{requested}: {error}");
    }
    assert!(!fixture.root.join(".github/workflows/evil.yml").exists());
    assert!(!fixture.root.join(".github/workflows/new.yml").exists());
}

#[test]
fn writes_replace_atomically_and_keep_permissions() -> TestResult {
    let fixture = Fixture::new();
    let script = fixture.root.join("run.sh");
    std::fs::write(&script, "#!/bin/sh\n")?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    let tree = fixture.tree();
    assert_eq!(tree.write("run.sh", b"#!/bin/sh\necho hi\n")?.1, Written::Replaced);
    assert_eq!(std::fs::metadata(&script)?.permissions().mode() & 0o777, 0o755);
    assert_eq!(tree.write("new/dir/file.txt", b"x")?.1, Written::Created);
    assert!(fixture.root.join("new/dir/file.txt").is_file());
    // No temporary file is left beside the target.
    let leftovers: Vec<_> = std::fs::read_dir(&fixture.root)?
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(".upkeep-write"))
        .collect();
    assert!(leftovers.is_empty());
    assert!(tree.write("src", b"x").is_err(), "a directory is not overwritten");
    Ok(())
}

#[test]
fn entries_leave_out_the_git_directory_in_any_case() -> TestResult {
    let fixture = Fixture::new();
    std::fs::create_dir_all(fixture.root.join(".GIT"))?;
    let names: Vec<String> = fixture
        .tree()
        .entries(&RepoPath::root())?
        .into_iter()
        .map(|(path, _)| path.display())
        .collect();
    assert_eq!(names, ["src"]);
    Ok(())
}
