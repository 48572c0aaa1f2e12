//! The handshake as a pure state machine: [`Event`]s in (connected, a frame received, the
//! deadline passed), [`Action`]s out (send a frame, open data, deliver this frame, fail with a
//! reason, done). No socket and no clock: the connection task owns both, arms one timer for
//! [`SignalingPlan::timeout_ns`] at `Connected`, and feeds [`Event::DeadlinePassed`] when it
//! fires, so the whole handshake shares one budget.
//!
//! Why it follows the spec:
//! - Steps run strictly in order: a SEND step runs to completion inside the event that reached
//!   it, and a WAIT step holds the cursor until every matcher it lists is consumed.
//! - On a frame, FAIL matchers run first (the step's, then the protocol-wide one); the first
//!   value neither null nor false aborts with that value as the reason (a string verbatim,
//!   anything else as JSON). Then the step's outstanding matchers are tried in written order
//!   and the first satisfied one (an output neither null nor false) is consumed. A matcher or
//!   FAIL guard that errors, and a frame that does not decode, are non-matches.
//! - CAPTURE runs on the frame its matcher accepted and must produce one object, merged into
//!   `$state` (later wins); anything else fails the handshake.
//! - Data opens at `Connected` under ON CONNECT ACCEPT DATA, when a WAIT step with ACCEPT DATA
//!   completes, or else when the last step completes. A frame that no matcher consumes is
//!   [`Action::Deliver`]ed when data is open and dropped before; a frame a matcher consumes is
//!   handshake traffic, never payload.
//! - `$state` never appears in an error: errors name steps, programs and jq type names.
//!
//! Bound: at most [`MAX_HANDSHAKE_FRAMES`] frames are examined while data is still closed; a
//! peer that chatters past that without completing fails the handshake before its deadline.

use std::sync::Arc;

use jaq_json::Val;
use nervix_connectors::websocket::Frame;

use super::{jaq, type_name, Program, SignalingPlan, StepPlan};

/// Frames a handshake examines before data opens; one more fails it.
pub const MAX_HANDSHAKE_FRAMES: u32 = 1_024;

/// What happened to the connection.
#[derive(Debug)]
pub enum Event<'a> {
    /// The upgrade completed: the handshake starts.
    Connected,
    Frame(&'a Frame),
    /// The handshake's one TIMEOUT budget ran out.
    DeadlinePassed,
}

/// What the connection must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Send(Frame),
    /// From now on, frames no matcher consumes are payload.
    OpenData,
    /// The frame of this event is payload.
    Deliver,
    /// The handshake failed; close the connection. Whether a retry can help: the connection
    /// task reconnects with backoff (a peer may recover), reporting this reason.
    Fail(String),
    /// Every step completed; all later frames are payload.
    Done,
}

/// One connection's handshake.
pub struct Handshake {
    plan: Arc<SignalingPlan>,
    /// The index of the current step (`steps.len()`: done).
    step: usize,
    /// The current WAIT step's matchers not yet consumed, by index.
    outstanding: Vec<usize>,
    state: Val,
    data_open: bool,
    frames: u32,
    finished: bool,
}

impl Handshake {
    pub fn new(plan: Arc<SignalingPlan>) -> Handshake {
        Handshake {
            plan,
            step: 0,
            outstanding: Vec::new(),
            state: Val::obj(jaq_json::Map::default()),
            data_open: false,
            frames: 0,
            finished: false,
        }
    }

    /// Whether the handshake ended (done or failed): events are no longer consumed.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Whether frames are payload now.
    pub fn data_open(&self) -> bool {
        self.data_open
    }

