//! The model chooses content, not targets (DESIGN section 8b): a run for an issue questions and
//! closes that issue only, a backlog run only the issues its prompt offered, never a pull
//! request, never another repository, never a task whose pull request was closed; and text the
//! bot posts from model output notifies nobody. Each test builds the hostile run for real
//! against the stateful GitHub stand-in and checks that nothing reached the wrong target.

use regex::Regex;
use serde_json::{Value, json};

use super::super::support::github::{FakeGitHub, ReviewComment, issue_json};
use super::super::support::{RunOutput, Script, git, reply};

const BOT: &str = "upkeep-bot";

fn run(hub: &FakeGitHub, script: &Script, extra: &[&str]) -> RunOutput {
    hub.upkeep(extra).args(["--replay"]).args([script.path()]).run()
}

/// Issue `number`, labelled `upkeep` when `labelled`.
fn issue(number: u64, title: &str, labelled: bool) -> Value {
    let labels: &[&str] = if labelled { &["upkeep"] } else { &[] };
    issue_json(number, title, "Please do it.", labels, "2024-02-01T00:00:00Z")
}

/// A branch in the stand-in's repository, at its `main`.
fn branch_at_main(hub: &FakeGitHub, branch: &str) {
    git(hub.bare(), &["branch", branch, "main"]);
}

fn branches(hub: &FakeGitHub) -> String {
    git(hub.bare(), &["for-each-ref", "--format=%(refname:short) %(objectname)"])
}

fn propose(title: &str, body: &str, issue: Option<Value>) -> (&'static str, Value) {
    let mut arguments = json!({"title": title, "body": body});
    if let Some(issue) = issue {
        arguments["issue"] = issue;
    }
    ("create_pull_request", arguments)
}

fn write_notes() -> (&'static str, Value) {
    ("write_file", json!({"path": "NOTES.md", "content": "notes\n"}))
}

fn ask(question: &str, issue: Option<Value>) -> (&'static str, Value) {
    let mut arguments = json!({"question_text": question});
    if let Some(issue) = issue {
        arguments["issue"] = issue;
    }
    ("ask_question", arguments)
}

