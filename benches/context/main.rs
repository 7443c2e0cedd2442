//! `cargo bench --bench context`: what the history policy and prompt caching save, on a
//! scripted cycle the real `upkeep` binary works against a loopback model server that
//! simulates each provider's prompt cache (see `sim.rs`).
//!
//! The workload: a generated repository of 10,000 files (`repo.rs`) and a scripted 20-turn
//! cycle that lists a folder, searches, reads files of a few KB to 60 KB, edits four of them and
//! opens a pull request (`--forge none`: the branch stays in the clone). It runs four times:
//! with OpenAI's and with Anthropic's API, each once as upkeep runs (masking, cache hints) and
//! once with full history (`--full-history`, a benchmark knob that turns masking off). Then a
//! 60-turn variant with `--context-window 32768` against a server that refuses (and counts)
//! any request over that window, and the same 60 turns on a small model's window (8,192 tokens,
//! a model upkeep's tokenizer does not know, so its estimates are calibrated by the server's
//! counts), which reports how much of each request a prompt cache could serve: the share of
//! prompt tokens that are a prefix of an earlier request (cache reuse).
//!
//! Printed: input tokens sent, billed input-equivalent tokens (input at 1, cache reads at 0.1
//! and writes at 1.25 with Anthropic; cached input at 0.25 with gpt-4.1), the largest request,
//! side by side with full history billed without caching, and one PASS/MISS line per goal.

#![allow(clippy::print_stdout, reason = "the table on stdout is what a benchmark is for")]

#[path = "../support/git.rs"]
mod git;
mod repo;
mod sim;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};
use sim::{Api, Billed, SimModel};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Goals from the issue.
const SENT_GOAL: f64 = 0.50;
const ANTHROPIC_BILLED_GOAL: f64 = 0.15;
const OPENAI_BILLED_GOAL: f64 = 0.25;
const SMALL_WINDOW: u64 = 32_768;
/// A small local model's window, and the share of its prompt tokens that should be a reused
/// prefix: cuts in large steps keep the prefix stable for several turns.
const TINY_WINDOW: u64 = 8_192;
const CACHE_REUSE_GOAL: f64 = 0.50;

fn call(tool: &str, arguments: Value) -> Value {
    json!({"tool_name": tool, "arguments": arguments})
}

fn turn(plan: &str, calls: Vec<Value>) -> String {
    json!({"plan": plan, "tool_calls": calls}).to_string()
}

fn read(path: &str) -> Value {
    call("read_file", json!({"path": path}))
}

fn search(pattern: &str) -> Value {
    call("search_files", json!({"pattern": pattern}))
}

fn edit(path: &str, old: &str, new: &str) -> Value {
    call("edit_file", json!({"path": path, "old_text": old, "new_text": new}))
}

