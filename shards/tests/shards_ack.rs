//! Property tests of the acknowledgement slab: random interleavings of opens, pending, acks,
//! nacks, intake closes, drains and stale handles, checked against a simple model.

use std::collections::HashMap;

use nervix_shards::ack::{AckError, AckHandle, AckSlab, Effect, Outcome, SlabFull};
use proptest::prelude::*;

const CAPACITY_ROOTS: u32 = 4;

#[derive(Debug, Clone)]
enum Op {
    Open,
    AddPending { pick: usize, n: u64 },
    Ack { pick: usize, n: u64 },
    Nack { pick: usize },
    CloseIntake { pick: usize },
    Batch { picks: Vec<(usize, bool)> },
    Drain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Open),
        3 => (any::<usize>(), 0u64..4).prop_map(|(pick, n)| Op::AddPending { pick, n }),
        4 => (any::<usize>(), 0u64..4).prop_map(|(pick, n)| Op::Ack { pick, n }),
        1 => any::<usize>().prop_map(|pick| Op::Nack { pick }),
        2 => any::<usize>().prop_map(|pick| Op::CloseIntake { pick }),
        2 => prop::collection::vec((any::<usize>(), prop::bool::weighted(0.9)), 0..6)
            .prop_map(|picks| Op::Batch { picks }),
        2 => Just(Op::Drain),
    ]
}

/// The model's view of one issued handle.
#[derive(Debug, Clone, Copy)]
struct Model {
    token: u64,
    pending: u64,
    intake_closed: bool,
    resolved: Option<Outcome>,
    drained: bool,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn interleavings_resolve_exactly_once_and_never_early(ops in prop::collection::vec(op(), 1..200)) {
        let mut slab = AckSlab::new(CAPACITY_ROOTS).unwrap();
        // Every handle ever issued (including stale ones), with its model.
        let mut issued: Vec<(AckHandle, Model)> = Vec::new();
        let mut resolutions: HashMap<u64, usize> = HashMap::new();
        let mut next_token = 0u64;
        let mut out = Vec::new();

        for op in ops {
            let len = issued.len().max(1);
            let live = issued.iter().filter(|(_, m)| !m.drained).count() as u32;
            match op {
                Op::Open => {
                    let result = slab.open(next_token);
                    if live == CAPACITY_ROOTS {
                        prop_assert_eq!(result, Err(SlabFull { capacity_roots: CAPACITY_ROOTS }));
                    } else {
                        let handle = result.unwrap();
                        prop_assert!(handle.index < CAPACITY_ROOTS);
                        prop_assert!(issued.iter().all(|(h, m)| m.drained || h.index != handle.index));
                        issued.push((handle, Model { token: next_token, pending: 0, intake_closed: false, resolved: None, drained: false }));
                        next_token += 1;
                    }
                }
                Op::Drain => {
                    out.clear();
                    slab.drain_resolved(&mut out);
                    for &(token, outcome) in &out {
                        *resolutions.entry(token).or_default() += 1;
                        let model = issued.iter_mut().find(|(_, m)| m.token == token).map(|(_, m)| m).unwrap();
                        prop_assert_eq!(model.resolved, Some(outcome));
                        prop_assert!(!model.drained);
                        model.drained = true;
                    }
                    prop_assert!(issued.iter().all(|(_, m)| m.drained || m.resolved.is_none()));
                }
                Op::Batch { picks } => {
                    if issued.is_empty() { continue; }
                    let entries: Vec<(AckHandle, Outcome)> = picks.iter().map(|&(pick, ack)| {
                        (issued[pick % issued.len()].0, if ack { Outcome::Acked } else { Outcome::Nacked })
                    }).collect();
                    let mut expected_stale = 0;
                    let mut expected_refused = 0;
                    for &(pick, ack) in &picks {
                        let model = &mut issued[pick % len].1;
                        if model.drained { expected_stale += 1; continue; }
                        if model.resolved.is_some() { continue; }
                        if ack {
                            if model.pending == 0 { expected_refused += 1; continue; }
                            model.pending -= 1;
                            if model.intake_closed && model.pending == 0 { model.resolved = Some(Outcome::Acked); }
                        } else {
                            model.resolved = Some(Outcome::Nacked);
                        }
                    }
                    let summary = slab.apply_batch(&entries);
                    prop_assert_eq!(summary.stale, expected_stale);
                    prop_assert_eq!(summary.refused, expected_refused);
                    prop_assert_eq!(summary.applied + summary.ignored + summary.stale + summary.refused, entries.len());
                }
                Op::AddPending { .. } | Op::Ack { .. } | Op::Nack { .. } | Op::CloseIntake { .. }
                    if issued.is_empty() => {}
                Op::AddPending { pick, n } => {
                    let (handle, model) = &mut issued[pick % len];
                    let result = slab.add_pending(*handle, n);
                    if model.drained {
                        prop_assert_eq!(result, Err(AckError::StaleHandle { handle: *handle }));
                    } else if model.resolved.is_some() {
                        prop_assert_eq!(result, Ok(Effect::Ignored));
                    } else if model.intake_closed {
                        prop_assert_eq!(result, Err(AckError::IntakeClosed { handle: *handle }));
                    } else {
                        prop_assert_eq!(result, Ok(Effect::Counted));
                        model.pending += n;
                    }
                }
                Op::Ack { pick, n } => {
                    let (handle, model) = &mut issued[pick % len];
                    let result = slab.ack(*handle, n);
                    if model.drained {
                        prop_assert_eq!(result, Err(AckError::StaleHandle { handle: *handle }));
                    } else if model.resolved.is_some() {
                        prop_assert_eq!(result, Ok(Effect::Ignored));
                    } else if n > model.pending {
                        prop_assert_eq!(result, Err(AckError::AckExceedsPending { handle: *handle, pending: model.pending, acked: n }));
                    } else {
                        model.pending -= n;
                        if model.intake_closed && model.pending == 0 {
                            prop_assert_eq!(result, Ok(Effect::Resolved(Outcome::Acked)));
                            model.resolved = Some(Outcome::Acked);
                        } else {
                            prop_assert_eq!(result, Ok(Effect::Counted));
                        }
                    }
                }
                Op::Nack { pick } => {
                    let (handle, model) = &mut issued[pick % len];
                    let result = slab.nack(*handle);
                    if model.drained {
                        prop_assert_eq!(result, Err(AckError::StaleHandle { handle: *handle }));
                    } else if model.resolved.is_some() {
                        prop_assert_eq!(result, Ok(Effect::Ignored));
                    } else {
                        prop_assert_eq!(result, Ok(Effect::Resolved(Outcome::Nacked)));
                        model.resolved = Some(Outcome::Nacked);
                    }
                }
                Op::CloseIntake { pick } => {
                    let (handle, model) = &mut issued[pick % len];
                    let result = slab.close_intake(*handle);
                    if model.drained {
                        prop_assert_eq!(result, Err(AckError::StaleHandle { handle: *handle }));
                    } else if model.resolved.is_some() {
                        prop_assert_eq!(result, Ok(Effect::Ignored));
                    } else if model.intake_closed {
                        prop_assert_eq!(result, Err(AckError::IntakeClosed { handle: *handle }));
                    } else {
                        model.intake_closed = true;
                        if model.pending == 0 {
                            prop_assert_eq!(result, Ok(Effect::Resolved(Outcome::Acked)));
                            model.resolved = Some(Outcome::Acked);
                        } else {
                            prop_assert_eq!(result, Ok(Effect::Counted));
                        }
                    }
                }
            }
            let open = issued.iter().filter(|(_, m)| m.resolved.is_none()).count() as u32;
            let undrained = issued.iter().filter(|(_, m)| m.resolved.is_some() && !m.drained).count();
            prop_assert_eq!(slab.open_roots(), open);
            prop_assert_eq!(slab.undrained_roots(), undrained);
            prop_assert!(open as usize + undrained <= CAPACITY_ROOTS as usize);
            let acked = issued.iter().filter(|(_, m)| m.resolved == Some(Outcome::Acked)).count() as u64;
            let nacked = issued.iter().filter(|(_, m)| m.resolved == Some(Outcome::Nacked)).count() as u64;
            prop_assert_eq!(slab.acked_total(), acked);
            prop_assert_eq!(slab.nacked_total(), nacked);
        }
        prop_assert!(resolutions.values().all(|&count| count == 1));
    }
}

