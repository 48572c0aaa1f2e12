//! The seam between the console and the node: [`ConsoleBackend`] is everything the console
//! needs from a node, and [`Reply`] is everything a statement answers.
//!
//! The console owns the wire (framing, authentication, authorization, positions); the backend
//! owns meaning (the catalog, users, execution). Keeping the trait this small is what lets the
//! protocol be tested against an in-memory backend while the node tests it end to end. The
//! methods that wait are declared as returning `Send` futures so one generic server can drive
//! any backend from tasks on either kind of tokio runtime; implementations write `async fn`.

use std::future::Future;

use nervix_nspl::{Completion, Span};

use super::auth::AuthError;

pub use nervix_nspl::ast::catalog::Role;

/// What a node offers its console. One value serves every connection; per-connection state
/// (selected domain, open transaction) lives in [`ConsoleBackend::Session`].
pub trait ConsoleBackend: Send + Sync + 'static {
    /// The state of one authenticated connection.
    type Session: Send;

    /// Checks a user's password; the backend holds users in the replicated catalog. Unknown
    /// users and wrong passwords must be indistinguishable, in answer and in time (verify an
    /// unknown user against [`super::auth::verify_password`] with no stored hash).
    fn authenticate(
        &self,
        user: &str,
        password: &str,
    ) -> impl Future<Output = Result<Role, AuthError>> + Send;

    /// Opens the state of a connection that authenticated as `user` with `role`.
    fn open_session(&self, user: &str, role: Role) -> Self::Session;

    /// Runs one complete statement's text: exactly one statement, from its first token to its
    /// `;`. The console has already parsed it and checked the session's role may run it.
    fn execute(
        &self,
        session: &mut Self::Session,
        statement: &str,
    ) -> impl Future<Output = Reply> + Send;

    /// Installs `archive` (a tar of at most [`crate::control::bundle::MAX_RESOURCE_UPLOAD_BYTES`]
    /// bytes, received with `\upload`) as the next version of `resource`. The console has
    /// already checked the session's role may upload. A backend without resources keeps the
    /// default, which refuses.
    fn upload(
        &self,
        session: &mut Self::Session,
        resource: &str,
        archive: Vec<u8>,
    ) -> impl Future<Output = Reply> + Send {
        let _ = (session, archive);
        std::future::ready(Reply::refused(
            Span::new(0, 0),
            format!("this console cannot store resources: '{resource}' not uploaded"),
        ))
    }

    /// Completion candidates for `text` with the cursor at byte offset `cursor`.
    fn complete(&self, session: &Self::Session, text: &str, cursor: usize) -> Vec<Completion>;

    /// Called once when the connection ends (discard an open transaction and the like).
    fn close_session(&self, session: Self::Session);

    /// Lines the session streams on its own (subscriptions), written between statements while
    /// the connection waits for input; `None` when it streams nothing.
    fn stream<'s>(
        &self,
        session: &'s mut Self::Session,
    ) -> Option<&'s mut tokio::sync::mpsc::Receiver<String>> {
        let _ = session;
        None
    }
}

/// The answer to one statement: its output lines, then whether it succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Output lines, in order; a line holding `\n` is sent as several lines.
    pub lines: Vec<String>,
    pub outcome: Result<(), Refusal>,
}

impl Reply {
    /// Success with these output lines.
    pub fn ok(lines: Vec<String>) -> Reply {
        Reply {
            lines,
            outcome: Ok(()),
        }
    }

    /// A refusal with no output, pointing at `span` of the statement's text.
    pub fn refused(span: Span, message: impl Into<String>) -> Reply {
        Reply {
            lines: Vec::new(),
            outcome: Err(Refusal {
                span,
                message: message.into(),
            }),
        }
    }
}

/// Why a statement was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// A byte span within the statement's text; the console reports its start as `line:col`
    /// relative to the statement (its first token is at 1:1).
    pub span: Span,
    pub message: String,
}
