//! [`ConsoleError`], every way starting or running the console server can fail.
//!
//! Each variant names what it was doing and with which file or address, so the message alone
//! tells an operator what to fix; no variant ever carries a password or key material.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("cannot listen for console connections on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot read the console's TLS {what} from {}: {message}", path.display())]
    Pem {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("the console's TLS certificate and key do not make a server configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("console I/O failed: {0}")]
    Io(#[from] std::io::Error),
}
