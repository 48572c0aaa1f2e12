//! The HTTP client half: what HTTP REQUEST ingestors poll and HTTP REQUEST emitters send,
//! on the connector runtime (DESIGN §3: clients that exist only for tokio run there and hand
//! payloads to shards through bounded channels).
//!
//! A `TYPE HTTP` client's CONFIG (spec: "Resources", "Example HTTP TLS client") is read by
//! [`HttpClientConfig::from_entries`]: `endpoint` (required, `http://` or `https://`),
//! `method` (default `GET`, used by polls), `timeout_ms` (default [`DEFAULT_TIMEOUT_MS`]; covers
//! name resolution, connect, TLS and the response headers), `tls_ca_file` (trust that CA alone),
//! `tls_cert_file` + `tls_key_file` (client identity). Unknown keys are refused, so a typo is
//! never silently ignored. Host names resolve through the node's hickory resolver
//! ([`crate::resolve::node_resolver`]), not reqwest's default.
//!
//! Outcomes are classified once, here ([`classify`]): 2xx delivers (at complete response
//! headers — the body is not awaited); 401, 403, 407, 408, 425, 429 and 5xx, and transport
//! failures, are worth retrying (with the server's `Retry-After` when it sent one); every
//! other status is a refusal that retrying cannot fix.

use std::time::Duration;

use crate::ConnectorError;

/// Default request budget: connect, TLS, and the response headers.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The longest `Retry-After` honoured; a larger one is clamped (a server cannot park a sink).
pub const MAX_RETRY_AFTER_MS: u64 = 300_000;
/// The largest poll response body read, in bytes; larger is a failed poll.
pub const MAX_POLL_BODY_BYTES: usize = 32 << 20;

/// A `TYPE HTTP` client's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpClientConfig {
    pub endpoint: String,
    pub method: String,
    pub timeout_ms: u64,
    pub tls_ca_file: Option<String>,
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
}

impl HttpClientConfig {
    /// Reads CONFIG entries (values already rendered as text, mounts resolved).
    pub fn from_entries(entries: &[(String, String)]) -> Result<HttpClientConfig, ConnectorError> {
        let mut config = HttpClientConfig {
            endpoint: String::new(),
            method: "GET".to_string(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
        };
        for (key, value) in entries {
            match key.as_str() {
                "endpoint" => config.endpoint = value.clone(),
                "method" => config.method = value.to_ascii_uppercase(),
                "timeout_ms" => {
                    config.timeout_ms = value.parse().map_err(|_| {
                        ConnectorError::config("timeout_ms", format!("'{value}' is not a number"))
                    })?
                }
                "tls_ca_file" => config.tls_ca_file = Some(value.clone()),
                "tls_cert_file" => config.tls_cert_file = Some(value.clone()),
                "tls_key_file" => config.tls_key_file = Some(value.clone()),
                other => {
                    return Err(ConnectorError::config(
                        other,
                        "is not an HTTP client setting (endpoint, method, timeout_ms, \
                         tls_ca_file, tls_cert_file, tls_key_file)",
                    ))
                }
            }
        }
        if !(config.endpoint.starts_with("http://") || config.endpoint.starts_with("https://")) {
            return Err(ConnectorError::config(
                "endpoint",
                format!("'{}' must be an http:// or https:// URL", config.endpoint),
            ));
        }
        if config.tls_cert_file.is_some() != config.tls_key_file.is_some() {
            return Err(ConnectorError::config(
                "tls_cert_file",
                "tls_cert_file and tls_key_file go together",
            ));
        }
        Ok(config)
    }
}

/// One request an emitter sends for one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    pub method: String,
    /// Appended to the client's endpoint.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// Shared, so a retried attempt and a frame's other rows reuse one buffer.
    pub body: Option<bytes::Bytes>,
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    Delivered {
        status: u16,
    },
    /// Worth trying again, after `retry_after` when the server said so.
    Retry {
        cause: String,
        retry_after: Option<Duration>,
    },
    /// Retrying cannot help (a 4xx other than the retryable ones, or a request that cannot be
    /// built): the row goes to ON MESSAGE ERROR.
    Refused {
        cause: String,
    },
}

/// Classifies a response status (see the module docs).
pub fn classify(status: u16, retry_after: Option<Duration>) -> Attempt {
    match status {
        200..=299 => Attempt::Delivered { status },
        401 | 403 | 407 | 408 | 425 | 429 | 500..=599 => Attempt::Retry {
            cause: format!("HTTP {status}"),
            retry_after,
        },
        _ => Attempt::Refused {
            cause: format!("HTTP {status}"),
        },
    }
}

/// `Retry-After` as seconds or an HTTP date, clamped to [`MAX_RETRY_AFTER_MS`].
pub fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    let delay = match value.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            at.duration_since(now).unwrap_or(Duration::ZERO)
        }
    };
    Some(delay.min(Duration::from_millis(MAX_RETRY_AFTER_MS)))
}

/// A client for one `TYPE HTTP` client entity: a connection pool, its TLS roots and timeout.
#[derive(Clone)]
pub struct HttpClient {
    inner: reqwest::Client,
    config: HttpClientConfig,
}

