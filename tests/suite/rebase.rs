//! Keeping bot pull requests mergeable (DESIGN section 14): a bot branch whose base moved on is
//! rebased onto it and pushed with a lease when only the bot committed to it; a human's commit
//! on it, or a conflict, leaves it untouched with a typed answer for the caller.

use std::path::{Path, PathBuf};
use std::process::Command;

use upkeep::repo::rebase::RebaseOutcome;
use upkeep::repo::{CloneRequest, GitAuth, Identity, Stop, Workspace};

use super::support::git_http::GitHttpServer;
use super::support::{TestRepo, bare_copy, git};

const FIRST: &str = "upkeep/1-tick-first";
const SECOND: &str = "upkeep/2-tick-third";
/// Items far enough apart that ticking two of them touches separate hunks.
const TODO: &str =
    "# TODO\n\n- [ ] first\n  keep the notes\n  short\n\n- [ ] second\n  one more\n  line\n\n- [ ] third\n";

/// A commit in `dir` made as `email` (author and committer).
fn commit_as(dir: &Path, email: &str, message: &str) {
    git(dir, &["add", "-A"]);
    let output = Command::new("git")
        .current_dir(dir)
        .args(["commit", "-q", "-m", message])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "someone")
        .env("GIT_AUTHOR_EMAIL", email)
        .env("GIT_COMMITTER_NAME", "someone")
        .env("GIT_COMMITTER_EMAIL", email)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

fn bot_email() -> String {
    Identity::default().email
}

/// A served repository whose `main` has TODO.md, with two bot branches each ticking one item.
struct Setup {
    _served: tempfile::TempDir,
    server: GitHttpServer,
    bare: PathBuf,
    work: TestRepo,
}

fn setup(second_ticks: &str) -> Setup {
    let work = TestRepo::new();
    work.write("TODO.md", TODO);
    work.commit("Add the TODO list");
    for (branch, item) in [(FIRST, "first"), (SECOND, second_ticks)] {
        work.git(&["checkout", "-q", "-b", branch, "main"]);
        let ticked = TODO.replace(&format!("- [ ] {item}\n"), &format!("- [x] {item}\n"));
        work.write("TODO.md", &ticked);
        commit_as(work.path(), &bot_email(), &format!("Tick {item} ({branch})"));
    }
    work.git(&["checkout", "-q", "main"]);
    let served = tempfile::tempdir().expect("tempdir");
    let bare = served.path().join("o/r.git");
    bare_copy(&work, &bare);
    let server = GitHttpServer::start(served.path(), None);
    Setup {
        _served: served,
        server,
        bare,
        work,
    }
}

impl Setup {
    /// Merges `branch` into `main` on the served repository, as a merged pull request does (the
    /// work repository holds the same branches as the served one).
    fn merge(&self, branch: &str) {
        let bare = self.bare.to_str().expect("utf-8");
        self.work
            .git(&["merge", "-q", "--no-ff", "-m", "Merge the pull request", branch]);
        self.work.git(&["push", "-q", bare, "main:main"]);
    }

    /// A fresh shallow clone of `main`, as a cycle starts.
    fn workspace(&self) -> Workspace {
        let request = CloneRequest::new(format!("{}/o/r.git", self.server.url()), false);
        Workspace::clone_blocking(&request, &Stop::never()).expect("clone")
    }

    fn rebase(&self, branch: &str) -> RebaseOutcome {
        self.workspace()
            .rebase_bot_branch_blocking(branch, &Identity::default(), &GitAuth::default())
            .expect("rebase ran")
    }
}

/// Two bot pull requests tick items of the same TODO.md; once the first is merged, the second
/// is rebased onto the new base, keeps its one commit by the bot, and merges cleanly.
#[test]
fn the_second_bot_branch_is_rebased_after_the_first_is_merged_and_merges_cleanly() {
    let setup = setup("third");
    setup.merge(FIRST);
    let before = git(&setup.bare, &["rev-parse", SECOND]);
    let outcome = setup.rebase(SECOND);
    let RebaseOutcome::Rebased { from, to, commits } = outcome else {
        panic!("expected a rebase, got {outcome:?}");
    };
    assert_eq!((from.to_string(), commits), (before, 1));
    let bare = &setup.bare;
    assert_eq!(git(bare, &["rev-parse", SECOND]), to.to_string(), "pushed");
    assert_eq!(
        git(bare, &["rev-parse", &format!("{SECOND}~1")]),
        git(bare, &["rev-parse", "main"])
    );
    assert_eq!(
        git(bare, &["log", "-1", "--format=%ae %s", SECOND]),
        format!("{} Tick third ({SECOND})", bot_email())
    );
    // Merging it now is a fast-forward with both items ticked.
    let todo = git(bare, &["show", &format!("{SECOND}:TODO.md")]);
    assert!(
        todo.contains("- [x] first") && todo.contains("- [x] third") && todo.contains("- [ ] second"),
        "{todo}"
    );
    assert_eq!(setup.rebase(SECOND), RebaseOutcome::UpToDate);
}

