//! Refreshing a workspace in place (continuous mode from cycle 2 on) must leave exactly what the
//! remote's base branch has: the new tip's files and nothing else on disk, no bot branch, HEAD on
//! the base at the tip, an empty scratch directory. Checked against a local repository and
//! against a shallow clone over smart HTTP.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;
use upkeep::repo::{CloneRequest, GitAuth, Identity, Stop, Workspace, WorkspaceError};

use serde_json::json;

use super::support::git_http::GitHttpServer;
use super::support::{Script, TestRepo, bare_copy, git, reply, run_local};

fn clone_local(origin: &TestRepo) -> Workspace {
    let request = CloneRequest::new(origin.path().display().to_string(), true);
    Workspace::clone_blocking(&request, &Stop::never()).expect("clone")
}

/// git on the workspace's history, as a command sees it: the git directory is not in the work
/// tree, so it is named explicitly.
fn wgit(workspace: &Workspace, args: &[&str]) -> String {
    let git_dir = workspace.git_dir().to_str().expect("utf-8 path");
    let work_tree = workspace.root().to_str().expect("utf-8 path");
    let mut full = vec!["--git-dir", git_dir, "--work-tree", work_tree];
    full.extend_from_slice(args);
    git(workspace.root(), &full)
}

/// Every file, symlink and directory under `root`, relative. There is no `.git` in a work tree.
fn on_disk(root: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    fn walk(root: &Path, dir: &Path, files: &mut BTreeSet<String>, dirs: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let entry = entry.expect("entry");
            let path = entry.path();
            let relative = path.strip_prefix(root).expect("inside").to_string_lossy().into_owned();
            assert_ne!(relative, ".git", "the work tree has no .git entry");
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                dirs.insert(relative);
                walk(root, &path, files, dirs);
            } else {
                files.insert(relative);
            }
        }
    }
    let (mut files, mut dirs) = (BTreeSet::new(), BTreeSet::new());
    walk(root, root, &mut files, &mut dirs);
    (files, dirs)
}

/// Asserts that the workspace holds exactly `tip` of `origin` (a git directory or work tree):
/// the same files with the same bytes, no other file or directory, HEAD on `main` at the tip,
/// no local branch but `main`, nothing in scratch, a clean status even counting ignored files.
#[track_caller]
fn assert_exactly(workspace: &Workspace, origin: &Path, tip: &str) {
    let root = workspace.root();
    let tracked: BTreeSet<String> = git(origin, &["ls-tree", "-r", "--name-only", tip])
        .lines()
        .map(str::to_owned)
        .collect();
    let (files, dirs) = on_disk(root);
    assert_eq!(files, tracked, "files on disk are exactly the tip's");
    for file in &tracked {
        let expected = std::process::Command::new("git")
            .current_dir(origin)
            .args(["cat-file", "blob", &format!("{tip}:{file}")])
            .output()
            .expect("git cat-file");
        let actual = std::fs::read(root.join(file)).expect("read");
        assert_eq!(actual, expected.stdout, "content of {file}");
    }
    for dir in &dirs {
        assert!(
            tracked.iter().any(|file| file.starts_with(&format!("{dir}/"))),
            "directory {dir} holds no tracked file: a leftover"
        );
    }
    assert_eq!(wgit(workspace, &["rev-parse", "HEAD"]), tip, "HEAD at the new tip");
    assert_eq!(
        wgit(workspace, &["symbolic-ref", "HEAD"]),
        "refs/heads/main",
        "HEAD on the base branch"
    );
    assert_eq!(workspace.current_branch_blocking().expect("branch"), "main");
    assert_eq!(workspace.base_commit().to_string(), tip, "base commit reset");
    assert_eq!(
        wgit(workspace, &["for-each-ref", "--format=%(refname)", "refs/heads/"]),
        "refs/heads/main"
    );
    assert_eq!(
        wgit(
            workspace,
            &[
                "for-each-ref",
                "--format=%(refname)",
                "refs/stash",
                "refs/remotes/origin/upkeep/"
            ]
        ),
        ""
    );
    assert_eq!(
        wgit(
            workspace,
            &["status", "--porcelain", "--ignored", "--untracked-files=all"]
        ),
        "",
        "clean status"
    );
    assert!(!workspace.has_changes_blocking().expect("status"));
    assert_eq!(
        std::fs::read_dir(workspace.scratch()).expect("scratch").count(),
        0,
        "scratch emptied"
    );
    assert!(workspace.diff_from_base_blocking().expect("diff").is_empty());
}

