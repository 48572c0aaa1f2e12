//! Kind-specific processor clauses: deduplication keys, ordering, window extents, model and
//! module resources, tensor maps, correlation policies and the WASM tail. CREATE and ALTER
//! share these, so a clause reads the same in both.

use crate::ast::processor::{
    CorrelationTimeout, MatchMode, ProcessorDef, RejectedStatePolicy, RelayFeed, ResourceFile,
    Tensor, TensorInput, TimeoutAction, WindowExtent,
};
use crate::ast::{Duration, GeneralErrorPolicy, ObjectKind, TypeName};
use crate::error::{Expected, NameKind, ParseError};
use crate::lexer::{Punct, TokenKind};
use crate::parse::{PResult, Parser};

/// The clauses of a relay-fed kind after its FROM, COLLECT and FILTER.
pub(super) fn kind_clauses(
    p: &mut Parser,
    kind: ObjectKind,
    feed: RelayFeed,
) -> PResult<ProcessorDef> {
    Ok(match kind {
        ObjectKind::Deduplicator => {
            p.expect_keywords(&["DEDUPLICATE", "ON"])?;
            let on = p.expr_list()?;
            let max_time = max_time(p)?;
            ProcessorDef::Deduplicator { feed, on, max_time }
        }
        ObjectKind::Reorderer => {
            p.expect_keyword("BY")?;
            let by = p.expr_list()?;
            let max_time = max_time(p)?;
            ProcessorDef::Reorderer { feed, by, max_time }
        }
        ObjectKind::WindowProcessor => {
            p.expect_keyword("WIDTH")?;
            let width = window_extent(p, "WIDTH")?;
            p.expect_keyword("STEP")?;
            let step_span = p.span();
            let step = window_extent(p, "STEP")?;
            if matches!(width, WindowExtent::Duration(_))
                != matches!(step, WindowExtent::Duration(_))
            {
                return Err(ParseError::new(
                    step_span.to(p.prev_span()),
                    format!(
                        "STEP must be {} like WIDTH: a window counts both in DURATION or both in ROWS",
                        extent_unit(width)
                    ),
                ));
            }
            let max_state_size = if p.eat_keyword("MAX") {
                p.expect_keywords(&["STATE", "SIZE"])?;
                Some(positive_size(p, "MAX STATE SIZE")?)
            } else {
                None
            };
            ProcessorDef::Window {
                feed,
                width,
                step,
                max_state_size,
            }
        }
        ObjectKind::Inferencer => {
            let model = resource_file(p)?;
            p.expect_keyword("INPUTS")?;
            let inputs = tensor_inputs(p)?;
            p.expect_keywords(&["OUTPUT", "SCHEMA"])?;
            let outputs = tensor_outputs(p)?;
            ProcessorDef::Inferencer {
                feed,
                model,
                inputs,
                outputs,
            }
        }
        ObjectKind::WasmProcessor => {
            let module = resource_file(p)?;
            if p.is_keyword_at(0, "MAX") && p.is_keyword_at(1, "MEMORY") {
                return Err(ParseError::new(p.span(), WASM_LIMITS));
            }
            p.expect_keywords(&["MAX", "FUEL"])?;
            let max_fuel = positive_integer(p, "MAX FUEL")?;
            if !p.at_keyword("MAX") {
                let mut err = p.unexpected();
                err.message = format!("{WASM_LIMITS}; {}", err.message);
                return Err(err);
            }
            p.expect_keywords(&["MAX", "MEMORY"])?;
            let max_memory = positive_size(p, "MAX MEMORY")?;
            ProcessorDef::Wasm {
                feed,
                module,
                max_fuel,
                max_memory,
                on_rejected_state: None,
                on_global_error: None,
            }
        }
        ObjectKind::Reingestor => ProcessorDef::Reingestor { feed },
        _ => ProcessorDef::Junction { feed },
    })
}

const WASM_LIMITS: &str = "MAX FUEL and MAX MEMORY are both required, in that order";

fn extent_unit(e: WindowExtent) -> &'static str {
    match e {
        WindowExtent::Duration(_) => "DURATION",
        WindowExtent::Rows(_) => "ROWS",
    }
}

