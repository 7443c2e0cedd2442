//! Run-wide budgets: `--max-cost`, `--max-tokens` and `--timeout` stop a run with exit 4 before
//! the call that would overspend, and say which budget ran out.

use super::support::model_api::model_requests;
use std::time::Duration;

use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::support::model_api::{openai_stream, openai_usage};
use super::support::{TestRepo, Upkeep, reply};

/// A streamed Chat Completions reply that reports heavy usage: 5000 input + 500 output tokens,
/// which is $0.014 at gpt-4.1's built-in price ($2 / $8 per million).
fn expensive_reply() -> ResponseTemplate {
    let content = reply("read", &[("read_file", json!({"path": "README.md"}))]);
    openai_stream(&content, "stop", openai_usage(5000, 500, 0))
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
        .respond_with(expensive_reply())
        .mount(&server)
        .await;
    let out = run_with(&server, &["--max-cost", "0.02"]).await;
    out.assert_code(4);
    assert_eq!(received(&server).await.len(), 1, "the second call was never sent");
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
        .respond_with(expensive_reply())
        .mount(&server)
        .await;
    let out = run_with(&server, &["--max-tokens", "7000"]).await;
    out.assert_code(4);
    assert_eq!(received(&server).await.len(), 1);
    assert!(out.stderr.contains("--max-tokens 7000"), "{}", out.stderr);
    assert_eq!(out.events_of("run_finished")[0]["usage"]["input_tokens"], 5000);
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_cuts_a_slow_call_short() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(expensive_reply().set_delay(Duration::from_secs(60)))
        .mount(&server)
        .await;
    let out = run_with(&server, &["--timeout", "1s"]).await;
    out.assert_code(4);
    assert!(out.stderr.contains("--timeout 1s"), "{}", out.stderr);
    assert_eq!(out.leftover_temp_entries, 0);
}

/// Serves `replies` in order as streamed Anthropic messages, each with the same usage.
async fn anthropic_server(replies: &[String], usage: serde_json::Value, output_tokens: u64) -> MockServer {
    let server = MockServer::start().await;
    for (index, content) in replies.iter().enumerate() {
        Mock::given(method("POST"))
            .respond_with(super::support::model_api::anthropic_stream(
                content,
                "end_turn",
                usage.clone(),
                output_tokens,
            ))
            .up_to_n_times(1)
            .with_priority(u8::try_from(index + 1).expect("few replies"))
            .mount(&server)
            .await;
    }
    server
}

/// Cost and usage with cached input: each API counts it its own way, upkeep reports it one way
/// and prices each kind of input token at its own rate.
#[tokio::test(flavor = "multi_thread")]
async fn cost_with_cached_and_written_input_equals_the_hand_computed_figure() {
    let replies = [
        reply("read", &[("read_file", json!({"path": "README.md"}))]),
        super::support::finish("no_tasks"),
    ];
    // Anthropic: 1,000 tokens after the last breakpoint, 20,000 read from the cache, 5,000
    // written to it, 400 out; claude-sonnet-4-5 costs $3 in, $0.30 cached, $3.75 written, $15 out:
    // 1,000 * 3 + 20,000 * 0.30 + 5,000 * 3.75 + 400 * 15 = $0.03375 a call.
    let usage = super::support::model_api::anthropic_usage(1_000, 20_000, 5_000);
    let server = anthropic_server(&replies, usage, 400).await;
    let repo = TestRepo::new();
    let out = Upkeep::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .args(["run", "--json", "--task", "t", "--provider", "anthropic", "--base-url"])
        .args([server.uri()])
        .args(["--repo"])
        .args([repo.path()])
        .run_async()
        .await;
    out.assert_code(0);
    let responses = out.events_of("model_response");
    assert_eq!(responses.len(), 2);
    assert_eq!(
        responses[0]["usage"],
        json!({"input_tokens": 26_000, "output_tokens": 400, "cached_input_tokens": 20_000, "cache_write_tokens": 5_000})
    );
    let per_call = responses[0]["cost_usd"].as_f64().expect("cost");
    assert!((per_call - 0.03375).abs() < 1e-9, "{per_call}");
    let finished = &out.events_of("run_finished")[0];
    let total = finished["cost_usd"].as_f64().expect("cost");
    assert!((total - 0.0675).abs() < 1e-9, "{total}");
    assert_eq!(finished["usage"]["cached_input_tokens"], 40_000);
    assert_eq!(finished["usage"]["cache_write_tokens"], 10_000);

    // OpenAI: 10,000 prompt tokens of which 8,000 cached, 500 out; gpt-4.1 costs $2 in, $0.50
    // cached, $8 out: 2,000 * 2 + 8,000 * 0.50 + 500 * 8 = $0.012 a call.
    let server = MockServer::start().await;
    for (index, content) in replies.iter().enumerate() {
        Mock::given(method("POST"))
            .respond_with(openai_stream(content, "stop", openai_usage(10_000, 500, 8_000)))
            .up_to_n_times(1)
            .with_priority(u8::try_from(index + 1).expect("few replies"))
            .mount(&server)
            .await;
    }
    let out = run_with(&server, &[]).await;
    out.assert_code(0);
    let finished = &out.events_of("run_finished")[0];
    let total = finished["cost_usd"].as_f64().expect("cost");
    assert!((total - 0.024).abs() < 1e-9, "{total}");
    assert_eq!(finished["usage"]["input_tokens"], 20_000);
    assert_eq!(finished["usage"]["cached_input_tokens"], 16_000);
}

