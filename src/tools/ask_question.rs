//! `ask_question`: stop and show a question to a human. Ends the cycle (and, in continuous
//! mode, the run) with exit code 3; the forge posts it where the human will see it: on the
//! run's issue, or one the run may name ([`super::targets`]), with its mentions made inert.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::args::WholeNumber;
use super::{CycleEnd, Invocation, ToolClass, ToolError, ToolOutput, ToolSpec, TypedTool};

pub(crate) struct AskQuestion;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AskQuestionArgs {
    /// the question, with the context a human needs to answer it
    question_text: String,
    /// the issue the question is about: one the first message offers; leave it out to ask on the run's own issue
    pub(crate) issue: Option<WholeNumber>,
}

#[async_trait]
impl TypedTool for AskQuestion {
    type Args = AskQuestionArgs;

    fn spec_with(&self, parameters: Value) -> ToolSpec {
        ToolSpec::new(
            "ask_question",
            ToolClass::Safe,
            "Stop and ask a human a question when the task is ambiguous or needs a decision you should not make alone. Ends the cycle.",
            parameters,
        )
    }

    async fn run(&self, call: Invocation<'_, AskQuestionArgs>) -> Result<ToolOutput, ToolError> {
        let Invocation { ctx, args } = call;
        let question = args.question_text.trim();
        if question.is_empty() {
            return Err(ToolError::model("question_text is empty"));
        }
        // Where the question is posted is the run's decision, not the model's.
        let issue = ctx.targets.issue(args.issue.map(|issue| issue.0))?;
        Ok(ToolOutput::EndCycle(CycleEnd::Question {
            question: ctx.postable(question),
            issue,
        }))
    }
}
