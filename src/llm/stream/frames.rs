//! Cutting a reply's raw bytes into events: server-sent events (OpenAI, Anthropic, Gemini) or
//! newline-delimited JSON (Ollama).
//!
//! Written here rather than taken from an event-stream crate because the cut is where a hostile
//! or broken server attacks memory and CPU: a `data:` line that never ends, sent in tiny pieces.
//! So this framer guarantees:
//! - **Linear work.** Every byte is looked at once: a line end is searched for only in the bytes
//!   that just arrived, never again in the part of a line already held.
//! - **Bounded memory.** A line longer than [`MAX_LINE_BYTES`] is an error as soon as it gets
//!   that long, ended or not; an event's data is bounded by the caller's cap on raw bytes.
//! - **The SSE rules** of the WHATWG specification: lines end with CRLF, LF or CR; `:` starts a
//!   comment; a blank line dispatches the event; an event with no data is dropped; an event cut
//!   off by the end of the stream is dropped (the stream was cut; the caller retries).

/// The longest line the framer holds. One event of a streamed reply is a few hundred bytes;
/// this is far above any real one and far below what would strain memory.
pub(crate) const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// One event: its SSE event name (empty when it has none, and for JSON lines) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub name: String,
    pub data: String,
}

/// Why the bytes cannot be cut into events.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum FrameError {
    #[error("a line of the reply stream is longer than {} MiB without an end", .0 / (1024 * 1024))]
    LineTooLong(usize),
}

/// Splits bytes into lines ending in CRLF, LF or CR, looking at each byte once.
#[derive(Debug)]
struct Lines {
    /// The start of a line whose end has not arrived yet.
    partial: Vec<u8>,
    /// The last chunk ended in CR: an LF starting the next one belongs to that line end.
    after_cr: bool,
    max: usize,
    /// Bytes looked at, for the tests that prove the work is linear.
    #[cfg(test)]
    scanned: usize,
}

impl Lines {
    fn new(max: usize) -> Self {
        Self {
            partial: Vec::new(),
            after_cr: false,
            max,
            #[cfg(test)]
            scanned: 0,
        }
    }

    /// Feeds `chunk`; calls `line` with every line it completes.
    fn push(&mut self, mut chunk: &[u8], mut line: impl FnMut(&[u8])) -> Result<(), FrameError> {
        if chunk.is_empty() {
            return Ok(());
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(end) = chunk.iter().position(|&byte| byte == b'\n' || byte == b'\r') {
            #[cfg(test)]
            {
                self.scanned += end + 1;
            }
            let (head, rest) = chunk.split_at(end);
            if self.partial.len() + head.len() > self.max {
                return Err(FrameError::LineTooLong(self.max));
            }
            if self.partial.is_empty() {
                line(head);
            } else {
                self.partial.extend_from_slice(head);
                line(&self.partial);
                self.partial.clear();
            }
            chunk = match rest {
                [b'\r', b'\n', tail @ ..] => tail,
                [b'\r'] => {
                    self.after_cr = true;
                    &[]
                }
                [_, tail @ ..] => tail,
                [] => &[],
            };
        }
        #[cfg(test)]
        {
            self.scanned += chunk.len();
        }
        if self.partial.len() + chunk.len() > self.max {
            return Err(FrameError::LineTooLong(self.max));
        }
        self.partial.extend_from_slice(chunk);
        Ok(())
    }

    /// What is left at the end of the stream: a last line with no end.
    fn rest(&mut self) -> Option<Vec<u8>> {
        (!self.partial.is_empty()).then(|| std::mem::take(&mut self.partial))
    }
}

/// How a provider's stream is cut into events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    ServerSentEvents,
    JsonLines,
}

/// The event being assembled from SSE lines.
#[derive(Debug, Default)]
struct Pending {
    name: String,
    data: String,
    has_data: bool,
}

/// Cuts a stream's bytes into [`Frame`]s as they arrive.
#[derive(Debug)]
pub(crate) struct Framer {
    framing: Framing,
    lines: Lines,
    pending: Pending,
}

impl Framer {
    pub(crate) fn new(framing: Framing) -> Self {
        Self::with_max_line(framing, MAX_LINE_BYTES)
    }

    fn with_max_line(framing: Framing, max: usize) -> Self {
        Self {
            framing,
            lines: Lines::new(max),
            pending: Pending::default(),
        }
    }

    /// Feeds the next bytes of the stream; returns the events they complete.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<Frame>, FrameError> {
        let mut frames = Vec::new();
        let framing = self.framing;
        let pending = &mut self.pending;
        self.lines
            .push(chunk, |line| take_line(framing, pending, line, &mut frames))?;
        Ok(frames)
    }

    /// The stream has ended: a JSON line without its newline still counts (servers omit the
    /// last one); an SSE event without its blank line does not (the stream was cut).
    pub(crate) fn finish(&mut self) -> Option<Frame> {
        let rest = self.lines.rest()?;
        match self.framing {
            Framing::JsonLines => json_line(&rest),
            Framing::ServerSentEvents => None,
        }
    }

    #[cfg(test)]
    fn scanned(&self) -> usize {
        self.lines.scanned
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.lines.partial.len() + self.pending.data.len()
    }
}

fn json_line(line: &[u8]) -> Option<Frame> {
    let text = String::from_utf8_lossy(line);
    (!text.trim().is_empty()).then(|| Frame {
        name: String::new(),
        data: text.into_owned(),
    })
}

/// One complete line: a JSON line is an event; an SSE line is a field, a comment, or the blank
/// line that dispatches the event.
fn take_line(framing: Framing, pending: &mut Pending, line: &[u8], frames: &mut Vec<Frame>) {
    if framing == Framing::JsonLines {
        frames.extend(json_line(line));
        return;
    }
    if line.is_empty() {
        let event = std::mem::take(pending);
        if event.has_data {
            let mut data = event.data;
            if data.ends_with('\n') {
                data.pop();
            }
            frames.push(Frame { name: event.name, data });
        }
        return;
    }
    if line.starts_with(b":") {
        return;
    }
    let (field, value) = match line.iter().position(|&byte| byte == b':') {
        Some(colon) => {
            let value = &line[colon + 1..];
            (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
        }
        None => (line, &[][..]),
    };
    match field {
        b"data" => {
            pending.data.push_str(&String::from_utf8_lossy(value));
            pending.data.push('\n');
            pending.has_data = true;
        }
        b"event" => pending.name = String::from_utf8_lossy(value).into_owned(),
        // `id` and `retry` steer reconnection, which a one-shot reply never does.
        _ => {}
    }
}

#[cfg(test)]
#[path = "frames_tests.rs"]
mod tests;
