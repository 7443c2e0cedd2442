//! What an OpenAI-compatible server says about the model it serves: its context window and,
//! where it has one, its own tokenizer.
//!
//! Why: a local server's window is whatever its operator started it with (`llama-server -c
//! 4096`, `vllm serve --max-model-len 8192`), which no table can know, and its tokenizer counts
//! a small model's tokens very differently from any estimate. Both servers publish what upkeep
//! needs:
//! - vLLM: `GET /v1/models` gives `data[].max_model_len`.
//! - llama.cpp's `llama-server`: `GET /v1/models` gives `data[].meta` (`n_ctx_train`, the length
//!   the model was trained for; some builds add `n_ctx`, the length the server runs with); `GET
//!   /props` gives `default_generation_settings.n_ctx`, the length one request may take; `POST
//!   /tokenize` with `{"content": TEXT}` answers `{"tokens": [...]}`.
//! - llama-cpp-python, Ollama's `/v1` and LM Studio's `/v1/models` list model names only.
//!
//! Asking is cheap and never in the way: a short timeout, at most once per run, and any failure
//! (a 404, a timeout, a body of another shape) means "the server says nothing", after which the
//! built-in table or the stated guess applies as before.

use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Value, json};

use super::http::{http_client, secret_header};

/// The longest wait for a server's self-description: it is local and answers at once, or it
/// does not know the endpoint.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest wait for a tokenizer count (a whole prompt, tokenised on a small machine).
const TOKENIZE_TIMEOUT: Duration = Duration::from_secs(20);
/// Windows outside these bounds are not believed (a server's misreport must not make every
/// request unfittable or unbounded).
const MIN_BELIEVED_WINDOW: u64 = 1024;
const MAX_BELIEVED_WINDOW: u64 = 100_000_000;

/// Where a server's window was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerField {
    /// llama-server's `GET /props`: `default_generation_settings.n_ctx`.
    PropsNCtx,
    /// `GET /v1/models`: `data[].meta.n_ctx` (llama-server builds that publish it).
    MetaNCtx,
    /// vLLM's `GET /v1/models`: `data[].max_model_len`.
    MaxModelLen,
    /// `GET /v1/models`: `data[].meta.n_ctx_train`, the trained length, when the server says
    /// nothing of the length it runs with.
    MetaNCtxTrain,
}

impl ServerField {
    /// The endpoint and field, as log lines and docs name them.
    pub fn describe(self) -> &'static str {
        match self {
            ServerField::PropsNCtx => "/props default_generation_settings.n_ctx",
            ServerField::MetaNCtx => "/v1/models data[].meta.n_ctx",
            ServerField::MaxModelLen => "/v1/models data[].max_model_len",
            ServerField::MetaNCtxTrain => "/v1/models data[].meta.n_ctx_train",
        }
    }
}

/// A window the server published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerWindow {
    pub tokens: u64,
    pub field: ServerField,
}

/// What one server said about itself.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerFacts {
    pub window: Option<ServerWindow>,
    /// llama-server's `/tokenize`, when the server is one.
    pub tokenize_url: Option<String>,
}

/// Asks the server at `base_url` (the `…/v1` of `--base-url`) about `model`.
pub(crate) async fn ask(base_url: &str, model: &str, api_key: Option<&SecretString>) -> ServerFacts {
    let Ok(client) = http_client("openai", ASK_TIMEOUT) else {
        return ServerFacts::default();
    };
    let root = base_url.strip_suffix("/v1").unwrap_or(base_url);
    let models = get_json(&client, &format!("{base_url}/models"), api_key).await;
    let entry = models.as_ref().and_then(|models| model_entry(models, model));
    let meta = entry
        .and_then(|entry| entry.get("meta"))
        .filter(|meta| meta.is_object());
    let mut facts = ServerFacts::default();
    let published = |value: Option<&Value>, field| {
        value
            .and_then(Value::as_u64)
            .filter(|tokens| (MIN_BELIEVED_WINDOW..=MAX_BELIEVED_WINDOW).contains(tokens))
            .map(|tokens| ServerWindow { tokens, field })
    };
    facts.window = published(meta.and_then(|meta| meta.get("n_ctx")), ServerField::MetaNCtx).or_else(|| {
        published(
            entry.and_then(|entry| entry.get("max_model_len")),
            ServerField::MaxModelLen,
        )
    });
    if meta.is_some() {
        // llama-server: its runtime window is in /props, and it has a tokenizer endpoint.
        facts.tokenize_url = Some(format!("{root}/tokenize"));
        if facts.window.is_none() {
            let props = get_json(&client, &format!("{root}/props"), api_key).await;
            facts.window = published(
                props
                    .as_ref()
                    .and_then(|props| props.pointer("/default_generation_settings/n_ctx")),
                ServerField::PropsNCtx,
            )
            .or_else(|| {
                published(
                    meta.and_then(|meta| meta.get("n_ctx_train")),
                    ServerField::MetaNCtxTrain,
                )
            });
        }
    }
    facts
}

/// The `data[]` entry of `model`, or the only entry (a llama-server serves one model under
/// whatever name it is asked by).
fn model_entry<'v>(models: &'v Value, model: &str) -> Option<&'v Value> {
    let data = models.get("data")?.as_array()?;
    data.iter()
        .find(|entry| entry.get("id").and_then(Value::as_str) == Some(model))
        .or(match data.as_slice() {
            [only] => Some(only),
            _ => None,
        })
}

async fn get_json(client: &reqwest::Client, url: &str, api_key: Option<&SecretString>) -> Option<Value> {
    json_answer(client.get(url).timeout(ASK_TIMEOUT), api_key).await
}

/// The JSON a server answers `request` with, the key sent as a bearer token; `None` on any
/// failure (what is asked here only improves a run, so nothing here may stop it).
async fn json_answer(mut request: reqwest::RequestBuilder, api_key: Option<&SecretString>) -> Option<Value> {
    if let Some(key) = api_key {
        request = request.header(
            reqwest::header::AUTHORIZATION,
            secret_header("openai", "Bearer ", key).ok()?,
        );
    }
    let response = request.send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json().await.ok()
}

/// Tokens llama-server's tokenizer counts in `text`; `None` on any failure.
pub(crate) async fn count_tokens(url: &str, text: &str, api_key: Option<&SecretString>) -> Option<u64> {
    let client = http_client("openai", TOKENIZE_TIMEOUT).ok()?;
    let request = client
        .post(url)
        .timeout(TOKENIZE_TIMEOUT)
        .json(&json!({"content": text}));
    let body = json_answer(request, api_key).await?;
    Some(body.get("tokens")?.as_array()?.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_entry_is_the_named_one_or_the_only_one() {
        let two = json!({"data": [{"id": "a"}, {"id": "b", "max_model_len": 4096}]});
        assert_eq!(
            model_entry(&two, "b").and_then(|e| e.get("max_model_len")),
            Some(&json!(4096))
        );
        assert_eq!(model_entry(&two, "c"), None);
        let one = json!({"data": [{"id": "qwen.gguf"}]});
        assert_eq!(model_entry(&one, "gpt-4.1"), Some(&json!({"id": "qwen.gguf"})));
        assert_eq!(model_entry(&json!({"data": "nonsense"}), "a"), None);
        assert_eq!(model_entry(&json!([1, 2]), "a"), None);
    }
}
