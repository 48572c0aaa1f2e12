//! The console protocol as a state machine: bytes in, actions out, no sockets.
//!
//! The wire is line-oriented UTF-8 text a person can drive with `nc`:
//!
//! - On connect the server sends one greeting line, `NERVIX <version> AUTH REQUIRED`, or
//!   `NERVIX <version> READY insecure console: every session acts as ADMIN` on a node run with
//!   `--insecure-console`.
//! - The client sends NSPL. As soon as a `;` token (outside strings and comments) completes a
//!   statement, the statement runs and is answered with its output lines, each prefixed by
//!   [`OUTPUT_PREFIX`] (two spaces), then exactly one status line: `OK` or
//!   `ERROR <line>:<col> <message>`, with `line:col` relative to the statement's own text (its
//!   first token is at 1:1). Statements run in order; a refusal does not stop later ones. An
//!   empty statement (a `;` with no token before it) is ignored and answered by nothing.
//! - A line whose first token position holds `\` (only whitespace and complete comments
//!   pending) is a meta-command, answered with `OK` or `ERROR <message>` (no position):
//!   `\auth <user> <password>` (the password is the rest of the line), `\complete <byte offset>
//!   <text>` (each candidate is an output line `<replace from> <candidate>`: the candidate
//!   replaces the text's bytes from that offset to the cursor), and `\quit` (answers `OK`, then
//!   the server closes). `\upload <resource> <byte count>` is followed by exactly that many
//!   bytes of a tar archive and is answered like a statement (see `upload.rs`).
//! - Before authentication, statements and `\complete` are answered
//!   `ERROR 1:1 not authenticated: use \auth <user> <password>`; statements are then only
//!   scanned, never buffered, so an unauthenticated peer holds at most one meta line.
//!
//! Everything is bounded: a statement's text by [`MAX_STATEMENT_BYTES`] (a longer one is
//! answered with its one `ERROR` as soon as it overflows and the rest of it, up to its `;`, is
//! skipped unbuffered), a meta line by [`MAX_META_LINE_BYTES`], failed `\auth` attempts by
//! [`MAX_AUTH_FAILURES`]. The machine never consumes input while a request is outstanding, so
//! the driver reads the socket only when the machine asks for input and the peer's sending is
//! held back by TCP rather than buffered here.
//!
//! Why it is correct: statement ends come from [`Scanner`], which mirrors the lexer (see
//! `scan.rs`), each confirmed with [`nervix_nspl::lexer::lex`] before it runs; statements are
//! parsed with [`nervix_nspl::parse_statement`] and authorized with
//! [`super::auth::authorize`] here, before the backend sees them, so a backend cannot forget
//! a role check; positions come from [`nervix_nspl::position`] on the statement's own text.

use std::collections::VecDeque;
use std::fmt;

use nervix_nspl::lexer::{lex, Punct, TokenKind};
use nervix_nspl::{position, Completion, Position};

use super::auth::{authorize, AuthError};
use super::backend::{Reply, Role};
use super::scan::Scanner;

/// The longest statement text accepted, its `;` included, in bytes.
pub const MAX_STATEMENT_BYTES: usize = 8 * 1024 * 1024;

/// The longest meta-command line accepted, without its line end, in bytes.
pub const MAX_META_LINE_BYTES: usize = 256 * 1024;

/// Failed `\auth` attempts after which the connection is closed.
pub const MAX_AUTH_FAILURES: u32 = 3;

/// What precedes every output line.
pub const OUTPUT_PREFIX: &str = "  ";

/// The version the greeting announces.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The user an insecure console's sessions act as.
pub const INSECURE_USER: &str = "admin";

/// The longest meta-command name echoed back in a refusal, in characters.
const MAX_ECHOED_COMMAND_CHARS: usize = 32;

/// The refusal of anything but `\auth` and `\quit` before authentication.
pub const NOT_AUTHENTICATED: &str = "not authenticated: use \\auth <user> <password>";

/// Whether sessions must authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// Sessions must `\auth` before anything else.
    Required,
    /// `--insecure-console`: every session acts as ADMIN without authenticating.
    Insecure,
}

/// An authenticated identity: the driver opens a backend session for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub user: String,
    pub role: Role,
}

