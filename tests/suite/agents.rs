//! Agents as tools (DESIGN section 12): `delegate` runs a sub-agent with a fresh context, its own
//! tools and turn limit; its answer is the call's result; depth, turns, schemas, tool subsets and
//! the run's budgets bind it; its events name it; a trace of it replays; an interrupt stops it.

use super::support::model_api::model_requests;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request};

use super::support::agents::{OperatorConfig, complete, delegate, line, of_agent, run, run_with_config};
use super::support::conformance::{Api, assert_requests_conform};
use super::support::model_api::{model_server, openai_sequence, openai_stream, openai_usage, run_against, streamed};
use super::support::{RunOutput, TestRepo, Upkeep, finish, reply, signal_and_wait};

/// An operator's agent whose answer must be `{summary, modules_seen}`.
const MAPPER: &str = r#"
[[agents]]
name = "mapper"
description = "Maps the files"
instructions = "List the files with a summary."
tools = ["list_files"]
[agents.output_schema]
type = "object"
required = ["summary", "modules_seen"]
additionalProperties = false
[agents.output_schema.properties.summary]
type = "string"
[agents.output_schema.properties.modules_seen]
type = "array"
items = { type = "string" }
"#;

fn delegate_result(out: &RunOutput) -> Value {
    of_agent(out, "tool_result", "root")
        .into_iter()
        .find(|e| e["tool"] == "delegate")
        .expect("the delegate call has a result")
}

fn bodies(requests: &[Request]) -> Vec<Value> {
    assert_requests_conform(Api::OpenAi, requests);
    requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("request body is JSON"))
        .collect()
}

/// The tool names a request's reply schema offers.
fn offered_tools(body: &Value) -> Vec<String> {
    body["response_format"]["json_schema"]["schema"]["properties"]["tool_calls"]["items"]["anyOf"]
        .as_array()
        .expect("one branch per tool")
        .iter()
        .filter_map(|branch| branch["properties"]["tool_name"]["enum"][0].as_str())
        .map(str::to_owned)
        .collect()
}

