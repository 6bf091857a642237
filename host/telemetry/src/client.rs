//! The HTTP client the OTLP exporters send with: the process's reqwest,
//! driven on its tokio runtime (the exporters' own threads have none).

use std::time::Duration;

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use tokio::runtime::Handle;

/// Longest one export may take, connecting included (OTLP's default).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest collector response read (they answer with small status messages).
const MAX_RESPONSE: usize = 1024 * 1024;

/// Sends each export on the runtime it was made on.
#[derive(Debug, Clone)]
pub(crate) struct ExportClient {
    client: reqwest::Client,
    runtime: Handle,
}

impl ExportClient {
    /// A client whose requests run on `runtime`.
    pub fn new(runtime: Handle) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { client, runtime })
    }
}

#[async_trait::async_trait]
impl HttpClient for ExportClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let mut response = client.execute(request).await?;
            let mut answer = Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = std::mem::take(response.headers_mut());
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_RESPONSE {
                    return Err(HttpError::from(format!(
                        "the collector's response is over {MAX_RESPONSE} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(answer.body(Bytes::from(body))?)
        });
        sent.await?
    }
}
