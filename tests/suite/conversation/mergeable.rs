//! Keeping the bot's pull requests mergeable (DESIGN section 14, "Mergeable"), end to end with
//! the real binary: on the local forge, a later run brings a bot branch that conflicts with a
//! merged one up to date by making its change again on the base; on GitHub, a pull request the
//! API says conflicts is rebased and pushed with a lease when only the bot committed to it, and
//! commented on (once) when a human did. A commit pushed meanwhile breaks the lease and is kept.

use serde_json::{Value, json};

use super::super::support::github::FakeGitHub;
use super::super::support::{RunOutput, Script, TestRepo, finish, git, local_prompt, reply, run_local};
use super::{BOT, BOT_EMAIL, push_commit};

const TODO: &str = "# TODO\n\n- [ ] first\n- [ ] second\n";

fn tick(first: bool, second: bool) -> String {
    let mark = |done: bool| if done { "x" } else { " " };
    format!("# TODO\n\n- [{}] first\n- [{}] second\n", mark(first), mark(second))
}

fn propose(ticked: &str, note: (&str, &str), title: &str) -> String {
    reply(
        "tick the item",
        &[
            ("write_file", json!({"path": "TODO.md", "content": ticked})),
            ("write_file", json!({"path": note.0, "content": note.1})),
            ("create_pull_request", json!({"title": title, "body": "Ticks an item."})),
            ("finish", json!({"status": "completed", "summary": "done"})),
        ],
    )
}

fn outcome(out: &RunOutput) -> Value {
    out.events_of("run_finished")
        .first()
        .map(|e| e["outcome"].clone())
        .unwrap_or_default()
}

/// Whether `branch` merges into `main` without conflicts (`git merge-tree` exits 0).
fn merges_cleanly(repo: &std::path::Path, branch: &str) -> bool {
    std::process::Command::new("git")
        .current_dir(repo)
        .args(["merge-tree", "--write-tree", "main", branch])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs")
        .status
        .success()
}

/// A local repository where one continuous run opened two bot branches ticking adjacent lines
/// of TODO.md, and the operator then merged the first.
fn two_adjacent_ticks_first_merged() -> TestRepo {
    let repo = TestRepo::with_files(&[("README.md", "# Sample\n"), ("TODO.md", TODO)]);
    let script = Script::new(&[
        propose(&tick(true, false), ("FIRST.md", "first\n"), "Tick first"),
        propose(&tick(false, true), ("SECOND.md", "second\n"), "Tick second"),
        finish("no_tasks"),
    ]);
    run_local(&repo, &script, &["--continuous"]).assert_code(0);
    let mut branches = repo.bot_branches();
    branches.sort();
    assert_eq!(branches, ["upkeep/tick-first", "upkeep/tick-second"]);
    assert!(
        merges_cleanly(repo.path(), "upkeep/tick-second"),
        "not yet: main did not move"
    );
    repo.git(&["merge", "-q", "--no-ff", "-m", "Merge tick-first", "upkeep/tick-first"]);
    assert!(
        !merges_cleanly(repo.path(), "upkeep/tick-second"),
        "adjacent ticks conflict once the first is merged"
    );
    repo
}

