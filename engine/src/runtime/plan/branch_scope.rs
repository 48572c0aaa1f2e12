//! `branch.<field>` outside window routes: a branch-preserving processor's filters, node work
//! (deduplication keys, reordering BY) and routes read the concrete branch's key.
//!
//! Every row of a frame belongs to one concrete branch (frames are per branch), so a key field
//! is one value broadcast over the frame. The plan adds one input column per key field the
//! processor reads, named `branch.<field>` — NSPL identifiers hold no dot, so no relay field
//! has such a name — after the relay's own columns; the shard decodes the frame's key and
//! appends those columns before the filters run (`Graph::process`). Window routes keep their
//! own path (`window::read_results`: the key is read once per emitted record).

use arrow_schema::FieldRef;

use super::{PlanError, TypedIndex};
use crate::catalog::Entity;
use crate::types::{FieldType, TypedKind};
use crate::validate::route::Field;

/// The input column name `branch.<field>` is read through.
pub(crate) fn branch_field_name(field: &str) -> String {
    format!("branch.{field}")
}

/// What a processor reads of its branch key: the key fields' positions, in the order their
/// columns follow the input's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchScope {
    pub branch: super::BranchId,
    pub key_positions: Vec<usize>,
}

/// The key fields `entity`'s expressions read (`branch.<field>`), first read first, with
/// their types; empty when it reads none.
fn reads(entity: &Entity) -> Vec<(String, FieldType)> {
    let mut found: Vec<(String, FieldType)> = Vec::new();
    for tree in &entity.typed {
        let mut stack = vec![tree];
        while let Some(node) = stack.pop() {
            match &node.kind {
                TypedKind::Field(path) if path.len() == 2 && path[0] == "branch" => {
                    if !found.iter().any(|(name, _)| *name == path[1]) {
                        found.push((path[1].clone(), node.ty.clone()));
                    }
                }
                _ => node.push_children(&mut stack),
            }
        }
    }
    found
}

/// Extends `input` with a column per key field `entity` reads, and returns how the shard fills
/// them; `None` (and `input` unchanged) when it reads none or its input is unbranched.
pub(super) fn extend(
    typed: &TypedIndex<'_>,
    entity: &Entity,
    branch: Option<(super::BranchId, &[FieldRef])>,
    input: &mut Vec<Field>,
) -> Result<Option<BranchScope>, PlanError> {
    let read = reads(entity);
    let Some((branch, key_fields)) = branch.filter(|_| !read.is_empty()) else {
        return Ok(None);
    };
    let key_positions = key_columns(read, key_fields, typed.entity(), branch_field_name, input)?;
    Ok(Some(BranchScope {
        branch,
        key_positions,
    }))
}

/// The branch key positions of the fields `reads` names, in order, each also appended to
/// `columns` as a typed column named by `column_name`; a field not in `key_fields` is
/// refused as missing from `owner`'s branch key.
pub(super) fn key_columns(
    reads: Vec<(String, FieldType)>,
    key_fields: &[FieldRef],
    owner: &str,
    column_name: fn(&str) -> String,
    columns: &mut Vec<Field>,
) -> Result<Vec<usize>, PlanError> {
    let mut positions = Vec::with_capacity(reads.len());
    for (name, ty) in reads {
        let position = key_fields
            .iter()
            .position(|key| *key.name() == name)
            .ok_or_else(|| PlanError::Missing {
                entity: owner.to_string(),
                what: format!("branch key field '{name}'"),
            })?;
        positions.push(position);
        columns.push(Field {
            name: column_name(&name),
            ty,
        });
    }
    Ok(positions)
}