fn messages_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The issue's scenario, seen from the model API: the main agent delegates to `explorer`, which
/// reads two files and answers; the answer is the delegate call's result, and the main agent's
/// next request holds the answer but not the files. Its trace then replays to the same run.
#[tokio::test(flavor = "multi_thread")]
async fn the_explorer_reads_in_its_own_context_and_only_its_answer_reaches_the_caller() {
    let repo = TestRepo::new();
    let answer = "one() is defined in src/lib.rs line 1 and returns 1; the README only says hello.";
    let replies = [
        delegate("explorer", "Where is one() defined, and what does the README say?"),
        reply(
            "read both",
            &[
                ("read_file", json!({"path": "README.md"})),
                ("read_file", json!({"path": "src/lib.rs"})),
            ],
        ),
        complete(json!(answer)),
        finish("completed"),
    ];
    let server = openai_sequence(&replies).await;
    let trace_dir = tempfile::tempdir().expect("tempdir");
    let trace = trace_dir.path().join("trace.jsonl");
    let out = Upkeep::new()
        .args([
            "run",
            "--json",
            "--provider",
            "openai",
            "--model",
            "gpt-4.1",
            "--task",
            "explain one()",
        ])
        .args(["--base-url", &format!("{}/v1", server.uri()), "--trace"])
        .args([&trace])
        .args(["--repo"])
        .args([repo.path()])
        .run_async()
        .await;
    out.assert_code(0);

    let requests = bodies(&model_requests(&server).await);
    assert_eq!(requests.len(), 4);
    let (root_first, explorer_first, explorer_second, root_second) =
        (&requests[0], &requests[1], &requests[2], &requests[3]);
    assert!(offered_tools(root_first).contains(&"delegate".to_owned()));
    assert!(!offered_tools(root_first).contains(&"complete_task".to_owned()));
    assert_eq!(
        offered_tools(explorer_first),
        ["read_file", "list_files", "search_files", "complete_task"],
        "the explorer's own tools"
    );
    let explorer_system = explorer_first["messages"][0]["content"].as_str().expect("system");
    assert!(explorer_system.contains("You are `explorer`"), "{explorer_system}");
    assert!(messages_text(explorer_first).contains("Where is one() defined"));
    assert!(
        !messages_text(explorer_first).contains("explain one()"),
        "a fresh context"
    );
    assert_ne!(explorer_first["prompt_cache_key"], root_first["prompt_cache_key"]);
    let explorer_read = messages_text(explorer_second);
    assert!(explorer_read.contains("pub fn one() -> u32 { 1 }") && explorer_read.contains("Hello."));
    let root_history = messages_text(root_second);
    assert!(
        root_history.contains(answer),
        "the answer is the delegate result: {root_history}"
    );
    assert!(
        !root_history.contains("pub fn one() -> u32 { 1 }") && !root_history.contains("Hello."),
        "the files stay in the explorer's context: {root_history}"
    );

    assert_eq!(delegate_result(&out)["output"], answer);
    assert_eq!(delegate_result(&out)["ok"], true);
    for kind in ["context", "model_response", "plan", "tool_call", "tool_result"] {
        assert!(
            out.events_of(kind)
                .iter()
                .all(|e| e["agent"] == "root" || e["agent"] == "root>explorer"),
            "every {kind} event names its agent"
        );
    }
    let reads: Vec<Value> = of_agent(&out, "tool_call", "root>explorer");
    assert_eq!(reads.len(), 3, "two reads and complete_task: {reads:?}");
    assert!(
        out.stderr.contains("  [explorer] [turn 1] → read_file README.md"),
        "{}",
        out.stderr
    );

    // The trace replays to the same run: every agent gets its replies in the recorded order.
    let replayed = Upkeep::new()
        .args(["run", "--json", "--task", "explain one()", "--replay"])
        .args([&trace])
        .args(["--repo"])
        .args([repo.path()])
        .run();
    replayed.assert_code(0);
    let calls = |out: &RunOutput| -> Vec<(String, String)> {
        out.events_of("tool_call")
            .iter()
            .map(|e| (e["agent"].to_string(), e["tool"].to_string()))
            .collect()
    };
    assert_eq!(calls(&replayed), calls(&out));
    assert_eq!(delegate_result(&replayed)["output"], answer);
}

#[test]
fn the_depth_limit_rejects_a_delegation_beyond_it() {
    let config = OperatorConfig::new(
        "[[agents]]\nname = \"helper\"\ndescription = \"Helps\"\ninstructions = \"Help.\"\ntools = [\"read_file\", \"delegate\"]\n",
    );
    let script = |nested: Vec<Value>| {
        let mut lines = vec![line("root", delegate("helper", "ask the explorer"))];
        lines.push(line("root>helper", delegate("explorer", "where is one()?")));
        lines.extend(nested);
        lines.push(line("root>helper", complete(json!("done"))));
        lines.push(line("root", finish("completed")));
        lines
    };
    let repo = TestRepo::new();
    let out = run_with_config(&repo, &config, script(Vec::new()), &["--max-depth", "1"]);
    out.assert_code(0);
    let rejected = of_agent(&out, "tool_rejected", "root>helper");
    assert_eq!(rejected.len(), 1, "{}", out.stdout);
    assert_eq!(rejected[0]["tool"], "delegate");
    let reason = rejected[0]["reason"].as_str().expect("reason");
    assert!(
        reason.contains("--max-depth 1") && reason.contains("depth 1"),
        "{reason}"
    );
    assert!(out.events().iter().all(|e| e["agent"] != "root>helper>explorer"));

    // One level more lets the helper ask the explorer.
    let nested = vec![line("root>helper>explorer", complete(json!("in src/lib.rs")))];
    let out = run_with_config(&repo, &config, script(nested), &["--max-depth", "2"]);
    out.assert_code(0);
    assert!(of_agent(&out, "tool_rejected", "root>helper").is_empty());
    assert_eq!(
        of_agent(&out, "tool_call", "root>helper>explorer")[0]["tool"],
        "complete_task"
    );
}

