//! `ask_question`: stop and show a question to a human. Ends the cycle (and, in continuous
//! mode, the run) with exit code 3; the forge posts it where the human will see it: on the
//! run's issue, or one the run may name ([`super::targets`]), with its mentions made inert.

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::spec::object_schema;
use super::{CycleEnd, Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};

pub struct AskQuestion;

#[async_trait]
impl Tool for AskQuestion {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "ask_question",
            ToolClass::Safe,
            "Stop and ask a human a question when the task is ambiguous or needs a decision you should not make alone. Ends the cycle.",
            object_schema(&[
                (
                    "question_text",
                    "string",
                    "the question, with the context a human needs to answer it",
                    true,
                ),
                (
                    "issue",
                    "integer",
                    "the issue the question is about: one the first message offers; leave it out to ask on the run's own issue",
                    false,
                ),
            ]),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let question = args::required_str(arguments, "question_text")?.trim();
        if question.is_empty() {
            return Err(ToolError::model("question_text is empty"));
        }
        // Where the question is posted is the run's decision, not the model's.
        let issue = ctx.targets.issue(args::optional_number(arguments, "issue")?)?;
        Ok(ToolOutput::EndCycle(CycleEnd::Question {
            question: ctx.postable(question),
            issue,
        }))
    }
}
