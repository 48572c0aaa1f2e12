//! Durability across `kill -9`: a child process (this test binary re-executed in writer mode)
//! writes entries and prints each acknowledged one; the parent kills it mid-stream, reopens the
//! data directory and checks that every acknowledged write is there.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{config, count_of, loopback_any_port, put, run_bounded, KvMachine};
use nervix_raft::RaftNode;

/// Set (to a data directory) in the child's environment: run as the writer.
const WRITER_DIR_ENV: &str = "NERVIX_RAFT_CRASH_WRITER_DIR";
/// The child stops on its own after this many writes if it was not killed.
const CHILD_MAX_WRITES: u64 = 100_000;
/// The parent kills the child once it has seen this many acknowledgements.
const KILL_AFTER_ACKS: u64 = 150;
const TEST_LIMIT: Duration = Duration::from_secs(120);

/// Writer mode: a no-op unless the parent set [`WRITER_DIR_ENV`].
#[test]
fn crash_writer_child() {
    let Some(dir) = std::env::var_os(WRITER_DIR_ENV) else {
        return;
    };
    run_bounded(TEST_LIMIT, async move {
        let node = RaftNode::open(
            config(std::path::Path::new(&dir), 1, loopback_any_port()),
            KvMachine::default(),
        )
        .await
        .unwrap();
        for i in 1..=CHILD_MAX_WRITES {
            let response = node
                .write(put(&format!("key{i}"), &format!("v{i}")))
                .await
                .unwrap();
            assert_eq!(count_of(&response), i);
            // One line per acknowledged write; println! flushes the line to the pipe.
            println!("ACK {i}");
        }
        node.shutdown().await.unwrap();
    });
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_writer_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WRITER_DIR_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<u64>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The test harness may print its own text before ours on the first line.
            if let Some(pos) = line.find("ACK ") {
                if tx.send(line[pos + 4..].trim().parse().unwrap()).is_err() {
                    break;
                }
            }
        }
    });

    let deadline = Instant::now() + TEST_LIMIT;
    let mut acked = 0u64;
    while acked < KILL_AFTER_ACKS {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(n) => {
                assert_eq!(n, acked + 1, "acknowledgements arrive in order");
                acked = n;
            }
            Err(e) => {
                let _ = child.kill();
                panic!("writer stopped acknowledging after {acked} writes: {e}");
            }
        }
    }
    // SIGKILL: no destructor, no shutdown, no final fsync.
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the writer was killed, not finished");
    // Acknowledgements printed before the kill still count: drain the pipe.
    reader.join().unwrap();
    while let Ok(n) = rx.try_recv() {
        assert_eq!(n, acked + 1);
        acked = n;
    }
    assert!(acked >= KILL_AFTER_ACKS);

    run_bounded(TEST_LIMIT, async {
        let node = RaftNode::open(
            config(dir.path(), 1, loopback_any_port()),
            KvMachine::default(),
        )
        .await
        .unwrap();
        let (count, missing) = node.with_state(|sm| {
            let missing: Vec<u64> = (1..=acked)
                .filter(|i| sm.map.get(&format!("key{i}")) != Some(&format!("v{i}")))
                .collect();
            (sm.count, missing)
        });
        assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
        assert!(
            count >= acked,
            "applied count {count} below acknowledged {acked}"
        );
        // The node keeps working on the recovered directory.
        let response = node.write(put("after", "crash")).await.unwrap();
        assert_eq!(count_of(&response), count + 1);
        node.shutdown().await.unwrap();
    });
}
