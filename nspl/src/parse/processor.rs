//! Parsing of processor statements: CREATE of every processor kind, ALTER (in
//! [`alter`]) and RESET WASM PROCESSOR. Kind-specific clauses live in [`clauses`].
//!
//! Each kind accepts its clauses in the spec's order only; what the grammar alone can refuse
//! (a FILTER on a correlator, a node-wide branch on a reingestor, a zero duration) is refused
//! here with a message naming the rule.

mod alter;
mod clauses;
#[cfg(test)]
mod tests;

use super::route::{Presence, RouteRules};
use super::{PResult, Parser};
use crate::ast::processor::{
    CorrelatorSide, CreateProcessor, ProcessorDef, ProcessorStmt, RelayFeed, ResetScope, ResetWasm,
};
use crate::ast::{
    Assignment, CreatePrefix, ExprKind, Input, Literal, ObjectKind, StateDependency, Statement,
    UnaryOp,
};
use crate::error::NameKind;
use crate::lexer::Punct;

/// `CREATE [IF NOT EXISTS] [ATTACHED|DETACHED] <processor kind> …` after the kind keywords.
pub fn parse_create(p: &mut Parser, prefix: CreatePrefix, kind: ObjectKind) -> PResult<Statement> {
    if kind == ObjectKind::Generator && prefix.attachment.is_some() {
        // The prefix carries no span: the attachment keyword is the token before GENERATOR.
        let here = p.mark();
        p.reset(here.saturating_sub(2));
        let span = p.span();
        p.reset(here);
        return Err(p.error_at(
            span,
            "generators have no inputs to acknowledge and take no ATTACHED or DETACHED",
        ));
    }
    let name = p.ident(NameKind::New)?;
    let def = definition(p, kind)?;
    let branching = if kind == ObjectKind::Reingestor {
        if p.is_keyword_at(0, "BRANCHED") || p.is_keyword_at(0, "UNBRANCHED") {
            return Err(p.error_at(p.span(), REINGESTOR_BRANCHING));
        }
        None
    } else {
        match p.node_branching()? {
            Some(b) => Some(b),
            None => {
                let mut err = p.unexpected();
                err.message = format!(
                    "{} needs BRANCHED BY <branch> or UNBRANCHED before its routes; {}",
                    a_noun(kind),
                    err.message
                );
                return Err(err);
            }
        }
    };
    let state = if kind == ObjectKind::Generator {
        if p.is_keyword_at(0, "USING") {
            return Err(p.error_at(
                p.span(),
                "a generator reads only the one materialized relay it names before EACH",
            ));
        }
        Vec::new()
    } else {
        state_dependencies(p)?
    };
    let routes = p.routes(route_rules(kind))?;
    let def = match def {
        ProcessorDef::Wasm {
            feed,
            module,
            max_fuel,
            max_memory,
            ..
        } => {
            let (on_rejected_state, on_global_error) = clauses::wasm_tail(p)?;
            ProcessorDef::Wasm {
                feed,
                module,
                max_fuel,
                max_memory,
                on_rejected_state,
                on_global_error,
            }
        }
        other => other,
    };
    Ok(Statement::Processor(ProcessorStmt::Create(Box::new(
        CreateProcessor {
            if_not_exists: prefix.if_not_exists,
            attachment: prefix.attachment,
            name,
            def,
            branching,
            state,
            routes,
        },
    ))))
}

const REINGESTOR_BRANCHING: &str = "reingestors have no node-wide branching: each route declares BRANCHED BY <branch> or UNBRANCHED";