/// What the server received, each body checked against the API description of its path.
async fn received(server: &MockServer) -> Vec<wiremock::Request> {
    let requests = model_requests(server).await;
    super::support::conformance::assert_each_request_conforms(&requests);
    requests
}

/// `upkeep run` against `server` with `extra` options; the model keeps reading the README.
async fn reading_run(server: &MockServer, extra: &[&str]) -> super::support::RunOutput {
    run_with(server, extra).await
}

/// Regression: a provider that leaves `usage` out was counted as zero tokens, so `--max-tokens`
/// and `--max-cost` never stopped the run. upkeep now estimates the call (the request's own
/// estimate, the reply's text), marks the event `estimated`, counts it in the budgets and the
/// summary, and warns once.
#[tokio::test(flavor = "multi_thread")]
async fn usage_a_provider_leaves_out_is_estimated_and_counted_against_max_tokens() {
    let content = reply("read", &[("read_file", json!({"path": "README.md"}))]);
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(super::support::model_api::openai_stream_without_usage(&content))
        .mount(&server)
        .await;
    // One call to learn the size of the first request, as upkeep estimates it.
    let probe = reading_run(&server, &["--max-turns", "1"]).await;
    probe.assert_code(4);
    let first_request = probe.events_of("context")[0]["estimated_tokens"]
        .as_u64()
        .expect("estimate");
    let response = &probe.events_of("model_response")[0];
    assert_eq!(response["usage"]["estimated"], true, "{response}");
    assert_eq!(response["usage"]["input_tokens"], first_request);
    assert!(response["usage"]["output_tokens"].as_u64() > Some(0), "{response}");
    assert!(response["cost_usd"].as_f64() > Some(0.0), "{response}");
    assert!(
        probe.events_of("run_finished")[0]["usage"]["input_tokens"].as_u64() >= Some(first_request),
        "the summary counts the estimate"
    );
    assert_eq!(
        probe.stderr.matches("did not report token usage").count(),
        1,
        "{}",
        probe.stderr
    );

    // The first call fits (its request plus the 1,000-token reply estimate); after it, the
    // estimated spend leaves no room for a second one.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(super::support::model_api::openai_stream_without_usage(&content))
        .mount(&server)
        .await;
    let limit = (first_request + 1_000 + first_request / 2).to_string();
    let out = reading_run(&server, &["--max-tokens", &limit]).await;
    out.assert_code(4);
    assert!(out.stderr.contains(&format!("--max-tokens {limit}")), "{}", out.stderr);
    assert_eq!(received(&server).await.len(), 1, "the estimate stopped the second call");
    assert_eq!(out.stderr.matches("did not report token usage").count(), 1);
}

