//! Diagnostics (`tracing`) go to stderr, filtered by `UPKEEP_LOG` (default: warnings), and
//! pass through secret redaction like every other string that leaves the process.

use std::io::Write;

use crate::secrets::Redactor;

struct RedactingStderr {
    redactor: Redactor,
}

impl Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr()
            .lock()
            .write_all(self.redactor.redact(&text).as_bytes())?;
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
        // Colours only for a person at a terminal: a log file or CI log gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .with_writer(move || RedactingStderr {
            redactor: redactor.clone(),
        })
        .try_init();
}
