//! Git configuration, trees and sources built to turn git against the operator: a hostile user
//! and XDG configuration, `.git`-like paths committed to the tree, and a local source whose
//! `commondir` points elsewhere.

use std::path::Path;

use serde_json::json;
use upkeep::repo::{CloneRequest, GitAuth, Stop, Workspace};

use super::super::support::{TestRepo, git};
use super::{Hub, propose, result_of, write};

/// `~/.gitconfig`, `~/.config/git/config` and `~/.config/git/attributes` of upkeep's HOME, as
/// an attacker who can write the user's dotfiles (or a careless CI image) would leave them:
/// every fetch and push of the real server rewritten to the decoy, an extra header, an SSH
/// command, and attributes that would make a checkout write CRLF.
fn hostile_home(home: &Path, real: &str, decoy: &str, marker: &Path) {
    let rewrite = format!(
        "[url \"{decoy}/\"]\n\tinsteadOf = {real}/\n\tpushInsteadOf = {real}/\n\
         [http]\n\textraHeader = X-Hostile: 1\n\
         [core]\n\tsshCommand = touch {marker}\n\tautocrlf = true\n\tattributesFile = {attributes}\n",
        marker = marker.display(),
        attributes = home.join(".config/git/attributes").display(),
    );
    write(&home.join(".gitconfig"), &rewrite);
    write(&home.join(".config/git/config"), &rewrite);
    write(&home.join(".config/git/attributes"), "* text eol=crlf\n");
}

/// Fails on code that reads the user's git configuration: libgit2 would clone from and push to
/// the decoy (insteadOf), with the token, and check files out with CRLF.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_user_git_config_cannot_redirect_the_push_or_the_token() {
    let token = "tok-boundary-5c1e";
    let hub = Hub::start(Some(token)).await;
    // The decoy serves the same repository and takes any credentials: a redirect would work.
    let decoy = Hub::start(None).await;
    let upkeep = hub.upkeep(&hub.server.url(), &[]);
    let home = upkeep.tmp.path().join("home");
    let marker = upkeep.tmp.path().join("ssh-command-ran");
    hostile_home(&home, &hub.server.url(), &decoy.server.url(), &marker);

    let script = propose(&[("read_file", json!({"path": "README.md"}))]);
    let out = upkeep.args(["--replay"]).args([script.path()]).run_async().await;
    out.assert_code(0);

    assert_eq!(
        hub.branches(),
        "refs/heads/upkeep/add-notes",
        "pushed to the real server"
    );
    assert!(
        decoy.server.requests().is_empty(),
        "the decoy was contacted: {:#?}",
        decoy.server.requests()
    );
    assert_eq!(decoy.branches(), "");
    let requests = hub.server.requests();
    assert!(
        requests.iter().all(|r| r.header("x-hostile").is_none()),
        "{requests:#?}"
    );
    assert!(!marker.exists(), "no command from the config ran");
    let readme = result_of(&out, "read_file");
    assert!(!readme["output"].as_str().unwrap_or("\r").contains('\r'), "{readme}");
    let pushed = git(&hub.bare, &["cat-file", "blob", "upkeep/add-notes:NOTES.md"]);
    assert_eq!(pushed, "notes", "committed as written");
    assert_eq!(out.leftover_temp_entries, 0);
    assert_eq!(hub.pull_requests_opened().await, 1);
}