/// What the driver must do next.
pub enum Action {
    /// Write this line (without its line end) to the peer.
    Send(String),
    /// Check these credentials with the backend, then call [`Protocol::auth_result`].
    Authenticate { user: String, password: String },
    /// Run this statement (parsed and authorized) with the backend, then call
    /// [`Protocol::executed`] with it.
    Execute { statement: String },
    /// Ask the backend for completions, then call [`Protocol::completed`].
    Complete { cursor: usize, text: String },
    /// Install this archive (all of an accepted `\upload`'s bytes) as the next version of
    /// `resource` with the backend, then call [`Protocol::uploaded`].
    Upload { resource: String, archive: Vec<u8> },
    /// Everything received is answered: feed more input (or [`Protocol::end_of_input`]).
    NeedInput,
    /// A request is outstanding: deliver its result first (a driver error).
    Pending,
    /// Close the connection.
    Close,
}

/// Passwords never reach a log through `{:?}`.
impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Send(line) => f.debug_tuple("Send").field(line).finish(),
            Action::Authenticate { user, .. } => f
                .debug_struct("Authenticate")
                .field("user", user)
                .field("password", &"<redacted>")
                .finish(),
            Action::Execute { statement } => f
                .debug_struct("Execute")
                .field("statement_bytes", &statement.len())
                .finish(),
            Action::Complete { cursor, text } => f
                .debug_struct("Complete")
                .field("cursor", cursor)
                .field("text", text)
                .finish(),
            Action::Upload { resource, archive } => f
                .debug_struct("Upload")
                .field("resource", resource)
                .field("archive_bytes", &archive.len())
                .finish(),
            Action::NeedInput => f.write_str("NeedInput"),
            Action::Pending => f.write_str("Pending"),
            Action::Close => f.write_str("Close"),
        }
    }
}

