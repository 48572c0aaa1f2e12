//! The Rust client library of the session protocol (DESIGN §8; spec: Client Ingestors,
//! "Outcomes" and "Producers"), on tokio.
//!
//! A [`Session`] is one connection to a node's session port. On it the application opens
//! [`Producer`]s, which submit Arrow batches to CLIENT PRODUCER ingestors and read each batch's
//! terminal [`Outcome`](crate::session::frame::Outcome), and [`Consumer`]s, which receive
//! deliveries from CLIENT CONSUMER emitters and acknowledge or negatively acknowledge them.
//!
//! ```no_run
//! # async fn demo(batch: arrow_array::RecordBatch) -> Result<(), nervix_net::client::ClientError> {
//! use nervix_net::client::{ProducerOptions, Session};
//! let session = Session::connect("127.0.0.1:47392").await?;
//! let mut producer = session
//!     .open_producer(ProducerOptions {
//!         domain: "shop".into(),
//!         ingestor: "orders_in".into(),
//!         expected_fields: vec![],
//!         credit_batches: 8,
//!         credit_bytes: 64 << 20,
//!     })
//!     .await?;
//! let seq = producer.submit(&batch).await?;
//! for (seq, outcome) in producer.drain().await? {
//!     println!("batch {seq}: {outcome:?}");
//! }
//! producer.close().await
//! # }
//! ```
//!
//! How it works, and why it is bounded:
//!
//! - One reader task per session decodes frames with the crate's
//!   [`FrameDecoder`](crate::session::frame::FrameDecoder) and routes each to its producer or
//!   consumer through a bounded channel whose capacity is that attachment's credit plus a few
//!   control frames, so a server that keeps to the protocol can never make it wait, and one
//!   that does not can only make it wait, never grow memory. One writer task per session
//!   writes frames from a bounded channel through one buffer, flushing when the channel runs
//!   empty; a submitted batch's IPC bytes are shared with it, never copied again.
//! - A producer keeps every batch's IPC bytes until its terminal outcome, and counts those
//!   batches and bytes against its granted credit, so a batch refused temporarily can always
//!   be resent within the credit. Temporary outcomes (busy, suspended) are never returned:
//!   busy is resent after the retry policy's backoff (BACKOFF doubling per attempt up to MAX),
//!   suspended once the server reports admission open again. Resends happen while the
//!   application is inside a producer method (`submit`, `next_outcome`, `drain`).
//! - Anything the server sends that breaks the protocol ends the whole session with
//!   [`ClientError::Protocol`]; nothing the server sends can make the library panic.
//!
//! TLS is not implemented yet; [`Session::from_stream`] is the seam: it runs a session over any
//! byte stream, such as a `tokio_rustls` client stream.

mod consumer;
mod error;
mod producer;
mod session;

pub use consumer::{Consumer, ConsumerOptions, Delivery};
pub use error::ClientError;
pub use producer::{Producer, ProducerOpenedInfo, ProducerOptions, MAX_UNREAD_OUTCOMES};
pub use session::Session;
