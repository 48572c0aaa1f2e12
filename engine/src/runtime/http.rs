//! The data listeners' service on a shard: requests and WebSocket messages routed by VHOST host
//! and ENDPOINT path to the HTTP ENDPOINT / WEBSOCKETS ENDPOINT ingestors of started domains
//! (spec: "HTTP ENDPOINT And WEBSOCKETS ENDPOINT"; DESIGN §8 "Data listeners").
//!
//! Status rules, in the order they are decided:
//! - no started ingestor serves the host and path on this listener (plain or TLS): **404** —
//!   a stopped domain's routes are withdrawn;
//! - a plain request to a WebSocket endpoint: **426**; an upgrade to an HTTP endpoint: **400**;
//!   a method other than POST or PUT: **405**;
//! - the body is offered to every ingestor on the route ([`ShardState::offer_payload`]): **202**
//!   when at least one accepted it; otherwise **503**, with `Retry-After` only when every
//!   refusing ingestor is quiesced under `REJECT RETRY AFTER` (the largest of their delays).
//!   A stopped or replaced ingestor never yields a silent 202;
//! - a relay that cannot take rows makes the request wait (up to [`MAX_BACKPRESSURE_WAIT_MS`],
//!   then 503 without `Retry-After`): backpressure reaches the sender as latency, not loss.
//!
//! A WEBSOCKETS endpoint WITH SIGNALING PROTOCOL runs its handshake on every accepted
//! connection (`signaling::server`, the same state machine WEBSOCKETS CONNECTION clients
//! drive): the protocol is fixed at upgrade, ON CONNECT starts right after the 101 (the server
//! sends first where the protocol says), handshake frames and frames before data opens are not
//! delivered, and a failed handshake is logged (its reason, never `$state`) and closes the
//! connection — 1008 when a peer's frame failed it (FAIL, CAPTURE, a later SEND), 1002 when
//! its TIMEOUT passed, 1011 when the endpoint's own opening SEND failed. The TIMEOUT is
//! checked by the same watch that closes a quiesced WebSocket, and again when a message
//! arrives.
//!
//! The HTTP machinery (parsing, 413 for bodies over the limit, keep-alive, WebSocket framing,
//! TLS) is `nervix_net::http`; this module only decides.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use nervix_connectors::websocket::Frame;
use nervix_net::http::{
    HeadDecision, HttpService, Method, RequestHead, Response, WsMessage, WsOutgoing, WsVerdict,
};
use nervix_nspl::ast::catalog::EndpointType;

use super::clock;
use super::offer::WhenWorkersFull;
use super::shard::endpoint::{EndpointTarget, Offer};
use super::shard::ShardState;
use super::signaling::server::{Closing, FrameVerdict, ServerHandshake};
use super::signaling::SignalingPlan;

/// The longest a request waits for a full graph before it is answered 503.
pub const MAX_BACKPRESSURE_WAIT_MS: u64 = 5_000;
/// How often an established WebSocket checks whether its ingestors still take payloads.
const WEBSOCKET_WATCH_MS: u64 = 50;
/// WebSocket close code 1013, Try Again Later (spec: quiesce REJECT, refused payloads).
pub const CLOSE_TRY_AGAIN_LATER: u16 = 1013;

/// The ingestors one request or WebSocket reaches.
pub struct EndpointRoute {
    targets: Vec<EndpointTarget>,
    /// A WebSocket to an endpoint WITH SIGNALING PROTOCOL: its protocol (fixed at upgrade) and,
    /// once [`HttpService::websocket_opened`] ran, its handshake.
    signaling: Option<RouteSignaling>,
}

/// One WebSocket's server-side handshake and what names it in the log.
struct RouteSignaling {
    plan: Arc<SignalingPlan>,
    label: String,
    handshake: RefCell<Option<ServerHandshake>>,
}

impl RouteSignaling {
    /// Logs a failed handshake (its reason names programs and steps or the peer's FAIL value,
    /// never `$state`) and turns it into the close verdict.
    fn close(&self, closing: Closing) -> WsVerdict {
        tracing::warn!(
            "{}: signaling handshake failed (closing with {}): {}",
            self.label,
            closing.code,
            closing.log_reason
        );
        WsVerdict::Close {
            code: closing.code,
            reason: closing.wire_reason,
        }
    }
}

