//! Parsing of emitter statements (DESIGN §7): `CREATE … EMITTER` with the sink body its head
//! names, and the operations of `ALTER <head> EMITTER`.
//!
//! An emitter has exactly one sink route: `TO <sink body>`, then MODE and RETRY POLICY (which,
//! unlike a source's, follows every mode), the optional encoding, the construction clauses
//! (INHERIT, SET, WHERE, INVOKE write_header) and the required FLUSH and error policies.

mod sink;

use super::{PResult, Parser};
use crate::ast::emitter::{
    AlterEmitter, AlterEmitterOp, Construction, CreateEmitter, EmitterHead, EmitterStmt,
    HeaderWrite,
};
use crate::ast::{
    Attachment, CreatePrefix, Ident, Inherit, InheritFields, MessageErrorPolicy, StateDependency,
    Statement,
};
use crate::error::{NameKind, ParseError};
use crate::lexer::{Punct, TokenKind};
use crate::ObjectKind;

/// `CREATE [IF NOT EXISTS] [ATTACHED|DETACHED] <head> EMITTER …` after the head.
pub fn parse_create(p: &mut Parser, prefix: CreatePrefix, head: EmitterHead) -> PResult<Statement> {
    let name = p.ident(NameKind::New)?;
    p.expect_keyword("FROM")?;
    let inputs = p.inputs()?;
    let collect = p.collect()?;
    let state = p.state_dependencies()?;
    p.expect_keyword("TO")?;
    let sink = sink::sink(p, head)?;
    let construction = construction(p, head)?;
    if p.is_keyword_at(0, "TO") {
        return Err(p.error_at(
            p.span(),
            "an emitter writes to exactly one sink: it takes one TO clause",
        ));
    }
    if !p.at_keyword("FLUSH") {
        return Err(prefixed(
            p,
            "an emitter needs FLUSH EACH <duration> MAX BATCH SIZE <bytes> or FLUSH IMMEDIATE",
        ));
    }
    let flush = p.flush()?;
    if p.is_keyword_at(0, "ON") && p.is_keyword_at(1, "GENERAL") {
        let span = p.span().to(p.peek_at(1).span);
        return Err(p.error_at(
            span,
            "an emitter needs ON MESSAGE ERROR IGNORE | LOG | SEND TO <relay> before ON GENERAL ERROR",
        ));
    }
    let on_message_error = p.message_error_policy()?;
    if !p.at_keyword("ON") {
        return Err(prefixed(
            p,
            "an emitter needs ON GENERAL ERROR IGNORE | LOG",
        ));
    }
    p.expect_keywords(&["ON", "GENERAL", "ERROR"])?;
    let on_general_error = p.general_error_policy()?;
    let create = CreateEmitter {
        if_not_exists: prefix.if_not_exists,
        attachment: prefix.attachment,
        head,
        name,
        inputs,
        collect,
        state,
        sink,
        construction,
        flush,
        on_message_error,
        on_general_error,
    };
    Ok(Statement::Emitter(EmitterStmt::Create(Box::new(create))))
}

/// `ALTER <head> EMITTER …` after the head.
pub fn parse_alter(p: &mut Parser, head: EmitterHead) -> PResult<Statement> {
    let name = p.ident(NameKind::Existing(ObjectKind::Emitter))?;
    let mut operations = vec![alter_operation(p, head)?];
    while p.eat_punct(Punct::Comma) {
        operations.push(alter_operation(p, head)?);
    }
    Ok(Statement::Emitter(EmitterStmt::Alter(AlterEmitter {
        head,
        name,
        operations,
    })))
}

/// The error `unexpected()` gives at the current token, with `what` said first.
fn prefixed(p: &mut Parser, what: &str) -> ParseError {
    let mut err = p.unexpected();
    err.message = format!("{what}; {}", err.message);
    err
}

