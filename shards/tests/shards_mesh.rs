//! Integration tests of the shard mesh: real executors on real threads exchanging messages.

use std::num::NonZeroUsize;
use std::rc::Rc;

use futures_lite::future::block_on;
use nervix_shards::mesh::{MeshClosed, MeshTrySendError};
use nervix_shards::runtime::{RuntimeConfig, ShardSet};

/// What each shard reports back to the test.
type Report = async_channel::Sender<Result<Vec<u64>, String>>;

enum Command {
    /// Send `count` numbered messages (0..count) to shard `to`; reply with how many
    /// `try_send`s found the channel full along the way.
    SendNumbered {
        to: usize,
        count: u64,
        reply: Report,
    },
    /// Receive from shard `from` until `count` messages arrived (after `start` is signalled,
    /// if given); reply with the messages in arrival order.
    Receive {
        from: usize,
        count: usize,
        start: Option<async_channel::Receiver<()>>,
        reply: Report,
    },
    /// Fill the channel to `to` with `try_send` until it is full; reply with how many fit.
    Fill { to: usize, reply: Report },
    /// Drop this shard's receivers; reply when done.
    DropReceivers { reply: Report },
    /// Try one send to `to`; reply `[1]` for sent, `[2]` for full, `[3]` for closed.
    TryOne { to: usize, reply: Report },
    /// Reply with the shards this shard can send to and receive from.
    Describe { reply: Report },
}

fn config(shards: usize, capacity: usize) -> RuntimeConfig {
    let mut config =
        RuntimeConfig::with_shards(NonZeroUsize::new(shards).unwrap_or(NonZeroUsize::MIN))
            .unpinned();
    config.mesh_capacity_messages = capacity;
    config
}

fn start(config: RuntimeConfig) -> ShardSet<Command> {
    ShardSet::start::<u64, _, _>(config, |mut ctx| async move {
        let receivers = Rc::new(std::cell::RefCell::new(
            ctx.mesh.take_receivers().into_iter().collect::<Vec<_>>(),
        ));
        let mesh = Rc::new(ctx.mesh);
        while let Some(command) = ctx.commands.recv().await {
            match command {
                Command::SendNumbered { to, count, reply } => {
                    let mesh = Rc::clone(&mesh);
                    glommio::spawn_local(async move {
                        let sender = mesh.sender(to);
                        let mut full = 0u64;
                        for value in 0..count {
                            match sender.try_send(value) {
                                Ok(()) => {}
                                Err(MeshTrySendError::Full { message, .. }) => {
                                    full += 1;
                                    if let Err(MeshClosed { .. }) = sender.send(message).await {
                                        let _ = reply.send(Err("closed".to_owned())).await;
                                        return;
                                    }
                                }
                                Err(error) => {
                                    let _ = reply.send(Err(error.to_string())).await;
                                    return;
                                }
                            }
                        }
                        let _ = reply.send(Ok(vec![full])).await;
                    })
                    .detach();
                }
                Command::Receive {
                    from,
                    count,
                    start,
                    reply,
                } => {
                    let position = receivers.borrow().iter().position(|(f, _)| *f == from);
                    let Some(position) = position else {
                        let _ = reply.send(Err(format!("no receiver from {from}"))).await;
                        continue;
                    };
                    let (_, receiver) = receivers.borrow_mut().remove(position);
                    glommio::spawn_local(async move {
                        if let Some(start) = start {
                            let _ = start.recv().await;
                        }
                        let mut got = Vec::with_capacity(count);
                        while got.len() < count {
                            match receiver.recv().await {
                                Some(value) => got.push(value),
                                None => break,
                            }
                        }
                        let _ = reply.send(Ok(got)).await;
                    })
                    .detach();
                }
                Command::Fill { to, reply } => {
                    let sender = mesh.sender(to);
                    let mut sent = 0u64;
                    let result = loop {
                        match sender.try_send(sent) {
                            Ok(()) => sent += 1,
                            Err(error) if error.is_full() => break Ok(vec![sent]),
                            Err(error) => break Err(error.to_string()),
                        }
                    };
                    let _ = reply.send(result).await;
                }
                Command::DropReceivers { reply } => {
                    receivers.borrow_mut().clear();
                    let _ = reply.send(Ok(Vec::new())).await;
                }
                Command::TryOne { to, reply } => {
                    let code = match mesh.sender(to).try_send(0) {
                        Ok(()) => 1,
                        Err(MeshTrySendError::Full { .. }) => 2,
                        Err(MeshTrySendError::Closed { .. }) => 3,
                    };
                    let _ = reply.send(Ok(vec![code])).await;
                }
                Command::Describe { reply } => {
                    let mut shards: Vec<u64> = mesh.senders().map(|s| s.to() as u64).collect();
                    shards.push(u64::MAX);
                    shards.extend(receivers.borrow().iter().map(|(from, _)| *from as u64));
                    let none = mesh.try_sender(mesh.shard()).is_none();
                    shards.push(u64::from(none));
                    let _ = reply.send(Ok(shards)).await;
                }
            }
        }
    })
    .expect("shards start")
}

fn report() -> (Report, async_channel::Receiver<Result<Vec<u64>, String>>) {
    async_channel::bounded(1)
}

