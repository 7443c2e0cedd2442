//! Run-wide budgets: `--max-cost`, `--max-tokens` and `--timeout` stop a run with exit 4 before
//! the call that would overspend, and say which budget ran out.

use std::time::Duration;

use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::{TestRepo, Upkeep, reply};

/// A Chat Completions reply that reports heavy usage: 5000 input + 500 output tokens, which is
/// $0.014 at gpt-4.1's built-in price ($2 / $8 per million).
fn expensive_reply() -> serde_json::Value {
    let content = reply("read", &[("read_file", json!({"path": "README.md"}))]);
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4.1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5000, "completion_tokens": 500, "total_tokens": 5500},
    })
}

async fn run_with(server: &MockServer, budget: &[&str]) -> super::support::RunOutput {
    let repo = TestRepo::new();
    Upkeep::new()
        .args([
            "run",
            "--json",
            "--task",
            "t",
            "--model",
            "gpt-4.1",
            "--provider",
            "openai",
            "--base-url",
        ])
        .args([format!("{}/v1", server.uri())])
        .args(["--repo"])
        .args([repo.path()])
        .args(budget)
        .run_async()
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn max_cost_stops_before_the_call_that_would_exceed_it() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(expensive_reply()))
        .mount(&server)
        .await;
    let out = run_with(&server, &["--max-cost", "0.02"]).await;
    out.assert_code(4);
    assert_eq!(
        server.received_requests().await.expect("recorded").len(),
        1,
        "the second call was never sent"
    );
    assert!(out.stderr.contains("--max-cost"), "{}", out.stderr);
    let finished = &out.events_of("run_finished")[0];
    assert_eq!(finished["outcome"], "limit");
    let cost = finished["cost_usd"].as_f64().expect("cost");
    assert!(
        (cost - 0.014).abs() < 1e-9,
        "cost from the API's usage and the price table: {cost}"
    );
    assert!(cost <= 0.02, "never overspent");
    assert_eq!(out.events_of("model_response")[0]["cost_usd"], finished["cost_usd"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn max_tokens_stops_before_the_call_that_would_exceed_it() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(expensive_reply()))
        .mount(&server)
        .await;
    let out = run_with(&server, &["--max-tokens", "7000"]).await;
    out.assert_code(4);
    assert_eq!(server.received_requests().await.expect("recorded").len(), 1);
    assert!(out.stderr.contains("--max-tokens 7000"), "{}", out.stderr);
    assert_eq!(out.events_of("run_finished")[0]["usage"]["input_tokens"], 5000);
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_cuts_a_slow_call_short() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(expensive_reply())
                .set_delay(Duration::from_secs(60)),
        )
        .mount(&server)
        .await;
    let out = run_with(&server, &["--timeout", "1s"]).await;
    out.assert_code(4);
    assert!(out.stderr.contains("--timeout 1s"), "{}", out.stderr);
    assert_eq!(out.leftover_temp_entries, 0);
}
