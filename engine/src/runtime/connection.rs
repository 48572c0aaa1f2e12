//! WEBSOCKETS CONNECTION ingestors' sessions (spec: "WEBSOCKETS CONNECTION"): each connection
//! source of a deployed graph gets a session on the connector runtime
//! (`nervix_connectors::websocket::session_loop`: connect within one budget, carry frames,
//! reconnect with backoff) and a task on the shard that drives the signaling handshake
//! ([`Handshake`], a pure state machine) and offers data frames to the ingestor's intake,
//! mirroring `poll.rs`.
//!
//! Per connection the shard task starts a fresh handshake at `Connected`, arms the protocol's
//! one TIMEOUT, sends the frames it asks for, and opens data where it says. A frame is
//! offered to the intake only while data is open; before that it is dropped, so a connection
//! whose handshake fails delivers nothing. A failed handshake is logged with its reason (the
//! protocol's programs and steps, never `$state`) and the session reconnects after its
//! backoff, which a completed handshake resets. Without a signaling protocol data opens at
//! `Connected`. Quiesce never stops the reading: the intake retains or drops frames under
//! BUFFER … ON OVERFLOW (and DROP), as for polls.
//!
//! The shard task resolves the ingestor by name for every frame, so a frame in flight while
//! the graph is swapped lands in the replacement; the old session ends when its intake goes
//! (the intake's `stopped` flag), and the replacement's session starts with the new graph.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use nervix_connectors::websocket::{session_loop, Command, Frame, SessionEvent};

use super::plan::{ConnectionPlan, SourcePlan};
use super::shard::endpoint::{IntakeSource, Offer};
use super::shard::ShardState;
use super::signaling::{Action, Event, Handshake};

/// Frames waiting between a session and its shard.
pub const CONNECTION_QUEUE_FRAMES: usize = 64;
/// Commands (handshake frames to send) waiting between a shard and its session.
pub const CONNECTION_COMMANDS: usize = 16;

/// Starts the sessions of `domain`'s WEBSOCKETS CONNECTION sources that live on this shard.
pub fn start_connections(state: &Rc<RefCell<ShardState>>, domain: &str) {
    let sources: Vec<(String, IntakeSource, _)> = {
        let shard = state.borrow();
        let Some(run) = shard.runs.get(domain) else {
            return;
        };
        run.graph
            .plan
            .ingestors
            .iter()
            .zip(&run.intakes)
            .filter_map(|(ingestor, intake)| {
                let intake = intake.as_ref()?;
                matches!(ingestor.source, SourcePlan::WebsocketsConnection(_)).then(|| {
                    (
                        ingestor.name.clone(),
                        intake.source.clone(),
                        intake.stopped.clone(),
                    )
                })
            })
            .collect()
    };
    let Some(runtime) = state.borrow().connectors.clone() else {
        return;
    };
    for (name, source, stopped) in sources {
        let IntakeSource::Connection(plan) = source else {
            continue;
        };
        let label = format!("domain '{domain}': ingestor '{name}'");
        let (commands, command_rx) = async_channel::bounded(CONNECTION_COMMANDS);
        let (event_tx, events) = async_channel::bounded(CONNECTION_QUEUE_FRAMES);
        runtime.spawn(session_loop(
            plan.client.clone(),
            stopped.clone(),
            command_rx,
            event_tx,
        ));
        let task = ConnectionTask {
            state: state.clone(),
            domain: domain.to_string(),
            name,
            label,
            plan,
            commands,
        };
        glommio::spawn_local(task.run(events)).detach();
    }
}

/// The shard side of one session.
struct ConnectionTask {
    state: Rc<RefCell<ShardState>>,
    domain: String,
    name: String,
    label: String,
    plan: Arc<ConnectionPlan>,
    commands: async_channel::Sender<Command>,
}

/// What the shard task waits for next.
enum Next {
    Event(SessionEvent),
    /// The session's channel closed.
    Ended,
    /// The handshake's TIMEOUT passed.
    Deadline,
}

/// Where the current connection stands.
struct Current {
    handshake: Option<Handshake>,
    /// The session's number of the current connection (commands name it).
    number: u64,
    /// Physical ns when the handshake's TIMEOUT passes.
    deadline_ns: Option<u64>,
    data_open: bool,
    /// A connection failure streak is logged once.
    failing: bool,
}

