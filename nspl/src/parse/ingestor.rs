//! Parsing of ingestor statements and signaling protocols (`spec/ingestors.md`).
//!
//! CREATE reads the head's source body ([`body`]), then the node clauses every ingestor shares
//! in the spec's order: DECODE USING, TIMESTAMP, FILTER WHERE, the routes, ON GENERAL ERROR.
//! ALTER reads comma-separated operations in written order.

mod body;
mod signaling;

use super::route::{Presence, RouteRules};
use super::{PResult, Parser};
use crate::ast::ingestor::{
    AlterIngestor, AlterIngestorOp, CreateIngestor, IngestorHead, IngestorStmt, TimestampSource,
};
use crate::ast::{CreatePrefix, Ident, ObjectKind, Statement};
use crate::error::{NameKind, ParseError};
use crate::lexer::Punct;

/// Ingestor routes: INHERIT allowed, each route constructs its branch and flushes on its own.
const ROUTE_RULES: RouteRules = RouteRules {
    node: "ingestor",
    inherit: true,
    set_required: false,
    branching: Presence::Required,
    flush: Presence::Required,
};

/// `CREATE [IF NOT EXISTS] <head> INGESTOR …` after the head.
pub fn parse_create(
    p: &mut Parser,
    prefix: CreatePrefix,
    head: IngestorHead,
) -> PResult<Statement> {
    let name = p.ident(NameKind::New)?;
    p.expect_keyword("FROM")?;
    let source = body::source_body(p, head)?;
    let decode = decode(p, head)?;
    let timestamp = if p.eat_keyword("TIMESTAMP") {
        Some(timestamp_source(p)?)
    } else {
        None
    };
    let filter = if p.eat_keyword("FILTER") {
        p.expect_keyword("WHERE")?;
        Some(p.expr()?)
    } else {
        None
    };
    if !p.at_keyword("TO") {
        return Err(with_prefix(
            p.unexpected(),
            "an ingestor needs at least one TO <relay> route",
        ));
    }
    let routes = p.routes(ROUTE_RULES)?;
    p.expect_keywords(&["ON", "GENERAL", "ERROR"])?;
    let on_general_error = p.general_error_policy()?;
    Ok(Statement::Ingestor(IngestorStmt::Create(Box::new(
        CreateIngestor {
            if_not_exists: prefix.if_not_exists,
            name,
            source,
            decode,
            timestamp,
            filter,
            routes,
            on_general_error,
        },
    ))))
}

/// `ALTER <head> INGESTOR …` after the head.
pub fn parse_alter(p: &mut Parser, head: IngestorHead) -> PResult<Statement> {
    let name = p.ident(NameKind::Existing(ObjectKind::Ingestor))?;
    let mut operations = vec![alter_operation(p, head)?];
    while p.eat_punct(Punct::Comma) {
        operations.push(alter_operation(p, head)?);
    }
    Ok(Statement::Ingestor(IngestorStmt::Alter(AlterIngestor {
        head,
        name,
        operations,
    })))
}

/// `CREATE [IF NOT EXISTS] SIGNALING PROTOCOL …` after `SIGNALING PROTOCOL`.
pub fn parse_create_signaling_protocol(p: &mut Parser, prefix: CreatePrefix) -> PResult<Statement> {
    let protocol = signaling::create_signaling_protocol(p, prefix)?;
    Ok(Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(
        Box::new(protocol),
    )))
}

/// Prepends a rule to a core `expected …, found …` error, keeping its expectations.
fn with_prefix(mut err: ParseError, rule: &str) -> ParseError {
    err.message = format!("{rule}; {}", err.message);
    err
}

const NO_DECODE: &str =
    "CLIENT PRODUCER ingestors decode nothing and take no DECODE USING: a submitted batch already carries the input schema";

