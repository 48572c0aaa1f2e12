//! Folding ALTER SCHEMA and ALTER CLIENT into the stored CREATE statement.
//!
//! Operations apply one after another in written order, each to the result of the previous
//! one, so `ADD FIELD f T, DROP FIELD f` is a no-op and `RENAME FIELD a TO b, ALTER FIELD b …`
//! works. Each refusal names the field as the operation at that point sees the schema.
//! ADD FIELD appends; RENAME keeps the field's position; ALTER FIELD keeps its position and
//! its SENSITIVE flag. `SET OPTIONAL` on an OPTIONAL field and `DROP OPTIONAL` on a required
//! one change nothing and are accepted, as PostgreSQL's `DROP NOT NULL` / `SET NOT NULL` are.
//! A field an operation touches takes the span of its name in the ALTER, so a refusal of the
//! folded schema points at the operation that caused it.
//!
//! Only the stored definition is needed here; what the new schema or client means for the
//! graph — a codec that can no longer produce a required field, a branch whose key field
//! became OPTIONAL, a route that no longer assigns a required field, a CONFIG template whose
//! resource is no longer mounted — is validation's, which the planner runs on the folded
//! entity and then on every dependent.

use nervix_nspl::ast::catalog::{
    AlterClient, AlterSchema, CatalogStmt, ClientOperation, CreateSchema, SchemaOperation,
};
use nervix_nspl::ast::Ident;
use nervix_nspl::Statement;

use crate::catalog::{CatalogError, Entity};

/// The schema `alteration` makes of the stored one.
pub fn fold_schema(stored: &Entity, alteration: &AlterSchema) -> Result<Statement, CatalogError> {
    let Statement::Catalog(CatalogStmt::CreateSchema(schema)) = &stored.definition else {
        unreachable!("the planner folds ALTER SCHEMA into a schema entity");
    };
    let mut schema = schema.clone();
    for operation in &alteration.operations {
        apply_schema_operation(&mut schema, operation)?;
    }
    Ok(Statement::Catalog(CatalogStmt::CreateSchema(schema)))
}

fn apply_schema_operation(
    schema: &mut CreateSchema,
    operation: &SchemaOperation,
) -> Result<(), CatalogError> {
    match operation {
        SchemaOperation::AddField(field) => {
            absent(schema, &field.name)?;
            schema.fields.push(field.clone());
        }
        SchemaOperation::DropField(name) => {
            let index = position(schema, name)?;
            if schema.fields.len() == 1 {
                return Err(CatalogError::new(
                    name.span,
                    format!(
                        "cannot drop field '{name}': it is the last field of schema '{}', and a \
                         schema has at least one field",
                        schema.name
                    ),
                ));
            }
            schema.fields.remove(index);
        }
        SchemaOperation::RenameField { from, to } => {
            let index = position(schema, from)?;
            absent(schema, to)?;
            schema.fields[index].name = to.clone();
        }
        SchemaOperation::SetType { field, ty } => {
            let index = position(schema, field)?;
            schema.fields[index].ty = ty.clone();
            schema.fields[index].name.span = field.span;
        }
        SchemaOperation::SetOptional(field) => {
            let index = position(schema, field)?;
            schema.fields[index].optional = true;
            schema.fields[index].name.span = field.span;
        }
        SchemaOperation::DropOptional(field) => {
            let index = position(schema, field)?;
            schema.fields[index].optional = false;
            schema.fields[index].name.span = field.span;
        }
    }
    Ok(())
}

/// The index of field `name`, or `schema 'order_in' has no field 'note'`.
fn position(schema: &CreateSchema, name: &Ident) -> Result<usize, CatalogError> {
    schema
        .fields
        .iter()
        .position(|f| f.name.name == name.name)
        .ok_or_else(|| {
            CatalogError::new(
                name.span,
                format!("schema '{}' has no field '{name}'", schema.name),
            )
        })
}

/// Refuses a name the schema already has: `schema 'order_in' already has a field 'region'`.
fn absent(schema: &CreateSchema, name: &Ident) -> Result<(), CatalogError> {
    if schema.fields.iter().any(|f| f.name.name == name.name) {
        return Err(CatalogError::new(
            name.span,
            format!("schema '{}' already has a field '{name}'", schema.name),
        ));
    }
    Ok(())
}

/// The client `alteration` makes of the stored one: SET MOUNT and SET CONFIG replace the
/// whole list or map, SET POOL SIZE the pool bound (REDIS and POSTGRES clients only).
pub fn fold_client(stored: &Entity, alteration: &AlterClient) -> Result<Statement, CatalogError> {
    let Statement::Catalog(CatalogStmt::CreateClient(client)) = &stored.definition else {
        unreachable!("the planner folds ALTER CLIENT into a client entity");
    };
    let mut client = client.clone();
    for operation in &alteration.operations {
        match operation {
            ClientOperation::SetMount(mounts) => client.mounts = mounts.clone(),
            ClientOperation::SetPoolSize(size) => {
                if !client.client_type.has_pool() {
                    return Err(CatalogError::new(
                        alteration.name.span,
                        format!(
                            "POOL SIZE is only for TYPE REDIS and TYPE POSTGRES clients, but \
                             client '{}' is TYPE {}",
                            client.name,
                            client.client_type.keyword()
                        ),
                    ));
                }
                client.pool_size = Some(*size);
            }
            ClientOperation::SetConfig(config) => client.config = config.clone(),
        }
    }
    Ok(Statement::Catalog(CatalogStmt::CreateClient(client)))
}