impl ConnectionTask {
    async fn run(self, events: async_channel::Receiver<SessionEvent>) {
        let mut current = Current {
            handshake: None,
            number: 0,
            deadline_ns: None,
            data_open: false,
            failing: false,
        };
        loop {
            let received = async {
                match events.recv().await {
                    Ok(event) => Next::Event(event),
                    Err(_) => Next::Ended,
                }
            };
            let next = match current.deadline_ns {
                None => received.await,
                Some(deadline) => {
                    let wait = deadline.saturating_sub(super::clock::physical_ns());
                    futures_lite::future::or(received, async {
                        glommio::timer::sleep(Duration::from_nanos(wait)).await;
                        Next::Deadline
                    })
                    .await
                }
            };
            let event = match next {
                Next::Event(event) => event,
                // The session ended: its intake went.
                Next::Ended => return,
                Next::Deadline => {
                    current.deadline_ns = None;
                    if !self
                        .handshake_event(&mut current, Event::DeadlinePassed, None)
                        .await
                    {
                        return;
                    }
                    continue;
                }
            };
            let alive = match event {
                SessionEvent::Connected(number) => {
                    current.number = number;
                    self.connected(&mut current).await
                }
                SessionEvent::Frame(frame) => self.frame(&mut current, frame).await,
                SessionEvent::Disconnected(error) => {
                    if !current.failing {
                        tracing::warn!("{}: connection lost: {error}", self.label);
                    }
                    current.failing = true;
                    current.handshake = None;
                    current.deadline_ns = None;
                    current.data_open = false;
                    true
                }
            };
            if !alive {
                return;
            }
        }
    }

    /// A new connection: its handshake starts (or data opens at once without one).
    async fn connected(&self, current: &mut Current) -> bool {
        current.data_open = false;
        match &self.plan.signaling {
            None => {
                current.data_open = true;
                current.failing = false;
                self.commands
                    .send(Command::Established(current.number))
                    .await
                    .is_ok()
            }
            Some(signaling) => {
                current.handshake = Some(Handshake::new(signaling.clone()));
                current.deadline_ns = Some(super::clock::physical_ns() + signaling.timeout_ns);
                self.handshake_event(current, Event::Connected, None).await
            }
        }
    }

    async fn frame(&self, current: &mut Current, frame: Frame) -> bool {
        match &current.handshake {
            Some(handshake) if !handshake.finished() => {
                self.handshake_event(current, Event::Frame(&frame), Some(&frame))
                    .await
            }
            _ => {
                if current.data_open {
                    self.offer(frame.bytes()).await;
                }
                !self.commands.is_closed()
            }
        }
    }

    /// Feeds the handshake and carries out its actions; false when the session is gone.
    async fn handshake_event(
        &self,
        current: &mut Current,
        event: Event<'_>,
        frame: Option<&Frame>,
    ) -> bool {
        let number = current.number;
        let Some(handshake) = current.handshake.as_mut() else {
            return true;
        };
        for action in handshake.on_event(event) {
            match action {
                Action::Send(out) => {
                    if self
                        .commands
                        .send(Command::Send(number, out))
                        .await
                        .is_err()
                    {
                        return false;
                    }
                }
                Action::OpenData => current.data_open = true,
                Action::Deliver => {
                    if let Some(frame) = frame {
                        self.offer(frame.bytes()).await;
                    }
                }
                Action::Fail(reason) => {
                    tracing::warn!("{}: handshake failed: {reason}", self.label);
                    current.data_open = false;
                    current.deadline_ns = None;
                    if self
                        .commands
                        .send(Command::Reconnect(number))
                        .await
                        .is_err()
                    {
                        return false;
                    }
                }
                Action::Done => {
                    current.deadline_ns = None;
                    current.failing = false;
                    if self
                        .commands
                        .send(Command::Established(number))
                        .await
                        .is_err()
                    {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// Offers one data frame until the ingestor takes it or no longer exists; its unfolding
    /// waits for the extension workers (the frame was already read from the socket).
    async fn offer(&self, body: &[u8]) {
        let offered = super::offer::offer(
            &self.state,
            |shard| shard.connection_target(&self.domain, &self.name),
            body,
            // WEBSOCKETS CONNECTION ingestors do not expose headers (spec "Header Context").
            &[],
            super::offer::WhenWorkersFull::Wait,
            None,
        )
        .await;
        if offered != Offer::Accepted {
            tracing::warn!(
                "{}: a frame of {} bytes was dropped: the ingestor no longer runs",
                self.label,
                body.len()
            );
        }
    }
}
