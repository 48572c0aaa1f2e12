//! Rendering of catalog statements.

use super::Writer;
use crate::ast::CatalogStmt;

pub fn render(_w: &mut Writer, s: &CatalogStmt) {
    match *s {}
}
