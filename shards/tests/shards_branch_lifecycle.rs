//! Tests of the branch lifecycle table: LRU order, eviction at `MAX INSTANCES`, TTL sweeps,
//! explicit removal, eviction counters, engine memory per idle branch, and a property test of
//! random operation sequences against a simple model (a `Vec` ordered by last touch).

use nervix_shards::branch_lifecycle::{
    BranchTable, EvictionCounters, EvictionReason, InvalidMaxInstances, MAX_TABLE_INSTANCES,
    TOUCH_QUEUE_SLACK,
};
use proptest::prelude::*;

type Key = Box<[u8]>;

/// Per-branch state: which `make` call created it, so a re-created branch is visibly fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    created_by: u64,
    inputs: u64,
}

fn table(ttl_ns: u64, max_instances: Option<u32>) -> BranchTable<Key, State> {
    BranchTable::new(ttl_ns, max_instances).expect("valid bound")
}

/// Touches `key` at `now_ns`, returning (created, evicted key and state).
fn touch(
    t: &mut BranchTable<Key, State>,
    key: &[u8],
    now_ns: u64,
    serial: u64,
) -> (bool, Option<(Key, State)>) {
    let touched = t.touch_or_insert(key, now_ns, || State {
        created_by: serial,
        inputs: 0,
    });
    t.get_mut(key).expect("a touched branch is live").inputs += 1;
    (touched.created, touched.evicted)
}

fn lru_keys(t: &BranchTable<Key, State>) -> Vec<Vec<u8>> {
    t.iter_lru().map(|(k, _, _)| k.to_vec()).collect()
}

fn keys(names: &[&str]) -> Vec<Vec<u8>> {
    names.iter().map(|n| n.as_bytes().to_vec()).collect()
}

#[test]
fn lru_order_follows_touches() {
    // (touch sequence, expected order least → most recently used)
    let cases: &[(&[&str], &[&str])] = &[
        (&[], &[]),
        (&["a"], &["a"]),
        (&["a", "b", "c"], &["a", "b", "c"]),
        (&["a", "b", "c", "a"], &["b", "c", "a"]),
        (&["a", "b", "c", "b"], &["a", "c", "b"]),
        (&["a", "b", "c", "c"], &["a", "b", "c"]),
        (&["a", "b", "a", "b", "a"], &["b", "a"]),
        (&["c", "b", "a", "c", "b", "a"], &["c", "b", "a"]),
    ];
    for (i, (seq, expected)) in cases.iter().enumerate() {
        let mut t = table(1_000, None);
        for (now, k) in seq.iter().enumerate() {
            touch(&mut t, k.as_bytes(), now as u64, 0);
        }
        assert_eq!(lru_keys(&t), keys(expected), "case {i}: {seq:?}");
        assert_eq!(t.len(), expected.len(), "case {i}");
        assert_eq!(t.counters(), EvictionCounters::default(), "case {i}");
    }
}

