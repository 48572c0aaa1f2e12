//! The catalog's refusal: a message and the span of the statement text it is about.

use nervix_nspl::Span;

/// A statement the catalog refuses. `span` points into the statement being executed; a
/// refusal about another entity (a dependent broken by this change) points at the statement's
/// start and names that entity in the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CatalogError {
    pub span: Span,
    pub message: String,
}

impl CatalogError {
    pub fn new(span: Span, message: impl Into<String>) -> CatalogError {
        CatalogError {
            span,
            message: message.into(),
        }
    }
}