/// A repository whose commits hold `.git`, `.GIT`, `sub/.git` (a gitlink file) and a
/// `.git/config`, made with git's plumbing (porcelain refuses them).
fn hostile_tree_commit(repo: &TestRepo) {
    let blob = |content: &str| {
        let path = repo.path().join("blob.tmp");
        std::fs::write(&path, content).expect("write");
        let id = repo.git(&["hash-object", "-w", "blob.tmp"]);
        std::fs::remove_file(path).expect("rm");
        id
    };
    let mktree = |entries: &str| {
        let mut child = std::process::Command::new("git")
            .current_dir(repo.path())
            .args(["mktree"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("git mktree");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(entries.as_bytes())
            .expect("entries");
        let out = child.wait_with_output().expect("mktree output");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let config = blob("[core]\n\tbare = false\n[remote \"origin\"]\n\turl = http://127.0.0.1:9/evil.git\n");
    let gitlink = blob("gitdir: /tmp\n");
    let readme = blob("# hostile\n");
    let dot_git = mktree(&format!("100644 blob {config}\tconfig\n"));
    let sub = mktree(&format!("100644 blob {gitlink}\t.git\n100644 blob {readme}\tok.md\n"));
    let root = mktree(&format!(
        "040000 tree {dot_git}\t.GIT\n100644 blob {readme}\tREADME.md\n040000 tree {dot_git}\t.git\n040000 tree {sub}\tsub\n"
    ));
    let parent = repo.git(&["rev-parse", "HEAD"]);
    let commit = repo.git(&["commit-tree", &root, "-p", &parent, "-m", "hostile tree"]);
    repo.git(&["update-ref", "refs/heads/main", &commit]);
}

/// Fails on code that keeps the git directory at the work tree's `.git`.
#[test]
fn the_work_tree_has_no_git_entry_and_committed_git_paths_cannot_appear() {
    let origin = TestRepo::new();
    let request = CloneRequest::new(origin.path().display().to_string(), true);
    let mut workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("clone");
    let root = workspace.root().to_owned();
    assert!(
        std::fs::symlink_metadata(root.join(".git")).is_err(),
        "no .git entry of any kind after a clone"
    );
    assert!(
        !workspace.git_dir().starts_with(&root),
        "the git directory is outside the work tree"
    );
    let config_before = std::fs::read(workspace.git_dir().join("config")).expect("config");

    hostile_tree_commit(&origin);
    // A refresh onto the hostile tip either refuses it or writes none of its git paths.
    let refreshed = workspace.refresh_blocking(&GitAuth::default(), &Stop::never());
    for path in [".git", ".GIT", "sub/.git"] {
        assert!(
            std::fs::symlink_metadata(root.join(path)).is_err(),
            "{path} appeared ({refreshed:?})"
        );
    }
    assert_eq!(
        std::fs::read(workspace.git_dir().join("config")).expect("config"),
        config_before
    );

    // A fresh clone of the hostile tip: the same.
    let fresh = Workspace::clone_blocking(&request, &Stop::never());
    if let Ok(fresh) = &fresh {
        for path in [".git", ".GIT", "sub/.git"] {
            assert!(
                std::fs::symlink_metadata(fresh.root().join(path)).is_err(),
                "{path} appeared"
            );
        }
    }
}

/// The source of a local clone is untrusted too: a `commondir` file in its git directory would
/// make every write (the bot branch, its objects, its description) land in another repository.
/// Fails on code that writes the branch wherever libgit2 resolves the source to.
#[test]
fn a_local_source_whose_commondir_points_elsewhere_gets_no_writes() {
    let source = TestRepo::new();
    let elsewhere = TestRepo::new();
    let refs_before = elsewhere.refs();
    let config_before = std::fs::read_to_string(elsewhere.path().join(".git/config")).expect("config");
    std::fs::write(
        source.path().join(".git/commondir"),
        format!("{}\n", elsewhere.path().join(".git").display()),
    )
    .expect("write commondir");
    let out = super::super::support::run_local(&source, &propose(&[]), &[]);
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("common directory"), "{}", out.stderr);
    assert_eq!(
        elsewhere.refs(),
        refs_before,
        "nothing written into the other repository"
    );
    assert_eq!(
        std::fs::read_to_string(elsewhere.path().join(".git/config")).expect("config"),
        config_before
    );
    assert_eq!(out.leftover_temp_entries, 0);
}
