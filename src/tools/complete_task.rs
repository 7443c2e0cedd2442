//! `complete_task{answer}`: a sub-agent's last call. Offered only to sub-agents; its answer
//! becomes the result of the caller's `delegate` call (or the reviewer's verdict).
//!
//! An agent with an output schema must answer with a JSON object that satisfies it: the schema
//! is the `answer` argument's schema (so providers with structured output enforce it), and the
//! call checks it again on arrival ([`AnswerSchema::check`]); an answer that does not match is
//! this call's error, so the sub-agent fixes it on its next turn, as with a malformed reply.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec};
use crate::config::answer_schema::AnswerSchema;

pub struct CompleteTask {
    schema: Option<Arc<AnswerSchema>>,
}

impl CompleteTask {
    /// `complete_task` for an agent that answers in text (`None`) or with a schema's object.
    pub fn new(schema: Option<Arc<AnswerSchema>>) -> Self {
        Self { schema }
    }
}

#[async_trait]
impl Tool for CompleteTask {
    fn spec(&self) -> ToolSpec {
        let answer = match &self.schema {
            Some(schema) => {
                let mut answer = schema.schema().clone();
                answer["description"] = json!("your answer: a JSON object matching this schema");
                answer
            }
            None => {
                json!({"type": "string", "description": "your answer, complete in itself: the caller sees nothing else of your work"})
            }
        };
        ToolSpec::new(
            "complete_task",
            ToolClass::Safe,
            "Finish your task and give your answer to the agent that asked. Calls after it in the same reply are skipped.",
            json!({
                "type": "object",
                "properties": {"answer": answer},
                "required": ["answer"],
                "additionalProperties": false,
            }),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let answer = arguments
            .get("answer")
            .filter(|answer| !answer.is_null())
            .ok_or_else(|| ToolError::model("missing required argument `answer`"))?;
        let answer = match (&self.schema, answer) {
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