/// One shard's service for one listener (plain or TLS).
pub struct ShardHttp {
    state: Rc<RefCell<ShardState>>,
}

impl ShardHttp {
    pub fn new(state: Rc<RefCell<ShardState>>) -> ShardHttp {
        ShardHttp { state }
    }

    /// Offers `payload` with the request's `headers` to every target until each accepted,
    /// refused or is gone.
    async fn offer(
        &self,
        route: &EndpointRoute,
        payload: &[u8],
        headers: &[(String, Vec<u8>)],
    ) -> Verdict {
        let mut verdict = Verdict {
            accepted: false,
            every_refusal_rejects: true,
            retry_after_s: 0,
        };
        for target in &route.targets {
            match self.offer_one(target, payload, headers).await {
                Offer::Accepted => verdict.accepted = true,
                Offer::Refused {
                    retry_after_s: Some(after),
                } => verdict.retry_after_s = verdict.retry_after_s.max(after),
                Offer::Refused {
                    retry_after_s: None,
                }
                | Offer::Gone
                | Offer::Busy => verdict.every_refusal_rejects = false,
            }
        }
        verdict
    }

    /// One target, refused when the extension workers are full (its sender may send it
    /// again) and after [`MAX_BACKPRESSURE_WAIT_MS`] of a full relay.
    async fn offer_one(
        &self,
        target: &EndpointTarget,
        payload: &[u8],
        headers: &[(String, Vec<u8>)],
    ) -> Offer {
        let deadline_ns = clock::physical_ns() + MAX_BACKPRESSURE_WAIT_MS * 1_000_000;
        super::offer::offer(
            &self.state,
            |_| Some(target.clone()),
            payload,
            headers,
            WhenWorkersFull::Refuse,
            Some(deadline_ns),
        )
        .await
    }
}

/// What the ingestors of a route said about one payload.
struct Verdict {
    accepted: bool,
    every_refusal_rejects: bool,
    retry_after_s: u64,
}

impl Verdict {
    fn response(&self) -> Response {
        if self.accepted {
            return Response::status(202);
        }
        let refused = Response::status(503);
        if self.every_refusal_rejects && self.retry_after_s > 0 {
            refused.header("retry-after", self.retry_after_s.to_string())
        } else {
            refused
        }
    }
}

fn text(status: u16, message: String) -> Response {
    let mut response = Response::status(status).header("content-type", "text/plain; charset=utf-8");
    response.body = message.into_bytes();
    response.body.push(b'\n');
    response
}

impl HttpService for ShardHttp {
    type Route = EndpointRoute;

    fn head(&self, head: &RequestHead, tls: bool) -> HeadDecision<EndpointRoute> {
        let found = self
            .state
            .borrow()
            .endpoint_route(head.host.as_deref(), &head.path, tls);
        if found.is_empty() {
            return HeadDecision::Respond(text(
                404,
                format!(
                    "no running endpoint serves {}{}",
                    head.host.as_deref().unwrap_or("(no host)"),
                    head.path
                ),
            ));
        }
        let wanted = if head.websocket {
            EndpointType::Websockets
        } else {
            EndpointType::Http
        };
        let targets: Vec<EndpointTarget> = found
            .into_iter()
            .filter(|target| target.endpoint().is_some_and(|e| e.kind == wanted))
            .collect();
        if targets.is_empty() {
            return HeadDecision::Respond(if head.websocket {
                text(
                    400,
                    format!("{} is an HTTP endpoint, not a WebSocket one", head.path),
                )
            } else {
                text(426, format!("{} is a WebSocket endpoint", head.path))
                    .header("upgrade", "websocket")
            });
        }
        if head.websocket {
            // A new upgrade is refused like a request while every ingestor refuses.
            let state = self.state.borrow();
            if !targets.iter().any(|t| state.endpoint_accepts(t)) {
                let verdict = Verdict {
                    accepted: false,
                    every_refusal_rejects: targets
                        .iter()
                        .all(|t| state.endpoint_retry_after_s(t).is_some()),
                    retry_after_s: targets
                        .iter()
                        .filter_map(|t| state.endpoint_retry_after_s(t))
                        .max()
                        .unwrap_or(0),
                };
                return HeadDecision::Respond(verdict.response());
            }
            drop(state);
            return HeadDecision::Upgrade(websocket_route(targets));
        }
        let route = EndpointRoute {
            targets,
            signaling: None,
        };
        if !matches!(head.method, Method::Post | Method::Put) {
            return HeadDecision::Respond(
                text(405, format!("{} takes POST or PUT", head.path)).header("allow", "POST, PUT"),
            );
        }
        HeadDecision::ReadBody(route)
    }

