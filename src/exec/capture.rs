//! Bounded capture of a command's output.
//!
//! Why: a command may print without end, and what it printed must come back to the model
//! within a fixed budget, with both ends kept (the start says what ran, the end how it ended).
//! The capture holds no more than its cap in memory however much arrives, and decodes lossily
//! so no byte sequence can make upkeep fail.

use std::collections::VecDeque;

/// Bytes read from the output pipe at a time.
pub(super) const READ_CHUNK: usize = 16 * 1024;

/// Bounded output capture: the first half of the cap as it arrives, and a ring holding the
/// latest bytes for the second half, counting what falls out of the middle.
pub(super) struct Capture {
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    omitted: usize,
}

impl Capture {
    pub(super) fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        let tail_cap = cap - head_cap;
        Capture {
            head: Vec::with_capacity(head_cap.min(READ_CHUNK)),
            head_cap,
            tail: VecDeque::with_capacity(tail_cap.min(READ_CHUNK)),
            tail_cap,
            omitted: 0,
        }
    }

    pub(super) fn push(&mut self, mut bytes: &[u8]) {
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let (first, rest) = bytes.split_at(room.min(bytes.len()));
            self.head.extend_from_slice(first);
            bytes = rest;
        }
        if bytes.len() >= self.tail_cap {
            // The chunk alone fills the tail: everything before its last bytes is dropped.
            let keep_from = bytes.len() - self.tail_cap;
            self.omitted += self.tail.len() + keep_from;
            self.tail.clear();
            self.tail.extend(bytes.iter().skip(keep_from));
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.omitted += overflow;
            self.tail.extend(bytes);
        }
    }

    pub(super) fn finish(self) -> (String, usize) {
        let omitted = self.omitted;
        let mut head = self.head;
        let tail: Vec<u8> = self.tail.into_iter().collect();
        if omitted == 0 {
            // Nothing was cut, so the halves are contiguous: decode them as one so that a
            // character split across them is not mangled.
            head.extend(tail);
            return (String::from_utf8_lossy(&head).into_owned(), 0);
        }
        let mut text = String::from_utf8_lossy(&head).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[... {omitted} bytes omitted ...]\n"));
        text.push_str(&String::from_utf8_lossy(&tail));
        (text, omitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_is_independent_of_chunking() {
        let data: Vec<u8> = (0..5000u32).map(|n| (n % 251) as u8).collect();
        let mut reference = Capture::new(777);
        reference.push(&data);
        let expected = reference.finish();
        for chunk in [1, 2, 7, 388, 389, 1000, 5000] {
            let mut capture = Capture::new(777);
            for piece in data.chunks(chunk) {
                capture.push(piece);
            }
            assert_eq!(capture.finish(), expected, "chunks of {chunk}");
        }
        assert_eq!(expected.1, 5000 - 777);
    }

    #[test]
    fn capture_edge_caps() {
        let mut none = Capture::new(0);
        none.push(b"abc");
        assert_eq!(none.finish(), ("[... 3 bytes omitted ...]\n".to_owned(), 3));

        let mut exact = Capture::new(6);
        exact.push(b"abc");
        exact.push(b"def");
        assert_eq!(exact.finish(), ("abcdef".to_owned(), 0));

        let mut one = Capture::new(1);
        one.push(b"abc");
        assert_eq!(one.finish(), ("[... 2 bytes omitted ...]\nc".to_owned(), 2));

        // A character split between head and tail survives when nothing was cut.
        let mut split = Capture::new(4);
        split.push("aé".as_bytes());
        split.push(b"z");
        assert_eq!(split.finish(), ("aéz".to_owned(), 0));
    }
}