/// The scripted 20-turn cycle: explore, read, edit, check, open a pull request.
fn twenty_turns() -> Vec<String> {
    vec![
        turn(
            "1. See what the HTTP code looks like.",
            vec![call("list_files", json!({"path": "src/net/http"}))],
        ),
        turn("2. Find where headers are parsed.", vec![search("fn parse_header")]),
        turn("3. Read the parser.", vec![read("src/net/http/parser.rs")]),
        turn(
            "4. Read the header map it fills.",
            vec![read("src/net/http/headers.rs")],
        ),
        turn(
            "5. Find every user of the header limit.",
            vec![search("MAX_HEADER_BYTES")],
        ),
        turn("6. Read the module root.", vec![read("src/net/http/mod.rs")]),
        turn("7. Read the parser's tests.", vec![read("tests/http_parser.rs")]),
        turn("8. Read the documentation of the limits.", vec![read("docs/http.md")]),
        turn(
            "9. Chunked bodies share the limit: read them.",
            vec![read("src/net/http/chunked.rs")],
        ),
        turn("10. Read the limits module.", vec![read("src/net/limits.rs")]),
        turn(
            "11. Raise the limit where it is defined.",
            vec![edit(
                "src/net/limits.rs",
                "pub const MAX_HEADER_BYTES: usize = 8192;",
                "pub const MAX_HEADER_BYTES: usize = 16384;",
            )],
        ),
        turn(
            "12. Make the parser reject over-long lines early.",
            vec![edit(
                "src/net/http/parser.rs",
                "fn parse_header(line: &str) -> Option<(String, String)> {",
                "fn parse_header(line: &str) -> Option<(String, String)> {\n    if line.len() > crate::net::limits::MAX_HEADER_BYTES {\n        return None;\n    }",
            )],
        ),
        turn("13. Read the changelog to add an entry.", vec![read("CHANGELOG.md")]),
        turn(
            "14. Add the changelog entry.",
            vec![edit(
                "CHANGELOG.md",
                "## Unreleased",
                "## Unreleased\n\n- Header lines may be up to 16 KiB.",
            )],
        ),
        turn("15. Check the parser as edited.", vec![read("src/net/http/parser.rs")]),
        turn(
            "16. Check the call sites of parse_header.",
            vec![search("parse_header\\(")],
        ),
        turn(
            "17. Add a test for the new limit.",
            vec![edit(
                "tests/http_parser.rs",
                "fn parses_a_simple_header() {",
                "fn rejects_an_over_long_header() {\n    assert!(parse_header(&\"x\".repeat(20_000)).is_none());\n}\n\nfn parses_a_simple_header() {",
            )],
        ),
        turn(
            "18. Update the documentation.",
            vec![edit(
                "docs/http.md",
                "## Header limits",
                "## Header limits\n\nHeader lines may be up to 16 KiB.",
            )],
        ),
        turn(
            "19. Open the pull request.",
            vec![call(
                "create_pull_request",
                json!({"title": "Raise the header limit to 16 KiB", "body": "Raises MAX_HEADER_BYTES, rejects longer lines early, tests and documents it."}),
            )],
        ),
        turn(
            "20. Done.",
            vec![call(
                "finish",
                json!({"status": "completed", "summary": "header limit raised"}),
            )],
        ),
    ]
}

/// 60 turns: the same work, with 40 more reads of large and small files before the edits.
fn sixty_turns() -> Vec<String> {
    let mut script = twenty_turns();
    let large: Vec<&str> = repo::KNOWN.iter().map(|(path, _, _)| *path).collect();
    let extra: Vec<String> = (0..40)
        .map(|index| {
            turn(
                &format!("Look again at {}.", large[index % large.len()]),
                vec![read(large[index % large.len()])],
            )
        })
        .collect();
    script.splice(10..10, extra);
    script
}

/// What one run sent and was billed.
struct Measured {
    billed: Vec<Billed>,
    over_window: usize,
    failed_calls: usize,
}

impl Measured {
    fn sent(&self) -> u64 {
        self.billed.iter().map(|b| b.total).sum()
    }
    /// The share of prompt tokens that were a prefix of an earlier request.
    fn cache_reuse(&self) -> f64 {
        let cached: u64 = self.billed.iter().map(|b| b.cached).sum();
        cached as f64 / self.sent().max(1) as f64
    }
    fn largest(&self) -> u64 {
        self.billed.iter().map(|b| b.total).max().unwrap_or(0)
    }
    /// Input-equivalent tokens at the provider's rates (1 = the input price).
    fn billed_as(&self, api: Api) -> f64 {
        self.billed
            .iter()
            .map(|b| match api {
                Api::OpenAi => b.uncached() as f64 + 0.25 * b.cached as f64,
                Api::Anthropic => b.uncached() as f64 + 0.1 * b.cached as f64 + 1.25 * b.written as f64,
            })
            .sum()
    }
}

async fn run(api: Api, repository: &Path, script: Vec<String>, extra: &[&str], window: Option<u64>) -> Measured {
    run_model(api, None, repository, script, extra, window).await
}

