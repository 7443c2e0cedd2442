//! The conformance check itself: it must reject bodies the vendors' descriptions do not allow
//! (else every "conforms" elsewhere proves nothing), and the committed schemas must be what
//! `tests/conformance/generate.py` makes from the descriptions.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use super::support::conformance::{Api, Body, violations};

#[test]
fn deliberately_wrong_bodies_are_rejected() {
    let wrong = [
        // A role the API does not have.
        (
            Api::OpenAi,
            Body::Request,
            json!({"model": "gpt-4.1", "messages": [{"role": "robot", "content": "hi"}], "stream": true}),
        ),
        // `include_usage` is a boolean.
        (
            Api::OpenAi,
            Body::Request,
            json!({"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": "yes"}}),
        ),
        // A chunk without `choices`' required fields.
        (
            Api::OpenAi,
            Body::StreamChunk,
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"delta": {}}]}),
        ),
        // There is no "permanent" cache. (Checked on the system prompt: the SDK's message
        // content union also admits its open response-side blocks, so a message's block is
        // checked less strictly than the system prompt's.)
        (
            Api::Anthropic,
            Body::Request,
            json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "stream": true,
                   "system": [{"type": "text", "text": "s", "cache_control": {"type": "permanent"}}],
                   "messages": [{"role": "user", "content": "hi"}]}),
        ),
        // `max_tokens` is required.
        (
            Api::Anthropic,
            Body::Request,
            json!({"model": "claude-sonnet-4-5", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        ),
        // A text delta without its text.
        (
            Api::Anthropic,
            Body::StreamChunk,
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}),
        ),
        // The proto has no such field (Google refuses unknown names).
        (
            Api::Gemini,
            Body::Request,
            json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"responseMimeTyp": "application/json"}}),
        ),
        // `model` travels in the URL path, never in the body.
        (
            Api::Gemini,
            Body::Request,
            json!({"model": "models/gemini-2.5-flash", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
        ),
        // A token count that is not a number.
        (
            Api::Gemini,
            Body::StreamChunk,
            json!({"usageMetadata": {"promptTokenCount": "many"}}),
        ),
        // `num_ctx` is an integer.
        (
            Api::Ollama,
            Body::Request,
            json!({"model": "llama3.1", "messages": [], "options": {"num_ctx": "big"}}),
        ),
        // `done` is a boolean.
        (
            Api::Ollama,
            Body::StreamChunk,
            json!({"model": "llama3.1", "done": "yes"}),
        ),
    ];
    for (api, body, value) in wrong {
        assert!(
            !violations(api, body, &value).is_empty(),
            "{api:?} {body:?} accepted a wrong body: {value}"
        );
    }
}

#[test]
fn the_committed_schemas_are_what_the_generator_makes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let specs = std::env::var_os("CONFORMANCE_SPECS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/conformance/specs"));
    if !specs.is_dir() {
        eprintln!("SKIP: no vendor API descriptions at {}", specs.display());
        return;
    }
    let has_yaml = Command::new("python3")
        .args(["-c", "import yaml"])
        .status()
        .is_ok_and(|status| status.success());
    if !has_yaml {
        eprintln!("SKIP: python3 with PyYAML is needed to run tests/conformance/generate.py");
        return;
    }
    let out = tempfile::tempdir().expect("tempdir");
    let status = Command::new("python3")
        .arg(root.join("tests/conformance/generate.py"))
        .arg("--out")
        .arg(out.path())
        .arg(&specs)
        .status()
        .expect("python3 runs");
    assert!(status.success(), "generate.py failed");
    for name in ["openai", "anthropic", "gemini", "ollama"] {
        let file = format!("{name}.json");
        let made = std::fs::read_to_string(out.path().join(&file)).expect("generated");
        let committed = std::fs::read_to_string(root.join("tests/conformance").join(&file)).expect("committed");
        assert!(
            made == committed,
            "tests/conformance/{file} is stale: run python3 tests/conformance/generate.py"
        );
    }
}
