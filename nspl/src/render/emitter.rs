//! Rendering of emitter statements.

use super::Writer;
use crate::ast::EmitterStmt;

pub fn render(_w: &mut Writer, s: &EmitterStmt) {
    match *s {}
}