/// One ALTER operation.
fn alter_operation(p: &mut Parser, head: EmitterHead) -> PResult<AlterEmitterOp> {
    if p.eat_keyword("ADD") {
        if p.eat_keyword("FROM") {
            return Ok(AlterEmitterOp::AddFrom(p.input()?));
        }
        p.expect_keywords(&["MATERIALIZED", "STATE"])?;
        let relay = relay(p)?;
        let policy = p.state_policy()?;
        return Ok(AlterEmitterOp::AddState(StateDependency { relay, policy }));
    }
    if p.eat_keyword("DROP") {
        if p.eat_keyword("FROM") {
            return Ok(AlterEmitterOp::DropFrom(relay(p)?));
        }
        if p.eat_keyword("COLLECT") {
            return Ok(AlterEmitterOp::DropCollect);
        }
        if p.eat_keyword("CONSTRUCTION") {
            return Ok(AlterEmitterOp::DropConstruction);
        }
        if at_construction_clause(p) {
            return Err(construction_changes_together(p));
        }
        p.expect_keywords(&["MATERIALIZED", "STATE"])?;
        return Ok(AlterEmitterOp::DropState(relay(p)?));
    }
    if p.eat_keyword("ALTER") {
        if p.eat_keyword("FROM") {
            let relay = relay(p)?;
            if p.eat_keyword("DROP") {
                p.expect_keyword("WHERE")?;
                return Ok(AlterEmitterOp::DropFromWhere(relay));
            }
            p.expect_keywords(&["SET", "WHERE"])?;
            let filter = p.expr()?;
            return Ok(AlterEmitterOp::SetFromWhere { relay, filter });
        }
        p.expect_keywords(&["MATERIALIZED", "STATE"])?;
        let relay = relay(p)?;
        p.expect_keyword("SET")?;
        let policy = p.state_policy()?;
        return Ok(AlterEmitterOp::AlterState(StateDependency {
            relay,
            policy,
        }));
    }
    if p.eat_keyword("SET") {
        return set_operation(p, head);
    }
    if p.eat_keyword("REPLACE") {
        p.expect_keyword("CONSTRUCTION")?;
        let construction = construction(p, head)?;
        if construction.is_empty() {
            return Err(prefixed(
                p,
                "REPLACE CONSTRUCTION needs at least one INHERIT, SET, WHERE or INVOKE clause \
                 (DROP CONSTRUCTION removes them all)",
            ));
        }
        return Ok(AlterEmitterOp::ReplaceConstruction(construction));
    }
    Err(p.unexpected())
}

/// The operations that start with `SET`.
fn set_operation(p: &mut Parser, head: EmitterHead) -> PResult<AlterEmitterOp> {
    if p.eat_keywords(&["COLLECT", "FOR"]) {
        return Ok(AlterEmitterOp::SetCollect(p.collect_body()?));
    }
    if p.eat_keyword("ATTACHED") {
        return Ok(AlterEmitterOp::SetAttachment(Attachment::Attached));
    }
    if p.eat_keyword("DETACHED") {
        return Ok(AlterEmitterOp::SetAttachment(Attachment::Detached));
    }
    if p.eat_keyword("TO") {
        return Ok(AlterEmitterOp::SetSink(sink::sink(p, head)?));
    }
    if p.at_keyword("FLUSH") {
        return Ok(AlterEmitterOp::SetFlush(p.flush()?));
    }
    if p.eat_keywords(&["MESSAGE", "ERROR"]) {
        return Ok(AlterEmitterOp::SetMessageError(message_error_body(p)?));
    }
    if p.eat_keywords(&["GENERAL", "ERROR"]) {
        return Ok(AlterEmitterOp::SetGeneralError(p.general_error_policy()?));
    }
    if at_construction_clause(p) || p.at_assignment() {
        return Err(construction_changes_together(p));
    }
    if p.is_keyword_at(0, "ON") && (p.is_keyword_at(1, "MESSAGE") || p.is_keyword_at(1, "GENERAL"))
    {
        return Err(p.error_at(
            p.span(),
            "ALTER changes error policies with SET MESSAGE ERROR … and SET GENERAL ERROR …, \
             without ON",
        ));
    }
    Err(p.unexpected())
}

/// Whether a construction clause keyword comes next (nothing recorded).
fn at_construction_clause(p: &Parser) -> bool {
    ["INHERIT", "SET", "WHERE", "INVOKE"]
        .iter()
        .any(|kw| p.is_keyword_at(0, kw))
}