/// Everything a cycle can leave behind: edits, deletions, untracked and ignored files and folders,
/// an empty folder, a nested repository, a committed bot branch with more edits after it, a
/// stash, and files in scratch.
fn dirty(workspace: &Workspace) {
    let root = workspace.root();
    let write = |path: &str, content: &str| {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, content).expect("write");
    };
    write("README.md", "edited by the bot\n");
    write("bot/new.rs", "committed on the bot branch\n");
    std::fs::remove_file(root.join("src/old.rs")).expect("delete a tracked file");
    workspace
        .commit_blocking(
            "upkeep/cycle-one",
            "cycle one",
            &Identity::default(),
            &upkeep::secrets::Redactor::default(),
        )
        .expect("commit on the bot branch");
    write("src/lib.rs", "modified after the commit\n");
    write("notes.txt", "untracked\n");
    write("scratchpad/deep/a.txt", "untracked folder\n");
    write("debug.log", "ignored file\n");
    write("target/debug/build.bin", "ignored folder\n");
    write("src/nested.log", "ignored file in a tracked folder\n");
    write("generated/junk.bin", "ignored file next to a tracked one\n");
    write("generated/deeper/junk.bin", "ignored folder next to a tracked file\n");
    std::fs::create_dir_all(root.join("empty/inner")).expect("empty folder");
    std::fs::create_dir_all(root.join("vendored")).expect("mkdir");
    git(&root.join("vendored"), &["init", "-q"]);
    write("vendored/file.txt", "inside a nested repository\n");
    write("docs/stash-me.md", "x\n");
    wgit(workspace, &["add", "docs/stash-me.md"]);
    wgit(workspace, &["stash", "-q"]);
    std::fs::write(workspace.scratch().join("tmpfile"), "scratch").expect("scratch file");
    std::fs::create_dir_all(workspace.scratch().join("cache/x")).expect("scratch folder");
    assert!(workspace.has_changes_blocking().expect("status"));
}

/// A repository with a `.gitignore`, and a tracked file inside an ignored folder (force-added),
/// which a refresh must keep while it removes the ignored files next to it.
fn origin_repo() -> TestRepo {
    let repo = TestRepo::with_files(&[
        (".gitignore", "target/\n*.log\ngenerated/\n"),
        ("README.md", "# Sample\n"),
        ("src/lib.rs", "pub fn one() -> u32 { 1 }\n"),
        ("src/old.rs", "// removed by the bot\n"),
        ("docs/guide.md", "guide\n"),
    ]);
    repo.write("generated/keep.txt", "tracked although ignored\n");
    repo.git(&["add", "-f", "generated/keep.txt"]);
    repo.git(&["commit", "-q", "-m", "a tracked file in an ignored folder"]);
    repo
}

#[test]
fn refresh_leaves_exactly_the_remotes_new_tip_and_nothing_else() {
    let origin = origin_repo();
    let mut workspace = clone_local(&origin);
    let first_base = workspace.base_commit();
    dirty(&workspace);

    // The remote moves on: an edit, a new file in a new folder, a deletion.
    origin.write("README.md", "# Sample\n\nMerged upstream.\n");
    origin.write("added/upstream.txt", "new upstream\n");
    origin.git(&["rm", "-q", "docs/guide.md"]);
    origin.commit("upstream work");
    let tip = origin.git(&["rev-parse", "main"]);
    assert_ne!(tip, first_base.to_string());

    workspace
        .refresh_blocking(&GitAuth::default(), &Stop::never())
        .expect("refresh");
    assert_exactly(&workspace, origin.path(), &tip);

    // The remote did not move: nothing to download, and the clone is cleaned all the same.
    dirty(&workspace);
    workspace
        .refresh_blocking(&GitAuth::default(), &Stop::never())
        .expect("refresh again");
    assert_exactly(&workspace, origin.path(), &tip);
    // A second cycle in the same workspace behaves like the first: it can commit and diff.
    std::fs::write(workspace.root().join("two.txt"), "2\n").expect("write");
    workspace
        .commit_blocking(
            "upkeep/cycle-two",
            "cycle two",
            &Identity::default(),
            &upkeep::secrets::Redactor::default(),
        )
        .expect("commit");
    let diff = workspace.diff_from_base_blocking().expect("diff");
    assert!(diff.contains("+2") && !diff.contains("bot/new.rs"), "{diff}");
}

