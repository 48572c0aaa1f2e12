//! Shared helpers of the raft integration tests: a tiny key-value state machine that keeps its
//! data in the `state` database, and test configurations.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use nervix_raft::{RaftConfig, StateMachine, StateReadTxn, StateTxn};

/// Keys of the map live under this prefix of the `state` database.
const KEY_PREFIX: &[u8] = b"k/";
/// Number of commands applied so far, big-endian u64.
const COUNT_KEY: &[u8] = b"m/count";

/// A key-value map plus a count of applied commands. A command is `key=value`; its response is
/// the count after applying it (big-endian u64), so responses number the writes in apply order.
#[derive(Debug, Default)]
pub struct KvMachine {
    pub map: BTreeMap<String, String>,
    pub count: u64,
    pub loads: u64,
}

impl StateMachine for KvMachine {
    fn apply(&mut self, txn: &mut StateTxn<'_>, command: &[u8]) -> Vec<u8> {
        let text = std::str::from_utf8(command).expect("test commands are UTF-8");
        let (key, value) = text.split_once('=').expect("test commands are key=value");
        txn.put(&[KEY_PREFIX, key.as_bytes()].concat(), value.as_bytes())
            .expect("state put");
        self.count += 1;
        txn.put(COUNT_KEY, &self.count.to_be_bytes())
            .expect("state put");
        self.map.insert(key.to_string(), value.to_string());
        self.count.to_be_bytes().to_vec()
    }

    fn load(&mut self, txn: &StateReadTxn<'_>) -> Result<(), String> {
        self.map.clear();
        for item in txn.prefix(KEY_PREFIX).map_err(|e| e.to_string())? {
            let (key, value) = item.map_err(|e| e.to_string())?;
            let key = std::str::from_utf8(&key[KEY_PREFIX.len()..]).map_err(|e| e.to_string())?;
            let value = std::str::from_utf8(value).map_err(|e| e.to_string())?;
            self.map.insert(key.to_string(), value.to_string());
        }
        self.count = match txn.get(COUNT_KEY).map_err(|e| e.to_string())? {
            Some(bytes) => u64::from_be_bytes(bytes.try_into().map_err(|_| "bad count")?),
            None => 0,
        };
        self.loads += 1;
        Ok(())
    }
}

/// The command that sets `key` to `value`.
pub fn put(key: &str, value: &str) -> Vec<u8> {
    format!("{key}={value}").into_bytes()
}

/// Decodes a response of [`KvMachine`].
pub fn count_of(response: &[u8]) -> u64 {
    u64::from_be_bytes(response.try_into().expect("8-byte response"))
}

/// A loopback configuration for node `id` in `dir`, small snapshot thresholds.
pub fn config(dir: &Path, id: u64, addr: SocketAddr) -> RaftConfig {
    let mut config = RaftConfig::new(dir, id, addr);
    config.snapshot_logs_since_last = 20;
    config.max_in_snapshot_log_to_keep = 5;
    config.env_map_size_bytes = 64 * 1024 * 1024;
    config.leader_wait_timeout_ms = 20_000;
    config
}

pub fn loopback_any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Runs `test` on a current-thread runtime (the control core's kind), failing after `limit`.
pub fn run_bounded<F: Future<Output = ()>>(limit: Duration, test: F) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        tokio::time::timeout(limit, test)
            .await
            .expect("test exceeded its time limit");
    });
}
