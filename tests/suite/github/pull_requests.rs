//! Issue tasks become pull requests: opened once, updated on later runs, never opened when the
//! push is refused, and never force-pushed over a maintainer's commit.

use serde_json::json;
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, ResponseTemplate};

use super::super::support::{Script, reply};
use super::{
    GitHub, ISSUES, OWNER, PULLS, a_pull_request_that_fails, body_json, issue_json, ok, pull_commit_json, pull_json,
    pull_request_as_issue_json, result_of, write_and_propose,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_labelled_issue_becomes_a_pull_request_that_closes_it() {
    let hub = GitHub::start().await;
    hub.mount("GET", PULLS, ok(json!([]))).await;
    hub.mount(
        "GET",
        ISSUES,
        ok(json!([
            issue_json(7, "Fix the typo in README", "It says wrold.", 0),
            pull_request_as_issue_json(8, "Some pull request"),
        ])),
    )
    .await;
    hub.mount(
        "POST",
        PULLS,
        ResponseTemplate::new(201).set_body_json(pull_json(42, "upkeep/7-fix-the-typo", "Fix the typo")),
    )
    .await;
    let propose = || {
        Script::new(&[write_and_propose(
            "README.md",
            "# Sample\n\nHello, world.\n",
            "Fix the typo",
            None,
        )])
    };

    let out = hub.run(&propose(), &[]);
    out.assert_code(0);
    let issues = hub.requests("GET", ISSUES).await;
    assert_eq!(
        issues[0]
            .url
            .query_pairs()
            .find(|(k, _)| k == "labels")
            .map(|(_, v)| v.into_owned()),
        Some("upkeep".to_owned())
    );
    let posts = hub.requests("POST", PULLS).await;
    assert_eq!(posts.len(), 1);
    let sent = body_json(&posts[0]);
    // The pull-request-shaped item was excluded, so issue 7 was the only one and the default.
    assert_eq!(sent["head"], "upkeep/7-fix-the-typo", "{sent}");
    assert_eq!(sent["base"], "main");
    assert_eq!(sent["title"], "Fix the typo");
    assert!(sent["body"].as_str().unwrap_or("").contains("Closes #7"), "{sent}");
    assert_eq!(sent["draft"], false);
    let event = &out.events_of("pull_request")[0];
    assert_eq!(event["url"], "https://github.com/owner/name/pull/42");
    assert_eq!(event["number"], 42);
    assert_eq!(event["branch"], "upkeep/7-fix-the-typo");
    assert_eq!(hub.bot_branches(), vec!["upkeep/7-fix-the-typo"]);

    let out = hub.run(&propose(), &["--draft"]);
    out.assert_code(0);
    let posts = hub.requests("POST", PULLS).await;
    assert_eq!(posts.len(), 2);
    assert_eq!(body_json(&posts[1])["draft"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_run_updates_the_open_pull_request_instead_of_opening_another() {
    let hub = GitHub::start().await;
    // The task is recognised by the key its pull request carries (a run may not aim at an
    // issue it was not given, so the task is the text, as in `--task`).
    let task = "fix the typo again";
    let branch = "upkeep/fix-the-typo";
    let mut existing = pull_json(42, branch, "Fix the typo");
    existing["body"] = json!(format!(
        "Fixes it.\n\n<!-- upkeep:task {} -->",
        upkeep::forge::task::task_key(task)
    ));
    Mock::given(method("GET"))
        .and(path(PULLS))
        .and(query_param("head", format!("{OWNER}:{branch}")))
        .respond_with(ok(json!([existing.clone()])))
        .expect(1)
        .mount(&hub.api)
        .await;
    hub.mount("GET", PULLS, ok(json!([existing.clone()]))).await;
    // The pull request's one commit is the bot's own: it may be rebuilt.
    hub.mount(
        "GET",
        &format!("{PULLS}/42/commits"),
        ok(json!([pull_commit_json("upkeep@users.noreply.github.com")])),
    )
    .await;
    Mock::given(method("PATCH"))
        .and(path(format!("{PULLS}/42")))
        .respond_with(ok(pull_json(42, branch, "Fix the typo")))
        .expect(1)
        .mount(&hub.api)
        .await;
    Mock::given(method("POST"))
        .and(path(PULLS))
        .respond_with(ResponseTemplate::new(201).set_body_json(pull_json(43, branch, "dup")))
        .expect(0)
        .mount(&hub.api)
        .await;
    let script = Script::new(&[write_and_propose(
        "README.md",
        "# Sample\n\nHello, world!\n",
        "Fix the typo",
        None,
    )]);
    let out = hub.run(&script, &["--task", task]);
    out.assert_code(0);

    let patches = hub.requests("PATCH", &format!("{PULLS}/42")).await;
    let sent = body_json(&patches[0]);
    assert_eq!(sent["title"], "Fix the typo");
    let body = sent["body"].as_str().unwrap_or("");
    assert!(
        body.contains("Updates README.md.") && body.contains("<!-- upkeep:task "),
        "{sent}"
    );
    let result = result_of(&out, "create_pull_request");
    assert_eq!(result["ok"], true, "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap_or("")
            .contains("\"updated_existing\":true"),
        "{result}"
    );
    assert_eq!(out.events_of("pull_request")[0]["number"], 42);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_push_is_a_failed_tool_result_and_opens_nothing() {
    let hub = GitHub::start().await;
    hub.mount_empty_lists().await;
    Mock::given(method("POST"))
        .and(path(PULLS))
        .respond_with(ResponseTemplate::new(201).set_body_json(pull_json(1, "upkeep/add-notes", "x")))
        .expect(0)
        .mount(&hub.api)
        .await;
    hub.git.reject_pushes_to("refs/heads/upkeep/add-notes");
    let (out, result) = a_pull_request_that_fails(&hub);
    assert!(result["output"].as_str().unwrap_or("").contains("rejected"), "{result}");
    assert!(out.events_of("pull_request").is_empty());
    assert!(hub.bot_branches().is_empty());
}

/// Running the same task again rebuilds its bot branch from the base and force-pushes it.
/// Before, that silently dropped a maintainer's commit pushed to the pull request; now the push
/// is refused, nothing is overwritten, and the model is told why and what to do.
#[tokio::test(flavor = "multi_thread")]
async fn a_rebuilt_branch_never_force_pushes_over_a_maintainers_commit() {
    let hub = GitHub::start().await;
    let task = "Add a greeting";
    let branch = "upkeep/add-a-greeting";
    let mut existing = pull_json(42, branch, task);
    existing["body"] = json!(format!(
        "Adds one.\n\n<!-- upkeep:task {} -->",
        upkeep::forge::task::task_key(task)
    ));
    hub.mount("GET", PULLS, ok(json!([existing]))).await;
    hub.mount("GET", ISSUES, ok(json!([]))).await;
    hub.mount(
        "GET",
        &format!("{PULLS}/42/commits"),
        ok(json!([
            pull_commit_json("upkeep@users.noreply.github.com"),
            pull_commit_json("alice@example.com")
        ])),
    )
    .await;
    let script = Script::new(&[
        write_and_propose("GREETING.md", "hi\n", task, None),
        reply(
            "stuck",
            &[(
                "ask_question",
                json!({"question_text": "Someone pushed to the pull request: build on it?"}),
            )],
        ),
    ]);
    let out = hub.run(&script, &["--task", task]);
    out.assert_code(3);
    let result = result_of(&out, "create_pull_request");
    assert_eq!(result["ok"], false, "{result}");
    let output = result["output"].as_str().unwrap_or("");
    assert!(
        output.contains("alice@example.com") && output.contains("--pr 42"),
        "{output}"
    );
    assert!(hub.bot_branches().is_empty(), "nothing was pushed");
    assert!(hub.requests("PATCH", &format!("{PULLS}/42")).await.is_empty());
}

/// After `--max-reviews` rounds without a pass the pull request opened as a ready one, its
/// unresolved findings only in the body. It now opens as a draft, so nobody merges a change the
/// review did not pass by mistake; a passed review opens it ready, as before.
#[tokio::test(flavor = "multi_thread")]
async fn a_pull_request_the_review_did_not_pass_opens_as_a_draft() {
    use super::super::support::agents::line;
    let hub = GitHub::start().await;
    hub.mount("GET", PULLS, ok(json!([]))).await;
    hub.mount("GET", ISSUES, ok(json!([]))).await;
    hub.mount(
        "POST",
        PULLS,
        ResponseTemplate::new(201).set_body_json(pull_json(42, "upkeep/add-notes", "Add notes")),
    )
    .await;
    let fail = |finding: &str| {
        reply(
            "verdict",
            &[(
                "complete_task",
                json!({"answer": {"verdict": "fail", "findings": [finding]}}),
            )],
        )
    };
    let propose = || {
        reply(
            "propose",
            &[(
                "create_pull_request",
                json!({"title": "Add notes", "body": "Adds notes."}),
            )],
        )
    };
    let script = Script::from_lines(
        [
            line(
                "root",
                reply(
                    "write",
                    &[("write_file", json!({"path": "NOTES.md", "content": "draft\n"}))],
                ),
            ),
            line("root", propose()),
            line("root>reviewer", fail("NOTES.md says draft")),
            line("root", propose()),
            line("root>reviewer", fail("NOTES.md still says draft")),
            line(
                "root",
                reply("done", &[("finish", json!({"status": "completed", "summary": "s"}))]),
            ),
        ]
        .into_iter(),
    );
    let out = hub
        .upkeep(&["--task", "add notes", "--replay"])
        .with_review()
        .args([script.path()])
        .run();
    out.assert_code(0);
    let posts = hub.requests("POST", PULLS).await;
    assert_eq!(posts.len(), 1, "{}", out.stderr);
    let sent = body_json(&posts[0]);
    assert_eq!(sent["draft"], true, "{sent}");
    assert!(
        sent["body"]
            .as_str()
            .is_some_and(|body| body.contains("NOTES.md still says draft")),
        "{sent}"
    );
}
