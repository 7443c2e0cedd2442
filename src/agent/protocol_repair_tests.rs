//! The repairs of almost-JSON replies: every case of the malformed-reply corpus that can be read
//! without a guess is recovered with its calls exact and its repairs named, and every case that
//! would need a guess is still asked again.

#![allow(clippy::unwrap_used)]

use super::*;

/// A reply the parser must recover: its calls as a JSON array of `[tool_name, arguments]`, its
/// plan, and the names of the repairs it needed.
struct Recovered {
    name: &'static str,
    input: &'static str,
    plan: &'static str,
    calls: &'static str,
    repairs: &'static [&'static str],
}

fn recovered() -> Vec<Recovered> {
    vec![
        Recovered {
            name: "hash comments, with a # inside a string kept as content",
            input: "{\n  # read first\n  \"plan\": \"p\", # the plan\n  \"tool_calls\": [{\"tool_name\": \"write_file\", \"arguments\": {\"path\": \"a.py\", \"content\": \"# heading\\nx = 1  # note\"}}]\n}",
            plan: "p",
            calls: r##"[["write_file", {"path": "a.py", "content": "# heading\nx = 1  # note"}]]"##,
            repairs: &["hash_comments"],
        },
        Recovered {
            name: "Python literals, with the same words inside strings kept",
            input: r#"{"plan": "None yet", "tool_calls": [{"tool_name": "create_pull_request", "arguments": {"title": "True story", "body": "False alarm", "draft": True, "issue": None, "flags": [False, True]}}]}"#,
            plan: "None yet",
            calls: r#"[["create_pull_request", {"title": "True story", "body": "False alarm", "draft": true, "issue": null, "flags": [false, true]}]]"#,
            repairs: &["python_literals"],
        },
        Recovered {
            name: "smart-quote delimiters, with quotes inside strings kept as content",
            input: "{“plan”: “p”, “tool_calls”: [{“tool_name”: “write_file”, “arguments”: {“path”: “q.md”, “content”: “say \"hi\" it’s fine”, “note”: \"She wrote “hello” here\"}}]}",
            plan: "p",
            calls: r#"[["write_file", {"path": "q.md", "content": "say \"hi\" it’s fine", "note": "She wrote “hello” here"}]]"#,
            repairs: &["smart_quotes"],
        },
        Recovered {
            name: "raw newlines and tabs inside strings",
            input: "{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"write_file\", \"arguments\": {\"path\": \"m.py\", \"content\": \"def f():\n\treturn 1\r\n\"}}]}",
            plan: "p",
            calls: r#"[["write_file", {"path": "m.py", "content": "def f():\n\treturn 1\r\n"}]]"#,
            repairs: &["raw_control_characters"],
        },
        Recovered {
            name: "missing comma between members",
            input: r#"{"plan": "p" "tool_calls": [{"tool_name": "edit_file", "arguments": {"path": "a" "old_text": "x", "new_text": "y"}}]}"#,
            plan: "p",
            calls: r#"[["edit_file", {"path": "a", "old_text": "x", "new_text": "y"}]]"#,
            repairs: &["missing_commas"],
        },
        Recovered {
            name: "missing comma between calls",
            input: "{\"plan\": \"p\", \"tool_calls\": [\n{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}\n]}",
            plan: "p",
            calls: r#"[["read_file", {"path": "a"}], ["read_file", {"path": "b"}]]"#,
            repairs: &["missing_commas"],
        },
        Recovered {
            name: "missing final brace",
            input: "{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]\n",
            plan: "p",
            calls: r#"[["read_file", {"path": "a"}]]"#,
            repairs: &["missing_final_brace"],
        },
        Recovered {
            name: "the whole reply as one JSON string",
            input: r#""{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]}""#,
            plan: "p",
            calls: r#"[["read_file", {"path": "a"}]]"#,
            repairs: &["reply_as_string"],
        },
        Recovered {
            name: "string concatenation, with a + inside a string kept",
            input: r#"{"plan": "a + b", "tool_calls": [{"tool_name": "write_file", "arguments": {"path": "c.txt", "content": "line one\n" + "line two\n"
                + 'three'}}]}"#,
            plan: "a + b",
            calls: r#"[["write_file", {"path": "c.txt", "content": "line one\nline two\nthree"}]]"#,
            repairs: &["string_concatenation"],
        },
        Recovered {
            name: "tool_calls as one object",
            input: r#"{"plan": "p", "tool_calls": {"tool_name": "read_file", "arguments": {"path": "a"}}}"#,
            plan: "p",
            calls: r#"[["read_file", {"path": "a"}]]"#,
            repairs: &["tool_calls_object"],
        },
        Recovered {
            name: "a bare array of calls",
            input: r#"[{"tool_name": "read_file", "arguments": {"path": "a"}}, {"name": "finish", "arguments": {"status": "completed", "summary": "s"}}]"#,
            plan: "",
            calls: r#"[["read_file", {"path": "a"}], ["finish", {"status": "completed", "summary": "s"}]]"#,
            repairs: &["bare_call_array"],
        },
        Recovered {
            name: "a bare array of calls in a fence",
            input: "```json\n[{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]\n```",
            plan: "",
            calls: r#"[["read_file", {"path": "a"}]]"#,
            repairs: &["bare_call_array"],
        },
        Recovered {
            name: "one call without the wrapper",
            input: r#"{"tool_name": "read_file", "arguments": {"path": "a"}}"#,
            plan: "",
            calls: r#"[["read_file", {"path": "a"}]]"#,
            repairs: &["bare_call"],
        },
        Recovered {
            name: "one call without the wrapper, after prose",
            input: "I will read it.\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}",
            plan: "",
            calls: r#"[["read_file", {"path": "a"}]]"#,
            repairs: &["bare_call"],
        },
        Recovered {
            name: "Hermes tool_call tags",
            input: "I'll read both files.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}\n</tool_call>",
            plan: "I'll read both files.",
            calls: r#"[["read_file", {"path": "a"}], ["read_file", {"path": "b"}]]"#,
            repairs: &["tool_call_tags"],
        },
        Recovered {
            name: "a namespaced tool name",
            input: r#"{"plan": "p", "tool_calls": [{"tool_name": "functions.write_file", "arguments": {"path": "a", "content": ""}}, {"tool_name": "default_api:finish", "arguments": {"status": "completed", "summary": "s"}}]}"#,
            plan: "p",
            calls: r#"[["write_file", {"path": "a", "content": ""}], ["finish", {"status": "completed", "summary": "s"}]]"#,
            repairs: &["namespaced_tool_name"],
        },
        Recovered {
            name: "several repairs at once",
            input: "```json\n{\n  \"plan\": \"p\" # first\n  \"tool_calls\": [{\"tool_name\": \"functions.create_pull_request\", \"arguments\": {\"title\": \"t\", \"body\": \"line\n\", \"draft\": False}}]\n```",
            plan: "p",
            calls: r#"[["create_pull_request", {"title": "t", "body": "line\n", "draft": false}]]"#,
            repairs: &[
                "hash_comments",
                "missing_commas",
                "python_literals",
                "raw_control_characters",
                "missing_final_brace",
                "namespaced_tool_name",
            ],
        },
    ]
}

