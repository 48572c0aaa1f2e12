//! Three nodes on 127.0.0.1 in one process, talking over the real TCP transport: learners join,
//! membership changes, the leader's writes reach every node, a stopped follower catches up
//! through a snapshot after restart, and a new leader is elected when the leader stops.
//!
//! Writes go to whichever node leads at the time and are retried if leadership moves (a loaded
//! machine can delay heartbeats past an election timeout); the checks are on replicated state,
//! which is the same whichever node took a write.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{config, count_of, loopback_any_port, put, run_bounded, KvMachine};
use nervix_raft::{RaftError, RaftNode, StartMode};

const TEST_LIMIT: Duration = Duration::from_secs(180);
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

type Node = RaftNode<KvMachine>;

async fn open(dir: &Path, id: u64, addr: SocketAddr, mode: StartMode) -> Node {
    let mut cfg = config(dir, id, addr);
    cfg.start_mode = mode;
    RaftNode::open(cfg, KvMachine::default()).await.unwrap()
}

fn state_of(node: &Node) -> Vec<(String, String)> {
    node.with_state(|sm| sm.map.clone().into_iter().collect())
}

/// The node that currently leads, waiting for an election if needed.
async fn leader<'a>(nodes: &[&'a Node]) -> &'a Node {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(leader) = nodes.iter().find(|n| n.is_leader()) {
            return leader;
        }
        assert!(
            Instant::now() < deadline,
            "no leader among the running nodes"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Writes `command` on the current leader, following leadership changes.
async fn write(nodes: &[&Node], command: Vec<u8>) -> u64 {
    let deadline = Instant::now() + WAIT;
    loop {
        match leader(nodes).await.write(command.clone()).await {
            Ok(response) => return count_of(&response),
            Err(e @ (RaftError::NotLeader { .. } | RaftError::Timeout { .. })) => {
                assert!(Instant::now() < deadline, "write kept failing: {e}");
                tokio::time::sleep(POLL).await;
            }
            Err(e) => panic!("write failed: {e}"),
        }
    }
}

/// Waits until every node in `nodes` applied what the leader applied, then compares states.
async fn assert_replicated(nodes: &[&Node]) {
    let leader = leader(nodes).await;
    let last = leader.metrics().last_applied.unwrap().index;
    for node in nodes {
        node.wait_for_applied(last, WAIT).await.unwrap();
        assert_eq!(
            state_of(node),
            state_of(leader),
            "node {} replicated",
            node.id()
        );
    }
}

#[test]
fn three_nodes_replicate_and_a_restarted_follower_catches_up() {
    run_bounded(TEST_LIMIT, async {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let n1 = open(dirs[0].path(), 1, loopback_any_port(), StartMode::Bootstrap).await;
        let n2 = open(dirs[1].path(), 2, loopback_any_port(), StartMode::Join).await;
        let n3 = open(dirs[2].path(), 3, loopback_any_port(), StartMode::Join).await;
        assert!(
            n1.is_leader(),
            "the bootstrap node leads its one-member cluster"
        );
        assert!(!n2.is_leader() && !n3.is_leader());
        assert_eq!(n2.metrics().membership_config.voter_ids().count(), 0);

        // Some state before anyone joins: learners must receive it.
        for i in 1..=5u64 {
            assert_eq!(write(&[&n1], put(&format!("early{i}"), "x")).await, i);
        }
        n1.add_learner(2, n2.advertise_addr()).await.unwrap();
        n1.add_learner(3, n3.advertise_addr()).await.unwrap();
        n1.change_membership([1, 2, 3]).await.unwrap();
        let voters: Vec<u64> = n1.metrics().membership_config.voter_ids().collect();
        assert_eq!(voters, vec![1, 2, 3]);

        let all = [&n1, &n2, &n3];
        let mut previous = 5;
        for i in 1..=20u64 {
            let count = write(&all, put(&format!("key{i}"), &i.to_string())).await;
            assert!(count > previous, "responses number writes in order");
            previous = count;
        }
        assert_replicated(&all).await;
        assert_eq!(state_of(&n2).len(), 25);

        // Followers refuse writes and name the leader.
        let current = leader(&all).await;
        let follower = all.iter().find(|n| n.id() != current.id()).unwrap();
        match follower.write(put("nope", "x")).await {
            Err(RaftError::NotLeader {
                leader_id: Some(id),
                leader_addr: Some(addr),
            }) => {
                assert_eq!(id, current.id());
                assert_eq!(addr, current.advertise_addr());
            }
            other => panic!("expected NotLeader, got {other:?}"),
        }

        // Stop node 3. The remaining majority keeps committing, far past what the leader's log
        // keeps, so node 3 can only catch up from a snapshot.
        let n3_addr = n3.listen_addr();
        let n3_applied = n3.metrics().last_applied.unwrap().index;
        n3.shutdown().await.unwrap();
        let two = [&n1, &n2];
        for i in 21..=120u64 {
            write(&two, put(&format!("key{i}"), &i.to_string())).await;
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let purged = leader(&two).await.metrics().purged.map(|p| p.index);
            if purged.unwrap_or(0) > n3_applied + 1 {
                break;
            }
            assert!(Instant::now() < deadline, "leader never purged past node 3");
            tokio::time::sleep(POLL).await;
        }

        let n3 = open(dirs[2].path(), 3, n3_addr, StartMode::Join).await;
        let all = [&n1, &n2, &n3];
        assert_replicated(&all).await;
        assert_eq!(state_of(&n3).len(), 125, "restarted follower caught up");
        let snapshot = n3.metrics().snapshot.expect("node 3 installed a snapshot");
        assert!(
            snapshot.index > n3_applied,
            "snapshot {snapshot:?} covers what node 3 missed"
        );
        n3.with_state(|sm| assert!(sm.loads >= 2, "state reloaded after the snapshot install"));

        // The leader stops: the other two elect one of themselves and keep going.
        let old = leader(&all).await.id();
        let (stopped, rest): (Vec<Node>, Vec<Node>) =
            [n1, n2, n3].into_iter().partition(|n| n.id() == old);
        for node in stopped {
            node.shutdown().await.unwrap();
        }
        let rest_refs: Vec<&Node> = rest.iter().collect();
        let new_leader = leader(&rest_refs).await;
        assert_ne!(new_leader.id(), old);
        write(&rest_refs, put("after", "failover")).await;
        assert_replicated(&rest_refs).await;
        assert_eq!(state_of(rest_refs[0]).len(), 126);
        for node in rest {
            node.shutdown().await.unwrap();
        }
    });
}

#[test]
fn a_learner_catches_up_a_log_larger_than_one_frame() {
    run_bounded(TEST_LIMIT, async {
        let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
        let mut cfg = config(dirs[0].path(), 1, loopback_any_port());
        // Keep everything in the log: the learner must be fed entries, not a snapshot.
        cfg.snapshot_logs_since_last = 10_000;
        let n1 = RaftNode::open(cfg, KvMachine::default()).await.unwrap();
        let mut cfg = config(dirs[1].path(), 2, loopback_any_port());
        cfg.snapshot_logs_since_last = 10_000;
        cfg.start_mode = StartMode::Join;
        let n2 = RaftNode::open(cfg, KvMachine::default()).await.unwrap();

        // 60 entries of 200 KiB: 12 MiB of log, which openraft would send as one AppendEntries
        // without the byte budget.
        let big = "v".repeat(200 * 1024);
        for i in 1..=60u64 {
            write(&[&n1], put(&format!("big{i}"), &big)).await;
        }
        n1.add_learner(2, n2.advertise_addr()).await.unwrap();
        let last = n1.metrics().last_applied.unwrap().index;
        n2.wait_for_applied(last, WAIT).await.unwrap();
        assert_eq!(state_of(&n2), state_of(&n1));
        assert_eq!(n2.metrics().snapshot, None, "caught up from the log");
        n1.shutdown().await.unwrap();
        n2.shutdown().await.unwrap();
    });
}