/// The refusal of `SET INHERIT`, `DROP WHERE` and the like, which the grammar leaves out.
fn construction_changes_together(p: &Parser) -> ParseError {
    p.error_at(
        p.span(),
        "an emitter's INHERIT, SET, WHERE and INVOKE clauses change together: \
         write REPLACE CONSTRUCTION <clauses> or DROP CONSTRUCTION",
    )
}

fn relay(p: &mut Parser) -> PResult<Ident> {
    p.ident(NameKind::Existing(ObjectKind::Relay))
}

/// `IGNORE | LOG | SEND TO <relay> [SET …]`, the policy after `ON MESSAGE ERROR` (or, in
/// ALTER, `SET MESSAGE ERROR`).
fn message_error_body(p: &mut Parser) -> PResult<MessageErrorPolicy> {
    if p.eat_keyword("IGNORE") {
        return Ok(MessageErrorPolicy::Ignore);
    }
    if p.eat_keyword("LOG") {
        return Ok(MessageErrorPolicy::Log);
    }
    p.expect_keywords(&["SEND", "TO"])?;
    let relay = relay(p)?;
    let set = if p.eat_keyword("SET") {
        p.assignments()?
    } else {
        Vec::new()
    };
    Ok(MessageErrorPolicy::SendTo { relay, set })
}

/// Zero or more of `INHERIT …`, `SET …`, `WHERE …`, `INVOKE write_header(…), …`, each at most
/// once and in any order.
fn construction(p: &mut Parser, head: EmitterHead) -> PResult<Construction> {
    let mut c = Construction::default();
    let mut seen_set = false;
    loop {
        let clause_span = p.span();
        let duplicate = |what: &str| {
            ParseError::new(
                clause_span,
                format!("an emitter takes one {what} clause; this emitter already has one"),
            )
        };
        if p.eat_keyword("INHERIT") {
            if c.inherit.is_some() {
                return Err(duplicate("INHERIT"));
            }
            c.inherit = Some(inherit(p)?);
        } else if p.eat_keyword("SET") {
            if seen_set {
                return Err(duplicate("SET"));
            }
            seen_set = true;
            c.set = p.assignments()?;
        } else if p.eat_keyword("WHERE") {
            if c.filter.is_some() {
                return Err(duplicate("WHERE"));
            }
            c.filter = Some(p.expr()?);
        } else if head == EmitterHead::ClientConsumer && p.is_keyword_at(0, "INVOKE") {
            return Err(p.error_at(
                clause_span,
                "CLIENT CONSUMER emitters carry Arrow batches without headers and take no \
                 INVOKE write_header",
            ));
        } else if p.eat_keyword("INVOKE") {
            if !c.headers.is_empty() {
                return Err(duplicate("INVOKE"));
            }
            c.headers = header_writes(p)?;
        } else {
            return Ok(c);
        }
    }
}

/// The part of `INHERIT` after the keyword. Unlike the route clause, a field list stops
/// before `, <ALTER operation>` because REPLACE CONSTRUCTION may end with it.
fn inherit(p: &mut Parser) -> PResult<Inherit> {
    let fields = if p.eat_keyword("ALL") {
        let except = if p.eat_keyword("EXCEPT") {
            field_list(p)?
        } else {
            Vec::new()
        };
        InheritFields::All { except }
    } else {
        InheritFields::Only(field_list(p)?)
    };
    let leak_sensitive = p.eat_keywords(&["LEAK", "SENSITIVE"]);
    Ok(Inherit {
        fields,
        leak_sensitive,
    })
}

fn field_list(p: &mut Parser) -> PResult<Vec<Ident>> {
    let mut fields = vec![p.ident(NameKind::Field)?];
    while !p.at_alter_operation_after_comma() && p.eat_punct(Punct::Comma) {
        fields.push(p.ident(NameKind::Field)?);
    }
    Ok(fields)
}

