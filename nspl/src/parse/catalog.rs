//! Parsing of catalog statements (DESIGN §7): the four entry points the dispatcher calls, the
//! small statements (domains, branches, relays, users, subscriptions, cluster commands), and
//! helpers the submodules share. Schemas, wire schemas and codecs live in [`schema`]; clients,
//! vhosts, endpoints and resources in [`network`].

mod network;
mod schema;

use super::{PResult, Parser};
use crate::ast::catalog::{
    AlterUser, CatalogStmt, CreateBranch, CreateDomain, CreateRelay, CreateSubscription,
    CreateUser, NodeCommand, Pacing, Relocate, Role, UserOperation,
};
use crate::ast::{CreatePrefix, Ident, ObjectKind, Statement};
use crate::error::{NameKind, ParseError};
use crate::lexer::Punct;
use crate::span::Span;

/// Kinds `RELOCATE` can move: the entities the schedule places on a node.
const RELOCATABLE: [ObjectKind; 12] = [
    ObjectKind::Relay,
    ObjectKind::Ingestor,
    ObjectKind::Emitter,
    ObjectKind::Junction,
    ObjectKind::Deduplicator,
    ObjectKind::Reorderer,
    ObjectKind::WindowProcessor,
    ObjectKind::Inferencer,
    ObjectKind::WasmProcessor,
    ObjectKind::Correlator,
    ObjectKind::Reingestor,
    ObjectKind::Generator,
];

fn catalog(stmt: CatalogStmt) -> PResult<Statement> {
    Ok(Statement::Catalog(stmt))
}

/// `CREATE [IF NOT EXISTS] <catalog kind> …` after the prefix.
pub fn parse_create(p: &mut Parser, prefix: CreatePrefix) -> PResult<Statement> {
    let ine = prefix.if_not_exists;
    if p.eat_keyword("DOMAIN") {
        return create_domain(p, ine, false);
    }
    if p.eat_keyword("UNPACED") {
        p.expect_keyword("DOMAIN")?;
        return create_domain(p, ine, false);
    }
    if p.eat_keyword("PACED") {
        p.expect_keyword("DOMAIN")?;
        return create_domain(p, ine, true);
    }
    if p.eat_keyword("SCHEMA") {
        return catalog(schema::create_schema(p, ine)?);
    }
    if p.eat_keyword("WIRE") {
        return catalog(schema::create_wire_schema(p, ine)?);
    }
    if p.eat_keyword("CODEC") {
        return catalog(schema::create_codec(p, ine)?);
    }
    if p.eat_keyword("BRANCH") {
        return create_branch(p, ine);
    }
    if p.eat_keyword("RELAY") {
        return create_relay(p, ine);
    }
    if p.eat_keyword("CLIENT") {
        return catalog(network::create_client(p, ine)?);
    }
    if p.eat_keyword("VHOST") {
        return catalog(network::create_vhost(p, ine)?);
    }
    if p.eat_keyword("ENDPOINT") {
        return catalog(network::create_endpoint(p, ine)?);
    }
    if p.eat_keyword("RESOURCE") {
        return catalog(network::create_resource(p, ine)?);
    }
    if p.eat_keyword("USER") {
        return create_user(p, ine);
    }
    if p.eat_keyword("SUBSCRIPTION") {
        return create_subscription(p, ine);
    }
    Err(p.unexpected())
}

/// `ALTER <catalog kind> …` after `ALTER`.
pub fn parse_alter(p: &mut Parser) -> PResult<Statement> {
    if p.eat_keyword("SCHEMA") {
        return catalog(schema::alter_schema(p)?);
    }
    if p.eat_keyword("CLIENT") {
        return catalog(network::alter_client(p)?);
    }
    if p.eat_keyword("USER") {
        return alter_user(p);
    }
    Err(p.unexpected())
}

/// Statements that start with their own verb (UPLOAD, REBIND, CORDON, …), when one is next.
pub fn parse_command(p: &mut Parser) -> Option<PResult<Statement>> {
    if p.eat_keyword("UPLOAD") {
        return Some(network::upload_resource(p).map(Statement::Catalog));
    }
    if p.eat_keyword("REBIND") {
        return Some(network::rebind_resource(p).map(Statement::Catalog));
    }
    for command in [
        NodeCommand::Cordon,
        NodeCommand::Uncordon,
        NodeCommand::Drain,
    ] {
        if p.eat_keyword(command.keyword()) {
            return Some(node_command(p, command));
        }
    }
    if p.eat_keyword("RELOCATE") {
        return Some(relocate(p));
    }
    None
}

