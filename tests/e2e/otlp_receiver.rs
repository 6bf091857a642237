//! An OTLP/HTTP collector on 127.0.0.1 for the tests: it decodes the real
//! protobuf bodies of `/v1/traces` and `/v1/metrics` with the
//! OpenTelemetry project's own message types and keeps what arrived.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::net::TcpListener;

/// One exported span, decoded.
#[derive(Clone, Debug)]
pub struct Received {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub name: String,
    /// `SPAN_KIND_*`: 1 internal, 2 server, 3 client.
    pub kind: i32,
    /// `STATUS_CODE_*`: 0 unset, 2 error.
    pub status: i32,
    pub attributes: HashMap<String, String>,
    /// The resource's `service.name`.
    pub service: String,
}

impl Received {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// One data point of a sum (counter), decoded.
#[derive(Clone, Debug)]
pub struct Point {
    pub metric: String,
    pub attributes: HashMap<String, String>,
    pub value: f64,
}

#[derive(Default)]
struct Seen {
    spans: Vec<Received>,
    points: Vec<Point>,
    /// Bodies that were not `application/x-protobuf` or did not decode.
    bad: Vec<String>,
}

/// The collector; it stops with the test's runtime.
#[derive(Clone)]
pub struct Collector {
    pub url: String,
    seen: Arc<Mutex<Seen>>,
}

impl Collector {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen::default()));
        let state = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = state.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| receive(request, state.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { url, seen }
    }

    pub fn spans(&self) -> Vec<Received> {
        self.seen.lock().unwrap().spans.clone()
    }

    pub fn points(&self) -> Vec<Point> {
        self.seen.lock().unwrap().points.clone()
    }

    /// What arrived that the collector could not read.
    pub fn bad(&self) -> Vec<String> {
        self.seen.lock().unwrap().bad.clone()
    }
}

async fn receive(
    request: Request<hyper::body::Incoming>,
    seen: Arc<Mutex<Seen>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_string();
    let protobuf = request
        .headers()
        .get("content-type")
        .is_some_and(|v| v == "application/x-protobuf");
    let body = request.into_body().collect().await.map(|b| b.to_bytes());
    let mut seen = seen.lock().unwrap();
    let Ok(body) = body else {
        seen.bad.push(format!("{path}: the body broke off"));
        return Ok(Response::new(Full::new(Bytes::new())));
    };
    if !protobuf {
        seen.bad.push(format!("{path}: not application/x-protobuf"));
    }
    match path.as_str() {
        "/v1/traces" => match ExportTraceServiceRequest::decode(body) {
            Ok(export) => {
                for resource in export.resource_spans {
                    let service = resource
                        .resource
                        .map(|r| attributes(&r.attributes))
                        .and_then(|mut a| a.remove("service.name"))
                        .unwrap_or_default();
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            seen.spans.push(decoded(span, &service));
                        }
                    }
                }
            }
            Err(e) => seen.bad.push(format!("{path}: {e}")),
        },
        "/v1/metrics" => match ExportMetricsServiceRequest::decode(body) {
            Ok(export) => {
                let metrics = export
                    .resource_metrics
                    .into_iter()
                    .flat_map(|r| r.scope_metrics)
                    .flat_map(|s| s.metrics);
                for metric in metrics {
                    let points = match metric.data {
                        Some(Data::Sum(sum)) => sum.data_points,
                        Some(Data::Gauge(gauge)) => gauge.data_points,
                        _ => Vec::new(),
                    };
                    for point in points {
                        let value = match point.value {
                            Some(Number::AsInt(n)) => n as f64,
                            Some(Number::AsDouble(x)) => x,
                            None => continue,
                        };
                        seen.points.push(Point {
                            metric: metric.name.clone(),
                            attributes: attributes(&point.attributes),
                            value,
                        });
                    }
                }
            }
            Err(e) => seen.bad.push(format!("{path}: {e}")),
        },
        other => seen.bad.push(format!("{other}: not an OTLP path")),
    }
    Ok(Response::new(Full::new(Bytes::new())))
}

fn decoded(span: Span, service: &str) -> Received {
    Received {
        trace_id: hex::encode(&span.trace_id),
        span_id: hex::encode(&span.span_id),
        parent_span_id: hex::encode(&span.parent_span_id),
        name: span.name,
        kind: span.kind,
        status: span.status.map_or(0, |s| s.code),
        attributes: attributes(&span.attributes),
        service: service.to_string(),
    }
}

fn attributes(list: &[KeyValue]) -> HashMap<String, String> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Any::StringValue(s)) => s.clone(),
                Some(Any::IntValue(n)) => n.to_string(),
                Some(Any::BoolValue(b)) => b.to_string(),
                Some(Any::DoubleValue(x)) => x.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}
