//! Going on from a bot branch the remote already has (a review follow-up): the cycle builds on
//! the branch as it is, and pushes only fast-forwards. When someone pushes to the branch while
//! the cycle runs, the cycle's commits are replayed on top of theirs; when the replay conflicts,
//! nothing is pushed and their commits stay.

use upkeep::repo::{CloneRequest, GitAuth, Identity, Stop, Workspace, WorkspaceError};
use upkeep::secrets::Redactor;

use super::support::git_http::GitHttpServer;
use super::support::{TestRepo, bare_copy, git};

const BRANCH: &str = "upkeep/7-greeting";

/// A served bare repository whose bot branch holds one commit, and a clone continuing it.
struct Setup {
    _served: tempfile::TempDir,
    _server: GitHttpServer,
    bare: std::path::PathBuf,
    workspace: Workspace,
}

fn setup() -> Setup {
    setup_with_base_change(None)
}

/// [`setup`], with the base branch moved on (`file` changed) after the bot branch left it.
fn setup_with_base_change(base_change: Option<(&str, &str)>) -> Setup {
    let served = tempfile::tempdir().expect("tempdir");
    let origin = TestRepo::new();
    origin.git(&["checkout", "-q", "-b", BRANCH]);
    origin.write("GREETING.md", "hello\n");
    origin.commit("Add a greeting");
    origin.git(&["checkout", "-q", "main"]);
    if let Some((file, content)) = base_change {
        origin.write(file, content);
        origin.commit("Move the base on");
    }
    let bare = served.path().join("o/r.git");
    bare_copy(&origin, &bare);
    let server = GitHttpServer::start(served.path(), None);
    let request = CloneRequest::new(format!("{}/o/r.git", server.url()), false);
    let workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("clone");
    workspace
        .continue_branch_blocking(BRANCH, &GitAuth::default())
        .expect("continue the branch");
    Setup {
        _served: served,
        _server: server,
        bare,
        workspace,
    }
}

/// Someone pushes `file` onto the branch of the bare repository.
fn someone_pushes(bare: &std::path::Path, file: &str, content: &str) {
    let work = tempfile::tempdir().expect("tempdir");
    git(
        work.path(),
        &["clone", "-q", "-b", BRANCH, bare.to_str().expect("utf-8"), "w"],
    );
    let dir = work.path().join("w");
    std::fs::write(dir.join(file), content).expect("write");
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "A maintainer's change"]);
    git(&dir, &["push", "-q", "origin", BRANCH]);
}

fn commit(workspace: &Workspace, file: &str, content: &str) {
    std::fs::write(workspace.root().join(file), content).expect("write");
    workspace
        .commit_blocking(BRANCH, "Address the review", &Identity::default(), &Redactor::default())
        .expect("commit");
}

#[test]
fn a_push_during_the_cycle_is_kept_and_the_cycles_commit_goes_on_top() {
    let setup = setup();
    let (bare, workspace) = (&setup.bare, &setup.workspace);
    commit(workspace, "GREETING.md", "hello, world\n");
    someone_pushes(bare, "HUMAN.md", "a maintainer's fix\n");
    let theirs = git(bare, &["rev-parse", BRANCH]);
    workspace
        .push_on_top_blocking(BRANCH, &GitAuth::default())
        .expect("pushed on top");
    assert_eq!(
        git(bare, &["rev-parse", &format!("{BRANCH}~1")]),
        theirs,
        "their commit kept"
    );
    assert_eq!(
        git(bare, &["show", &format!("{BRANCH}:HUMAN.md")]),
        "a maintainer's fix"
    );
    assert_eq!(git(bare, &["show", &format!("{BRANCH}:GREETING.md")]), "hello, world");
}

#[test]
fn a_conflicting_push_during_the_cycle_is_kept_and_nothing_is_pushed() {
    let setup = setup();
    let (bare, workspace) = (&setup.bare, &setup.workspace);
    commit(workspace, "GREETING.md", "hello, world\n");
    someone_pushes(bare, "GREETING.md", "hi there\n");
    let theirs = git(bare, &["rev-parse", BRANCH]);
    let error = workspace
        .push_on_top_blocking(BRANCH, &GitAuth::default())
        .expect_err("a conflicting replay is refused");
    assert!(matches!(error, WorkspaceError::PushRejected { .. }), "{error:?}");
    assert!(error.to_string().contains("conflicts"), "{error}");
    assert_eq!(
        git(bare, &["rev-parse", BRANCH]),
        theirs,
        "their commits stay as they are"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_review_diff_of_a_continued_branch_is_what_the_cycle_adds_never_the_base_reverted() {
    let setup = setup_with_base_change(Some(("README.md", "# Sample, rewritten on main\n")));
    std::fs::write(setup.workspace.root().join("GREETING.md"), "hello, world\n").expect("write");
    let diff = setup.workspace.proposed_diff(Some(BRANCH)).await.expect("diff");
    assert!(
        diff.contains("-hello\n+hello, world"),
        "the cycle's change on top of the branch: {diff}"
    );
    assert!(
        !diff.contains("README.md"),
        "the base's newer commit is not shown as reverted: {diff}"
    );
}
