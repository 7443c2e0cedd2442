use serde_json::{Map, Value, json};

use super::*;

/// A history on a large window with the conservative counter (3 bytes a token).
fn history(window: u64) -> History {
    History::new(
        TokenCounter::Conservative,
        window,
        true,
        "system prompt",
        &json!({"type": "object"}),
        "first message: the task".into(),
    )
}

/// One turn that reads `path`, whose content is `bytes` long.
fn read_turn(history: &mut History, path: &str, bytes: usize) {
    let arguments: Map<String, Value> = json!({"path": path}).as_object().cloned().unwrap_or_default();
    history.push_reply(
        json!({"plan": format!("read {path}"), "tool_calls": [{"tool_name": "read_file", "arguments": arguments}]})
            .to_string(),
    );
    history.push_results(vec![ToolResult {
        tool: "read_file".into(),
        arguments,
        ok: true,
        skipped: false,
        output: format!("{path}:").repeat(bytes / (path.len() + 1) + 1),
    }]);
}

fn results_of(message: &Message) -> Value {
    let value: Value = serde_json::from_str(&message.content).expect("results are JSON");
    value["tool_results"].clone()
}

fn is_stub(message: &Message) -> bool {
    results_of(message)[0]["output"]
        .as_str()
        .is_some_and(|output| output.starts_with("[masked to save context"))
}

#[test]
fn the_last_three_results_stay_whole_and_older_ones_become_stubs_at_a_step() {
    let mut history = history(1_000_000);
    // 10 KB a result: about 3,400 tokens, so three older ones exceed the step.
    for turn in 0..8 {
        read_turn(&mut history, &format!("src/file{turn}.rs"), 10_000);
    }
    let prepared = history.prepare().expect("fits");
    let followups: Vec<&Message> = prepared.messages.iter().skip(2).step_by(2).collect();
    assert_eq!(followups.len(), 8);
    let stubs: Vec<bool> = followups.iter().map(|message| is_stub(message)).collect();
    assert_eq!(stubs, [true, true, true, true, true, false, false, false]);
    assert_eq!(prepared.masked_results, 5);
    // The stub names the call and how to get the output again.
    let stub = results_of(followups[0])[0]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(stub.contains("read_file") && stub.contains("src/file0.rs"), "{stub}");
    assert!(stub.contains("call read_file again"), "{stub}");
    // The model's own replies are all kept, whole.
    let replies: Vec<&Message> = prepared.messages.iter().skip(1).step_by(2).collect();
    assert!(replies.iter().all(|reply| reply.content.contains("\"plan\"")));
}

#[test]
fn between_steps_each_request_extends_the_previous_one_byte_for_byte() {
    let mut history = history(1_000_000);
    let mut previous: Option<Vec<Message>> = None;
    let mut steps = 0;
    for turn in 0..20 {
        read_turn(&mut history, &format!("src/file{turn}.rs"), 6_000);
        let prepared = history.prepare().expect("fits");
        if let Some(previous) = &previous {
            if prepared.messages.starts_with(previous) {
                assert_eq!(prepared.messages.len(), previous.len() + 2);
            } else {
                steps += 1;
            }
        }
        previous = Some(prepared.messages);
    }
    // 6 KB results are ~2,000 tokens: a step every few turns, not every turn.
    assert!((2..=6).contains(&steps), "{steps} masking steps in 20 turns");
}

#[test]
fn small_results_are_never_masked() {
    let mut history = history(1_000_000);
    for turn in 0..30 {
        read_turn(&mut history, &format!("f{turn}"), 100);
    }
    let prepared = history.prepare().expect("fits");
    assert_eq!(prepared.masked_results, 0);
    assert!(!prepared.messages.iter().skip(2).step_by(2).any(is_stub));
}

