//! The clauses only one kind has: deduplication keys, ordering keys, window extents and
//! sketch bounds, model and module resources, tensor maps, and the positive durations and
//! limits the parser already enforces (re-checked because ALTER builds definitions too).

use std::collections::BTreeSet;

use nervix_nspl::ast::catalog::CreateBranch;
use nervix_nspl::ast::processor::{ResourceFile, Tensor, TensorInput, WindowExtent};
use nervix_nspl::ast::{ByteSize, Duration, Expr, ExprKind, Ident, ResourceVersion, Route};
use nervix_nspl::render::{fmt_duration, fmt_expr, fmt_type};
use nervix_nspl::Span;

use super::model::{find_in, NodeReads};
use crate::catalog::{CatalogError, DomainScope};
use crate::types::{DataType, FieldType};
use crate::validate::route::Field;

/// Refuses a zero duration or limit (`MAX TIME`, `EACH`, `MAX FUEL`, `MAX MEMORY`).
pub(super) fn check_positive(value: u64, what: &str, span: Span) -> Result<(), CatalogError> {
    if value == 0 {
        return Err(CatalogError::new(span, format!("{what} must be positive")));
    }
    Ok(())
}

pub(super) fn check_max_time(max_time: Duration, span: Span) -> Result<(), CatalogError> {
    check_positive(max_time.nanos, "MAX TIME", span)
}

/// `DEDUPLICATE ON <expr>, …`: each key reads the input and may have any type.
pub(super) fn check_deduplicate_on(
    keys: &[Expr],
    reads: &NodeReads<'_>,
) -> Result<(), CatalogError> {
    for key in keys {
        reads.check_value(key, "DEDUPLICATE ON")?;
    }
    Ok(())
}

/// `BY <expr>, …`: each ordering key reads the input and has an orderable type.
pub(super) fn check_order_by(keys: &[Expr], reads: &NodeReads<'_>) -> Result<(), CatalogError> {
    for key in keys {
        let typed = reads.check_value(key, "BY")?;
        if !typed.ty.data_type.is_orderable() {
            return Err(CatalogError::new(
                key.span,
                format!(
                    "BY: `{}` is {}, which cannot be ordered; BY takes numeric, STRING or \
                     DATETIME keys",
                    fmt_expr(key),
                    typed.ty.data_type
                ),
            ));
        }
    }
    Ok(())
}

fn fmt_extent(extent: WindowExtent) -> String {
    match extent {
        WindowExtent::Duration(d) => format!("{} DURATION", fmt_duration(d)),
        WindowExtent::Rows(n) => format!("{n} ROWS"),
    }
}

fn extent_amount(extent: WindowExtent) -> u64 {
    match extent {
        WindowExtent::Duration(d) => d.nanos,
        WindowExtent::Rows(n) => n,
    }
}

fn extent_unit(extent: WindowExtent) -> &'static str {
    match extent {
        WindowExtent::Duration(_) => "DURATION",
        WindowExtent::Rows(_) => "ROWS",
    }
}

/// The aggregates backed by approximate sketches ("Approximate Sketches").
const SKETCHES: [&str; 4] = [
    "approx_count_distinct",
    "approx_quantile",
    "approx_top_k",
    "percentile_linear_histogram",
];

/// The first sketch aggregate a window route's SET calls: its name span and spec spelling.
fn first_sketch(routes: &[Route]) -> Option<(Span, String)> {
    routes
        .iter()
        .flat_map(|route| route.set.iter())
        .find_map(|assignment| {
            find_in(&assignment.value, |node| match &node.kind {
                ExprKind::Call { name, .. }
                    if SKETCHES.contains(&name.name.to_ascii_lowercase().as_str()) =>
                {
                    Some((name.span, name.name.to_ascii_uppercase()))
                }
                _ => None,
            })
        })
}

/// A window's extents and sketch bounds.
pub(super) struct WindowShape<'a> {
    pub node: &'a str,
    pub name: &'a Ident,
    pub width: WindowExtent,
    pub step: WindowExtent,
    pub max_state_size: Option<ByteSize>,
    /// The node's branch when branched.
    pub branch: Option<(&'a Ident, &'a CreateBranch)>,
}