/// A maintainer's commit on a bot branch is never rewritten: the caller is told whose.
#[test]
fn a_bot_branch_with_a_human_commit_is_refused_and_left_untouched() {
    let setup = setup("third");
    setup.merge(FIRST);
    setup.work.git(&["checkout", "-q", SECOND]);
    setup.work.write("NOTES.md", "a maintainer's note\n");
    commit_as(setup.work.path(), "maintainer@example.com", "A maintainer's note");
    let bare = setup.bare.to_str().expect("utf-8");
    setup.work.git(&["push", "-q", bare, SECOND]);
    let before = git(&setup.bare, &["rev-parse", SECOND]);
    let outcome = setup.rebase(SECOND);
    let RebaseOutcome::HumanCommits { commits } = outcome else {
        panic!("expected a refusal, got {outcome:?}");
    };
    assert_eq!(commits.len(), 1);
    assert_eq!(commits[0].author, "someone <maintainer@example.com>");
    assert_eq!(git(&setup.bare, &["rev-parse", SECOND]), before, "left untouched");
}

/// Both branches tick the same item: the rebase cannot apply, says which commit and file, and
/// pushes nothing.
#[test]
fn a_conflicting_bot_branch_is_reported_and_left_untouched() {
    let setup = setup("first");
    setup.merge(FIRST);
    // Tick the same item differently on the base so the second branch no longer applies.
    setup.work.write(
        "TODO.md",
        &TODO.replace("- [ ] first\n", "- [x] first (done by hand)\n"),
    );
    setup.work.commit("Tick first by hand");
    let bare = setup.bare.to_str().expect("utf-8");
    setup.work.git(&["push", "-q", bare, "main:main"]);
    let before = git(&setup.bare, &["rev-parse", SECOND]);
    let outcome = setup.rebase(SECOND);
    let RebaseOutcome::Conflict { paths, summary, .. } = outcome else {
        panic!("expected a conflict, got {outcome:?}");
    };
    assert_eq!(paths, vec!["TODO.md".to_owned()]);
    assert_eq!(summary, format!("Tick first ({SECOND})"));
    assert_eq!(git(&setup.bare, &["rev-parse", SECOND]), before, "nothing pushed");
}

/// A branch whose commits the base already holds (its pull request was merged) is left as it
/// is: rebasing would push the base's tip over it.
#[test]
fn a_merged_bot_branch_is_up_to_date_and_not_pushed() {
    let setup = setup("third");
    setup.merge(FIRST);
    let before = git(&setup.bare, &["rev-parse", FIRST]);
    assert_eq!(setup.rebase(FIRST), RebaseOutcome::UpToDate);
    assert_eq!(git(&setup.bare, &["rev-parse", FIRST]), before);
}

/// A local clone (`--forge local`) is shallow at `--depth` by a `shallow` file over the source's
/// shared objects: fetching the whole branch must lift that cut, or the base's own history reads
/// as commits on the bot branch (a human's, here: the TODO list's author) and nothing is rebased.
#[test]
fn a_shallow_local_clone_rebases_only_the_bot_commits() {
    let setup = setup("third");
    // The base moves on by two commits after the branches were made, so the cut at depth 1
    // hides the merge base.
    setup.work.write("NOTES.md", "one\n");
    setup.work.commit("One note");
    setup.work.write("NOTES.md", "one\ntwo\n");
    setup.work.commit("Two notes");
    let request = CloneRequest::new(setup.work.path().to_str().expect("utf-8"), true);
    let workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("clone");
    let outcome = workspace
        .rebase_in_clone_blocking(SECOND, &Identity::default(), &GitAuth::default())
        .expect("rebase ran");
    let RebaseOutcome::Rebased { commits, to, .. } = outcome else {
        panic!("expected a rebase of the one bot commit, got {outcome:?}");
    };
    assert_eq!(commits, 1);
    let repo = git2::Repository::open(workspace.git_dir()).expect("open");
    let rebased = repo.find_commit(to).expect("commit");
    let main = git(setup.work.path(), &["rev-parse", "main"]);
    assert_eq!(rebased.parent_id(0).expect("parent").to_string(), main);
}

/// The base took one of the branch's commits on its own (a squash merge of an earlier pull
/// request holding it): that commit brings nothing on the new base and is dropped, as
/// `git rebase` drops it, instead of leaving an empty commit on the bot's branch.
#[test]
fn a_commit_the_base_already_holds_is_dropped_by_the_rebase() {
    let work = TestRepo::new();
    work.write("TODO.md", "- [ ] first\n- [ ] second\n");
    work.commit("Add the TODO list");
    work.git(&["checkout", "-q", "-b", SECOND, "main"]);
    work.write("TODO.md", "- [x] first\n- [ ] second\n");
    commit_as(work.path(), &bot_email(), "Tick first");
    work.write("TODO.md", "- [x] first\n- [x] second\n");
    commit_as(work.path(), &bot_email(), "Tick second");
    work.git(&["checkout", "-q", "main"]);
    work.write("TODO.md", "- [x] first\n- [ ] second\n");
    work.commit("Tick first (squashed)");
    let served = tempfile::tempdir().expect("tempdir");
    let bare = served.path().join("o/r.git");
    bare_copy(&work, &bare);
    let server = GitHttpServer::start(served.path(), None);
    let request = CloneRequest::new(format!("{}/o/r.git", server.url()), false);
    let workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("clone");
    let outcome = workspace
        .rebase_bot_branch_blocking(SECOND, &Identity::default(), &GitAuth::default())
        .expect("rebase ran");
    let RebaseOutcome::Rebased { commits, .. } = outcome else {
        panic!("expected a rebase, got {outcome:?}");
    };
    assert_eq!(commits, 1);
    assert_eq!(
        git(&bare, &["rev-parse", &format!("{SECOND}~1")]),
        git(&bare, &["rev-parse", "main"])
    );
    assert_eq!(git(&bare, &["log", "-1", "--format=%s", SECOND]), "Tick second");
}
