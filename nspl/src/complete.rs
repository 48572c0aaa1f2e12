//! Completion: what may come at a cursor, read from the parser's own expectations.
//!
//! The text before the cursor is parsed as far as it goes; the alternatives the parser
//! recorded where it stopped are exactly what the grammar accepts there. Keywords and
//! multi-word heads (`KAFKA TOPIC INGESTOR`) come from the grammar, names from the
//! [`Catalog`] the engine implements, narrowed by kind: after a KAFKA TOPIC ingestor's FROM
//! only KAFKA clients are offered.

use crate::error::{Expected, NameKind};
use crate::lexer::{lex, Punct, TokenKind};
use crate::parse::Parser;

/// Names the engine knows, for completing identifiers.
pub trait Catalog {
    /// Existing names of `kind` (for [`NameKind::Field`], fields in scope, if known).
    fn names(&self, kind: NameKind) -> Vec<String>;
}

/// A catalog that knows no names (keywords still complete).
pub struct NoCatalog;

impl Catalog for NoCatalog {
    fn names(&self, _: NameKind) -> Vec<String> {
        Vec::new()
    }
}

/// One candidate: replace `text[replace_from..cursor]` with `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub replace_from: usize,
}

/// Candidates for the text at byte offset `cursor` of `text`, in grammar order.
pub fn complete(text: &str, cursor: usize, catalog: &dyn Catalog) -> Vec<Completion> {
    let mut cursor = cursor.min(text.len());
    while !text.is_char_boundary(cursor) {
        cursor -= 1;
    }
    let before = &text[..cursor];
    let word_start = before
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let head = &before[..word_start];

    let mut tokens = lex(head).tokens;
    // Only the statement under the cursor matters: drop everything up to the last `;`.
    if let Some(last_semi) = tokens
        .iter()
        .rposition(|t| t.kind == TokenKind::Punct(Punct::Semicolon))
    {
        tokens.drain(..=last_semi);
    }
    if tokens.iter().any(|t| matches!(t.kind, TokenKind::Error(_))) {
        return Vec::new();
    }
    let mut parser = Parser::new(head, tokens);
    let Err(error) = parser.statement() else {
        return Vec::new();
    };

    let mut out: Vec<Completion> = Vec::new();
    let mut push = |candidate: String, replace_from: usize, typed: &str| {
        if starts_with_words(&candidate, typed) && !out.iter().any(|c| c.text == candidate) {
            out.push(Completion {
                text: candidate,
                replace_from,
            });
        }
    };
    if error.at_end {
        let typed = &before[word_start..];
        for expected in &error.expected {
            match expected {
                Expected::Keyword(k) | Expected::Phrase(k) => {
                    push(k.to_string(), word_start, typed)
                }
                Expected::Name(kind) => {
                    for name in catalog.names(*kind) {
                        push(name, word_start, typed);
                    }
                }
                Expected::Punct(_) | Expected::Thing(_) => {}
            }
        }
    } else {
        // The parser stopped on words already typed: they may be the start of a multi-word
        // phrase (`CREATE KAFKA TO|` → `KAFKA TOPIC INGESTOR`).
        let from = error.span.start as usize;
        let typed = &before[from..];
        for expected in &error.expected {
            if let Expected::Phrase(p) = expected {
                push(p.to_string(), from, typed);
            }
        }
    }
    out
}

/// Whether `candidate` begins with the words of `typed` (case-insensitive, any spacing).
fn starts_with_words(candidate: &str, typed: &str) -> bool {
    let typed: Vec<&str> = typed.split_whitespace().collect();
    let words: Vec<&str> = candidate.split(' ').collect();
    if typed.len() > words.len() {
        return false;
    }
    typed.iter().enumerate().all(|(i, t)| {
        let w = words[i];
        if i + 1 == typed.len() {
            w.get(..t.len()).is_some_and(|w| w.eq_ignore_ascii_case(t))
        } else {
            w.eq_ignore_ascii_case(t)
        }
    })
}
