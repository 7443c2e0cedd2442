use serde_json::json;

use super::*;
use crate::agent::prompt::describe_tool;
use crate::tools::ask_question::AskQuestionArgs;
use crate::tools::create_pull_request::{PullRequestArgs, ReviewFollowUpArgs};
use crate::tools::edit_file::EditFileArgs;
use crate::tools::finish::FinishArgs;
use crate::tools::list_files::ListFilesArgs;
use crate::tools::read_file::ReadFileArgs;
use crate::tools::run_shell_command::RunShellCommandArgs;
use crate::tools::search_files::SearchFilesArgs;
use crate::tools::write_file::WriteFileArgs;
use crate::tools::{ToolRegistry, ToolSelection, ToolSpec};

fn specs(review: bool) -> Vec<ToolSpec> {
    ToolRegistry::new(
        &ToolSelection {
            dangerous: true,
            review,
        },
        Vec::new(),
    )
    .specs()
}

fn spec<'a>(specs: &'a [ToolSpec], name: &str) -> &'a ToolSpec {
    specs
        .iter()
        .find(|spec| spec.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

/// What the prompt says of one argument: its line in the tool's description.
fn prompt_line<'a>(prompt: &'a str, name: &str) -> &'a str {
    prompt
        .lines()
        .find(|line| line.starts_with(&format!("- `{name}` (")))
        .unwrap_or_else(|| panic!("the prompt does not show `{name}`:\n{prompt}"))
}

/// Every built-in tool's schema is the one generated from its argument struct, and the prompt
/// shows exactly that schema's arguments, types and required ones: neither can drift from what
/// the tool parses.
#[test]
fn every_tool_schema_is_generated_from_its_arguments_and_is_what_the_prompt_shows() {
    let plain = specs(false);
    let review = specs(true);
    let generated = [
        ("read_file", schema_for::<ReadFileArgs>(), &plain),
        ("list_files", schema_for::<ListFilesArgs>(), &plain),
        ("search_files", schema_for::<SearchFilesArgs>(), &plain),
        ("write_file", schema_for::<WriteFileArgs>(), &plain),
        ("edit_file", schema_for::<EditFileArgs>(), &plain),
        ("create_pull_request", schema_for::<PullRequestArgs>(), &plain),
        ("create_pull_request", schema_for::<ReviewFollowUpArgs>(), &review),
        ("ask_question", schema_for::<AskQuestionArgs>(), &plain),
        ("finish", schema_for::<FinishArgs>(), &plain),
        ("run_shell_command", schema_for::<RunShellCommandArgs>(), &plain),
    ];
    assert_eq!(
        plain.len(),
        generated.len() - 1,
        "a built-in tool is missing from this test"
    );
    for (name, schema, specs) in generated {
        let spec = spec(specs, name);
        assert_eq!(spec.parameters, schema, "{name}");
        let prompt = describe_tool(spec);
        let properties = schema["properties"].as_object().expect("properties");
        let required = schema["required"].as_array().expect("required");
        assert_eq!(prompt.matches("\n- `").count(), properties.len(), "{prompt}");
        for (argument, property) in properties {
            let line = prompt_line(&prompt, argument);
            let needed = if required.contains(&json!(argument)) {
                "required"
            } else {
                "optional"
            };
            let kind = property["type"].as_str().expect("one type per argument");
            assert!(line.starts_with(&format!("- `{argument}` ({kind}, {needed}")), "{line}");
            let description = property["description"].as_str().expect("described");
            assert!(line.ends_with(description), "{line}");
        }
    }
}

