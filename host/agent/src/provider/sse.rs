//! Server-sent events framing (the `text/event-stream` format all three
//! providers stream in): bytes in, `(event, data)` pairs out.

/// One server-sent event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, or `""`.
    pub event: String,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

/// Splits a byte stream into events; chunks may end anywhere, even inside a
/// UTF-8 sequence.
#[derive(Default)]
pub(crate) struct SseParser {
    buffer: Vec<u8>,
    /// How far `buffer` is known to hold no blank line (so each byte is
    /// scanned about once, however the stream is chunked).
    scanned: usize,
}

impl SseParser {
    /// Adds bytes; returns every event they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        // A separator may straddle the previous end: back up by its length.
        let mut from = self.scanned.saturating_sub(3);
        while let Some((start, separator)) = find_blank_line(&self.buffer[from..]) {
            let end = from + start;
            let block: Vec<u8> = self.buffer.drain(..end + separator).take(end).collect();
            if let Some(event) = parse_block(&String::from_utf8_lossy(&block)) {
                events.push(event);
            }
            from = 0;
        }
        self.scanned = self.buffer.len();
        events
    }

    /// The last event, if the stream ended without a blank line after it.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let rest = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        parse_block(&String::from_utf8_lossy(&rest))
    }
}

/// Position and length of the first blank line (`\n\n` or `\r\n\r\n`).
fn find_blank_line(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn parse_block(block: &str) -> Option<SseEvent> {
    let mut event = String::new();
    let mut data: Vec<&str> = Vec::new();
    for line in block.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => event = value.to_string(),
            "data" => data.push(value),
            _ => {} // comments (`: ping`), ids and retry hints
        }
    }
    (!data.is_empty()).then(|| SseEvent {
        event,
        data: data.join("\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"event: message_start\nda").is_empty());
        let events = parser.push(b"ta: {\"a\":1}\n\n: keep-alive\n\ndata: [DONE]\n\n");
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: "message_start".into(),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "[DONE]".into()
                },
            ]
        );
    }

    #[test]
    fn crlf_and_multiline_data() {
        let mut parser = SseParser::default();
        let events = parser.push(b"data: one\r\ndata: two\r\n\r\n");
        assert_eq!(events[0].data, "one\ntwo");
        assert!(parser.push(b"data: tail").is_empty());
        assert_eq!(parser.finish().map(|e| e.data).as_deref(), Some("tail"));
    }

    /// However a stream is cut into chunks, the same events come out.
    #[test]
    fn every_split_of_a_stream_gives_the_same_events() {
        let stream = "event: a\ndata: {\"x\": \"é\"}\n\n: ping\r\n\r\ndata: one\ndata: two\n\ndata: [DONE]\n\n";
        let whole = SseParser::default().push(stream.as_bytes());
        assert_eq!(whole.len(), 3);
        let bytes = stream.as_bytes();
        for first in 0..=bytes.len() {
            for second in first..=bytes.len() {
                let mut parser = SseParser::default();
                let mut events = parser.push(&bytes[..first]);
                events.extend(parser.push(&bytes[first..second]));
                events.extend(parser.push(&bytes[second..]));
                events.extend(parser.finish());
                assert_eq!(events, whole, "split at {first} and {second}");
            }
        }
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let mut parser = SseParser::default();
        let text = "data: héllo\n\n".as_bytes();
        let split = text.iter().position(|&b| b == 0xc3).unwrap() + 1;
        assert!(parser.push(&text[..split]).is_empty());
        assert_eq!(parser.push(&text[split..])[0].data, "héllo");
    }
}
