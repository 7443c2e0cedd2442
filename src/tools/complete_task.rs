//! `complete_task{answer}`: a sub-agent's last call. Offered only to sub-agents; its answer
//! becomes the result of the caller's `delegate` call (or the reviewer's verdict).
//!
//! An agent with an output schema must answer with a JSON object that satisfies it: the schema
//! is the `answer` argument's schema (so providers with structured output enforce it), and the
//! call checks it again on arrival ([`AnswerSchema::check`]); an answer that does not match is
//! this call's error, so the sub-agent fixes it on its next turn, as with a malformed reply.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Invocation, ToolClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use crate::config::answer_schema::AnswerSchema;

pub(crate) struct CompleteTask {
    schema: Option<Arc<AnswerSchema>>,
}

impl CompleteTask {
    /// `complete_task` for an agent that answers in text (`None`) or with a schema's object.
    pub(crate) fn new(schema: Option<Arc<AnswerSchema>>) -> Self {
        Self { schema }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompleteTaskArgs {
    /// your answer, complete in itself: the caller sees nothing else of your work
    // Text, or the object of the agent's output schema (which then replaces this schema).
    #[schemars(with = "String")]
    answer: Value,
}

#[async_trait]
impl TypedTool for CompleteTask {
    type Args = CompleteTaskArgs;

    /// The generated schema; an agent with an output schema answers with its object instead.
    fn spec_with(&self, mut parameters: Value) -> ToolSpec {
        if let Some(schema) = &self.schema {
            let mut answer = schema.schema().clone();
            answer["description"] = json!("your answer: a JSON object matching this schema");
            parameters["properties"]["answer"] = answer;
        }
        ToolSpec::new(
            "complete_task",
            ToolClass::Safe,
            "Finish your task and give your answer to the agent that asked. Calls after it in the same reply are skipped.",
            parameters,
        )
    }

    async fn run(&self, call: Invocation<'_, CompleteTaskArgs>) -> Result<ToolOutput, ToolError> {
        let answer = call.args.answer;
        if answer.is_null() {
            return Err(ToolError::model("missing required argument `answer`"));
        }
        let answer = match (&self.schema, &answer) {
            (Some(schema), answer) => schema.check(answer).map_err(ToolError::model)?,
            (None, Value::String(text)) if text.trim().is_empty() => {
                return Err(ToolError::model(
                    "`answer` is empty: give the answer the caller asked for",
                ));
            }
            (None, Value::String(text)) => Value::String(text.trim().to_owned()),
            // Text was asked for; a structured answer still says what the model meant.
            (None, other) => Value::String(other.to_string()),
        };
        Ok(ToolOutput::Completed(answer))
    }
}
