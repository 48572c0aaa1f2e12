//! HTTP REQUEST ingestors' pollers (spec: "HTTP REQUEST"): each polling source of a deployed
//! graph gets a poller on the connector runtime (`nervix_connectors::http::poll_loop`: the
//! anchored cadence, 204 as no message, SUSPEND skipping polls) and a task on the shard that
//! offers each polled body to the ingestor's intake, which decodes it into ingest groups or,
//! during a BUFFER quiesce, retains it (dropping by ON OVERFLOW when full).
//!
//! The shard task resolves the ingestor by name for every body, so a poll in flight while the
//! graph is swapped lands in the replacement; the old poller ends when its intake goes (the
//! intake's `stopped` flag), and the replacement's poller starts with the new graph. A body the
//! intake cannot take yet (a full relay, a SUSPEND hold) waits; the poller's bounded channel
//! then pauses polling.

use std::cell::RefCell;
use std::rc::Rc;

use nervix_connectors::http::{poll_loop, HttpClient, Polled};

use super::offer::WhenWorkersFull;
use super::plan::SourcePlan;
use super::shard::endpoint::{IntakeSource, Offer};
use super::shard::ShardState;

/// Polled bodies waiting between a poller and its shard.
pub const POLL_QUEUE_BODIES: usize = 2;

/// Starts the pollers of `domain`'s polling sources that live on this shard.
pub fn start_pollers(state: &Rc<RefCell<ShardState>>, domain: &str) {
    let (pace, sources): (_, Vec<(String, IntakeSource, _, _)>) = {
        let shard = state.borrow();
        let Some(run) = shard.runs.get(domain) else {
            return;
        };
        let sources = run
            .graph
            .plan
            .ingestors
            .iter()
            .zip(&run.intakes)
            .filter_map(|(ingestor, intake)| {
                let intake = intake.as_ref()?;
                matches!(ingestor.source, SourcePlan::HttpPoll(_)).then(|| {
                    (
                        ingestor.name.clone(),
                        intake.source.clone(),
                        intake.suspended.clone(),
                        intake.stopped.clone(),
                    )
                })
            })
            .collect();
        (run.graph.plan.pace, sources)
    };
    let Some(runtime) = state.borrow().connectors.clone() else {
        return;
    };
    for (name, source, suspended, stopped) in sources {
        let IntakeSource::Poll(plan) = source else {
            continue;
        };
        let label = format!("domain '{domain}': ingestor '{name}'");
        let client = match HttpClient::new(plan.client.clone()) {
            Ok(client) => client,
            Err(error) => {
                tracing::error!("{label} cannot poll: {error}");
                continue;
            }
        };
        let (bodies, received) = async_channel::bounded::<Polled>(POLL_QUEUE_BODIES);
        // EVERY is domain time: a paced domain polls at its rate (the cadence stays anchored).
        runtime.spawn(poll_loop(
            client,
            pace.physical_span_ns(plan.every_ns).max(1),
            suspended,
            stopped.clone(),
            bodies,
            label.clone(),
        ));
        let state = state.clone();
        let domain = domain.to_string();
        glommio::spawn_local(async move {
            while let Ok(polled) = received.recv().await {
                // The response headers, for `read_header` (names lower-case, values UTF-8).
                let headers: Vec<(String, Vec<u8>)> = polled
                    .headers
                    .into_iter()
                    .map(|(name, value)| (name, value.into_bytes()))
                    .collect();
                offer(&state, &domain, &name, &polled.body, &headers, &label).await;
                if stopped.load(std::sync::atomic::Ordering::Acquire) {
                    break;
                }
            }
        })
        .detach();
    }
}

/// Offers one polled body until the ingestor takes it or no longer exists; its unfolding
/// waits for the extension workers (the poll was already taken from the source).
async fn offer(
    state: &Rc<RefCell<ShardState>>,
    domain: &str,
    name: &str,
    body: &[u8],
    headers: &[(String, Vec<u8>)],
    label: &str,
) {
    let offered = super::offer::offer(
        state,
        |shard| shard.poll_target(domain, name),
        body,
        headers,
        WhenWorkersFull::Wait,
        None,
    )
    .await;
    if offered != Offer::Accepted {
        tracing::warn!(
            "{label}: a polled body of {} bytes was dropped: the ingestor no longer runs",
            body.len()
        );
    }
}
