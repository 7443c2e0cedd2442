//! Tool arguments as the model sends them: the schema a server sees keeps optional arguments
//! optional (and review-only ones out of other runs), and a malformed argument goes back to the
//! model as an error naming it, through the real turn loop against a local server shaped like
//! the Chat Completions API.

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

use super::support::conformance::{Api, assert_requests_conform};
use super::support::model_api::{openai_stream, openai_usage};
use super::support::{TestRepo, Upkeep, finish, reply};

/// Serves `replies` in order, one per request, as streamed chat completions.
async fn model_server(replies: Vec<String>) -> MockServer {
    let server = MockServer::start().await;
    for (index, content) in replies.into_iter().enumerate() {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(openai_stream(&content, "stop", openai_usage(100, 20, 0)))
            .up_to_n_times(1)
            .with_priority(u8::try_from(index + 1).expect("few replies"))
            .mount(&server)
            .await;
    }
    server
}

fn openai_run(repo: &TestRepo, server: &MockServer) -> Upkeep {
    Upkeep::new()
        .args(["run", "--json", "--provider", "openai", "--base-url"])
        .args([format!("{}/v1", server.uri())])
        .args(["--repo"])
        .args([repo.path()])
        .args(["--task", "add a notes file"])
}

/// The `arguments` schema of `tool` in a request's structured-output schema.
fn arguments_schema<'a>(body: &'a Value, tool: &str) -> &'a Value {
    let branches = body["response_format"]["json_schema"]["schema"]["properties"]["tool_calls"]["items"]["anyOf"]
        .as_array()
        .expect("one branch per tool");
    let branch = branches
        .iter()
        .find(|branch| branch["properties"]["tool_name"]["enum"][0] == tool)
        .unwrap_or_else(|| panic!("no branch for {tool}"));
    &branch["properties"]["arguments"]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pull_request_without_replies_opens_and_the_schema_sent_leaves_optional_arguments_optional() {
    let repo = TestRepo::new();
    let server = model_server(vec![reply(
        "add the file and propose it",
        &[
            ("write_file", json!({"path": "NOTES.md", "content": "notes\n"})),
            (
                "create_pull_request",
                json!({"title": "Add notes", "body": "Adds NOTES.md."}),
            ),
            ("finish", json!({"status": "completed", "summary": "added notes"})),
        ],
    )])
    .await;
    let out = openai_run(&repo, &server).run_async().await;
    out.assert_code(0);
    assert_eq!(out.results_of("create_pull_request")[0]["ok"], true, "{}", out.stdout);
    assert_eq!(repo.bot_branches(), ["upkeep/add-notes"]);

    let requests = super::support::model_api::model_requests(&server).await;
    assert_requests_conform(Api::OpenAi, &requests);
    let body: Value = serde_json::from_slice(&requests[0].body).expect("JSON body");
    assert_eq!(body["response_format"]["json_schema"]["strict"], false);
    let pull_request = arguments_schema(&body, "create_pull_request");
    // Not a review follow-up: no `replies` at all, and the optional `issue` is not required.
    assert!(pull_request["properties"].get("replies").is_none(), "{pull_request}");
    assert_eq!(pull_request["required"], json!(["title", "body"]));
    assert_eq!(pull_request["properties"]["issue"]["type"], "integer");
    let read_file = arguments_schema(&body, "read_file");
    assert_eq!(read_file["required"], json!(["path"]));
    assert_eq!(read_file["properties"]["start_line"]["type"], "integer");
    // At least one call per reply, as the parser demands.
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["properties"]["tool_calls"]["minItems"],
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_argument_goes_back_to_the_model_naming_the_argument() {
    let repo = TestRepo::new();
    let server = model_server(vec![
        reply("read", &[("read_file", json!({"path": 5}))]),
        reply("read", &[("read_file", json!({"path": "README.md", "start": 2}))]),
        reply("propose", &[("create_pull_request", json!({"body": "no title"}))]),
        reply("finish", &[("finish", json!({"status": "done", "summary": "x"}))]),
        reply(
            "read",
            &[("read_file", json!({"path": "README.md", "start_line": "#1"}))],
        ),
        finish("no_tasks"),
    ])
    .await;
    let out = openai_run(&repo, &server).run_async().await;
    out.assert_code(0);
    let reads = out.results_of("read_file");
    assert_eq!(reads.len(), 3, "{}", out.stdout);
    let output = |result: &Value| result["output"].as_str().expect("output").to_owned();
    assert_eq!(reads[0]["ok"], false);
    assert!(
        output(&reads[0]).contains("argument `path`") && output(&reads[0]).contains("string"),
        "{}",
        output(&reads[0])
    );
    // A misspelt optional argument is refused, not silently ignored.
    assert_eq!(reads[1]["ok"], false);
    assert!(
        output(&reads[1]).contains("`start`") && output(&reads[1]).contains("start_line"),
        "{}",
        output(&reads[1])
    );
    // Lenient where the meaning is plain: "#1" is line 1.
    assert_eq!(reads[2]["ok"], true, "{}", output(&reads[2]));
    let proposals = out.results_of("create_pull_request");
    assert_eq!(proposals[0]["ok"], false);
    assert!(
        output(&proposals[0]).contains("missing required argument `title`"),
        "{}",
        output(&proposals[0])
    );
    let finishes = out.results_of("finish");
    assert_eq!(finishes[0]["ok"], false);
    assert!(
        output(&finishes[0]).contains("argument `status`") && output(&finishes[0]).contains("no_tasks"),
        "{}",
        output(&finishes[0])
    );
    assert!(repo.bot_branches().is_empty());
}
