//! `ALTER <processor kind> <name> <op>, …`: the shared input, collection, filter, attachment,
//! branching, materialized-state and route operations, and each kind's own SET forms.
//!
//! Operations are recognised keyword by keyword from one table, so an error lists only the
//! operations the kind offers (which is also what completion shows), while an operation that
//! exists for another kind is refused by name ("SET MAX TIME applies only to …").

use super::clauses::{
    correlation_timeout, file_name, match_mode, positive_duration, positive_integer, positive_size,
    rejected_state, tensor_inputs, tensor_outputs, window_extent,
};
use super::{a_noun, noun, route_rules, CORRELATOR_FILTER, GENERATOR_INPUTS};
use crate::ast::processor::{AlterOp, AlterProcessor, ProcessorStmt, Side};
use crate::ast::{Attachment, Branching, ObjectKind, StateDependency, Statement};
use crate::error::{Expected, NameKind, ParseError};
use crate::lexer::{Punct, TokenKind};
use crate::parse::{PResult, Parser};

/// Which operation a keyword sequence names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    AddFrom(Option<Side>),
    DropFrom(Option<Side>),
    AlterFrom(Option<Side>),
    SetCollect(Option<Side>),
    DropCollect(Option<Side>),
    SetFilter,
    DropFilter,
    SetAttached,
    SetDetached,
    SetBranchedBy,
    SetUnbranched,
    AddState,
    DropState,
    AlterState,
    AddRoute,
    DropRoute,
    ReplaceRoute,
    SetDeduplicateOn,
    SetMaxTime,
    SetBy,
    SetWidth,
    SetStep,
    SetMaxStateSize,
    DropMaxStateSize,
    SetResource,
    SetInputs,
    SetOutputSchema,
    SetMaxFuel,
    SetMaxMemory,
    SetOnRejectedState,
    SetOnGlobalError,
    SetCorrelateWhere,
    SetMatch,
    SetCorrelationTimeout,
    SetSource,
    SetEach,
}

const L: Option<Side> = Some(Side::Left);
const R: Option<Side> = Some(Side::Right);

/// Every operation: its verb, the keywords after it, and its key. No keyword sequence is a
/// prefix of another with the same verb, so reading keyword by keyword is unambiguous.
const OPS: &[(&str, &[&str], Key)] = &[
    ("ADD", &["FROM"], Key::AddFrom(None)),
    ("ADD", &["LEFT", "FROM"], Key::AddFrom(L)),
    ("ADD", &["RIGHT", "FROM"], Key::AddFrom(R)),
    ("ADD", &["MATERIALIZED", "STATE"], Key::AddState),
    ("ADD", &["ROUTE", "TO"], Key::AddRoute),
    ("DROP", &["FROM"], Key::DropFrom(None)),
    ("DROP", &["LEFT", "FROM"], Key::DropFrom(L)),
    ("DROP", &["RIGHT", "FROM"], Key::DropFrom(R)),
    ("DROP", &["COLLECT"], Key::DropCollect(None)),
    ("DROP", &["LEFT", "COLLECT"], Key::DropCollect(L)),
    ("DROP", &["RIGHT", "COLLECT"], Key::DropCollect(R)),
    ("DROP", &["FILTER", "WHERE"], Key::DropFilter),
    ("DROP", &["MATERIALIZED", "STATE"], Key::DropState),
    ("DROP", &["ROUTE", "TO"], Key::DropRoute),
    ("DROP", &["MAX", "STATE", "SIZE"], Key::DropMaxStateSize),
    ("ALTER", &["FROM"], Key::AlterFrom(None)),
    ("ALTER", &["LEFT", "FROM"], Key::AlterFrom(L)),
    ("ALTER", &["RIGHT", "FROM"], Key::AlterFrom(R)),
    ("ALTER", &["MATERIALIZED", "STATE"], Key::AlterState),
    ("REPLACE", &["ROUTE", "TO"], Key::ReplaceRoute),
    ("SET", &["COLLECT", "FOR"], Key::SetCollect(None)),
    ("SET", &["LEFT", "COLLECT", "FOR"], Key::SetCollect(L)),
    ("SET", &["RIGHT", "COLLECT", "FOR"], Key::SetCollect(R)),
    ("SET", &["FILTER", "WHERE"], Key::SetFilter),
    ("SET", &["ATTACHED"], Key::SetAttached),
    ("SET", &["DETACHED"], Key::SetDetached),
    ("SET", &["BRANCHED", "BY"], Key::SetBranchedBy),
    ("SET", &["UNBRANCHED"], Key::SetUnbranched),
    ("SET", &["MATERIALIZED", "STATE"], Key::SetSource),
    ("SET", &["EACH"], Key::SetEach),
    ("SET", &["DEDUPLICATE", "ON"], Key::SetDeduplicateOn),
    ("SET", &["BY"], Key::SetBy),
    ("SET", &["MAX", "TIME"], Key::SetMaxTime),
    ("SET", &["WIDTH"], Key::SetWidth),
    ("SET", &["STEP"], Key::SetStep),
    ("SET", &["MAX", "STATE", "SIZE"], Key::SetMaxStateSize),
    ("SET", &["RESOURCE"], Key::SetResource),
    ("SET", &["INPUTS"], Key::SetInputs),
    ("SET", &["OUTPUT", "SCHEMA"], Key::SetOutputSchema),
    ("SET", &["MAX", "FUEL"], Key::SetMaxFuel),
    ("SET", &["MAX", "MEMORY"], Key::SetMaxMemory),
    ("SET", &["ON", "REJECTED", "STATE"], Key::SetOnRejectedState),
    ("SET", &["ON", "GLOBAL", "ERROR"], Key::SetOnGlobalError),
    ("SET", &["CORRELATE", "WHERE"], Key::SetCorrelateWhere),
    ("SET", &["MATCH"], Key::SetMatch),
    (
        "SET",
        &["ON", "CORRELATION", "TIMEOUT"],
        Key::SetCorrelationTimeout,
    ),
];