/// `MAX TIME <duration>` (positive).
fn max_time(p: &mut Parser) -> PResult<Duration> {
    p.expect_keywords(&["MAX", "TIME"])?;
    positive_duration(p, "MAX TIME")
}

/// A duration above zero; `what` names the clause in the refusal.
pub(super) fn positive_duration(p: &mut Parser, what: &str) -> PResult<Duration> {
    let span = p.span();
    let d = p.duration()?;
    if d.nanos == 0 {
        return Err(ParseError::new(span, format!("{what} must be positive")));
    }
    Ok(d)
}

pub(super) fn positive_size(p: &mut Parser, what: &str) -> PResult<crate::ast::ByteSize> {
    let span = p.span();
    let s = p.byte_size()?;
    if s.bytes == 0 {
        return Err(ParseError::new(span, format!("{what} must be positive")));
    }
    Ok(s)
}

pub(super) fn positive_integer(p: &mut Parser, what: &str) -> PResult<u64> {
    let span = p.span();
    let n = p.integer()?;
    if n == 0 {
        return Err(ParseError::new(span, format!("{what} must be at least 1")));
    }
    Ok(n)
}

/// `<duration> DURATION` or `<n> ROWS` after WIDTH or STEP.
pub(super) fn window_extent(p: &mut Parser, what: &str) -> PResult<WindowExtent> {
    let span = p.span();
    if p.peek().kind == TokenKind::Number {
        let rows = p.integer()?;
        p.expect_keyword("ROWS")?;
        if rows == 0 {
            return Err(ParseError::new(span, format!("{what} must be positive")));
        }
        return Ok(WindowExtent::Rows(rows));
    }
    // Offer both forms when neither comes next.
    p.note(Expected::Thing("a duration"));
    p.note(Expected::Thing("a row count"));
    let d = positive_duration(p, what)?;
    p.expect_keyword("DURATION")?;
    Ok(WindowExtent::Duration(d))
}

/// `USING RESOURCE <r> VERSION <n> | LATEST FILE '<file>'`.
fn resource_file(p: &mut Parser) -> PResult<ResourceFile> {
    p.expect_keywords(&["USING", "RESOURCE"])?;
    let resource = p.ident(NameKind::Existing(ObjectKind::Resource))?;
    let version = p.resource_version()?;
    p.expect_keyword("FILE")?;
    let file = file_name(p)?;
    Ok(ResourceFile {
        resource,
        version,
        file,
    })
}

/// The file inside a resource version: a non-empty string.
pub(super) fn file_name(p: &mut Parser) -> PResult<String> {
    let span = p.span();
    let file = p.string()?;
    if file.is_empty() {
        return Err(ParseError::new(
            span,
            "FILE names a file and cannot be empty",
        ));
    }
    Ok(file)
}

/// `{ <tensor> = <expr>, … }`.
pub(super) fn tensor_inputs(p: &mut Parser) -> PResult<Vec<TensorInput>> {
    p.expect_punct(Punct::LBrace)?;
    let mut inputs: Vec<TensorInput> = Vec::new();
    loop {
        let (tensor, span) = tensor(p)?;
        unique_tensor(p, inputs.iter().map(|i| &i.tensor), &tensor, span, "INPUTS")?;
        p.expect_punct(Punct::Eq)?;
        inputs.push(TensorInput {
            tensor,
            value: p.expr()?,
        });
        if !p.eat_punct(Punct::Comma) {
            break;
        }
    }
    p.expect_punct(Punct::RBrace)?;
    Ok(inputs)
}

/// `{ <tensor>, … }`.
pub(super) fn tensor_outputs(p: &mut Parser) -> PResult<Vec<Tensor>> {
    p.expect_punct(Punct::LBrace)?;
    let mut outputs: Vec<Tensor> = Vec::new();
    loop {
        let (tensor, span) = tensor(p)?;
        unique_tensor(p, outputs.iter(), &tensor, span, "OUTPUT SCHEMA")?;
        outputs.push(tensor);
        if !p.eat_punct(Punct::Comma) {
            break;
        }
    }
    p.expect_punct(Punct::RBrace)?;
    Ok(outputs)
}