#[test]
fn insert_at_bound_evicts_least_recently_used() {
    // (bound, touch sequence, expected evictions in order, expected final LRU order)
    type Case<'a> = (u32, &'a [&'a str], &'a [&'a str], &'a [&'a str]);
    let cases: &[Case] = &[
        (1, &["a", "b"], &["a"], &["b"]),
        (1, &["a", "a", "a"], &[], &["a"]),
        (2, &["a", "b", "c"], &["a"], &["b", "c"]),
        (2, &["a", "b", "a", "c"], &["b"], &["a", "c"]),
        (
            3,
            &["a", "b", "c", "a", "b", "d", "e"],
            &["c", "a"],
            &["b", "d", "e"],
        ),
        (2, &["a", "b", "c", "a"], &["a", "b"], &["c", "a"]),
    ];
    for (i, (bound, seq, evictions, order)) in cases.iter().enumerate() {
        let mut t = table(1_000, Some(*bound));
        let mut evicted = Vec::new();
        for (now, k) in seq.iter().enumerate() {
            let before = t.len();
            let (created, out) = touch(&mut t, k.as_bytes(), now as u64, now as u64);
            if let Some((key, state)) = out {
                assert!(created, "case {i}: eviction only on insert");
                assert_eq!(
                    before, *bound as usize,
                    "case {i}: eviction only at the bound"
                );
                assert!(
                    state.inputs > 0,
                    "case {i}: evicted state is the branch's own"
                );
                evicted.push(key.to_vec());
            }
            assert!(t.len() <= *bound as usize, "case {i}: above bound");
        }
        assert_eq!(evicted, keys(evictions), "case {i}");
        assert_eq!(lru_keys(&t), keys(order), "case {i}");
        assert_eq!(
            t.counters(),
            EvictionCounters {
                lru: evictions.len() as u64,
                ..EvictionCounters::default()
            },
            "case {i}"
        );
    }
}

#[test]
fn ttl_sweep_releases_exactly_the_expired_and_respects_max_evictions() {
    // Branches a..e touched at 0, 10, 20, 30, 40; TTL 100 (expired when idle > 100).
    // (sweep now, max evictions, expected released in order)
    let cases: &[(u64, usize, &[&str])] = &[
        (100, 10, &[]),
        (101, 10, &["a"]),
        (110, 10, &["a"]),
        (111, 10, &["a", "b"]),
        (141, 10, &["a", "b", "c", "d", "e"]),
        (141, 2, &["a", "b"]),
        (141, 0, &[]),
        (u64::MAX, 3, &["a", "b", "c"]),
        (0, 10, &[]),
    ];
    for (i, (now, max, released)) in cases.iter().enumerate() {
        let mut t = table(100, None);
        for (n, k) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            touch(&mut t, k.as_bytes(), n as u64 * 10, 0);
        }
        let mut out = Vec::new();
        let count = t.sweep(*now, *max, &mut out);
        let got: Vec<Vec<u8>> = out.iter().map(|(k, _)| k.to_vec()).collect();
        assert_eq!(got, keys(released), "case {i}");
        assert_eq!(count, released.len(), "case {i}");
        assert_eq!(t.len(), 5 - released.len(), "case {i}");
        assert_eq!(t.counters().ttl, released.len() as u64, "case {i}");
        assert_eq!(t.counters().get(EvictionReason::Ttl), released.len() as u64);
    }
}

#[test]
fn sweep_stops_at_a_refreshed_branch() {
    let mut t = table(100, None);
    touch(&mut t, b"a", 0, 0);
    touch(&mut t, b"b", 10, 0);
    touch(&mut t, b"a", 90, 0); // a refreshed: now newer than b
    let mut out = Vec::new();
    assert_eq!(t.sweep(150, usize::MAX, &mut out), 1);
    assert_eq!(out[0].0.as_ref(), b"b");
    assert_eq!(lru_keys(&t), keys(&["a"]));
    assert_eq!(t.next_expiry_ns(), Some(191));
    assert_eq!(t.sweep(190, usize::MAX, &mut out), 0);
    assert_eq!(t.sweep(191, usize::MAX, &mut out), 1);
    assert_eq!(t.next_expiry_ns(), None);
}

#[test]
fn remove_counts_explicit_and_reinsert_is_fresh() {
    let mut t = table(100, Some(2));
    touch(&mut t, b"a", 0, 1);
    touch(&mut t, b"a", 1, 99);
    let removed = t.remove(b"a".as_slice()).expect("live");
    assert_eq!(
        removed,
        State {
            created_by: 1,
            inputs: 2
        }
    );
    assert_eq!(
        t.remove(b"a".as_slice()),
        None,
        "second remove finds nothing"
    );
    assert_eq!(t.remove(b"zz".as_slice()), None);
    assert_eq!(t.counters().explicit, 1);
    assert!(t.is_empty());

    let (created, _) = touch(&mut t, b"a", 2, 2);
    assert!(created);
    assert_eq!(
        t.get(b"a".as_slice()),
        Some(&State {
            created_by: 2,
            inputs: 1
        })
    );

    // Evicted by LRU, then re-inserted: fresh state again.
    touch(&mut t, b"b", 3, 3);
    let (_, evicted) = touch(&mut t, b"c", 4, 4);
    assert_eq!(evicted.map(|(k, _)| k.to_vec()), Some(b"a".to_vec()));
    let (created, evicted) = touch(&mut t, b"a", 5, 5);
    assert!(created);
    assert_eq!(evicted.map(|(k, _)| k.to_vec()), Some(b"b".to_vec()));
    assert_eq!(
        t.get(b"a".as_slice()),
        Some(&State {
            created_by: 5,
            inputs: 1
        })
    );

    // Evicted by TTL, then re-inserted: fresh state again.
    let mut out = Vec::new();
    assert_eq!(t.sweep(1_000, usize::MAX, &mut out), 2);
    let (created, _) = touch(&mut t, b"a", 1_001, 6);
    assert!(created);
    assert_eq!(t.get(b"a".as_slice()).map(|s| s.created_by), Some(6));
    assert_eq!(
        t.counters(),
        EvictionCounters {
            ttl: 2,
            lru: 2,
            explicit: 1
        }
    );
}

#[test]
fn reads_do_not_touch() {
    let mut t = table(100, Some(2));
    touch(&mut t, b"a", 0, 0);
    touch(&mut t, b"b", 1, 0);
    t.get_mut(b"a".as_slice()).expect("live").inputs += 10;
    assert_eq!(t.last_input_ns(b"a".as_slice()), Some(0));
    let (_, evicted) = touch(&mut t, b"c", 2, 0);
    assert_eq!(
        evicted.map(|(k, s)| (k.to_vec(), s.inputs)),
        Some((b"a".to_vec(), 11))
    );
}

#[test]
fn backwards_clock_is_clamped() {
    let mut t = table(100, None);
    touch(&mut t, b"a", 50, 0);
    touch(&mut t, b"b", 10, 0); // earlier than a: stamped 50
    assert_eq!(t.last_input_ns(b"b".as_slice()), Some(50));
    assert_eq!(lru_keys(&t), keys(&["a", "b"]));
    let mut out = Vec::new();
    assert_eq!(t.sweep(151, usize::MAX, &mut out), 2);
}

#[test]
fn invalid_bounds_are_refused() {
    for bad in [0, u32::MAX] {
        assert_eq!(
            BranchTable::<Key, State>::new(1, Some(bad)).err(),
            Some(InvalidMaxInstances { max_instances: bad })
        );
    }
    assert!(BranchTable::<Key, State>::new(1, Some(MAX_TABLE_INSTANCES)).is_ok());
    assert!(BranchTable::<Key, State>::new(0, None).is_ok());
    assert_eq!(EvictionReason::Lru.label(), "lru");
    assert_eq!(EvictionReason::Ttl.label(), "ttl");
    assert_eq!(EvictionReason::Explicit.label(), "explicit");
}

/// Branches touched in turn while the least recently used one stays put: every touch leaves a
/// stale entry behind in the middle of the touch queue, which is compacted (its bound is twice
/// the live branches plus `TOUCH_QUEUE_SLACK`), while the order and TTL answers stay exact.
#[test]
fn alternating_touches_keep_the_touch_queue_bounded_and_the_order_exact() {
    let mut t = table(1_000, Some(3));
    let mut serial = 0;
    touch(&mut t, b"a", 0, serial);
    let mut now = 0;
    for round in 0..10_000u64 {
        now = round;
        serial += 1;
        let key: &[u8] = if round % 2 == 0 { b"b" } else { b"c" };
        touch(&mut t, key, now, serial);
    }
    assert_eq!(lru_keys(&t), keys(&["a", "b", "c"]));
    assert_eq!(t.next_expiry_ns(), Some(1_001));
    let bound_bytes = 4 * (2 * 3 + TOUCH_QUEUE_SLACK + 1) * 16;
    assert!(
        t.allocated_bytes() <= bound_bytes,
        "{} bytes held after 10,000 touches of 3 branches",
        t.allocated_bytes()
    );
    // At the bound, a new branch evicts the one touched longest ago: "a", then "b".
    let (_, evicted) = touch(&mut t, b"d", now + 1, serial + 1);
    assert_eq!(evicted.map(|(k, _)| k.to_vec()), Some(b"a".to_vec()));
    let (_, evicted) = touch(&mut t, b"e", now + 2, serial + 2);
    assert_eq!(evicted.map(|(k, _)| k.to_vec()), Some(b"b".to_vec()));
    assert_eq!(lru_keys(&t), keys(&["c", "d", "e"]));
}

/// DESIGN §10: ≤ 1 KiB of engine memory per idle branch. Measured with 16-byte keys kept as
/// `Box<[u8]>` and a pointer-sized state (the caller's state lives behind it), over 100,000 idle
/// branches, counting the slab and map allocations (including load-factor slack and free space)
/// and the heap copy of every key (kept once, in its node).
#[test]
fn idle_branch_engine_memory_is_within_one_kib() {
    const BRANCHES: u32 = 100_000;
    const KEY_BYTES: usize = 16;
    const LIMIT_BYTES_PER_BRANCH: usize = 1024;

    let fixed = BranchTable::<Key, Box<u64>>::OVERHEAD_BYTES_PER_BRANCH;
    let mut t: BranchTable<Key, Box<u64>> = BranchTable::new(300_000_000_000, None).expect("ok");
    for i in 0..BRANCHES {
        let mut key = [0u8; KEY_BYTES];
        key[..4].copy_from_slice(&i.to_le_bytes());
        let _ = t.touch_or_insert(key.as_slice(), u64::from(i), || Box::new(0));
    }
    let per_branch = t.allocated_bytes() / BRANCHES as usize + KEY_BYTES;
    eprintln!(
        "branch lifecycle: fixed overhead {fixed} B/branch (excl. K, V); measured \
         {per_branch} B/branch incl. slab+map slack and the 16 B key's heap copy (K = Box<[u8]>, \
         V = Box<u64>, {BRANCHES} branches)"
    );
    assert!(fixed <= LIMIT_BYTES_PER_BRANCH);
    assert!(
        per_branch <= LIMIT_BYTES_PER_BRANCH,
        "{per_branch} B per idle branch"
    );
}

// ---------------------------------------------------------------------------------------------
// Property test against a model.

const KEYS: u8 = 6;

#[derive(Debug, Clone)]
enum Op {
    Touch { key: u8, advance_ns: u64 },
    TouchEarlier { key: u8, back_ns: u64 },
    Sweep { advance_ns: u64, max: usize },
    Remove { key: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..KEYS, 0u64..30).prop_map(|(key, advance_ns)| Op::Touch { key, advance_ns }),
        1 => (0..KEYS, 0u64..30).prop_map(|(key, back_ns)| Op::TouchEarlier { key, back_ns }),
        2 => (0u64..80, 0usize..4).prop_map(|(advance_ns, max)| Op::Sweep { advance_ns, max }),
        1 => (0..KEYS).prop_map(|key| Op::Remove { key }),
    ]
}

/// One live branch in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ModelBranch {
    key: u8,
    state: State,
    last_ns: u64,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_model(
        ttl_ns in 0u64..100,
        max in prop::option::of(1u32..5),
        // Long enough that a few keys' touches outgrow the touch queue's stale bound (twice
        // the live branches plus 64) and compact it, repeatedly.
        ops in prop::collection::vec(op(), 0..400),
    ) {
        let mut t = table(ttl_ns, max);
        // Ordered least → most recently touched.
        let mut model: Vec<ModelBranch> = Vec::new();
        let mut counters = EvictionCounters::default();
        let mut now = 0u64;
        let mut latest = 0u64;
        let mut serial = 0u64;

        for op in ops {
            match op {
                Op::Touch { key, .. } | Op::TouchEarlier { key, .. } => {
                    let at = match op {
                        Op::Touch { advance_ns, .. } => { now += advance_ns; now }
                        Op::TouchEarlier { back_ns, .. } => now.saturating_sub(back_ns),
                        _ => unreachable!(),
                    };
                    latest = latest.max(at);
                    serial += 1;
                    let (created, evicted) = touch(&mut t, &[key], at, serial);
                    let mut expected_evicted = None;
                    if let Some(pos) = model.iter().position(|b| b.key == key) {
                        let mut b = model.remove(pos);
                        b.state.inputs += 1;
                        b.last_ns = latest;
                        model.push(b);
                        prop_assert!(!created);
                    } else {
                        if max.is_some_and(|m| model.len() >= m as usize) {
                            let b = model.remove(0);
                            counters.lru += 1;
                            expected_evicted = Some((vec![b.key], b.state));
                        }
                        model.push(ModelBranch {
                            key,
                            state: State { created_by: serial, inputs: 1 },
                            last_ns: latest,
                        });
                        prop_assert!(created);
                    }
                    prop_assert_eq!(evicted.map(|(k, s)| (k.to_vec(), s)), expected_evicted);
                }
                Op::Sweep { advance_ns, max: max_evictions } => {
                    now += advance_ns;
                    let mut expected = Vec::new();
                    while expected.len() < max_evictions
                        && model.first().is_some_and(|b| now - b.last_ns > ttl_ns)
                    {
                        let b = model.remove(0);
                        expected.push((vec![b.key], b.state));
                    }
                    counters.ttl += expected.len() as u64;
                    let mut out = Vec::new();
                    let count = t.sweep(now, max_evictions, &mut out);
                    prop_assert_eq!(count, expected.len());
                    let got: Vec<(Vec<u8>, State)> =
                        out.into_iter().map(|(k, s)| (k.to_vec(), s)).collect();
                    prop_assert_eq!(got, expected);
                    // Nothing left behind is expired unless the per-call bound stopped the scan.
                    if count < max_evictions {
                        prop_assert!(model.iter().all(|b| now - b.last_ns <= ttl_ns));
                    }
                }
                Op::Remove { key } => {
                    let expected = model.iter().position(|b| b.key == key).map(|pos| {
                        counters.explicit += 1;
                        model.remove(pos).state
                    });
                    prop_assert_eq!(t.remove([key].as_slice()), expected);
                }
            }

            let got: Vec<ModelBranch> = t
                .iter_lru()
                .map(|(k, s, last_ns)| ModelBranch { key: k[0], state: *s, last_ns })
                .collect();
            prop_assert_eq!(&got, &model);
            prop_assert_eq!(t.len(), model.len());
            prop_assert_eq!(t.is_empty(), model.is_empty());
            prop_assert_eq!(t.counters(), counters);
            prop_assert_eq!(
                t.next_expiry_ns(),
                model.first().map(|b| b.last_ns + ttl_ns + 1)
            );
            if let Some(m) = max {
                prop_assert!(t.len() <= m as usize);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `touch_all` against touching one by one.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Batches of touches (keys repeated, new, past the bound) leave the table exactly as the
    /// same touches one by one: order, last-input instants, states, evictions and counters.
    #[test]
    fn touch_all_is_touching_one_by_one(
        max in prop::option::of(1u32..5),
        batches in prop::collection::vec(
            (prop::collection::vec(0..KEYS, 0..8), 0u64..30, 0u64..3),
            0..60,
        ),
    ) {
        let mut batched = table(50, max);
        let mut single = table(50, max);
        let mut now = 0u64;
        for (serial, (keys, advance_ns, back_ns)) in batches.into_iter().enumerate() {
            now += advance_ns;
            // Now and then a batch stamped earlier than the latest: both clamp it.
            let at = now.saturating_sub(back_ns);
            let make = || State { created_by: serial as u64, inputs: 0 };
            let keys: Vec<[u8; 1]> = keys.into_iter().map(|k| [k]).collect();
            let mut evicted_batched = Vec::new();
            batched.touch_all(keys.iter().map(|k| &k[..]), at, make, &mut evicted_batched);
            let mut evicted_single = Vec::new();
            for key in &keys {
                evicted_single.extend(single.touch_or_insert(&key[..], at, make).evicted);
            }
            prop_assert_eq!(evicted_batched, evicted_single);
            let view = |t: &BranchTable<Key, State>| -> Vec<(Vec<u8>, State, u64)> {
                t.iter_lru().map(|(k, v, ns)| (k.to_vec(), *v, ns)).collect()
            };
            prop_assert_eq!(view(&batched), view(&single));
            prop_assert_eq!(batched.counters(), single.counters());
        }
        // Sweeps then agree too: the instants are the same.
        let (mut out_batched, mut out_single) = (Vec::new(), Vec::new());
        batched.sweep(now + 60, usize::MAX, &mut out_batched);
        single.sweep(now + 60, usize::MAX, &mut out_single);
        prop_assert_eq!(out_batched, out_single);
    }
}
