//! Output construction against a list of target fields: INHERIT, ordered SET, the required
//! field check, then WHERE over the finalized output — the order the runtime executes them.

use std::collections::BTreeMap;

use nervix_nspl::ast::{Assignment, Expr, Inherit, InheritFields};
use nervix_nspl::Span;

use super::reads::{check_bool, check_value, context, Position, Reads};
use super::{Field, RouteInputs};
use crate::catalog::CatalogError;
use crate::types::FieldType;

/// The fields a construction builds and how messages name them.
pub(crate) struct Target<'t> {
    /// What the fields belong to: `relay 'orders'`, `output schema 'order_view'`.
    pub owner: String,
    /// Who builds them: `route to 'orders'`, `emitter 'feed'`.
    pub builder: String,
    pub fields: &'t [Field],
    /// Where refusals about the construction as a whole point (the route's target).
    pub anchor: Span,
    /// Every required field must be initialized (the fields are a declared schema); `false`
    /// for a record that is a projection of its input (an emitter without codec or schema).
    pub complete: bool,
}

/// Output fields initialized by a construction, each with its declared type.
pub(crate) type Initialized = BTreeMap<String, FieldType>;

fn find<'f>(fields: &'f [Field], name: &str) -> Option<&'f Field> {
    fields.iter().find(|f| f.name == name)
}

/// Checks INHERIT, SET (in order), required fields and WHERE; returns the initialized output.
/// `where_reads_input` lets WHERE read `input.` too (emitters).
pub(crate) fn construct(
    inputs: &RouteInputs<'_>,
    target: &Target<'_>,
    inherit: Option<&Inherit>,
    set: &[Assignment],
    filter: Option<&Expr>,
    where_reads_input: bool,
) -> Result<Initialized, CatalogError> {
    let mut initialized = Initialized::new();
    if let Some(inherit) = inherit {
        inherit_fields(inputs, target, inherit, &mut initialized)?;
    }
    let ctx = context(inputs, inputs.window);
    for assignment in set {
        let name = &assignment.target;
        let Some(field) = find(target.fields, &name.name) else {
            return Err(CatalogError::new(
                name.span,
                format!("{} has no field '{}' to SET", target.owner, name.name),
            ));
        };
        {
            let reads = Reads::new(
                inputs,
                Position::Set,
                Some((&target.owner, target.fields)),
                &initialized,
            );
            check_value(&reads, &ctx, &assignment.value, field, &target.owner, "SET")?;
        }
        initialized.insert(field.name.clone(), field.ty.clone());
    }
    if target.complete {
        require_all(target, &initialized)?;
    }
    if let Some(filter) = filter {
        let reads = Reads::new(
            inputs,
            Position::Finalized {
                input: where_reads_input,
            },
            Some((&target.owner, target.fields)),
            &initialized,
        );
        check_bool(&reads, inputs, filter, "WHERE")?;
    }
    Ok(initialized)
}

/// Every required (non-OPTIONAL) target field is initialized.
pub(crate) fn require_all(
    target: &Target<'_>,
    initialized: &Initialized,
) -> Result<(), CatalogError> {
    match target
        .fields
        .iter()
        .find(|f| !f.ty.nullable && !initialized.contains_key(&f.name))
    {
        Some(missing) => Err(CatalogError::new(
            target.anchor,
            format!(
                "{} leaves required field '{}' uninitialized",
                target.builder, missing.name
            ),
        )),
        None => Ok(()),
    }
}

/// A type with its nullability, as INHERIT compares them: `I64 OPTIONAL`.
fn shape(ty: &FieldType) -> String {
    if ty.nullable {
        format!("{} OPTIONAL", ty.data_type)
    } else {
        ty.data_type.to_string()
    }
}

fn inherit_fields(
    inputs: &RouteInputs<'_>,
    target: &Target<'_>,
    inherit: &Inherit,
    initialized: &mut Initialized,
) -> Result<(), CatalogError> {
    let Some(input) = inputs.input else {
        return Err(CatalogError::new(
            target.anchor,
            format!("{} has no input row to INHERIT from", inputs.node),
        ));
    };
    let copy = |from: &Field, span: Span, initialized: &mut Initialized| {
        let Some(to) = find(target.fields, &from.name) else {
            return Ok(());
        };
        inherit_one(from, to, inherit.leak_sensitive, &target.owner, span)?;
        initialized.insert(to.name.clone(), to.ty.clone());
        Ok::<(), CatalogError>(())
    };
    match &inherit.fields {
        InheritFields::All { except } => {
            for name in except {
                if find(input, &name.name).is_none() {
                    return Err(CatalogError::new(
                        name.span,
                        format!(
                            "INHERIT ALL EXCEPT names '{}', which is not a field of the input",
                            name.name
                        ),
                    ));
                }
            }
            for field in input {
                if except.iter().any(|e| e.name == field.name) {
                    continue;
                }
                copy(field, target.anchor, initialized)?;
            }
        }
        InheritFields::Only(names) => {
            for name in names {
                let Some(field) = find(input, &name.name) else {
                    return Err(CatalogError::new(
                        name.span,
                        format!(
                            "INHERIT names '{}', which is not a field of the input",
                            name.name
                        ),
                    ));
                };
                if find(target.fields, &name.name).is_none() {
                    return Err(CatalogError::new(
                        name.span,
                        format!(
                            "INHERIT names '{}', but {} has no field '{}'",
                            name.name, target.owner, name.name
                        ),
                    ));
                }
                copy(field, name.span, initialized)?;
            }
        }
    }
    Ok(())
}

/// One inherited field: exact type and nullability; sensitivity may be promoted, and dropped
/// only with LEAK SENSITIVE.
fn inherit_one(
    from: &Field,
    to: &Field,
    leak_sensitive: bool,
    owner: &str,
    span: Span,
) -> Result<(), CatalogError> {
    if from.ty.data_type != to.ty.data_type || from.ty.nullable != to.ty.nullable {
        return Err(CatalogError::new(
            span,
            format!(
                "INHERIT cannot copy '{}': the input declares it {}, but {owner} declares it {}; \
                 INHERIT needs exactly the same type and nullability (exclude it or SET it \
                 explicitly)",
                from.name,
                shape(&from.ty),
                shape(&to.ty)
            ),
        ));
    }
    if from.ty.sensitive && !to.ty.sensitive && !leak_sensitive {
        return Err(CatalogError::new(
            span,
            format!(
                "INHERIT would copy SENSITIVE field '{}' into non-sensitive field '{}' of \
                 {owner}; write INHERIT … LEAK SENSITIVE to allow it, or exclude the field",
                from.name, to.name
            ),
        ));
    }
    Ok(())
}