/// WIDTH and STEP count in one unit, are positive, and STEP is at most WIDTH; a sketch
/// aggregate needs MAX STATE SIZE, duration WIDTH and STEP, and, when branched, a branch
/// bounded by MAX INSTANCES … EVICT LRU.
pub(super) fn check_window(shape: &WindowShape<'_>, routes: &[Route]) -> Result<(), CatalogError> {
    let span = shape.name.span;
    if extent_unit(shape.width) != extent_unit(shape.step) {
        return Err(CatalogError::new(
            span,
            format!(
                "STEP must be {} like WIDTH: a window counts both in DURATION or both in ROWS",
                extent_unit(shape.width)
            ),
        ));
    }
    check_positive(extent_amount(shape.width), "WIDTH", span)?;
    check_positive(extent_amount(shape.step), "STEP", span)?;
    if extent_amount(shape.step) > extent_amount(shape.width) {
        return Err(CatalogError::new(
            span,
            format!(
                "STEP {} is larger than WIDTH {}: a window steps by at most its width, so no \
                 record falls between two windows",
                fmt_extent(shape.step),
                fmt_extent(shape.width)
            ),
        ));
    }
    if let Some(size) = shape.max_state_size {
        check_positive(size.bytes, "MAX STATE SIZE", span)?;
    }
    let Some((call_span, sketch)) = first_sketch(routes) else {
        return Ok(());
    };
    let node = shape.node;
    if shape.max_state_size.is_none() {
        return Err(CatalogError::new(
            call_span,
            format!(
                "{sketch} is a sketch aggregate, which requires {node} to declare MAX STATE SIZE"
            ),
        ));
    }
    if extent_unit(shape.width) != "DURATION" {
        return Err(CatalogError::new(
            call_span,
            format!(
                "{sketch} is a sketch aggregate, which requires a duration WIDTH and STEP, but \
                 {node} counts {}",
                fmt_extent(shape.width)
            ),
        ));
    }
    if let Some((name, branch)) = shape.branch {
        if branch.max_instances.is_none() {
            return Err(CatalogError::new(
                call_span,
                format!(
                    "{sketch} is a sketch aggregate, which requires branch '{}' of {node} to be \
                     bounded by MAX INSTANCES ... EVICT LRU",
                    name.name
                ),
            ));
        }
    }
    Ok(())
}

/// `USING RESOURCE <r> VERSION <n> | LATEST FILE '<f>'`: the resource exists, has that version
/// (LATEST: any version), and the version holds the file.
pub(super) fn check_resource_file(
    scope: &DomainScope<'_>,
    model: &ResourceFile,
) -> Result<(), CatalogError> {
    let name = &model.resource;
    let resource = scope.resource(name)?;
    let version = match model.version {
        ResourceVersion::Number(number) => resource
            .versions
            .iter()
            .find(|v| v.number == number)
            .ok_or_else(|| {
                CatalogError::new(
                    name.span,
                    format!("resource '{}' has no version {number}", name.name),
                )
            })?,
        ResourceVersion::Latest => resource.versions.last().ok_or_else(|| {
            CatalogError::new(
                name.span,
                format!(
                    "resource '{}' has no versions yet: upload one before using VERSION LATEST",
                    name.name
                ),
            )
        })?,
    };
    if !version.files.iter().any(|(path, _)| *path == model.file) {
        return Err(CatalogError::new(
            name.span,
            format!(
                "resource '{}' version {} has no file '{}'",
                name.name, version.number, model.file
            ),
        ));
    }
    Ok(())
}

/// `DENSE TENSOR<F32>[1, 32]`.
fn fmt_tensor(tensor: &Tensor) -> String {
    let dims: Vec<String> = tensor.dims.iter().map(u64::to_string).collect();
    format!(
        "DENSE TENSOR<{}>[{}]",
        fmt_type(&tensor.element),
        dims.join(", ")
    )
}

/// How many elements the tensor holds, if that fits a `u64`.
fn element_count(tensor: &Tensor) -> Option<u64> {
    tensor
        .dims
        .iter()
        .try_fold(1u64, |count, dim| count.checked_mul(*dim))
}

/// The dimensions as an ARRAY type writes them, if each fits.
fn array_dims(dims: &[u64]) -> Option<Vec<u32>> {
    dims.iter().map(|d| u32::try_from(*d).ok()).collect()
}

