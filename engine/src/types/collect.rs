//! Collecting the typed trees validation produces, so an entity's model can keep every
//! expression of its definition type-resolved.
//!
//! Validation checks each expression exactly once through [`super::check`] or
//! [`super::check_expecting`]; while [`collecting`] runs, each successful result is recorded in
//! a per-thread list. Validation is synchronous on one thread, so the list sees exactly the
//! expressions of the one entity being validated, and nothing else can observe it.

use std::cell::RefCell;

use super::TypedExpr;

thread_local! {
    static RECORDED: RefCell<Option<Vec<TypedExpr>>> = const { RefCell::new(None) };
}

/// Runs `validate`, returning its result and every typed tree checked meanwhile, in order
/// (a tree checked twice at the same place is kept once).
pub fn collecting<R>(validate: impl FnOnce() -> R) -> (R, Vec<TypedExpr>) {
    let outer = RECORDED.with(|cell| cell.replace(Some(Vec::new())));
    let result = validate();
    let recorded = RECORDED
        .with(|cell| cell.replace(outer))
        .unwrap_or_default();
    let mut unique: Vec<TypedExpr> = Vec::with_capacity(recorded.len());
    for typed in recorded {
        let duplicate = unique.iter().any(|u| {
            u.span.start == typed.span.start && u.span.end == typed.span.end && *u == typed
        });
        if !duplicate {
            unique.push(typed);
        }
    }
    (result, unique)
}

/// Records one checked tree when a [`collecting`] call is running on this thread.
pub(crate) fn record(typed: &TypedExpr) {
    RECORDED.with(|cell| {
        if let Some(list) = cell.borrow_mut().as_mut() {
            list.push(typed.clone());
        }
    });
}