#[test]
fn with_max_depth_0_delegate_is_not_offered() {
    let repo = TestRepo::new();
    let prompt = |extra: &[&str]| {
        let out = Upkeep::new()
            .args(["prompt", "--task", "t", "--repo"])
            .args([repo.path()])
            .args(extra)
            .run();
        out.assert_code(0);
        out.stdout
    };
    let offered = prompt(&[]);
    assert!(
        offered.contains("## delegate") && offered.contains("- `explorer`:"),
        "{offered}"
    );
    assert!(!offered.contains("## complete_task"), "only sub-agents complete tasks");
    assert!(!prompt(&["--max-depth", "0"]).contains("## delegate"));
    // A call anyway is rejected, never run; so is complete_task, which only sub-agents hold.
    let lines = vec![
        line("root", delegate("explorer", "x")),
        line("root", complete(json!("done"))),
        line("root", finish("completed")),
    ];
    let out = run(&repo, lines, &["--max-depth", "0"]);
    out.assert_code(0);
    let rejected = of_agent(&out, "tool_rejected", "root");
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert!(
        rejected[0]["reason"]
            .as_str()
            .expect("reason")
            .contains("--max-depth 0"),
        "{rejected:?}"
    );
    assert!(
        rejected[1]["reason"]
            .as_str()
            .expect("reason")
            .contains("end the cycle with finish"),
        "{rejected:?}"
    );
}

#[test]
fn a_sub_agent_out_of_turns_gives_the_caller_an_error_to_act_on() {
    let config = OperatorConfig::new(
        "[[agents]]\nname = \"digger\"\ndescription = \"Digs\"\ninstructions = \"Dig.\"\ntools = [\"read_file\"]\nmax_turns = 2\n",
    );
    let repo = TestRepo::new();
    let read = |path: &str| reply("read", &[("read_file", json!({"path": path}))]);
    let lines = vec![
        line("root", delegate("digger", "dig")),
        line("root>digger", read("README.md")),
        line("root>digger", read("src/lib.rs")),
        line("root", finish("completed")),
    ];
    let out = run_with_config(&repo, &config, lines, &[]);
    out.assert_code(0);
    let result = delegate_result(&out);
    assert_eq!(result["ok"], false);
    let output = result["output"].as_str().expect("output");
    assert!(
        output.contains("used its 2 turns without calling complete_task"),
        "{output}"
    );
    assert_eq!(of_agent(&out, "model_response", "root>digger").len(), 2);
}

#[test]
fn an_answer_that_does_not_match_the_output_schema_goes_back_to_the_sub_agent() {
    let config = OperatorConfig::new(MAPPER);
    let repo = TestRepo::new();
    let good = json!({"summary": "two files", "modules_seen": ["README.md", "src/lib.rs"]});
    let lines = vec![
        line("root", delegate("mapper", "map the repository")),
        line("root>mapper", complete(json!({"summary": 5}))),
        line("root>mapper", complete(good.clone())),
        line("root", finish("completed")),
    ];
    let out = run_with_config(&repo, &config, lines, &[]);
    out.assert_code(0);
    let attempts: Vec<Value> = of_agent(&out, "tool_result", "root>mapper");
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["ok"], false);
    let error = attempts[0]["output"].as_str().expect("output");
    assert!(
        error.contains("does not match the output schema") && error.contains("/summary"),
        "{error}"
    );
    let answer: Value = serde_json::from_str(delegate_result(&out)["output"].as_str().expect("text")).expect("JSON");
    assert_eq!(answer, good);
}

/// Where each API carries the reply schema it enforces.
fn enforced_schema(api: Api, body: &Value) -> &Value {
    match api {
        Api::OpenAi => &body["response_format"]["json_schema"]["schema"],
        Api::Anthropic => &body["output_config"]["format"]["schema"],
        Api::Gemini => &body["generationConfig"]["responseJsonSchema"],
        Api::Ollama => &body["format"],
    }
}

