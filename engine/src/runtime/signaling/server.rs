//! The server side of a signaling handshake (spec: "HTTP ENDPOINT And WEBSOCKETS ENDPOINT":
//! server-side WebSocket endpoints declare `WITH SIGNALING PROTOCOL` after TYPE WEBSOCKETS):
//! one accepted WebSocket's [`Handshake`] (the same pure state machine WEBSOCKETS CONNECTION
//! clients drive, `runtime/connection.rs`), its one TIMEOUT deadline, and the frames it asks to
//! send, queued until the connection loop writes them. No socket and no clock of its own: the
//! data listener's service (`runtime/http.rs`) feeds it the upgrade, each message and the time.
//!
//! What a connection does with each outcome:
//! - [`FrameVerdict::Deliver`]: the message is payload (data is open and no matcher consumed
//!   it); [`FrameVerdict::Drop`]: handshake traffic, or a frame before ACCEPT DATA — never
//!   delivered;
//! - [`FrameVerdict::Close`]: the handshake failed and the connection closes with the code it
//!   carries (chosen here, see [`CLOSE_HANDSHAKE_FAILED`], [`CLOSE_HANDSHAKE_TIMEOUT`] and
//!   [`CLOSE_HANDSHAKE_SEND_FAILED`]). The reason is logged by the caller; it names the
//!   protocol, its steps and programs, or the peer's FAIL value, and never `$state`.
//!
//! Once the handshake is done ([`ServerHandshake::settled`]) every message is payload and the
//! caller skips the state machine altogether.

use std::sync::Arc;

use nervix_connectors::websocket::Frame;

use super::{Action, Event, Handshake, SignalingPlan};

/// Close code of a handshake a peer's frame failed (a FAIL matcher, a CAPTURE that failed, a
/// SEND after it that failed, or over `MAX_HANDSHAKE_FRAMES` frames without completing):
/// 1008, Policy Violation — the peer sent what the endpoint's protocol refuses.
pub const CLOSE_HANDSHAKE_FAILED: u16 = 1008;
/// Close code of a handshake whose TIMEOUT passed: 1002, Protocol Error — the peer did not
/// complete the endpoint's protocol in time (distinct from [`CLOSE_HANDSHAKE_FAILED`], so a
/// client can tell a refusal from a stall).
pub const CLOSE_HANDSHAKE_TIMEOUT: u16 = 1002;
/// Close code when the endpoint's own opening SEND programs fail at the upgrade, before the
/// peer said anything: 1011, Internal Error.
pub const CLOSE_HANDSHAKE_SEND_FAILED: u16 = 1011;

/// A closing verdict: the code, the close frame's (fixed) reason, and the reason to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closing {
    pub code: u16,
    pub wire_reason: &'static str,
    pub log_reason: String,
}

/// What to do with one received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameVerdict {
    Deliver,
    Drop,
    Close(Closing),
}

/// One accepted WebSocket's handshake.
pub struct ServerHandshake {
    handshake: Handshake,
    /// Physical ns when the TIMEOUT passes; `None` once the handshake ended.
    deadline_ns: Option<u64>,
    outgoing: Vec<Frame>,
    settled: bool,
}

impl ServerHandshake {
    /// Starts the handshake at the upgrade (`now_ns`, physical): ON CONNECT's first SEND steps
    /// are queued; a failing SEND closes at once.
    pub fn start(plan: Arc<SignalingPlan>, now_ns: u64) -> (ServerHandshake, Option<Closing>) {
        let deadline_ns = Some(now_ns.saturating_add(plan.timeout_ns));
        let mut server = ServerHandshake {
            handshake: Handshake::new(plan),
            deadline_ns,
            outgoing: Vec::new(),
            settled: false,
        };
        let closing = server.feed(Event::Connected).1.map(|reason| Closing {
            code: CLOSE_HANDSHAKE_SEND_FAILED,
            wire_reason: "signaling handshake failed",
            log_reason: reason,
        });
        (server, closing)
    }

    /// Whether the handshake completed: every later message is payload.
    pub fn settled(&self) -> bool {
        self.settled
    }

    /// When the TIMEOUT passes (physical ns), while the handshake runs.
    pub fn deadline_ns(&self) -> Option<u64> {
        self.deadline_ns
    }

    /// The frames to send now, in order.
    pub fn take_outgoing(&mut self) -> Vec<Frame> {
        std::mem::take(&mut self.outgoing)
    }

    /// One received message at `now_ns`. A message arriving after the deadline finds the
    /// handshake timed out (the timer and the socket race in the connection loop).
    pub fn frame(&mut self, frame: &Frame, now_ns: u64) -> FrameVerdict {
        if self.settled {
            return FrameVerdict::Deliver;
        }
        if let Some(closing) = self.check_deadline(now_ns) {
            return FrameVerdict::Close(closing);
        }
        let (deliver, failed) = self.feed(Event::Frame(frame));
        match failed {
            Some(reason) => FrameVerdict::Close(Closing {
                code: CLOSE_HANDSHAKE_FAILED,
                wire_reason: "signaling handshake failed",
                log_reason: reason,
            }),
            None if deliver => FrameVerdict::Deliver,
            None => FrameVerdict::Drop,
        }
    }

