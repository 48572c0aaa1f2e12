//! Rendering of processor statements.

use super::Writer;
use crate::ast::ProcessorStmt;

pub fn render(_w: &mut Writer, s: &ProcessorStmt) {
    match *s {}
}
