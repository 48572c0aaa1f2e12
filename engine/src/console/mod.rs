//! The console: the TCP (optionally TLS) text interface operators drive with `nc` or
//! `nervix console` (DESIGN §8), on the control core's tokio runtime (DESIGN §3).
//!
//! The module owns the wire and the door, nothing behind them: [`protocol`] is the line
//! protocol as a pure state machine (framing, statement ends, meta-commands, positions,
//! bounds; `upload.rs` holds its `\upload` part, the resource archives `nervix console`
//! sends), [`auth`] is credentials and role checks, [`server`] binds the listener and runs one
//! task per connection that drives the machine against a [`backend::ConsoleBackend`] — the
//! node's implementation, which owns the catalog, users and execution. Splitting it this way
//! makes every protocol rule testable without sockets and every server rule testable without a
//! node.

pub mod auth;
pub mod backend;
mod error;
pub mod protocol;
mod scan;
pub mod server;

pub use auth::{authorize, hash_password, verify_password, AuthError};
pub use backend::{ConsoleBackend, Refusal, Reply, Role};
pub use error::ConsoleError;
pub use protocol::Security;
pub use server::{tls_config, ConsoleConfig, ConsoleServer, DEFAULT_CONSOLE_ADDR};