/// `DECODE USING <codec>`: required under every transport head, refused under CLIENT PRODUCER.
fn decode(p: &mut Parser, head: IngestorHead) -> PResult<Option<Ident>> {
    if head == IngestorHead::ClientProducer {
        if p.is_keyword_at(0, "DECODE") {
            return Err(p.error_at(p.span(), NO_DECODE));
        }
        return Ok(None);
    }
    if !p.eat_keyword("DECODE") {
        return Err(with_prefix(
            p.unexpected(),
            &format!(
                "{} ingestors require DECODE USING <codec> after the source body",
                head.phrase()
            ),
        ));
    }
    p.expect_keyword("USING")?;
    Ok(Some(p.ident(NameKind::Existing(ObjectKind::Codec))?))
}

/// `NOW | AT <field>` after `TIMESTAMP`.
fn timestamp_source(p: &mut Parser) -> PResult<TimestampSource> {
    if p.eat_keyword("NOW") {
        return Ok(TimestampSource::Now);
    }
    p.expect_keyword("AT")?;
    Ok(TimestampSource::At(p.ident(NameKind::Field)?))
}

/// One ALTER operation.
fn alter_operation(p: &mut Parser, head: IngestorHead) -> PResult<AlterIngestorOp> {
    if p.eat_keyword("SET") {
        if p.eat_keyword("FROM") {
            return Ok(AlterIngestorOp::SetFrom(body::source_body(p, head)?));
        }
        if p.eat_keyword("QUIESCE") {
            // Every quiesce body parses here; the stored source refuses one it cannot honor.
            return Ok(AlterIngestorOp::SetQuiesce(p.quiesce_body()?));
        }
        if head == IngestorHead::ClientProducer && p.is_keyword_at(0, "DECODE") {
            return Err(p.error_at(p.span(), NO_DECODE));
        }
        if head != IngestorHead::ClientProducer && p.eat_keyword("DECODE") {
            p.expect_keyword("USING")?;
            let codec = p.ident(NameKind::Existing(ObjectKind::Codec))?;
            return Ok(AlterIngestorOp::SetDecode(codec));
        }
        if p.eat_keyword("TIMESTAMP") {
            return Ok(AlterIngestorOp::SetTimestamp(timestamp_source(p)?));
        }
        if p.eat_keyword("FILTER") {
            p.expect_keyword("WHERE")?;
            return Ok(AlterIngestorOp::SetFilter(p.expr()?));
        }
        if p.eat_keyword("GENERAL") {
            p.expect_keyword("ERROR")?;
            return Ok(AlterIngestorOp::SetGeneralError(p.general_error_policy()?));
        }
        return Err(p.unexpected());
    }
    if p.eat_keyword("DROP") {
        if p.eat_keyword("TIMESTAMP") {
            return Ok(AlterIngestorOp::DropTimestamp);
        }
        if p.eat_keyword("FILTER") {
            p.expect_keyword("WHERE")?;
            return Ok(AlterIngestorOp::DropFilter);
        }
        if p.eat_keyword("ROUTE") {
            p.expect_keyword("TO")?;
            let relay = p.ident(NameKind::Existing(ObjectKind::Relay))?;
            return Ok(AlterIngestorOp::DropRoute(relay));
        }
        if p.is_keyword_at(0, "QUIESCE") {
            return Err(p.error_at(
                p.span(),
                "there is no DROP QUIESCE: every source keeps a quiesce mode; change it with SET QUIESCE",
            ));
        }
        return Err(p.unexpected());
    }
    if p.eat_keyword("ADD") {
        p.expect_keywords(&["ROUTE", "TO"])?;
        return Ok(AlterIngestorOp::AddRoute(p.route_body(ROUTE_RULES)?));
    }
    if p.eat_keyword("REPLACE") {
        p.expect_keywords(&["ROUTE", "TO"])?;
        return Ok(AlterIngestorOp::ReplaceRoute(p.route_body(ROUTE_RULES)?));
    }
    Err(p.unexpected())
}
