//! The API's error answers: a refused token and an exhausted rate limit end the run with a
//! clear message; a validation error goes back to the model as a failed result.

use serde_json::json;
use wiremock::ResponseTemplate;

use super::super::support::{Script, finish, reply};
use super::{GitHub, ISSUES, PULLS, error_json, ok, result_of, write_and_propose};

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_api_token_ends_the_run_with_a_clear_message() {
    let hub = GitHub::start().await;
    hub.mount("GET", PULLS, ok(json!([]))).await;
    hub.mount(
        "GET",
        ISSUES,
        ResponseTemplate::new(401).set_body_json(error_json("Bad credentials")),
    )
    .await;
    let out = hub.run(&Script::new(&[finish("no_tasks")]), &[]);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("GitHub rejected the token (401): check GITHUB_TOKEN/GH_TOKEN"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("Bad credentials"), "{}", out.stderr);
    assert!(out.events_of("model_response").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exhausted_rate_limit_says_when_it_resets() {
    let hub = GitHub::start().await;
    let reset = jiff::Timestamp::now().as_second() + 900;
    hub.mount(
        "GET",
        PULLS,
        ResponseTemplate::new(403)
            .insert_header("x-ratelimit-limit", "5000")
            .insert_header("x-ratelimit-remaining", "0")
            .insert_header("x-ratelimit-reset", reset.to_string().as_str())
            .set_body_json(error_json("API rate limit exceeded for installation ID 1.")),
    )
    .await;
    let out = hub.run(&Script::new(&[finish("no_tasks")]), &[]);
    out.assert_code(1);
    let expected = jiff::Timestamp::from_second(reset).expect("valid").to_string();
    assert!(out.stderr.contains(&expected), "reset time {expected}: {}", out.stderr);
    assert!(out.stderr.contains("API rate limit exceeded"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_validation_error_goes_back_to_the_model_as_a_failed_result() {
    let hub = GitHub::start().await;
    hub.mount_empty_lists().await;
    hub.mount(
        "POST",
        PULLS,
        ResponseTemplate::new(422).set_body_json(json!({
            "message": "Validation Failed",
            "errors": [{"resource": "PullRequest", "code": "custom",
                        "message": "No commits between main and upkeep/add-notes"}],
            "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
            "status": "422",
        })),
    )
    .await;
    let script = Script::new(&[
        write_and_propose("NOTES.md", "notes\n", "Add notes", None),
        // `finish` would drop the unpublished change: the model has to ask instead.
        reply(
            "stuck",
            &[(
                "ask_question",
                json!({"question_text": "The pull request could not be opened. What now?"}),
            )],
        ),
    ]);
    let out = hub.run(&script, &["--task", "add notes"]);
    out.assert_code(3);
    let unsaved = out.events_of("unsaved_changes");
    assert_eq!(unsaved.len(), 1, "the change is reported, not dropped: {}", out.stdout);
    assert!(
        unsaved[0]["diff"].as_str().unwrap_or("").contains("+notes"),
        "{}",
        unsaved[0]
    );
    let result = result_of(&out, "create_pull_request");
    assert_eq!(result["ok"], false, "{result}");
    let output = result["output"].as_str().unwrap_or("");
    assert!(
        output.contains("Validation Failed") && output.contains("No commits between main and upkeep/add-notes"),
        "{output}"
    );
    assert_eq!(out.events_of("model_response").len(), 2, "the model got another turn");
}
