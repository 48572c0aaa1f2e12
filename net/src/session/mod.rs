//! The session protocol (DESIGN §8; spec: Client Ingestors, "Outcomes" and "Producers").
//!
//! A session is a TCP (+TLS) connection carrying length-prefixed binary frames. This module
//! owns the pure, socket-free and clock-free parts of it, so they can be tested exhaustively:
//!
//! - [`frame`]: the frames a producer exchanges with the server (open, opened, refused,
//!   submit, outcome, ended, admission changed, close) and those a consumer exchanges with it
//!   (open, opened, refused, delivery, delivery ack, ended, close), their hand-written encoding
//!   (primitives in the private `wire` module), and a [`frame::FrameDecoder`] that turns
//!   arbitrary byte chunks into frames or a [`frame::FrameError`], never panicking and never
//!   buffering more than one bounded frame.
//! - [`credit`]: the server-side ledger of one producer's credit ([`credit::ProducerCredit`]):
//!   a batch holds its share from the moment it is sent until its outcome is observed, and a
//!   batch beyond the credit is refused as credit exceeded and ends the producer as a protocol
//!   violation.
//!
//! The client side that drives these over a socket is [`crate::client`]; the server's listener
//! and session state machine live in the engine.

pub mod credit;
pub mod frame;
mod wire;
