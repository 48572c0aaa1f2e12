//! Parse errors: a span, a message naming what was expected and what was found, and the
//! expectation set completion reads.

use crate::lexer::Punct;
use crate::span::{position, Span};
use crate::ObjectKind;

/// What the parser could have accepted at a position; completion turns these into candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    Keyword(&'static str),
    /// Several keywords offered as one item, such as `KAFKA TOPIC INGESTOR`.
    Phrase(&'static str),
    Punct(Punct),
    Name(NameKind),
    /// A literal or construct described in words: `a string`, `a duration`, `an expression`.
    Thing(&'static str),
}

/// The kind of name expected at an identifier position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// A name being declared.
    New,
    /// A field (or scope) inside an expression or field list.
    Field,
    /// An existing entity of a kind.
    Existing(ObjectKind),
    /// A client of one connector, e.g. `KAFKA`.
    ClientOf(&'static str),
    /// An endpoint of one TYPE, `HTTP` or `WEBSOCKETS`.
    EndpointOf(&'static str),
}

impl Expected {
    pub fn describe(&self) -> String {
        match self {
            Expected::Keyword(k) | Expected::Phrase(k) => format!("`{k}`"),
            Expected::Punct(p) => format!("`{}`", p.as_str()),
            Expected::Thing(t) => (*t).to_string(),
            Expected::Name(kind) => match kind {
                NameKind::New => "a name".into(),
                NameKind::Field => "a field name".into(),
                NameKind::Existing(k) => format!("{} name", k.keywords().join(" ").to_lowercase()),
                NameKind::ClientOf(c) => format!("a {c} client name"),
                NameKind::EndpointOf(t) => format!("a TYPE {t} endpoint name"),
            },
        }
    }
}

/// A refusal of the parser, positioned at the token it could not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub span: Span,
    pub message: String,
    /// What would have been accepted instead (empty for errors that are not about a token).
    pub expected: Vec<Expected>,
    /// Whether the offending token was the end of the input.
    pub at_end: bool,
}

impl ParseError {
    pub fn new(span: Span, message: impl Into<String>) -> ParseError {
        ParseError {
            span,
            message: message.into(),
            expected: Vec::new(),
            at_end: false,
        }
    }

    /// `<file>:<line>:<col>: error: <message>`.
    pub fn render(&self, file: &str, src: &str) -> String {
        let at = position(src, self.span.start);
        format!("{file}:{at}: error: {}", self.message)
    }
}