    /// The TIMEOUT as of `now_ns`: a closing verdict once it passed while the handshake runs.
    pub fn check_deadline(&mut self, now_ns: u64) -> Option<Closing> {
        let deadline = self.deadline_ns?;
        if now_ns < deadline {
            return None;
        }
        let reason = self.feed(Event::DeadlinePassed).1?;
        Some(Closing {
            code: CLOSE_HANDSHAKE_TIMEOUT,
            wire_reason: "signaling handshake timed out",
            log_reason: reason,
        })
    }

    /// Feeds one event: whether its frame is payload, and the failure reason if it failed.
    fn feed(&mut self, event: Event<'_>) -> (bool, Option<String>) {
        let mut deliver = false;
        let mut failed = None;
        for action in self.handshake.on_event(event) {
            match action {
                Action::Send(frame) => self.outgoing.push(frame),
                // The handshake tracks whether data is open; a frame is delivered only when
                // it says `Deliver`.
                Action::OpenData => {}
                Action::Deliver => deliver = true,
                Action::Fail(reason) => {
                    self.deadline_ns = None;
                    failed = Some(reason);
                }
                Action::Done => {
                    self.deadline_ns = None;
                    self.settled = true;
                }
            }
        }
        (deliver && failed.is_none(), failed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nervix_nspl::ast::ingestor::{
        CreateSignalingProtocol, SignalingFormat, SignalingStep, WaitStep,
    };
    use nervix_nspl::ast::Ident;

    use super::*;

    fn plan(steps: Vec<SignalingStep>, fail: Option<&str>) -> Arc<SignalingPlan> {
        let create = CreateSignalingProtocol {
            if_not_exists: false,
            name: Ident::new("p"),
            format: SignalingFormat::Json,
            fail: fail.map(str::to_string),
            accept_data_on_connect: false,
            steps,
            timeout: nervix_nspl::ast::Duration {
                nanos: Duration::from_secs(1).as_nanos() as u64,
            },
        };
        Arc::new(SignalingPlan::compile(&create).expect("compiles"))
    }

    fn hello_then_ack() -> Arc<SignalingPlan> {
        plan(
            vec![
                SignalingStep::Send(vec!["{hello: 1}".to_string()]),
                SignalingStep::Wait(WaitStep {
                    matchers: vec![".ack".to_string()],
                    fail: Some("select(.ack == false) | .why".to_string()),
                    capture: None,
                    accept_data: false,
                }),
            ],
            None,
        )
    }

    fn text(s: &str) -> Frame {
        Frame::Text(s.to_string())
    }

    #[test]
    fn sends_first_then_waits_and_drops_handshake_frames() {
        let (mut server, closing) = ServerHandshake::start(hello_then_ack(), 0);
        assert!(closing.is_none());
        assert_eq!(server.take_outgoing(), vec![text(r#"{"hello":1}"#)]);
        assert_eq!(server.frame(&text(r#"{"x":1}"#), 1), FrameVerdict::Drop);
        assert_eq!(
            server.frame(&text(r#"{"ack":true}"#), 2),
            FrameVerdict::Drop
        );
        assert!(server.settled());
        assert_eq!(server.deadline_ns(), None);
        assert_eq!(server.frame(&text(r#"{"x":2}"#), 3), FrameVerdict::Deliver);
    }

    #[test]
    fn a_fail_closes_with_1008_and_the_peer_value() {
        let (mut server, _) = ServerHandshake::start(hello_then_ack(), 0);
        match server.frame(&text(r#"{"ack":false,"why":"nope"}"#), 1) {
            FrameVerdict::Close(closing) => {
                assert_eq!(closing.code, 1008);
                assert_eq!(closing.log_reason, "nope");
            }
            other => panic!("expected a close, got {other:?}"),
        }
    }

    #[test]
    fn the_timeout_closes_with_1002_naming_the_matchers() {
        let (mut server, _) = ServerHandshake::start(hello_then_ack(), 0);
        assert_eq!(server.check_deadline(999_999_999), None);
        let closing = server.check_deadline(1_000_000_000).expect("timed out");
        assert_eq!(closing.code, 1002);
        assert!(
            closing.log_reason.contains("'.ack'"),
            "{}",
            closing.log_reason
        );
        // A message racing the timer finds the handshake already ended.
        let (mut late, _) = ServerHandshake::start(hello_then_ack(), 0);
        assert!(matches!(
            late.frame(&text(r#"{"ack":true}"#), 2_000_000_000),
            FrameVerdict::Close(Closing { code: 1002, .. })
        ));
    }

    #[test]
    fn a_failing_opening_send_closes_with_1011() {
        let create = plan(
            vec![SignalingStep::Send(vec!["error(\"x\")".to_string()])],
            None,
        );
        let (_, closing) = ServerHandshake::start(create, 0);
        assert_eq!(closing.map(|c| c.code), Some(1011));
    }
}