/// A sub-agent with an operator's output schema, on every API: each request the run sends is
/// one the API's description accepts, and the sub-agent's request enforces its answer's shape
/// (the schema's fields) where the main agent's does not.
#[tokio::test(flavor = "multi_thread")]
async fn a_sub_agent_with_an_output_schema_sends_conforming_requests_on_every_api() {
    let config = OperatorConfig::new(MAPPER);
    for api in [Api::OpenAi, Api::Anthropic, Api::Gemini, Api::Ollama] {
        let repo = TestRepo::new();
        let answer = json!({"summary": "two files", "modules_seen": ["README.md", "src/lib.rs"]});
        let server = model_server(vec![
            streamed(api, &delegate("mapper", "map the repository")),
            streamed(api, &complete(answer.clone())),
            streamed(api, &finish("completed")),
        ])
        .await;
        let out = run_against(api, &server, &repo, &["--task", "map it", "--config", &config.arg()]).await;
        out.assert_code(0);
        let requests = model_requests(&server).await;
        assert_eq!(requests.len(), 3, "{api:?}: {}", out.stderr);
        assert_requests_conform(api, &requests);
        let schema_text = |index: usize| {
            let body: Value = serde_json::from_slice(&requests[index].body).expect("JSON");
            enforced_schema(api, &body).to_string()
        };
        assert!(schema_text(1).contains("modules_seen"), "{api:?}: {}", schema_text(1));
        assert!(
            !schema_text(0).contains("modules_seen"),
            "{api:?}: the main agent's own shape"
        );
        let result: Value =
            serde_json::from_str(delegate_result(&out)["output"].as_str().expect("text")).expect("JSON");
        assert_eq!(result, answer, "{api:?}");
    }
}

#[test]
fn a_call_outside_the_sub_agents_tools_is_rejected_and_never_run() {
    let repo = TestRepo::new();
    let lines = vec![
        line("root", delegate("explorer", "look around")),
        line(
            "root>explorer",
            reply(
                "write",
                &[("write_file", json!({"path": "planted.txt", "content": "x"}))],
            ),
        ),
        line("root>explorer", complete(json!("nothing to report"))),
        // `finish` is refused while the clone holds changes: it succeeds only if nothing was written.
        line("root", finish("completed")),
    ];
    let out = run(&repo, lines, &[]);
    out.assert_code(0);
    let rejected = of_agent(&out, "tool_rejected", "root>explorer");
    assert_eq!(rejected.len(), 1, "{}", out.stdout);
    assert_eq!(rejected[0]["tool"], "write_file");
    let reason = rejected[0]["reason"].as_str().expect("reason");
    assert!(reason.contains("not one of the tools of agent `explorer`"), "{reason}");
    assert!(out.events_of("unsaved_changes").is_empty());
    assert_eq!(delegate_result(&out)["output"], "nothing to report");
}

#[test]
fn a_budget_hit_inside_a_sub_agent_ends_it_and_the_caller_learns_why() {
    let repo = TestRepo::new();
    let with_usage = |mut value: Value, input: u64| {
        value["usage"] = json!({"input_tokens": input, "output_tokens": 100});
        value
    };
    let lines = vec![
        with_usage(line("root", delegate("explorer", "read everything")), 20_000),
        with_usage(
            line(
                "root>explorer",
                reply("read", &[("read_file", json!({"path": "README.md"}))]),
            ),
            28_000,
        ),
        with_usage(line("root>explorer", complete(json!("never sent"))), 1),
        with_usage(line("root", finish("completed")), 1),
    ];
    let out = run(&repo, lines, &["--max-tokens", "50000"]);
    out.assert_code(4);
    let result = delegate_result(&out);
    assert_eq!(result["ok"], false);
    let output = result["output"].as_str().expect("output");
    assert!(
        output.contains("agent `explorer` stopped before answering") && output.contains("--max-tokens 50000"),
        "{output}"
    );
    assert_eq!(of_agent(&out, "model_response", "root>explorer").len(), 1);
    let finished = &out.events_of("run_finished")[0];
    assert_eq!(finished["outcome"], "limit");
    assert_eq!(finished["usage"]["input_tokens"], 48_000, "one budget for every level");
}