#[test]
fn corpus_replies_that_need_no_guess_are_recovered_with_their_repairs_named() {
    let mut failures = Vec::new();
    for case in recovered() {
        let reply = match parse_reply(case.input) {
            Ok(reply) => reply,
            Err(err) => {
                failures.push(format!("{}: rejected: {err}", case.name));
                continue;
            }
        };
        let expected: Vec<(String, Map<String, Value>)> = serde_json::from_str(case.calls).unwrap();
        let calls: Vec<(String, Map<String, Value>)> = reply
            .tool_calls
            .iter()
            .map(|call| (call.tool_name.clone(), call.arguments.clone()))
            .collect();
        if calls != expected {
            failures.push(format!("{}: calls {calls:?}, wanted {expected:?}", case.name));
        }
        if reply.plan != case.plan {
            failures.push(format!("{}: plan {:?}, wanted {:?}", case.name, reply.plan, case.plan));
        }
        let mut repairs: Vec<&str> = reply.repairs.iter().map(|repair| repair.name()).collect();
        let mut wanted = case.repairs.to_vec();
        repairs.sort_unstable();
        wanted.sort_unstable();
        if repairs != wanted {
            failures.push(format!("{}: repairs {repairs:?}, wanted {wanted:?}", case.name));
        }
    }
    assert!(failures.is_empty(), "failing cases:\n{}", failures.join("\n"));
}