fn wait(rx: &async_channel::Receiver<Result<Vec<u64>, String>>) -> Vec<u64> {
    block_on(rx.recv())
        .expect("shard replies")
        .expect("shard succeeds")
}

fn send(set: &ShardSet<Command>, shard: usize, command: Command) {
    block_on(set.send(shard, command)).expect("shard running");
}

#[test]
fn hundred_thousand_messages_arrive_in_order() {
    const COUNT: u64 = 100_000;
    let set = start(config(2, 16));
    let (received_tx, received) = report();
    send(
        &set,
        1,
        Command::Receive {
            from: 0,
            count: COUNT as usize,
            start: None,
            reply: received_tx,
        },
    );
    let (sent_tx, sent) = report();
    send(
        &set,
        0,
        Command::SendNumbered {
            to: 1,
            count: COUNT,
            reply: sent_tx,
        },
    );
    let full = wait(&sent)[0];
    let got = wait(&received);
    assert_eq!(got.len(), COUNT as usize, "nothing lost");
    assert!(got.iter().copied().eq(0..COUNT), "in order");
    eprintln!("sender found the 16-message channel full {full} times");
    assert!(set.join().iter().all(Result::is_ok));
}

#[test]
fn a_paused_receiver_makes_the_sender_wait_and_nothing_is_dropped() {
    const COUNT: u64 = 1_000;
    let set = start(config(2, 16));
    // Nobody receives yet: exactly the channel's capacity fits, then try_send says Full.
    let (fill_tx, fill) = report();
    send(
        &set,
        0,
        Command::Fill {
            to: 1,
            reply: fill_tx,
        },
    );
    let filled = wait(&fill)[0];
    assert_eq!(filled, 16);
    let (one_tx, one) = report();
    send(
        &set,
        0,
        Command::TryOne {
            to: 1,
            reply: one_tx,
        },
    );
    assert_eq!(wait(&one), vec![2], "still full");

    // A sender that must send more now waits (send().await) instead of dropping.
    let (sent_tx, sent) = report();
    send(
        &set,
        0,
        Command::SendNumbered {
            to: 1,
            count: COUNT,
            reply: sent_tx,
        },
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(sent.is_empty(), "the sender is waiting for room");

    let (go, start_signal) = async_channel::bounded(1);
    let (received_tx, received) = report();
    send(
        &set,
        1,
        Command::Receive {
            from: 0,
            count: filled as usize + COUNT as usize,
            start: Some(start_signal),
            reply: received_tx,
        },
    );
    go.send_blocking(()).expect("receiver waiting");
    let full = wait(&sent)[0];
    assert!(full > 0, "the sender saw the channel full");
    let got = wait(&received);
    let expected: Vec<u64> = (0..filled).chain(0..COUNT).collect();
    assert_eq!(got, expected, "everything arrives, in order");
    assert!(set.join().iter().all(Result::is_ok));
}

#[test]
fn one_shard_has_an_empty_mesh() {
    let set = start(config(1, 16));
    let (tx, rx) = report();
    send(&set, 0, Command::Describe { reply: tx });
    // No senders, the separator, no receivers, and no sender to itself.
    assert_eq!(wait(&rx), vec![u64::MAX, 1]);
    assert_eq!(set.join(), vec![Ok(())]);
}

#[test]
fn three_shards_are_fully_connected() {
    const COUNT: u64 = 5_000;
    let set = start(config(3, 64));
    for shard in 0..3u64 {
        let (tx, rx) = report();
        send(&set, shard as usize, Command::Describe { reply: tx });
        let others: Vec<u64> = (0..3).filter(|&other| other != shard).collect();
        let mut expected = others.clone();
        expected.push(u64::MAX);
        expected.extend(&others);
        expected.push(1);
        assert_eq!(wait(&rx), expected, "shard {shard}");
    }
    let mut receptions = Vec::new();
    for to in 0..3usize {
        for from in (0..3usize).filter(|&from| from != to) {
            let (tx, rx) = report();
            send(
                &set,
                to,
                Command::Receive {
                    from,
                    count: COUNT as usize,
                    start: None,
                    reply: tx,
                },
            );
            receptions.push(rx);
        }
    }
    let mut sends = Vec::new();
    for from in 0..3usize {
        for to in (0..3usize).filter(|&to| to != from) {
            let (tx, rx) = report();
            send(
                &set,
                from,
                Command::SendNumbered {
                    to,
                    count: COUNT,
                    reply: tx,
                },
            );
            sends.push(rx);
        }
    }
    for rx in &sends {
        wait(rx);
    }
    for rx in &receptions {
        assert!(wait(rx).into_iter().eq(0..COUNT));
    }
    assert!(set.join().iter().all(Result::is_ok));
}

#[test]
fn a_receiver_that_is_gone_closes_the_channel() {
    let set = start(config(2, 16));
    let (tx, rx) = report();
    send(&set, 1, Command::DropReceivers { reply: tx });
    wait(&rx);
    let (tx, rx) = report();
    send(&set, 0, Command::TryOne { to: 1, reply: tx });
    assert_eq!(wait(&rx), vec![3], "closed, not silently queued");
    assert!(set.join().iter().all(Result::is_ok));
}
