//! What every WIRE codec plan (JSON, CBOR, AVRO) checks alike while it resolves a codec into
//! its TO SCHEMA fields, by the decode table of `validate::catalog_entities::codec`: that the
//! codec reads the wire schema given, that each ENCODE clause names a DATETIME schema field fed
//! by a wire string, and which wire field (`WireSlot`) feeds each schema field. The wire types
//! and each field's decode rule stay with each plan. A refusal (`PlanRefusal`) becomes the
//! variant of the same name in the plan's `CodecError`, which carries the same message
//! (`from_plan_refusal!`).

use nervix_nspl::ast::catalog::{CreateCodec, CreateWireSchema, FieldEncoding, WireField};
use nervix_nspl::ast::Ident;

use crate::types::DataType;
use crate::validate::route::Field;

/// One declared wire field of a plan: its name, wire type `T` and optionality as declared, how
/// its values become column values (`R`, the format's rule) and the schema column it feeds.
#[derive(Debug, Clone)]
pub(crate) struct WireSlot<T, R> {
    pub name: String,
    pub ty: T,
    pub optional: bool,
    pub rule: R,
    /// The schema column it feeds.
    pub column: Option<usize>,
}

impl<T: Clone, R> WireSlot<T, R> {
    /// Declared wire field `field`, feeding no column yet: `rule` is the format's rule for
    /// values that are checked and dropped.
    pub fn declared(field: &WireField<T>, rule: R) -> WireSlot<T, R> {
        WireSlot {
            name: field.name.clone(),
            ty: field.ty.clone(),
            optional: field.optional,
            rule,
            column: None,
        }
    }
}

/// Why a codec's plan cannot be built, in a check every WIRE format makes.
#[derive(Debug)]
pub(crate) enum PlanRefusal {
    WrongWireSchema {
        codec: String,
        expected: String,
        given: String,
    },
    BadEncoding {
        field: String,
    },
    DuplicateField {
        field: String,
    },
    Unproducible {
        field: String,
    },
}

/// Implements `From<PlanRefusal>` for a WIRE codec plan's `CodecError`.
macro_rules! from_plan_refusal {
    ($error:ident) => {
        $crate::codec::from_shared_variants!($crate::codec::wire_plan::PlanRefusal => $error:
            WrongWireSchema { codec, expected, given }, BadEncoding { field },
            DuplicateField { field }, Unproducible { field });
    };
}
pub(crate) use from_plan_refusal;

/// Refuses `codec` unless the wire schema it reads (`wire_schema`) is `wire`.
pub(crate) fn check_wire_schema(
    codec: &CreateCodec,
    wire_schema: &Ident,
    wire: &CreateWireSchema,
) -> Result<(), PlanRefusal> {
    if wire_schema.name == wire.name.name {
        return Ok(());
    }
    Err(PlanRefusal::WrongWireSchema {
        codec: codec.name.name.clone(),
        expected: wire_schema.name.clone(),
        given: wire.name.name.clone(),
    })
}

/// Resolves `target`, the codec's TO SCHEMA fields in order, into each column's type and the
/// wire field feeding it: the one of `slots` (the wire schema's fields, each name once) of the
/// field's exact name, or none for a nullable field no wire field names. A fed field's slot
/// gets its column and the rule `decode_rule(slot, field, encoded)` picks (`encoded`: an
/// ENCODE clause names the field), which may refuse it.
///
/// Refused first: an ENCODE clause naming no DATETIME field fed by a wire field of type
/// `string`; then, field by field: a name given twice, a required field no required wire
/// field feeds, and what `decode_rule` refuses.
pub(crate) fn resolve_columns<T: PartialEq, R, E: From<PlanRefusal>>(
    target: &[Field],
    encodings: &[FieldEncoding],
    slots: &mut [WireSlot<T, R>],
    string: T,
    decode_rule: impl Fn(&WireSlot<T, R>, &Field, bool) -> Result<R, E>,
) -> Result<Vec<(DataType, Option<usize>)>, E> {
    for encoding in encodings {
        let name = &encoding.field.name;
        let fed_datetime = target
            .iter()
            .any(|f| f.name == *name && f.ty.data_type == DataType::Datetime)
            && slots.iter().any(|s| s.name == *name && s.ty == string);
        if !fed_datetime {
            return Err(PlanRefusal::BadEncoding {
                field: name.clone(),
            }
            .into());
        }
    }
    let mut columns = Vec::with_capacity(target.len());
    for (c, field) in target.iter().enumerate() {
        if target[..c].iter().any(|f| f.name == field.name) {
            return Err(PlanRefusal::DuplicateField {
                field: field.name.clone(),
            }
            .into());
        }
        let ty = &field.ty.data_type;
        let unproducible = || PlanRefusal::Unproducible {
            field: field.name.clone(),
        };
        let Some(w) = slots.iter().position(|s| s.name == field.name) else {
            if !field.ty.nullable {
                return Err(unproducible().into());
            }
            columns.push((ty.clone(), None));
            continue;
        };
        let slot = &mut slots[w];
        if slot.optional && !field.ty.nullable {
            return Err(unproducible().into());
        }
        let encoded = encodings.iter().any(|e| e.field.name == field.name);
        slot.rule = decode_rule(slot, field, encoded)?;
        slot.column = Some(c);
        columns.push((ty.clone(), Some(w)));
    }
    Ok(columns)
}