/// Replies whose intent would need a guess: each is asked again, never run.
#[test]
fn ambiguous_replies_are_still_asked_again() {
    let cases: &[(&str, &str)] = &[
        (
            "two closings missing: more calls may have followed",
            r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "a"}}"#,
        ),
        (
            "final brace missing after a number that may be cut",
            r#"{"tool_calls": [{"tool_name": "read_file", "arguments": {"path": "a"}}], "n": 12"#,
        ),
        (
            "final brace missing after a trailing comma",
            r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "a"}}],"#,
        ),
        (
            "final brace missing on a reply without calls",
            r#"{"plan": "I will read the README""#,
        ),
        (
            "two different objects",
            r#"{"tool_name": "read_file", "arguments": {"path": "a"}} {"tool_name": "write_file", "arguments": {"path": "b", "content": ""}}"#,
        ),
        (
            "two strings side by side: a missing comma or a missing +",
            r#"{"plan": "p", "tool_calls": [{"tool_name": "write_file", "arguments": {"path": "a", "content": "x" "y"}}]}"#,
        ),
        ("text with no call", "All done, nothing to change here."),
        ("an empty tool_call tag", "<tool_call></tool_call>"),
        (
            "a tag left open",
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}",
        ),
        (
            "a tag next to a reply object",
            "{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]}\n<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}</tool_call>",
        ),
        ("an object that only has a name", r#"{"name": "README"}"#),
        (
            "tool_calls as an object that is not a call",
            r#"{"plan": "p", "tool_calls": {"read_file": {"path": "a"}}}"#,
        ),
        ("a string that holds prose", r#""I am done""#),
        (
            "smart quotes nested inside a smart-quoted string",
            "{“plan”: “say “hi” now”, “tool_calls”: [{“tool_name”: “read_file”, “arguments”: {“path”: “a”}}]}",
        ),
        (
            "a bare array that holds something else than calls",
            r#"[{"tool_name": "read_file", "arguments": {"path": "a"}}, "and then"]"#,
        ),
        ("empty tool_calls", r#"{"plan": "nothing to do", "tool_calls": []}"#),
        (
            "one call of a list that goes on",
            r#"Calls: [{"tool_name": "read_file", "arguments": {"path": "a"}}, "#,
        ),
        (
            "one call of a cut-off list after prose",
            r#"Calls: [{"tool_name": "read_file", "arguments": {"path": "a"}}"#,
        ),
    ];
    let mut failures = Vec::new();
    for (name, input) in cases {
        if let Ok(reply) = parse_reply(input) {
            failures.push(format!("{name}: parsed {reply:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "parsed without a guess being possible:\n{}",
        failures.join("\n")
    );
}

#[test]
fn an_empty_call_list_is_told_to_call_finish() {
    let error = parse_reply(r#"{"plan": "nothing to do", "tool_calls": []}"#).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("call finish"), "{text}");
    assert!(text.contains("no_tasks"), "{text}");
}

/// A namespace is only stripped where it is one that function-calling formats use: any other
/// dotted name is left for the tool registry to reject by name.
#[test]
fn unknown_namespaces_are_left_alone() {
    let reply = parse_reply(r#"{"plan": "p", "tool_calls": [{"tool_name": "lint.check", "arguments": {}}]}"#).unwrap();
    assert_eq!(reply.tool_calls[0].tool_name, "lint.check");
    assert!(reply.repairs.is_empty());
}

/// `{#12}` in prose is not a comment: the brace it is glued to still closes, and the reply
/// after it is found.
#[test]
fn a_hash_glued_to_a_word_in_prose_is_not_a_comment() {
    let input = "Fixing {#12} now: {\"plan\": \"p\", # why\n \"tool_calls\": [{\"tool_name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]}";
    let reply = parse_reply(input).unwrap();
    // Read as a comment, `#12} now: {"plan": "p",` was dropped with the rest of its line.
    assert_eq!(reply.plan, "p");
    assert_eq!(reply.tool_calls[0].arguments["path"], "a");
    assert_eq!(reply.repairs, vec![Repair::HashComments]);
}

/// A tag inside a string is file content: the reply it sits in is read as usual.
#[test]
fn a_tag_inside_a_string_is_content() {
    let input = "{\"plan\": \"p\", \"tool_calls\": [{\"tool_name\": \"write_file\", \"arguments\": {\"path\": \"doc.md\", \"content\": \"Wrap calls in <tool_call>{...}</tool_call>.\"}}],}";
    let reply = parse_reply(input).unwrap();
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(
        reply.tool_calls[0].arguments["content"],
        "Wrap calls in <tool_call>{...}</tool_call>."
    );
    assert!(reply.repairs.is_empty(), "{:?}", reply.repairs);
}

/// A strict reply names no repair, so the event field stays absent.
#[test]
fn strict_and_json5_replies_name_no_repair() {
    for input in [
        r#"{"plan": "p", "tool_calls": [{"tool_name": "read_file", "arguments": {"path": "a"}}]}"#,
        "```json\n{'plan': 'p', tool_calls: [{tool_name: 'read_file', arguments: {path: 'a'},},],}\n```",
    ] {
        assert!(parse_reply(input).unwrap().repairs.is_empty(), "{input}");
    }
}

/// The repairs add work on every lenient parse; hostile text must still finish quickly and
/// without exhausting the stack.
#[test]
fn repairs_survive_hostile_input() {
    let megabyte_of_brackets = "[".repeat(1 << 20);
    let deep_tags = "<tool_call>".repeat(50_000);
    let many_tags = "<tool_call>{\"name\": \"x\"}</tool_call>".repeat(20_000);
    let hashes = "#".repeat(200_000);
    let unterminated = format!("{{\"plan\": \"{}", "a\n".repeat(200_000));
    let unterminated_smart = format!("{{“plan”: “{}", "x".repeat(200_000));
    let concatenations = format!("{{\"plan\": \"a\"{}}}", " + \"b\"".repeat(100_000));
    let literals = format!("{{\"plan\": [{}]}}", "True, ".repeat(100_000));
    let nested_strings = format!("{}{{}}{}", "\"".repeat(10_000), "\"".repeat(10_000));
    let missing_commas = format!("{{\"tool_calls\": [{}]", "{\"name\": \"x\"} ".repeat(30_000));
    let braces_then_tag = format!("{}<tool_call>", "{".repeat(200_000));
    let objects_then_tag = format!("{}<tool_call>{{\"name\": \"x\"}}", "{}".repeat(50_000));
    let started = std::time::Instant::now();
    for input in [
        megabyte_of_brackets.as_str(),
        deep_tags.as_str(),
        many_tags.as_str(),
        hashes.as_str(),
        unterminated.as_str(),
        unterminated_smart.as_str(),
        concatenations.as_str(),
        literals.as_str(),
        nested_strings.as_str(),
        missing_commas.as_str(),
        braces_then_tag.as_str(),
        objects_then_tag.as_str(),
        "“",
        "”{",
        "{#",
        "{\"a\" +",
        "{\"a\": \"b\" + 'c",
        "<tool_call>",
        "</tool_call><tool_call>",
        "\"\\\"",
        "\"{\\\"plan\\\": \\\"",
        "[{\"tool_name\": \"x\"} {",
        "{\"tool_calls\": {\"name\": 1}}",
    ] {
        let _ = parse_reply(input);
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert!(parse_reply(&many_tags).is_ok());
}

/// A reply cut anywhere must never run calls the whole reply would not: every prefix of every
/// repairable reply is either rejected or read as exactly the whole reply's calls.
#[test]
fn a_cut_repairable_reply_never_runs_other_calls() {
    for case in recovered() {
        let whole = parse_reply(case.input).unwrap();
        for (at, _) in case.input.char_indices() {
            let prefix = &case.input[..at];
            // Tags have no outer bracket: a cut right after a closing tag looks complete (the
            // provider's length stop reason is what tells; see tags.rs).
            if prefix.trim_end().ends_with("</tool_call>") {
                continue;
            }
            if let Ok(reply) = parse_reply(prefix) {
                assert_eq!(reply.tool_calls, whole.tool_calls, "{}: prefix {prefix:?}", case.name);
            }
        }
    }
}