    /// Feeds one event.
    pub fn on_event(&mut self, event: Event<'_>) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.finished {
            if matches!(event, Event::Frame(_)) && self.data_open {
                actions.push(Action::Deliver);
            }
            return actions;
        }
        match event {
            Event::Connected => {
                if self.plan.accept_data_on_connect {
                    self.open(&mut actions);
                }
                self.advance(&mut actions);
            }
            Event::Frame(frame) => self.frame(frame, &mut actions),
            Event::DeadlinePassed => {
                let waiting: Vec<String> = self
                    .waiting_on()
                    .iter()
                    .map(|text| format!("'{text}'"))
                    .collect();
                let seconds = self.plan.timeout_ns as f64 / 1e9;
                self.fail(
                    format!(
                        "signaling protocol '{}': the handshake timed out after {seconds}s at \
                         step {} waiting for WAIT JAQ {}",
                        self.plan.name,
                        self.step + 1,
                        waiting.join(", ")
                    ),
                    &mut actions,
                );
            }
        }
        actions
    }

    /// The texts of the current step's outstanding matchers.
    pub fn waiting_on(&self) -> Vec<&str> {
        match self.plan.steps.get(self.step) {
            Some(StepPlan::Wait { matchers, .. }) => self
                .outstanding
                .iter()
                .map(|&i| matchers[i].text.as_str())
                .collect(),
            _ => Vec::new(),
        }
    }

    fn open(&mut self, actions: &mut Vec<Action>) {
        if !self.data_open {
            self.data_open = true;
            actions.push(Action::OpenData);
        }
    }

    fn fail(&mut self, reason: String, actions: &mut Vec<Action>) {
        self.finished = true;
        actions.push(Action::Fail(reason));
    }

    /// Runs SEND steps until a WAIT step or the end.
    fn advance(&mut self, actions: &mut Vec<Action>) {
        let plan = self.plan.clone();
        while let Some(step) = plan.steps.get(self.step) {
            match step {
                StepPlan::Send(programs) => {
                    for (index, program) in programs.iter().enumerate() {
                        match self.send_frame(program) {
                            Ok(frame) => actions.push(Action::Send(frame)),
                            Err(cause) => {
                                let reason = format!(
                                    "signaling protocol '{}': step {} SEND JAQ program {} \
                                     '{}': {cause}",
                                    plan.name,
                                    self.step + 1,
                                    index + 1,
                                    program.text
                                );
                                return self.fail(reason, actions);
                            }
                        }
                    }
                    self.step += 1;
                }
                StepPlan::Wait { matchers, .. } => {
                    self.outstanding = (0..matchers.len()).collect();
                    return;
                }
            }
        }
        self.open(actions);
        self.finished = true;
        actions.push(Action::Done);
    }

    fn send_frame(&self, program: &Program) -> Result<Frame, String> {
        let mut outputs = jaq::run(&program.filter, Val::Null, &self.state, 1)?;
        let value = outputs
            .pop()
            .ok_or_else(|| "it produced no value (one is required)".to_string())?;
        self.plan.encode(&value)
    }

    fn frame(&mut self, frame: &Frame, actions: &mut Vec<Action>) {
        let plan = self.plan.clone();
        if !self.data_open {
            self.frames += 1;
            if self.frames > MAX_HANDSHAKE_FRAMES {
                let reason = format!(
                    "signaling protocol '{}': over {MAX_HANDSHAKE_FRAMES} frames arrived \
                     without completing step {}",
                    plan.name,
                    self.step + 1
                );
                return self.fail(reason, actions);
            }
        }
        let Some(StepPlan::Wait {
            matchers,
            fail,
            capture,
            accept_data,
        }) = plan.steps.get(self.step)
        else {
            return self.unmatched(actions);
        };
        let Ok(value) = plan.decode(frame) else {
            return self.unmatched(actions);
        };
        for guard in [fail.as_ref(), plan.fail.as_ref()].into_iter().flatten() {
            if let Some(reason) = self.first_truthy(guard, &value) {
                let reason = match reason {
                    Val::TStr(text) => String::from_utf8_lossy(&text).into_owned(),
                    other => other.to_string(),
                };
                return self.fail(reason, actions);
            }
        }
        let Some(position) = self
            .outstanding
            .iter()
            .position(|&i| self.first_truthy(&matchers[i], &value).is_some())
        else {
            return self.unmatched(actions);
        };
        self.outstanding.remove(position);
        if let Some(capture) = capture {
            if let Err(cause) = self.capture(capture, value) {
                let reason = format!(
                    "signaling protocol '{}': step {} CAPTURE '{}': {cause}",
                    plan.name,
                    self.step + 1,
                    capture.text
                );
                return self.fail(reason, actions);
            }
        }
        if self.outstanding.is_empty() {
            if *accept_data {
                self.open(actions);
            }
            self.step += 1;
            self.advance(actions);
        }
    }

    /// A frame no matcher consumed: payload once data is open, else dropped.
    fn unmatched(&self, actions: &mut Vec<Action>) {
        if self.data_open {
            actions.push(Action::Deliver);
        }
    }

    /// The first output of `program` on `value` when it is neither null nor false; an error
    /// is a non-match.
    fn first_truthy(&self, program: &Program, value: &Val) -> Option<Val> {
        jaq::first(&program.filter, value.clone(), &self.state)
            .ok()
            .flatten()
            .filter(|v| !matches!(v, Val::Null | Val::Bool(false)))
    }

    fn capture(&mut self, program: &Program, value: Val) -> Result<(), String> {
        let mut outputs = jaq::run(&program.filter, value, &self.state, 1)?;
        match outputs.pop() {
            Some(Val::Obj(captured)) => {
                let Val::Obj(state) = &mut self.state else {
                    return Err("the captured state is not an object".to_string());
                };
                let state = jaq_json::Rc::make_mut(state);
                for (key, value) in captured.iter() {
                    state.insert(key.clone(), value.clone());
                }
                Ok(())
            }
            Some(other) => Err(format!("it produced {}, not an object", type_name(&other))),
            None => Err("it produced no value (one object is required)".to_string()),
        }
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

    fn wait(matchers: &[&str]) -> WaitStep {
        WaitStep {
            matchers: matchers.iter().map(|m| m.to_string()).collect(),
            fail: None,
            capture: None,
            accept_data: false,
        }
    }

    fn send(programs: &[&str]) -> SignalingStep {
        SignalingStep::Send(programs.iter().map(|p| p.to_string()).collect())
    }

    fn protocol(format: SignalingFormat, steps: Vec<SignalingStep>) -> CreateSignalingProtocol {
        CreateSignalingProtocol {
            if_not_exists: false,
            name: Ident::new("p"),
            format,
            fail: None,
            accept_data_on_connect: false,
            steps,
            timeout: nervix_nspl::ast::Duration {
                nanos: Duration::from_secs(5).as_nanos() as u64,
            },
        }
    }

    fn handshake(create: &CreateSignalingProtocol) -> Handshake {
        Handshake::new(Arc::new(SignalingPlan::compile(create).expect("compiles")))
    }

    fn text(s: &str) -> Frame {
        Frame::Text(s.to_string())
    }

    fn sent(s: &str) -> Action {
        Action::Send(text(s))
    }

    #[test]
    fn on_connect_accept_data_opens_before_anything_is_negotiated() {
        let mut create = protocol(
            SignalingFormat::Json,
            vec![SignalingStep::Wait(wait(&[".ok"]))],
        );
        create.accept_data_on_connect = true;
        let mut h = handshake(&create);
        assert_eq!(h.on_event(Event::Connected), [Action::OpenData]);
        assert_eq!(
            h.on_event(Event::Frame(&text(r#"{"x":1}"#))),
            [Action::Deliver]
        );
        // The acknowledgement is handshake traffic, not payload.
        assert_eq!(
            h.on_event(Event::Frame(&text(r#"{"ok":true}"#))),
            [Action::Done]
        );
        assert_eq!(h.on_event(Event::Frame(&text("{}"))), [Action::Deliver]);
    }

    #[test]
    fn send_then_wait_with_accept_data_and_fail_guards() {
        let mut ack = wait(&[r#".op == "subscribe" and .success == true"#]);
        ack.fail = Some("select(.success == false) | .ret_msg".to_string());
        ack.accept_data = true;
        let create = protocol(
            SignalingFormat::Json,
            vec![
                send(&[r#"{op: "subscribe", args: ["t"]}"#]),
                SignalingStep::Wait(ack),
            ],
        );
        let mut h = handshake(&create);
        assert_eq!(
            h.on_event(Event::Connected),
            [sent(r#"{"op":"subscribe","args":["t"]}"#)]
        );
        // Before data opens, other frames are dropped (no action).
        assert_eq!(h.on_event(Event::Frame(&text(r#"{"trade":1}"#))), []);
        assert_eq!(h.on_event(Event::Frame(&text("not json"))), []);
        assert_eq!(
            h.on_event(Event::Frame(&text(
                r#"{"op":"subscribe","success":true,"conn_id":"x"}"#
            ))),
            [Action::OpenData, Action::Done]
        );
        let mut h = handshake(&create);
        h.on_event(Event::Connected);
        assert_eq!(
            h.on_event(Event::Frame(&text(
                r#"{"op":"subscribe","success":false,"ret_msg":"bad topic"}"#
            ))),
            [Action::Fail("bad topic".to_string())]
        );
        assert!(h.finished() && !h.data_open());
    }

    #[test]
    fn capture_feeds_state_to_later_programs() {
        let mut challenge = wait(&[".challenge"]);
        challenge.capture = Some("{nonce: .challenge}".to_string());
        let create = protocol(
            SignalingFormat::Json,
            vec![
                SignalingStep::Wait(challenge),
                send(&[r#"{op: "answer", nonce: $state.nonce}"#]),
                SignalingStep::Wait(wait(&[".accepted"])),
            ],
        );
        let mut h = handshake(&create);
        assert_eq!(h.on_event(Event::Connected), []);
        assert_eq!(
            h.on_event(Event::Frame(&text(r#"{"challenge":"n1"}"#))),
            [sent(r#"{"op":"answer","nonce":"n1"}"#)]
        );
        assert_eq!(
            h.on_event(Event::Frame(&text(r#"{"accepted":true}"#))),
            [Action::OpenData, Action::Done]
        );
    }

    #[test]
    fn a_capture_that_is_not_an_object_fails_without_showing_state() {
        let mut challenge = wait(&[".challenge"]);
        challenge.capture = Some(".challenge".to_string());
        let create = protocol(SignalingFormat::Json, vec![SignalingStep::Wait(challenge)]);
        let mut h = handshake(&create);
        h.on_event(Event::Connected);
        let actions = h.on_event(Event::Frame(&text(r#"{"challenge":"secret"}"#)));
        let [Action::Fail(reason)] = actions.as_slice() else {
            panic!("{actions:?}")
        };
        assert!(
            reason.contains("CAPTURE") && reason.contains("a string"),
            "{reason}"
        );
        assert!(!reason.contains("secret"), "{reason}");
    }

    #[test]
    fn two_matchers_complete_in_either_order_and_data_opens_at_the_first() {
        for order in [["1", "2"], ["2", "1"]] {
            let mut first = wait(&[".id == 1", ".id == 2"]);
            first.accept_data = true;
            let create = protocol(
                SignalingFormat::Json,
                vec![
                    send(&["{id: 1}", "{id: 2}"]),
                    SignalingStep::Wait(first),
                    SignalingStep::Wait(wait(&[".id == 3"])),
                ],
            );
            let mut h = handshake(&create);
            assert_eq!(
                h.on_event(Event::Connected),
                [sent(r#"{"id":1}"#), sent(r#"{"id":2}"#)]
            );
            let frame = |id: &str| text(&format!(r#"{{"id":{id}}}"#));
            assert_eq!(h.on_event(Event::Frame(&frame(order[0]))), []);
            assert_eq!(h.waiting_on().len(), 1);
            assert_eq!(
                h.on_event(Event::Frame(&frame(order[1]))),
                [Action::OpenData]
            );
            // Data is open while step 3 is outstanding: non-matching frames are payload.
            assert_eq!(h.on_event(Event::Frame(&frame("9"))), [Action::Deliver]);
            assert_eq!(h.on_event(Event::Frame(&frame("3"))), [Action::Done]);
        }
    }

    #[test]
    fn protocol_wide_fail_runs_after_the_step_guard_and_errors_are_non_matches() {
        let mut create = protocol(
            SignalingFormat::Json,
            vec![SignalingStep::Wait(wait(&[".a.b == 1"]))],
        );
        create.fail = Some(".error".to_string());
        let mut h = handshake(&create);
        h.on_event(Event::Connected);
        // `.a.b` errors on a string: a non-match, not a failure.
        assert_eq!(h.on_event(Event::Frame(&text(r#"{"a":"str"}"#))), []);
        assert_eq!(
            h.on_event(Event::Frame(&text(r#"{"error":{"code":7}}"#))),
            [Action::Fail(r#"{"code":7}"#.to_string())]
        );
    }

    #[test]
    fn a_matcher_is_decided_by_its_first_output() {
        let create = protocol(
            SignalingFormat::Json,
            vec![SignalingStep::Wait(wait(&["true, repeat(1)"]))],
        );
        let mut h = handshake(&create);
        h.on_event(Event::Connected);
        assert_eq!(
            h.on_event(Event::Frame(&text("{}"))),
            [Action::OpenData, Action::Done]
        );
    }

    #[test]
    fn the_deadline_names_the_outstanding_matchers() {
        let create = protocol(
            SignalingFormat::Json,
            vec![SignalingStep::Wait(wait(&[".id == 1", ".id == 2"]))],
        );
        let mut h = handshake(&create);
        h.on_event(Event::Connected);
        h.on_event(Event::Frame(&text(r#"{"id":1}"#)));
        let actions = h.on_event(Event::DeadlinePassed);
        let [Action::Fail(reason)] = actions.as_slice() else {
            panic!("{actions:?}")
        };
        assert!(
            reason.contains("'.id == 2'") && !reason.contains(".id == 1"),
            "{reason}"
        );
        assert!(reason.contains("timed out after 5s"), "{reason}");
    }

    #[test]
    fn raw_sends_strings_verbatim_and_reads_binary_frames() {
        let create = protocol(
            SignalingFormat::Raw,
            vec![
                send(&[r#""HELLO""#]),
                SignalingStep::Wait(wait(&[r#". == "OK""#])),
            ],
        );
        let mut h = handshake(&create);
        assert_eq!(h.on_event(Event::Connected), [sent("HELLO")]);
        assert_eq!(
            h.on_event(Event::Frame(&Frame::Binary(b"OK".to_vec()))),
            [Action::OpenData, Action::Done]
        );
        let create = protocol(SignalingFormat::Raw, vec![send(&["1"])]);
        let actions = handshake(&create).on_event(Event::Connected);
        assert!(
            matches!(actions.as_slice(), [Action::Fail(r)] if r.contains("must be a string")),
            "{actions:?}"
        );
    }

    #[test]
    fn a_send_program_must_produce_exactly_one_value() {
        for program in ["empty", "1, 2"] {
            let create = protocol(SignalingFormat::Json, vec![send(&[program])]);
            let actions = handshake(&create).on_event(Event::Connected);
            assert!(
                matches!(actions.as_slice(), [Action::Fail(r)] if r.contains("step 1 SEND")),
                "{program}: {actions:?}"
            );
        }
    }

    #[test]
    fn no_steps_opens_data_at_connect_and_chatter_is_bounded() {
        let create = protocol(SignalingFormat::Json, vec![]);
        let mut h = handshake(&create);
        assert_eq!(
            h.on_event(Event::Connected),
            [Action::OpenData, Action::Done]
        );
        let create = protocol(
            SignalingFormat::Json,
            vec![SignalingStep::Wait(wait(&[".never"]))],
        );
        let mut h = handshake(&create);
        h.on_event(Event::Connected);
        for _ in 0..MAX_HANDSHAKE_FRAMES {
            assert_eq!(h.on_event(Event::Frame(&text("{}"))), []);
        }
        assert!(matches!(
            h.on_event(Event::Frame(&text("{}"))).as_slice(),
            [Action::Fail(_)]
        ));
    }

    #[test]
    fn invalid_programs_and_unsupported_formats_are_refused_at_plan_time() {
        let create = protocol(SignalingFormat::Json, vec![send(&["{op: "])]);
        let error = SignalingPlan::compile(&create).unwrap_err();
        assert!(error.contains("step 1 SEND JAQ"), "{error}");
        let create = protocol(
            SignalingFormat::Protobuf(nervix_nspl::ast::ingestor::ProtobufSignaling {
                resource: Ident {
                    name: "proto".into(),
                    span: Default::default(),
                },
                version: nervix_nspl::ast::ResourceVersion::Number(1),
                config: Default::default(),
                send_message: "a.Send".into(),
                wait_message: "a.Wait".into(),
            }),
            vec![],
        );
        let error = SignalingPlan::compile(&create).unwrap_err();
        assert!(error.contains("PROTOBUF is not supported yet"), "{error}");
    }

    #[test]
    fn document_formats_encode_and_decode_frames() {
        use nervix_connectors::websocket::Frame;
        for (format, binary) in [
            (SignalingFormat::Cbor, true),
            (SignalingFormat::Yaml, false),
            (SignalingFormat::Toml, false),
        ] {
            let plan = SignalingPlan::compile(&protocol(format.clone(), vec![])).unwrap();
            let value = jaq_json::Val::obj(
                [(
                    jaq_json::Val::from("op".to_string()),
                    jaq_json::Val::from("ping".to_string()),
                )]
                .into_iter()
                .collect(),
            );
            let frame = plan.encode(&value).unwrap();
            assert_eq!(matches!(frame, Frame::Binary(_)), binary, "{format:?}");
            assert_eq!(plan.decode(&frame).unwrap(), value, "{format:?}");
        }
    }
}
