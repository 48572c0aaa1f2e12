//! Compiling and running signaling programs: jq programs over one frame with the captured
//! handshake state bound to `$state`, under the same step and stack bounds as JAQ codecs.
//!
//! Why a runner of its own: codec programs (`crate::codec::jaq`) run without global
//! variables, while every signaling program may read `$state`, which must be declared to
//! jaq's compiler and bound at each run. The bound holds for the same reason as there: jaq
//! fetches its look-up table through [`HasLut::lut`] on every term it evaluates, so
//! [`Guard`] counts a step there and checks the stack's growth since the run started; the
//! only unbounded native iterator, `range/3`, is replaced by one that counts its elements.
//! Past [`MAX_JAQ_STEPS`] or [`MAX_JAQ_STACK_BYTES`] the guard unwinds with `resume_unwind`
//! and [`run`] catches exactly that payload (the compiled filter is never mutated by a run).
//! `env` yields `{}` and `stderr_empty` writes nothing: a program cannot read the node's
//! environment or write to its stderr. Module loading and imports are refused.

use std::cell::Cell;
use std::cmp::Ordering;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use jaq_core::box_iter::box_once;
use jaq_core::data::HasLut;
use jaq_core::load::{import, Arena, File, Loader};
use jaq_core::native::{self, v, Fun};
use jaq_core::{Compiler, Ctx, Cv, DataT, Exn, Lut, ValXs, Vars};
use jaq_json::{Map, Val};

use crate::codec::jaq::{MAX_JAQ_STACK_BYTES, MAX_JAQ_STEPS};

/// The variable every signaling program may read.
pub const STATE_VAR: &str = "$state";

/// The data kind programs run with.
pub(crate) struct Kind;

impl DataT for Kind {
    type V<'a> = Val;
    type Data<'a> = &'a Guard<'a>;
}

/// A compiled signaling program.
pub(crate) type Filter = jaq_core::Filter<Kind>;

/// Per-run data: the look-up table, the step count and the stack position at the start.
pub(crate) struct Guard<'a> {
    lut: &'a Lut<Kind>,
    steps: Cell<u64>,
    base: usize,
}

/// The payload the guard unwinds with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    Steps,
    Stack,
}

impl Guard<'_> {
    fn tick(&self) {
        let steps = self.steps.get() + 1;
        self.steps.set(steps);
        if steps > MAX_JAQ_STEPS {
            resume_unwind(Box::new(Limit::Steps));
        }
        if stack_position().abs_diff(self.base) > MAX_JAQ_STACK_BYTES {
            resume_unwind(Box::new(Limit::Stack));
        }
    }
}

impl<'a> HasLut<'a, Kind> for &'a Guard<'a> {
    fn lut(&self) -> &'a Lut<Kind> {
        self.tick();
        self.lut
    }
}

/// The address of a local of this (never inlined) frame: how deep the stack is now.
#[inline(never)]
fn stack_position() -> usize {
    let marker = 0u8;
    std::ptr::from_ref(std::hint::black_box(&marker)).addr()
}

/// Compiles `code` with `$state` declared, or says why it does not compile.
pub(crate) fn compile(code: &str) -> Result<Filter, String> {
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let arena = Arena::default();
    let modules = Loader::new(defs)
        .load(&arena, File { path: (), code })
        .map_err(|errors| load_message(code, errors))?;
    import(&modules, |_| Err("imports are not supported".to_string()))
        .map_err(|errors| load_message(code, errors))?;
    Compiler::default()
        .with_funs(funs())
        .with_global_vars([STATE_VAR])
        .compile(modules)
        .map_err(|errors| {
            let messages: Vec<String> = errors
                .into_iter()
                .flat_map(|(_, errs)| errs)
                .map(|(found, undefined)| {
                    format!(
                        "undefined {} '{found}' at offset {}",
                        undefined.as_str(),
                        jaq_core::load::span(code, found).start
                    )
                })
                .collect();
            messages.join("; ")
        })
}

fn load_message(code: &str, errors: jaq_core::load::Errors<&str, ()>) -> String {
    use jaq_core::load::Error;
    let at = |found: &str| {
        if found.is_empty() {
            "at the end".to_string()
        } else {
            format!("at offset {}", jaq_core::load::span(code, found).start)
        }
    };
    let messages: Vec<String> = errors
        .into_iter()
        .flat_map(|(_, error)| match error {
            Error::Io(errs) => errs
                .into_iter()
                .map(|(path, e)| format!("cannot load '{path}': {e}"))
                .collect::<Vec<_>>(),
            Error::Lex(errs) => errs
                .into_iter()
                .map(|(expected, found)| format!("expected {} {}", expected.as_str(), at(found)))
                .collect(),
            Error::Parse(errs) => errs
                .into_iter()
                .map(|(expected, found)| format!("expected {} {}", expected.as_str(), at(found)))
                .collect(),
        })
        .collect();
    messages.join("; ")
}

