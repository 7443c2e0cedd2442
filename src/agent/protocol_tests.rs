//! The reply parser against the mistakes real models make, and against hostile input.

#![allow(clippy::unwrap_used)]

use super::*;

/// What a case should produce.
enum Expect {
    /// Parsed calls as (tool name, argument key, expected string value of that argument).
    Calls(&'static [(&'static str, &'static str, &'static str)]),
    /// An error accepted by the predicate.
    Error(fn(&ReplyError) -> bool),
}

struct Case {
    name: &'static str,
    input: &'static str,
    expect: Expect,
}

const VALID: &str = r#"{"plan": "Read the README, then fix the typo.", "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "README.md"}}, {"tool_name": "edit_file", "arguments": {"path": "README.md", "old_text": "teh", "new_text": "the"}}]}"#;

fn cases() -> Vec<Case> {
    use Expect::{Calls, Error};
    vec![
        Case {
            name: "plain valid JSON",
            input: VALID,
            expect: Calls(&[("read_file", "path", "README.md"), ("edit_file", "new_text", "the")]),
        },
        Case {
            name: "fence with language tag",
            input: "```json\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}]}\n```",
            expect: Calls(&[("read_file", "path", "a.txt")]),
        },
        Case {
            name: "fence without language tag",
            input: "```\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"list_files\", \"arguments\": {\"path\": \"src\"}}]}\n```\n",
            expect: Calls(&[("list_files", "path", "src")]),
        },
        Case {
            name: "fence on a single line",
            input: "```json {\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}]}```",
            expect: Calls(&[("read_file", "path", "b")]),
        },
        Case {
            name: "prose and a code sample around a fenced reply",
            input: "Here's the fix for `fn main() {}` as requested:\n\n```json\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"src/main.rs\"}}]}\n```\nLet me know if that's OK.",
            expect: Calls(&[("read_file", "path", "src/main.rs")]),
        },
        Case {
            name: "fenced code sample before an unfenced reply",
            input: "The function looks like:\n```rust\nfn main() {}\n```\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"src/main.rs\"}}]}",
            expect: Calls(&[("read_file", "path", "src/main.rs")]),
        },
        Case {
            name: "text before and after",
            input: "Sure! I'll start by reading the file.\n{\"plan\": \"read\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"Cargo.toml\"}}]}\nI hope that's what you wanted.",
            expect: Calls(&[("read_file", "path", "Cargo.toml")]),
        },
        Case {
            name: "stray unclosed brace in prose before the reply",
            input: "I will change `fn main() {` first.\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"src/main.rs\"}}]}",
            expect: Calls(&[("read_file", "path", "src/main.rs")]),
        },
        Case {
            name: "single quotes",
            input: "{'plan': 'Read it', 'tool_calls': [{'tool_name': 'read_file', 'arguments': {'path': 'it\\'s.md'}}]}",
            expect: Calls(&[("read_file", "path", "it's.md")]),
        },
        Case {
            name: "trailing commas",
            input: "{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"x\",},},],}",
            expect: Calls(&[("read_file", "path", "x")]),
        },
        Case {
            name: "line and block comments",
            input: "{\n  // don't forget the plan\n  \"plan\": \"p\", /* the calls { */\n  \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"y\"}}]\n}",
            expect: Calls(&[("read_file", "path", "y")]),
        },
        Case {
            name: "unquoted keys",
            input: "{plan: 'p', tool_calls: [{tool_name: 'finish', arguments: {status: 'completed', summary: 'done'}}]}",
            expect: Calls(&[("finish", "status", "completed")]),
        },
        Case {
            name: "reply cut off mid-object",
            input: "{\"plan\": \"write it\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}, {\"tool_name\": \"write_file\", \"arguments\": {\"path\": \"big.txt\", \"content\": \"lorem ipsum dolor",
            expect: Error(|e| matches!(e, ReplyError::Truncated)),
        },
        Case {
            name: "reply cut off inside an open fence",
            input: "```json\n{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"write_file\", \"arguments\": {\"path\": \"a\", \"content\": \"fn main() {\\n",
            expect: Error(|e| matches!(e, ReplyError::Truncated)),
        },
        Case {
            name: "reply cut off after a key",
            input: "{\"plan\": \"p\", \"tool_calls\"",
            expect: Error(|e| matches!(e, ReplyError::Truncated)),
        },
        Case {
            name: "two objects one after the other",
            input: "{\"plan\": \"a\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]}\n{\"plan\": \"b\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}]}",
            expect: Error(|e| matches!(e, ReplyError::MultipleObjects { count: 2 })),
        },
        Case {
            name: "two fenced objects",
            input: "```json\n{\"plan\": \"a\", \"tool_calls\": [{\"tool\": \"read_file\", \"args\": {\"path\": \"a\"}}]}\n```\nand then\n```json\n{\"plan\": \"b\", \"tool_calls\": [{\"tool\": \"read_file\", \"args\": {\"path\": \"b\"}}]}\n```",
            expect: Error(|e| matches!(e, ReplyError::MultipleObjects { count: 2 })),
        },
        Case {
            name: "a complete reply followed by a cut-off second reply",
            input: "{\"plan\": \"a\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]}\n{\"plan\": \"b\", \"tool_ca",
            expect: Error(|e| matches!(e, ReplyError::MultipleObjects { count: 2 })),
        },
        Case {
            name: "tool instead of tool_name",
            input: r#"{"plan": "p", "tool_calls": [{"tool": "read_file", "arguments": {"path": "t"}}]}"#,
            expect: Calls(&[("read_file", "path", "t")]),
        },
        Case {
            name: "name instead of tool_name",
            input: r#"{"plan": "p", "tool_calls": [{"name": "search_files", "arguments": {"pattern": "TODO"}}]}"#,
            expect: Calls(&[("search_files", "pattern", "TODO")]),
        },
        Case {
            name: "function instead of tool_name",
            input: r#"{"plan": "p", "tool_calls": [{"function": "read_file", "input": {"path": "f"}}]}"#,
            expect: Calls(&[("read_file", "path", "f")]),
        },
        Case {
            name: "args instead of arguments",
            input: r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "args": {"path": "g"}}]}"#,
            expect: Calls(&[("read_file", "path", "g")]),
        },
        Case {
            name: "parameters instead of arguments",
            input: r#"{"plan": "p", "tool_calls": [{"name": "ask_question", "parameters": {"question_text": "Which branch?"}}]}"#,
            expect: Calls(&[("ask_question", "question_text", "Which branch?")]),
        },
        Case {
            name: "stringified arguments",
            input: r##"{"plan": "p", "tool_calls": [{"tool_name": "write_file", "arguments": "{\"path\": \"a.md\", \"content\": \"# Title\\n\"}"}]}"##,
            expect: Calls(&[("write_file", "content", "# Title\n")]),
        },
        Case {
            name: "OpenAI nested function call with stringified arguments",
            input: r#"{"plan": "p", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"n.rs\"}"}}]}"#,
            expect: Calls(&[("read_file", "path", "n.rs")]),
        },
        Case {
            name: "stringified arguments that are not an object",
            input: r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": "README.md"}]}"#,
            expect: Error(|e| matches!(e, ReplyError::ArgumentsNotObject { index: 0, .. })),
        },
        Case {
            name: "arguments that are an array, in the second call",
            input: r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "a"}}, {"tool_name": "read_file", "arguments": ["b"]}]}"#,
            expect: Error(|e| matches!(e, ReplyError::ArgumentsNotObject { index: 1, .. })),
        },
        Case {
            name: "missing arguments means none",
            input: r#"{"plan": "p", "tool_calls": [{"tool_name": "list_files"}]}"#,
            expect: Calls(&[("list_files", "", "")]),
        },
        Case {
            name: "missing plan",
            input: r#"{"tool_calls": [{"tool_name": "finish", "arguments": {"status": "no_tasks", "summary": "nothing"}}]}"#,
            expect: Calls(&[("finish", "status", "no_tasks")]),
        },
        Case {
            name: "empty reply",
            input: "",
            expect: Error(|e| matches!(e, ReplyError::Empty)),
        },
        Case {
            name: "whitespace-only reply",
            input: " \n\t ",
            expect: Error(|e| matches!(e, ReplyError::Empty)),
        },
        Case {
            name: "prose only",
            input: "I have read the file and everything looks fine. Nothing to do!",
            expect: Error(|e| matches!(e, ReplyError::NoJsonObject)),
        },
        Case {
            name: "braces and escaped quotes inside strings",
            input: r#"Writing the file now: {"plan": "add a \"{\" brace", "tool_calls": [{"tool_name": "write_file", "arguments": {"path": "src/lib.rs", "content": "fn f() { let s = \"}\"; let t = '{'; }\n"}}]} done"#,
            expect: Calls(&[("write_file", "content", "fn f() { let s = \"}\"; let t = '{'; }\n")]),
        },
        Case {
            name: "braces and double quotes inside single-quoted strings",
            input: r#"{'plan': 'p', 'tool_calls': [{'tool_name': 'write_file', 'arguments': {'path': 'a.json', 'content': '{"k": "}"}',}},],}"#,
            expect: Calls(&[("write_file", "content", r#"{"k": "}"}"#)]),
        },
        Case {
            name: "non-ASCII content and prose",
            input: "Voilà — je lis le fichier : {\"plan\": \"Grüße, 世界 🚀\", \"tool_calls\": [{\"tool_name\": \"write_file\", \"arguments\": {\"path\": \"docs/ñ.md\", \"content\": \"naïve café 🚀 {}\"}}]} ✅",
            expect: Calls(&[("write_file", "content", "naïve café 🚀 {}")]),
        },
        Case {
            name: "missing tool_calls",
            input: r#"{"plan": "I will read the README next."}"#,
            expect: Error(|e| matches!(e, ReplyError::MissingToolCalls)),
        },
        Case {
            name: "tool_calls not an array",
            input: r#"{"plan": "p", "tool_calls": "read_file a"}"#,
            expect: Error(|e| matches!(e, ReplyError::ToolCallsNotArray { .. })),
        },
        Case {
            name: "empty tool_calls",
            input: r#"{"plan": "all done", "tool_calls": []}"#,
            expect: Error(|e| matches!(e, ReplyError::NoToolCalls)),
        },
        Case {
            name: "call without a tool name",
            input: r#"{"plan": "p", "tool_calls": [{"arguments": {"path": "a"}}]}"#,
            expect: Error(|e| matches!(e, ReplyError::MissingToolName { index: 0 })),
        },
        Case {
            name: "a bare array of calls",
            input: r#"[{"tool_name": "read_file", "arguments": {"path": "a"}}]"#,
            expect: Calls(&[("read_file", "path", "a")]),
        },
        Case {
            name: "syntax error no repair can read",
            input: r#"{"plan": "p", "tool_calls" [{"tool_name": "read_file", "arguments": {"path": "a"}}]}"#,
            expect: Error(|e| matches!(e, ReplyError::InvalidJson { detail } if detail.contains("tool_calls"))),
        },
        Case {
            name: "lone closing brace",
            input: "}",
            expect: Error(|e| matches!(e, ReplyError::NoJsonObject)),
        },
        Case {
            name: "lone opening brace",
            input: "{",
            expect: Error(|e| matches!(e, ReplyError::Truncated)),
        },
    ]
}

#[test]
fn table_of_model_mistakes() {
    let mut failures = Vec::new();
    for case in cases() {
        let result = parse_reply(case.input);
        match (&case.expect, &result) {
            (Expect::Calls(expected), Ok(reply)) => {
                let names: Vec<&str> = reply.tool_calls.iter().map(|c| c.tool_name.as_str()).collect();
                let wanted: Vec<&str> = expected.iter().map(|(name, _, _)| *name).collect();
                if names != wanted {
                    failures.push(format!("{}: calls {names:?}, wanted {wanted:?}", case.name));
                    continue;
                }
                for (call, (_, key, value)) in reply.tool_calls.iter().zip(expected.iter()) {
                    if key.is_empty() {
                        if !call.arguments.is_empty() {
                            failures.push(format!("{}: expected no arguments", case.name));
                        }
                    } else if call.arguments.get(*key).and_then(Value::as_str) != Some(*value) {
                        failures.push(format!(
                            "{}: {key} = {:?}, wanted {value:?}",
                            case.name,
                            call.arguments.get(*key)
                        ));
                    }
                }
            }
            (Expect::Error(accepts), Err(err)) => {
                if !accepts(err) {
                    failures.push(format!("{}: wrong error {err:?}", case.name));
                }
            }
            (Expect::Calls(_), Err(err)) => {
                failures.push(format!("{}: unexpected error: {err}", case.name));
            }
            (Expect::Error(_), Ok(reply)) => {
                failures.push(format!("{}: unexpectedly parsed {reply:?}", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "failing cases:\n{}", failures.join("\n"));
}

#[test]
fn truncation_error_says_truncated_and_asks_for_shorter_reply() {
    let err = parse_reply(r#"{"plan": "p", "tool_calls": [{"tool_name": "write_file", "arguments": {"content": "abc"#)
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("truncated"), "{text}");
    assert!(text.contains("shorter"), "{text}");
}

#[test]
fn error_messages_name_the_failing_call() {
    let err = parse_reply(
        r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "a"}}, {"tool_name": "read_file", "arguments": 7}]}"#,
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("tool_calls[1]"), "{text}");
    assert!(text.contains("a number"), "{text}");
}

#[test]
fn to_json_round_trips_through_serde_json() {
    let inputs = [
        VALID,
        "```json\n{'plan': 'Grüße \"quoted\" {braces}', tool_calls: [{tool: 'write_file', args: {path: 'a', content: 'x\\ny', issue: 12, draft: true, extra: null, nums: [1, 2.5, -3],},}],}\n```",
    ];
    for input in inputs {
        let reply = parse_reply(input).unwrap();
        let json = reply.to_json();
        let back: ModelReply = serde_json::from_str(&json).unwrap();
        assert_eq!(back, reply);
        // The canonical form is itself strict JSON, so it takes the fast path unchanged.
        assert_eq!(parse_reply(&json).unwrap(), reply);
    }
}

#[test]
fn expected_shape_example_parses() {
    let example = EXPECTED_SHAPE
        .split_once("Example:")
        .map(|(_, example)| example)
        .unwrap();
    let reply = parse_reply(example).unwrap();
    assert_eq!(reply.tool_calls[0].tool_name, "read_file");
}

#[test]
fn every_prefix_of_a_valid_reply_is_handled_without_panicking() {
    let samples = [
        VALID.to_owned(),
        format!("Voilà 🚀:\n```json\n{VALID}\n```\nfin ✅"),
        "{'plan': 'Grüße', /* c */ tool_calls: [{tool: 'write_file', args: {content: 'a\\'b{\"}', n: -1.5, ok: true, none: null,},},], // end\n}".to_owned(),
    ];
    for sample in &samples {
        let first_brace = sample.find('{').unwrap();
        let last_brace = sample.rfind('}').unwrap();
        let mut lacking_only_the_brace = 0;
        for (at, _) in sample.char_indices().chain([(sample.len(), ' ')]) {
            let prefix = &sample[..at];
            let result = parse_reply(prefix);
            // Cut anywhere inside the object, the reply must be reported as truncated rather
            // than half-parsed or misdiagnosed, except where all it lacks is its final brace
            // (then it is the whole reply, repaired).
            if at > first_brace && at <= last_brace {
                match result {
                    Ok(reply) => {
                        assert!(reply.repairs.contains(&Repair::MissingFinalBrace), "prefix {prefix:?}");
                        assert_eq!(reply.tool_calls, parse_reply(sample).unwrap().tool_calls);
                        lacking_only_the_brace += 1;
                    }
                    Err(error) => assert_eq!(error, ReplyError::Truncated, "prefix {prefix:?}"),
                }
            }
        }
        assert!(parse_reply(sample).is_ok());
        // The cut just before the final brace, and after the whitespace before it.
        assert!(
            lacking_only_the_brace <= 2,
            "{lacking_only_the_brace} prefixes of {sample}"
        );
    }
}

#[test]
fn hostile_inputs_do_not_panic() {
    let deep_braces = "{".repeat(200_000);
    let deep_arrays = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!("{}{}", "{\"a\":".repeat(5_000), "}".repeat(5_000));
    let deep_value = format!(
        "{{\"plan\": \"p\", \"tool_calls\": [{{\"tool_name\": \"x\", \"arguments\": {{\"a\": {}1{}}}}}]}} trailing",
        "[".repeat(1_000),
        "]".repeat(1_000)
    );
    let deep_string_args = format!(
        "{{\"plan\": \"p\", \"tool_calls\": [{{\"tool_name\": \"x\", \"arguments\": \"{}\"}}]}}",
        "{'a':".repeat(5_000)
    );
    let many_objects = "{}".repeat(50_000);
    let closing = "}]".repeat(100_000);
    let huge_content = format!(
        "```json\n{{\"plan\": \"p\", \"tool_calls\": [{{\"tool_name\": \"write_file\", \"arguments\": {{\"path\": \"big\", \"content\": \"{}\"}}}}]}}\n```",
        "é{}".repeat(300_000)
    );
    let inputs = [
        deep_braces.as_str(),
        deep_arrays.as_str(),
        deep_object.as_str(),
        deep_value.as_str(),
        deep_string_args.as_str(),
        many_objects.as_str(),
        closing.as_str(),
        huge_content.as_str(),
        "}{",
        "{{}",
        "{'",
        "{\"",
        "{/*",
        "{//",
        "{\"a\": \"\\",
        "{\"a\": \"\\u12",
        "{\"a\": 1e",
        "{\"a\": 99999999999999999999999999999999999999999999}",
        "{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"x\", \"arguments\": {\"n\": 1e999, \"m\": NaN, \"h\": 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF}}]}",
        "```",
        "```json {",
        "\u{FEFF}{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"x\"}]}",
        "\u{0}\u{1}{\u{0}}",
        "🚀{🚀}🚀",
        "'{' \"{\" {",
    ];
    for input in inputs {
        let _ = parse_reply(input);
    }
    assert_eq!(
        parse_reply(&deep_braces),
        Err(ReplyError::TooDeep { limit: MAX_NESTING })
    );
    assert!(parse_reply(&huge_content).is_ok());
    assert!(matches!(
        parse_reply(&many_objects),
        Err(ReplyError::MultipleObjects { .. })
    ));
}

/// A call that names its tool twice could mean either; before, the parser kept the last one
/// and ran it.
#[test]
fn repeated_keys_are_ambiguous_and_never_run() {
    for text in [
        r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "tool_name": "write_file", "arguments": {"path": "a"}}]}"#,
        r#"{"plan": "p", "tool_calls": [{"tool_name": "write_file", "arguments": {"path": "a", "path": "b", "content": ""}}]}"#,
        r#"```json
{plan: 'p', tool_calls: [{tool_name: 'read_file', tool_name: 'finish', arguments: {}}]}
```"#,
        r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": "{\"path\": \"a\", \"path\": \"b\"}"}]}"#,
    ] {
        let error = parse_reply(text).expect_err(text).to_string();
        assert!(error.contains("appears twice"), "{text}: {error}");
    }
}
