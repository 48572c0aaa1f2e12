//! Sources and sinks for the external systems Nervix ingests from and emits to.
//!
//! This crate owns one module per external system (Kafka, HTTP, WebSocket, MQTT, NATS,
//! RabbitMQ, Redis, ZeroMQ, syslog, SQS, Prometheus, Pulsar, PostgreSQL, files), each a source
//! half and a sink half behind two shared traits. It may depend on `nervix-shards` and
//! `nervix-net`.
//!
//! Nothing of that exists yet: the crate holds its place in the workspace so the dependency
//! graph of DESIGN §2 is fixed from the start, and each connector arrives with its own issue.
