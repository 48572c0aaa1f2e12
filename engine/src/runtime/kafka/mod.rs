//! KAFKA TOPIC consumers on the shards (DESIGN §3: Kafka runs on the shards themselves; spec:
//! "Kafka").
//!
//! Every consumer instance of a deployed KAFKA TOPIC ingestor gets one task on the graph shard
//! that owns a non-blocking librdkafka consumer (`nervix_connectors::kafka::KafkaConsumer`)
//! and loops: ask the intake how many records it may take (the ACK window, the slab, a full
//! relay, a hold), poll at most that many with a zero timeout straight into the intake's
//! decoder, forget partitions a rebalance took away, then make the commits and seeks the
//! intake's [`offsets::OffsetTracker`] asks for. Nothing blocks the shard: an idle loop
//! sleeps [`POLL_IDLE_US`]; closing the consumer (which waits for librdkafka) happens on a
//! thread of its own.
//!
//! MODE NO ACK is the consumer's auto-commit; in an ACK mode a position is committed only once
//! every record below it was acknowledged downstream, and a rejected record is sought back to
//! (see `offsets`). A window that stays full keeps the consumer in its group: librdkafka's
//! group membership is served by polls, so after [`FULL_WINDOW_PAUSE_MS`] without room the
//! consumer pauses its partitions and keeps polling.

pub mod offsets;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use nervix_connectors::kafka::{ConsumerGroup, KafkaConsumer, RebalanceEvent};
use nervix_connectors::ConnectorError;

use super::plan::{KafkaOffsets, KafkaSourcePlan};
use super::shard::kafka::{KafkaRoom, KafkaTarget};
use super::shard::ShardState;
use offsets::OffsetAction;

/// How long an idle consumer loop sleeps before polling again.
pub const POLL_IDLE_US: u64 = 1_000;
/// How long a consumer waits without room before it pauses its partitions (and keeps
/// polling so the group does not consider it gone).
pub const FULL_WINDOW_PAUSE_MS: u64 = 500;
/// How long a consumer that failed to start or failed fatally waits before it tries again.
pub const RESTART_BACKOFF_MS: u64 = 1_000;

/// Starts the consumer tasks of `domain`'s Kafka intakes on this shard.
pub fn start_consumers(state: &Rc<RefCell<ShardState>>, domain: &str) {
    let intakes: Vec<_> = {
        let shard = state.borrow();
        let Some(run) = shard.runs.get(domain) else {
            return;
        };
        run.kafka
            .iter()
            .map(|intake| {
                let name = run.graph.plan.ingestors[intake.ingestor].name.clone();
                (intake.id, intake.instance, intake.plan.clone(), name)
            })
            .collect()
    };
    for (id, instance, plan, name) in intakes {
        let target = KafkaTarget {
            domain: domain.to_string(),
            id,
        };
        let label = format!("domain '{domain}': ingestor '{name}' (instance {instance})");
        let state = state.clone();
        state.borrow_mut().kafka_consumers_live += 1;
        glommio::spawn_local(async move {
            run_consumer(&state, &target, &plan, instance, &label).await;
            state.borrow_mut().kafka_consumers_live -= 1;
        })
        .detach();
    }
}

/// One consumer instance's life: (re)start its consumer until its intake goes.
async fn run_consumer(
    state: &Rc<RefCell<ShardState>>,
    target: &KafkaTarget,
    plan: &Arc<KafkaSourcePlan>,
    instance: u32,
    label: &str,
) {
    loop {
        let consumer = match &plan.offsets {
            KafkaOffsets::ConsumerGroup(group) => KafkaConsumer::new(
                &plan.config,
                ConsumerGroup::Named(group.clone()),
                &plan.topic,
                plan.ack.is_none(),
            ),
            KafkaOffsets::Domain { key } => {
                let stored = match state.borrow().runtime_state.as_ref() {
                    Some(runtime) => runtime
                        .kafka_offsets(key)
                        .map_err(|error| ConnectorError::permanent(error.to_string())),
                    None => Ok(Vec::new()),
                };
                match stored {
                    Ok(stored) => assigned(plan, instance, stored).await,
                    Err(error) => Err(error),
                }
            }
        };
        let consumer = match consumer {
            Ok(consumer) => consumer,
            Err(error) => {
                tracing::error!("{label}: cannot start its Kafka consumer: {error}");
                if wait_or_gone(state, target).await {
                    return;
                }
                continue;
            }
        };
        tracing::info!(
            "{label}: consuming topic '{}' ({:?})",
            plan.topic,
            plan.offsets
        );
        match consume(state, target, consumer, label).await {
            Ended::Gone => return,
            Ended::Failed => {
                if wait_or_gone(state, target).await {
                    return;
                }
            }
        }
    }
}

