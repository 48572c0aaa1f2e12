//! Parsing of catalog statements.

use super::{PResult, Parser};
use crate::ast::{CreatePrefix, Statement};

/// `CREATE [IF NOT EXISTS] <catalog kind> …` after the prefix.
pub fn parse_create(p: &mut Parser, _prefix: CreatePrefix) -> PResult<Statement> {
    Err(p.unexpected())
}

/// `ALTER <catalog kind> …` after `ALTER`.
pub fn parse_alter(p: &mut Parser) -> PResult<Statement> {
    Err(p.unexpected())
}

/// Statements that start with their own verb (UPLOAD, REBIND, CORDON, …), when one is next.
pub fn parse_command(_p: &mut Parser) -> Option<PResult<Statement>> {
    None
}

/// `SHOW CLUSTER STATUS` and other SHOW forms that are not `SHOW <KIND>S`, when one is next.
pub fn parse_show(_p: &mut Parser) -> Option<PResult<Statement>> {
    None
}