/// jaq's natives with `range/3`, `env` and `stderr_empty` replaced.
fn funs() -> impl Iterator<Item = Fun<Kind>> {
    let replaced = |name: &str, arity: usize| {
        matches!(
            (name, arity),
            ("range", 3) | ("env", 0) | ("stderr_empty", 0)
        )
    };
    jaq_core::funs::<Kind>()
        .chain(jaq_std::funs::<Kind>())
        .chain(jaq_json::funs::<Kind>())
        .filter(move |(name, args, _)| !replaced(name, args.len()))
        .chain([
            native::run::<Kind>(("range", v(3), range)),
            native::run::<Kind>(("env", v(0), empty_env)),
            native::run::<Kind>(("stderr_empty", v(0), nothing)),
        ])
}

fn empty_env<'a>(_: Cv<'a, Kind>) -> ValXs<'a, <Kind as DataT>::V<'a>> {
    box_once(Ok(Val::obj(Map::default())))
}

fn nothing<'a>(_: Cv<'a, Kind>) -> ValXs<'a, <Kind as DataT>::V<'a>> {
    Box::new(std::iter::empty())
}

/// `range($from; $upto; $by)` as jaq-core defines it, counting a step per element.
fn range<'a>(mut cv: Cv<'a, Kind>) -> ValXs<'a, <Kind as DataT>::V<'a>> {
    let by = cv.0.pop_var();
    let to = cv.0.pop_var();
    let from = cv.0.pop_var();
    let guard: &'a Guard<'a> = cv.0.data();
    let direction = by
        .partial_cmp(&Val::from(0isize))
        .unwrap_or(Ordering::Equal);
    let mut next: Result<Val, Exn<'a, Val>> = Ok(from);
    Box::new(std::iter::from_fn(move || match next.clone() {
        Ok(x) => {
            let more = match direction {
                Ordering::Greater => x < to,
                Ordering::Less => x > to,
                Ordering::Equal => x != to,
            };
            more.then(|| {
                guard.tick();
                std::mem::replace(&mut next, (x + by.clone()).map_err(Exn::from))
            })
        }
        Err(e) => {
            next = Ok(to.clone());
            Some(Err(e))
        }
    }))
}

/// Runs `filter` on `input` with `$state` bound to `state`; collects at most `max_outputs`
/// outputs. Any jq error, a bound, or one output too many is an `Err` saying which.
pub(crate) fn run(
    filter: &Filter,
    input: Val,
    state: &Val,
    max_outputs: usize,
) -> Result<Vec<Val>, String> {
    guarded(filter, input, state, max_outputs, false)
}

/// The first output of `filter` on `input` (later outputs are never computed); an error
/// before it is an `Err`.
pub(crate) fn first(filter: &Filter, input: Val, state: &Val) -> Result<Option<Val>, String> {
    guarded(filter, input, state, 1, true).map(|mut outputs| outputs.pop())
}

/// One bounded run; with `stop_at_max`, reaching `max_outputs` ends the run instead of
/// failing it.
fn guarded(
    filter: &Filter,
    input: Val,
    state: &Val,
    max_outputs: usize,
    stop_at_max: bool,
) -> Result<Vec<Val>, String> {
    let guard = Guard {
        lut: &filter.lut,
        steps: Cell::new(0),
        base: stack_position(),
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let ctx = Ctx::<Kind>::new(&guard, Vars::new([state.clone()]));
        let mut outputs = Vec::new();
        for output in filter.id.run((ctx, input)) {
            let value = output.map_err(describe)?;
            if outputs.len() == max_outputs && stop_at_max {
                break;
            }
            if outputs.len() == max_outputs {
                return Err(format!("it produced more than {max_outputs} value(s)"));
            }
            outputs.push(value);
        }
        Ok(outputs)
    }));
    match outcome {
        Ok(result) => result,
        Err(payload) => match payload.downcast::<Limit>() {
            Ok(limit) => Err(match *limit {
                Limit::Steps => format!("it ran past {MAX_JAQ_STEPS} steps"),
                Limit::Stack => format!("it used over {MAX_JAQ_STACK_BYTES} bytes of stack"),
            }),
            // A real panic: not ours to swallow.
            Err(other) => resume_unwind(other),
        },
    }
}

fn describe(e: Exn<'_, Val>) -> String {
    match e.get_err() {
        Ok(error) => match error.into_val() {
            Val::TStr(text) => String::from_utf8_lossy(&text).into_owned(),
            other => other.to_string(),
        },
        Err(other) => match other.get_halt() {
            Ok(code) => format!("halted with exit code {code}"),
            Err(_) => "unexpected break".to_string(),
        },
    }
}
