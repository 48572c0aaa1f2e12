//! Parsing of ingestor statements and signaling protocols.

use super::{PResult, Parser};
use crate::ast::{ingestor::IngestorHead, CreatePrefix, Statement};

/// `CREATE [IF NOT EXISTS] <head> INGESTOR …` after the head.
pub fn parse_create(
    p: &mut Parser,
    _prefix: CreatePrefix,
    _head: IngestorHead,
) -> PResult<Statement> {
    Err(p.unexpected())
}

/// `ALTER <head> INGESTOR …` after the head.
pub fn parse_alter(p: &mut Parser, _head: IngestorHead) -> PResult<Statement> {
    Err(p.unexpected())
}

/// `CREATE [IF NOT EXISTS] SIGNALING PROTOCOL …` after `SIGNALING PROTOCOL`.
pub fn parse_create_signaling_protocol(
    p: &mut Parser,
    _prefix: CreatePrefix,
) -> PResult<Statement> {
    Err(p.unexpected())
}