/// Everything between the name and the node-wide branching: inputs and kind clauses.
fn definition(p: &mut Parser, kind: ObjectKind) -> PResult<ProcessorDef> {
    match kind {
        ObjectKind::Generator => {
            if p.is_keyword_at(0, "FROM") {
                return Err(p.error_at(p.span(), GENERATOR_INPUTS));
            }
            p.expect_keywords(&["USING", "MATERIALIZED", "STATE"])?;
            let source = p.ident(NameKind::Existing(ObjectKind::Relay))?;
            if p.is_keyword_at(0, "REQUIRED") || p.is_keyword_at(0, "DEFAULT") {
                return Err(p.error_at(
                    p.span(),
                    "a generator names its materialized relay without a policy: write USING MATERIALIZED STATE <relay> EACH <duration>",
                ));
            }
            p.expect_keyword("EACH")?;
            let each = clauses::positive_duration(p, "EACH")?;
            Ok(ProcessorDef::Generator { source, each })
        }
        ObjectKind::Correlator => {
            if p.is_keyword_at(0, "FROM") {
                return Err(p.error_at(
                    p.span(),
                    "correlators read two sides: write LEFT FROM … RIGHT FROM …",
                ));
            }
            p.expect_keywords(&["LEFT", "FROM"])?;
            let left = side(p)?;
            p.expect_keywords(&["RIGHT", "FROM"])?;
            let right = side(p)?;
            if p.is_keyword_at(0, "FILTER") {
                return Err(p.error_at(p.span(), CORRELATOR_FILTER));
            }
            p.expect_keywords(&["CORRELATE", "WHERE"])?;
            let condition = p.expr()?;
            p.expect_keyword("MATCH")?;
            let matching = clauses::match_mode(p)?;
            p.expect_keywords(&["MAX", "TIME"])?;
            let max_time = clauses::positive_duration(p, "MAX TIME")?;
            p.expect_keywords(&["ON", "CORRELATION", "TIMEOUT"])?;
            let on_timeout = clauses::correlation_timeout(p)?;
            if p.is_keyword_at(0, "FILTER") {
                return Err(p.error_at(p.span(), CORRELATOR_FILTER));
            }
            Ok(ProcessorDef::Correlator {
                left,
                right,
                condition,
                matching,
                max_time,
                on_timeout,
            })
        }
        _ => {
            p.expect_keyword("FROM")?;
            let feed = feed(p)?;
            clauses::kind_clauses(p, kind, feed)
        }
    }
}

pub(super) const GENERATOR_INPUTS: &str =
    "generators have no FROM inputs: they read USING MATERIALIZED STATE <relay> EACH <duration>";

pub(super) const CORRELATOR_FILTER: &str =
    "correlators do not accept FILTER WHERE: filter each side with its FROM … WHERE";

/// The inputs after `FROM`, then `[COLLECT FOR …] [FILTER WHERE …]`.
fn feed(p: &mut Parser) -> PResult<RelayFeed> {
    let inputs = input_list(p)?;
    let collect = p.collect()?;
    let filter = if p.eat_keyword("FILTER") {
        p.expect_keyword("WHERE")?;
        Some(p.expr()?)
    } else {
        None
    };
    if p.is_keyword_at(0, "COLLECT") {
        return Err(p.error_at(
            p.span(),
            "COLLECT FOR comes directly after the FROM inputs, before FILTER WHERE",
        ));
    }
    Ok(RelayFeed {
        inputs,
        collect,
        filter,
    })
}

/// A correlator side after its `LEFT FROM` / `RIGHT FROM`.
fn side(p: &mut Parser) -> PResult<CorrelatorSide> {
    let inputs = input_list(p)?;
    let collect = p.collect()?;
    Ok(CorrelatorSide { inputs, collect })
}

/// The core input list, refusing a relay listed twice (ALTER addresses inputs by relay).
fn input_list(p: &mut Parser) -> PResult<Vec<Input>> {
    let inputs = p.inputs()?;
    for (i, input) in inputs.iter().enumerate() {
        if inputs[..i].iter().any(|e| e.relay == input.relay) {
            return Err(p.error_at(
                input.relay.span,
                format!("relay `{}` is listed twice in this FROM", input.relay),
            ));
        }
    }
    Ok(inputs)
}

/// The core dependency list, refusing a relay declared twice.
fn state_dependencies(p: &mut Parser) -> PResult<Vec<StateDependency>> {
    let deps = p.state_dependencies()?;
    for (i, dep) in deps.iter().enumerate() {
        if deps[..i].iter().any(|d| d.relay == dep.relay) {
            return Err(p.error_at(
                dep.relay.span,
                format!("materialized state `{}` is declared twice", dep.relay),
            ));
        }
    }
    Ok(deps)
}