/// How long the blocking metadata requests of an OFFSET BY DOMAIN start may take each.
pub const METADATA_TIMEOUT_MS: u64 = 10_000;
/// librdkafka's "no offset": the consumer falls back to `auto.offset.reset`.
const OFFSET_INVALID: i64 = -1001;

/// OFFSET BY DOMAIN: a consumer without group management, assigned instance `instance`'s
/// partitions (partition p goes to instance p mod INSTANCES) at their stored next offsets,
/// clamped to each partition's current watermarks; a partition without a stored offset starts
/// as `auto.offset.reset` says. The metadata requests block, so they run on a thread of their
/// own while the shard goes on.
async fn assigned(
    plan: &Arc<KafkaSourcePlan>,
    instance: u32,
    stored: Vec<(i32, i64)>,
) -> Result<KafkaConsumer, ConnectorError> {
    let plan = plan.clone();
    let (reply, answer) = async_channel::bounded(1);
    std::thread::Builder::new()
        .name("nervix-kafka-assign".to_string())
        .spawn(move || {
            let assign = || -> Result<KafkaConsumer, ConnectorError> {
                let timeout = Duration::from_millis(METADATA_TIMEOUT_MS);
                let mut consumer =
                    KafkaConsumer::new(&plan.config, ConsumerGroup::Assigned, &plan.topic, false)?;
                let partitions = consumer.partition_count(timeout)?;
                let instances = i32::try_from(plan.instances.max(1)).unwrap_or(1);
                let instance = i32::try_from(instance).unwrap_or(0);
                let mut positions = Vec::new();
                for partition in (0..partitions).filter(|p| p % instances == instance) {
                    let start = match stored.iter().find(|(p, _)| *p == partition) {
                        Some(&(_, next)) => {
                            let (low, high) = consumer.fetch_watermarks(partition, timeout)?;
                            next.clamp(low, high)
                        }
                        None => OFFSET_INVALID,
                    };
                    positions.push((partition, start));
                }
                consumer.assign(&positions)?;
                Ok(consumer)
            };
            let _ = reply.send_blocking(assign());
        })
        .map_err(|error| ConnectorError::transient(format!("cannot start a thread: {error}")))?;
    answer
        .recv()
        .await
        .map_err(|_| ConnectorError::transient("the assignment thread ended without an answer"))?
}

/// Waits [`RESTART_BACKOFF_MS`]; true when the intake went meanwhile.
async fn wait_or_gone(state: &Rc<RefCell<ShardState>>, target: &KafkaTarget) -> bool {
    glommio::timer::sleep(Duration::from_millis(RESTART_BACKOFF_MS)).await;
    state.borrow().kafka_room(target) == KafkaRoom::Gone
}

/// Why a consumer loop ended.
enum Ended {
    /// The intake is gone: the task ends.
    Gone,
    /// The consumer failed fatally: a new one is made after a pause.
    Failed,
}

