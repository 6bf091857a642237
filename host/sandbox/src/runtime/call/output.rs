//! Guest stdout/stderr: kept up to a cap, the rest counted and dropped, so a
//! flooding tool can neither grow host memory nor reach the host's stdout.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// A capped in-memory sink for one guest output stream.
#[derive(Clone, Debug)]
pub struct CappedOutput {
    inner: Arc<Mutex<Captured>>,
}

/// What a guest wrote to one stream.
#[derive(Debug, Default, Clone)]
pub struct Captured {
    cap: usize,
    /// The first `cap` bytes written.
    pub kept: Vec<u8>,
    /// Bytes written past the cap.
    pub dropped: u64,
}

impl CappedOutput {
    /// A sink keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Captured {
                cap,
                ..Captured::default()
            })),
        }
    }

    /// A copy of what was captured so far.
    pub fn captured(&self) -> Captured {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Empties the sink (a kept instance's next call starts clean).
    pub fn reset(&self) {
        let mut captured = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        captured.kept.clear();
        captured.dropped = 0;
    }

    fn push(&self, bytes: &[u8]) {
        let mut captured = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let room = captured.cap.saturating_sub(captured.kept.len());
        let kept = room.min(bytes.len());
        captured.kept.extend_from_slice(&bytes[..kept]);
        captured.dropped += (bytes.len() - kept) as u64;
    }
}

impl IsTerminal for CappedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for CappedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[async_trait::async_trait]
impl Pollable for CappedOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CappedOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_up_to_cap_and_counts_the_rest() {
        let sink = CappedOutput::new(4);
        sink.push(b"abc");
        sink.push(b"defg");
        let captured = sink.captured();
        assert_eq!(captured.kept, b"abcd");
        assert_eq!(captured.dropped, 3);
    }
}
