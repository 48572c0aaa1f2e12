//! A one-member cluster: ordered writes, restart from the same directory, snapshot and log purge,
//! and the directory's identity checks.

mod common;

use std::time::Duration;

use common::{config, count_of, loopback_any_port, put, run_bounded, KvMachine};
use nervix_raft::{RaftError, RaftNode};

const TEST_LIMIT: Duration = Duration::from_secs(120);
const WAIT: Duration = Duration::from_secs(20);

#[test]
fn writes_are_applied_in_order_and_survive_restart() {
    run_bounded(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let node = RaftNode::open(
            config(dir.path(), 1, loopback_any_port()),
            KvMachine::default(),
        )
        .await
        .unwrap();
        assert!(node.is_leader());
        assert_eq!(node.leader().map(|(id, _)| id), Some(1));

        for i in 1..=10u64 {
            let response = node
                .write(put(&format!("key{i}"), &format!("v{i}")))
                .await
                .unwrap();
            assert_eq!(count_of(&response), i, "writes are answered in order");
        }
        node.with_state(|sm| {
            assert_eq!(sm.count, 10);
            assert_eq!(sm.map.len(), 10);
            assert_eq!(sm.map["key7"], "v7");
        });
        let last_index = node.metrics().last_log_index.unwrap();
        node.shutdown().await.unwrap();

        let node = RaftNode::open(
            config(dir.path(), 1, loopback_any_port()),
            KvMachine::default(),
        )
        .await
        .unwrap();
        node.with_state(|sm| {
            assert_eq!(sm.count, 10, "state is intact after reopen");
            assert_eq!(sm.map["key10"], "v10");
        });
        let metrics = node.metrics();
        assert!(
            metrics.last_log_index.unwrap() >= last_index,
            "log kept: {metrics:?}"
        );
        assert!(
            metrics.last_applied.unwrap().index >= last_index,
            "{metrics:?}"
        );
        let response = node.write(put("key11", "v11")).await.unwrap();
        assert_eq!(count_of(&response), 11);
        node.shutdown().await.unwrap();
    });
}

#[test]
fn snapshot_and_purge_then_restart_from_snapshot_and_log() {
    run_bounded(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), 7, loopback_any_port());
        let (since_last, keep) = (
            cfg.snapshot_logs_since_last,
            cfg.max_in_snapshot_log_to_keep,
        );
        let node = RaftNode::open(cfg, KvMachine::default()).await.unwrap();
        const WRITES: u64 = 65;
        for i in 1..=WRITES {
            node.write(put(&format!("key{i}"), &i.to_string()))
                .await
                .unwrap();
        }
        let last = node.metrics().last_applied.unwrap().index;
        // The policy builds a snapshot every `since_last` applied entries, then purges all but
        // `keep` of the entries it covers.
        let mut rx_wait = Duration::ZERO;
        loop {
            let m = node.metrics();
            let snapshot = m.snapshot.map(|s| s.index).unwrap_or(0);
            let purged = m.purged.map(|p| p.index).unwrap_or(0);
            if snapshot + since_last > last && purged + keep >= snapshot && purged > 0 {
                break;
            }
            assert!(rx_wait < WAIT, "no snapshot/purge: {m:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
            rx_wait += Duration::from_millis(20);
        }
        let before = node.metrics();
        let snapshot_files: Vec<_> = std::fs::read_dir(dir.path().join("snapshots"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            snapshot_files.len(),
            1,
            "only the current snapshot file is kept: {snapshot_files:?}"
        );
        node.shutdown().await.unwrap();

        let node = RaftNode::open(
            config(dir.path(), 7, loopback_any_port()),
            KvMachine::default(),
        )
        .await
        .unwrap();
        let after = node.metrics();
        assert_eq!(after.snapshot, before.snapshot, "snapshot is found again");
        assert_eq!(after.purged, before.purged, "purged prefix stays purged");
        assert!(after.last_applied.unwrap().index >= last);
        node.with_state(|sm| {
            assert_eq!(sm.count, WRITES);
            for i in 1..=WRITES {
                assert_eq!(sm.map[&format!("key{i}")], i.to_string());
            }
        });
        let response = node.write(put("after", "restart")).await.unwrap();
        assert_eq!(count_of(&response), WRITES + 1);
        node.shutdown().await.unwrap();
    });
}

#[test]
fn directory_identity_is_checked() {
    run_bounded(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let node = RaftNode::open(
            config(dir.path(), 1, loopback_any_port()),
            KvMachine::default(),
        )
        .await
        .unwrap();
        let again = RaftNode::open(
            config(dir.path(), 1, loopback_any_port()),
            KvMachine::default(),
        )
        .await;
        assert!(
            matches!(again, Err(RaftError::AlreadyOpen { .. })),
            "{:?}",
            again.err()
        );
        node.shutdown().await.unwrap();

        let other = RaftNode::open(
            config(dir.path(), 2, loopback_any_port()),
            KvMachine::default(),
        )
        .await;
        match other {
            Err(RaftError::NodeIdMismatch {
                stored: 1,
                configured: 2,
                ..
            }) => {}
            other => panic!("expected a node id mismatch, got {:?}", other.err()),
        }
    });
}

#[test]
fn oversized_commands_are_refused() {
    run_bounded(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let node = RaftNode::open(
            config(dir.path(), 1, loopback_any_port()),
            KvMachine::default(),
        )
        .await
        .unwrap();
        let too_big = vec![b'x'; nervix_raft::config::MAX_COMMAND_BYTES + 1];
        assert!(matches!(
            node.write(too_big).await,
            Err(RaftError::CommandTooLarge { .. })
        ));
        node.shutdown().await.unwrap();
    });
}