/// `SHOW CLUSTER STATUS` and other SHOW forms that are not `SHOW <KIND>S`, when one is next.
pub fn parse_show(p: &mut Parser) -> Option<PResult<Statement>> {
    if p.eat_keyword("CLUSTER") {
        return Some(
            p.expect_keyword("STATUS")
                .and_then(|_| catalog(CatalogStmt::ShowClusterStatus)),
        );
    }
    None
}

// ----- shared helpers -----

/// A name being declared.
pub(crate) fn new_name(p: &mut Parser) -> PResult<Ident> {
    p.ident(NameKind::New)
}

/// Consumes whichever `(keyword, value)` comes next. When none does and `what` is given, the
/// error lists every choice (the core's message stops at twelve).
pub(crate) fn choice<T: Copy>(
    p: &mut Parser,
    what: Option<&str>,
    choices: &[(&'static str, T)],
) -> PResult<T> {
    for (keyword, value) in choices {
        if p.eat_keyword(keyword) {
            return Ok(*value);
        }
    }
    let mut error = p.unexpected();
    if let (Some(what), Some(found_at)) = (what, error.message.find(", found ")) {
        if !error.expected.is_empty() {
            let listed: Vec<String> = choices.iter().map(|(k, _)| format!("`{k}`")).collect();
            error.message = format!(
                "expected {what}: one of {}{}",
                listed.join(", "),
                &error.message[found_at..]
            );
        }
    }
    Err(error)
}

/// Refuses `name` when it is already in `seen` (case-sensitively), else records it.
pub(crate) fn refuse_repeat(
    seen: &mut Vec<String>,
    name: &str,
    span: Span,
    message: impl FnOnce() -> String,
) -> PResult<()> {
    if seen.iter().any(|s| s == name) {
        return Err(ParseError::new(span, message()));
    }
    seen.push(name.to_string());
    Ok(())
}

/// A whole number that must be at least 1; `what` names the clause in the message.
pub(crate) fn positive_integer(p: &mut Parser, what: &str) -> PResult<u64> {
    let span = p.span();
    let n = p.integer()?;
    if n == 0 {
        return Err(p.error_at(span, format!("{what} must be at least 1")));
    }
    Ok(n)
}

/// A duration that must not be zero; `what` names the clause in the message.
pub(crate) fn positive_duration(p: &mut Parser, what: &str) -> PResult<crate::ast::Duration> {
    let span = p.span();
    let d = p.duration()?;
    if d.nanos == 0 {
        return Err(p.error_at(span, format!("{what} must be longer than 0s")));
    }
    Ok(d)
}

/// A string literal that must not be empty; `what` names it in the message.
pub(crate) fn non_empty_string(p: &mut Parser, what: &str) -> PResult<String> {
    let span = p.span();
    let s = p.string()?;
    if s.is_empty() {
        return Err(p.error_at(span, format!("{what} cannot be empty")));
    }
    Ok(s)
}

// ----- domains, branches, relays -----

fn create_domain(p: &mut Parser, if_not_exists: bool, paced: bool) -> PResult<Statement> {
    let name = new_name(p)?;
    let pacing = if paced {
        p.expect_keywords(&["WITH", "PERIOD"])?;
        let period = positive_duration(p, "PERIOD")?;
        p.expect_keyword("SKEW")?;
        let skew = p.duration()?;
        Pacing::Paced { period, skew }
    } else {
        Pacing::Unpaced
    };
    catalog(CatalogStmt::CreateDomain(CreateDomain {
        if_not_exists,
        name,
        pacing,
    }))
}

fn create_branch(p: &mut Parser, if_not_exists: bool) -> PResult<Statement> {
    let name = new_name(p)?;
    p.expect_keyword("SCHEMA")?;
    let schema = p.ident(NameKind::Existing(ObjectKind::Schema))?;
    p.expect_keyword("TTL")?;
    let ttl = positive_duration(p, "TTL")?;
    let max_instances = if p.eat_keyword("MAX") {
        p.expect_keyword("INSTANCES")?;
        let n = positive_integer(p, "MAX INSTANCES")?;
        p.expect_keywords(&["EVICT", "LRU"])?;
        Some(n)
    } else {
        None
    };
    catalog(CatalogStmt::CreateBranch(CreateBranch {
        if_not_exists,
        name,
        schema,
        ttl,
        max_instances,
    }))
}

fn create_relay(p: &mut Parser, if_not_exists: bool) -> PResult<Statement> {
    let name = new_name(p)?;
    p.expect_keyword("SCHEMA")?;
    let schema = p.ident(NameKind::Existing(ObjectKind::Schema))?;
    let Some(branching) = p.node_branching()? else {
        return Err(p.unexpected());
    };
    let capacity = if p.eat_keyword("CAPACITY") {
        Some(positive_integer(p, "CAPACITY")?)
    } else {
        None
    };
    let materialized = p.eat_keyword("WITH");
    if materialized {
        p.expect_keywords(&["MATERIALIZED", "STATE", "LAST", "BY", "TIMESTAMP"])?;
    }
    catalog(CatalogStmt::CreateRelay(CreateRelay {
        if_not_exists,
        name,
        schema,
        branching,
        capacity,
        materialized,
    }))
}

// ----- users -----

fn role(p: &mut Parser) -> PResult<Role> {
    let choices = Role::ALL.map(|r| (r.keyword(), r));
    choice(p, None, &choices)
}

fn create_user(p: &mut Parser, if_not_exists: bool) -> PResult<Statement> {
    let name = new_name(p)?;
    p.expect_keywords(&["WITH", "PASSWORD"])?;
    let password = non_empty_string(p, "a password")?;
    p.expect_keyword("ROLE")?;
    let role = role(p)?;
    catalog(CatalogStmt::CreateUser(CreateUser {
        if_not_exists,
        name,
        password,
        role,
    }))
}

fn alter_user(p: &mut Parser) -> PResult<Statement> {
    let name = p.ident(NameKind::Existing(ObjectKind::User))?;
    let mut operations = Vec::new();
    let mut seen = Vec::new();
    loop {
        let start = p.span();
        p.expect_keyword("SET")?;
        let (op, what) = match p.expect_one_of(&["PASSWORD", "ROLE"])? {
            "PASSWORD" => (
                UserOperation::SetPassword(non_empty_string(p, "a password")?),
                "SET PASSWORD",
            ),
            _ => (UserOperation::SetRole(role(p)?), "SET ROLE"),
        };
        refuse_repeat(&mut seen, what, start, || {
            format!("{what} is given twice in one ALTER USER")
        })?;
        operations.push(op);
        if !p.eat_punct(Punct::Comma) {
            break;
        }
    }
    catalog(CatalogStmt::AlterUser(AlterUser { name, operations }))
}

// ----- subscriptions -----

fn create_subscription(p: &mut Parser, if_not_exists: bool) -> PResult<Statement> {
    let name = new_name(p)?;
    p.expect_keyword("TO")?;
    let relay = p.ident(NameKind::Existing(ObjectKind::Relay))?;
    let filter = if p.eat_keyword("WHERE") {
        Some(p.expr()?)
    } else {
        None
    };
    let sample_rate = if p.eat_keyword("BATCH") {
        p.expect_keywords(&["SAMPLE", "RATE"])?;
        let span = p.span();
        let rate = p.number()?;
        // NaN cannot be lexed, so the comparison covers every value.
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(p.error_at(
                span,
                "BATCH SAMPLE RATE must be greater than 0 and at most 1",
            ));
        }
        Some(rate)
    } else {
        None
    };
    catalog(CatalogStmt::CreateSubscription(CreateSubscription {
        if_not_exists,
        name,
        relay,
        filter,
        sample_rate,
    }))
}

// ----- cluster -----

fn node_name(p: &mut Parser) -> PResult<Ident> {
    p.ident(NameKind::Existing(ObjectKind::Node))
}

fn node_command(p: &mut Parser, command: NodeCommand) -> PResult<Statement> {
    p.expect_keyword("NODE")?;
    let node = node_name(p)?;
    catalog(CatalogStmt::Node { command, node })
}

fn relocate(p: &mut Parser) -> PResult<Statement> {
    let mut seen = Vec::new();
    let targets = p.comma_list(|p| {
        let start = p.span();
        let kind = p.object_kind()?;
        let keywords = kind.keywords().join(" ");
        if !RELOCATABLE.contains(&kind) {
            return Err(p.error_at(
                start.to(p.prev_span()),
                format!(
                    "{keywords} cannot be relocated: RELOCATE moves relays, ingestors, \
                     processors and emitters"
                ),
            ));
        }
        let name = p.ident(NameKind::Existing(kind))?;
        let key = format!("{keywords} {}", name.name);
        refuse_repeat(&mut seen, &key, name.span, || {
            format!("{keywords} {} is listed twice", name.name)
        })?;
        Ok((kind, name))
    })?;
    p.expect_keywords(&["ONTO", "NODE"])?;
    let node = node_name(p)?;
    let follow_preferences = p.expect_one_of(&["FOLLOW", "IGNORE"])? == "FOLLOW";
    p.expect_keyword("PREFERENCES")?;
    catalog(CatalogStmt::Relocate(Relocate {
        targets,
        node,
        follow_preferences,
    }))
}