#[test]
fn refresh_over_http_stays_shallow_and_matches_the_pushed_tip() {
    let served = tempfile::tempdir().expect("tempdir");
    let origin = origin_repo();
    let bare = served.path().join("o/r.git");
    bare_copy(&origin, &bare);
    let server = GitHttpServer::start(served.path(), None);
    let request = CloneRequest::new(format!("{}/o/r.git", server.url()), false);
    let mut workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("clone");
    assert_eq!(wgit(&workspace, &["rev-parse", "--is-shallow-repository"]), "true");
    dirty(&workspace);

    for n in 0..3 {
        origin.write(&format!("upstream/{n}.txt"), "more\n");
        origin.commit(&format!("upstream {n}"));
    }
    git(origin.path(), &["push", "-q", bare.to_str().expect("utf-8"), "main"]);
    let tip = origin.git(&["rev-parse", "main"]);

    workspace
        .refresh_blocking(&GitAuth::default(), &Stop::never())
        .expect("refresh");
    assert_exactly(&workspace, &bare, &tip);
    assert_eq!(
        wgit(&workspace, &["rev-parse", "--is-shallow-repository"]),
        "true",
        "still shallow"
    );
    assert_eq!(
        wgit(&workspace, &["rev-parse", "refs/remotes/origin/main"]),
        tip,
        "remote-tracking branch updated"
    );

    // Nothing new upstream: one look at the advertised refs, no pack negotiated.
    let before = server.requests().len();
    dirty(&workspace);
    workspace
        .refresh_blocking(&GitAuth::default(), &Stop::never())
        .expect("refresh");
    assert_exactly(&workspace, &bare, &tip);
    let methods: Vec<String> = server.requests()[before..].iter().map(|r| r.method.clone()).collect();
    assert_eq!(methods, ["GET"], "only the ref advertisement");
}

#[test]
fn a_base_branch_deleted_on_the_remote_is_an_error_not_a_stale_tip() {
    let origin = origin_repo();
    origin.git(&["branch", "develop"]);
    let request = CloneRequest {
        base: Some("develop".into()),
        ..CloneRequest::new(origin.path().display().to_string(), true)
    };
    let mut workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("clone");
    origin.git(&["branch", "-D", "develop"]);
    let error = workspace
        .refresh_blocking(&GitAuth::default(), &Stop::never())
        .expect_err("the base is gone");
    assert!(
        matches!(error, WorkspaceError::MissingBase { ref branch, .. } if branch == "develop"),
        "{error}"
    );
}

