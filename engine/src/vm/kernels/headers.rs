//! `read_header(name)` and `read_headers(name)`: per-row lookups in the evaluation's source
//! envelope (spec "Header Context").
//!
//! Correct because each output row `i` reads exactly the payload `payloads[i]` of the
//! envelope view, whose rows are this evaluation's rows (the runtime filters the view with the
//! batch), with the name argument of row `i` (a scalar name is row 0 for every row). A null
//! name reads as an absent header: NULL for `read_header`, an empty list for `read_headers`
//! (its result is a required `LIST<STRING>`). Without an envelope, or with one of another
//! length, every row fails with a message saying so — never a panic, never a wrong row.
//!
//! Allocation: one Arrow builder sized for the rows; when the name is a scalar, consecutive
//! rows of the same payload (the usual case: a payload's rows are adjacent) reuse the previous
//! row's lookup instead of scanning the payload's headers again.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};

use super::Strs;
use crate::types::Function;
use crate::vm::compile::Node;
use crate::vm::envelope::EnvelopeView;
use crate::vm::eval::{Col, Out};

/// Bytes reserved per output row for header values before the builder grows.
const VALUE_BYTES_PER_ROW: usize = 16;

/// Evaluates `function` (ReadHeader or ReadHeaders) over `n` rows with its evaluated name
/// argument.
pub(crate) fn call(
    node: &Node,
    function: Function,
    cols: &[Col],
    envelope: Option<&EnvelopeView>,
    n: usize,
) -> Out {
    let Some(envelope) = envelope else {
        return Out::fail(
            node,
            format!(
                "{} needs a header context: this source captured no transport headers",
                function.name()
            ),
        );
    };
    if envelope.num_rows() != n {
        return Out::fail(
            node,
            format!(
                "internal error: the header context has {} rows, the batch {n}",
                envelope.num_rows()
            ),
        );
    }
    let Some(name) = cols.first() else {
        return Out::fail(node, "missing argument");
    };
    let names = Strs::new(name);
    let scalar_name = name.is_scalar();
    if function == Function::ReadHeaders {
        read_all(envelope, &names, scalar_name, n)
    } else {
        read_first(envelope, &names, scalar_name, n)
    }
}

fn read_first(envelope: &EnvelopeView, names: &Strs<'_>, scalar_name: bool, n: usize) -> Out {
    let table = envelope.headers();
    let payloads = envelope.payloads();
    let mut builder = StringBuilder::with_capacity(n, n.saturating_mul(VALUE_BYTES_PER_ROW));
    let mut last: Option<(u32, Option<&str>)> = None;
    for row in 0..n {
        let payload = payloads.value(row);
        let value = match last {
            Some((p, value)) if scalar_name && p == payload => value,
            _ => {
                let value = names.get(row).and_then(|name| table.first(payload, name));
                last = Some((payload, value));
                value
            }
        };
        builder.append_option(value);
    }
    Out::ok(Col::Array(Arc::new(builder.finish())))
}

fn read_all(envelope: &EnvelopeView, names: &Strs<'_>, scalar_name: bool, n: usize) -> Out {
    let table = envelope.headers();
    let payloads = envelope.payloads();
    let values = StringBuilder::with_capacity(n, n.saturating_mul(VALUE_BYTES_PER_ROW));
    let mut builder = ListBuilder::with_capacity(values, n);
    // The previous row's payload and values, repeated for the same payload under a scalar name.
    let mut last: Option<u32> = None;
    let mut scratch: Vec<&str> = Vec::new();
    for row in 0..n {
        let payload = payloads.value(row);
        if !(scalar_name && last == Some(payload)) {
            scratch.clear();
            if let Some(name) = names.get(row) {
                scratch.extend(table.values(payload, name));
            }
            last = Some(payload);
        }
        for value in &scratch {
            builder.values().append_value(value);
        }
        builder.append(true);
    }
    Out::ok(Col::Array(Arc::new(builder.finish())))
}