/// [`run`] with another model name than the API's own flagship (`model_name`).
async fn run_model(
    api: Api,
    model_name: Option<&str>,
    repository: &Path,
    script: Vec<String>,
    extra: &[&str],
    window: Option<u64>,
) -> Measured {
    let server = MockServer::start().await;
    let model = Arc::new(SimModel::new(api, script, window));
    // A model of another name plays a small model behind llama-server, which publishes its
    // window in `/v1/models` and counts tokens at `/tokenize` (with this simulation's tokenizer).
    if let (Some(name), Some(tokens)) = (model_name, window) {
        Mock::given(method("GET"))
            .and(path("/v1/models"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "object": "list",
                "data": [{"id": name, "object": "model", "created": 0, "owned_by": "llamacpp",
                          "meta": {"n_ctx": tokens, "n_ctx_train": tokens}}],
            })))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/tokenize"))
            .respond_with(|request: &wiremock::Request| {
                let content = serde_json::from_slice::<Value>(&request.body)
                    .ok()
                    .and_then(|body| body["content"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                let count = tiktoken_rs::o200k_base_singleton().encode_ordinary(&content).len();
                ResponseTemplate::new(200).set_body_json(json!({"tokens": vec![0; count]}))
            })
            .with_priority(1)
            .mount(&server)
            .await;
    }
    Mock::given(method("POST"))
        .respond_with(SharedModel(Arc::clone(&model)))
        .mount(&server)
        .await;
    // The simulated server plays each vendor's own API and model: without `--model`, a compatible
    // server would get an unknown model's small window.
    let (provider, base, flagship) = match api {
        Api::OpenAi => ("openai", format!("{}/v1", server.uri()), "gpt-4.1"),
        Api::Anthropic => ("anthropic", server.uri(), "claude-sonnet-4-5"),
    };
    let model_name = model_name.unwrap_or(flagship);
    let mut command = Command::new(env!("CARGO_BIN_EXE_upkeep"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::temp_dir())
        .env("ANTHROPIC_API_KEY", "bench-key")
        .args([
            "run",
            "--json",
            "--quiet",
            "--forge",
            "none",
            "--max-turns",
            "80",
            // The workload measures the main agent's history; the reviewer's calls before the
            // push (docs/agents.md) are not part of it.
            "--no-review",
            "--provider",
            provider,
        ])
        .args([
            "--base-url",
            &base,
            "--model",
            model_name,
            "--task",
            "Raise the HTTP header limit to 16 KiB",
            "--repo",
        ])
        .arg(repository)
        .args(extra);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .expect("upkeep runs");
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let failed_calls = events
        .iter()
        .filter(|event| event["type"] == "tool_result" && event["ok"] == false)
        .count();
    if !output.status.success() {
        println!(
            "  (upkeep exited with {:?}: {})",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        );
    }
    let (billed, over_window) = model.billed();
    if std::env::var_os("UPKEEP_BENCH_VERBOSE").is_some() {
        for (index, b) in billed.iter().enumerate() {
            println!(
                "    request {:>2}: {:>6} tokens, {:>6} cached, {:>6} written",
                index + 1,
                b.total,
                b.cached,
                b.written
            );
        }
        for event in events
            .iter()
            .filter(|event| event["type"] == "tool_result" && event["ok"] == false)
        {
            println!("    failed: {} {}", event["tool"], event["output"]);
        }
    }
    Measured {
        billed,
        over_window,
        failed_calls,
    }
}

/// wiremock wants the responder by value; the benchmark reads its state afterwards.
struct SharedModel(Arc<SimModel>);

impl wiremock::Respond for SharedModel {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        self.0.respond(request)
    }
}