    /// The body with the request's headers (HTTP ENDPOINT `read_header`).
    async fn request(&self, route: EndpointRoute, head: &RequestHead, body: &[u8]) -> Response {
        self.offer(&route, body, &head.headers).await.response()
    }

    async fn websocket_message(
        &self,
        route: &EndpointRoute,
        head: &RequestHead,
        message: WsMessage<'_>,
    ) -> WsVerdict {
        let payload = match message {
            WsMessage::Text(bytes) | WsMessage::Binary(bytes) => bytes,
        };
        if let Some(signaling) = &route.signaling {
            let verdict = match signaling.handshake.borrow_mut().as_mut() {
                Some(handshake) if !handshake.settled() => {
                    let frame = match message {
                        WsMessage::Text(bytes) => {
                            Frame::Text(String::from_utf8_lossy(bytes).into_owned())
                        }
                        WsMessage::Binary(bytes) => Frame::Binary(bytes.to_vec()),
                    };
                    handshake.frame(&frame, clock::physical_ns())
                }
                _ => FrameVerdict::Deliver,
            };
            match verdict {
                FrameVerdict::Deliver => {}
                FrameVerdict::Drop => return WsVerdict::Continue,
                FrameVerdict::Close(closing) => return signaling.close(closing),
            }
        }
        // Every message carries the opening upgrade request's headers (WEBSOCKETS ENDPOINT).
        if self.offer(route, payload, &head.headers).await.accepted {
            WsVerdict::Continue
        } else {
            WsVerdict::Close {
                code: CLOSE_TRY_AGAIN_LATER,
                reason: "the endpoint is not taking messages",
            }
        }
    }

    async fn websocket_closed(&self, route: &EndpointRoute) -> u16 {
        loop {
            let mut wait = Duration::from_millis(WEBSOCKET_WATCH_MS);
            if let Some(deadline) = route.handshake_deadline_ns() {
                let left = deadline.saturating_sub(clock::physical_ns());
                wait = wait.min(Duration::from_nanos(left));
            }
            glommio::timer::sleep(wait).await;
            if let Some(signaling) = &route.signaling {
                let timed_out = signaling
                    .handshake
                    .borrow_mut()
                    .as_mut()
                    .and_then(|handshake| handshake.check_deadline(clock::physical_ns()));
                if let Some(closing) = timed_out {
                    // This future yields only a code: the close frame carries no reason.
                    let code = closing.code;
                    signaling.close(closing);
                    return code;
                }
            }
            let state = self.state.borrow();
            let any_live = route
                .targets
                .iter()
                .any(|target| state.endpoint_accepts(target));
            if !any_live {
                return CLOSE_TRY_AGAIN_LATER;
            }
        }
    }

    /// Starts the endpoint's signaling handshake (spec: the route and protocol are fixed at
    /// upgrade); its opening SEND frames are queued for [`HttpService::websocket_outgoing`].
    async fn websocket_opened(&self, route: &EndpointRoute, _: &RequestHead) -> WsVerdict {
        let Some(signaling) = &route.signaling else {
            return WsVerdict::Continue;
        };
        let (handshake, closing) =
            ServerHandshake::start(signaling.plan.clone(), clock::physical_ns());
        *signaling.handshake.borrow_mut() = Some(handshake);
        match closing {
            Some(closing) => signaling.close(closing),
            None => WsVerdict::Continue,
        }
    }

    fn websocket_outgoing(&self, route: &EndpointRoute) -> Vec<WsOutgoing> {
        let Some(signaling) = &route.signaling else {
            return Vec::new();
        };
        let mut handshake = signaling.handshake.borrow_mut();
        let Some(handshake) = handshake.as_mut() else {
            return Vec::new();
        };
        handshake
            .take_outgoing()
            .into_iter()
            .map(|frame| match frame {
                Frame::Text(text) => WsOutgoing::Text(text),
                Frame::Binary(bytes) => WsOutgoing::Binary(bytes),
            })
            .collect()
    }
}