/// The failed results of `tool`, each of which must name what was allowed.
#[track_caller]
fn refusals(out: &RunOutput, tool: &str) -> Vec<String> {
    out.results_of(tool)
        .into_iter()
        .filter(|result| result["ok"] == false)
        .map(|result| result["output"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Every issue comment the bot posted, as (issue, body).
async fn posted_comments(hub: &FakeGitHub) -> Vec<(String, String)> {
    hub.requests()
        .await
        .into_iter()
        .filter(|(verb, path, _)| verb == "POST" && path.ends_with("/comments"))
        .map(|(_, path, body)| (path, body["body"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// A run for issue #7 whose model asks its question on #5, a pull request: before, the bot
/// posted it there (the model picked the target). Now the call fails back to the model naming
/// #7, nothing is posted on #5, and the model's next call asks on #7.
#[tokio::test(flavor = "multi_thread")]
async fn a_question_aimed_at_a_pull_request_is_not_posted() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue(7, "Rename the greeting", true));
    branch_at_main(&hub, "feature");
    hub.add_pull(5, "feature", "A contributor's feature", "alice", None);
    let script = Script::new(&[
        reply("ask there", &[ask("Should @alice review this?", Some(json!(5)))]),
        reply("ask here", &[ask("Keep the old name as an alias?", None)]),
    ]);
    let out = run(&hub, &script, &["--issue", "7"]);
    out.assert_code(3);
    let refused = refusals(&out, "ask_question");
    assert_eq!(refused.len(), 1, "{}", out.stdout);
    assert!(refused[0].contains("#5") && refused[0].contains("#7"), "{}", refused[0]);
    let posted = posted_comments(&hub).await;
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert!(posted[0].0.ends_with("/issues/7/comments"), "{posted:?}");
    assert!(hub.issue_comments(5).is_empty());
    hub.assert_conformant();
}

/// A run for issue #7 whose model opens its pull request "for" #8: before, the branch and the
/// `Closes #8` line went out, so merging it would close an issue nobody asked about. Now the
/// call fails back naming #7 and nothing is pushed or opened.
#[tokio::test(flavor = "multi_thread")]
async fn a_pull_request_for_another_issue_is_not_opened() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue(7, "Rename the greeting", true));
    hub.add_issue(issue(8, "Delete the tests", false));
    let before = branches(&hub);
    let script = Script::new(&[
        reply(
            "propose",
            &[write_notes(), propose("Add notes", "Adds notes.", Some(json!(8)))],
        ),
        reply("ask", &[ask("Which issue is this for?", None)]),
    ]);
    let out = run(&hub, &script, &["--issue", "7"]);
    out.assert_code(3);
    let refused = refusals(&out, "create_pull_request");
    assert_eq!(refused.len(), 1, "{}", out.stdout);
    assert!(refused[0].contains("#8") && refused[0].contains("#7"), "{}", refused[0]);
    assert!(hub.pulls().is_empty(), "{:?}", hub.pulls());
    assert_eq!(branches(&hub), before, "nothing was pushed");
    hub.assert_conformant();
}

/// A backlog run offers the labelled issue #7 only. Its model opens a pull request for #9 and
/// asks on #9 (an issue without the label, and so never offered), then on #0 and on a number
/// no issue could have, given as a string: before, each went out. Now each fails back listing
/// #7, and the one question that goes anywhere goes on #7.
#[tokio::test(flavor = "multi_thread")]
async fn a_backlog_run_aims_only_at_the_issues_it_offered() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue(7, "Rename the greeting", true));
    hub.add_issue(issue(9, "Rewrite everything", false));
    let before = branches(&hub);
    let script = Script::new(&[
        reply(
            "propose",
            &[write_notes(), propose("Add notes", "Adds notes.", Some(json!(9)))],
        ),
        reply("ask there", &[ask("Is this right?", Some(json!(9)))]),
        reply("ask nowhere", &[ask("Is this right?", Some(json!(0)))]),
        reply("ask far", &[ask("Is this right?", Some(json!("18446744073709551615")))]),
        reply("ask here", &[ask("Is this right?", Some(json!("#7")))]),
    ]);
    let out = run(&hub, &script, &[]);
    out.assert_code(3);
    let refused = refusals(&out, "create_pull_request");
    assert_eq!(refused.len(), 1, "{}", out.stdout);
    assert!(refused[0].contains("#7"), "{}", refused[0]);
    let refused = refusals(&out, "ask_question");
    assert_eq!(refused.len(), 3, "{}", out.stdout);
    assert!(refused.iter().all(|text| text.contains("#7")), "{refused:?}");
    assert!(hub.pulls().is_empty(), "{:?}", hub.pulls());
    assert_eq!(branches(&hub), before, "nothing was pushed");
    let posted = posted_comments(&hub).await;
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert!(posted[0].0.ends_with("/issues/7/comments"), "{posted:?}");
    hub.assert_conformant();
}

/// #7's bot pull request was closed without merging and #7 has not changed since, so the
/// backlog leaves it out and the prompt says why. A model that works it anyway used to push a
/// new branch and open the work again; now the call is refused with the reason and nothing is
/// pushed or opened.
#[tokio::test(flavor = "multi_thread")]
async fn a_closed_task_stays_closed_however_the_model_insists() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue(7, "Rename the greeting", true));
    branch_at_main(&hub, "upkeep/7-rename");
    hub.add_pull(
        12,
        "upkeep/7-rename",
        "Rename the greeting",
        BOT,
        Some("2024-03-01T00:00:00Z"),
    );
    let before = branches(&hub);
    let script = Script::new(&[
        reply(
            "insist",
            &[
                write_notes(),
                propose("Rename the greeting again", "Renames it.", Some(json!(7))),
            ],
        ),
        reply("ask", &[ask("Should I try again?", None)]),
    ]);
    let out = run(&hub, &script, &[]);
    out.assert_code(3);
    let refused = refusals(&out, "create_pull_request");
    assert_eq!(refused.len(), 1, "{}", out.stdout);
    assert!(
        refused[0].contains("#12") && refused[0].contains("closed without merging"),
        "{}",
        refused[0]
    );
    assert_eq!(hub.pulls().len(), 1, "{:?}", hub.pulls());
    assert_eq!(branches(&hub), before, "nothing was pushed");
    hub.assert_conformant();
}

