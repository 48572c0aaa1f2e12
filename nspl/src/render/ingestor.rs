//! Rendering of ingestor statements.

use super::Writer;
use crate::ast::IngestorStmt;

pub fn render(_w: &mut Writer, s: &IngestorStmt) {
    match *s {}
}
