//! Benchmarks for Nervix.
//!
//! This crate owns the Nexmark generator and queries, the load drivers, the end-to-end
//! scenarios run by `nervix bench …`, and the criterion micro-benchmarks whose results `perf/`
//! records. It may depend on the `nervix` engine crate.
//!
//! What exists: the `nervix-bench` binary (`nervix bench` execs it) with the end-to-end
//! scenarios of DESIGN §10 that the engine can run today ([`scenario`]: client producer →
//! junction `contains` filter + `upper` map → client consumer, over loopback and in-process),
//! their fixed-seed row generator ([`gen`]), results as a table and one JSON line
//! ([`report`]), and the compare tool ([`compare`]); plus the criterion benchmarks of the NSPL
//! front end and the console; and `http-filter-map` ([`http`]): keep-alive HTTP requests of
//! JSON records into an HTTP ENDPOINT ingestor feeding the same junction; and
//! `kafka-filter-map` ([`kafka`]): a Kafka topic → KAFKA TOPIC INGESTOR filter+map → KAFKA
//! TOPIC EMITTER → topic, against librdkafka's mock cluster in a process of its own; and
//! Nexmark ([`nexmark`]): the generator, the NSPL ports, their reference answers and
//! `nexmark-q0|q1|q2`; and `host-gaps` ([`host_gaps`]), a probe of how long the machine
//! takes a CPU away from a thread that never sleeps.

pub mod affinity;
pub mod compare;
pub mod cpu;
pub mod gen;
pub mod host_gaps;
pub mod http;
pub mod kafka;
pub mod nexmark;
pub mod pacer;
pub mod report;
pub mod scenario;