/// The issue's own example: the second branch's one bot commit conflicts on the new base, so the
/// next run's first cycle makes its change again on the base's tip, replaces the branch (a
/// lease on its old tip), and records the try; the branch then merges cleanly and still holds
/// the bot's change.
#[test]
fn a_later_run_redoes_a_conflicting_bot_branch_on_the_new_base() {
    let repo = two_adjacent_ticks_first_merged();
    let old_tip = repo.git(&["rev-parse", "upkeep/tick-second"]);
    // What the model is told (`upkeep prompt` shows the first cycle's message, writing nothing):
    // the title, the earlier change and the conflicting path.
    let prompt = local_prompt(&repo);
    prompt.assert_code(0);
    let message = prompt.stdout_json()["first_message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("# Your task: make your change again on the current base")
            && message.contains("\"Tick second\"")
            && message.contains("+- [x] second")
            && message.contains("`TODO.md`"),
        "{message}"
    );
    assert_eq!(
        repo.git(&["rev-parse", "upkeep/tick-second"]),
        old_tip,
        "the prompt wrote nothing"
    );
    let script = Script::new(&[
        propose(&tick(true, true), ("SECOND.md", "second\n"), "Tick second"),
        finish("no_tasks"),
    ]);
    let out = run_local(&repo, &script, &["--continuous"]);
    out.assert_code(0);

    let redo = out.events_of("redo");
    assert_eq!(redo.len(), 1, "{}", out.stdout);
    assert_eq!(
        (redo[0]["branch"].as_str(), redo[0]["from"].as_str(), &redo[0]["pr"]),
        (Some("upkeep/tick-second"), Some(old_tip.as_str()), &Value::Null)
    );
    assert!(
        merges_cleanly(repo.path(), "upkeep/tick-second"),
        "the branch merges now"
    );
    assert_eq!(
        repo.git(&["rev-parse", "upkeep/tick-second~1"]),
        repo.git(&["rev-parse", "main"]),
        "one commit on the base's tip"
    );
    assert_eq!(
        repo.git(&["show", "upkeep/tick-second:TODO.md"]),
        tick(true, true).trim_end()
    );
    assert_eq!(repo.git(&["show", "upkeep/tick-second:SECOND.md"]), "second");
    // The try is counted beside the branch, for the head commit it replaced.
    let notes = repo.git(&["config", "--get-all", "branch.upkeep/tick-second.upkeepnote"]);
    assert_eq!(notes, format!("<!-- upkeep:mergeable redo sha={old_tip} -->"));
}

/// A human's commit on the conflicting bot branch: nothing is rewritten, the person is told
/// once (the note is kept beside the branch), and the run goes on to other work.
#[test]
fn a_conflicting_bot_branch_with_a_human_commit_is_left_and_noted_once() {
    let repo = two_adjacent_ticks_first_merged();
    repo.git(&["checkout", "-q", "upkeep/tick-second"]);
    repo.write("SECOND.md", "second, by hand\n");
    repo.commit("A maintainer's touch");
    repo.git(&["checkout", "-q", "main"]);
    let tip = repo.git(&["rev-parse", "upkeep/tick-second"]);

    let out = run_local(&repo, &Script::new(&[finish("no_tasks")]), &[]);
    out.assert_code(0);
    assert_eq!(repo.git(&["rev-parse", "upkeep/tick-second"]), tip, "left untouched");
    assert!(out.events_of("redo").is_empty() && out.events_of("rebased").is_empty());
    assert!(
        out.stderr.contains("bot branch upkeep/tick-second needs a human")
            && out.stderr.contains("never rewrites a human's commits"),
        "{}",
        out.stderr
    );
    let notes = repo.git(&["config", "--get-all", "branch.upkeep/tick-second.upkeepnote"]);
    assert_eq!(notes, format!("<!-- upkeep:mergeable human-commits sha={tip} -->"));

    let again = run_local(&repo, &Script::new(&[finish("no_tasks")]), &[]);
    again.assert_code(0);
    assert!(!again.stderr.contains("needs a human"), "said once: {}", again.stderr);
}

/// The re-doing is tried once per head commit: a cycle that published nothing still counts it,
/// and the next run says once that upkeep stops, leaving the branch to a human.
#[test]
fn a_redo_that_published_nothing_is_not_tried_again_and_upkeep_says_it_stops() {
    let repo = two_adjacent_ticks_first_merged();
    let tip = repo.git(&["rev-parse", "upkeep/tick-second"]);
    let out = run_local(&repo, &Script::new(&[finish("completed")]), &[]);
    out.assert_code(0);
    assert_eq!(out.events_of("redo").len(), 1, "{}", out.stdout);
    let notes = |repo: &TestRepo| repo.git(&["config", "--get-all", "branch.upkeep/tick-second.upkeepnote"]);
    assert_eq!(notes(&repo), format!("<!-- upkeep:mergeable redo sha={tip} -->"));

    let out = run_local(&repo, &Script::new(&[finish("no_tasks")]), &[]);
    out.assert_code(0);
    assert!(out.events_of("redo").is_empty(), "not tried again: {}", out.stdout);
    assert!(
        out.stderr.contains("bot branch upkeep/tick-second needs a human")
            && out.stderr.contains("re-did the change once"),
        "{}",
        out.stderr
    );
    assert_eq!(
        notes(&repo),
        format!("<!-- upkeep:mergeable redo sha={tip} -->\n<!-- upkeep:mergeable gave-up sha={tip} -->")
    );
    assert_eq!(repo.git(&["rev-parse", "upkeep/tick-second"]), tip, "left untouched");
}

