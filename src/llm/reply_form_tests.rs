use super::*;

#[test]
fn refusal_is_a_400_mentioning_the_schema_or_any_error_naming_the_parameter() {
    let state = StructuredOutput::new(StructuredOutputMode::Auto, SCHEMA_OR_INSTRUCTION);
    assert!(state.is_refusal(400, "response_format json_schema is not supported", &["json_schema"]));
    assert!(!state.is_refusal(401, "json_schema", &["json_schema"]));
    assert!(!state.is_refusal(400, "max_tokens too large", &["json_schema"]));
    // A server that validates the request answers 500 to a form it does not know.
    assert!(state.is_refusal(
        500,
        "('body', 'response_format', 'type'): Input should be 'text' or 'json_object'",
        &["schema"]
    ));
    assert!(
        !state.is_refusal(500, "model crashed", &["schema"]),
        "a real 5xx is retried, not refused"
    );
    assert!(
        !state.is_refusal(503, "schema cache warming up", &["schema"]),
        "only the parameter's own name counts on 5xx"
    );
}

/// Each refusal costs one request and steps down one form, for the rest of the run; a form
/// chosen by hand is kept whatever the server says.
#[tokio::test]
async fn auto_steps_down_once_per_refusal_and_a_chosen_form_stays() {
    use std::sync::Mutex;
    let refusing = |accepts: ReplyForm| {
        let sent = Mutex::new(Vec::new());
        (sent, accepts)
    };
    let (sent, accepts) = refusing(ReplyForm::Instruction);
    let state = StructuredOutput::new(StructuredOutputMode::Auto, CHAT_COMPLETIONS_FORMS);
    let result = state
        .send_with_fallback("openai", &["schema"], |form| {
            sent.lock().expect("lock").push(form);
            async move {
                if form == accepts {
                    Ok(())
                } else {
                    Err(crate::llm::ProviderError::Http {
                        provider: "openai",
                        status: 500,
                        message: "response_format: Input should be 'text'".into(),
                        retry_after: None,
                        url: "http://127.0.0.1/v1/chat/completions".into(),
                    })
                }
            }
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(
        *sent.lock().expect("lock"),
        [ReplyForm::JsonSchema, ReplyForm::JsonObject, ReplyForm::Instruction]
    );
    assert_eq!(state.form(), ReplyForm::Instruction, "kept for the rest of the run");

    let chosen = StructuredOutput::new(StructuredOutputMode::JsonObject, CHAT_COMPLETIONS_FORMS);
    assert_eq!(chosen.form(), ReplyForm::JsonObject);
    assert!(
        !chosen.is_refusal(400, "json_schema", &["json_schema"]),
        "chosen by hand"
    );
    assert_eq!(
        StructuredOutput::new(StructuredOutputMode::JsonObject, SCHEMA_OR_INSTRUCTION).form(),
        ReplyForm::Instruction,
        "an API without json_object asks by instruction"
    );
    assert_eq!(
        StructuredOutput::new(StructuredOutputMode::Off, CHAT_COMPLETIONS_FORMS).form(),
        ReplyForm::Instruction
    );
}