impl HttpClient {
    pub fn new(config: HttpClientConfig) -> Result<HttpClient, ConnectorError> {
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .connect_timeout(Duration::from_millis(config.timeout_ms))
            .dns_resolver(crate::resolve::node_resolver())
            .no_proxy();
        let read = |key: &str, path: &str| {
            std::fs::read(path)
                .map_err(|e| ConnectorError::config(key, format!("cannot read '{path}': {e}")))
        };
        if let Some(path) = &config.tls_ca_file {
            let pem = read("tls_ca_file", path)?;
            let ca = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| ConnectorError::config("tls_ca_file", e.to_string()))?;
            builder = builder.tls_certs_only([ca]);
        }
        if let (Some(cert), Some(key)) = (&config.tls_cert_file, &config.tls_key_file) {
            let mut pem = read("tls_cert_file", cert)?;
            pem.extend_from_slice(&read("tls_key_file", key)?);
            let identity = reqwest::Identity::from_pem(&pem)
                .map_err(|e| ConnectorError::config("tls_cert_file", e.to_string()))?;
            builder = builder.identity(identity);
        }
        let inner = builder
            .build()
            .map_err(|e| ConnectorError::config("endpoint", e.to_string()))?;
        Ok(HttpClient { inner, config })
    }

    pub fn config(&self) -> &HttpClientConfig {
        &self.config
    }

    /// One attempt of `spec`; complete at the response headers (the body is dropped).
    pub async fn send(&self, spec: &RequestSpec) -> Attempt {
        let method = match reqwest::Method::from_bytes(spec.method.as_bytes()) {
            Ok(method) => method,
            Err(_) => {
                return Attempt::Refused {
                    cause: format!("'{}' is not an HTTP method", spec.method),
                }
            }
        };
        let url = format!("{}{}", self.config.endpoint, spec.path);
        let mut request = self.inner.request(method, &url);
        for (name, value) in &spec.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(body) = &spec.body {
            request = request.body(body.clone());
        }
        let request = match request.build() {
            Ok(request) => request,
            Err(error) => {
                return Attempt::Refused {
                    cause: format!("cannot build a request to {url}: {error}"),
                }
            }
        };
        match self.inner.execute(request).await {
            Ok(response) => {
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
                classify(response.status().as_u16(), retry_after)
            }
            Err(error) => Attempt::Retry {
                cause: format!("{url}: {}", transport_cause(&error)),
                retry_after: None,
            },
        }
    }

    /// One poll: the client's method on its endpoint. `Ok(None)` for 204 No Content;
    /// `Ok(Some((body, headers)))` for another 2xx; an error says whether retrying can help.
    pub async fn poll(&self) -> Result<Option<Polled>, ConnectorError> {
        let method = reqwest::Method::from_bytes(self.config.method.as_bytes())
            .map_err(|_| ConnectorError::config("method", "is not an HTTP method"))?;
        let url = &self.config.endpoint;
        let response =
            self.inner.request(method, url).send().await.map_err(|e| {
                ConnectorError::transient(format!("{url}: {}", transport_cause(&e)))
            })?;
        let status = response.status().as_u16();
        if status == 204 {
            return Ok(None);
        }
        if let Attempt::Retry { cause, .. } | Attempt::Refused { cause } = classify(status, None) {
            return Err(
                if matches!(status, 401 | 403 | 407 | 408 | 425 | 429 | 500..=599) {
                    ConnectorError::transient(format!("{url}: {cause}"))
                } else {
                    ConnectorError::permanent(format!("{url}: {cause}"))
                },
            );
        }
        let headers = response
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
            .collect();
        if response
            .content_length()
            .is_some_and(|length| length > MAX_POLL_BODY_BYTES as u64)
        {
            return Err(ConnectorError::transient(format!(
                "{url}: the response body is over {MAX_POLL_BODY_BYTES} bytes"
            )));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| ConnectorError::transient(format!("{url}: {}", transport_cause(&e))))?;
        if body.len() > MAX_POLL_BODY_BYTES {
            return Err(ConnectorError::transient(format!(
                "{url}: the response body is over {MAX_POLL_BODY_BYTES} bytes"
            )));
        }
        Ok(Some(Polled {
            body: body.to_vec(),
            headers,
        }))
    }
}

/// A poll's response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Polled {
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
}

/// The innermost cause of a transport error (reqwest's own message is only "error sending
/// request").
fn transport_cause(error: &reqwest::Error) -> String {
    let mut cause = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        cause = inner.to_string();
        source = inner.source();
    }
    if error.is_timeout() {
        format!("timed out ({cause})")
    } else {
        cause
    }
}

/// The anchored cadence of a polling source (spec: "issues the first request immediately,
/// then follows an anchored … cadence; slow responses coalesce missed occurrences into one
/// request at the newest due instant"). Pure: the caller supplies elapsed time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    every_ns: u64,
    /// The index of the next due instant (`anchor + index × every`).
    next: u64,
}

impl Cadence {
    pub fn new(every_ns: u64) -> Cadence {
        Cadence {
            every_ns: every_ns.max(1),
            next: 0,
        }
    }