/// References a closing keyword would act on: `#N`, `owner/repo#N`, `GH-N` and issue URLs, also
/// when an HTML comment (which renders as nothing) stands between.
fn closing_references(text: &str) -> Vec<String> {
    let text = Regex::new(r"(?s)<!--.*?-->").expect("regex").replace_all(text, "");
    let closing = Regex::new(
        r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?\s*((?:https?://\S+)|(?:[\w.-]+/[\w.-]+)?#\d+|gh-\d+)",
    )
    .expect("regex");
    closing.captures_iter(&text).map(|c| c[1].to_owned()).collect()
}

/// In a run for #7, the model writes closing keywords for other issues and other repositories
/// into the title and body. Before, they went into the pull request and its commit as written,
/// so merging it would have closed #8, an issue elsewhere, and whatever the title named. Now the
/// only closing reference the bot sends is its own `Closes #7`.
#[tokio::test(flavor = "multi_thread")]
async fn closing_keywords_close_only_the_runs_issue() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue(7, "Rename the greeting", true));
    let body = "Renames greet.\n\nFixes #8\nResolves other/repo#1, closes: GH-3\n\
                Fixes https://github.com/other/repo/issues/1\nFIXED owner/name#9\nCloses <!-- -->#10\nfixes #7";
    let script = Script::new(&[
        reply(
            "propose",
            &[write_notes(), propose("Rename greet, closes #9", body, None)],
        ),
        super::super::support::finish("completed"),
    ]);
    let out = run(&hub, &script, &["--issue", "7"]);
    out.assert_code(0);
    let pulls = hub.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let sent_body = pulls[0]["body"].as_str().unwrap_or_default();
    let sent_title = pulls[0]["title"].as_str().unwrap_or_default();
    assert_eq!(closing_references(sent_body), vec!["#7"], "{sent_body}");
    assert!(closing_references(sent_title).is_empty(), "{sent_title}");
    // The words stay for people to read.
    assert!(
        sent_body.contains("other/repo#1") && sent_body.contains("#8"),
        "{sent_body}"
    );
    let branch = pulls[0]["head"]["ref"].as_str().unwrap_or_default().to_owned();
    let message = git(hub.bare(), &["log", "-1", "--format=%B", &branch]);
    assert_eq!(closing_references(&message), vec!["#7"], "{message}");
    hub.assert_conformant();
}

/// `@name` GitHub would turn into a notification: `@` (or an entity for it) not preceded by a
/// letter, digit or underscore, followed by a letter or digit. Code spans and emphasis do not
/// protect: the text is checked as written, entities decoded.
fn live_mentions(text: &str) -> Vec<String> {
    let decoded = Regex::new(r"(?i)&(?:#0*64|#x0*40|commat);")
        .expect("regex")
        .replace_all(text, "@");
    let mention = Regex::new(r"(?:^|[^A-Za-z0-9_])(@[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9_-]+)?)").expect("regex");
    mention.captures_iter(&decoded).map(|c| c[1].to_owned()).collect()
}

/// The model's title, body and question carry `@user` and `@org/team` mentions, some dressed
/// up (an entity, emphasis, a code span, a backslash). Before, they were posted as written and
/// GitHub would notify every one of them. Now none is live, and an email address still reads
/// as one.
#[tokio::test(flavor = "multi_thread")]
async fn mentions_in_model_text_notify_nobody() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue(7, "Rename the greeting", true));
    let text = "cc @alice and @acme/security-team; also &#64;carol, &commat;dan, _@erin_, `@frank`, \\@grace.\n\
                Contact: maintainer@example.com";
    let script = Script::new(&[
        reply(
            "propose",
            &[write_notes(), propose("Rename greet for @alice", text, None)],
        ),
        reply("ask", &[ask(text, None)]),
    ]);
    let out = run(&hub, &script, &["--issue", "7"]);
    out.assert_code(3);
    let pulls = hub.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let posted = posted_comments(&hub).await;
    assert_eq!(posted.len(), 1, "{posted:?}");
    for sent in [
        pulls[0]["title"].as_str().unwrap_or_default(),
        pulls[0]["body"].as_str().unwrap_or_default(),
        posted[0].1.as_str(),
    ] {
        assert!(live_mentions(sent).is_empty(), "{:?} in {sent}", live_mentions(sent));
        assert!(
            sent.contains("Contact: maintainer@example.com") || !sent.contains("Contact"),
            "{sent}"
        );
    }
    hub.assert_conformant();
}

