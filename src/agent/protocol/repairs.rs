//! The names of the repairs the lenient parser made to a reply.
//!
//! Why this exists: a repaired reply runs as if the model had written it correctly, so the
//! `model_response` event names each repair; an operator reading `--json` or a trace sees which
//! habits of a model cost nothing and which ones the parser had to fix.

/// One kind of repair, named in the `repairs` field of the `model_response` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Repair {
    /// `# ...` comments outside strings were removed.
    HashComments,
    /// `True`, `False` and `None` outside strings were read as `true`, `false` and `null`.
    PythonLiterals,
    /// `“` and `”` used as string delimiters were read as `"`.
    SmartQuotes,
    /// Raw newlines, carriage returns and tabs inside strings were read as `\n`, `\r`, `\t`.
    RawControlCharacters,
    /// A comma was missing between two members of an object or two items of an array.
    MissingCommas,
    /// The reply's outermost `}` was missing, with everything inside it complete.
    MissingFinalBrace,
    /// The whole reply was one JSON string whose content is the reply object.
    ReplyAsString,
    /// String literals joined with `+` were read as one string.
    StringConcatenation,
    /// `tool_calls` was one call object instead of an array.
    ToolCallsObject,
    /// The reply was an array of calls, without the `{"plan", "tool_calls"}` wrapper.
    BareCallArray,
    /// The reply was one call, without the `{"plan", "tool_calls"}` wrapper.
    BareCall,
    /// The calls came in `<tool_call>{...}</tool_call>` tags.
    ToolCallTags,
    /// A tool name carried a function-calling namespace (`functions.`, `default_api:`).
    NamespacedToolName,
}

impl Repair {
    /// The name used in events and in docs/events.md.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::HashComments => "hash_comments",
            Self::PythonLiterals => "python_literals",
            Self::SmartQuotes => "smart_quotes",
            Self::RawControlCharacters => "raw_control_characters",
            Self::MissingCommas => "missing_commas",
            Self::MissingFinalBrace => "missing_final_brace",
            Self::ReplyAsString => "reply_as_string",
            Self::StringConcatenation => "string_concatenation",
            Self::ToolCallsObject => "tool_calls_object",
            Self::BareCallArray => "bare_call_array",
            Self::BareCall => "bare_call",
            Self::ToolCallTags => "tool_call_tags",
            Self::NamespacedToolName => "namespaced_tool_name",
        }
    }
}