/// Generating the schemas changed nothing the model is sent: they are the hand-written ones.
#[test]
fn generated_schemas_are_the_ones_the_model_was_sent() {
    assert_eq!(
        schema_for::<ReadFileArgs>().to_string(),
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "file path relative to the repository root"},
                "start_line": {"type": "integer", "description": "first line to read (1-based); omit to start at the top"},
                "end_line": {"type": "integer", "description": "last line to read (inclusive); omit to read to the end"},
            },
            "required": ["path"],
            "additionalProperties": false,
        })
        .to_string()
    );
    assert_eq!(
        schema_for::<FinishArgs>().to_string(),
        json!({
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["completed", "no_tasks"], "description": "completed or no_tasks"},
                "summary": {"type": "string", "description": "one or two sentences on what was done"},
            },
            "required": ["status", "summary"],
            "additionalProperties": false,
        })
        .to_string()
    );
    assert_eq!(
        schema_for::<ListFilesArgs>().to_string(),
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "folder relative to the repository root; omit for the root"},
            },
            "required": [],
            "additionalProperties": false,
        })
        .to_string()
    );
    let review = schema_for::<ReviewFollowUpArgs>();
    assert_eq!(review["required"], json!(["title", "body"]));
    assert_eq!(
        review["properties"]["replies"],
        json!({
            "type": "array",
            "description": "one reply per review thread you addressed",
            "items": {
                "type": "object",
                "properties": {
                    "comment_id": {"type": "integer", "description": "the review thread's id, as the first message names it"},
                    "body": {"type": "string", "description": "what you changed for this thread"},
                },
                "required": ["comment_id", "body"],
                "additionalProperties": false,
            },
        })
    );
}

fn refusal<A: DeserializeOwned>(arguments: Value) -> String {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    match parse::<A>(&arguments) {
        Err(ToolError::RespondToModel(message)) => message,
        Err(ToolError::Fatal(error)) => panic!("a malformed argument ended the run: {error}"),
        Err(ToolError::Stopped(reason)) => panic!("a malformed argument stopped the run: {reason:?}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn a_malformed_argument_is_an_error_naming_it() {
    let wrong_type = refusal::<ReadFileArgs>(json!({"path": 5}));
    assert!(
        wrong_type.starts_with("argument `path`: ") && wrong_type.contains("string"),
        "{wrong_type}"
    );
    assert_eq!(
        refusal::<WriteFileArgs>(json!({"path": "a"})),
        "missing required argument `content`"
    );
    let unknown = refusal::<ReadFileArgs>(json!({"path": "a", "start": 1}));
    assert!(
        unknown.contains("unknown argument `start`") && unknown.contains("`start_line`"),
        "{unknown}"
    );
    let negative = refusal::<ReadFileArgs>(json!({"path": "a", "start_line": -3}));
    assert!(
        negative.starts_with("argument `start_line`: ") && negative.contains("positive whole number"),
        "{negative}"
    );
    let not_a_number = refusal::<AskQuestionArgs>(json!({"question_text": "q", "issue": "twelve"}));
    assert!(not_a_number.starts_with("argument `issue`: "), "{not_a_number}");
    let status = refusal::<FinishArgs>(json!({"status": "done", "summary": "s"}));
    assert!(
        status.starts_with("argument `status`: ") && status.contains("no_tasks"),
        "{status}"
    );
    let reply = refusal::<ReviewFollowUpArgs>(json!({"title": "t", "body": "b", "replies": [{"comment_id": 1}]}));
    assert!(
        reply.starts_with("argument `replies[0]`: ") && reply.contains("`body`"),
        "{reply}"
    );
    // Outside a review follow-up there are no replies to give.
    let replies = refusal::<PullRequestArgs>(json!({"title": "t", "body": "b", "replies": []}));
    assert!(replies.contains("unknown argument `replies`"), "{replies}");
}

#[test]
fn numbers_are_read_leniently_where_the_meaning_is_plain() {
    for (sent, read) in [
        (json!(12), 12),
        (json!("12"), 12),
        (json!("#12"), 12),
        (json!(" 7 "), 7),
    ] {
        let Value::Object(arguments) = json!({"question_text": "q", "issue": sent}) else {
            unreachable!()
        };
        let parsed: AskQuestionArgs = parse(&arguments).unwrap_or_else(|_| panic!("{sent} is refused"));
        assert_eq!(parsed.issue, Some(WholeNumber(read)));
    }
    let Value::Object(arguments) = json!({"question_text": "q", "issue": null}) else {
        unreachable!()
    };
    let parsed: AskQuestionArgs = parse(&arguments).unwrap_or_else(|_| panic!("null is refused"));
    assert_eq!(parsed.issue, None);
}