/// Without an `issue`, the branch is named after the title; a title starting with a number
/// made `upkeep/8-...`, which every later run reads as the branch of issue #8 (its open pull
/// request, its closing memory, its follow-ups). Now such a branch cannot look like an issue's.
#[tokio::test(flavor = "multi_thread")]
async fn a_title_cannot_name_a_branch_after_an_issue() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue(8, "Delete the tests", false));
    let script = Script::new(&[
        reply(
            "propose",
            &[write_notes(), propose("8 notes for the tests", "Adds notes.", None)],
        ),
        super::super::support::finish("completed"),
    ]);
    let out = run(&hub, &script, &["--task", "Add notes"]);
    out.assert_code(0);
    let pulls = hub.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let branch = pulls[0]["head"]["ref"].as_str().unwrap_or_default();
    assert!(branch.starts_with("upkeep/"), "{branch}");
    assert!(
        !Regex::new(r"^upkeep/\d+-").expect("regex").is_match(branch),
        "a branch without an issue looks like issue #8's: {branch}"
    );
    hub.assert_conformant();
}

/// The bot's pull request #3 for issue #7 with a maintainer's review thread; returns the
/// thread's id.
fn reviewed_pull_request(hub: &FakeGitHub) -> u64 {
    branch_at_main(hub, "upkeep/7-greeting");
    hub.add_pull(3, "upkeep/7-greeting", "Add a greeting", BOT, None);
    let review = hub.add_review(
        3,
        "alice",
        "COLLABORATOR",
        "CHANGES_REQUESTED",
        "",
        "2030-01-01T00:00:00Z",
    );
    hub.add_review_comment(&ReviewComment {
        pull: 3,
        review: Some(review),
        login: "alice",
        association: "COLLABORATOR",
        path: "README.md",
        line: 1,
        hunk: "@@ -1 +1 @@\n+# Sample",
        body: "Say hello, world.",
        in_reply_to: None,
    })
}

