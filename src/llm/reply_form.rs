//! Which form of structured output a provider sends, and stepping down when a server refuses it.
//!
//! Why a module of its own: servers differ in what they take. OpenAI's API takes a JSON schema;
//! OpenAI-compatible servers may refuse it (with a 400, or a 500 when their request
//! validation fails on it) yet take `json_object` with the schema; some take neither. A run
//! starts at the strongest form and steps down one form per refusal, for the rest of the run, so a
//! refusal costs one request; a form the operator chose (`--structured-output`) is kept.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::kinds::StructuredOutputMode;

/// How a reply's shape is asked of the server, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyForm {
    /// The API's own schema form (`json_schema`, Anthropic's `output_config`, Gemini's
    /// `responseSchema`, Ollama's `format`).
    JsonSchema,
    /// OpenAI-compatible servers: `response_format: {type: json_object, schema}`, which
    /// servers such as llama.cpp's Python server enforce with a grammar.
    JsonObject,
    /// No schema: the prompt asks for the shape, the lenient parser reads it.
    Instruction,
}

impl ReplyForm {
    fn name(self) -> &'static str {
        match self {
            ReplyForm::JsonSchema => "a JSON schema",
            ReplyForm::JsonObject => "json_object with the schema",
            ReplyForm::Instruction => "JSON asked for in plain text",
        }
    }
}

/// The forms of an API that has no `json_object` form.
pub(crate) const SCHEMA_OR_INSTRUCTION: &[ReplyForm] = &[ReplyForm::JsonSchema, ReplyForm::Instruction];
/// The forms of the Chat Completions API.
pub(crate) const CHAT_COMPLETIONS_FORMS: &[ReplyForm] =
    &[ReplyForm::JsonSchema, ReplyForm::JsonObject, ReplyForm::Instruction];

/// Words that name the structured-output parameter itself: a refusal on any status that names
/// one of them is about the form, not a transient failure (a server that validates the request
/// may answer 500 to a form it does not know).
const FORM_PARAMETERS: &[&str] = &["response_format", "json_schema"];

/// Which form a provider sends now. With `--structured-output auto` it starts at the strongest
/// form and steps down once per refusal, for the rest of the run; a form chosen by hand is kept
/// whatever the server says.
#[derive(Debug)]
pub(crate) struct StructuredOutput {
    forms: &'static [ReplyForm],
    /// Index into `forms` of the form sent now.
    current: AtomicUsize,
    steps_down: bool,
}

impl StructuredOutput {
    /// The state for `mode` on an API with `forms` (strongest first, ending with
    /// [`ReplyForm::Instruction`]).
    pub(crate) fn new(mode: StructuredOutputMode, forms: &'static [ReplyForm]) -> Self {
        let wanted = match mode {
            StructuredOutputMode::Auto | StructuredOutputMode::JsonSchema => ReplyForm::JsonSchema,
            StructuredOutputMode::JsonObject => ReplyForm::JsonObject,
            StructuredOutputMode::Off => ReplyForm::Instruction,
        };
        // An API without the chosen form asks by instruction.
        let current = forms
            .iter()
            .position(|form| *form == wanted)
            .unwrap_or(forms.len().saturating_sub(1));
        Self {
            forms,
            current: AtomicUsize::new(current),
            steps_down: mode == StructuredOutputMode::Auto,
        }
    }

    /// The form sent now.
    pub(crate) fn form(&self) -> ReplyForm {
        self.forms
            .get(self.current.load(Ordering::Relaxed))
            .copied()
            .unwrap_or(ReplyForm::Instruction)
    }

    /// Whether `form` sends a schema at all.
    pub(crate) fn enabled(&self) -> bool {
        self.form() != ReplyForm::Instruction
    }

    /// Whether an HTTP error is the server refusing the form it was sent: a 400 or 422 whose
    /// message mentions one of `markers` (lowercase), or a server error (5xx) that names the
    /// structured-output parameter itself. Other errors are real request errors or
    /// transient failures, and are not answered by stepping down.
    pub(crate) fn is_refusal(&self, status: u16, message: &str, markers: &[&str]) -> bool {
        if !self.steps_down || !self.enabled() {
            return false;
        }
        let message = message.to_lowercase();
        let named = |words: &[&str]| words.iter().any(|word| message.contains(word));
        match status {
            400 | 422 => named(markers),
            // Auth and rate-limit answers are never about the form, whatever they quote.
            500..=599 => named(FORM_PARAMETERS),
            _ => false,
        }
    }

    /// Sends with the current form; on a refusal steps down to the next form for the rest of
    /// the run and sends the same request again, until a form is accepted or none is left. Each
    /// refusal costs one request.
    pub(crate) async fn send_with_fallback<T, F, Fut>(
        &self,
        provider: &'static str,
        markers: &[&str],
        send: F,
    ) -> Result<T, super::ProviderError>
    where
        F: Fn(ReplyForm) -> Fut,
        Fut: std::future::Future<Output = Result<T, super::ProviderError>>,
    {
        loop {
            let form = self.form();
            let error = match send(form).await {
                Err(error) => error,
                ok => return ok,
            };
            let refused = match &error {
                super::ProviderError::Http { status, message, .. } if self.is_refusal(*status, message, markers) => {
                    self.step_down_from(form, provider, message);
                    true
                }
                _ => false,
            };
            // Another form to try, or the error as it is.
            if !refused || self.form() == form {
                return Err(error);
            }
        }
    }

    /// Moves past `form`; says so once, however many calls race here.
    fn step_down_from(&self, form: ReplyForm, provider: &'static str, reason: &str) {
        let Some(at) = self.forms.iter().position(|known| *known == form) else {
            return;
        };
        let Some(next) = self.forms.get(at + 1) else {
            return;
        };
        if self
            .current
            .compare_exchange(at, at + 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            tracing::warn!(
                provider,
                reason,
                "the server refused {}; asking with {} for the rest of the run",
                form.name(),
                next.name()
            );
        }
    }
}

/// A provider that asks for its reply with the API's own schema form where the server takes it,
/// and with the instruction alone after a refusal (Anthropic, Gemini, Ollama): its [`super::Provider`]
/// is this one, so the three cannot differ in how they step down.
#[async_trait::async_trait]
pub(crate) trait SchemaOrInstruction: Send + Sync {
    /// The provider's name, as events and errors give it.
    const NAME: &'static str;
    /// What its servers answer when they refuse a schema.
    const REFUSAL_MARKERS: &'static [&'static str];

    fn model_name(&self) -> &str;

    /// The form the run asks in now.
    fn structured_output(&self) -> &StructuredOutput;

    /// One request, with the reply schema (`structured`) or the instruction alone.
    async fn exchange(
        &self,
        request: &super::CompletionRequest<'_>,
        structured: bool,
    ) -> Result<super::Completion, super::ProviderError>;
}

#[async_trait::async_trait]
impl<T: SchemaOrInstruction> super::Provider for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn model(&self) -> &str {
        self.model_name()
    }

    async fn complete(&self, request: super::CompletionRequest<'_>) -> Result<super::Completion, super::ProviderError> {
        self.structured_output()
            .send_with_fallback(T::NAME, T::REFUSAL_MARKERS, |form| {
                let request = &request;
                async move { self.exchange(request, form == ReplyForm::JsonSchema).await }
            })
            .await
    }
}

#[cfg(test)]
#[path = "reply_form_tests.rs"]
mod tests;
