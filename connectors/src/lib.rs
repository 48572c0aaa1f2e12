//! Sources and sinks for the external systems Nervix ingests from and emits to.
//!
//! This crate owns one module per external system (Kafka, HTTP, WebSocket, MQTT, NATS,
//! RabbitMQ, Redis, ZeroMQ, syslog, SQS, Prometheus, Pulsar, PostgreSQL, files). It may
//! depend on `nervix-shards` and `nervix-net`; it never sees NSPL, codecs or Arrow — the engine
//! hands it bytes and takes bytes back.
//!
//! What exists: [`http`], the HTTP client half (HTTP REQUEST polls and requests);
//! [`websocket`], the outbound WebSocket session of WEBSOCKETS CONNECTION ingestors (connect
//! within one budget, frames both ways, reconnect with backoff); and [`runtime`], the connector
//! runtime that tokio-only clients run on. Every other system arrives with its own issue.
//! [`resolve`] is the node resolver (hickory, on the system configuration) through which the
//! outbound connectors resolve host names.
//! [`kafka`] is the Kafka consumer and producer the shards poll (librdkafka), and the mock
//! cluster behind tests and `nervix dev kafka`.

pub mod http;
pub mod kafka;
pub mod resolve;
pub mod runtime;
pub mod websocket;

/// Why a connector could not do what was asked, and whether trying again can help (Arroyo's
/// distinction: a transient failure is retried on the policy, a permanent one is reported).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectorError {
    /// A client setting is wrong: fix the CONFIG (retrying cannot help).
    #[error("client setting '{key}' {reason}")]
    Config { key: String, reason: String },
    /// The remote end failed in a way that may pass (unreachable, timeout, 5xx, 429…).
    #[error("{0} (will retry)")]
    Transient(String),
    /// The remote end refused in a way retrying cannot fix (most 4xx).
    #[error("{0}")]
    Permanent(String),
}

impl ConnectorError {
    pub fn config(key: &str, reason: impl Into<String>) -> ConnectorError {
        ConnectorError::Config {
            key: key.to_string(),
            reason: reason.into(),
        }
    }

    pub fn transient(cause: impl Into<String>) -> ConnectorError {
        ConnectorError::Transient(cause.into())
    }

    pub fn permanent(cause: impl Into<String>) -> ConnectorError {
        ConnectorError::Permanent(cause.into())
    }

    /// Whether trying again can help.
    pub fn retryable(&self) -> bool {
        matches!(self, ConnectorError::Transient(_))
    }
}