/// Commits everything in `repo` as the bot (author and committer).
fn commit_as_bot(repo: &TestRepo, message: &str) {
    repo.git(&["add", "-A"]);
    let email = upkeep::repo::Identity::default().email;
    let output = std::process::Command::new("git")
        .current_dir(repo.path())
        .args(["commit", "-q", "-m", message])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "upkeep")
        .env("GIT_AUTHOR_EMAIL", &email)
        .env("GIT_COMMITTER_NAME", "upkeep")
        .env("GIT_COMMITTER_EMAIL", &email)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// A bot branch whose first commit the operator squash-merged by hand: it conflicts, but its
/// commits rebase cleanly (the first drops out), so the run rebases it and writes it into the
/// repository with a lease, asking no model.
#[test]
fn a_local_bot_branch_that_rebases_cleanly_is_rebased_without_a_model() {
    let repo = TestRepo::with_files(&[("README.md", "# Sample\n"), ("TODO.md", TODO)]);
    repo.git(&["checkout", "-q", "-b", "upkeep/tick-both"]);
    repo.write("TODO.md", &tick(true, false));
    commit_as_bot(&repo, "Tick first");
    repo.write("TODO.md", &tick(true, true));
    commit_as_bot(&repo, "Tick second");
    repo.git(&["checkout", "-q", "main"]);
    repo.write("TODO.md", &tick(true, false));
    repo.commit("Tick first by hand");
    assert!(!merges_cleanly(repo.path(), "upkeep/tick-both"));
    let before = repo.git(&["rev-parse", "upkeep/tick-both"]);

    let out = run_local(&repo, &Script::new(&[finish("no_tasks")]), &[]);
    out.assert_code(0);
    assert_eq!(outcome(&out), "pull_request", "{}", out.stderr);
    let rebased = out.events_of("rebased");
    assert_eq!(rebased.len(), 1, "{}", out.stdout);
    assert_eq!(
        (&rebased[0]["pr"], rebased[0]["from"].as_str()),
        (&Value::Null, Some(before.as_str()))
    );
    assert_eq!(
        repo.git(&["rev-parse", "upkeep/tick-both~1"]),
        repo.git(&["rev-parse", "main"])
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", "upkeep/tick-both"]),
        "Tick second"
    );
    assert!(merges_cleanly(repo.path(), "upkeep/tick-both"));
}

const BRANCH: &str = "upkeep/7-greeting";

/// The bot's pull request #3 on `upkeep/7-greeting` (made by `email`), which GitHub computed no
/// longer merges (`mergeable: false`, `mergeable_state: "dirty"`) after main moved on.
async fn conflicting_pull_request(email: &str) -> FakeGitHub {
    let hub = FakeGitHub::start(BOT).await;
    push_commit(&hub, BRANCH, "GREETING.md", "hello\n", BOT_EMAIL);
    if email != BOT_EMAIL {
        push_commit(&hub, BRANCH, "NOTES.md", "a maintainer's note\n", email);
    }
    push_commit(&hub, "main", "README.md", "moved on\n", "maintainer@example.com");
    hub.add_pull(3, BRANCH, "Add a greeting", BOT, None);
    hub.set_pull_fields(3, json!({"mergeable": false, "mergeable_state": "dirty"}));
    hub
}