/// An interrupt while a sub-agent waits for its model stops every level at once.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_reaches_a_sub_agent_at_once() {
    let repo = TestRepo::new();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(openai_stream(
            &delegate("explorer", "x"),
            "stop",
            openai_usage(120, 30, 0),
        ))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            openai_stream(&complete(json!("late")), "stop", openai_usage(120, 30, 0))
                .set_delay(Duration::from_secs(120)),
        )
        .with_priority(2)
        .mount(&server)
        .await;
    let mut upkeep = Upkeep::new()
        .args(["run", "--json", "--provider", "openai", "--task", "t", "--base-url"])
        .args([format!("{}/v1", server.uri())])
        .args(["--repo"])
        .args([repo.path()]);
    let child = upkeep.spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    while model_requests(&server).await.len() < 2 {
        assert!(Instant::now() < deadline, "the explorer never called the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let interrupted = Instant::now();
    let output = signal_and_wait(child, nix::sys::signal::Signal::SIGINT).await;
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(interrupted.elapsed() < Duration::from_secs(20), "stopped at once");
    assert_eq!(upkeep.leftover_temp_entries(), 0, "temporary clone removed");
}

/// Regression: one reply with 40 `delegate` calls under `--max-turns 2` made 402 model calls,
/// because each sub-agent had its own turn limit and nothing bounded them together. Now
/// `--max-turns` bounds every model call of the cycle, and one reply may delegate at most
/// `MAX_DELEGATIONS_PER_REPLY` times: the run stops at the limit after 2 calls in all.
#[test]
fn forty_delegations_in_one_reply_stay_within_max_turns_for_the_whole_cycle() {
    let repo = TestRepo::new();
    let fan_out: Vec<(&str, Value)> = (0..40)
        .map(|n| {
            (
                "delegate",
                json!({"agent": "explorer", "task": format!("look at part {n}")}),
            )
        })
        .collect();
    let mut lines = vec![line("root", reply("fan out", &fan_out))];
    // Each explorer looks nine times and answers on its tenth and last turn, so that every
    // delegation succeeds and the batch runs on: 1 + 40 * 10 + 1 calls without a bound.
    for n in 0..40 {
        lines.extend((0..9).map(|_| line("root>explorer", reply("look", &[("list_files", json!({"path": "."}))]))));
        lines.push(line("root>explorer", complete(json!(format!("part {n} seen")))));
    }
    lines.push(line("root", finish("completed")));
    let out = run(&repo, lines, &["--max-turns", "2"]);
    let calls = out.events_of("model_response").len();
    assert_eq!(calls, 2, "every agent's calls count against --max-turns 2");
    out.assert_code(4);
    assert!(out.stderr.contains("--max-turns 2 reached"), "{}", out.stderr);
    // The explorer's cut-off reaches the caller as the delegate call's failure; the other 39
    // calls never run.
    let result = delegate_result(&out);
    assert_eq!(result["ok"], false, "{result}");
    assert!(
        result["output"].as_str().is_some_and(|o| o.contains("--max-turns 2")),
        "{result}"
    );
    assert_eq!(
        of_agent(&out, "tool_call", "root").len(),
        1,
        "one delegation ran: {}",
        out.stdout
    );
}

/// A reply may start at most three sub-agents: the fourth `delegate` and everything after it
/// are reported to the model as skipped, with the cap, and never run.
#[test]
fn a_reply_delegates_at_most_three_times() {
    let repo = TestRepo::new();
    let fan_out: Vec<(&str, Value)> = (0..5)
        .map(|n| {
            (
                "delegate",
                json!({"agent": "explorer", "task": format!("look at part {n}")}),
            )
        })
        .collect();
    let mut lines = vec![line("root", reply("fan out", &fan_out))];
    lines.extend((0..3).map(|n| line("root>explorer", complete(json!(format!("answer {n}"))))));
    lines.push(line("root", finish("completed")));
    let out = run(&repo, lines, &[]);
    out.assert_code(0);
    assert_eq!(of_agent(&out, "model_response", "root>explorer").len(), 3);
    let delegated: Vec<Value> = of_agent(&out, "tool_result", "root")
        .into_iter()
        .filter(|e| e["tool"] == "delegate")
        .collect();
    assert_eq!(delegated.len(), 3, "{}", out.stdout);
    assert!(delegated.iter().all(|e| e["ok"] == true), "{delegated:?}");
    assert!(out.stderr.contains("per-reply caps"), "{}", out.stderr);
}