/// Chat Completions usage as a server that lies might report it: every count at `value`.
fn openai_usage_of(value: u64) -> serde_json::Value {
    json!({
        "prompt_tokens": value,
        "completion_tokens": value,
        "total_tokens": value,
        "prompt_tokens_details": {"cached_tokens": value, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    })
}

/// Regression: a provider reporting `prompt_tokens = 2^64-1` (18446744073709551615) wrapped the
/// run's token counter (and panicked a debug build). Counts beyond what the request could hold
/// are now clamped with a warning, and every sum saturates.
#[tokio::test(flavor = "multi_thread")]
async fn usage_larger_than_the_request_could_hold_is_clamped_and_never_wraps() {
    let replies = [
        reply("read", &[("read_file", json!({"path": "README.md"}))]),
        super::support::finish("no_tasks"),
    ];
    let server = MockServer::start().await;
    for (index, content) in replies.iter().enumerate() {
        Mock::given(method("POST"))
            .respond_with(openai_stream(content, "stop", openai_usage_of(u64::MAX)))
            .up_to_n_times(1)
            .with_priority(u8::try_from(index + 1).expect("few replies"))
            .mount(&server)
            .await;
    }
    let out = run_with(&server, &["--max-tokens", "100000000"]).await;
    out.assert_code(0);
    assert!(
        out.stderr.contains("reported more tokens than the call could use"),
        "{}",
        out.stderr
    );
    for response in out.events_of("model_response") {
        let usage = &response["usage"];
        let input = usage["input_tokens"].as_u64().expect("input");
        let context = usage["cached_input_tokens"].as_u64().expect("cached");
        // gpt-4.1's window, larger than this request's bytes: the most it could have held.
        assert!(input <= 1_047_576, "clamped: {usage}");
        assert!(context <= input, "{usage}");
        // gpt-4.1's window: the most a reply can have used.
        assert!(usage["output_tokens"].as_u64() <= Some(1_047_576), "{usage}");
        assert!(usage.get("estimated").is_none(), "reported, not estimated: {usage}");
    }
    let total = &out.events_of("run_finished")[0]["usage"];
    assert!(total["input_tokens"].as_u64() <= Some(2 * 1_047_576), "{total}");
}

/// A weak model repeated the same failing call 16 to 18 times in a row, each a turn, and the
/// closing hint said to raise --max-turns. The third identical failure now tells the model so,
/// and the fifth ends the cycle with outcome `stuck` (exit 4), naming the unusable replies.
#[test]
fn the_same_failing_call_five_times_ends_the_cycle_as_stuck() {
    let repo = super::support::TestRepo::new();
    let missing = || super::support::reply("read it", &[("read_file", serde_json::json!({"path": "missing.rs"}))]);
    let mut replies: Vec<String> = (0..5).map(|_| missing()).collect();
    replies.insert(2, "not json at all".to_owned());
    replies.push(super::support::finish("completed"));
    let out = super::support::run_local(&repo, &super::support::Script::new(&replies), &["--task", "t"]);
    out.assert_code(4);
    let results = out.results_of("read_file");
    assert_eq!(results.len(), 5, "no sixth turn: {}", out.stdout);
    // What goes back to the model carries the note (agent::stuck's unit tests); people see it.
    for times in [3, 4] {
        assert!(
            out.stderr.contains(&format!(
                "the same failing read_file call {times} times in a row; it is told"
            )),
            "{}",
            out.stderr
        );
    }
    assert!(!out.stderr.contains("call 2 times in a row"), "{}", out.stderr);
    let finished = &out.events_of("run_finished")[0];
    assert_eq!(finished["outcome"], "stuck");
    assert!(
        out.stderr
            .contains("the same failing read_file call 5 times in a row; 1 of its 6 replies"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("raise --max-turns"), "{}", out.stderr);
}

/// A weak model gave 14 unusable replies out of 20 and the closing hint said "raise
/// --max-turns", which only buys more unusable replies. When most replies could not be used,
/// the hint now names the share and suggests a stronger model instead.
#[test]
fn max_turns_with_mostly_unusable_replies_suggests_a_stronger_model() {
    let repo = super::support::TestRepo::new();
    let read = || super::support::reply("read it", &[("read_file", serde_json::json!({"path": "README.md"}))]);
    let replies = vec![
        "not json at all".to_owned(),
        read(),
        "{\"plan\": ".to_owned(),
        "still not json".to_owned(),
    ];
    let script = super::support::Script::new(&replies);
    let out = super::support::run_local(&repo, &script, &["--task", "t", "--max-turns", "4"]);
    out.assert_code(4);
    assert!(
        out.stderr.contains("3 of the 4 replies could not be used")
            && out.stderr.contains("a stronger model is likely to do better"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("raise --max-turns"), "{}", out.stderr);

    // Mostly usable replies: more turns may well help, and the hint says so.
    let replies = vec![read(), read(), "not json".to_owned()];
    let out = super::support::run_local(
        &repo,
        &super::support::Script::new(&replies),
        &["--task", "t", "--max-turns", "3"],
    );
    out.assert_code(4);
    assert!(out.stderr.contains("raise --max-turns"), "{}", out.stderr);
}