/// The value types one tensor input accepts: the element type itself when the tensor holds
/// one element; `ARRAY<T, dims…>` with the tensor's dimensions; the flat `ARRAY<T, n>` of its
/// `n` elements (row-major); and `VEC<T>`, whose length is checked per message.
fn accepted_inputs(tensor: &Tensor) -> Vec<DataType> {
    let element = DataType::from_type_name(&tensor.element);
    let mut accepted = Vec::new();
    let count = element_count(tensor);
    if count == Some(1) {
        accepted.push(element.clone());
    }
    if let Some(dims) = array_dims(&tensor.dims) {
        accepted.push(DataType::Array(Box::new(element.clone()), dims));
    }
    if tensor.dims.len() > 1 {
        if let Some(flat) = count.and_then(|n| u32::try_from(n).ok()) {
            accepted.push(DataType::Array(Box::new(element.clone()), vec![flat]));
        }
    }
    accepted.push(DataType::Vec(Box::new(element)));
    accepted
}

fn join_or(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// `INPUTS { "name" DENSE TENSOR<T>[dims] = <expr>, … }`: names are unique and each value reads
/// the input and has one of the tensor's accepted types, never null.
pub(super) fn check_tensor_inputs(
    inputs: &[TensorInput],
    reads: &NodeReads<'_>,
) -> Result<(), CatalogError> {
    let mut names = BTreeSet::new();
    for input in inputs {
        let tensor = &input.tensor;
        if !names.insert(tensor.name.as_str()) {
            return Err(CatalogError::new(
                input.value.span,
                format!("tensor '{}' appears twice in INPUTS", tensor.name),
            ));
        }
        let place = format!("INPUTS \"{}\"", tensor.name);
        let accepted = accepted_inputs(tensor);
        let mut typed = reads.check_value(&input.value, &place)?;
        if !accepted.contains(&typed.ty.data_type) && element_count(tensor) == Some(1) {
            // A literal adapts to the element type (`"seed" … = 42` into TENSOR<I32>[1]).
            let element = DataType::from_type_name(&tensor.element);
            if let Ok(adapted) = reads.check_with(&input.value, Some(&element)) {
                typed = adapted;
            }
        }
        if !accepted.contains(&typed.ty.data_type) {
            let names: Vec<String> = accepted.iter().map(DataType::to_string).collect();
            return Err(CatalogError::new(
                input.value.span,
                format!(
                    "{place}: {} takes {}, found {}",
                    fmt_tensor(tensor),
                    join_or(&names),
                    typed.ty.data_type
                ),
            ));
        }
        if typed.ty.nullable {
            return Err(CatalogError::new(
                input.value.span,
                format!(
                    "{place}: `{}` can be null, but a tensor holds no nulls; use coalesce(…) to \
                     supply a value",
                    fmt_expr(&input.value)
                ),
            ));
        }
    }
    Ok(())
}

/// `OUTPUT SCHEMA { "name" DENSE TENSOR<T>[dims], … }` as the immutable values routes read by
/// bare name: a one-element tensor is its element type `T`, any other `ARRAY<T, dims…>`;
/// never null, since routes run only on model output.
pub(super) fn model_outputs(
    outputs: &[Tensor],
    name_span: Span,
) -> Result<Vec<Field>, CatalogError> {
    let mut fields: Vec<Field> = Vec::with_capacity(outputs.len());
    for tensor in outputs {
        if fields.iter().any(|f| f.name == tensor.name) {
            return Err(CatalogError::new(
                name_span,
                format!("tensor '{}' appears twice in OUTPUT SCHEMA", tensor.name),
            ));
        }
        let element = DataType::from_type_name(&tensor.element);
        let data_type = if element_count(tensor) == Some(1) {
            element
        } else {
            let dims = array_dims(&tensor.dims).ok_or_else(|| {
                CatalogError::new(
                    name_span,
                    format!(
                        "OUTPUT SCHEMA \"{}\": {} has a dimension above {}",
                        tensor.name,
                        fmt_tensor(tensor),
                        u32::MAX
                    ),
                )
            })?;
            DataType::Array(Box::new(element), dims)
        };
        fields.push(Field {
            name: tensor.name.clone(),
            ty: FieldType::required(data_type),
        });
    }
    Ok(fields)
}