impl EndpointRoute {
    /// When the running handshake's TIMEOUT passes (physical ns).
    fn handshake_deadline_ns(&self) -> Option<u64> {
        let signaling = self.signaling.as_ref()?;
        let handshake = signaling.handshake.borrow();
        handshake.as_ref()?.deadline_ns()
    }
}

/// The route of an accepted upgrade: the first target's signaling protocol drives the
/// connection (one connection runs one handshake), and targets whose endpoint declares another
/// protocol (or none) are left out of it — ingestors of one endpoint always agree; endpoints of
/// different domains sharing a host and path may not.
fn websocket_route(targets: Vec<EndpointTarget>) -> EndpointRoute {
    let protocol = |target: &EndpointTarget| {
        target
            .endpoint()
            .and_then(|e| e.signaling.clone())
            .map(|plan| plan.name.clone())
    };
    let first = targets.first().map(protocol).unwrap_or_default();
    let signaling = targets.first().and_then(|target| {
        let endpoint = target.endpoint()?;
        Some(RouteSignaling {
            plan: endpoint.signaling.clone()?,
            label: format!(
                "domain '{}': endpoint '{}'",
                target.domain, endpoint.endpoint
            ),
            handshake: RefCell::new(None),
        })
    });
    EndpointRoute {
        targets: targets
            .into_iter()
            .filter(|target| protocol(target) == first)
            .collect(),
        signaling,
    }
}

/// The data listeners every shard binds (SO_REUSEPORT: the kernel spreads connections).
#[derive(Debug, Clone)]
pub struct DataListeners {
    /// Plain HTTP / WS for VHOSTs without TLS.
    pub http_addr: Option<std::net::SocketAddr>,
    /// HTTPS / WSS for TLS VHOSTs.
    pub https_addr: Option<std::net::SocketAddr>,
    /// Request bodies over this answer 413 (DESIGN §8: default 1 MiB).
    pub max_body_bytes: usize,
}

/// DESIGN §8: the default request body limit.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;

impl Default for DataListeners {
    fn default() -> DataListeners {
        DataListeners {
            http_addr: None,
            https_addr: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}

/// Binds this shard's data listeners and serves them on the `http` task queue.
pub fn start_listeners(
    ctx: &nervix_shards::runtime::ShardContext<super::shard::mesh::MeshMsg, super::Command>,
    state: &Rc<RefCell<ShardState>>,
    listeners: &DataListeners,
    certs: &std::sync::Arc<nervix_net::http::CertStore>,
) {
    let limits = nervix_net::http::ServerLimits {
        max_body_bytes: listeners.max_body_bytes,
        ..nervix_net::http::ServerLimits::default()
    };
    let queue = ctx.task_queue("http");
    let (stop, stopped) = async_channel::bounded::<()>(1);
    state.borrow_mut().stop_listeners = Some(stop);
    let tls = match nervix_net::http::TlsAcceptor::new(certs.clone()) {
        Ok(acceptor) => Some(acceptor),
        Err(error) => {
            tracing::error!("shard {}: HTTPS is off: {error}", ctx.shard);
            None
        }
    };
    // Without an acceptor the HTTPS address stays unbound (never served as plain HTTP).
    let https_addr = listeners.https_addr.filter(|_| tls.is_some());
    let bound = [(listeners.http_addr, None), (https_addr, tls)];
    for (addr, tls) in bound {
        let Some(addr) = addr else {
            continue;
        };
        let listener = match nervix_net::http::Listener::bind(addr) {
            Ok(listener) => listener,
            Err(error) => {
                tracing::error!("shard {}: cannot listen on {addr}: {error}", ctx.shard);
                continue;
            }
        };
        let service = Rc::new(ShardHttp::new(state.clone()));
        let stopped = stopped.clone();
        let stop = async move {
            let _ = stopped.recv().await;
        };
        let task = nervix_net::http::serve(listener, tls, service, limits.clone(), stop);
        match ctx.spawn_into(&queue, async move {
            if let Err(error) = task.await {
                tracing::error!("data listener {addr}: {error}");
            }
        }) {
            Ok(task) => {
                task.detach();
            }
            Err(error) => tracing::error!("shard {}: {error}", ctx.shard),
        }
    }
}