fn percent(part: f64, whole: f64) -> String {
    format!("{:.1}%", 100.0 * part / whole.max(1.0))
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let started = std::time::Instant::now();
        let repository = repo::repository();
        println!("repository: {} files ({})", repo::FILES, repository.display());
        let mut lines = Vec::new();
        for (api, name) in [(Api::OpenAi, "OpenAI, gpt-4.1 pricing"), (Api::Anthropic, "Anthropic, claude-sonnet-4-5 pricing")] {
            let full = run(api, &repository, twenty_turns(), &["--full-history"], None).await;
            let ours = run(api, &repository, twenty_turns(), &[], None).await;
            let full_uncached = full.sent() as f64;
            println!("\n{name}: 20 turns ({} and {} requests; failed tool calls: {} and {})", full.billed.len(), ours.billed.len(), full.failed_calls, ours.failed_calls);
            println!("  {:<34} {:>16} {:>16} {:>16}", "", "full, no cache", "full, cached", "upkeep");
            println!("  {:<34} {:>16} {:>16} {:>16}", "input tokens sent", full.sent(), full.sent(), ours.sent());
            println!(
                "  {:<34} {:>16.0} {:>16.0} {:>16.0}",
                "billed input-equivalent tokens",
                full_uncached,
                full.billed_as(api),
                ours.billed_as(api)
            );
            println!("  {:<34} {:>16} {:>16} {:>16}", "largest request (tokens)", full.largest(), full.largest(), ours.largest());
            println!(
                "  {:<34} {:>16} {:>16} {:>16}",
                "share of full history, no cache",
                "100%",
                percent(full.billed_as(api), full_uncached),
                percent(ours.billed_as(api), full_uncached)
            );
            let sent_ratio = ours.sent() as f64 / full_uncached;
            lines.push(format!(
                "{}: {name}: input sent {} of full history (goal <= {:.0}%)",
                verdict(sent_ratio <= SENT_GOAL),
                percent(ours.sent() as f64, full_uncached),
                SENT_GOAL * 100.0
            ));
            let goal = match api {
                Api::OpenAi => OPENAI_BILLED_GOAL,
                Api::Anthropic => ANTHROPIC_BILLED_GOAL,
            };
            let billed_ratio = ours.billed_as(api) / full_uncached;
            lines.push(format!(
                "{}: {name}: billed input {} of full history uncached (goal <= {:.0}%)",
                verdict(billed_ratio <= goal),
                percent(ours.billed_as(api), full_uncached),
                goal * 100.0
            ));
        }
        let window = SMALL_WINDOW.to_string();
        let long = run(Api::OpenAi, &repository, sixty_turns(), &["--context-window", &window], Some(SMALL_WINDOW)).await;
        println!(
            "\n60 turns, --context-window {SMALL_WINDOW} (OpenAI): {} requests answered, {} refused as over the window, largest {} tokens, failed tool calls: {}",
            long.billed.len(),
            long.over_window,
            long.largest(),
            long.failed_calls
        );
        lines.push(format!(
            "{}: 60 turns with --context-window {SMALL_WINDOW}: {} requests over the window, largest {} tokens (goal: none over)",
            verdict(long.over_window == 0 && long.largest() <= SMALL_WINDOW && long.billed.len() >= 60),
            long.over_window,
            long.largest()
        ));
        let tiny_window = TINY_WINDOW.to_string();
        let tiny = run_model(
            Api::OpenAi,
            Some("qwen2.5-coder-7b-instruct"),
            &repository,
            sixty_turns(),
            &["--context-window", &tiny_window],
            Some(TINY_WINDOW),
        )
        .await;
        println!(
            "\n60 turns, --context-window {TINY_WINDOW}, a model of unknown tokenizer (OpenAI-compatible): {} requests answered, {} refused as over the window, largest {} tokens; {} of {} prompt tokens were a reused prefix ({}); failed tool calls: {}",
            tiny.billed.len(),
            tiny.over_window,
            tiny.largest(),
            tiny.billed.iter().map(|b| b.cached).sum::<u64>(),
            tiny.sent(),
            percent(tiny.cache_reuse(), 1.0),
            tiny.failed_calls
        );
        lines.push(format!(
            "{}: 60 turns with --context-window {TINY_WINDOW}: cache reuse {} of prompt tokens, {} over the window (goal: >= {:.0}%, none over)",
            verdict(tiny.cache_reuse() >= CACHE_REUSE_GOAL && tiny.over_window == 0 && tiny.billed.len() >= 60),
            percent(tiny.cache_reuse(), 1.0),
            tiny.over_window,
            CACHE_REUSE_GOAL * 100.0
        ));
        println!();
        for line in lines {
            println!("{line}");
        }
        println!("(benchmark took {:.0} s)", started.elapsed().as_secs_f64());
    });
}