/// `write_header(<name>, <value>), …` after INVOKE.
fn header_writes(p: &mut Parser) -> PResult<Vec<HeaderWrite>> {
    let mut writes = vec![header_write(p)?];
    while !p.at_alter_operation_after_comma() && p.eat_punct(Punct::Comma) {
        writes.push(header_write(p)?);
    }
    Ok(writes)
}

fn header_write(p: &mut Parser) -> PResult<HeaderWrite> {
    if !p.at_keyword("write_header") {
        if p.at_word() && p.peek_at(1).kind == TokenKind::Punct(Punct::LParen) {
            let token = p.peek().clone();
            return Err(p.error_at(
                token.span,
                format!(
                    "INVOKE only calls write_header(<name>, <value>), not `{}`",
                    p.text(&token)
                ),
            ));
        }
        return Err(p.unexpected());
    }
    p.advance();
    p.expect_punct(Punct::LParen)?;
    let name = p.expr()?;
    if !p.at_punct(Punct::Comma) {
        return Err(two_arguments(p));
    }
    p.advance();
    let value = p.expr()?;
    if !p.at_punct(Punct::RParen) {
        return Err(two_arguments(p));
    }
    p.advance();
    Ok(HeaderWrite { name, value })
}

fn two_arguments(p: &mut Parser) -> ParseError {
    let token = p.peek().clone();
    let found = match token.kind {
        TokenKind::Eof => "end of input".to_string(),
        _ => format!("`{}`", p.text(&token)),
    };
    p.error_at(
        token.span,
        format!("write_header takes two arguments, write_header(<name>, <value>); found {found}"),
    )
}

#[cfg(test)]
mod tests {
    use crate::{parse_statement, render_statement};

    const FULL: &str = "CREATE IF NOT EXISTS DETACHED POSTGRES TABLE EMITTER e \
        FROM a WHERE x > 1, b COLLECT FOR 1s MAX BATCH SIZE 1MiB \
        USING MATERIALIZED STATE s DEFAULT {k = 1} \
        TO pg INSERT TO TABLE 't' VALUES {\"c\" = x, 'd' = y || 'z'} \
        MODE ACK PARALLEL MAX 2 ACK TIMEOUT 1s RETRY POLICY BACKOFF 1s MAX 2s \
        INHERIT ALL EXCEPT q LEAK SENSITIVE SET m = 1, n = 2 WHERE m > 0 \
        INVOKE write_header('h', m), write_header('i', n) \
        FLUSH EACH 1s MAX BATCH SIZE 1MiB \
        ON MESSAGE ERROR SEND TO errs SET why = error.message ON GENERAL ERROR LOG;";

    const ALTER: &str = "ALTER KAFKA TOPIC EMITTER e ADD FROM a WHERE x IN (1, 2), \
        REPLACE CONSTRUCTION INHERIT p, q, SET TO k TOPIC 't' KEY x \
        MODE NO ACK RETRY POLICY BACKOFF 1s MAX 1s WITHOUT BODY, \
        REPLACE CONSTRUCTION INVOKE write_header('a', 'b'), write_header('c', 'd'), \
        SET MESSAGE ERROR SEND TO r SET a = 1, b = 2, SET DETACHED;";

    #[test]
    fn statements_round_trip() {
        for src in [FULL, ALTER] {
            let tree = parse_statement(src).expect("parses");
            let text = render_statement(&tree);
            assert_eq!(parse_statement(&text).expect("canonical text parses"), tree);
            let again = render_statement(&parse_statement(&text).expect("parses"));
            assert_eq!(again, text);
        }
    }

    #[test]
    fn alter_lists_stop_before_the_next_operation() {
        let tree = parse_statement(ALTER).expect("parses");
        let crate::ast::Statement::Emitter(crate::ast::EmitterStmt::Alter(alter)) = tree else {
            panic!("not an ALTER EMITTER: {tree:?}");
        };
        assert_eq!(alter.operations.len(), 6);
    }

    #[test]
    fn no_prefix_of_a_statement_panics() {
        for src in [FULL, ALTER] {
            for (i, _) in src.char_indices() {
                let _ = parse_statement(&src[..i]);
            }
        }
    }
}
