//! Offering one payload to a payload-decoding ingestor from an async task on the shard: the
//! data listeners (HTTP bodies, WebSocket messages), pollers and WebSocket connections all go
//! through [`offer`].
//!
//! A codec with a JAQ ON INGESTION program is unfolded on the node's extension workers first
//! (spec: "When The Extension Workers Are Full"). When they are full, a sender that can present
//! the payload again is refused ([`WhenWorkersFull::Refuse`]: HTTP 503 without Retry-After,
//! WebSocket 1013); a source that already handed the payload over waits for a place
//! ([`WhenWorkersFull::Wait`]: polls, connection frames), which pauses it in turn. Then the
//! payload (or its unfolded records) is offered until the ingestor takes it, refuses it, or is
//! gone; a full relay (`Busy`) makes the task wait, up to `deadline_ns` when one is given.
//! The payload's transport headers travel with it (its unfolded records share them).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use super::clock;
use super::plan::IntakeCodec;
use super::shard::endpoint::{EndpointTarget, Offer};
use super::shard::ShardState;

/// How often a waiting offer or a waiting worker submission is tried again.
const RETRY_US: u64 = 100;

/// What a payload does when the extension workers cannot take its unfolding now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenWorkersFull {
    Refuse,
    Wait,
}

/// Offers `payload` with its transport `headers` (empty for a source without) to the ingestor
/// `resolve` names (resolved again on every attempt, so a replaced source is followed by name
/// where the caller wants that).
pub async fn offer(
    state: &Rc<RefCell<ShardState>>,
    resolve: impl Fn(&ShardState) -> Option<EndpointTarget>,
    payload: &[u8],
    headers: &[(String, Vec<u8>)],
    when_full: WhenWorkersFull,
    deadline_ns: Option<u64>,
) -> Offer {
    let due = |deadline: Option<u64>| deadline.is_some_and(|at| clock::physical_ns() >= at);
    let mut unfolded = None;
    loop {
        let (target, extension) = {
            let shard = state.borrow();
            let Some(target) = resolve(&shard) else {
                return Offer::Gone;
            };
            if !target.source.codec().unfolds_on_workers() || !shard.endpoint_open(&target) {
                break;
            }
            (target, shard.extension.clone())
        };
        let (IntakeCodec::Jaq(plan), Some(extension)) = (target.source.codec().clone(), extension)
        else {
            return Offer::Gone;
        };
        let body = payload.to_vec();
        match extension
            .try_submit(move || crate::codec::jaq_unfold(&plan, &body).map_err(|e| e.to_string()))
        {
            Ok(job) => {
                unfolded = Some(job.await.unwrap_or_else(|error| Err(error.to_string())));
                break;
            }
            Err(_) if when_full == WhenWorkersFull::Refuse || due(deadline_ns) => {
                return Offer::Refused {
                    retry_after_s: None,
                }
            }
            Err(_) => glommio::timer::sleep(Duration::from_micros(RETRY_US)).await,
        }
    }
    loop {
        let offered = {
            let mut shard = state.borrow_mut();
            match resolve(&shard) {
                None => Offer::Gone,
                Some(target) if unfolded.is_some() => {
                    shard.offer_unfolded(&target, &mut unfolded, payload, headers)
                }
                Some(target) => shard.offer_payload(&target, payload, headers),
            }
        };
        if offered != Offer::Busy || due(deadline_ns) {
            return offered;
        }
        glommio::timer::sleep(Duration::from_micros(RETRY_US)).await;
    }
}
