//! How large the server counts what upkeep estimates: the calibration from the prompt tokens
//! the server reports (or its tokenizer counts), and what a context-length error teaches
//! (its window, its count), so that requests are sized by the server's numbers, not a guess.

use super::History;
use crate::llm::window;

/// Bounds of the server-count calibration: no report makes a request look under a quarter, or
/// over twice, of its estimate.
const MIN_CALIBRATION: f64 = 0.25;
const MAX_CALIBRATION: f64 = 2.0;
/// Headroom on a calibrated estimate: the ratio of one request is not exactly the next one's
/// (code and prose tokenise differently).
const CALIBRATION_MARGIN: f64 = 1.1;

impl History {
    /// After the server reported `real` prompt tokens for the last request: scale later
    /// estimates by its count. A lower ratio than one seen before is not believed (a server that
    /// reports only the tokens its cache missed would make requests look smaller than they are).
    pub(crate) fn calibrate(&mut self, real: u64) {
        self.calibrate_ratio(real, self.last_unscaled);
    }

    /// After the server's tokenizer counted `real` tokens in `text`: as [`Self::calibrate`].
    pub(crate) fn calibrate_text(&mut self, real: u64, text: &str) {
        self.calibrate_ratio(real, self.counter.count(text));
    }

    fn calibrate_ratio(&mut self, real: u64, estimated: u64) {
        if real == 0 || estimated == 0 {
            return;
        }
        let ratio = (real as f64 / estimated as f64 * CALIBRATION_MARGIN).clamp(MIN_CALIBRATION, MAX_CALIBRATION);
        let calibration = self.calibration.map_or(ratio, |seen| seen.max(ratio));
        self.calibration = Some(calibration);
    }

    /// Every estimate's multiplier: the calibration, and what context-length errors taught.
    pub(super) fn scale(&self) -> f64 {
        self.calibration.unwrap_or(1.0) * self.safety
    }

    /// After the server said how large it counted a request of `estimated` tokens and how large
    /// its window is: fit into the server's window (when smaller than the one assumed), and scale
    /// later estimates by the server's own count, so the next request is sized by the server's
    /// numbers rather than by a guess.
    pub(crate) fn learn(&mut self, server: crate::llm::window::OverflowSizes, estimated: u64) {
        if server.window >= 1024 && server.window < self.window {
            self.window = server.window;
        }
        let ratio = if estimated == 0 {
            1.0
        } else {
            server.requested as f64 / estimated as f64
        };
        self.safety *= (ratio * 1.05).max(1.0);
    }

    /// After the provider said a request of `estimated` tokens did not fit: scale later
    /// estimates so that such a request no longer looks as if it fits.
    pub(crate) fn tighten(&mut self, estimated: u64) {
        let room = self.room() as f64;
        let implied = if estimated == 0 { 1.0 } else { room / estimated as f64 };
        self.safety = (self.safety * 1.25).max(implied * self.safety * 1.1);
    }

    /// Tokens a request may take: the window less the reply's room.
    pub(super) fn room(&self) -> u64 {
        self.window.saturating_sub(window::reply_reserve(self.window))
    }

    pub(super) fn scaled(&self, estimate: u64) -> u64 {
        (estimate as f64 * self.scale()).ceil() as u64
    }
}
