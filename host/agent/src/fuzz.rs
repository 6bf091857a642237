//! Entry points for the fuzz targets in `fuzz/` (not a stable API).

use serde_json::Value;

use crate::provider::ProviderKind;
use crate::provider::sse::SseParser;

/// A provider's answer: as a whole JSON body, and as a stream of
/// server-sent events cut at `split`.
pub fn provider_answer(kind: u8, split: usize, bytes: &[u8]) {
    let kind = match kind % 3 {
        0 => ProviderKind::OpenAi,
        1 => ProviderKind::Anthropic,
        _ => ProviderKind::Gemini,
    };
    let wire = crate::provider::wire_for(kind);
    if let Ok(body) = serde_json::from_slice::<Value>(bytes) {
        let _ = wire.parse(&body);
    }
    let mut parser = SseParser::default();
    let split = split.min(bytes.len());
    let mut events = parser.push(&bytes[..split]);
    events.extend(parser.push(&bytes[split..]));
    events.extend(parser.finish());
    let mut decoder = wire.decoder();
    for event in events {
        if decoder.event(&event.event, &event.data).is_err() {
            return;
        }
    }
    let _ = decoder.finish();
}
