//! Signaling protocols (spec: "WEBSOCKETS CONNECTION", "Data Arriving During The Handshake",
//! "Sequencing And Captured State"): a `CREATE SIGNALING PROTOCOL` compiled once into a
//! [`SignalingPlan`] of JAQ programs, and the handshake it describes as a pure state machine
//! ([`Handshake`]) the connection task drives with events. WEBSOCKETS CONNECTION clients drive
//! it from `runtime/connection.rs`; server-side WEBSOCKETS endpoints through [`server`].
//!
//! This module owns the wire format of signaling frames ([`SignalingPlan::encode`],
//! [`SignalingPlan::decode`]): JSON, YAML, TOML, XML and RAW travel as text frames, CBOR as
//! binary frames, and a textual format also reads binary frames. JSON is read with serde_json
//! (its recursion limit bounds the depth of a hostile frame) and written by jaq's own JSON
//! writer; YAML, TOML, XML and CBOR go through the JAQ codecs' document parsers and writers
//! (`codec::jaq::format`, with their depth bound and XML mapping). RAW reads a frame as one
//! string and sends a program's string verbatim. PROTOBUF is refused at plan time with "not
//! supported yet". Every program is compiled at plan time, so an invalid program never
//! reaches a connection; the error names the protocol, the clause and the step.

mod handshake;
mod jaq;
pub mod server;

use jaq_json::{Num, Val};
use nervix_connectors::websocket::Frame;
use nervix_nspl::ast::ingestor::{CreateSignalingProtocol, SignalingFormat, SignalingStep};

pub use handshake::{Action, Event, Handshake, MAX_HANDSHAKE_FRAMES};
pub use jaq::STATE_VAR;

/// The formats a plan can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameFormat {
    Json,
    Raw,
    /// YAML, TOML, XML or CBOR, through the JAQ codecs' document formats.
    Document(nervix_nspl::ast::catalog::JaqFormat),
}

/// One compiled program and its text (the text names it in errors; it is the protocol's
/// definition, never captured state).
pub struct Program {
    pub text: String,
    filter: jaq::Filter,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Program").field(&self.text).finish()
    }
}

/// A compiled step.
#[derive(Debug)]
pub enum StepPlan {
    /// Each program produces one frame, sent in order.
    Send(Vec<Program>),
    Wait {
        matchers: Vec<Program>,
        fail: Option<Program>,
        capture: Option<Program>,
        accept_data: bool,
    },
}

/// A compiled `CREATE SIGNALING PROTOCOL`.
#[derive(Debug)]
pub struct SignalingPlan {
    pub name: String,
    pub format: FrameFormat,
    /// The protocol-wide FAIL JAQ, checked after a step's own.
    pub fail: Option<Program>,
    pub accept_data_on_connect: bool,
    pub steps: Vec<StepPlan>,
    /// The one budget of the whole handshake.
    pub timeout_ns: u64,
}

