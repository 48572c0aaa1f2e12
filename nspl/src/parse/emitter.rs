//! Parsing of emitter statements.

use super::{PResult, Parser};
use crate::ast::{emitter::EmitterHead, CreatePrefix, Statement};

/// `CREATE [IF NOT EXISTS] [ATTACHED|DETACHED] <head> EMITTER …` after the head.
pub fn parse_create(
    p: &mut Parser,
    _prefix: CreatePrefix,
    _head: EmitterHead,
) -> PResult<Statement> {
    Err(p.unexpected())
}

/// `ALTER <head> EMITTER …` after the head.
pub fn parse_alter(p: &mut Parser, _head: EmitterHead) -> PResult<Statement> {
    Err(p.unexpected())
}
