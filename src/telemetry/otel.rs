//! The `otel` feature: spans of the [`super::TARGET`] target become OpenTelemetry spans
//! (tracing-opentelemetry), batched and sent as OTLP/HTTP protobuf by guardwire's own upstream
//! client — rustls with verification on, the extra CA of `upstream_tls`, its connect timeout.

use super::TARGET;
use crate::config::{BaseUrl, Config};
use crate::upstream::{UpstreamBase, UpstreamClient};
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HeaderExtractor, HeaderInjector, HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use std::sync::Arc;
use std::time::Duration;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

/// The span pipeline while guardwire runs; [`TraceExport::shutdown`] sends what is batched.
pub struct TraceExport(SdkTracerProvider);

impl TraceExport {
    /// Exports the spans still batched and stops the exporter (blocking: call it off the
    /// runtime's worker threads).
    pub fn shutdown(self) {
        if let Err(e) = self.0.shutdown() {
            tracing::warn!(error = %e, "trace export did not shut down cleanly");
        }
    }
}

/// The layer that turns guardwire's request spans into OpenTelemetry spans, when
/// `telemetry.otlp_endpoint` is set. Must be called inside the Tokio runtime (the exporter's
/// HTTP calls run on it).
pub fn layer(config: &Config) -> Result<Option<(super::BoxedLayer, TraceExport)>, String> {
    let t = &config.telemetry;
    let Some(url) = t.endpoint() else {
        return Ok(None);
    };
    let timeout = Duration::from_millis(t.export_timeout_ms);
    let client = OtlpClient {
        client: Arc::new(UpstreamClient::for_config(config)?),
        // The exporter sends origin-form paths under the full endpoint URL given below.
        base: UpstreamBase::new(&BaseUrl {
            prefix: String::new(),
            ..url.clone()
        })?,
        timeout,
        runtime: tokio::runtime::Handle::current(),
    };
    let endpoint = format!("{url}/v1/traces");
    let exporter = SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .with_timeout(timeout)
        .build()
        .map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            t.sample_ratio,
        ))))
        .with_resource(
            Resource::builder()
                .with_service_name(t.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("guardwire");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(Targets::new().with_target(TARGET, tracing::Level::INFO));
    let layer: super::BoxedLayer = Box::new(layer) as Box<dyn Layer<Registry> + Send + Sync>;
    Ok(Some((layer, TraceExport(provider))))
}

/// A client's `traceparent` (W3C Trace Context) makes `span` part of the client's trace.
pub fn adopt_parent(span: &Span, headers: &HeaderMap) {
    if span.is_disabled() || !headers.contains_key("traceparent") {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    let _ = span.set_parent(cx);
}

/// Writes `span`'s `traceparent` (and `tracestate`) into an upstream request's headers,
/// replacing the client's: the upstream's spans become children of guardwire's.
pub fn inject(span: &Span, headers: &mut HeaderMap) {
    if span.is_disabled() {
        return; // traces are off: the client's own headers go on unchanged
    }
    let cx = span.context();
    TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(headers));
}

/// OTLP export over [`UpstreamClient`]. The batch processor polls exports on a thread of its
/// own, outside Tokio; each call is spawned onto the runtime and awaited from there.
struct OtlpClient {
    client: Arc<UpstreamClient>,
    base: UpstreamBase,
    timeout: Duration,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for OtlpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OtlpClient({}://{})",
            self.base.scheme(),
            self.base.authority()
        )
    }
}

/// At most this much of a receiver's answer is read (it is only looked at for errors).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

#[async_trait::async_trait]
impl HttpClient for OtlpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri = self.base.uri_for(target)?;
        let mut req = Request::builder()
            .method(parts.method)
            .uri(uri)
            .body(Full::new(body))?;
        *req.headers_mut() = parts.headers;
        let (client, base, timeout) = (Arc::clone(&self.client), self.base.clone(), self.timeout);
        let call = async move {
            let resp = client.request(&base, req).await?;
            let (parts, body) = resp.into_parts();
            let body = Limited::new(body, MAX_ANSWER_BYTES)
                .collect()
                .await?
                .to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        // The timer too is made on the runtime (`timeout` needs its reactor).
        let within = async move { tokio::time::timeout(timeout, call).await };
        match self.runtime.spawn(within).await? {
            Ok(result) => result,
            Err(_) => Err(format!("the OTLP receiver did not answer within {timeout:?}").into()),
        }
    }
}