impl SignalingPlan {
    /// Compiles `create`; the error names the protocol, the clause, the step and the cause.
    pub fn compile(create: &CreateSignalingProtocol) -> Result<SignalingPlan, String> {
        let name = create.name.name.clone();
        use nervix_nspl::ast::catalog::JaqFormat;
        let format = match &create.format {
            SignalingFormat::Json => FrameFormat::Json,
            SignalingFormat::Raw => FrameFormat::Raw,
            SignalingFormat::Yaml => FrameFormat::Document(JaqFormat::Yaml),
            SignalingFormat::Toml => FrameFormat::Document(JaqFormat::Toml),
            SignalingFormat::Xml => FrameFormat::Document(JaqFormat::Xml),
            SignalingFormat::Cbor => FrameFormat::Document(JaqFormat::Cbor),
            SignalingFormat::Protobuf(_) => {
                return Err(format!(
                    "signaling protocol '{name}': FORMAT PROTOBUF is not supported yet \
                     (JSON, YAML, TOML, XML, CBOR and RAW are)"
                ));
            }
        };
        let program = |text: &str, clause: &str, step: Option<usize>| {
            jaq::compile(text)
                .map(|filter| Program {
                    text: text.to_string(),
                    filter,
                })
                .map_err(|cause| match step {
                    Some(step) => format!(
                        "signaling protocol '{name}': step {} {clause} '{text}': {cause}",
                        step + 1
                    ),
                    None => format!("signaling protocol '{name}': {clause} '{text}': {cause}"),
                })
        };
        let fail = create
            .fail
            .as_deref()
            .map(|text| program(text, "FAIL JAQ", None))
            .transpose()?;
        let mut steps = Vec::with_capacity(create.steps.len());
        for (index, step) in create.steps.iter().enumerate() {
            steps.push(match step {
                SignalingStep::Send(programs) => StepPlan::Send(
                    programs
                        .iter()
                        .map(|text| program(text, "SEND JAQ", Some(index)))
                        .collect::<Result<_, _>>()?,
                ),
                SignalingStep::Wait(wait) => StepPlan::Wait {
                    matchers: wait
                        .matchers
                        .iter()
                        .map(|text| program(text, "WAIT JAQ", Some(index)))
                        .collect::<Result<_, _>>()?,
                    fail: wait
                        .fail
                        .as_deref()
                        .map(|text| program(text, "FAIL JAQ", Some(index)))
                        .transpose()?,
                    capture: wait
                        .capture
                        .as_deref()
                        .map(|text| program(text, "CAPTURE", Some(index)))
                        .transpose()?,
                    accept_data: wait.accept_data,
                },
            });
        }
        Ok(SignalingPlan {
            name,
            format,
            fail,
            accept_data_on_connect: create.accept_data_on_connect,
            steps,
            timeout_ns: create.timeout.nanos,
        })
    }

    /// One value as a frame of this format: JSON as its text, RAW a string verbatim.
    pub fn encode(&self, value: &Val) -> Result<Frame, String> {
        match self.format {
            FrameFormat::Json => Ok(Frame::Text(value.to_string())),
            FrameFormat::Raw => match value {
                Val::TStr(text) => Ok(Frame::Text(String::from_utf8_lossy(text).into_owned())),
                other => Err(format!(
                    "a RAW frame must be a string, the program produced {}",
                    type_name(other)
                )),
            },
            FrameFormat::Document(format) => {
                let mut out = Vec::new();
                crate::codec::jaq::format::write(format, value, &mut out)?;
                Ok(match format {
                    nervix_nspl::ast::catalog::JaqFormat::Cbor => Frame::Binary(out),
                    _ => Frame::Text(String::from_utf8_lossy(&out).into_owned()),
                })
            }
        }
    }

    /// One frame as one value (both formats read text and binary frames alike).
    pub fn decode(&self, frame: &Frame) -> Result<Val, String> {
        let bytes = frame.bytes();
        match self.format {
            FrameFormat::Json => serde_json::from_slice::<serde_json::Value>(bytes)
                .map(from_json)
                .map_err(|e| format!("the frame is not JSON: {e}")),
            FrameFormat::Raw => Ok(Val::from(String::from_utf8_lossy(bytes).into_owned())),
            FrameFormat::Document(nervix_nspl::ast::catalog::JaqFormat::Cbor)
                if matches!(frame, Frame::Text(_)) =>
            {
                Err("a CBOR frame must be binary".to_string())
            }
            FrameFormat::Document(format) => crate::codec::jaq::format::parse(format, bytes)
                .map_err(|cause| format!("the frame is not {}: {cause}", format.keyword())),
        }
    }
}

/// A value's jq type name (what errors show instead of the value, which may be secret).
pub(crate) fn type_name(v: &Val) -> &'static str {
    match v {
        Val::Null => "null",
        Val::Bool(_) => "a boolean",
        Val::Num(_) => "a number",
        Val::TStr(_) | Val::BStr(_) => "a string",
        Val::Arr(_) => "an array",
        Val::Obj(_) => "an object",
    }
}

fn from_json(v: serde_json::Value) -> Val {
    use serde_json::Value;
    match v {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Val::Num(Num::from_integral(i)),
            (None, Some(u)) => Val::Num(Num::from_integral(u)),
            _ => Val::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Val::from(s),
        Value::Array(items) => items.into_iter().map(from_json).collect(),
        Value::Object(members) => Val::obj(
            members
                .into_iter()
                .map(|(k, v)| (Val::from(k), from_json(v)))
                .collect(),
        ),
    }
}
