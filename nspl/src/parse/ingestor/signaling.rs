//! `CREATE SIGNALING PROTOCOL`: a wire format and a WebSocket handshake written as JAQ
//! programs (`spec/ingestors.md`, WEBSOCKETS CONNECTION).
//!
//! The spec shows no position for the protocol-wide `FAIL JAQ`. It is read right after the
//! format, before `ON CONNECT`: after the steps it could not be told apart from the last WAIT
//! step's own `FAIL JAQ`.

use crate::ast::ingestor::{
    CreateSignalingProtocol, ProtobufSignaling, SignalingFormat, SignalingStep, WaitStep,
};
use crate::ast::{CreatePrefix, ObjectKind};
use crate::error::NameKind;
use crate::parse::{PResult, Parser};
use crate::span::Span;

/// After `CREATE [IF NOT EXISTS] SIGNALING PROTOCOL`.
pub fn create_signaling_protocol(
    p: &mut Parser,
    prefix: CreatePrefix,
) -> PResult<CreateSignalingProtocol> {
    let name = p.ident(NameKind::New)?;
    p.expect_keyword("FORMAT")?;
    let format = format(p)?;
    let fail = fail_jaq(p)?;
    p.expect_keywords(&["ON", "CONNECT"])?;
    // Where the relay opens: at most one ACCEPT DATA in the whole protocol.
    let mut accept_data_at: Option<Span> = None;
    let accept_data_on_connect = accept_data(p, &mut accept_data_at)?;
    let mut steps = Vec::new();
    loop {
        if p.eat_keyword("SEND") {
            p.expect_keyword("JAQ")?;
            let programs = strings(p)?;
            if p.is_keyword_at(0, "ACCEPT") || p.is_keyword_at(0, "CAPTURE") {
                return Err(p.error_at(
                    p.span(),
                    "CAPTURE and ACCEPT DATA follow a WAIT step's matchers, not a SEND step",
                ));
            }
            steps.push(SignalingStep::Send(programs));
        } else if p.eat_keyword("WAIT") {
            p.expect_keyword("JAQ")?;
            steps.push(SignalingStep::Wait(wait_step(p, &mut accept_data_at)?));
        } else if let Some(message) = misplaced_clause(p, steps.last()) {
            return Err(p.error_at(p.span(), message));
        } else {
            break;
        }
    }
    if !p.at_keyword("TIMEOUT") {
        let mut err = p.unexpected();
        err.message = format!(
            "a signaling protocol ends with TIMEOUT <duration>; {}",
            err.message
        );
        return Err(err);
    }
    let timeout_span = p.span();
    if steps.is_empty() && !accept_data_on_connect {
        return Err(p.error_at(
            timeout_span,
            "a signaling protocol needs at least one SEND JAQ or WAIT JAQ step, or ON CONNECT ACCEPT DATA",
        ));
    }
    p.advance();
    let timeout = super::body::positive_duration(p, "TIMEOUT")?;
    Ok(CreateSignalingProtocol {
        if_not_exists: prefix.if_not_exists,
        name,
        format,
        fail,
        accept_data_on_connect,
        steps,
        timeout,
    })
}

/// Why a FAIL JAQ, CAPTURE or ACCEPT DATA cannot stand where the next step would start,
/// given the step before it; `None` when the next token is none of those.
fn misplaced_clause(p: &Parser, previous: Option<&SignalingStep>) -> Option<&'static str> {
    let wait = match previous {
        Some(SignalingStep::Wait(wait)) => Some(wait),
        _ => None,
    };
    if p.is_keyword_at(0, "FAIL") {
        return Some(match wait {
            Some(w) if w.fail.is_some() => "a WAIT step takes one FAIL JAQ",
            Some(_) => "a WAIT step's FAIL JAQ comes right after its matchers, before CAPTURE and ACCEPT DATA",
            None => "FAIL JAQ follows a WAIT step's matchers, or the FORMAT clause for the whole protocol",
        });
    }
    if p.is_keyword_at(0, "CAPTURE") {
        return Some(match wait {
            Some(w) if w.capture.is_some() => "a WAIT step takes one CAPTURE",
            Some(_) => "a WAIT step's CAPTURE comes before its ACCEPT DATA",
            None => "CAPTURE follows a WAIT step's matcher",
        });
    }
    None
}

/// The format after `FORMAT`.
fn format(p: &mut Parser) -> PResult<SignalingFormat> {
    const TEXTUAL: [(&str, SignalingFormat); 6] = [
        ("JSON", SignalingFormat::Json),
        ("YAML", SignalingFormat::Yaml),
        ("TOML", SignalingFormat::Toml),
        ("XML", SignalingFormat::Xml),
        ("CBOR", SignalingFormat::Cbor),
        ("RAW", SignalingFormat::Raw),
    ];
    for (kw, format) in TEXTUAL {
        if p.eat_keyword(kw) {
            return Ok(format);
        }
    }
    if !p.eat_keyword("PROTOBUF") {
        return Err(p.unexpected());
    }
    p.expect_keywords(&["USING", "RESOURCE"])?;
    let resource = p.ident(NameKind::Existing(ObjectKind::Resource))?;
    let version = p.resource_version()?;
    p.expect_keyword("CONFIG")?;
    let config = p.config_map()?;
    p.expect_keywords(&["SEND", "MESSAGE"])?;
    let send_message = p.string()?;
    p.expect_keywords(&["WAIT", "MESSAGE"])?;
    let wait_message = p.string()?;
    Ok(SignalingFormat::Protobuf(ProtobufSignaling {
        resource,
        version,
        config,
        send_message,
        wait_message,
    }))
}

/// `[FAIL JAQ '<matcher>']`.
fn fail_jaq(p: &mut Parser) -> PResult<Option<String>> {
    if !p.eat_keyword("FAIL") {
        return Ok(None);
    }
    p.expect_keyword("JAQ")?;
    Ok(Some(p.string()?))
}

/// `'<program>', …`: JAQ programs or matchers.
fn strings(p: &mut Parser) -> PResult<Vec<String>> {
    p.comma_list(|p| p.string())
}

/// `[ACCEPT DATA]`, refusing a second one in the protocol.
fn accept_data(p: &mut Parser, seen: &mut Option<Span>) -> PResult<bool> {
    let span = p.span();
    if !p.eat_keyword("ACCEPT") {
        return Ok(false);
    }
    p.expect_keyword("DATA")?;
    if seen.is_some() {
        return Err(p.error_at(
            span,
            "a signaling protocol opens the relay once: ACCEPT DATA already appears earlier in this protocol",
        ));
    }
    *seen = Some(span);
    Ok(true)
}

/// A WAIT step after `WAIT JAQ`.
fn wait_step(p: &mut Parser, accept_data_at: &mut Option<Span>) -> PResult<WaitStep> {
    let matchers = strings(p)?;
    let fail = fail_jaq(p)?;
    let capture_span = p.span();
    let capture = if p.eat_keyword("CAPTURE") {
        if matchers.len() > 1 {
            return Err(p.error_at(
                capture_span,
                "CAPTURE attaches to a single-matcher WAIT only, since it describes the one frame that matched",
            ));
        }
        Some(p.string()?)
    } else {
        None
    };
    let accept_data = accept_data(p, accept_data_at)?;
    Ok(WaitStep {
        matchers,
        fail,
        capture,
        accept_data,
    })
}