/// `upkeep run --pr 3` with a model that would only say there is nothing to do: what a run
/// does about a conflict needs no model.
async fn run_pull_request_3(hub: &FakeGitHub) -> RunOutput {
    hub.upkeep(&["--pr", "3", "--replay"])
        .args([Script::new(&[finish("no_tasks")]).path()])
        .run_async()
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conflicting_bot_pull_request_is_rebased_and_pushed_with_a_lease() {
    let hub = conflicting_pull_request(BOT_EMAIL).await;
    let before = git(hub.bare(), &["rev-parse", BRANCH]);
    let out = run_pull_request_3(&hub).await;
    out.assert_code(0);
    assert_eq!(outcome(&out), "pull_request", "{}", out.stderr);
    let after = git(hub.bare(), &["rev-parse", BRANCH]);
    assert_ne!(after, before);
    assert_eq!(
        git(hub.bare(), &["rev-parse", &format!("{BRANCH}~1")]),
        git(hub.bare(), &["rev-parse", "main"]),
        "rebased onto main's tip"
    );
    assert_eq!(git(hub.bare(), &["show", &format!("{BRANCH}:GREETING.md")]), "hello");
    let rebased = out.events_of("rebased");
    assert_eq!(rebased.len(), 1);
    assert_eq!(
        (
            rebased[0]["pr"].as_u64(),
            rebased[0]["from"].as_str(),
            rebased[0]["to"].as_str()
        ),
        (Some(3), Some(before.as_str()), Some(after.as_str()))
    );
    // The pull request was updated, as the outcome says: the run reports it like any other.
    let updated = out.events_of("pull_request");
    assert_eq!(updated.len(), 1, "{updated:?}");
    assert_eq!(
        (updated[0]["number"].as_u64(), updated[0]["updated"].as_bool()),
        (Some(3), Some(true))
    );
    assert!(
        updated[0]["url"].as_str().is_some_and(|url| url.ends_with("/pull/3")),
        "{updated:?}"
    );
    let comments = hub.bot_comments(3);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert!(
        comments[0].contains("rebased this pull request onto its base"),
        "{}",
        comments[0]
    );
    hub.assert_conformant();
}

/// The server refuses the rebased branch (a hook here; a lease broken by a push meanwhile or a
/// branch protection the same way): the run says it failed, exit 1, rather than ending green
/// with nothing pushed.
#[tokio::test(flavor = "multi_thread")]
async fn a_rebase_the_server_refuses_ends_the_run_as_an_error() {
    let hub = conflicting_pull_request(BOT_EMAIL).await;
    let before = git(hub.bare(), &["rev-parse", BRANCH]);
    let hook = hub.bare().join("hooks").join("pre-receive");
    std::fs::create_dir_all(hook.parent().expect("hooks dir")).expect("hooks dir");
    std::fs::write(&hook, "#!/bin/sh\necho 'protected branch' >&2\nexit 1\n").expect("hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let out = run_pull_request_3(&hub).await;
    out.assert_code(1);
    assert_eq!(outcome(&out), "error", "{}", out.stderr);
    assert!(out.stderr.contains("not pushed"), "{}", out.stderr);
    assert_eq!(git(hub.bare(), &["rev-parse", BRANCH]), before, "nothing replaced");
    assert!(out.events_of("rebased").is_empty());
    assert!(hub.bot_comments(3).is_empty(), "no comment claims a rebase");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conflicting_pull_request_with_a_human_commit_gets_one_comment_and_no_push() {
    let hub = conflicting_pull_request("maintainer@example.com").await;
    let before = git(hub.bare(), &["rev-parse", BRANCH]);
    for _ in 0..2 {
        let out = run_pull_request_3(&hub).await;
        out.assert_code(0);
        assert_eq!(outcome(&out), "no_tasks", "{}", out.stderr);
    }
    assert_eq!(git(hub.bare(), &["rev-parse", BRANCH]), before, "no push");
    let comments = hub.bot_comments(3);
    assert_eq!(comments.len(), 1, "once per head commit: {comments:#?}");
    assert!(
        comments[0].starts_with(&format!("<!-- upkeep:mergeable human-commits sha={before} -->"))
            && comments[0].contains("never rewrites a human's commits")
            && comments[0].contains("maintainer@example.com"),
        "{}",
        comments[0]
    );
}

/// A commit pushed to the branch after the clone read it: the lease fails, nothing is replaced,
/// and the commit stays.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_pushed_meanwhile_breaks_the_lease_and_is_kept() {
    use secrecy::SecretString;
    use upkeep::config::GitHubSettings;
    use upkeep::forge::Forge;
    use upkeep::forge::github::GitHubForge;
    use upkeep::repo::rebase::RebaseOutcome;
    use upkeep::repo::{CloneRequest, GitAuth, Identity, Stop, Workspace};

    let hub = conflicting_pull_request(BOT_EMAIL).await;
    let auth = GitAuth {
        token: Some(SecretString::from(hub.token.clone())),
    };
    let mut request = CloneRequest::new(format!("{}/owner/name.git", hub.git.url()), false);
    request.auth = auth.clone();
    let workspace = tokio::task::spawn_blocking(move || Workspace::clone_blocking(&request, &Stop::never()))
        .await
        .expect("join")
        .expect("clone");
    let outcome = workspace
        .rebase_in_clone(BRANCH, &Identity::default(), &auth)
        .await
        .expect("rebase");
    let RebaseOutcome::Rebased { from, .. } = outcome else {
        panic!("expected a rebase, got {outcome:?}");
    };
    push_commit(&hub, BRANCH, "LATE.md", "pushed meanwhile\n", BOT_EMAIL);
    let late = git(hub.bare(), &["rev-parse", BRANCH]);

    let settings = GitHubSettings {
        server_url: hub.git.url(),
        api_url: hub.api.uri(),
        token: Some(SecretString::from(hub.token.clone())),
        bot_login: None,
    };
    let forge = GitHubForge::new(&settings, "owner", "name", false).expect("forge");
    let error = forge
        .replace_branch(&workspace, BRANCH, from)
        .await
        .expect_err("the lease is not held");
    assert!(error.to_string().contains("lease not held"), "{error}");
    assert_eq!(git(hub.bare(), &["rev-parse", BRANCH]), late, "the late commit is kept");
}

/// `mergeable: null` is GitHub still computing: nothing is decided now.
#[tokio::test(flavor = "multi_thread")]
async fn a_pull_request_whose_mergeability_is_still_computed_is_left_for_later() {
    let hub = conflicting_pull_request(BOT_EMAIL).await;
    hub.set_pull_fields(3, json!({"mergeable": null, "mergeable_state": "unknown"}));
    let before = git(hub.bare(), &["rev-parse", BRANCH]);
    let out = run_pull_request_3(&hub).await;
    out.assert_code(0);
    assert_eq!(git(hub.bare(), &["rev-parse", BRANCH]), before, "no push");
    assert!(out.events_of("rebased").is_empty());
    assert!(hub.bot_comments(3).is_empty());
}

/// GitHub's side of the example: the bot's one commit ticks the line next to the one
/// main ticked, so it does not apply on main; `--pr 3` makes the change again on main's tip,
/// replaces the branch with a lease and records the try in its comment.
#[tokio::test(flavor = "multi_thread")]
async fn a_conflicting_bot_pull_request_is_redone_on_the_base_and_the_try_recorded() {
    let hub = FakeGitHub::start(BOT).await;
    push_commit(&hub, "main", "TODO.md", TODO, "maintainer@example.com");
    push_commit(&hub, BRANCH, "TODO.md", &tick(false, true), BOT_EMAIL);
    push_commit(&hub, "main", "TODO.md", &tick(true, false), "maintainer@example.com");
    hub.add_pull(3, BRANCH, "Tick second", BOT, None);
    hub.set_pull_fields(3, json!({"mergeable": false, "mergeable_state": "dirty"}));
    let before = git(hub.bare(), &["rev-parse", BRANCH]);
    let script = Script::new(&[propose(&tick(true, true), ("SECOND.md", "second\n"), "Tick second")]);
    let out = hub
        .upkeep(&["--pr", "3", "--replay"])
        .args([script.path()])
        .run_async()
        .await;
    out.assert_code(0);
    assert_eq!(outcome(&out), "pull_request", "{}", out.stderr);
    assert_eq!(out.events_of("redo").len(), 1);
    assert_eq!(
        git(hub.bare(), &["rev-parse", &format!("{BRANCH}~1")]),
        git(hub.bare(), &["rev-parse", "main"]),
        "one commit on main's tip"
    );
    assert_eq!(
        git(hub.bare(), &["show", &format!("{BRANCH}:TODO.md")]),
        tick(true, true).trim_end()
    );
    let comments = hub.bot_comments(3);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert!(
        comments[0].starts_with(&format!("<!-- upkeep:mergeable redo sha={before} -->\n")),
        "{}",
        comments[0]
    );
    hub.assert_conformant();
}
