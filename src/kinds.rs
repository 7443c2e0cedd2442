//! The closed choices of the command line (which model API, which forge), shared by the
//! command line that parses them, the settings that resolve them and the parts that act on them,
//! so that none of those has to import another's internals.

use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Openai,
    Anthropic,
    Gemini,
    Ollama,
    Replay,
}

impl ProviderKind {
    /// The model asked when `--model` names none (`replay` has no model).
    pub const fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Openai => "gpt-4.1",
            ProviderKind::Anthropic => "claude-sonnet-4-5",
            ProviderKind::Gemini => "gemini-2.5-flash",
            ProviderKind::Ollama => "llama3.1",
            ProviderKind::Replay => "replay",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
            ProviderKind::Ollama => "ollama",
            ProviderKind::Replay => "replay",
        }
    }
}

/// `--structured-output`: how the reply's shape is asked of the model's server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum StructuredOutputMode {
    // The strongest form the server takes: a JSON schema, stepping down once per refusal.
    #[default]
    Auto,
    // Always the API's JSON schema form.
    JsonSchema,
    // Always `response_format: json_object` with the schema (OpenAI-compatible servers such as
    // llama.cpp's Python server); other APIs ask by instruction.
    JsonObject,
    // No schema: the shape is asked for in the prompt and read by the lenient parser.
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    Github,
    Local,
    None,
}