/// `'<name>' DENSE TENSOR<T>[d, …]`, with the span of its name.
fn tensor(p: &mut Parser) -> PResult<(Tensor, crate::span::Span)> {
    let name_span = p.span();
    let name = p.string()?;
    if name.is_empty() {
        return Err(ParseError::new(name_span, "a tensor name cannot be empty"));
    }
    p.expect_keywords(&["DENSE", "TENSOR"])?;
    p.expect_punct(Punct::Lt)?;
    let type_span = p.span();
    let element = p.type_name()?;
    if matches!(
        element,
        TypeName::Array(..) | TypeName::Vec(_) | TypeName::List(_)
    ) {
        return Err(ParseError::new(
            type_span.to(p.prev_span()),
            "a tensor's element type is a scalar such as F32 or I64; its shape goes in [dims]",
        ));
    }
    p.expect_punct(Punct::Gt)?;
    p.expect_punct(Punct::LBracket)?;
    let dims = p.comma_list(|p| positive_integer(p, "a tensor dimension"))?;
    p.expect_punct(Punct::RBracket)?;
    let tensor = Tensor {
        name,
        element,
        dims,
    };
    Ok((tensor, name_span))
}

/// Refuses a tensor name already used in the same block.
fn unique_tensor<'t>(
    p: &Parser,
    mut earlier: impl Iterator<Item = &'t Tensor>,
    tensor: &Tensor,
    span: crate::span::Span,
    block: &str,
) -> PResult<()> {
    if earlier.any(|t| t.name == tensor.name) {
        return Err(p.error_at(
            span,
            format!("tensor '{}' appears twice in {block}", tensor.name),
        ));
    }
    Ok(())
}

/// `EARLIEST | LATEST | ALL` after MATCH.
pub(super) fn match_mode(p: &mut Parser) -> PResult<MatchMode> {
    Ok(match p.expect_one_of(&["EARLIEST", "LATEST", "ALL"])? {
        "EARLIEST" => MatchMode::Earliest,
        "LATEST" => MatchMode::Latest,
        _ => MatchMode::All,
    })
}

/// `<left action>, <right action>` after ON CORRELATION TIMEOUT.
pub(super) fn correlation_timeout(p: &mut Parser) -> PResult<CorrelationTimeout> {
    let left = timeout_action(p)?;
    if !p.at_punct(Punct::Comma) {
        let mut err = p.unexpected();
        err.message = format!(
            "ON CORRELATION TIMEOUT takes the left side's policy, a comma, then the right side's; {}",
            err.message
        );
        return Err(err);
    }
    p.expect_punct(Punct::Comma)?;
    let right = timeout_action(p)?;
    Ok(CorrelationTimeout { left, right })
}

fn timeout_action(p: &mut Parser) -> PResult<TimeoutAction> {
    Ok(match p.expect_one_of(&["DROP", "LOG"])? {
        "DROP" => TimeoutAction::Drop,
        _ => TimeoutAction::Log,
    })
}

/// `PRESERVE | RESET` after ON REJECTED STATE.
pub(super) fn rejected_state(p: &mut Parser) -> PResult<RejectedStatePolicy> {
    Ok(match p.expect_one_of(&["PRESERVE", "RESET"])? {
        "PRESERVE" => RejectedStatePolicy::Preserve,
        _ => RejectedStatePolicy::Reset,
    })
}

/// `[ON REJECTED STATE …] [ON GLOBAL ERROR …]` after a WASM processor's routes.
pub(super) fn wasm_tail(
    p: &mut Parser,
) -> PResult<(Option<RejectedStatePolicy>, Option<GeneralErrorPolicy>)> {
    let (mut rejected, mut global) = (None, None);
    while p.eat_keyword("ON") {
        if rejected.is_none() && global.is_none() && p.eat_keyword("REJECTED") {
            p.expect_keyword("STATE")?;
            rejected = Some(rejected_state(p)?);
        } else if global.is_none() && p.eat_keyword("GLOBAL") {
            p.expect_keyword("ERROR")?;
            global = Some(p.general_error_policy()?);
        } else if p.is_keyword_at(0, "REJECTED") && global.is_some() {
            return Err(ParseError::new(
                p.span(),
                "ON REJECTED STATE comes before ON GLOBAL ERROR",
            ));
        } else {
            return Err(p.unexpected());
        }
    }
    Ok((rejected, global))
}
