//! Parsing of processor statements.

use super::{PResult, Parser};
use crate::ast::{CreatePrefix, ObjectKind, Statement};

/// `CREATE [IF NOT EXISTS] [ATTACHED|DETACHED] <processor kind> …` after the kind keywords.
pub fn parse_create(
    p: &mut Parser,
    _prefix: CreatePrefix,
    _kind: ObjectKind,
) -> PResult<Statement> {
    Err(p.unexpected())
}

/// `ALTER <processor kind> …` after the kind keywords.
pub fn parse_alter(p: &mut Parser, _kind: ObjectKind) -> PResult<Statement> {
    Err(p.unexpected())
}

/// `RESET WASM PROCESSOR … ;` (the parser is at `RESET`).
pub fn parse_reset_wasm(p: &mut Parser) -> PResult<Statement> {
    Err(p.unexpected())
}