#[test]
fn transfer_splits_held_units_after_intake_closed_and_resolves_at_zero() {
    let mut slab: AckSlab<u64> = AckSlab::new(4).unwrap();
    let root = slab.open(7).unwrap();
    slab.add_pending(root, 10).unwrap();
    slab.close_intake(root).unwrap();
    // A junction holding 10 rows hands on 25 derived rows.
    assert_eq!(slab.transfer(root, 10, 25).unwrap(), Effect::Counted);
    assert_eq!(slab.ack(root, 24).unwrap(), Effect::Counted);
    // A filter dropping the last row transfers it into nothing: the root resolves.
    assert_eq!(
        slab.transfer(root, 1, 0).unwrap(),
        Effect::Resolved(Outcome::Acked)
    );
    let mut out = Vec::new();
    slab.drain_resolved(&mut out);
    assert_eq!(out, vec![(7, Outcome::Acked)]);
}

#[test]
fn transfer_of_more_than_pending_is_refused_and_changes_nothing() {
    let mut slab: AckSlab<u64> = AckSlab::new(4).unwrap();
    let root = slab.open(1).unwrap();
    slab.add_pending(root, 2).unwrap();
    assert!(matches!(
        slab.transfer(root, 3, 1),
        Err(AckError::AckExceedsPending { .. })
    ));
    assert_eq!(slab.ack(root, 2).unwrap(), Effect::Counted);
}
