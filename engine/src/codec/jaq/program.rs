//! Compiling and running jaq programs under a step and a stack bound.
//!
//! Programs are compiled with the jaq-core, jaq-std and jaq-json definitions and natives,
//! except three natives replaced here: `range/3` (counts a step per element), `env` (yields
//! `{}`: a codec must not read the node's environment) and `stderr_empty` (writes nothing:
//! a codec must not write to the node's stderr). Module loading and data imports are refused.
//!
//! Why the bound holds: jaq's interpreter fetches its look-up table through
//! [`HasLut::lut`] on every term it evaluates, so [`Guard`] (this module's run data) counts a
//! step there, and checks how far the stack has grown since the run started (comparing the
//! address of a local with the one taken at the start). Every loop in a jq program is either
//! recursion through terms or a native iterator; the only unbounded native iterator is
//! `range`, replaced by one that counts its elements (`repeat`, `while`, `until`, `recurse`
//! and `limit` are jq definitions, so they go through terms). Past [`MAX_JAQ_STEPS`] or
//! [`MAX_JAQ_STACK_BYTES`] the guard unwinds with `resume_unwind` (which skips the panic
//! hook, so nothing is printed) and [`run`] catches exactly that payload. The unwind only
//! drops the run's own values and iterators; the compiled filter is never mutated by a run.
//! (Under `panic = "abort"` the unwind would abort the process; the workspace keeps Rust's
//! default, `unwind`.)

use std::cell::Cell;
use std::cmp::Ordering;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use jaq_core::box_iter::box_once;
use jaq_core::data::HasLut;
use jaq_core::load::{import, Arena, File, Loader};
use jaq_core::native::{self, v, Fun};
use jaq_core::{Compiler, Ctx, Cv, DataT, Exn, Lut, ValXs, Vars};
use jaq_json::{Map, Val};

use super::{MAX_JAQ_STACK_BYTES, MAX_JAQ_STEPS};

/// The data kind programs run with: [`jaq_json::Val`] values and a [`Guard`].
pub(crate) struct Kind;

impl DataT for Kind {
    type V<'a> = Val;
    type Data<'a> = &'a Guard<'a>;
}

/// A compiled program.
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

/// Compiles `code`, or says why it does not compile.
pub(crate) fn compile(code: &str) -> Result<Filter, String> {
    compile_with_vars(code, &[])
}

/// Compiles `code` with the global variables `vars` (e.g. `$state`) declared; each run binds
/// them, in this order, through [`run_with_vars`].
pub(crate) fn compile_with_vars(code: &str, vars: &[&'static str]) -> Result<Filter, String> {
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
        .with_global_vars(vars.iter().copied())
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

/// The natives programs may call: jaq's, with `range/3`, `env` and `stderr_empty` replaced.
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

/// Why a run stopped.
#[derive(Debug)]
pub(crate) enum RunError<E> {
    /// A jq error (`error(…)`, a type error, `halt`).
    Program(String),
    Steps,
    Stack,
    /// More outputs than allowed.
    Outputs,
    /// The output handler refused an output.
    Stop(E),
}

/// Runs `filter` on `input`, handing each output (with its index) to `each`; at most
/// `max_outputs` outputs. Returns the output count.
pub(crate) fn run<E>(
    filter: &Filter,
    input: Val,
    max_outputs: usize,
    each: impl FnMut(usize, Val) -> Result<(), E>,
) -> Result<usize, RunError<E>> {
    run_with_vars(filter, input, Vec::new(), max_outputs, each)
}

/// [`run`] with the global variables the filter was compiled with bound to `vars`.
pub(crate) fn run_with_vars<E>(
    filter: &Filter,
    input: Val,
    vars: Vec<Val>,
    max_outputs: usize,
    mut each: impl FnMut(usize, Val) -> Result<(), E>,
) -> Result<usize, RunError<E>> {
    let guard = Guard {
        lut: &filter.lut,
        steps: Cell::new(0),
        base: stack_position(),
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let ctx = Ctx::<Kind>::new(&guard, Vars::new(vars));
        let mut count = 0;
        for output in filter.id.run((ctx, input)) {
            let value = output.map_err(|e| RunError::Program(describe(e)))?;
            if count == max_outputs {
                return Err(RunError::Outputs);
            }
            each(count, value).map_err(RunError::Stop)?;
            count += 1;
        }
        Ok(count)
    }));
    match outcome {
        Ok(result) => result,
        Err(payload) => match payload.downcast::<Limit>() {
            Ok(limit) => Err(match *limit {
                Limit::Steps => RunError::Steps,
                Limit::Stack => RunError::Stack,
            }),
            // A real panic: not ours to swallow.
            Err(other) => resume_unwind(other),
        },
    }
}

fn describe(e: Exn<'_, Val>) -> String {
    match e.get_err() {
        // `error("text")` and jaq's own messages carry a string: show it unquoted.
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