const VERBS: [&str; 5] = ["ADD", "DROP", "ALTER", "REPLACE", "SET"];

/// Processor kinds in the order messages list them.
const KINDS: [ObjectKind; 9] = [
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

/// Whether `key` is an operation of `kind`.
fn applies(key: Key, kind: ObjectKind) -> bool {
    use ObjectKind as K;
    let relay_fed = !matches!(kind, K::Correlator | K::Generator);
    match key {
        Key::AddFrom(side)
        | Key::DropFrom(side)
        | Key::AlterFrom(side)
        | Key::SetCollect(side)
        | Key::DropCollect(side) => match side {
            Some(_) => kind == K::Correlator,
            None => relay_fed,
        },
        Key::SetFilter | Key::DropFilter => relay_fed,
        Key::SetAttached | Key::SetDetached => kind != K::Generator,
        Key::SetBranchedBy | Key::SetUnbranched => kind != K::Reingestor,
        Key::AddState | Key::DropState | Key::AlterState => kind != K::Generator,
        Key::AddRoute | Key::DropRoute | Key::ReplaceRoute => true,
        Key::SetDeduplicateOn => kind == K::Deduplicator,
        Key::SetMaxTime => matches!(kind, K::Deduplicator | K::Reorderer | K::Correlator),
        Key::SetBy => kind == K::Reorderer,
        Key::SetWidth | Key::SetStep | Key::SetMaxStateSize | Key::DropMaxStateSize => {
            kind == K::WindowProcessor
        }
        Key::SetResource => matches!(kind, K::Inferencer | K::WasmProcessor),
        Key::SetInputs | Key::SetOutputSchema => kind == K::Inferencer,
        Key::SetMaxFuel | Key::SetMaxMemory | Key::SetOnRejectedState | Key::SetOnGlobalError => {
            kind == K::WasmProcessor
        }
        Key::SetCorrelateWhere | Key::SetMatch | Key::SetCorrelationTimeout => {
            kind == K::Correlator
        }
        Key::SetSource | Key::SetEach => kind == K::Generator,
    }
}

fn plural(kind: ObjectKind) -> String {
    format!("{}s", noun(kind))
}

/// Why `key` (written `text`) is refused for `kind`.
fn refusal(key: Key, kind: ObjectKind, verb: &str, rest: &[&str]) -> String {
    let text = format!("{verb} {}", rest.join(" "));
    let input_op = matches!(
        key,
        Key::AddFrom(None)
            | Key::DropFrom(None)
            | Key::AlterFrom(None)
            | Key::SetCollect(None)
            | Key::DropCollect(None)
    );
    match (key, kind) {
        (_, ObjectKind::Correlator) if input_op => {
            let rest = rest.join(" ");
            format!("correlators read two sides: write {verb} LEFT {rest} or {verb} RIGHT {rest}")
        }
        (_, ObjectKind::Generator) if input_op => GENERATOR_INPUTS.to_string(),
        (Key::SetFilter | Key::DropFilter, ObjectKind::Correlator) => CORRELATOR_FILTER.into(),
        (Key::SetAttached | Key::SetDetached, ObjectKind::Generator) => {
            "generators have no inputs to acknowledge and take no ATTACHED or DETACHED".into()
        }
        (Key::SetBranchedBy | Key::SetUnbranched, ObjectKind::Reingestor) => {
            "reingestors have no node-wide branching: change a route's BRANCHED BY or UNBRANCHED with REPLACE ROUTE TO".into()
        }
        (Key::AddState | Key::DropState | Key::AlterState, ObjectKind::Generator) => {
            "a generator reads one materialized relay: change it with SET MATERIALIZED STATE"
                .into()
        }
        (Key::SetSource, _) => format!(
            "{text} applies only to generators; {} uses ADD, ALTER or DROP MATERIALIZED STATE",
            a_noun(kind)
        ),
        _ => {
            let kinds: Vec<String> = KINDS
                .iter()
                .filter(|k| applies(key, **k))
                .map(|k| plural(*k))
                .collect();
            if kinds.len() >= KINDS.len() - 2 {
                // Most kinds have it: name the one refusing, not the long list.
                format!("{text} does not apply to {}", plural(kind))
            } else {
                format!("{text} applies only to {}", join_and(&kinds))
            }
        }
    }
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `ALTER <kind> <name> <op>, …` after the kind keywords.
pub(super) fn parse_alter(p: &mut Parser, kind: ObjectKind) -> PResult<Statement> {
    let name = p.ident(NameKind::Existing(kind))?;
    let mut ops = vec![operation(p, kind)?];
    while p.eat_punct(Punct::Comma) {
        if matches!(ops.last(), Some(AlterOp::AddFrom { .. })) && at_relay_name(p) {
            return Err(ParseError::new(
                p.span(),
                "ADD FROM adds one relay: write another ADD FROM for each further relay",
            ));
        }
        ops.push(operation(p, kind)?);
    }
    Ok(Statement::Processor(ProcessorStmt::Alter(AlterProcessor {
        kind,
        name,
        ops,
    })))
}

/// Whether the next token reads as a relay name rather than an operation's verb.
fn at_relay_name(p: &Parser) -> bool {
    let token = p.peek();
    token.kind == TokenKind::Word
        && !p.text(token).bytes().any(|b| b.is_ascii_uppercase())
        && !VERBS.iter().any(|v| p.is_keyword_at(0, v))
}

/// Reads the keywords of one operation, refusing one the kind does not have.
fn operation_key(p: &mut Parser, kind: ObjectKind) -> PResult<Key> {
    let start = p.span();
    for verb in VERBS {
        if OPS.iter().any(|(v, _, k)| *v == verb && applies(*k, kind)) {
            p.note(Expected::Keyword(verb));
        }
    }
    let Some(verb) = VERBS.into_iter().find(|v| p.is_keyword_at(0, v)) else {
        return Err(p.unexpected());
    };
    p.advance();
    let mut candidates: Vec<&(&str, &[&str], Key)> =
        OPS.iter().filter(|(v, _, _)| *v == verb).collect();
    let mut depth = 0;
    loop {
        if let Some((_, rest, key)) = candidates.iter().find(|(_, r, _)| r.len() == depth) {
            if applies(*key, kind) {
                return Ok(*key);
            }
            return Err(ParseError::new(
                start.to(p.prev_span()),
                refusal(*key, kind, verb, rest),
            ));
        }
        for (_, rest, key) in &candidates {
            if applies(*key, kind) {
                p.note(Expected::Keyword(rest[depth]));
            }
        }
        let next: Vec<_> = candidates
            .iter()
            .copied()
            .filter(|(_, rest, _)| p.is_keyword_at(0, rest[depth]))
            .collect();
        if next.is_empty() {
            if candidates.iter().any(|(_, _, k)| applies(*k, kind)) {
                return Err(p.unexpected());
            }
            // Only other kinds' operations start this way.
            let mut words = vec![verb];
            if let Some((_, rest, _)) = candidates.first() {
                words.extend(rest.iter().take(depth));
            }
            return Err(ParseError::new(
                start.to(p.prev_span()),
                format!(
                    "no {} operation starts with `{}`",
                    noun(kind),
                    words.join(" ")
                ),
            ));
        }
        candidates = next;
        p.advance();
        depth += 1;
    }
}

/// One operation.
fn operation(p: &mut Parser, kind: ObjectKind) -> PResult<AlterOp> {
    let key = operation_key(p, kind)?;
    let relay = |p: &mut Parser| p.ident(NameKind::Existing(ObjectKind::Relay));
    Ok(match key {
        Key::AddFrom(side) => AlterOp::AddFrom {
            side,
            input: p.input()?,
        },
        Key::DropFrom(side) => AlterOp::DropFrom {
            side,
            relay: relay(p)?,
        },
        Key::AlterFrom(side) => {
            let relay = relay(p)?;
            let filter = if p.eat_keyword("SET") {
                p.expect_keyword("WHERE")?;
                Some(p.expr()?)
            } else {
                p.expect_keywords(&["DROP", "WHERE"])?;
                None
            };
            AlterOp::AlterFrom {
                side,
                relay,
                filter,
            }
        }
        Key::SetCollect(side) => AlterOp::SetCollect {
            side,
            collect: p.collect_body()?,
        },
        Key::DropCollect(side) => AlterOp::DropCollect { side },
        Key::SetFilter => AlterOp::SetFilter(p.expr()?),
        Key::DropFilter => AlterOp::DropFilter,
        Key::SetAttached => AlterOp::SetAttachment(Attachment::Attached),
        Key::SetDetached => AlterOp::SetAttachment(Attachment::Detached),
        Key::SetBranchedBy => AlterOp::SetBranching(Branching::BranchedBy(
            p.ident(NameKind::Existing(ObjectKind::Branch))?,
        )),
        Key::SetUnbranched => AlterOp::SetBranching(Branching::Unbranched),
        Key::AddState => {
            let relay = relay(p)?;
            AlterOp::AddState(StateDependency {
                relay,
                policy: p.state_policy()?,
            })
        }
        Key::DropState => AlterOp::DropState(relay(p)?),
        Key::AlterState => {
            let relay = relay(p)?;
            p.expect_keyword("SET")?;
            AlterOp::AlterState(StateDependency {
                relay,
                policy: p.state_policy()?,
            })
        }
        Key::AddRoute => AlterOp::AddRoute(p.route_body(route_rules(kind))?),
        Key::DropRoute => AlterOp::DropRoute(relay(p)?),
        Key::ReplaceRoute => AlterOp::ReplaceRoute(p.route_body(route_rules(kind))?),
        Key::SetDeduplicateOn => AlterOp::SetDeduplicateOn(p.expr_list()?),
        Key::SetMaxTime => AlterOp::SetMaxTime(positive_duration(p, "MAX TIME")?),
        Key::SetBy => AlterOp::SetBy(p.expr_list()?),
        Key::SetWidth => AlterOp::SetWidth(window_extent(p, "WIDTH")?),
        Key::SetStep => AlterOp::SetStep(window_extent(p, "STEP")?),
        Key::SetMaxStateSize => AlterOp::SetMaxStateSize(positive_size(p, "MAX STATE SIZE")?),
        Key::DropMaxStateSize => AlterOp::DropMaxStateSize,
        Key::SetResource => {
            let resource = p.ident(NameKind::Existing(ObjectKind::Resource))?;
            let version = p.resource_version()?;
            let file = if p.eat_keyword("FILE") {
                Some(file_name(p)?)
            } else {
                None
            };
            AlterOp::SetResource {
                resource,
                version,
                file,
            }
        }
        Key::SetInputs => AlterOp::SetInputs(tensor_inputs(p)?),
        Key::SetOutputSchema => AlterOp::SetOutputSchema(tensor_outputs(p)?),
        Key::SetMaxFuel => AlterOp::SetMaxFuel(positive_integer(p, "MAX FUEL")?),
        Key::SetMaxMemory => AlterOp::SetMaxMemory(positive_size(p, "MAX MEMORY")?),
        Key::SetOnRejectedState => AlterOp::SetOnRejectedState(rejected_state(p)?),
        Key::SetOnGlobalError => AlterOp::SetOnGlobalError(p.general_error_policy()?),
        Key::SetCorrelateWhere => AlterOp::SetCorrelateWhere(p.expr()?),
        Key::SetMatch => AlterOp::SetMatch(match_mode(p)?),
        Key::SetCorrelationTimeout => AlterOp::SetCorrelationTimeout(correlation_timeout(p)?),
        Key::SetSource => AlterOp::SetSource(relay(p)?),
        Key::SetEach => AlterOp::SetEach(positive_duration(p, "EACH")?),
    })
}