/// One line from the server, as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerLine<'a> {
    /// An output line, its prefix removed.
    Output(&'a str),
    Ok,
    /// `ERROR <line>:<col> <message>` (statements) or `ERROR <message>` (meta-commands).
    Error {
        at: Option<Position>,
        message: &'a str,
    },
    /// Anything else (a greeting, or not this protocol).
    Other(&'a str),
}

impl<'a> ServerLine<'a> {
    /// Reads one line, its line end already removed.
    pub fn parse(line: &'a str) -> ServerLine<'a> {
        if let Some(output) = line.strip_prefix(OUTPUT_PREFIX) {
            return ServerLine::Output(output);
        }
        if line == "OK" {
            return ServerLine::Ok;
        }
        let Some(rest) = line.strip_prefix("ERROR ") else {
            return ServerLine::Other(line);
        };
        let positioned = rest.split_once(' ').and_then(|(at, message)| {
            let (l, c) = at.split_once(':')?;
            let position = Position {
                line: l.parse().ok()?,
                col: c.parse().ok()?,
            };
            Some((position, message))
        });
        match positioned {
            Some((at, message)) => ServerLine::Error {
                at: Some(at),
                message,
            },
            None => ServerLine::Error {
                at: None,
                message: rest,
            },
        }
    }
}

/// Who the connection is.
enum Identity {
    Anonymous { failures: u32 },
    Authenticated(Login),
}

/// What the input bytes are being read as.
enum Mode {
    Statement,
    /// A meta-command line, without its `\`.
    Meta(Vec<u8>),
    /// An over-long meta line, skipped to its end.
    MetaOverflow,
    /// An over-long statement, skipped (still scanned) to its `;`.
    DiscardStatement,
    /// An accepted `\upload`'s archive bytes, arriving.
    Upload(upload::Receiving),
    /// A refused `\upload`'s remaining archive bytes, skipped unbuffered.
    SkipUpload(u64),
}

/// The request whose result the machine waits for.
enum Awaiting {
    Auth { user: String },
    Execute,
    Complete,
    Upload,
}

/// One connection's protocol state; see the module documentation.
pub struct Protocol {
    security: Security,
    identity: Identity,
    scanner: Scanner,
    mode: Mode,
    /// The pending statement's bytes, while authenticated.
    statement: Vec<u8>,
    /// Where the pending statement's first token starts in `statement`.
    first_token: usize,
    input: Vec<u8>,
    input_at: usize,
    eof: bool,
    out: VecDeque<String>,
    awaiting: Option<Awaiting>,
    closing: bool,
}

impl Protocol {
    pub fn new(security: Security) -> Protocol {
        let identity = match security {
            Security::Required => Identity::Anonymous { failures: 0 },
            Security::Insecure => Identity::Authenticated(Login {
                user: INSECURE_USER.to_owned(),
                role: Role::Admin,
            }),
        };
        Protocol {
            security,
            identity,
            scanner: Scanner::new(),
            mode: Mode::Statement,
            statement: Vec::new(),
            first_token: 0,
            input: Vec::new(),
            input_at: 0,
            eof: false,
            out: VecDeque::new(),
            awaiting: None,
            closing: false,
        }
    }

    /// The line to send first.
    pub fn greeting(&self) -> String {
        match self.security {
            Security::Required => format!("NERVIX {VERSION} AUTH REQUIRED"),
            Security::Insecure => {
                format!("NERVIX {VERSION} READY insecure console: every session acts as ADMIN")
            }
        }
    }

    /// The identity a session is opened for before any input: an insecure console's ADMIN.
    pub fn initial_login(&self) -> Option<Login> {
        match (&self.security, &self.identity) {
            (Security::Insecure, Identity::Authenticated(login)) => Some(login.clone()),
            _ => None,
        }
    }

    /// Whether the connection has authenticated (always, on an insecure console).
    pub fn is_authenticated(&self) -> bool {
        matches!(self.identity, Identity::Authenticated(_))
    }

    /// Appends received bytes; call when [`Protocol::next_action`] returned
    /// [`Action::NeedInput`].
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.input_at > 0 {
            self.input.drain(..self.input_at);
            self.input_at = 0;
        }
        self.input.extend_from_slice(bytes);
    }

    /// The peer will send nothing more: a meta line without its line end still runs, a
    /// statement without its `;` is dropped, then the machine closes.
    pub fn end_of_input(&mut self) {
        self.eof = true;
    }

    /// The next thing to do; call again after doing it.
    pub fn next_action(&mut self) -> Action {
        loop {
            if let Some(line) = self.out.pop_front() {
                return Action::Send(line);
            }
            if self.closing {
                return Action::Close;
            }
            if self.awaiting.is_some() {
                return Action::Pending;
            }
            if let Some(action) = self.consume_input() {
                return action;
            }
            if !self.out.is_empty() || self.closing {
                continue;
            }
            if self.input_at < self.input.len() {
                continue;
            }
            if !self.eof {
                return Action::NeedInput;
            }
            if matches!(self.mode, Mode::Meta(_)) {
                // A last meta line without its line end runs as if it had one.
                self.input.push(b'\n');
                continue;
            }
            self.closing = true;
        }
    }

    /// The backend's answer to [`Action::Authenticate`]; on success, the identity to open a
    /// session for.
    pub fn auth_result(&mut self, result: Result<Role, AuthError>) -> Option<Login> {
        let Some(Awaiting::Auth { user }) = self.awaiting.take() else {
            return None;
        };
        match result {
            Ok(role) => {
                self.out.push_back(format!(
                    "{OUTPUT_PREFIX}authenticated as {user} with role {}",
                    role.keyword()
                ));
                self.out.push_back("OK".into());
                let login = Login { user, role };
                self.identity = Identity::Authenticated(login.clone());
                Some(login)
            }
            Err(AuthError::InvalidCredentials) => {
                self.failed_auth();
                None
            }
            Err(error) => {
                self.meta_error(&format!("authentication unavailable: {error}"));
                None
            }
        }
    }

    /// The backend's answer to [`Action::Execute`] for `statement`.
    pub fn executed(&mut self, statement: &str, reply: Reply) {
        if !matches!(self.awaiting.take(), Some(Awaiting::Execute)) {
            return;
        }
        for line in &reply.lines {
            self.output(line);
        }
        match reply.outcome {
            Ok(()) => self.out.push_back("OK".into()),
            Err(refusal) => self.refuse(statement, refusal.span.start, &refusal.message),
        }
    }

    /// The backend's answer to [`Action::Complete`].
    pub fn completed(&mut self, candidates: Vec<Completion>) {
        if !matches!(self.awaiting.take(), Some(Awaiting::Complete)) {
            return;
        }
        for candidate in candidates {
            self.output(&format!("{} {}", candidate.replace_from, candidate.text));
        }
        self.out.push_back("OK".into());
    }

    /// Consumes input until a request, queued output, closing, or the input's end.
    fn consume_input(&mut self) -> Option<Action> {
        while self.input_at < self.input.len() && self.out.is_empty() && !self.closing {
            if matches!(self.mode, Mode::Upload(_) | Mode::SkipUpload(_)) {
                if let Some(action) = self.upload_input() {
                    return Some(action);
                }
                continue;
            }
            let byte = self.input[self.input_at];
            self.input_at += 1;
            if let Some(action) = self.byte(byte) {
                return Some(action);
            }
        }
        None
    }

    fn byte(&mut self, byte: u8) -> Option<Action> {
        match &mut self.mode {
            Mode::Meta(line) => {
                if byte == b'\n' {
                    let line = std::mem::take(line);
                    self.mode = Mode::Statement;
                    return self.meta(line);
                }
                if line.len() >= MAX_META_LINE_BYTES {
                    self.mode = Mode::MetaOverflow;
                    self.meta_error(&format!(
                        "meta-command line longer than {MAX_META_LINE_BYTES} bytes: discarded"
                    ));
                } else {
                    line.push(byte);
                }
                None
            }
            Mode::MetaOverflow => {
                if byte == b'\n' {
                    self.mode = Mode::Statement;
                }
                None
            }
            Mode::DiscardStatement => {
                let step = self.scanner.step(byte);
                if step.end || step.empty {
                    self.scanner.next_statement();
                    self.mode = Mode::Statement;
                }
                None
            }
            Mode::Statement => self.statement_byte(byte),
            Mode::Upload(_) | Mode::SkipUpload(_) => {
                // Archive bytes go in bulk: give this one back and take it with the rest.
                self.input_at -= 1;
                self.upload_input()
            }
        }
    }

    fn statement_byte(&mut self, byte: u8) -> Option<Action> {
        if byte == b'\\' && self.scanner.at_statement_start() {
            self.statement.clear();
            self.mode = Mode::Meta(Vec::new());
            return None;
        }
        let step = self.scanner.step(byte);
        if step.empty {
            self.scanner.next_statement();
            self.statement.clear();
            return None;
        }
        if !self.is_authenticated() {
            if step.end {
                self.scanner.next_statement();
                self.refuse("", 0, NOT_AUTHENTICATED);
            }
            return None;
        }
        self.statement.push(byte);
        if let Some(back) = step.first_token_back {
            self.first_token = self.statement.len().saturating_sub(1 + back);
        }
        if self.statement.len() > MAX_STATEMENT_BYTES {
            self.statement = Vec::new();
            self.refuse(
                "",
                0,
                &format!(
                    "statement longer than {MAX_STATEMENT_BYTES} bytes without its `;`: \
                     discarded up to its `;`"
                ),
            );
            if step.end {
                self.scanner.next_statement();
            } else {
                self.mode = Mode::DiscardStatement;
            }
            return None;
        }
        if step.end {
            if !self.confirmed_end() {
                return None;
            }
            self.scanner.next_statement();
            let mut bytes = std::mem::take(&mut self.statement);
            bytes.drain(..self.first_token.min(bytes.len()));
            return self.statement_complete(bytes);
        }
        if self.scanner.at_statement_start() {
            // Only whitespace and complete comments so far: nothing worth keeping.
            self.statement.clear();
        }
        None
    }

    /// Whether the lexer agrees that the pending statement's last byte is a `;` token.
    fn confirmed_end(&self) -> bool {
        let Some(pending) = self.statement.get(self.first_token..) else {
            return true;
        };
        let Ok(text) = std::str::from_utf8(pending) else {
            // Not text: refused as such once complete; the scanner's end stands.
            return true;
        };
        let tokens = lex(text).tokens;
        let last = tokens.iter().rev().find(|t| t.kind != TokenKind::Eof);
        last.is_some_and(|t| {
            t.kind == TokenKind::Punct(Punct::Semicolon) && t.span.end as usize == text.len()
        })
    }

    fn statement_complete(&mut self, bytes: Vec<u8>) -> Option<Action> {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(error) => {
                let valid = error.utf8_error().valid_up_to();
                let bytes = error.into_bytes();
                let prefix = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
                self.refuse(prefix, valid as u32, "statement is not valid UTF-8");
                return None;
            }
        };
        let Identity::Authenticated(login) = &self.identity else {
            self.refuse("", 0, NOT_AUTHENTICATED);
            return None;
        };
        let role = login.role;
        match nervix_nspl::parse_statement(&text) {
            Err(error) => {
                self.refuse(&text, error.span.start, &error.message);
                None
            }
            Ok(statement) => match authorize(role, &statement) {
                Err(message) => {
                    self.refuse(&text, 0, &message);
                    None
                }
                Ok(()) => {
                    self.awaiting = Some(Awaiting::Execute);
                    Some(Action::Execute { statement: text })
                }
            },
        }
    }

    fn meta(&mut self, line: Vec<u8>) -> Option<Action> {
        let Ok(mut line) = String::from_utf8(line) else {
            self.meta_error("meta-command is not valid UTF-8");
            return None;
        };
        if line.ends_with('\r') {
            line.pop();
        }
        let (command, rest) = line.split_once([' ', '\t']).unwrap_or((line.as_str(), ""));
        match command {
            "auth" => self.meta_auth(rest),
            "complete" => self.meta_complete(rest),
            "upload" => self.meta_upload(rest),
            "quit" if rest.trim().is_empty() => {
                self.out.push_back("OK".into());
                self.closing = true;
                None
            }
            "quit" => {
                self.meta_error("usage: \\quit");
                None
            }
            _ => {
                let shown: String = command
                    .chars()
                    .take(MAX_ECHOED_COMMAND_CHARS)
                    .map(|c| if c.is_control() { '?' } else { c })
                    .collect();
                self.meta_error(&format!(
                    "unknown meta-command \\{shown}: use \\auth, \\complete or \\quit"
                ));
                None
            }
        }
    }

    fn meta_auth(&mut self, rest: &str) -> Option<Action> {
        if self.security == Security::Insecure {
            self.meta_error("authentication is off: this node runs with --insecure-console");
            return None;
        }
        if let Identity::Authenticated(login) = &self.identity {
            let message = format!("already authenticated as {}", login.user);
            self.meta_error(&message);
            return None;
        }
        let rest = rest.trim_start_matches([' ', '\t']);
        let (user, password) = rest
            .split_once([' ', '\t'])
            .map(|(user, password)| (user, password.trim_start_matches([' ', '\t'])))
            .unwrap_or((rest, ""));
        if user.is_empty() || password.is_empty() {
            self.meta_error("usage: \\auth <user> <password>");
            return None;
        }
        if !is_identifier(user) {
            // No such user can exist: one answer for every failure.
            self.failed_auth();
            return None;
        }
        self.awaiting = Some(Awaiting::Auth {
            user: user.to_owned(),
        });
        Some(Action::Authenticate {
            user: user.to_owned(),
            password: password.to_owned(),
        })
    }

    fn meta_complete(&mut self, rest: &str) -> Option<Action> {
        if !self.is_authenticated() {
            self.refuse("", 0, NOT_AUTHENTICATED);
            return None;
        }
        let (offset, text) = rest.split_once(' ').unwrap_or((rest, ""));
        let Ok(cursor) = offset.parse::<usize>() else {
            self.meta_error("usage: \\complete <byte offset> <text>");
            return None;
        };
        if !text.is_char_boundary(cursor) {
            self.meta_error(&format!(
                "\\complete offset {cursor} is not a character boundary of the text's {} bytes",
                text.len()
            ));
            return None;
        }
        self.awaiting = Some(Awaiting::Complete);
        Some(Action::Complete {
            cursor,
            text: text.to_owned(),
        })
    }

    fn failed_auth(&mut self) {
        let Identity::Anonymous { failures } = &mut self.identity else {
            return;
        };
        *failures += 1;
        if *failures >= MAX_AUTH_FAILURES {
            self.meta_error("authentication failed: too many failed attempts, closing");
            self.closing = true;
        } else {
            self.meta_error("authentication failed");
        }
    }

    /// Queues output lines, one per line of `text`.
    fn output(&mut self, text: &str) {
        for line in text.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            self.out.push_back(format!("{OUTPUT_PREFIX}{line}"));
        }
    }

    /// Queues `ERROR <line>:<col> <message>` for byte `offset` of `statement`.
    fn refuse(&mut self, statement: &str, offset: u32, message: &str) {
        let at = position(statement, offset);
        self.out
            .push_back(format!("ERROR {at} {}", one_line(message)));
    }

    /// Queues `ERROR <message>` for a meta-command.
    fn meta_error(&mut self, message: &str) {
        self.out.push_back(format!("ERROR {}", one_line(message)));
    }
}

/// A message fit for one status line.
fn one_line(message: &str) -> String {
    message
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect()
}

/// `[a-z_][a-z0-9_]*`, the shape of every NSPL name (DESIGN §7).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[path = "upload.rs"]
mod upload;

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