    /// Nanoseconds after the anchor when the next poll is due.
    pub fn due_ns(&self) -> u64 {
        self.next.saturating_mul(self.every_ns)
    }

    /// A poll issued at its due instant finished `elapsed_ns` after the anchor: the next one
    /// is the following due instant, or — when due instants passed meanwhile — the newest of
    /// them, once (so it is issued at once).
    pub fn after_poll(&mut self, elapsed_ns: u64) {
        let newest_passed = elapsed_ns / self.every_ns;
        self.next = (self.next + 1).max(newest_passed);
    }
}

/// Polls `client` on `cadence` until `stopped`, sending each non-empty response to `out`
/// (bounded: a shard that cannot take more pauses the poller). While `suspended`, due polls
/// are skipped, not postponed (SUSPEND's sampling gap). Failures are logged when a streak
/// starts and when it ends, not on every poll.
pub async fn poll_loop(
    client: HttpClient,
    every_ns: u64,
    suspended: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stopped: std::sync::Arc<std::sync::atomic::AtomicBool>,
    out: async_channel::Sender<Polled>,
    label: String,
) {
    use std::sync::atomic::Ordering;
    let anchor = tokio::time::Instant::now();
    let mut cadence = Cadence::new(every_ns);
    let mut failing = false;
    loop {
        tokio::time::sleep_until(anchor + Duration::from_nanos(cadence.due_ns())).await;
        if stopped.load(Ordering::Acquire) || out.is_closed() {
            return;
        }
        if !suspended.load(Ordering::Acquire) {
            match client.poll().await {
                Ok(Some(polled)) => {
                    if out.send(polled).await.is_err() {
                        return;
                    }
                    failing = false;
                }
                Ok(None) => failing = false,
                Err(error) => {
                    if !failing {
                        tracing::warn!("{label}: poll failed: {error}");
                    }
                    failing = true;
                }
            }
        }
        cadence.after_poll(anchor.elapsed().as_nanos() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_as_the_issue_lists() {
        for status in [200, 201, 202, 204, 299] {
            assert_eq!(classify(status, None), Attempt::Delivered { status });
        }
        for status in [401, 403, 407, 408, 425, 429, 500, 502, 503, 599] {
            assert!(
                matches!(classify(status, None), Attempt::Retry { .. }),
                "{status}"
            );
        }
        for status in [400, 404, 405, 409, 410, 413, 422, 451] {
            assert!(
                matches!(classify(status, None), Attempt::Refused { .. }),
                "{status}"
            );
        }
    }

    #[test]
    fn cadence_is_anchored_and_coalesces_missed_polls() {
        let mut cadence = Cadence::new(100);
        assert_eq!(cadence.due_ns(), 0, "the first poll is immediate");
        cadence.after_poll(10);
        assert_eq!(cadence.due_ns(), 100);
        // A fast poll keeps the anchor: due at 200, not 100 + 130.
        cadence.after_poll(130);
        assert_eq!(cadence.due_ns(), 200);
        // A poll that ran past 3 due instants (300, 400, 500) is followed by one poll at the
        // newest (500, already passed: immediately), then the cadence goes on at 600.
        cadence.after_poll(550);
        assert_eq!(cadence.due_ns(), 500);
        cadence.after_poll(560);
        assert_eq!(cadence.due_ns(), 600);
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_and_is_clamped() {
        let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(120));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("999999", now),
            Some(Duration::from_millis(MAX_RETRY_AFTER_MS))
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[tokio::test]
    async fn a_host_name_resolves_through_the_node_resolver() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = tcp.read(&mut request).await.unwrap();
            tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .await
                .unwrap();
        });
        let entries = |endpoint: &str| vec![("endpoint".to_string(), endpoint.to_string())];
        let config =
            HttpClientConfig::from_entries(&entries(&format!("http://localhost:{port}/x")))
                .unwrap();
        let polled = HttpClient::new(config).unwrap().poll().await.unwrap();
        assert_eq!(polled.unwrap().body, b"ok");
        let config =
            HttpClientConfig::from_entries(&entries("http://nervix-test.invalid/x")).unwrap();
        let error = HttpClient::new(config).unwrap().poll().await.unwrap_err();
        assert!(error.retryable(), "{error}");
        assert!(
            error
                .to_string()
                .contains("could not resolve host 'nervix-test.invalid'"),
            "{error}"
        );
    }

    #[test]
    fn config_is_checked_key_by_key() {
        let entries = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let config =
            HttpClientConfig::from_entries(&entries(&[("endpoint", "http://127.0.0.1:1/x")]))
                .unwrap();
        assert_eq!(config.method, "GET");
        assert_eq!(config.timeout_ms, DEFAULT_TIMEOUT_MS);
        let error = HttpClientConfig::from_entries(&entries(&[
            ("endpoint", "http://x"),
            ("tiemout_ms", "5"),
        ]))
        .unwrap_err();
        assert!(error.to_string().contains("tiemout_ms"), "{error}");
        let error =
            HttpClientConfig::from_entries(&entries(&[("endpoint", "ftp://x")])).unwrap_err();
        assert!(error.to_string().contains("http://"), "{error}");
    }
}