/// Runs the follow-up on #3 with `create_pull_request` given `arguments`, and returns what the
/// bot posted on the pull request (thread replies and comments).
async fn answer_review(hub: &FakeGitHub, arguments: Value) -> Vec<String> {
    let script = Script::new(&[
        reply(
            "address the review",
            &[write_notes(), ("create_pull_request", arguments)],
        ),
        super::super::support::finish("completed"),
    ]);
    let out = run(hub, &script, &["--pr", "3"]);
    out.assert_code(0);
    let posted: Vec<String> = hub
        .review_comments(3)
        .into_iter()
        .chain(hub.issue_comments(3))
        .filter(|comment| comment["user"]["login"] == BOT)
        .map(|comment| comment["body"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(!posted.is_empty(), "the review was answered: {}", out.stdout);
    posted
}

/// A review follow-up on the bot's pull request #3: the model's thread reply mentions people
/// and a team. Before, the reply went out as written and notified them; now nothing the bot
/// posts on the pull request holds a live mention.
#[tokio::test(flavor = "multi_thread")]
async fn mentions_in_review_replies_notify_nobody() {
    let hub = FakeGitHub::start(BOT).await;
    let thread = reviewed_pull_request(&hub);
    let posted = answer_review(
        &hub,
        json!({"title": "Greet the world", "body": "Done.",
               "replies": [{"comment_id": thread, "body": "Fixed, @alice &#64;acme/everyone"}]}),
    )
    .await;
    for sent in &posted {
        assert!(live_mentions(sent).is_empty(), "{:?} in {sent}", live_mentions(sent));
    }
    hub.assert_conformant();
}

/// The same follow-up answered with one summary comment (no thread replies): the summary is the
/// model's body, and it notified the people and team it named.
#[tokio::test(flavor = "multi_thread")]
async fn mentions_in_a_review_summary_notify_nobody() {
    let hub = FakeGitHub::start(BOT).await;
    reviewed_pull_request(&hub);
    let posted = answer_review(
        &hub,
        json!({"title": "Greet the world", "body": "Done, @alice; cc @acme/everyone"}),
    )
    .await;
    for sent in &posted {
        assert!(live_mentions(sent).is_empty(), "{:?} in {sent}", live_mentions(sent));
    }
    hub.assert_conformant();
}

/// A pull request is found again by the hidden task marker the bot puts in its body. The model
/// wrote another task's marker into the body of its pull request for "Add notes"; before, the
/// forged marker came first and was read back, so the next run of that other task took this
/// pull request for its own and force-pushed its branch over the notes. Now model text carries
/// no working marker: the other task opens its own pull request and the notes stay.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_task_marker_cannot_aim_another_task_at_this_pull_request() {
    let hub = FakeGitHub::start(BOT).await;
    let other = "Fix the typos";
    let forged = format!(
        "Adds notes.\n\n<!-- upkeep:task {} -->",
        upkeep::forge::task::task_key(other)
    );
    let script = Script::new(&[
        reply("propose", &[write_notes(), propose("Add notes", &forged, None)]),
        super::super::support::finish("completed"),
    ]);
    run(&hub, &script, &["--task", "Add notes"]).assert_code(0);
    let script = Script::new(&[
        reply(
            "fix",
            &[
                (
                    "write_file",
                    json!({"path": "README.md", "content": "# Sample\n\nHello, world.\n"}),
                ),
                propose("Fix the typos", "Fixes them.", None),
            ],
        ),
        super::super::support::finish("completed"),
    ]);
    run(&hub, &script, &["--task", other]).assert_code(0);
    let pulls = hub.pulls();
    assert_eq!(pulls.len(), 2, "the second task opened its own pull request: {pulls:?}");
    let notes_branch = pulls
        .iter()
        .find(|pull| pull["title"] == "Add notes")
        .and_then(|pull| pull["head"]["ref"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(git(hub.bare(), &["show", &format!("{notes_branch}:NOTES.md")]), "notes");
    hub.assert_conformant();
}

/// The Actions `issues` event that labels #7 starts a run for #7 (the issue becomes the task
/// text). Its model opens the pull request for #8 and then asks on #8: both went out before. Now
/// both fail back naming #7, and the question lands on #7.
#[tokio::test(flavor = "multi_thread")]
async fn an_actions_issue_event_aims_at_its_issue_only() {
    let hub = FakeGitHub::start(BOT).await;
    hub.add_issue(issue(7, "Rename the greeting", true));
    hub.add_issue(issue(8, "Delete the tests", false));
    let before = branches(&hub);
    let payload = json!({
        "action": "labeled",
        "issue": issue(7, "Rename the greeting", true),
        "label": {"id": 208045946, "node_id": "MDU6TGFiZWwyMDgwNDU5NDY=", "url": "https://api.github.com/repos/owner/name/labels/upkeep",
                  "name": "upkeep", "description": null, "color": "f29513", "default": false},
        "repository": super::super::support::github::repository(),
        "sender": super::super::support::github::user("alice"),
    });
    let events = tempfile::tempdir().expect("tempdir");
    let event_path = events.path().join("event.json");
    std::fs::write(&event_path, payload.to_string()).expect("write");
    let script = Script::new(&[
        reply(
            "propose",
            &[write_notes(), propose("Add notes", "Adds notes.", Some(json!(8)))],
        ),
        reply("ask there", &[ask("Is this right?", Some(json!(8)))]),
        reply("ask here", &[ask("Is this right?", None)]),
    ]);
    let out = hub
        .upkeep(&["--replay"])
        .args([script.path()])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_EVENT_NAME", "issues")
        .env("GITHUB_EVENT_PATH", &event_path)
        .run_async()
        .await;
    out.assert_code(3);
    let refused: Vec<String> = ["create_pull_request", "ask_question"]
        .iter()
        .flat_map(|tool| refusals(&out, tool))
        .collect();
    assert_eq!(refused.len(), 2, "{}", out.stdout);
    assert!(refused.iter().all(|text| text.contains("#7")), "{refused:?}");
    assert!(hub.pulls().is_empty(), "{:?}", hub.pulls());
    assert_eq!(branches(&hub), before, "nothing was pushed");
    let posted = posted_comments(&hub).await;
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert!(posted[0].0.ends_with("/issues/7/comments"), "{posted:?}");
    hub.assert_conformant();
}