#[test]
fn a_small_window_is_fitted_by_masking_harder_and_never_exceeded() {
    let window = 8_192;
    let mut history = history(window);
    for turn in 0..30 {
        read_turn(&mut history, &format!("src/file{turn}.rs"), 4_000 + turn * 300);
        let prepared = history.prepare().expect("a request always fits by squeezing");
        let room = window - window::reply_reserve(window);
        assert!(
            prepared.estimated_tokens <= room,
            "turn {turn}: {} > {room}",
            prepared.estimated_tokens
        );
        // The last turn's result is never a stub.
        let last = prepared.messages.last().expect("a message");
        assert!(!is_stub(last), "turn {turn}");
    }
}

#[test]
fn a_result_larger_than_the_window_is_cut_and_nothing_fits_when_the_prompt_alone_is_too_big() {
    let mut history = history(4_096);
    read_turn(&mut history, "huge.txt", 60_000);
    let prepared = history.prepare().expect("cut to fit");
    let output = results_of(prepared.messages.last().expect("message"))[0]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(output.contains("cut to fit the model's context window"), "{output}");
    assert!(prepared.estimated_tokens <= 4_096 - window::reply_reserve(4_096));

    let mut history = History::new(
        TokenCounter::Conservative,
        2_048,
        true,
        &"a long system prompt ".repeat(400),
        &json!({}),
        "task".into(),
    );
    read_turn(&mut history, "a.txt", 10);
    let no_fit = history.prepare().expect_err("the system prompt alone is too big");
    assert_eq!(no_fit.window, 2_048);
    assert!(no_fit.needed > 2_048);
}

#[test]
fn a_context_length_error_makes_the_next_request_smaller() {
    let mut history = history(200_000);
    for turn in 0..6 {
        read_turn(&mut history, &format!("src/file{turn}.rs"), 3_000);
    }
    let first = history.prepare().expect("fits");
    assert_eq!(
        first.masked_results, 0,
        "under the step threshold nothing is masked yet"
    );
    // The provider counted far more than we estimated.
    history.tighten(first.estimated_tokens);
    let second = history.prepare().expect("fits after masking");
    assert!(second.masked_results > 0);
    let bytes = |messages: &[Message]| messages.iter().map(|m| m.content.len()).sum::<usize>();
    assert!(bytes(&second.messages) < bytes(&first.messages));
}

#[test]
fn full_history_masks_nothing_while_it_fits() {
    let mut history = History::new(
        TokenCounter::Conservative,
        1_000_000,
        false,
        "system",
        &json!({}),
        "task".into(),
    );
    for turn in 0..12 {
        read_turn(&mut history, &format!("f{turn}.rs"), 10_000);
    }
    assert_eq!(history.prepare().expect("fits").masked_results, 0);
}

#[test]
fn breakpoints_mark_the_first_message_the_mask_boundary_and_the_end() {
    let mut history = history(1_000_000);
    read_turn(&mut history, "a.rs", 10);
    assert_eq!(history.prepare().expect("fits").breakpoints, [0, 2]);
    for turn in 0..7 {
        read_turn(&mut history, &format!("src/f{turn}.rs"), 12_000);
    }
    let prepared = history.prepare().expect("fits");
    let last = prepared.messages.len() - 1;
    assert_eq!(prepared.breakpoints.len(), 3, "{:?}", prepared.breakpoints);
    assert_eq!(prepared.breakpoints[0], 0);
    let boundary = prepared.breakpoints[1];
    assert!(is_stub(&prepared.messages[boundary]));
    assert!(!is_stub(&prepared.messages[boundary + 2]));
    assert_eq!(prepared.breakpoints[2], last);
}

#[test]
fn old_replies_lose_long_arguments_only_under_pressure() {
    let reply = json!({"plan": "write", "tool_calls": [{"tool_name": "write_file", "arguments": {"path": "a", "content": "x".repeat(5_000)}}]});
    let elided = elide_arguments(&reply);
    assert_eq!(elided["tool_calls"][0]["arguments"]["path"], "a");
    assert_eq!(
        elided["tool_calls"][0]["arguments"]["content"],
        "[5000 bytes elided to fit the context window]"
    );
}
