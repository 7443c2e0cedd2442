//! The API's error answers: a refused token and an exhausted rate limit end the run with a
//! clear message; a validation error goes back to the model as a failed result.

use serde_json::json;
use wiremock::ResponseTemplate;

use super::super::support::{Script, finish};
use super::{GitHub, ISSUES, PULLS, a_pull_request_that_fails, error_json, ok};

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
    let (out, result) = a_pull_request_that_fails(&hub);
    let output = result["output"].as_str().unwrap_or("");
    assert!(
        output.contains("Validation Failed") && output.contains("No commits between main and upkeep/add-notes"),
        "{output}"
    );
    assert_eq!(out.events_of("model_response").len(), 2, "the model got another turn");
}
