//! Diagnostics (`tracing`) go to stderr, filtered by `UPKEEP_LOG` (default: warnings), and
//! pass through secret redaction like every other string that leaves the process, then
//! [`crate::text::escape_terminal`] like every other line for people: a warning can carry a
//! provider's or the forge's error text, and the log formatter's own sanitising leaves carriage
//! returns, bidirectional overrides and field values raw. So the formatter writes no colours
//! of its own (every escape sequence on the line would be the untrusted text's).

use std::io::Write;

use crate::secrets::Redactor;

struct RedactingStderr {
    redactor: Redactor,
}

impl Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let text = crate::text::escape_terminal(&self.redactor.redact(&text));
        std::io::stderr().lock().write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

pub fn init() {
    let redactor = Redactor::from_env();
    let filter = tracing_subscriber::EnvFilter::try_from_env("UPKEEP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        // No colours: the writer escapes every control character (see above).
        .with_ansi(false)
        .without_time()
        .with_writer(move || RedactingStderr {
            redactor: redactor.clone(),
        })
        .try_init();
}