/// One consumer's loop until its intake goes or it fails fatally.
async fn consume(
    state: &Rc<RefCell<ShardState>>,
    target: &KafkaTarget,
    mut consumer: KafkaConsumer,
    label: &str,
) -> Ended {
    let mut actions: Vec<OffsetAction> = Vec::new();
    let mut revoked: Vec<i32> = Vec::new();
    let mut commits: Vec<(i32, i64)> = Vec::new();
    let mut paused = false;
    let mut full_since_ns: Option<u64> = None;
    let ended = loop {
        let room = state.borrow().kafka_room(target);
        let now_ns = super::clock::physical_ns();
        let take = match room {
            KafkaRoom::Gone => break Ended::Gone,
            KafkaRoom::Closed => 0,
            KafkaRoom::Records(n) => n,
        };
        // Pause while nothing can be taken for a while (or admission is closed); resume as
        // soon as there is room again.
        full_since_ns = if take == 0 {
            Some(full_since_ns.unwrap_or(now_ns))
        } else {
            None
        };
        let should_pause = room == KafkaRoom::Closed
            || full_since_ns
                .is_some_and(|since| now_ns - since >= FULL_WINDOW_PAUSE_MS * 1_000_000);
        if should_pause != paused {
            let changed = if should_pause {
                consumer.pause_all()
            } else {
                consumer.resume_all()
            };
            match changed {
                Ok(()) => paused = should_pause,
                Err(error) => tracing::warn!("{label}: cannot pause or resume: {error}"),
            }
        }
        let polled = {
            // While no record may be taken, poll only when paused, to serve the group: a paused
            // consumer delivers no records, and one that still arrives is not taken (its
            // partition is rewound to it).
            let max = if take == 0 && paused { 1 } else { take };
            state.borrow_mut().kafka_poll(target, &mut consumer, max)
        };
        let polled = match polled {
            Ok(polled) => polled,
            Err(error) => {
                tracing::error!("{label}: the Kafka consumer failed: {error}");
                break Ended::Failed;
            }
        };
        revoked.clear();
        for event in consumer.take_rebalance_events() {
            if let RebalanceEvent::Revoked(partitions) = event {
                revoked.extend(partitions);
            }
        }
        state
            .borrow_mut()
            .kafka_after_poll(target, &revoked, &mut actions);
        run_actions(
            state,
            target,
            &mut consumer,
            &mut actions,
            &mut commits,
            label,
        );
        for error in consumer.take_commit_errors() {
            tracing::warn!("{label}: a commit failed: {error}");
        }
        if polled == 0 {
            glommio::timer::sleep(Duration::from_micros(POLL_IDLE_US)).await;
        } else {
            glommio::yield_if_needed().await;
        }
    };
    // Closing waits for librdkafka (leaving the group, sending queued commits): on a thread
    // of its own, while this task waits so a drain can wait for it in turn.
    let (closed, close_done) = async_channel::bounded::<()>(1);
    let closer = std::thread::Builder::new()
        .name("nervix-kafka-close".to_string())
        .spawn(move || {
            consumer.close();
            let _ = closed.send_blocking(());
        });
    match closer {
        Ok(_) => {
            let _ = close_done.recv().await;
        }
        Err(error) => tracing::warn!("{label}: cannot close the consumer off the shard: {error}"),
    }
    ended
}

/// Makes the seeks (first) and one commit of every position due.
fn run_actions(
    state: &Rc<RefCell<ShardState>>,
    target: &KafkaTarget,
    consumer: &mut KafkaConsumer,
    actions: &mut Vec<OffsetAction>,
    commits: &mut Vec<(i32, i64)>,
    label: &str,
) {
    commits.clear();
    for action in actions.drain(..) {
        match action {
            OffsetAction::Seek(partition, offset) => {
                let sought = consumer.seek(partition, offset);
                if let Err(error) = &sought {
                    tracing::warn!(
                        "{label}: cannot seek partition {partition} back to {offset}: {error}; \
                         retrying"
                    );
                }
                state
                    .borrow_mut()
                    .kafka_seeked(target, partition, offset, sought.is_ok());
            }
            OffsetAction::Commit(partition, next) => commits.push((partition, next)),
        }
    }
    if !commits.is_empty() {
        if let Err(error) = consumer.commit(commits) {
            tracing::warn!("{label}: cannot queue a commit: {error}");
        }
    }
}