#[test]
fn an_interrupted_refresh_says_so() {
    let origin = origin_repo();
    let mut workspace = clone_local(&origin);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let error = workspace
        .refresh_blocking(&GitAuth::default(), &Stop::new(cancel, None))
        .expect_err("cancelled");
    assert!(
        matches!(error, WorkspaceError::Stopped(upkeep::repo::StopReason::Interrupted)),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_refresh_returns_the_workspace_and_an_error_drops_it() {
    let origin = origin_repo();
    let workspace = clone_local(&origin);
    let dir: PathBuf = workspace.root().parent().expect("temp dir").to_owned();
    let workspace = workspace
        .refresh(GitAuth::default(), Stop::never())
        .await
        .expect("refresh");
    assert!(dir.exists());
    std::fs::remove_dir_all(origin.path().join(".git")).expect("break the remote");
    let error = workspace
        .refresh(GitAuth::default(), Stop::never())
        .await
        .expect_err("the remote is gone");
    assert!(matches!(error, WorkspaceError::Fetch { .. }), "{error}");
    assert!(!dir.exists(), "a failed refresh removes the temporary directory");
}

/// The binary in continuous mode: cycle 2 works in the same directory as cycle 1 (refreshed, not
/// cloned again), and finds nothing of cycle 1 there: no untracked, ignored or scratch file, no
/// committed file of the bot's, no bot branch.
#[test]
fn continuous_mode_refreshes_the_same_clone_and_cycle_two_sees_no_leftovers() {
    let origin = origin_repo();
    let litter = "pwd; echo x > untracked.txt; mkdir -p target && echo y > target/ignored.bin; \
                  echo s > \"$TMPDIR/scratch.txt\"; git stash list >/dev/null";
    let look = "pwd; find . -path ./.git -prune -o -print | sort; echo scratch:; ls -A \"$TMPDIR\"; \
                echo branches:; git for-each-ref --format='%(refname)' refs/heads/";
    let script = Script::new(&[
        reply(
            "cycle one",
            &[
                ("run_shell_command", json!({"command": litter})),
                ("write_file", json!({"path": "one.txt", "content": "1\n"})),
                ("create_pull_request", json!({"title": "Add one", "body": "one"})),
                ("finish", json!({"status": "completed", "summary": "one"})),
            ],
        ),
        reply("cycle two", &[("run_shell_command", json!({"command": look}))]),
        reply("done", &[("finish", json!({"status": "no_tasks", "summary": "none"}))]),
    ]);
    let out = run_local(&origin, &script, &["--continuous", "--allow-dangerous-tools"]);
    out.assert_code(0);
    assert!(!out.stderr.contains("cloning afresh"), "{}", out.stderr);
    let outputs: Vec<String> = out
        .events_of("tool_result")
        .into_iter()
        .filter(|e| e["tool"] == "run_shell_command")
        .map(|e| e["output"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    let first_dir = outputs[0].lines().next().expect("pwd");
    let mut second = outputs[1].lines();
    assert_eq!(second.next(), Some(first_dir), "cycle two reuses cycle one's clone");
    // The tool appends the command's exit status; the rest is the listing.
    let listing: Vec<&str> = second.filter(|line| !line.starts_with("exit status")).collect();
    assert_eq!(
        listing,
        [
            ".",
            "./.gitignore",
            "./README.md",
            "./docs",
            "./docs/guide.md",
            "./generated",
            "./generated/keep.txt",
            "./src",
            "./src/lib.rs",
            "./src/old.rs",
            "scratch:",
            "branches:",
            "refs/heads/main",
        ],
        "{}",
        outputs[1]
    );
    assert_eq!(origin.bot_branches(), vec!["upkeep/add-one"]);
    assert_eq!(out.leftover_temp_entries, 0, "the kept clone is removed at the end");
}

/// The clone skips checkout filters only when none can apply: with `.gitattributes` asking for
/// CRLF, the files on disk get CRLF exactly as `git clone` writes them, in the first clone and
/// after a refresh that brings a new file.
#[test]
fn checkout_filters_still_apply_when_attributes_ask_for_them() {
    let origin = TestRepo::with_files(&[
        (".gitattributes", "*.txt text eol=crlf\n"),
        ("docs/a.txt", "one\ntwo\n"),
        ("plain.md", "one\ntwo\n"),
    ]);
    let mut workspace = clone_local(&origin);
    let read = |path: &str| std::fs::read(workspace.root().join(path)).expect("read");
    assert_eq!(read("docs/a.txt"), b"one\r\ntwo\r\n");
    assert_eq!(read("plain.md"), b"one\ntwo\n");
    assert!(!workspace.has_changes_blocking().expect("status"));

    origin.write("docs/b.txt", "three\n");
    origin.commit("another text file");
    workspace
        .refresh_blocking(&GitAuth::default(), &Stop::never())
        .expect("refresh");
    assert_eq!(
        std::fs::read(workspace.root().join("docs/b.txt")).expect("read"),
        b"three\r\n"
    );
    assert!(!workspace.has_changes_blocking().expect("status"));

    let without = clone_local(&TestRepo::with_files(&[("docs/a.txt", "one\ntwo\n")]));
    assert_eq!(
        std::fs::read(without.root().join("docs/a.txt")).expect("read"),
        b"one\ntwo\n"
    );
}

/// A kept clone never outlives the run: a question or a budget in cycle 2 (after a refresh)
/// ends the run with the temporary directory removed, as in cycle 1.
#[test]
fn a_question_or_a_budget_after_a_refresh_leaves_no_temporary_directory() {
    let first_cycle = reply(
        "cycle one",
        &[
            ("write_file", json!({"path": "one.txt", "content": "1\n"})),
            ("create_pull_request", json!({"title": "Add one", "body": "one"})),
            ("finish", json!({"status": "completed", "summary": "one"})),
        ],
    );
    let question = reply(
        "unsure",
        &[("ask_question", json!({"question_text": "Which one next?"}))],
    );
    let origin = origin_repo();
    let out = run_local(
        &origin,
        &Script::new(&[first_cycle.clone(), question]),
        &["--continuous"],
    );
    out.assert_code(3);
    assert_eq!(out.events_of("cycle_started").len(), 2);
    assert_eq!(out.leftover_temp_entries, 0, "removed after a question");

    let read = reply("read", &[("read_file", json!({"path": "README.md"}))]);
    let origin = origin_repo();
    let out = run_local(
        &origin,
        &Script::new(&[first_cycle, read.clone(), read]),
        &["--continuous", "--max-turns", "2"],
    );
    out.assert_code(4);
    assert_eq!(out.events_of("cycle_started").len(), 2);
    assert_eq!(out.leftover_temp_entries, 0, "removed after a budget");
}
