//! How much one reply may start: a cap on its calls and on its delegations, so that a single
//! reply cannot fan out without bound (forty `delegate` calls would start forty sub-agents,
//! each with its own turns). Together with the cycle-wide `--max-turns` (every model call of
//! the cycle, sub-agents' and the reviewer's included; see `agent::execution::Spend`) this
//! bounds what one cycle can cost, whatever the model replies.

/// The most calls one reply may make: a batch is a few reads and edits; this only stops one
/// reply from fanning out without bound. Calls past it are reported as skipped, never run.
pub(crate) const MAX_CALLS_PER_REPLY: usize = 25;

/// The most `delegate` calls one reply may make; each starts a sub-agent with its own turns.
pub(crate) const MAX_DELEGATIONS_PER_REPLY: usize = 3;

/// Why a call past the per-reply caps is not run, if it is one.
pub(crate) fn over_reply_caps(index: usize, delegations: usize, tool: &str) -> Option<String> {
    if index >= MAX_CALLS_PER_REPLY {
        return Some(format!(
            "skipped: a reply may make at most {MAX_CALLS_PER_REPLY} calls; make the rest in your next reply"
        ));
    }
    (tool == "delegate" && delegations >= MAX_DELEGATIONS_PER_REPLY).then(|| {
        format!(
            "skipped: a reply may delegate at most {MAX_DELEGATIONS_PER_REPLY} times; delegate the rest in your next reply, or do it yourself"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_past_either_cap_are_refused_with_the_cap_named() {
        assert_eq!(over_reply_caps(0, 0, "read_file"), None);
        assert_eq!(over_reply_caps(MAX_CALLS_PER_REPLY - 1, 0, "read_file"), None);
        let calls = over_reply_caps(MAX_CALLS_PER_REPLY, 0, "read_file").expect("past the call cap");
        assert!(calls.contains(&MAX_CALLS_PER_REPLY.to_string()), "{calls}");
        assert_eq!(over_reply_caps(1, MAX_DELEGATIONS_PER_REPLY - 1, "delegate"), None);
        assert_eq!(over_reply_caps(1, MAX_DELEGATIONS_PER_REPLY, "read_file"), None);
        let delegations = over_reply_caps(1, MAX_DELEGATIONS_PER_REPLY, "delegate").expect("past the cap");
        assert!(delegations.contains("delegate at most"), "{delegations}");
    }
}
