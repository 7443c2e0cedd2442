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

/// Once at the window, each request dropped one more old turn and rewrote the "left out" note
/// in the first message, so every request of a long cycle on a small window began differently
/// and no prompt cache could serve it. Cuts are now large (down to half the conversation's
/// room) and rare, and between two cuts each request extends the one before byte for byte.
#[test]
fn on_a_small_window_the_prefix_stays_the_same_for_many_requests_between_cuts() {
    let window = 8_192;
    let mut history = history(window);
    let first_message = "first message: the task";
    let mut previous: Option<Vec<Message>> = None;
    let (mut cuts, mut extended) = (0, 0);
    for turn in 0..60 {
        read_turn(&mut history, &format!("src/file{turn}.rs"), 1_500);
        let prepared = history.prepare().expect("fits by cutting");
        assert!(prepared.estimated_tokens <= window - window::reply_reserve(window));
        // The task is never rewritten: the note about left-out turns is not in it.
        assert_eq!(prepared.messages[0].content, first_message, "turn {turn}");
        if let Some(previous) = &previous {
            if prepared.messages.starts_with(previous) {
                extended += 1;
            } else {
                cuts += 1;
            }
        }
        previous = Some(prepared.messages);
    }
    assert!(cuts >= 2, "the window was reached: {cuts} cuts");
    assert!(
        extended >= 4 * cuts,
        "{extended} requests extended the previous one, {cuts} did not"
    );
}

#[test]
fn the_note_about_left_out_turns_is_at_the_cut() {
    let mut history = history(8_192);
    let mut prepared = None;
    for turn in 0..120 {
        read_turn(&mut history, &format!("src/file{turn}.rs"), 1_500);
        prepared = Some(history.prepare().expect("fits"));
    }
    let prepared = prepared.expect("prepared");
    let notes: Vec<usize> = (0..prepared.messages.len())
        .filter(|&index| prepared.messages[index].content.contains("were left out"))
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", prepared.messages);
    // Right after the first kept reply: where the left-out turns were.
    assert_eq!(notes[0], 2);
    assert_eq!(prepared.messages[1].role, crate::llm::Role::Assistant);
    assert_eq!(prepared.messages[2].role, crate::llm::Role::User);
    // Still the JSON object it was, with the note as a field.
    let results: Value = serde_json::from_str(&prepared.messages[2].content).expect("JSON");
    assert!(
        results["note"]
            .as_str()
            .is_some_and(|note| note.starts_with("[Turns 1 to "))
    );
    assert!(results["tool_results"].is_array());
}

/// The conservative estimate is 2-2.7 times a small model's real count: a request the server
/// would take was refused as too large. A count the server reports (or its tokenizer gives)
/// now scales later estimates, within bounds.
#[test]
fn the_servers_own_count_scales_later_estimates_within_bounds() {
    let turns = |history: &mut History| {
        for turn in 0..3 {
            read_turn(history, &format!("src/file{turn}.rs"), 3_000);
        }
    };
    let mut calibrated = history(16_384);
    turns(&mut calibrated);
    let before = calibrated.prepare().expect("fits").estimated_tokens;
    // The server counted 40% of the estimate.
    calibrated.calibrate((before as f64 * 0.4) as u64);
    let after = calibrated.prepare().expect("fits").estimated_tokens;
    assert!(after * 2 < before, "{before} then {after}");
    // A lower count later (a server that counts only what its cache missed) is not believed.
    calibrated.calibrate(1);
    assert_eq!(calibrated.prepare().expect("fits").estimated_tokens, after);
    // An absurd first report cannot make every request look free, nor huge.
    let mut absurd = history(16_384);
    turns(&mut absurd);
    absurd.calibrate(1);
    assert!(absurd.prepare().expect("fits").estimated_tokens * 4 >= before);
    let mut huge = history(16_384);
    turns(&mut huge);
    huge.calibrate(u64::MAX);
    assert!(huge.prepare().expect("fits").estimated_tokens <= before * 2 + 1);
}

#[test]
fn a_tokenizer_count_of_the_first_request_lets_it_fit_a_small_window() {
    let first = "fn f() -> u64 { 1 }\n".repeat(600);
    let mut history = History::new(
        TokenCounter::Conservative,
        4_096,
        true,
        "system prompt",
        &json!({}),
        first.clone(),
    );
    assert!(history.prepare().is_err(), "the conservative estimate does not fit");
    // The server's tokenizer counts about a third of the conservative estimate.
    let estimated = TokenCounter::Conservative.count(&first);
    history.calibrate_text(estimated / 3, &first);
    assert!(history.prepare().is_ok());
}
