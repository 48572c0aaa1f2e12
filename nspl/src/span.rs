//! Byte spans into the source text and their `line:col` positions.
//!
//! Spans are carried by AST nodes so later stages (validation, the console) can point at the
//! exact text they refuse. Two spans always compare equal: the AST's equality is structural,
//! which is what `parse(render(s)) == parse(s)` needs when the rendered text moves every node.

use std::hash::{Hash, Hasher};

/// A half-open byte range `[start, end)` in the parsed text.
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(
    feature = "rkyv",
    derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)
)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

impl PartialEq for Span {
    fn eq(&self, _: &Span) -> bool {
        true
    }
}

impl Eq for Span {}

impl Hash for Span {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

/// A 1-based line and column (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u32,
    pub col: u32,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// The position of byte `offset` in `src` (clamped to the text's end).
pub fn position(src: &str, offset: u32) -> Position {
    let offset = (offset as usize).min(src.len());
    let mut line = 1;
    let mut line_start = 0;
    for (i, b) in src.as_bytes()[..offset].iter().enumerate() {
        if *b == b'\n' {
            line += 1;
            line_start = i + 1;
        }
    }
    let col = src
        .get(line_start..offset)
        .map_or(offset - line_start, |s| s.chars().count())
        + 1;
    Position {
        line,
        col: col as u32,
    }
}
