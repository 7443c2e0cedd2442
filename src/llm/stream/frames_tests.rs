use super::*;

fn all(framer: &mut Framer, chunks: &[&[u8]]) -> Vec<Frame> {
    let mut frames = Vec::new();
    for chunk in chunks {
        frames.extend(framer.push(chunk).expect("frames"));
    }
    frames.extend(framer.finish());
    frames
}

fn frame(name: &str, data: &str) -> Frame {
    Frame {
        name: name.into(),
        data: data.into(),
    }
}

#[test]
fn sse_events_are_cut_on_every_kind_of_line_end_even_split_across_chunks() {
    let body: &[u8] = b"event: a\r\ndata: 1\r\n\r\n: comment\n\ndata:2\rdata: 3\r\revent: c\ndata\n\n";
    let expected = vec![frame("a", "1"), frame("", "2\n3"), frame("c", "")];
    // Whole, and cut between every pair of bytes (a CR at the end of one chunk, its LF at the
    // start of the next, is one line end).
    assert_eq!(all(&mut Framer::new(Framing::ServerSentEvents), &[body]), expected);
    for at in 1..body.len() {
        let (head, tail) = body.split_at(at);
        assert_eq!(
            all(&mut Framer::new(Framing::ServerSentEvents), &[head, tail]),
            expected,
            "cut at {at}"
        );
    }
}

#[test]
fn comments_and_events_without_data_are_not_events() {
    let mut framer = Framer::new(Framing::ServerSentEvents);
    let frames = all(
        &mut framer,
        &[b": keep-alive\n\nevent: ping\n\n\n\nid: 3\nretry: 10\n\n"],
    );
    assert_eq!(frames, vec![]);
}

#[test]
fn an_sse_event_cut_off_by_the_end_of_the_stream_is_dropped() {
    let mut framer = Framer::new(Framing::ServerSentEvents);
    assert_eq!(
        all(&mut framer, &[b"data: {\"a\":1}\n\ndata: {\"b\""]),
        vec![frame("", "{\"a\":1}")]
    );
}

#[test]
fn json_lines_are_events_and_a_last_line_without_newline_still_counts() {
    let mut framer = Framer::new(Framing::JsonLines);
    let frames = all(&mut framer, &[b"{\"a\":1}\r\n\n  \n{\"b\"", b":2}"]);
    assert_eq!(frames, vec![frame("", "{\"a\":1}"), frame("", "{\"b\":2}")]);
}

/// Regression: a `data:` line that never ends grew the parser's buffer without bound (the size
/// cap applied only to finished events) and was rescanned on every chunk (quadratic CPU).
#[test]
fn a_line_that_never_ends_is_refused_at_the_cap_after_looking_at_each_byte_once() {
    for framing in [Framing::ServerSentEvents, Framing::JsonLines] {
        let max = 64 * 1024;
        let mut framer = Framer::with_max_line(framing, max);
        let mut pushed = 0;
        assert_eq!(framer.push(b"data: ").map(|f| f.len()), Ok(0));
        pushed += 6;
        let error = loop {
            pushed += 1;
            match framer.push(b"x") {
                Ok(frames) => assert!(frames.is_empty()),
                Err(error) => break error,
            }
            assert!(framer.held() <= max, "{framing:?}: memory stays under the cap");
            assert!(pushed <= max + 6, "{framing:?}: the cap was never applied");
        };
        assert_eq!(error, FrameError::LineTooLong(max));
        assert!(error.to_string().contains("longer than"), "{error}");
        assert!(
            framer.scanned() <= pushed,
            "{framing:?}: {} bytes looked at for {pushed} pushed",
            framer.scanned()
        );
    }
}

#[test]
fn many_lines_in_many_small_chunks_are_looked_at_once() {
    let body = "data: {\"x\":1}\n\n".repeat(1000);
    let mut framer = Framer::new(Framing::ServerSentEvents);
    let mut count = 0;
    for chunk in body.as_bytes().chunks(7) {
        count += framer.push(chunk).expect("frames").len();
    }
    assert_eq!(count, 1000);
    assert_eq!(framer.scanned(), body.len());
}

#[test]
fn a_long_line_that_ends_under_the_cap_is_whole() {
    let mut framer = Framer::with_max_line(Framing::JsonLines, 100);
    let line = "y".repeat(100);
    let frames = all(&mut framer, &[&line.as_bytes()[..50], &line.as_bytes()[50..], b"\n"]);
    assert_eq!(frames, vec![frame("", &line)]);
    let mut framer = Framer::with_max_line(Framing::JsonLines, 100);
    let too_long = format!("{line}z\n");
    assert_eq!(framer.push(too_long.as_bytes()), Err(FrameError::LineTooLong(100)));
}
