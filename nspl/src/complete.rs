//! Completion: what may come at a cursor, from the parser's own expectations.

use crate::error::NameKind;

/// Names the engine knows, for completing identifiers; the engine implements it over its
/// catalog.
pub trait Catalog {
    /// Existing names of the kind expected at the cursor.
    fn names(&self, kind: NameKind) -> Vec<String>;
}

/// One completion candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
}

/// Candidates for the text at byte offset `cursor` of `text`.
pub fn complete(_text: &str, _cursor: usize, _catalog: &dyn Catalog) -> Vec<Completion> {
    Vec::new()
}