/// `RESET WASM PROCESSOR … ;` (the parser is at `RESET`).
pub fn parse_reset_wasm(p: &mut Parser) -> PResult<Statement> {
    p.expect_keywords(&["RESET", "WASM", "PROCESSOR"])?;
    let processor = p.ident(NameKind::Existing(ObjectKind::WasmProcessor))?;
    p.expect_keywords(&["STATE", "IN", "DOMAIN"])?;
    let domain = p.ident(NameKind::Existing(ObjectKind::Domain))?;
    p.expect_keyword("FOR")?;
    let scope = if p.eat_keyword("UNBRANCHED") {
        ResetScope::Unbranched
    } else if p.eat_keyword("ALL") {
        p.expect_keyword("BRANCHES")?;
        ResetScope::AllBranches
    } else {
        p.expect_keywords(&["BRANCH", "VALUES"])?;
        ResetScope::BranchValues(branch_values(p)?)
    };
    Ok(Statement::Processor(ProcessorStmt::ResetWasm(ResetWasm {
        processor,
        domain,
        scope,
    })))
}

/// `{ field = <literal>, … }`: each field once, each value a literal.
fn branch_values(p: &mut Parser) -> PResult<Vec<Assignment>> {
    p.expect_punct(Punct::LBrace)?;
    let values = p.comma_list(|p| {
        let target = p.ident(NameKind::Field)?;
        p.expect_punct(Punct::Eq)?;
        let value = p.expr()?;
        if !is_literal(&value.kind) {
            return Err(p.error_at(
                value.span,
                format!("branch value `{target}` must be a literal such as 'acme', 42 or TRUE"),
            ));
        }
        Ok(Assignment { target, value })
    })?;
    for (i, v) in values.iter().enumerate() {
        if values[..i].iter().any(|e| e.target == v.target) {
            return Err(p.error_at(
                v.target.span,
                format!("branch field `{}` is given twice", v.target),
            ));
        }
    }
    p.expect_punct(Punct::RBrace)?;
    Ok(values)
}

/// A literal, or a negated number literal.
fn is_literal(kind: &ExprKind) -> bool {
    match kind {
        ExprKind::Literal(_) => true,
        ExprKind::Unary {
            op: UnaryOp::Neg,
            expr,
        } => matches!(
            expr.kind,
            ExprKind::Literal(Literal::Integer(_) | Literal::Decimal(_))
        ),
        _ => false,
    }
}

/// `ALTER <processor kind> …` after the kind keywords.
pub fn parse_alter(p: &mut Parser, kind: ObjectKind) -> PResult<Statement> {
    alter::parse_alter(p, kind)
}

/// The kind's name in messages, e.g. `window processor`.
pub(super) fn noun(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Junction => "junction",
        ObjectKind::Deduplicator => "deduplicator",
        ObjectKind::Reorderer => "reorderer",
        ObjectKind::WindowProcessor => "window processor",
        ObjectKind::Inferencer => "inferencer",
        ObjectKind::WasmProcessor => "WASM processor",
        ObjectKind::Correlator => "correlator",
        ObjectKind::Reingestor => "reingestor",
        ObjectKind::Generator => "generator",
        _ => "processor",
    }
}

/// The kind's name with its indefinite article: `a junction`, `an inferencer`.
pub(super) fn a_noun(kind: ObjectKind) -> String {
    let noun = noun(kind);
    let article = if matches!(kind, ObjectKind::Inferencer) {
        "an"
    } else {
        "a"
    };
    format!("{article} {noun}")
}

/// What the routes of each kind may and must hold (spec: "Filters and construction").
pub(super) fn route_rules(kind: ObjectKind) -> RouteRules {
    let transforming = RouteRules {
        node: noun(kind),
        inherit: true,
        set_required: false,
        branching: Presence::Forbidden,
        flush: Presence::Required,
    };
    let set_only = RouteRules {
        inherit: false,
        set_required: true,
        ..transforming
    };
    match kind {
        ObjectKind::Reingestor => RouteRules {
            branching: Presence::Required,
            ..transforming
        },
        ObjectKind::WindowProcessor | ObjectKind::WasmProcessor => RouteRules {
            flush: Presence::Forbidden,
            ..set_only
        },
        ObjectKind::Inferencer | ObjectKind::Correlator | ObjectKind::Generator => set_only,
        _ => transforming,
    }
}
